package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/core/kafkasec"
	"github.com/outlierd/outlierd/stages/detect"
)

// The model topic: how a builder hands its models to the scorers (run.role).
//
// A publication is a model's sealed snapshot (detect.WriteSnapshot: versioned, SHA-256
// checksummed) followed by the builder's hypercube counts when its hypercube detector is on
// (hypercube.AppendCells; header outlierd-model-hypercube gives their length), split into
// chunks of at most maxMessageBytes-modelChunkOverhead bytes so that a model of any size passes
// the broker's message limit. Chunk i of n of version v is one message with key
// "outlierd-model/<v>/<i>" and headers outlierd-model-version (v), outlierd-model-chunk ("i/n")
// and outlierd-model-sha256 (of the whole publication). Keys are per version, so compaction
// (the topic is compacted: it keeps the newest message of each key) never drops a chunk of
// the last complete model for a chunk of a newer publication that was cut short (a builder
// killed mid-publication): every version's chunks stay until the builder, after publishing a
// newer version completely, writes tombstones (null values) for the keys of every older one it
// has seen on the topic; compaction then removes both (tombstones themselves after
// delete.retention.ms). So the topic holds the newest complete model at all times, plus at
// most the chunks of a newer publication cut short and of versions whose tombstones are not
// yet written. The chunks are on partition 0 (the others hold the keys' models under
// detect.key_by: keyfollow.go), so a reader sees the chunks of one publication in
// order; it reassembles a version from its n consecutive chunks, checks the digest, decodes
// the snapshot (which checks its own checksum) and installs it if newer. Anything else (a
// stray message, a chunk out of sequence, a digest mismatch, a snapshot that does not decode)
// is skipped with the reason logged and counted; tombstones are passed over silently.
//
// Versions (modelVersionFloor): a builder's first model is one above the highest version any
// chunk on the topic carries, above its own snapshot's (detect.state_dir), and above the Unix
// time of its start in milliseconds, so versions only grow, across builder restarts with or
// without state_dir, and also after the topic was emptied (deleted records, a recreated topic):
// the clock then carries the sequence, since a builder publishes far fewer than 1,000 models a
// second. Scorers install only versions above the one they serve.
const (
	headerModelVersion = "outlierd-model-version"
	headerModelChunk   = "outlierd-model-chunk"
	headerModelSHA256  = "outlierd-model-sha256"
	// headerModelHypercube is the byte length of the hypercube counts at the publication's end
	// (absent: none, the builder's hypercube detector is off).
	headerModelHypercube = "outlierd-model-hypercube"
	// headerColumns, on a global model's chunks and on each key's model, is the builder's
	// derived columns' definitions (derivedDefs; empty without ingest.derive, absent from a
	// release before it): the models name their columns, and a derived column can keep its name
	// under another definition (or be a field of the builder's), so a scorer that derives
	// otherwise skips the model.
	headerColumns  = "outlierd-columns"
	modelKeyPrefix = "outlierd-model/"
	// modelChunkOverhead is what a chunk's message adds to its value (key, headers, record
	// framing): well above the ~250 bytes they take, so a chunk never exceeds the limit.
	modelChunkOverhead = 1024
	// minModelChunk is the smallest chunk lint accepts (sink.max_message_bytes >= 2048 with a
	// model topic): below it a model of a 2k window (about 120 KB) takes over a hundred chunks.
	minModelChunk = 1024
)

// modelChunkKey is the key of chunk i of version v.
func modelChunkKey(v uint64, i int) string {
	return modelKeyPrefix + strconv.FormatUint(v, 10) + "/" + strconv.Itoa(i)
}

// publication is what a builder publishes: a model and its hypercube counts (nil: none).
type publication struct {
	model     *detect.Model
	hypercube []byte
	derived   string // the publisher's derivedDefs (headerColumns), set by write
}

