package pipeline

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/checkpoint"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/pipeline/metrics"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/microcluster"
)

// The drain, the commit and the retries of Run, with fakes of Source, Stage and Sink
// (stages.go): no Kafka. The fake source registers its records with a real Checkpointer, as
// ingest.Source does, and records every ack; its Commit records what would be committed.

// loopCoord is a record's (partition, offset).
type loopCoord [2]int64

// step is one Next of the fake source: n records of partition part from offset first, then d
// dead letters at the offsets after them.
type step struct {
	part     int
	first    int64
	n, d     int
	deadOnly bool // no records, only the d dead letters
}

// recordingAcker is the source's Checkpointer, counting every ack.
type recordingAcker struct {
	cp    *checkpoint.Checkpointer
	mu    sync.Mutex
	acked map[loopCoord]int
}

func (a *recordingAcker) Done(partition int, offset int64) bool {
	a.mu.Lock()
	a.acked[loopCoord{int64(partition), offset}]++
	a.mu.Unlock()
	return a.cp.Done(partition, offset)
}

type fakeSource struct {
	t       *testing.T
	mem     memory.Allocator
	ack     *recordingAcker
	mu      sync.Mutex
	plan    []step
	fetched []loopCoord // every record and dead letter handed out
	commits []map[int]int64
	drained chan struct{} // closed once the plan is handed out
}

func newFakeSource(t *testing.T, mem memory.Allocator, plan []step) *fakeSource {
	return &fakeSource{t: t, mem: mem, plan: plan, drained: make(chan struct{}),
		ack: &recordingAcker{cp: checkpoint.New(), acked: map[loopCoord]int{}}}
}

func (s *fakeSource) Next(ctx context.Context) (*batch.Batch, *batch.DeadLetters, error) {
	s.mu.Lock()
	if len(s.plan) == 0 {
		s.mu.Unlock()
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
		<-ctx.Done()
		return nil, nil, ctx.Err()
	}
	st := s.plan[0]
	s.plan = s.plan[1:]
	defer s.mu.Unlock()
	var b *batch.Batch
	if !st.deadOnly {
		rb := array.NewRecordBuilder(s.mem, batch.Schema([]string{"x"}, false))
		defer rb.Release()
		payloads := make([][]byte, st.n)
		for i := range st.n {
			off := st.first + int64(i)
			rb.Field(0).(*array.Float32Builder).Append(float32(off))
			rb.Field(1).(*array.Int32Builder).Append(int32(st.part))
			rb.Field(2).(*array.Int64Builder).Append(off)
			rb.Field(3).(*array.BinaryBuilder).AppendNull()
			rb.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(off))
			payloads[i] = []byte("{}")
			s.register(st.part, off)
		}
		var err error
		if b, err = batch.New("in", []string{"x"}, rb.NewRecord(), payloads); err != nil {
			s.t.Fatal(err)
		}
		b.SetAck(s.ack)
	}
	var dls *batch.DeadLetters
	if st.d > 0 {
		var letters []batch.DeadLetter
		for i := range st.d {
			off := st.first + int64(st.n+i)
			letters = append(letters, batch.DeadLetter{Topic: "in", Partition: st.part, Offset: off, Reason: "test"})
			s.register(st.part, off)
		}
		dls = batch.NewDeadLetters(letters, s.ack)
	}
	return b, dls, nil
}

func (s *fakeSource) register(part int, off int64) {
	if err := s.ack.cp.Register(part, off); err != nil {
		s.t.Error(err)
	}
	s.fetched = append(s.fetched, loopCoord{int64(part), off})
}

func (s *fakeSource) Commit(context.Context) (map[int]int64, error) {
	c := s.ack.cp.Committable()
	s.mu.Lock()
	s.commits = append(s.commits, c)
	s.mu.Unlock()
	return c, nil
}

func (s *fakeSource) Close() error { return nil }

// lastCommit is the last commit's map (nil without any).
func (s *fakeSource) lastCommit() map[int]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.commits) == 0 {
		return nil
	}
	return s.commits[len(s.commits)-1]
}

// fakeStage scores every record (Scored, not an outlier) and holds nothing.
type fakeStage struct{ win *microcluster.Window }

