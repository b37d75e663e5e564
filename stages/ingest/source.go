package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/checkpoint"
)

// fetchLongPoll is the client's read deadline for a fetch (kafka-go's ReaderConfig.MaxWait),
// from which kafka-go derives the broker's long-poll time by subtracting an RTT allowance (1 s,
// or a quarter of the deadline when shorter). With MinBytes 1 a fetch returns as soon as any
// record exists, so this only paces idle polling; it is not the batch latency (Config.MaxWait).
// Short values leave too little margin: at 500 ms (broker waits 375 ms, client gives up at 500)
// idle fetches from Kafka 4.1 on a loaded 2-core machine hit "i/o timeout" and reconnect. Long
// values once delayed Close and rebalances, which waited for the fetches in flight (5 s made
// each take about 4 s); the fetches are now cut short then (fetch.go). 2 s: the broker holds
// an idle fetch 1 s, with 1 s of margin.
const fetchLongPoll = 2 * time.Second

// Source reads the configured topic through a consumer group and yields decoded batches.
//
// Goroutines: Next and Commit run on their callers' goroutines. Inside, kafka-go's
// ConsumerGroup keeps the membership (joins, heartbeats), and the Source fetches each assigned
// partition on a goroutine of its own, handing messages to Next in chunks (fetch.go); Close
// stops all of them and waits for them.
//
// Delivery: at least once. Every fetched message (decoded or dead letter) is registered with the
// Checkpointer, and the batch or dead letters that carry it leave Next with an ack to it
// (batch.Batch.Ack, batch.DeadLetters.Ack): whoever finishes them (the pipeline's sink loop,
// after the broker acknowledged the outputs) resolves the ack, which marks the records done, and
// Commit commits per partition only the offset below which all records are done. Nothing else
// touches the Checkpointer. After a crash or rebalance, records not committed are read again.
//
// Rebalances: when a generation ends, its partitions stop being fetched, what is done is
// committed, and chunks fetched but not yet taken are dropped (fetch.go). When the next
// generation starts, every partition is read again from its committed offset, so the records
// earlier generations left in flight are dropped from the Checkpointer (newGeneration: their
// late acks are ignored; kept partitions read them again, others are their new owners'):
// batches of them still finish here, but their offsets are never committed, which would move
// the group's offset back behind another member's. (Next also treats an offset at or below the
// last one registered for a partition as a re-read, and keepAssigned commits only partitions
// the generation holds.)
type Source struct {
	cfg   Config
	cp    *checkpoint.Checkpointer
	log   zerolog.Logger
	fetch *groupFetcher
	// reaper leaves the group for the member ids kafka-go abandons (rejoin.go).
	reaper *memberReaper
	// assigned passes each generation's partitions on (assigned.go).
	assigned *assignment

	// nextMu serialises Next and the builder's release in Close.
	nextMu  sync.Mutex
	derive  *Deriver // ingest.derive, applied in fetch order after decoding; nil: none
	held    chunk    // what is left of the chunk the last batch was filled from
	builder *Builder
	// deferred is a fetch error met after some records of a batch were already fetched: that
	// batch is returned first and the error on the following call.
	deferred error

	// genMu orders Next's registering of a chunk's records against a generation's start
	// (newGeneration): a chunk is registered only while its generation is live. It guards
	// tracked, the partitions registered with the Checkpointer since the generation started.
	genMu   sync.Mutex
	tracked map[int]bool

	// commitMu guards committed, the offset last committed per partition (so that a commit
	// sends only what moved), and commitEpoch. It is held only while they are read or written,
	// never across a request to the broker or a retry's back-off: Next (track) and a
	// generation's start (newGeneration) take it too.
	commitMu  sync.Mutex
	committed map[int]int64
	// started are the generation's partitions' committed offsets as it started (Assignment's;
	// negative: none), for Committed.
	started map[int]int64
	// commitEpoch counts the times committed was dropped (a generation started, a partition is
	// read again): a commit sent before does not write its offsets back into it.
	commitEpoch uint64
	// sending lets one commit request at a time go to the broker (a semaphore of one): each
	// request carries the offsets done when it is sent, so an older offset never follows a
	// newer one on the wire (the group's offset never moves back). It is held for one request
	// (at most kafka-go's coordinator timeout, 5 s), never across the back-off between
	// attempts, and a commit path waiting for it gives up when its context ends.
	sending chan struct{}
	// commits are the commits still running after their caller's context ended; Close waits.
	commits sync.WaitGroup
	// resume says where a partition without a committed offset starts (WithResume); nil: where
	// ingest.start_offset says.
	resume *Resume
}