// modelMessages is the publication of one model: its sealed snapshot and hypercube counts split
// into chunks.
func modelMessages(pub publication, maxMessageBytes int) ([]kafka.Message, error) {
	chunk := maxMessageBytes - modelChunkOverhead - columnsHeaderBytes(pub.derived)
	if chunk < minModelChunk { // lint refuses it (validateRole); a caller that skipped lint errs, never divides by 0
		return nil, fmt.Errorf("sink.max_message_bytes %d leaves %d bytes for a model chunk, want at least %d (%d + %d)",
			maxMessageBytes, chunk, minModelChunk, minModelChunk, modelChunkOverhead)
	}
	m := pub.model
	var buf bytes.Buffer
	if err := detect.WriteSnapshot(&buf, m); err != nil {
		return nil, err
	}
	buf.Write(pub.hypercube)
	data := buf.Bytes()
	sum := sha256.Sum256(data)
	n := max(1, (len(data)+chunk-1)/chunk)
	msgs := make([]kafka.Message, n)
	for i := range n {
		part := data[i*chunk : min(len(data), (i+1)*chunk)]
		msgs[i] = kafka.Message{
			Key:   []byte(modelChunkKey(m.Version, i)),
			Value: part,
			Headers: []kafka.Header{
				{Key: headerModelVersion, Value: []byte(strconv.FormatUint(m.Version, 10))},
				{Key: headerModelChunk, Value: []byte(fmt.Sprintf("%d/%d", i, n))},
				{Key: headerModelSHA256, Value: []byte(hex.EncodeToString(sum[:]))},
			},
		}
		if pub.hypercube != nil {
			msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: headerModelHypercube, Value: []byte(strconv.Itoa(len(pub.hypercube)))})
		}
		// (empty without derive: a scorer that derives refuses it; absent: an earlier release)
		msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: headerColumns, Value: []byte(pub.derived)})
	}
	return msgs, nil
}

// decodeModel decodes a reassembled snapshot.
func decodeModel(data []byte) (*detect.Model, error) {
	return detect.ReadSnapshot(bytes.NewReader(data))
}

// modelTopicConfig is where the model topic is: the output cluster (sink.brokers, sink.security).
type modelTopicConfig struct {
	brokers         []string
	topic           string
	security        kafkasec.Config
	maxMessageBytes int
	// derived is the instance's derived columns' definitions (derivedDefs): its models' and
	// keys' models' messages carry them (headerColumns), and it skips those of other ones.
	derived string
	// publicationBound is the most bytes a publication of the configuration's models takes
	// (detect.PublicationBound): a reader refuses a larger one (modelrefuse.go).
	publicationBound int
	// answered, where not nil, is the broker that answered last, shared by the readers that
	// share it (a scorer's followers: newModelFollower makes it; brokerHint); nil: each dial
	// and lookup asks brokers from the first.
	answered *brokerHint
	// key names the topic in errors and log lines, its config key ("": the model topic; tail
	// reads sink.topic through partitionReader too: TopicRef.Follower).
	key string
}

// what is how errors and log lines name the topic: "model topic", or its config key.
func (c modelTopicConfig) what() string {
	if c.key == "" {
		return "model topic"
	}
	return c.key
}

// toPartition0 writes every message to partition 0, the global model's.
var toPartition0 = kafka.BalancerFunc(func(kafka.Message, ...int) int { return 0 })

// modelPublisher is a builder's writer of models to the model topic. Publish never blocks the
// detect goroutine: the newest model waits in a one-slot mailbox (an older one not yet
// written is replaced: the scorers only need the newest) and run writes it, retrying
// transient failures with backoff until it succeeds or ctx ends. After each complete
// publication it writes tombstones for the chunks of every older version on the topic.
type modelPublisher struct {
	cfg     modelTopicConfig
	w       *kafka.Writer // chunks, one at a time, in order
	tw      *kafka.Writer // tombstones, batched (their order does not matter)
	log     zerolog.Logger
	mailbox chan publication
	onDone  func(version uint64, err error) // after each publication (metrics, tests)
	// onPublished, if set, hears each publication written whole (the keys' publisher: a model
	// of the builder's configuration is on the topic, keystale.go).
	onPublished func()
	// live are the topic's keys whose newest message is not a tombstone, with their versions:
	// what the start-up read found (setLive) plus what run wrote since. Only run touches it.
	live map[string]uint64
	// ahead paces the warning of a version of its own more than maxVersionAhead ahead of its
	// clock (ownVersionAhead); only run touches it.
	ahead refusalLog
}

