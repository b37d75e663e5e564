package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/kafkasec"
	"github.com/outlierd/outlierd/stages/detect"
)

// The model topic: how a builder hands its models to the scorers (run.role).
//
// A model is its sealed snapshot (detect.WriteSnapshot: versioned, SHA-256 checksummed),
// split into chunks of at most chunkBytes so that a model of any size passes the broker's
// message limit. Chunk i of n of version v is one message with key "outlierd-model/<i>" (a
// compacted topic keeps the newest of each key: the newest model, whatever its size, plus at
// most stale chunks of higher index from an older, larger model, which the reader skips) and
// headers outlierd-model-version (v), outlierd-model-chunk ("i/n") and outlierd-model-sha256
// (of the whole snapshot). The topic has one partition, so a reader sees the chunks of one
// publication in order; it reassembles a version from its n consecutive chunks, checks the
// digest, decodes the snapshot (which checks its own checksum) and installs it if newer.
// Anything else (a stray message, a chunk out of sequence, a digest mismatch, a snapshot that
// does not decode) is skipped with the reason logged and counted.
const (
	headerModelVersion = "outlierd-model-version"
	headerModelChunk   = "outlierd-model-chunk"
	headerModelSHA256  = "outlierd-model-sha256"
	modelKeyPrefix     = "outlierd-model/"
	// modelChunkOverhead is what a chunk's message adds to its value (key, headers, record
	// framing): well above the ~200 bytes they take, so a chunk never exceeds the limit.
	modelChunkOverhead = 1024
)

// modelMessages is the publication of one model: its sealed snapshot split into chunks.
func modelMessages(m *detect.Model, maxMessageBytes int) ([]kafka.Message, error) {
	var buf bytes.Buffer
	if err := detect.WriteSnapshot(&buf, m); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	sum := sha256.Sum256(data)
	chunk := maxMessageBytes - modelChunkOverhead
	n := max(1, (len(data)+chunk-1)/chunk)
	msgs := make([]kafka.Message, n)
	for i := range n {
		part := data[i*chunk : min(len(data), (i+1)*chunk)]
		msgs[i] = kafka.Message{
			Key:   []byte(modelKeyPrefix + strconv.Itoa(i)),
			Value: part,
			Headers: []kafka.Header{
				{Key: headerModelVersion, Value: []byte(strconv.FormatUint(m.Version, 10))},
				{Key: headerModelChunk, Value: []byte(fmt.Sprintf("%d/%d", i, n))},
				{Key: headerModelSHA256, Value: []byte(hex.EncodeToString(sum[:]))},
			},
		}
	}
	return msgs, nil
}

// modelAssembler reassembles publications from the model topic's messages, read in order.
type modelAssembler struct {
	version uint64
	n, next int
	sum     string
	data    []byte
}

// add takes the next message; it returns a whole snapshot's bytes and version when m
// completes one, and an error (the message is skipped) when m does not fit the protocol.
func (a *modelAssembler) add(m kafka.Message) (data []byte, version uint64, err error) {
	h := map[string]string{}
	for _, x := range m.Headers {
		h[x.Key] = string(x.Value)
	}
	v, err1 := strconv.ParseUint(h[headerModelVersion], 10, 64)
	i, n, err2 := parseChunk(h[headerModelChunk])
	if err1 != nil || err2 != nil || len(h[headerModelSHA256]) != 64 {
		return nil, 0, fmt.Errorf("not a model chunk (headers %s=%q, %s=%q, %s=%q)", headerModelVersion, h[headerModelVersion],
			headerModelChunk, h[headerModelChunk], headerModelSHA256, h[headerModelSHA256])
	}
	if i == 0 { // a new publication starts; whatever was pending is abandoned
		*a = modelAssembler{version: v, n: n, sum: h[headerModelSHA256], data: append([]byte(nil), m.Value...), next: 1}
	} else if v != a.version || n != a.n || i != a.next || h[headerModelSHA256] != a.sum {
		// A stale chunk of an older, larger model that compaction kept, or a publication cut
		// short: skip it.
		return nil, 0, fmt.Errorf("chunk %d/%d of version %d out of sequence (assembling chunk %d/%d of version %d)", i, n, v, a.next, a.n, a.version)
	} else {
		a.data = append(a.data, m.Value...)
		a.next++
	}
	if a.next < a.n {
		return nil, 0, nil
	}
	data, version, sum := a.data, a.version, a.sum
	*a = modelAssembler{}
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
		return nil, 0, fmt.Errorf("model version %d: SHA-256 of the %d reassembled bytes differs from its header", version, len(data))
	}
	return data, version, nil
}

// parseChunk reads "i/n".
func parseChunk(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, errors.New("no slash")
	}
	if i, err = strconv.Atoi(a); err != nil {
		return 0, 0, err
	}
	if n, err = strconv.Atoi(b); err != nil {
		return 0, 0, err
	}
	if n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("chunk %d of %d", i, n)
	}
	return i, n, nil
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
}

// modelPublisher is a builder's writer of models to the model topic. Publish never blocks the
// detect goroutine: the newest model waits in a one-slot mailbox (an older one not yet
// written is replaced: the scorers only need the newest) and run writes it, retrying
// transient failures with backoff until it succeeds or ctx ends.
type modelPublisher struct {
	cfg     modelTopicConfig
	w       *kafka.Writer
	log     zerolog.Logger
	mailbox chan *detect.Model
	onDone  func(version uint64, err error) // after each publication (metrics, tests)
}

