// Package sink writes the pipeline's results to Kafka: one output per flagged record (or per
// record) as JSON, or one Arrow IPC stream per batch and partition, and the dead letters (input
// messages that could not be decoded, outputs too large to write) to a dead-letter topic.
//
// Delivery is at-least-once. Write and WriteDeadLetters return nil only after the broker
// acknowledged every message with acks=all; only then may the caller resolve the batch's ack
// (batch.Batch.Ack, batch.DeadLetters.Ack), which lets the source commit the input offsets.
// The sink neither acks nor releases a batch: its caller, the pipeline's sink loop, is the
// batch's last owner (the ownership rule of package batch). A failed or cancelled write may still have written some messages, and a retried
// produce request may duplicate messages (kafka-go has no idempotent producer), so every message
// carries a deterministic id (header outlierd-id) for consumers to de-duplicate. An Arrow
// message's id is its offset range, which changes when a re-read batch has other boundaries:
// Arrow consumers de-duplicate rows, by the _id column.
package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// Header names on output and dead-letter messages.
const (
	HeaderID    = "outlierd-id"    // outputs: the output's deterministic id
	HeaderError = "outlierd-error" // dead letters: why the message could not be processed, for people
	// HeaderReason is on a dead letter with its kind of problem as one word, for programs
	// (batch.DeadLetter.Code): the decoders' missing, not_a_number, not_finite, out_of_range,
	// negative_uncertainty, bad_event_time, bad_key, duplicate_key, malformed (not the format's syntax), or the
	// sink's output_too_large, output_unencodable. HeaderError's wording may change; these
	// words stay.
	HeaderReason = "outlierd-reason"
	// HeaderField is on a dead letter whose problem is one field's (batch.DeadLetter.Field):
	// that field as configured, a JSON path ("sensor.hum"), CSV column or logfmt key, so that a
	// program can tell which producer field to fix. Absent for malformed syntax and the sink's
	// own reasons.
	HeaderField  = "outlierd-field"
	HeaderSource = "outlierd-source" // dead letters: "<topic>/<partition>/<offset>" of the input
	HeaderTime   = "outlierd-time"   // dead letters: the input message's time, RFC 3339 (nanoseconds), UTC; absent without one
	// HeaderTruncated is on a dead letter whose original value (or key) had to be cut to fit
	// max_message_bytes: the original value's length in bytes (decimal). The value is then a
	// prefix of the original; the message itself stays in its topic at its source offset.
	HeaderTruncated = "outlierd-truncated"
)

// The Codes of the sink's own dead letters: an output over max_message_bytes even without its
// payload, and one the encoder refused.
const (
	codeOutputTooLarge    = "output_too_large"
	codeOutputUnencodable = "output_unencodable"
)

// messageOverhead bounds the bytes a message adds to a produce request beyond its key, value and
// header keys/values (record framing, varints, timestamp); kafka-go counts about 30.
const messageOverhead = 64

// Sink writes outputs and dead letters. Its methods are safe for concurrent use; concurrent
// Writes share the writer's produce batches.
type Sink struct {
	cfg     Config
	w       *kafka.Writer
	mem     memory.Allocator
	workers int

	// transport is the writer's TLS/SASL transport, nil without security (the writer then uses
	// kafka.DefaultTransport, as before). Close closes its idle connections: Writer.Close does
	// not for a transport it did not make.
	transport *kafka.Transport

	outputs, deadLetters, batches atomic.Int64

	// emit is Config.Emit as now in force: SetEmit replaces it while Writes run (a live reload).
	emit atomic.Pointer[Emit]
}

// Option customises a Sink.
type Option func(*Sink)

// WithAllocator sets the allocator for the Arrow records built by format: arrow (default
// memory.DefaultAllocator); tests pass a memory.CheckedAllocator.
func WithAllocator(mem memory.Allocator) Option { return func(s *Sink) { s.mem = mem } }