func newModelPublisher(cfg modelTopicConfig, log zerolog.Logger) (*modelPublisher, error) {
	w := &kafka.Writer{
		Addr:         kafka.TCP(cfg.brokers...),
		Topic:        cfg.topic,
		Balancer:     toPartition0, // every chunk, in order (the keys' models are on the others: keyfollow.go)
		BatchSize:    1,
		BatchBytes:   int64(cfg.maxMessageBytes),
		RequiredAcks: kafka.RequireAll,
		MaxAttempts:  1, // retried by run, with backoff, as long as it takes
		WriteTimeout: 30 * time.Second,
	}
	tw := &kafka.Writer{Addr: w.Addr, Topic: cfg.topic, Balancer: toPartition0, BatchSize: 10_000,
		BatchBytes: int64(cfg.maxMessageBytes), BatchTimeout: 10 * time.Millisecond, RequiredAcks: kafka.RequireAll,
		MaxAttempts: 3, WriteTimeout: 30 * time.Second}
	if cfg.security.Enabled() {
		tr, err := cfg.security.Transport()
		if err != nil {
			return nil, fmt.Errorf("model topic: %w", err)
		}
		w.Transport, tw.Transport = tr, tr
	}
	return &modelPublisher{cfg: cfg, w: w, tw: tw, log: log.With().Str("model_topic", cfg.topic).Logger(),
		mailbox: make(chan publication, 1), live: map[string]uint64{}}, nil
}

// setLive records the keys the start-up read found live (before run starts).
func (p *modelPublisher) setLive(live map[string]uint64) { maps.Copy(p.live, live) }

// Publish queues pub, replacing a model not yet written.
func (p *modelPublisher) Publish(pub publication) {
	for {
		select {
		case p.mailbox <- pub:
			return
		default:
		}
		select {
		case old := <-p.mailbox:
			p.log.Info().Uint64("model_version", old.model.Version).Msg("model superseded before it was published")
		default:
		}
	}
}

// run writes queued models until ctx ends or, once drain is closed (a graceful stop: no model
// comes any more), until the mailbox is empty: the model built last reaches the scorers.
func (p *modelPublisher) run(ctx context.Context, drain <-chan struct{}) {
	for {
		var pub publication
		select {
		case <-ctx.Done():
			return
		case pub = <-p.mailbox:
		case <-drain:
			select {
			case pub = <-p.mailbox:
			default:
				return
			}
		}
		err := p.write(ctx, pub)
		if err == nil {
			if p.onPublished != nil {
				p.onPublished()
			}
			p.tombstone(ctx, pub.model.Version)
		} else if ctx.Err() != nil {
			p.log.Warn().Uint64("model_version", pub.model.Version).
				Msg("model not published: the pipeline stopped first (run.shutdown_timeout passed, or a stage failed); the scorers keep the previous one")
		}
		if p.onDone != nil {
			p.onDone(pub.model.Version, err)
		}
	}
}