func newModelPublisher(cfg modelTopicConfig, log zerolog.Logger) (*modelPublisher, error) {
	w := &kafka.Writer{
		Addr:         kafka.TCP(cfg.brokers...),
		Topic:        cfg.topic,
		Balancer:     &kafka.LeastBytes{}, // one partition: every chunk goes there, in order
		BatchSize:    1,
		BatchBytes:   int64(cfg.maxMessageBytes),
		RequiredAcks: kafka.RequireAll,
		MaxAttempts:  1, // retried by run, with backoff, as long as it takes
		WriteTimeout: 30 * time.Second,
	}
	if cfg.security.Enabled() {
		tr, err := cfg.security.Transport()
		if err != nil {
			return nil, fmt.Errorf("model topic: %w", err)
		}
		w.Transport = tr
	}
	return &modelPublisher{cfg: cfg, w: w, log: log.With().Str("model_topic", cfg.topic).Logger(), mailbox: make(chan *detect.Model, 1)}, nil
}

// Publish queues m, replacing a model not yet written.
func (p *modelPublisher) Publish(m *detect.Model) {
	for {
		select {
		case p.mailbox <- m:
			return
		default:
		}
		select {
		case old := <-p.mailbox:
			p.log.Info().Uint64("model_version", old.Version).Msg("model superseded before it was published")
		default:
		}
	}
}

// run writes queued models until ctx ends.
func (p *modelPublisher) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-p.mailbox:
			err := p.write(ctx, m)
			if p.onDone != nil {
				p.onDone(m.Version, err)
			}
		}
	}
}

// write publishes one model, chunk by chunk in order, retrying transient errors; a newer
// model in the mailbox supersedes a failing one.
func (p *modelPublisher) write(ctx context.Context, m *detect.Model) error {
	msgs, err := modelMessages(m, p.cfg.maxMessageBytes)
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
		}
		if err == nil {
			p.log.Info().Uint64("model_version", m.Version).Int("bytes", size).Int("chunks", len(msgs)).Msg("model published")
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

func (p *modelPublisher) Close() error { return p.w.Close() }

// modelFollower is a scorer's reader of the model topic (partition 0 from the start, no
// consumer group: every scorer reads every model).
type modelFollower struct {
	cfg      modelTopicConfig
	r        *kafka.Reader
	dialer   *kafka.Dialer
	log      zerolog.Logger
	asm      modelAssembler
	features []string
	// skipped counts messages that did not make a usable model (their reasons are logged).
	skipped int
}

func newModelFollower(cfg modelTopicConfig, features []string, log zerolog.Logger) (*modelFollower, error) {
	rc := kafka.ReaderConfig{
		Brokers:     append([]string(nil), cfg.brokers...),
		Topic:       cfg.topic,
		Partition:   0,
		MinBytes:    1,
		MaxBytes:    max(cfg.maxMessageBytes, 1<<20) * 2,
		MaxWait:     500 * time.Millisecond,
		StartOffset: kafka.FirstOffset,
	}
	dialer := kafka.DefaultDialer
	if cfg.security.Enabled() {
		d, err := cfg.security.Dialer()
		if err != nil {
			return nil, fmt.Errorf("model topic: %w", err)
		}
		rc.Dialer, dialer = d, d
	}
	return &modelFollower{cfg: cfg, r: kafka.NewReader(rc), dialer: dialer, features: features,
		log: log.With().Str("model_topic", cfg.topic).Logger()}, nil
}

// offsets are the model topic's first and end offsets now (partition 0).
func (f *modelFollower) offsets(ctx context.Context) (first, end int64, err error) {
	var last error
	for _, b := range f.cfg.brokers {
		conn, err := f.dialer.DialLeader(ctx, "tcp", b, f.cfg.topic, 0)
		if err != nil {
			last = err
			continue
		}
		first, end, err = conn.ReadOffsets()
		conn.Close()
		if err != nil {
			last = err
			continue
		}
		return first, end, nil
	}
	return 0, 0, fmt.Errorf("model topic %q: offsets: %w", f.cfg.topic, last)
}

// next reads messages until one completes a usable model (newer than after) or ctx ends.
// When stopAt >= 0 it also returns (nil, nil) once it has read every message below stopAt.
func (f *modelFollower) next(ctx context.Context, after uint64, stopAt int64) (*detect.Model, int64, error) {
	for {
		if stopAt >= 0 && f.r.Offset() >= stopAt { // (before the first read Offset is negative)
			return nil, f.r.Offset(), nil
		}
		msg, err := f.r.ReadMessage(ctx)
		if err != nil {
			return nil, 0, err
		}
		data, version, err := f.asm.add(msg)
		if err != nil {
			f.skip(msg, err)
			continue
		}
		if data == nil || version <= after {
			continue
		}
		m, err := decodeModel(data)
		if err == nil && m.Version != version {
			err = fmt.Errorf("snapshot of version %d published as version %d", m.Version, version)
		}
		if err == nil && !slices.Equal(m.Features, f.features) {
			err = fmt.Errorf("%w: built for features %v, the stream has %v", detect.ErrSnapshotMismatch, m.Features, f.features)
		}
		if err != nil {
			f.skip(msg, err)
			continue
		}
		return m, msg.Offset, nil
	}
}

func (f *modelFollower) skip(msg kafka.Message, err error) {
	f.skipped++
	f.log.Warn().Err(err).Int64("offset", msg.Offset).Str("key", string(msg.Key)).Msg("model topic message skipped")
}

// newest reads the whole topic as it is now and returns its newest usable model (nil when
// there is none yet), so that a scorer serves at once from its start.
func (f *modelFollower) newest(ctx context.Context) (*detect.Model, error) {
	first, end, err := f.offsets(ctx)
	if err != nil {
		return nil, err
	}
	if first >= end {
		return nil, nil // empty (or everything expired): nothing to read now
	}
	var best *detect.Model
	for {
		after := uint64(0)
		if best != nil {
			after = best.Version
		}
		m, _, err := f.next(ctx, after, end)
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
