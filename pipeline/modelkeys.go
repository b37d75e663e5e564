package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/stages/detect"
)

// The keys' models on the model topic (detect.key_by: key with run.role builder/scorer; issue 21
// item 3; docs/DESIGN.md "Models per key").
//
// Each key's model is one message, keyed "outlierd-key/<key>", its value the key's model sealed
// (detect.EncodeKeyModel: format version, features and keys' settings, key, version, the model;
// SHA-256), header outlierd-key-model-version. This is the changelog of Kafka Streams: the topic
// is compacted, so Kafka keeps the newest message of each key, and a key's model is complete in
// its one message: a publication cut short (a builder killed) has written some keys' new
// models and not the others', and every key still has its last complete model on the topic.
// An evicted key (least recently seen at the builder) gets a tombstone: scorers drop its model
// and compaction removes it, so the topic holds only the builder's live keys. Each key's message
// is on the model topic partition of its input partition, and a scorer reads and follows only
// those of its input partitions, from its first assignment on (keyfollow.go).
//
// Granularity: a builder rebuilds a warm key every keys.rebuild_records of its records
// (keys.window/4 by default), so a key rebuilt many times between two publications is
// published once, with its newest model: the
// detect goroutine hands the keys whose model changed to the publisher after each batch
// (detect.Stage.TakeKeyModels, newest per key), and the publisher writes what is pending at most
// once per keyPublishEvery, all of it in one WriteMessages (kafka-go batches them into produce
// requests of up to max_message_bytes). So the topic's write rate is bounded by the keys
// rebuilt per keyPublishEvery, not by the builds; a message per key (not per batch of keys) is
// what lets compaction keep each key's newest model alone, whatever happened to the others.
//
// Versions: a publication's version is above the previous one's, above every key model's
// version on the topic at the builder's start, and at least the clock in ms (as the global
// models', modelVersionFloor), so a restarted builder's models are newer. A scorer installs the
// messages in partition order (a key's messages on one partition, one builder: the last
// message of a key is its newest model) and names the version of the key's model that scored each record in its output.
const (
	keyModelPrefix        = "outlierd-key/"
	headerKeyModelVersion = "outlierd-key-model-version"
	// headerKeyPartition is the input partition of the key's latest record at the builder:
	// the scorer assigned that partition keeps the key's model.
	headerKeyPartition = "outlierd-key-partition"
	// keyPublishEvery is the shortest time between two publications of keys' models.
	keyPublishEvery = time.Second
	// assumedKeyBytes is the key length the start-up check allows for (a longer key's model that
	// then does not fit sink.max_message_bytes is logged, counted and tombstoned).
	assumedKeyBytes = 256
)

// keyPublisher is a builder's writer of the keys' models. add never blocks the detect goroutine.
type keyPublisher struct {
	cfg      modelTopicConfig
	w        *kafka.Writer
	log      zerolog.Logger
	features []string
	detect   detect.Config

	mu      sync.Mutex
	pending map[string]detect.KeyModel // the newest model of each key not yet written (Model nil: evicted)
	wake    chan struct{}

	// every is run.key_publish_interval: the least time between two publications of a key;
	// published is when each key's model was last written (only run touches it).
	every     time.Duration
	published map[string]time.Time
	// placed is the input partition each key's model was last written for (only publish
	// touches it): a key whose records moved gets a tombstone at its old place.
	placed map[string]int32
	// tooLarge counts the keys' models not published for their size (a tombstone instead);
	// onTooLarge, if set, hears each publication's count (metrics).
	tooLarge   atomic.Int64
	onTooLarge func(n int)

	// version is the last publication's (floor: set before run starts, from the topic).
	version uint64
	// ahead paces the warning of a version of its own more than maxVersionAhead ahead of its
	// clock (ownVersionAhead); only run touches it.
	ahead refusalLog
	// cut, in tests, cuts a publication short: it returns the messages to write and whether
	// the publisher then dies (writes nothing more), as a builder killed mid-publication.
	cut func([]kafka.Message) ([]kafka.Message, bool)
	// onDone, if set, is told after each publication (tests).
	onDone func(version uint64, keys int, err error)
	// stale are the keys' models of another configuration on the topic (keystale.go); advance
	// is the scan's record moved on through the publisher's own writes (keyscanadvance.go).
	stale   staleKeys
	advance scanAdvance
}