// write publishes one model, chunk by chunk in order, retrying transient errors; a newer
// model in the mailbox supersedes a failing one.
func (p *modelPublisher) write(ctx context.Context, pub publication) error {
	m := pub.model
	pub.derived = p.cfg.derived
	msgs, err := modelMessages(pub, p.cfg.maxMessageBytes)
	if err != nil {
		p.log.Error().Err(err).Uint64("model_version", m.Version).Msg("model cannot be encoded; not published")
		return err
	}
	size := 0
	for _, x := range msgs {
		size += len(x.Value)
	}
	for attempt := 1; ; attempt++ {
		err = nil
		for _, x := range msgs { // one at a time: chunks must reach the partition in order
			if err = p.w.WriteMessages(ctx, x); err != nil {
				break
			}
			p.live[string(x.Key)] = m.Version
		}
		if err == nil {
			p.log.Info().Uint64("model_version", m.Version).Int("bytes", size).Int("chunks", len(msgs)).
				Int("hypercube_bytes", len(pub.hypercube)).Msg("model published")
			p.ownVersionAhead(m.Version, time.Now())
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !transient(err) {
			p.log.Error().Err(err).Uint64("model_version", m.Version).Msg("model publication failed (not transient); waiting for the next model")
			return err
		}
		p.log.Warn().Err(err).Uint64("model_version", m.Version).Int("attempt", attempt).Msg("model publication failed; retrying")
		if len(p.mailbox) > 0 {
			return fmt.Errorf("superseded after %d failed attempts: %w", attempt, err)
		}
		if !backoff(ctx, attempt) {
			return ctx.Err()
		}
	}
}

// tombstone writes a tombstone for every live key of a version below v (v is published
// completely): compaction then removes the older versions' chunks. A failure is logged; the
// keys stay live and the next publication tries again.
func (p *modelPublisher) tombstone(ctx context.Context, v uint64) {
	msgs := p.tombstones(v)
	if len(msgs) == 0 {
		return
	}
	if err := p.tw.WriteMessages(ctx, msgs...); err != nil {
		if ctx.Err() == nil {
			p.log.Warn().Err(err).Int("keys", len(msgs)).Uint64("model_version", v).
				Msg("tombstones for older model versions failed; retried after the next publication")
		}
		return
	}
	for _, m := range msgs {
		delete(p.live, string(m.Key))
	}
	p.log.Info().Int("keys", len(msgs)).Uint64("model_version", v).Msg("older model versions' chunks tombstoned (compaction removes them)")
}

// tombstones are the tombstones (nil values) for every live key of a version below v, in key
// order: the older versions' chunks, a publication cut short, strays.
func (p *modelPublisher) tombstones(v uint64) []kafka.Message {
	var keys []string
	for k, kv := range p.live {
		if kv < v {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	msgs := make([]kafka.Message, len(keys))
	for i, k := range keys {
		msgs[i] = kafka.Message{Key: []byte(k)}
	}
	return msgs
}

func (p *modelPublisher) Close() error { return errors.Join(p.w.Close(), p.tw.Close()) }

// modelFollower is a scorer's reader of the model topic (partition 0 from the start, no
// consumer group: every scorer reads every model).
type modelFollower struct {
	cfg      modelTopicConfig
	r        *partitionReader // (partread.go: every exchange with a broker bounded)
	dialer   *kafka.Dialer
	log      zerolog.Logger
	asm      modelAssembler
	features []string
	// skipped counts messages that did not make a usable model (their reasons are logged).
	skipped int
	// onKey takes the keys' models' messages on partition 0 (a builder's version floor; nil:
	// they are passed over): they are no part of a publication of the global model.
	onKey func(kafka.Message)
	// bound is the assembler's (detect.PublicationBound of the configuration in force: a reload
	// of detect.window and the like stores another); refusals logs what it refuses, and
	// onRefused, if set, counts it by reason (metrics).
	bound     atomic.Int64
	refusals  refusalLog
	onRefused func(reason string)
}

func newModelFollower(cfg modelTopicConfig, features []string, log zerolog.Logger) (*modelFollower, error) {
	if cfg.answered == nil { // (the scorer's keys' followers share it: Pipeline.followedTopic)
		cfg.answered = &brokerHint{}
	}
	dialer := kafka.DefaultDialer
	if cfg.security.Enabled() {
		d, err := cfg.security.Dialer()
		if err != nil {
			return nil, fmt.Errorf("model topic: %w", err)
		}
		dialer = d
	}
	f := &modelFollower{cfg: cfg, r: newPartitionReader(cfg, dialer, 0, kafka.FirstOffset, log), dialer: dialer, features: features,
		log: log.With().Str("model_topic", cfg.topic).Logger()}
	f.bound.Store(int64(cfg.publicationBound))
	return f, nil
}

// offsets are the model topic's first and end offsets now (partition 0).
func (f *modelFollower) offsets(ctx context.Context) (first, end int64, err error) {
	return partitionOffsets(ctx, f.cfg, f.dialer, 0)
}

// followed is a usable model read from the topic and the hypercube counts published with it.
type followed struct {
	model     *detect.Model
	hypercube []byte
}

// next reads messages until one completes a usable model (newer than after) or ctx ends.
// When stopAt >= 0 it also returns (nil, nil) once it has read every message below stopAt.
func (f *modelFollower) next(ctx context.Context, after uint64, stopAt int64) (*followed, error) {
	for {
		if stopAt >= 0 && f.r.Offset() >= stopAt { // (before the first read Offset is negative)
			return nil, nil
		}
		msg, err := f.r.ReadMessage(ctx)
		if err != nil {
			return nil, err
		}
		if isKeyModel(msg) {
			if f.onKey != nil {
				f.onKey(msg)
			}
			continue
		}
		f.asm.bound, f.asm.refused = int(f.bound.Load()), f.refuse
		pub, err := f.asm.add(msg)
		if err != nil {
			f.skip(msg, err)
			continue
		}
		if pub == nil || pub.version <= after {
			continue
		}
		m, err := f.usable(pub)
		if err != nil {
			f.skip(msg, err)
			continue
		}
		return m, nil
	}
}

// usable decodes a publication read back and says why it cannot serve this stream, if so.
func (f *modelFollower) usable(pub *assembled) (*followed, error) {
	m, err := decodeModel(pub.snapshot)
	if err == nil && m.Version != pub.version {
		err = fmt.Errorf("snapshot of version %d published as version %d", m.Version, pub.version)
	}
	if err == nil && !slices.Equal(m.Features, f.features) {
		err = fmt.Errorf("%w: built for features %v, the stream has %v", detect.ErrSnapshotMismatch, m.Features, f.features)
	}
	if err == nil {
		err = derivedMismatch(pub.derived, pub.said, f.cfg.derived)
	}
	if err == nil && pub.hypercube != nil {
		// (read here, not only by InstallModel: a scorer's start installs the newest usable
		// model, and its refusal there failed the start; TestPublicationWithBadHypercubeNotUsable)
		if _, cerr := hypercube.ReadCells(pub.hypercube); cerr != nil {
			err = fmt.Errorf("%w: model %d: its hypercube counts: %w", detect.ErrSnapshotMismatch, pub.version, cerr)
		}
	}
	if err != nil {
		return nil, err
	}
	return &followed{model: m, hypercube: pub.hypercube}, nil
}

// refuse counts and logs (a line a minute per reason at most) what the assembler refused.
func (f *modelFollower) refuse(reason string, msg kafka.Message, err error) {
	f.skipped++
	if f.onRefused != nil {
		f.onRefused(reason)
	}
	f.refusals.say(f.log, reason, msg, err)
}

// skip logs a message skipped as not fitting the protocol: the first of each minute, with how
// many were not logged since (skipped_unlogged; refusalLog).
func (f *modelFollower) skip(msg kafka.Message, err error) {
	f.skipped++
	unsaid, ok := f.refusals.due(skippedLine)
	if !ok {
		return
	}
	f.log.Warn().Err(err).Int64("offset", msg.Offset).Str("key", loggedKey(msg.Key)).Int("skipped_unlogged", unsaid).
		Msg("model topic message skipped (at most one such line a minute, skipped_unlogged the others since)")
}

// newest reads the whole topic as it is now and returns its newest usable model (nil when
// there is none yet), so that a scorer serves at once from its start. f.asm.highest is then the
// highest version of any chunk read.
func (f *modelFollower) newest(ctx context.Context) (*followed, error) {
	first, end, err := f.offsets(ctx)
	if err != nil {
		return nil, err
	}
	if first >= end {
		return nil, nil // empty (or everything expired): nothing to read now
	}
	var best *followed
	for {
		after := uint64(0)
		if best != nil {
			after = best.model.Version
		}
		m, err := f.next(ctx, after, end)
		if err != nil {
			return nil, err
		}
		if m == nil {
			return best, nil
		}
		best = m
	}
}

func (f *modelFollower) Close() error { return f.r.Close() }

// reset makes the next read start again from the topic's first message, forgetting what was
// read (after a start-up read that failed half way).
func (f *modelFollower) reset() {
	f.r.SetOffset(kafka.FirstOffset)
	live := f.asm.live
	if live != nil {
		clear(live)
	}
	f.asm = modelAssembler{live: live}
}