// NewSource validates cfg and joins the consumer group (in the background: the first Next
// waits for the first assignment). cp tracks this source's records and must not be shared with
// another topic; alloc provides the batches' Arrow buffers; opts: WithResume.
func NewSource(cfg Config, cp *checkpoint.Checkpointer, alloc memory.Allocator, log zerolog.Logger, opts ...SourceOption) (*Source, error) {
	if cp == nil || alloc == nil {
		return nil, errors.New("ingest: NewSource needs a checkpointer and an allocator")
	}
	checked, err := cfg.Check() // once: each partition goroutine makes its own decoder from it
	if err != nil {
		return nil, fmt.Errorf("ingest: invalid config: %w", err)
	}
	derive := checked.NewDeriver()
	start := kafka.FirstOffset
	if cfg.StartOffset == StartLatest {
		start = kafka.LastOffset
	}
	log = log.With().Str("stage", "ingest").Str("topic", cfg.Topic).Str("group", cfg.GroupID).Logger()
	if derive != nil {
		log.Info().Strs("columns", cfg.Columns()[len(cfg.Features):]).Int("max_keys", cfg.Derive.MaxKeys).
			Int64("state_bound_mib", derive.StateBound(32)>>20).Msg("derived features (state bound for 32-byte keys)")
	}
	var reaper *memberReaper          // made before the group, whose logger it reads
	debugLog := kafkaDebugLogger(log) // at debug level: kafka-go's chatter, off by default
	errLog := kafkaErrorLogger(log)
	cgc := kafka.ConsumerGroupConfig{
		ID:      cfg.GroupID,
		Brokers: append([]string(nil), cfg.Brokers...),
		Topics:  []string{cfg.Topic},
		// kafka-go's Reader's defaults, as before.
		GroupBalancers:    []kafka.GroupBalancer{kafka.RangeGroupBalancer{}, kafka.RoundRobinGroupBalancer{}},
		HeartbeatInterval: cfg.HeartbeatInterval,
		SessionTimeout:    cfg.SessionTimeout,
		StartOffset:       start,
		// After a lost coordinator the group tries to join again every JoinGroupBackoff
		// (kafka-go's default 5 s): 1 s resumes within a second of the broker answering, at
		// the cost of a warning a second while it is away.
		JoinGroupBackoff: time.Second,
		// rejoin.go: the reaper reads both to finish the LeaveGroup of abandoned members.
		Logger: kafka.LoggerFunc(func(msg string, args ...any) {
			reaper.observe(msg, args)
			debugLog.Printf(msg, args...)
		}),
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			reaper.observe(msg, args)
			errLog.Printf(msg, args...)
		}),
		Dialer: kafka.DefaultDialer,
	}
	if cfg.Security.Enabled() {
		// Only then: without security the group and the fetches use kafka.DefaultDialer.
		if cgc.Dialer, err = cfg.Security.Dialer(); err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
		log.Info().Stringer("security", cfg.Security).Msg("kafka security")
	}
	if err := cgc.Validate(); err != nil {
		return nil, fmt.Errorf("ingest: consumer group config: %w", err)
	}
	var tr *kafka.Transport // the reaper's; nil: a plaintext one of its own
	if cfg.Security.Enabled() {
		if tr, err = cfg.Security.Transport(); err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
	}
	reaper = newMemberReaper(cfg.GroupID, cfg.Brokers, tr, log)
	s := &Source{
		reaper:    reaper,
		assigned:  &assignment{},
		cfg:       cfg,
		cp:        cp,
		log:       log,
		derive:    derive,
		builder:   NewBuilder(alloc, cfg.Topic, cfg.Columns(), cfg.Uncertainty != nil, cfg.BatchSize),
		committed: map[int]int64{},
		sending:   make(chan struct{}, 1),
		tracked:   map[int]bool{},
	}
	for _, o := range opts {
		o(s)
	}
	s.fetch, err = newGroupFetcher(cgc, cfg.Topic, cfg.BatchSize, cfg.FetchMaxBytes,
		func() Decoder { return checked.NewDecoder() }, cfg.NewDecoded,
		debugLog.Printf, errLog.Printf, func(member string, a Assignment) {
			reaper.generationStarted(member)
			s.newGeneration(a)
		}, s.commitRevoked, s.resume)
	if err != nil {
		reaper.close()
		s.builder.Release()
		return nil, fmt.Errorf("ingest: consumer group: %w", err)
	}
	return s, nil
}