// WithWorkers sets how many goroutines encode a batch's JSON outputs (default
// runtime.GOMAXPROCS(0); encoding is about half of a Write's time on loopback).
func WithWorkers(n int) Option { return func(s *Sink) { s.workers = n } }

// New validates cfg and returns a Sink. It does not connect: the first Write does.
func New(cfg Config, opts ...Option) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sink: invalid config: %w", err)
	}
	s := &Sink{cfg: cfg, mem: memory.DefaultAllocator, workers: runtime.GOMAXPROCS(0)}
	s.emit.Store(&cfg.Emit)
	for _, o := range opts {
		o(s)
	}
	if s.workers < 1 {
		return nil, fmt.Errorf("sink: %d workers, want >= 1", s.workers)
	}
	s.w = &kafka.Writer{
		Addr: kafka.TCP(cfg.Brokers...),
		// Murmur2 is the Java client's default partitioner: the same key lands on the same
		// partition as with other producers, and one key's outputs keep their order.
		Balancer: &kafka.Murmur2Balancer{},
		// Each partition's produce request is tried up to MaxAttempts times within a Write
		// (only the failed partition is sent again: fewer duplicates than retrying the whole
		// batch). TopicError.Tries tells the caller how many tries a failed Write used, so
		// that its own retries stay within the same budget (pipeline/retry.go).
		MaxAttempts:  cfg.MaxAttempts,
		BatchSize:    cfg.BatchSize,
		BatchBytes:   int64(cfg.MaxMessageBytes),
		BatchTimeout: cfg.BatchTimeout,
		WriteTimeout: cfg.WriteTimeout,
		RequiredAcks: kafka.RequireAll,
		Async:        false,
		Compression:  compressionCodecs[cfg.Compression],
	}
	if cfg.Security.Enabled() {
		tr, err := cfg.Security.Transport()
		if err != nil {
			return nil, fmt.Errorf("sink: %w", err)
		}
		s.w.Transport, s.transport = tr, tr
	}
	return s, nil
}

// Config returns the sink's configuration (with the Emit now in force).
func (s *Sink) Config() Config {
	c := s.cfg
	c.Emit = *s.emit.Load()
	return c
}

// SetEmit changes Config.Emit for the batches whose Write starts from now on (a live reload);
// a Write in progress keeps the value it started with, so no batch is emitted half one way.
func (s *Sink) SetEmit(emit Emit) error {
	if emit != EmitOutliers && emit != EmitAll {
		return fmt.Errorf("sink: emit must be %s or %s, got %q", EmitOutliers, EmitAll, emit)
	}
	s.emit.Store(&emit)
	return nil
}

// Stats are cumulative counts of acknowledged messages.
type Stats struct {
	Batches     int64 // batches whose outputs were all acknowledged
	Outputs     int64 // output messages
	DeadLetters int64 // dead-letter messages (from WriteDeadLetters and outputs too large to write)
}

// Stats returns the counts so far.
func (s *Sink) Stats() Stats {
	return Stats{Batches: s.batches.Load(), Outputs: s.outputs.Load(), DeadLetters: s.deadLetters.Load()}
}