func (f *fakeStage) Process(_ context.Context, b *batch.Batch) ([]*batch.Batch, error) {
	b.Scores = make([]batch.Score, b.Len())
	for i := range b.Scores {
		b.Scores[i].Scored = true
	}
	return []*batch.Batch{b}, nil
}
func (f *fakeStage) FlushContext(context.Context) ([]*batch.Batch, error) { return nil, nil }
func (f *fakeStage) Model() *detect.Model                                 { return nil }
func (f *fakeStage) Window() *microcluster.Window                         { return f.win }
func (f *fakeStage) KeyStats() detect.KeyStats                            { return detect.KeyStats{} }
func (f *fakeStage) AlertGroupEvictions() uint64                          { return 0 }
func (f *fakeStage) AlertFoldedLost() uint64                              { return 0 }
func (f *fakeStage) CloseContext(context.Context)                         {}
func (f *fakeStage) AbandonContext(context.Context)                       {}

// fakeSink records what it acknowledged; fail, when set, decides each write's outcome (call
// counts from 1 over both kinds of write).
type fakeSink struct {
	t     *testing.T
	delay time.Duration
	fail  func(call int, b *batch.Batch) error
	mu    sync.Mutex
	calls int
	// inFlight counts the writes under way, maxInFlight the most at once.
	inFlight, maxInFlight int
	written               map[loopCoord]int // records whose outputs were acknowledged
	dead                  map[loopCoord]int // dead letters acknowledged
}

func newFakeSink(t *testing.T) *fakeSink {
	return &fakeSink{t: t, written: map[loopCoord]int{}, dead: map[loopCoord]int{}}
}

func (s *fakeSink) try(ctx context.Context, b *batch.Batch) error {
	s.mu.Lock()
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	s.calls++
	call := s.calls
	s.mu.Unlock()
	if s.fail != nil {
		return s.fail(call, b)
	}
	return nil
}