func newKeyPublisher(cfg modelTopicConfig, features []string, det detect.Config, log zerolog.Logger) (*keyPublisher, error) {
	w := &kafka.Writer{
		Addr:         kafka.TCP(cfg.brokers...),
		Topic:        cfg.topic,
		Balancer:     keyModelBalancer(), // each key's at its input partition's place (keyfollow.go)
		BatchSize:    10_000,
		BatchBytes:   int64(cfg.maxMessageBytes),
		BatchTimeout: 10 * time.Millisecond,
		RequiredAcks: kafka.RequireAll,
		MaxAttempts:  1, // retried by run, with backoff
		WriteTimeout: 30 * time.Second,
	}
	if cfg.security.Enabled() {
		tr, err := cfg.security.Transport()
		if err != nil {
			return nil, fmt.Errorf("model topic: %w", err)
		}
		w.Transport = tr
	}
	p := &keyPublisher{cfg: cfg, w: w, log: log.With().Str("model_topic", cfg.topic).Logger(), features: features,
		detect: det, pending: map[string]detect.KeyModel{}, wake: make(chan struct{}, 1), published: map[string]time.Time{}, placed: map[string]int32{}}
	w.Completion = p.noteWritten // (the scan's record moves on through them: keyscanadvance.go)
	return p, nil
}

// add queues the keys' models (a key's newer model replaces one not yet written).
func (p *keyPublisher) add(ms []detect.KeyModel) {
	if len(ms) == 0 {
		return
	}
	p.mu.Lock()
	for _, m := range ms {
		p.pending[m.Key] = m
	}
	p.mu.Unlock()
	p.signal()
}

func (p *keyPublisher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run publishes what is pending and due (a key not published within every), at most once per
// keyPublishEvery, until ctx ends; a key not yet due waits, with its newest model, for a later
// round. Once drain is closed (a graceful stop: the detect goroutine adds nothing more) one
// last round publishes every pending key, due or not, at once, and run returns.
func (p *keyPublisher) run(ctx context.Context, drain <-chan struct{}) {
	defer func() { // (the record as its writes moved it on: the next start reads on from there)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		p.saveAdvance(sctx, true)
	}()
	var last time.Time
	for {
		final := false
		select { // the stop first: a wake (a key waiting) is always ready
		case <-drain:
			final = true
		default:
		}
		if !final {
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			case <-drain:
				final = true
			}
		}
		if wait := keyPublishEvery - time.Since(last); wait > 0 && !final {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			case <-drain:
				final = true
			}
		}
		last = time.Now()
		if !final { // (the stop's last round publishes alone: the next start's scan finds what is left)
			p.tombstoneStale(ctx) // (before the publication: a key of it gets its model after the tombstone)
		}
		todo, waiting := p.due(last, final)
		if waiting {
			p.signal() // a later round takes them
		}
		if len(todo) == 0 {
			if final {
				return
			}
			continue
		}
		p.version = max(p.version+1, uint64(max(time.Now().UnixMilli(), 0)))
		died, err := p.publish(ctx, todo)
		if err == nil {
			p.ownVersionAhead(p.version, time.Now())
		}
		if p.onDone != nil {
			p.onDone(p.version, len(todo), err)
		}
		if died {
			return
		}
		if final {
			if err != nil && ctx.Err() != nil {
				p.log.Warn().Int("keys", len(todo)).
					Msg("keys' models not published: the pipeline stopped first (run.shutdown_timeout passed); the scorers keep their previous ones")
			}
			return // (publish logged a failure; nothing comes after the stop to retry with)
		}
		if err == nil {
			for k, m := range todo {
				if m.Model == nil {
					delete(p.published, k)
				} else {
					p.published[k] = last
				}
			}
			p.saveAdvance(ctx, false)
		} else { // written again with the next publication, unless a newer model came
			p.mu.Lock()
			for k, m := range todo {
				if _, newer := p.pending[k]; !newer {
					p.pending[k] = m
				}
			}
			p.mu.Unlock()
			if !backoff(ctx, 1) {
				return
			}
			p.signal()
		}
	}
}