// Next returns the next batch and the dead letters met while filling it. It blocks until at
// least one message arrives, then collects until Config.BatchSize messages or Config.MaxWait
// after the first one, whichever comes first. Either the batch (nil when every message was a
// dead letter) or the dead letters (nil when there were none) may be missing, not both. The
// caller owns both (batch's ownership rule). Every record and dead letter returned is
// registered with the Checkpointer and carries its ack: Ack once processed (a batch once its
// outputs were acknowledged, dead letters once written to the dead-letter topic); what is never
// acked is never committed.
//
// When ctx ends, or the fetch fails, after some messages were fetched, Next returns them
// (with a nil error) and reports the error on the next call; with nothing fetched it returns
// the error (ctx.Err() or a fetch error; io.EOF wrapped after Close). Not safe for concurrent
// use with itself; Commit and Close may be called concurrently.
func (s *Source) Next(ctx context.Context) (*batch.Batch, *batch.DeadLetters, error) {
	s.nextMu.Lock()
	defer s.nextMu.Unlock()
	if s.builder == nil {
		return nil, nil, fmt.Errorf("ingest: next: source closed")
	}
	if err := s.deferred; err != nil {
		s.deferred = nil
		return nil, nil, err
	}
	var (
		dead    []batch.DeadLetter
		fetched int
		fctx    = ctx // batch-window context once the first message is in
	)
	for fetched < s.cfg.BatchSize {
		if len(s.held.msgs) == 0 || s.held.gen != s.fetch.live.Load() {
			// (A revoked generation's remainder is dropped as its queued chunks are: fetch.go.)
			s.held = chunk{}
			c, err := s.fetch.next(fctx)
			if err != nil {
				if fetched > 0 && ctx.Err() == nil && fctx.Err() != nil && errors.Is(err, fctx.Err()) {
					break // MaxWait elapsed: close the batch short (a fetch error is deferred below)
				}
				if errors.Is(err, kafka.GroupAuthorizationFailed) { // (an ACL on the group, not the topic: name it)
					err = fmt.Errorf("consumer group %q (ingest.group_id; a builder's is GROUP.builder): %w", s.cfg.GroupID, err)
				}
				err = fmt.Errorf("ingest: fetch from %s: %w", s.cfg.Topic, err)
				if fetched > 0 {
					s.deferred = err
					break
				}
				return nil, nil, err
			}
			s.held = c
		}
		s.genMu.Lock()
		if s.held.gen != s.fetch.live.Load() { // its generation ended since: dropped (newGeneration)
			s.genMu.Unlock()
			s.held = chunk{}
			continue
		}
		if fetched == 0 { // the first record (a chunk never is empty): the batch window opens
			var cancel context.CancelFunc
			fctx, cancel = context.WithTimeout(ctx, s.cfg.MaxWait)
			defer cancel()
		}
		take := min(s.cfg.BatchSize-fetched, len(s.held.msgs))
		for i := range s.held.msgs[:take] {
			s.track(s.held.msgs[i].m)
		}
		s.genMu.Unlock()
		for i := range s.held.msgs[:take] {
			dead = s.appendMsg(&s.held.msgs[i], dead)
		}
		fetched += take
		s.held.msgs = s.held.msgs[take:]
		if len(s.held.msgs) == 0 {
			s.fetch.recycle(s.held.buf)
			s.held = chunk{}
		}
	}
	b := s.builder.Build()
	if b != nil {
		b.SetAck(s.cp)
	}
	var dls *batch.DeadLetters
	if len(dead) > 0 {
		dls = batch.NewDeadLetters(dead, s.cp)
	}
	return b, dls, nil
}

