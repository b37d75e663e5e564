package pipeline

import (
	"context"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// The keys' models a one-partition model topic left on partition 0 (detect.key_by: key).
//
// After partitions were added to a one-partition model topic (the layout of one model partition
// per input partition's keys), the keys' models written before lie on partition 0, where the
// global model lies: every scorer's start-up read of the global model reads through them. A
// builder's start-up read of partition 0 (the follower's: the global model's versions) notes the
// keys whose newest message there is a model, and the builder tombstones them at its start;
// compaction then removes both.
//
// Bounded: at most keys.max_keys keys are held (the builder's own bound on the keys it keeps;
// before 2026-11-28 22:30Z every key on partition 0, as many as a writer to the topic put there, and
// on a topic of one partition, where nothing is tombstoned, every key's name on the topic for
// nothing: TestPartition0KeysBounded). Past the bound the read goes on noting the keys it holds
// (a later tombstone removes one) and where the first key it could not hold lay; once the keys
// held are tombstoned, partition 0 is read again from there, and so on until every key has its
// tombstone: every key of a model message below that offset was held, so each pass covers the
// keys of the next offsets, at the cost of a read of partition 0 from there a pass, each pass
// logged (warn) with the keys held and the offset read on from.
type partition0Keys struct {
	// track: the topic has more than one partition (else its keys' models lie on partition 0
	// for good: none noted).
	track bool
	max   int // keys.max_keys
	keys  map[string]bool
	// from: the messages below it are not noted (an earlier pass covered them); over: the
	// offset of the first key model message of a key not held for the bound (-1: none), and
	// left how many such messages were read.
	from, over int64
	left       int
	last       int64 // the last offset noted (a read from the start again forgets what it noted)
	// held, if set, hears the keys held after each message noted (tests).
	held func(n int)
}

func newPartition0Keys(max int) *partition0Keys {
	return &partition0Keys{max: max, keys: map[string]bool{}, over: -1, last: -1}
}

// note takes a key model message of partition 0.
func (k *partition0Keys) note(msg kafka.Message) {
	if !k.track || msg.Offset < k.from {
		return
	}
	if msg.Offset <= k.last { // (the follower's start-up read started again: reset)
		clear(k.keys)
		k.over, k.left = -1, 0
	}
	k.last = msg.Offset
	key := string(msg.Key)
	switch {
	case msg.Value == nil:
		delete(k.keys, key)
	case k.keys[key]:
	case len(k.keys) >= k.max:
		if k.over < 0 {
			k.over = msg.Offset
		}
		k.left++
	default:
		k.keys[key] = true
	}
	if k.held != nil {
		k.held(len(k.keys))
	}
}

// keyVersionFloor, for a builder, makes the follower note the highest key model version on the
// topic's partition 0 (its first publication's version is above it) and the keys whose newest
// message there is a model (on0: a one-partition layout's keys).
func keyVersionFloor(highest *uint64, on0 *partition0Keys) func(kafka.Message) {
	return func(msg kafka.Message) {
		if v := keyModelVersion(msg); !versionAhead(v, time.Now()) { // (refused: modelversion.go)
			*highest = max(*highest, v)
		}
		on0.note(msg)
	}
}

// tombstonePartition0 writes, on a model topic of several partitions, a tombstone on partition 0
// for each key model message left there by a one-partition layout (partitions added since), of
// version version: the keys' models now lie on the other partitions, and compaction then
// removes the old ones, which every scorer's start-up read of the global model would otherwise
// read on. Past keys.max_keys keys it reads partition 0 again from where the first key not held
// lay (partition0Keys). A failure is logged (they are passed over by every reader; a later
// start tries again).
func (p *keyPublisher) tombstonePartition0(ctx context.Context, dialer *kafka.Dialer, on0 *partition0Keys, version uint64) {
	v := []byte(strconv.FormatUint(version, 10))
	for pass := 1; ; pass++ {
		if len(on0.keys) > 0 {
			msgs := make([]kafka.Message, 0, len(on0.keys))
			for k := range on0.keys { // partition -1: partition 0 (keyModelPartition)
				msgs = append(msgs, kafka.Message{Key: []byte(k), Headers: []kafka.Header{{Key: headerKeyModelVersion, Value: v},
					{Key: headerKeyPartition, Value: []byte("-1")}}})
			}
			if err := p.w.WriteMessages(ctx, msgs...); err != nil {
				p.log.Warn().Err(err).Int("keys", len(msgs)).Msg("keys' models left on partition 0 by a one-partition model topic not tombstoned; a later start tries again")
				return
			}
			p.log.Info().Int("keys", len(msgs)).Int("pass", pass).Msg("keys' models left on partition 0 by a one-partition model topic tombstoned (the keys' models are on the other partitions now)")
		}
		if on0.over < 0 {
			return
		}
		p.log.Warn().Int("keys_held", len(on0.keys)).Int("keys_max", on0.max).Int("messages_not_held", on0.left).Int64("offset", on0.over).Int("pass", pass).
			Msg("more keys' models left on partition 0 than detect.keys.max_keys: partition 0 is read again from the offset of the first key not held, for the others")
		next := newPartition0Keys(on0.max)
		next.track, next.from, next.held = true, on0.over, on0.held
		if err := p.readPartition0(ctx, dialer, next); err != nil {
			if ctx.Err() == nil {
				p.log.Warn().Err(err).Int64("offset", next.from).Msg("keys' models left on partition 0: reading it again failed; a later start tries again")
			}
			return
		}
		on0 = next
	}
}

// readPartition0 reads the model topic's partition 0 from on0.from to its end, noting its key
// model messages in on0.
func (p *keyPublisher) readPartition0(ctx context.Context, dialer *kafka.Dialer, on0 *partition0Keys) error {
	conn, err := dialPartition(ctx, p.cfg, dialer, 0)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	first, end, err := readOffsets(ctx, conn, conn.RemoteAddr().String())
	if err != nil {
		return err
	}
	err = readRange(ctx, conn, max(first, on0.from), end, max(p.cfg.maxMessageBytes*2, staleFetchBytes), func(msg kafka.Message) {
		if isKeyModel(msg) {
			on0.note(msg)
		}
	})
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return err
}