// due takes the pending keys due at now (never published, last published at least every ago,
// or evicted; every one when all) and says whether others wait.
func (p *keyPublisher) due(now time.Time, all bool) (todo map[string]detect.KeyModel, waiting bool) {
	todo = map[string]detect.KeyModel{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, m := range p.pending {
		if at, ok := p.published[k]; ok && !all && m.Model != nil && now.Sub(at) < p.every {
			waiting = true
			continue
		}
		todo[k] = m
		delete(p.pending, k)
	}
	return todo, waiting
}

// publish writes one publication: a message per key (a tombstone for an evicted key), in key
// order, retrying transient failures. A key whose records moved to another input partition
// also gets a tombstone at its old place, before its model (or its eviction's tombstone). A model too large for
// sink.max_message_bytes (a key too long, features too many) is not published: the key gets a
// tombstone instead, so the scorers drop its older model and score its records with the global
// model, logged with the key and counted once written (outlierd_key_models_too_large_total).
func (p *keyPublisher) publish(ctx context.Context, todo map[string]detect.KeyModel) (died bool, err error) {
	keys := make([]string, 0, len(todo))
	for k := range todo {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	v := []byte(strconv.FormatUint(p.version, 10))
	message := func(k string, part int32) kafka.Message {
		m := kafka.Message{Key: []byte(keyModelPrefix + k), Headers: []kafka.Header{{Key: headerKeyModelVersion, Value: v},
			{Key: headerKeyPartition, Value: []byte(strconv.Itoa(int(part)))}}}
		// (empty without derive: a scorer that derives refuses it; absent: an earlier release)
		m.Headers = append(m.Headers, kafka.Header{Key: headerColumns, Value: []byte(p.cfg.derived)})
		return m
	}
	msgs := make([]kafka.Message, 0, len(keys))
	size, tombstones := 0, 0
	var tooLarge []string
	for _, k := range keys {
		km := todo[k]
		if old, ok := p.placed[k]; ok && old != km.Partition { // (evicted too: else its old model stays the last there)
			msgs = append(msgs, message(k, old))
		}
		m := message(k, km.Partition)
		if km.Model != nil {
			if m.Value, err = detect.EncodeKeyModel(p.features, &p.detect, k, p.version, km.Model); err != nil {
				return false, err
			}
			if len(m.Value)+len(m.Key)+modelChunkOverhead+columnsHeaderBytes(p.cfg.derived) > p.cfg.maxMessageBytes {
				if len(k) > 80 { // (named in the log by its start: such keys are the usual cause)
					tooLarge = append(tooLarge, fmt.Sprintf("%s... (%d bytes)", k[:64], len(k)))
				} else {
					tooLarge = append(tooLarge, k)
				}
				m.Value = nil
			}
		}
		msgs = append(msgs, m)
	}
	if len(tooLarge) > 0 {
		p.log.Error().Int("keys", len(tooLarge)).Strs("first_keys", tooLarge[:min(len(tooLarge), 10)]).Int("max_message_bytes", p.cfg.maxMessageBytes).
			Uint64("key_model_version", p.version).
			Msg("keys' models larger than sink.max_message_bytes (their keys too long?): tombstones published instead, the scorers score these keys' records with the global model")
	}
	if p.cut != nil {
		msgs, died = p.cut(msgs)
	}
	for _, m := range msgs {
		size += len(m.Value)
		if m.Value == nil {
			tombstones++
		}
	}
	for attempt := 1; ; attempt++ {
		if err = p.w.WriteMessages(ctx, msgs...); err == nil {
			break
		}
		if ctx.Err() != nil || !transient(err) {
			p.log.Error().Err(err).Uint64("key_model_version", p.version).Int("keys", len(msgs)).Msg("keys' models not published; retried with the next publication")
			return died, err
		}
		msgs = unwritten(msgs, err)
		p.log.Warn().Err(err).Int("attempt", attempt).Int("messages", len(msgs)).Msg("keys' models publication failed; retrying what was not written")
		if !backoff(ctx, attempt) {
			return died, ctx.Err()
		}
	}
	if len(tooLarge) > 0 { // counted once written (a failed publication's keys go again with the next)
		p.tooLarge.Add(int64(len(tooLarge)))
		if p.onTooLarge != nil {
			p.onTooLarge(len(tooLarge))
		}
	}
	for _, k := range keys {
		if todo[k].Model == nil {
			delete(p.placed, k)
		} else {
			p.placed[k] = todo[k].Partition
		}
	}
	p.log.Info().Uint64("key_model_version", p.version).Int("keys", len(msgs)-tombstones).Int("tombstones", tombstones).
		Int("bytes", size).Msg("keys' models published")
	return died, nil
}

func (p *keyPublisher) Close() error { return p.w.Close() }

// isKeyModel says whether a model topic message is a key's model (or its tombstone).
func isKeyModel(m kafka.Message) bool { return bytes.HasPrefix(m.Key, []byte(keyModelPrefix)) }

// keyModelVersion is a key model message's version header (0 when absent or not a number).
func keyModelVersion(m kafka.Message) uint64 {
	v, _ := keyModelVersionOf(m)
	return v
}

// keyModelVersionOf is m's key model version and whether m carries one (a key model or its
// tombstone: the header is there).
func keyModelVersionOf(m kafka.Message) (uint64, bool) {
	for _, h := range m.Headers {
		if h.Key == headerKeyModelVersion {
			v, _ := strconv.ParseUint(string(h.Value), 10, 64)
			return v, true
		}
	}
	return 0, false
}

// keyInbox carries the keys' models a scorer's follower read to the detect goroutine: the newest
// of each key (the topic's order), taken whenever ready signals.
type keyInbox struct {
	mu      sync.Mutex
	pending map[string]detect.KeyModel
	ready   chan struct{}
}

func newKeyInbox() *keyInbox {
	return &keyInbox{pending: map[string]detect.KeyModel{}, ready: make(chan struct{}, 1)}
}

func (b *keyInbox) put(m detect.KeyModel) {
	b.mu.Lock()
	// A restore may read an older one; at one version a model wins over a tombstone (the
	// tombstone of a key moved to another partition, read from its old one).
	if o, ok := b.pending[m.Key]; !ok || m.Version > o.Version || m.Version == o.Version && o.Model == nil {
		b.pending[m.Key] = m
	}
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

// take returns the keys' models waiting, those of partitions keep takes (the scorer's now).
func (b *keyInbox) take(keep func(int32) bool) []detect.KeyModel {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		return nil
	}
	out := make([]detect.KeyModel, 0, len(b.pending))
	for _, m := range b.pending {
		if keep(m.Partition) {
			out = append(out, m)
		}
	}
	clear(b.pending)
	return out
}

// keyReader is a scorer's handler of key model messages: those of the partitions keep takes
// are decoded (off the detect goroutine) and put in the inbox; one that does not decode or fit
// is skipped with the reason (the key keeps the model it has; keySkips says how it is logged).
func (p *Pipeline) keyReader(keep func(partition int32) bool, log zerolog.Logger) func(kafka.Message) {
	read, _ := p.keyReaderSkips(keep, log)
	return read
}

// keyReaderSkips is keyReader and its skips' log (to flush at the end of a restore).
func (p *Pipeline) keyReaderSkips(keep func(partition int32) bool, log zerolog.Logger) (func(kafka.Message), *keySkips) {
	skips, derived := &keySkips{log: log}, p.cfg.modelTopic().derived
	return func(msg kafka.Message) {
		key := string(msg.Key[len(keyModelPrefix):])
		part := keyPartition(msg)
		if !keep(part) {
			return // another scorer's key
		}
		if _, stale := headerValue(msg, headerKeyStale); stale && msg.Value == nil {
			// A model of another configuration than the builder's removed (keystale.go): one
			// this scorer skipped, or, on a scorer of that configuration, one it may still
			// score with. Kept either way, whatever the version (the stale model's: one refused
			// as ahead is not refused again, TestStaleTombstoneOfAVersionAheadNotRefused).
			return
		}
		now := time.Now()
		if v := keyModelVersion(msg); versionAhead(v, now) { // (the header first: no decode)
			p.keyAhead(skips, msg, v, now)
			return
		}
		if msg.Value == nil {
			p.keys.put(detect.KeyModel{Key: key, Version: keyModelVersion(msg), Partition: part})
			return
		}
		k, v, r, err := detect.DecodeKeyModel(msg.Value, p.cfg.Ingest.Columns(), &p.cfg.Detect)
		if err == nil && k != key {
			err = fmt.Errorf("the model of key %q published under key %q", k, key)
		}
		if err == nil && versionAhead(v, now) {
			p.keyAhead(skips, msg, v, now)
			return
		}
		if err == nil {
			pub, said := headerValue(msg, headerColumns)
			err = derivedMismatch(pub, said, derived)
		}
		if err != nil {
			skips.skip(msg, err)
			return
		}
		p.keys.put(detect.KeyModel{Key: key, Version: v, Partition: part, Model: r})
	}, skips
}

// keyPartition is a key model message's partition header (-1 when absent or not a number).
func keyPartition(m kafka.Message) int32 {
	for _, h := range m.Headers {
		if h.Key == headerKeyPartition {
			if v, err := strconv.ParseInt(string(h.Value), 10, 32); err == nil {
				return int32(v)
			}
		}
	}
	return -1
}

// KeyVersions are the versions of the keys' models a running scorer serves, by key, and the
// partitions whose keys it keeps (nil: not known yet), read on its detect goroutine (for tests
// and diagnostics). It fails on another role or without key_by, or when ctx ends first.
func (p *Pipeline) KeyVersions(ctx context.Context) (map[string]uint64, []int32, error) {
	if p.keyQuery == nil {
		return nil, nil, errors.New("pipeline: not a scorer with detect.key_by: key")
	}
	reply := make(chan map[string]uint64, 1)
	select {
	case p.keyQuery <- reply:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	var v map[string]uint64
	select {
	case v = <-reply:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	p.scope.mu.Lock()
	defer p.scope.mu.Unlock()
	if !p.scope.known {
		return v, nil, nil
	}
	parts := make([]int32, 0, len(p.scope.parts))
	for q := range p.scope.parts {
		parts = append(parts, q)
	}
	slices.Sort(parts)
	return v, parts, nil
}

// highestKeyVersion is the highest key model version on the model topic's partitions other
// than 0 (partition 0 the builder's start-up read sees whole): each one's last key model
// message's (lastKeyVersion), since a builder's publications only grow in version and compaction
// keeps a partition's last message; and the topic's partition count.
func highestKeyVersion(ctx context.Context, cfg modelTopicConfig, dialer *kafka.Dialer) (highest uint64, m int, err error) {
	if m, err = modelTopicPartitions(ctx, cfg, dialer); err != nil {
		return 0, 0, err
	}
	for mp := 1; mp < m; mp++ {
		v, err := lastKeyVersion(ctx, cfg, dialer, mp)
		if err != nil {
			return 0, 0, fmt.Errorf("model topic %q partition %d: its last key model: %w", cfg.topic, mp, err)
		}
		highest = max(highest, v)
	}
	return highest, m, nil
}