func (s *fakeSink) Write(ctx context.Context, b *batch.Batch) error {
	if !b.Resolved() || len(b.Scores) != b.Len() {
		s.t.Errorf("sink got a batch released or not scored (resolved %v, %d scores, %d rows)", b.Resolved(), len(b.Scores), b.Len())
	}
	if err := s.try(ctx, b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	parts, offs := b.Partitions(), b.Offsets()
	for i := range parts {
		s.written[loopCoord{int64(parts[i]), offs[i]}]++
	}
	return nil
}

func (s *fakeSink) WriteDeadLetters(ctx context.Context, dls []batch.DeadLetter) error {
	if err := s.try(ctx, nil); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range dls {
		s.dead[loopCoord{int64(d.Partition), d.Offset}]++
	}
	return nil
}

func (s *fakeSink) Close() error { return nil }

// loopPipeline is a Pipeline of the fakes, as New would wire it (role all, CPU). The
// periodic commit is off (an hour) unless a test sets it: the final commit alone must cover
// the drain.
func loopPipeline(t *testing.T, src Source, snk Sink, tweak func(*Config)) *Pipeline {
	t.Helper()
	cfg := Default()
	cfg.Ingest.Topic, cfg.Sink.Topic, cfg.Sink.DeadLetterTopic = "in", "out", "dlq"
	cfg.Run.QueueBatches, cfg.Run.CommitInterval, cfg.Run.ShutdownTimeout = 2, time.Hour, 5*time.Second
	cfg.Sink.MaxAttempts = 3
	if tweak != nil {
		tweak(&cfg)
	}
	win, err := microcluster.New(16, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := OpenDevice("cpu", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return &Pipeline{cfg: cfg, log: zerolog.Nop(), role: detect.RoleAll, src: src, stage: &fakeStage{win: win}, snk: snk,
		dev: dev, metrics: metrics.New(), reconf: make(chan reconfRequest), detectDone: make(chan struct{})}
}

// runUntilDrained runs p, makes the soft stop once the source handed out its plan, and returns
// Run's error.
func runUntilDrained(t *testing.T, p *Pipeline, src *fakeSource) error {
	t.Helper()
	_, err := stopWhenDrained(t, p, src)
	return err
}

// stopWhenDrained is runUntilDrained, returning too how long Run took from the soft stop (0
// when it returned before it).
func stopWhenDrained(t *testing.T, p *Pipeline, src *fakeSource) (time.Duration, error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-src.drained:
		stop()
	case err := <-done:
		return 0, err
	case <-time.After(20 * time.Second):
		t.Fatal("the source's plan was not fetched within 20 s")
	}
	t0 := time.Now()
	select {
	case err := <-done:
		return time.Since(t0), err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20 s of the soft stop")
		return 0, nil
	}
}

// onePartitionPlan is batches batches of n records each, in order on partition 0 from offset 0.
func onePartitionPlan(batches, n int) []step {
	var plan []step
	for i := range batches {
		plan = append(plan, step{part: 0, first: int64(n * i), n: n})
	}
	return plan
}

// plan8 is 8 batches of 5 records over partitions 0 and 1, with dead letters among them.
func plan8() []step {
	var plan []step
	next := map[int]int64{}
	for i := range 8 {
		st := step{part: i % 2, first: next[i%2], n: 5}
		if i%3 == 0 {
			st.d = 2
		}
		plan = append(plan, st)
		next[i%2] += int64(st.n + st.d)
	}
	plan = append(plan, step{part: 0, first: next[0], d: 3, deadOnly: true})
	return plan
}

// TestLoopsDrainAtSoftStop: with a slow sink, batches are still queued when the soft stop
// comes; every fetched record is scored, written and acked exactly once, every dead letter
// written by the sink and acked, the final commit covers all of them, and every Arrow record
// is released.
func TestLoopsDrainAtSoftStop(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newFakeSource(t, mem, plan8())
	snk := newFakeSink(t)
	snk.delay = 20 * time.Millisecond // the soft stop finds batches in the queues
	p := loopPipeline(t, src, snk, nil)
	if err := runUntilDrained(t, p, src); err != nil {
		t.Fatalf("Run after the soft stop: %v", err)
	}
	end := map[int]int64{}
	for _, c := range src.fetched {
		if snk.written[c]+snk.dead[c] != 1 {
			t.Errorf("record %v: written %d times, dead-lettered %d times, want once", c, snk.written[c], snk.dead[c])
		}
		if src.ack.acked[c] != 1 {
			t.Errorf("record %v acked %d times, want once", c, src.ack.acked[c])
		}
		end[int(c[0])] = max(end[int(c[0])], c[1]+1)
	}
	if got := src.lastCommit(); len(got) != len(end) || got[0] != end[0] || got[1] != end[1] {
		t.Errorf("final commit %v, want %v (everything fetched)", got, end)
	}
	if n := p.stats.DeadLetters.Load(); n != int64(len(snk.dead)) || n == 0 {
		t.Errorf("%d dead letters counted, %d written", n, len(snk.dead))
	}
}

// refused is an error the broker answers with (retriable, counted against max_attempts).
var refused = kafka.NotEnoughReplicas

// unreachableErr is a write that could not reach the broker (retried, never counted).
var unreachableErr = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// TestLoopsSinkWriters: run.sink_writers batches are written at once (a write waits for the
// broker), and with 1 one at a time; either way every record is written and acked once and the
// final commit covers them all (acks out of order commit only the done prefix).
func TestLoopsSinkWriters(t *testing.T) {
	for _, writers := range []int{1, 3} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		var plan []step
		for i := range 12 {
			plan = append(plan, step{part: i % 2, first: int64(5 * (i / 2)), n: 5})
		}
		src := newFakeSource(t, mem, plan)
		snk := newFakeSink(t)
		snk.delay = 20 * time.Millisecond
		p := loopPipeline(t, src, snk, func(c *Config) { c.Run.SinkWriters, c.Run.QueueBatches = writers, 4 })
		if err := runUntilDrained(t, p, src); err != nil {
			t.Fatalf("writers=%d: Run: %v", writers, err)
		}
		if snk.maxInFlight != writers {
			t.Errorf("writers=%d: %d writes at once at most", writers, snk.maxInFlight)
		}
		if len(snk.written) != 60 {
			t.Errorf("writers=%d: %d records written, want 60", writers, len(snk.written))
		}
		for c, n := range src.ack.acked {
			if n != 1 {
				t.Errorf("writers=%d: record %v acked %d times", writers, c, n)
			}
		}
		if last := src.lastCommit(); last[0] != 30 || last[1] != 30 {
			t.Errorf("writers=%d: final commit %v, want both partitions at 30", writers, last)
		}
		mem.AssertSize(t, 0)
	}
}

// TestLoopsCommitOnlyAcked: the third batch's write is refused every time; the run ends with
// that error after sink.max_attempts refusals, and no commit, periodic (every 5 ms) or final,
// ever passes the first record of that batch: only acked offsets are committed.
func TestLoopsCommitOnlyAcked(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	plan := []step{{part: 0, first: 0, n: 5}, {part: 0, first: 5, n: 5}, {part: 0, first: 10, n: 5}, {part: 0, first: 15, n: 5}}
	src := newFakeSource(t, mem, plan)
	snk := newFakeSink(t)
	snk.fail = func(_ int, b *batch.Batch) error {
		if b != nil && b.Offsets()[0] == 10 {
			return refused
		}
		return nil
	}
	p := loopPipeline(t, src, snk, func(c *Config) { c.Run.CommitInterval = 5 * time.Millisecond })
	err := runUntilDrained(t, p, src)
	if err == nil || !errors.Is(err, kafka.NotEnoughReplicas) || !strings.Contains(err.Error(), "gave up after 3 attempts") {
		t.Fatalf("Run: %v, want the refusal after 3 attempts (sink.max_attempts)", err)
	}
	for _, c := range src.commits {
		if c[0] > 10 {
			t.Fatalf("committed partition 0 at %d, past the failed batch at 10 (commits %v)", c[0], src.commits)
		}
	}
	for c, n := range src.ack.acked {
		if c[1] >= 10 && c[1] < 15 {
			t.Errorf("record %v of the failed batch acked %d times", c, n)
		}
	}
	if snk.written[loopCoord{0, 10}] != 0 {
		t.Error("the refused batch counted as written")
	}
}

// TestLoopsRetryTransient: writes that cannot reach the broker (any number) and refusals
// below sink.max_attempts are retried; every record is then written, acked and committed.
func TestLoopsRetryTransient(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	plan := []step{{part: 0, first: 0, n: 5, d: 1}, {part: 1, first: 0, n: 5}, {part: 0, first: 6, n: 5}}
	src := newFakeSource(t, mem, plan)
	snk := newFakeSink(t)
	// Calls 1-3 fail unreachable (uncounted), 4-5 are refused (2 < max_attempts 3): the first
	// item (the dead letter) goes through at call 6; then every fifth call is refused once.
	snk.fail = func(call int, _ *batch.Batch) error {
		switch {
		case call <= 3:
			return unreachableErr
		case call <= 5:
			return refused
		case call%5 == 0:
			return refused
		}
		return nil
	}
	p := loopPipeline(t, src, snk, nil)
	if err := runUntilDrained(t, p, src); err != nil {
		t.Fatalf("Run: %v, want nil (the failures were transient)", err)
	}
	for _, c := range src.fetched {
		if snk.written[c]+snk.dead[c] != 1 || src.ack.acked[c] != 1 {
			t.Errorf("record %v: written %d, dead-lettered %d, acked %d times; want once", c, snk.written[c], snk.dead[c], src.ack.acked[c])
		}
	}
	if got := src.lastCommit(); got[0] != 11 || got[1] != 5 {
		t.Errorf("final commit %v, want map[0:11 1:5]", got)
	}
	if snk.calls < 8 {
		t.Errorf("%d write calls: the failures were not retried", snk.calls)
	}
}

// TestLoopsHardStopAbandons: the second batch's write never reaches the broker (retried
// without end); the soft stop cannot drain it, so past run.shutdown_timeout the hard stop
// abandons it: Run returns the timeout, the batch is never acked (its offsets stay
// uncommitted, re-read after a restart) and every record is released.
func TestLoopsHardStopAbandons(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	plan := []step{{part: 0, first: 0, n: 5}, {part: 0, first: 5, n: 5}, {part: 0, first: 10, n: 5}}
	src := newFakeSource(t, mem, plan)
	snk := newFakeSink(t)
	snk.fail = func(_ int, b *batch.Batch) error {
		if b == nil || b.Offsets()[0] >= 5 {
			return unreachableErr
		}
		return nil
	}
	p := loopPipeline(t, src, snk, func(c *Config) { c.Run.ShutdownTimeout = 300 * time.Millisecond })
	start := time.Now()
	err := runUntilDrained(t, p, src)
	if err == nil || !strings.Contains(err.Error(), "shutdown timeout") {
		t.Fatalf("Run: %v, want the shutdown timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v to give up (shutdown timeout 300 ms)", d)
	}
	for c, n := range src.ack.acked {
		if c[1] >= 5 {
			t.Errorf("abandoned record %v acked %d times", c, n)
		}
	}
	if got := src.ack.cp.Committable(); got[0] != 5 {
		t.Errorf("committable %v, want partition 0 at 5 (the first batch only)", got)
	}
	for _, c := range src.commits {
		if c[0] > 5 {
			t.Errorf("committed %v past the acked records", c)
		}
	}
}

// lagStage is a stage that overlaps batches as detect.Stage does on a GPU (Deps.Overlap): Process
// returns the batch before the one it is given, Drain, LandScored and Flush the one it holds
// (scored at once: Landing is closed while it holds one).
type lagStage struct {
	fakeStage
	held *batch.Batch
}

func (l *lagStage) Process(ctx context.Context, b *batch.Batch) ([]*batch.Batch, error) {
	if _, err := l.fakeStage.Process(ctx, b); err != nil {
		return nil, err
	}
	prev := l.held
	l.held = b
	if prev == nil {
		return nil, nil
	}
	return []*batch.Batch{prev}, nil
}
func (l *lagStage) Drain() ([]*batch.Batch, error) {
	if l.held == nil {
		return nil, nil
	}
	b := l.held
	l.held = nil
	return []*batch.Batch{b}, nil
}
func (l *lagStage) FlushContext(context.Context) ([]*batch.Batch, error) { return l.Drain() }
func (l *lagStage) Landing() <-chan struct{} {
	if l.held == nil {
		return nil
	}
	return closedChan // scored at once: it goes on when no batch waits first
}
func (l *lagStage) LandScored() ([]*batch.Batch, error) { return l.Drain() }
func (l *lagStage) AbandonContext(context.Context) {
	if l.held != nil {
		l.held.Release()
		l.held = nil
	}
}

// TestLoopsDrainOverlappedStage: with a stage that keeps a batch in flight, the detect loop
// passes it on as soon as no batch waits, without the next batch or the stop: every record is
// written while the pipeline still runs (overlap adds no latency to a stream that keeps up).
func TestLoopsDrainOverlappedStage(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newFakeSource(t, mem, plan8())
	snk := newFakeSink(t)
	p := loopPipeline(t, src, snk, nil)
	p.stage = &lagStage{fakeStage: fakeStage{win: p.stage.Window()}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitAllWritten(t, src, snk, "the batch in flight waited for the next batch or the stop")
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// scoringStage keeps up to four batches in flight as detect.Stage does on a GPU; their scoring
// (the device's) ends only when scored is closed. Landing and LandScored are detect.Stage's:
// a batch goes on once scored; Drain, like detect.Stage's, waits for the scoring.
type scoringStage struct {
	fakeStage
	scored    chan struct{}
	mu        sync.Mutex
	processed int
	flight    []*batch.Batch
}

func (s *scoringStage) Process(ctx context.Context, b *batch.Batch) ([]*batch.Batch, error) {
	if _, err := s.fakeStage.Process(ctx, b); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.processed++
	s.mu.Unlock()
	s.flight = append(s.flight, b)
	var out []*batch.Batch
	for len(s.flight) > 4 { // the oldest must land: its scoring is waited for
		<-s.scored
		out, s.flight = append(out, s.flight[0]), s.flight[1:]
	}
	return out, nil
}
func (s *scoringStage) Landing() <-chan struct{} {
	if len(s.flight) == 0 {
		return nil
	}
	return s.scored
}
func (s *scoringStage) LandScored() ([]*batch.Batch, error) {
	select {
	case <-s.scored:
		out := s.flight
		s.flight = nil
		return out, nil
	default:
		return nil, nil
	}
}
func (s *scoringStage) Drain() ([]*batch.Batch, error) {
	if len(s.flight) > 0 {
		<-s.scored
	}
	out := s.flight
	s.flight = nil
	return out, nil
}
func (s *scoringStage) FlushContext(context.Context) ([]*batch.Batch, error) { return s.Drain() }
func (s *scoringStage) AbandonContext(context.Context) {
	for _, b := range s.flight {
		b.Release()
	}
	s.flight = nil
}

// slowSource hands out its plan's batches delay apart (a fetch slower than the stage).
type slowSource struct {
	*fakeSource
	delay time.Duration
}

func (s slowSource) Next(ctx context.Context) (*batch.Batch, *batch.DeadLetters, error) {
	time.Sleep(s.delay)
	return s.fakeSource.Next(ctx)
}

// TestLoopsIntakeWhileScoring: while the batches in flight are still being scored (the device
// busy), the detect loop goes on taking the next batches: it waits for the oldest batch's
// scoring or the next batch, whichever comes first, and never for the scoring alone while a
// batch may arrive (docs/BENCHMARKS.md §4.9: the pipeline's intake and the device's work
// serialised whenever the fetched queue was momentarily empty). Then, once scored, every
// record is written while the pipeline still runs.
func TestLoopsIntakeWhileScoring(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newFakeSource(t, mem, plan8())
	snk := newFakeSink(t)
	p := loopPipeline(t, slowSource{src, 20 * time.Millisecond}, snk, nil)
	st := &scoringStage{fakeStage: fakeStage{win: p.stage.Window()}, scored: make(chan struct{})}
	p.stage = st
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	processed := func() int { st.mu.Lock(); defer st.mu.Unlock(); return st.processed }
	// Four batches fit in flight; the detect loop must take all four while the first is
	// being scored (the source hands one out every 20 ms: the queue is empty between them).
	for deadline := time.Now().Add(10 * time.Second); processed() < 4; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(st.scored)
			t.Fatalf("%d batches taken in 10 s while the first was being scored, want 4: the detect loop waited for the scoring instead of the next batch", processed())
		}
	}
	close(st.scored)
	waitAllWritten(t, src, snk, "a scored batch waited for the next batch or the stop")
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// waitAllWritten waits for src to hand out its plan, then for every record and dead letter it
// handed out to be written exactly once while the pipeline still runs; why says what it means
// when they are not, 5 s after the last fetch.
func waitAllWritten(t *testing.T, src *fakeSource, snk *fakeSink, why string) {
	t.Helper()
	select {
	case <-src.drained:
	case <-time.After(20 * time.Second):
		t.Fatal("the source's plan was not fetched within 20 s")
	}
	all := func() bool {
		snk.mu.Lock()
		defer snk.mu.Unlock()
		src.mu.Lock()
		defer src.mu.Unlock()
		for _, c := range src.fetched {
			if snk.written[c]+snk.dead[c] != 1 {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(5 * time.Second); !all(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("records still unwritten 5 s after the last fetch: " + why)
		}
	}
}

// TestDeadLettersAreLogged: dead letters show in the log (a warning naming the dead-letter
// topic, the latest one's source and reason), at the first and then at most once per
// deadLetterLogEvery, not once per batch; before, nothing in the log said that records were
// being dead-lettered, and a stream of nothing else read as "holding 0 of min_records".
func TestDeadLettersAreLogged(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newFakeSource(t, mem, plan8())
	snk := newFakeSink(t)
	p := loopPipeline(t, src, snk, nil)
	var logs testsupport.LogBuffer
	p.log = zerolog.New(&logs)
	if err := runUntilDrained(t, p, src); err != nil {
		t.Fatal(err)
	}
	lines := logs.Lines("went to the dead-letter topic")
	if len(snk.dead) < 3 || len(lines) != 1 {
		t.Fatalf("%d dead letters written, %d log lines about them (want 1):\n%s", len(snk.dead), len(lines), logs.String())
	}
	for _, want := range []string{`"level":"warn"`, `"topic":"dlq"`, `"latest":"in/`, `"reason":"test"`, `"dead_letters":`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the line lacks %s: %s", want, lines[0])
		}
	}
}