// codeMalformed is the Code of a dead letter whose message is not of the format (a
// SyntaxError), which has no Field; a FieldError's is its Reason's word, its Field the error's.
const codeMalformed = "malformed"

// appendMsg appends p's record to the batch being built, or a dead letter for it to dead, and
// drops p's message (the batch, or the dead letter, holds its payload).
func (s *Source) appendMsg(p *pendingMsg, dead []batch.DeadLetter) []batch.DeadLetter {
	m := p.m
	p.m = kafka.Message{}
	if err := p.err; err != nil {
		code, field := codeMalformed, "" // the decoders return a *FieldError or a *SyntaxError
		if fe := (*FieldError)(nil); errors.As(err, &fe) {
			code, field = fe.Reason.String(), fe.Field
		}
		return append(dead, batch.DeadLetter{
			Topic: m.Topic, Partition: m.Partition, Offset: m.Offset,
			Key: m.Key, Value: m.Value, Time: m.Time, Reason: err.Error(), Code: code, Field: field,
		})
	}
	key := m.Key
	if p.d.HasKey {
		key = p.key // Append copies it
	}
	ts := m.Time // the zero time: none (kafka-go reads a Kafka timestamp of 0 or less so)
	if p.d.HasEventTime {
		if s.cfg.EventTimeUnit != EventTimeSeconds && !p.d.EventTimeText && epochSeconds(p.d.EventTime, m.Time) {
			return append(dead, batch.DeadLetter{
				Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Time: m.Time,
				Reason: epochSecondsReason(s.cfg.EventTimeField, p.d.EventTime, m.Time),
				Code:   ReasonBadTime.String(), Field: s.cfg.EventTimeField,
			})
		}
		ts = time.UnixMilli(p.d.EventTime)
	}
	d := p.d
	if s.derive != nil { // here, one record after the other in fetch order (derive.go)
		if name := s.derive.NeedsTime(); name != "" && ts.IsZero() {
			// A value missing with no fill for it (ingest.missing's rule), not the wall clock
			// of year 1: the record goes to the dead-letter topic, its series stays as it was.
			return append(dead, batch.DeadLetter{
				Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value,
				Reason: fmt.Sprintf("derived feature %q: missing: the record has no time (its Kafka timestamp is -1, none, or 0)", name),
				Code:   ReasonMissing.String(), Field: name,
			})
		}
		d = s.derive.Apply(d, int32(m.Partition), m.Offset, key, ts)
	}
	if err := s.builder.Append(d, int32(m.Partition), m.Offset, key, ts, m.Value); err != nil {
		// Cannot happen with a decoder and builder made from the same config; a dead letter
		// keeps the record visible rather than dropping it (no Code: no kind a program acts on).
		dead = append(dead, batch.DeadLetter{
			Topic: m.Topic, Partition: m.Partition, Offset: m.Offset,
			Key: m.Key, Value: m.Value, Time: m.Time, Reason: err.Error(),
		})
	}
	return dead
}