// Write encodes the outputs of b (per Config.Emit and Config.Format) and writes them, plus a dead
// letter for every record whose output could not be encoded, in one synchronous produce call.
// It returns nil only after the broker acknowledged all of them (acks=all); the caller may then
// mark b's offsets done. A batch with nothing to emit returns nil at once.
//
// Write neither keeps, acks nor releases b: the caller still owns it, and after a nil return
// calls b.Ack, then b.Release (batch's ownership rule; the pipeline's sink loop does both). A
// batch that breaks the batch contract (not made by batch.New, Payloads or Scores not
// row-aligned) is an error. On error nothing may be assumed about which
// messages were written: retrying the whole batch is safe (consumers de-duplicate by id).
func (s *Sink) Write(ctx context.Context, b *batch.Batch) error {
	c, err := batchColumns(b)
	if err != nil {
		return err
	}
	c.emit = *s.emit.Load()
	var (
		msgs []kafka.Message
		dead []batch.DeadLetter
	)
	if s.cfg.Format == FormatArrow {
		msgs, dead, err = s.arrowMessages(b, c)
		if err != nil {
			return err
		}
	} else {
		msgs, dead = s.jsonMessages(b, c)
	}
	outputs := len(msgs)
	if err := s.produce(ctx, KeyTopic, s.cfg.Topic, msgs); err != nil {
		return err
	}
	if len(dead) > 0 {
		dmsgs := make([]kafka.Message, len(dead))
		for i, d := range dead {
			dmsgs[i] = s.deadLetterMessage(d)
		}
		if err := s.produce(ctx, KeyDeadLetterTopic, s.cfg.DeadLetterTopic, dmsgs); err != nil {
			return err
		}
	}
	s.outputs.Add(int64(outputs))
	s.deadLetters.Add(int64(len(dead)))
	s.batches.Add(1)
	return nil
}

// jsonMessages encodes the emitted rows of b as JSON outputs; rows that cannot be encoded, or
// whose output exceeds MaxMessageBytes, become dead letters. Rows are encoded by s.workers
// goroutines over contiguous chunks; the result keeps row order (per-key order on a partition).
func (s *Sink) jsonMessages(b *batch.Batch, c *columns) ([]kafka.Message, []batch.DeadLetter) {
	// Below ~64 rows per worker the goroutines cost more than they save.
	w := min(s.workers, max(1, c.rows/64))
	type part struct {
		msgs []kafka.Message
		dead []batch.DeadLetter
	}
	parts := make([]part, w)
	var wg sync.WaitGroup
	for k := 0; k < w; k++ {
		lo, hi := k*c.rows/w, (k+1)*c.rows/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[k].msgs, parts[k].dead = s.jsonRows(b, c, lo, hi)
		}()
	}
	wg.Wait()
	if w == 1 {
		return parts[0].msgs, parts[0].dead
	}
	var msgs []kafka.Message
	var dead []batch.DeadLetter
	for _, p := range parts {
		msgs = append(msgs, p.msgs...)
		dead = append(dead, p.dead...)
	}
	return msgs, dead
}

// jsonRows encodes the emitted rows in [lo, hi) of b.
func (s *Sink) jsonRows(b *batch.Batch, c *columns, lo, hi int) ([]kafka.Message, []batch.DeadLetter) {
	var (
		msgs []kafka.Message
		dead []batch.DeadLetter
	)
	for i := lo; i < hi; i++ {
		if !emitted(b, i, c.emit) {
			continue
		}
		v, err := encodeJSON(b, c, i)
		if err != nil {
			dead = append(dead, c.deadLetter(b, i, codeOutputUnencodable, "sink: "+err.Error()))
			continue
		}
		id := OutputID(b.Topic, c.partition.Value(i), c.offset.Value(i))
		m := kafka.Message{
			Topic:   s.cfg.Topic,
			Key:     c.keyAt(i),
			Value:   v,
			Headers: []kafka.Header{{Key: HeaderID, Value: []byte(id)}},
		}
		if n := messageSize(&m); n > s.cfg.MaxMessageBytes {
			// The payload makes it too large (a record near the broker's message limit): the
			// scores still go out, without the payload (payload_encoding "omitted"). Only an
			// output too large even so becomes a dead letter.
			if v, err := encodeJSONOmitted(b, c, i); err == nil {
				m.Value = v
			}
			if n := messageSize(&m); n > s.cfg.MaxMessageBytes {
				dead = append(dead, c.deadLetter(b, i, codeOutputTooLarge, fmt.Sprintf("sink: JSON output is %d bytes, more than sink.max_message_bytes (%d)", n, s.cfg.MaxMessageBytes)))
				continue
			}
		}
		msgs = append(msgs, m)
	}
	return msgs, dead
}

// arrowMessages encodes the emitted rows of b as Arrow IPC streams, one per source partition,
// split by rows where a stream would exceed MaxMessageBytes. A single row that cannot be encoded
// or does not fit becomes a dead letter.
func (s *Sink) arrowMessages(b *batch.Batch, c *columns) ([]kafka.Message, []batch.DeadLetter, error) {
	var order []int32
	byPart := make(map[int32][]int)
	for i := 0; i < c.rows; i++ {
		if !emitted(b, i, c.emit) {
			continue
		}
		p := c.partition.Value(i)
		if _, ok := byPart[p]; !ok {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], i)
	}
	if len(order) == 0 {
		return nil, nil, nil
	}
	sch := arrowSchema(b, c)
	var (
		msgs []kafka.Message
		dead []batch.DeadLetter
	)
	var encode func(p int32, rows []int)
	encode = func(p int32, rows []int) {
		first, last := c.offset.Value(rows[0]), c.offset.Value(rows[0])
		for _, i := range rows {
			first, last = min(first, c.offset.Value(i)), max(last, c.offset.Value(i))
		}
		key := arrowKey(b.Topic, p, first, last)
		v, err := encodeArrowRows(s.mem, sch, b, c, rows)
		m := kafka.Message{Topic: s.cfg.Topic, Key: []byte(key), Value: v,
			Headers: []kafka.Header{{Key: HeaderID, Value: []byte(key)}}}
		switch {
		case err == nil && messageSize(&m) <= s.cfg.MaxMessageBytes:
			msgs = append(msgs, m)
		case len(rows) > 1:
			// Too large (or, improbably, failed): halve until each part fits; a row that
			// fails alone is a dead letter.
			encode(p, rows[:len(rows)/2])
			encode(p, rows[len(rows)/2:])
		case err != nil:
			dead = append(dead, c.deadLetter(b, rows[0], codeOutputUnencodable, "sink: "+err.Error()))
		default:
			dead = append(dead, c.deadLetter(b, rows[0], codeOutputTooLarge, fmt.Sprintf("sink: Arrow output of one row is %d bytes, more than sink.max_message_bytes (%d)", messageSize(&m), s.cfg.MaxMessageBytes)))
		}
	}
	for _, p := range order {
		encode(p, byPart[p])
	}
	return msgs, dead, nil
}

// WriteDeadLetters writes dls to the dead-letter topic: value = the original message, key = the
// original key, headers outlierd-error, outlierd-source, outlierd-time, and outlierd-reason
// where the dead letter has a Code (outlierd-truncated where it was cut). It returns nil only
// after the broker acknowledged all of them (acks=all); the caller may then Ack them
// (batch.DeadLetters.Ack).
func (s *Sink) WriteDeadLetters(ctx context.Context, dls []batch.DeadLetter) error {
	if len(dls) == 0 {
		return nil
	}
	msgs := make([]kafka.Message, len(dls))
	for i := range dls {
		msgs[i] = s.deadLetterMessage(dls[i])
	}
	if err := s.produce(ctx, KeyDeadLetterTopic, s.cfg.DeadLetterTopic, msgs); err != nil {
		return err
	}
	s.deadLetters.Add(int64(len(dls)))
	return nil
}