// track registers a fetched message with the checkpointer, handling the re-reads that follow
// a rebalance (see Source). genMu must be held.
func (s *Source) track(m kafka.Message) {
	s.tracked[m.Partition] = true
	err := s.cp.Register(m.Partition, m.Offset)
	if err == nil {
		return
	}
	if !errors.Is(err, checkpoint.ErrOffsetRegression) {
		// Only negative coordinates fail otherwise, which Kafka never sends.
		s.log.Error().Err(err).Int("partition", m.Partition).Int64("offset", m.Offset).Msg("checkpoint refused a record")
		return
	}
	s.log.Info().Int("partition", m.Partition).Int64("offset", m.Offset).
		Msg("partition read again from an earlier offset (rebalance); dropping its in-flight state")
	s.cp.Revoke(m.Partition)
	s.commitMu.Lock()
	delete(s.committed, m.Partition)
	s.commitEpoch++
	s.commitMu.Unlock()
	if err := s.cp.Register(m.Partition, m.Offset); err != nil {
		s.log.Error().Err(err).Int("partition", m.Partition).Msg("checkpoint refused a record after revocation")
	}
}

// newGeneration is told each generation's assignment when it starts, before any is fetched, and
// drops what earlier generations left in flight: every partition is fetched again from the
// group's committed offset (the ended generation's done records were committed as it ended:
// commitRevoked), so a partition kept here is read again from there, one moved away is its new
// owner's, and one moved away and back starts where the member that had it in between
// committed, past this member's old records: committing their offsets would move the group's
// back (TestSourceNoBackwardCommitMovedBack; no offset regression shows them stale there).
// Their late acks are ignored. The assignment passed on carries, as Own, what this member had
// committed of its partitions as the one before ended.
func (s *Source) newGeneration(a Assignment) {
	s.genMu.Lock()
	for p := range s.tracked {
		s.cp.Revoke(p)
	}
	clear(s.tracked)
	s.genMu.Unlock()
	s.commitMu.Lock()
	a.Own = make([]int64, len(a.Partitions))
	for i, p := range a.Partitions { // (the previous assignment's, before they are dropped)
		a.Own[i] = -1
		if off, ok := s.started[int(p)]; ok {
			if c, ok := s.committed[int(p)]; ok {
				off = c
			}
			a.Own[i] = max(off, -1)
		}
	}
	clear(s.committed)
	s.commitEpoch++
	s.started = make(map[int]int64, len(a.Partitions))
	for i, p := range a.Partitions {
		if i < len(a.Offsets) {
			s.started[int(p)] = a.Offsets[i]
		}
	}
	s.commitMu.Unlock()
	// (once a rebalance: the moment fetching starts, after a start that may have waited for a
	// killed member's session to expire; newuser31)
	s.log.Info().Int32("generation", a.Generation).Ints32("partitions", a.Partitions).Ints64("from_offsets", a.Offsets).
		Msg("consumer group assigned this member its partitions (from_offsets: the group's committed offsets; negative: none committed, ingest.start_offset applies)")
	s.assigned.set(a)
}

// Close leaves the consumer group, stops the fetching goroutines, waits for commits in flight
// and frees the builder. A Next blocked in a fetch returns an error (io.EOF wrapped). Commit
// what is done before closing: commits after Close fail.
func (s *Source) Close() error {
	s.reaper.close() // before the group: its own LeaveGroup at Close is kafka-go's
	s.fetch.close()  // unblocks a Next waiting for a chunk
	s.commits.Wait()
	s.nextMu.Lock()
	if s.builder != nil {
		s.builder.Release()
		s.builder = nil
	}
	s.held = chunk{}
	s.nextMu.Unlock()
	return nil
}

// kafkaDebugLogger is kafka-go's Logger: its progress messages (group joins, fetches, commits:
// most of what it says) at debug, which the default level (run.log_level: info) leaves out.
func kafkaDebugLogger(log zerolog.Logger) kafka.Logger {
	return kafka.LoggerFunc(func(msg string, args ...any) { log.Debug().Str("source", "kafka-go").Msgf(msg, args...) })
}

// kafkaErrorLogger is kafka-go's ErrorLogger: what it could not do (a broker unreachable, a
// failed commit or rebalance) at warn; it retries, and errors that reach the pipeline are
// logged as such by it.
func kafkaErrorLogger(log zerolog.Logger) kafka.Logger {
	return kafka.LoggerFunc(func(msg string, args ...any) { log.Warn().Str("source", "kafka-go").Msgf(msg, args...) })
}