// deadLetterMessage builds the dead-letter message of d.
//
// A message too large for max_message_bytes (a 1 MB input plus the headers) has its value,
// then its key, cut to fit and carries HeaderTruncated: the writer would refuse it whole, and
// failing the write would stop the pipeline on one bad input.
func (s *Sink) deadLetterMessage(d batch.DeadLetter) kafka.Message {
	m := kafka.Message{
		Topic: s.cfg.DeadLetterTopic,
		Key:   d.Key,
		Value: d.Value,
		Headers: []kafka.Header{
			{Key: HeaderError, Value: []byte(d.Reason)},
			{Key: HeaderSource, Value: []byte(OutputID(d.Topic, int32(d.Partition), d.Offset))},
		},
	}
	if !d.Time.IsZero() { // zero: the input had none (a Kafka timestamp of -1 or 0), not year 1
		m.Headers = append(m.Headers, kafka.Header{Key: HeaderTime, Value: []byte(d.Time.UTC().Format(time.RFC3339Nano))})
	}
	if d.Code != "" {
		m.Headers = append(m.Headers, kafka.Header{Key: HeaderReason, Value: []byte(d.Code)})
	}
	if d.Field != "" {
		m.Headers = append(m.Headers, kafka.Header{Key: HeaderField, Value: []byte(d.Field)})
	}
	if messageSize(&m) > s.cfg.MaxMessageBytes {
		m.Headers = append(m.Headers, kafka.Header{Key: HeaderTruncated, Value: []byte(strconv.Itoa(len(d.Value)))})
		over := messageSize(&m) - s.cfg.MaxMessageBytes
		cut := min(over, len(m.Value))
		m.Value = m.Value[:len(m.Value)-cut]
		if over -= cut; over > 0 {
			m.Key = m.Key[:max(0, len(m.Key)-over)]
		}
	}
	return m
}

// The config keys of the two topics, which TopicError names.
const (
	KeyTopic           = "sink.topic"
	KeyDeadLetterTopic = "sink.dead_letter_topic"
)

// TopicError is a write that failed: which topic (and the config key that names it) could not
// be written, how many messages, how many tries the write used, and why. The pipeline shows
// Key and Topic in /readyz and its log while the sink cannot write.
type TopicError struct {
	Key, Topic string
	Messages   int
	// Tries is how many times the write was tried: Config.MaxAttempts when produce requests
	// failed (the writer retries them itself, unless the error is not retriable), 1 when it
	// failed before producing (no metadata for the topic: deleted or unknown).
	Tries int
	Err   error
}

func (e *TopicError) Error() string {
	return fmt.Sprintf("sink: write %d messages to %s %q: %v", e.Messages, e.Key, e.Topic, e.Err)
}

func (e *TopicError) Unwrap() error { return e.Err }

// produce writes msgs, all to topic, synchronously: kafka-go's WriteMessages returns once every
// produce request carrying them was acknowledged (RequireAll) or failed after MaxAttempts.
func (s *Sink) produce(ctx context.Context, key, topic string, msgs []kafka.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	err := s.w.WriteMessages(ctx, msgs...)
	if err == nil {
		return nil
	}
	tries := 1
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		// Report how many failed and the first cause; the caller retries the whole batch.
		var first error
		for _, e := range we {
			if e != nil {
				first = e
				break
			}
		}
		if writerRetries(first) {
			tries = s.cfg.MaxAttempts
		}
		err = fmt.Errorf("%d of %d messages not acknowledged, first error: %w", we.Count(), len(msgs), first)
	}
	return &TopicError{Key: key, Topic: topic, Messages: len(msgs), Tries: tries, Err: err}
}

// writerRetries reports whether kafka-go's writer retries a produce that failed with err (the
// test of writer.go writeBatch, v0.4.51: a temporary error or a transient network one), so
// that a failed write used Config.MaxAttempts tries; otherwise it tried once (a client-side
// "topic not found", for one).
func writerRetries(err error) bool {
	var t interface{ Temporary() bool }
	if errors.As(err, &t) && t.Temporary() {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Close flushes and closes the writer. Writes after Close fail.
func (s *Sink) Close() error {
	err := s.w.Close()
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
	if err != nil {
		return fmt.Errorf("sink: close writer: %w", err)
	}
	return nil
}

// messageSize is an upper bound of the bytes m adds to a produce request, for the
// MaxMessageBytes check (kafka-go rejects a message above Writer.BatchBytes).
func messageSize(m *kafka.Message) int {
	n := len(m.Key) + len(m.Value) + messageOverhead
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value) + 10 // two varint lengths, at most 5 bytes each
	}
	return n
}
