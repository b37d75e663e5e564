package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/checkpoint"
	"github.com/outlierd/outlierd/internal/testsupport"
)

// Integration tests of Source: against kfake (in-process, always) and against a real Apache
// Kafka broker when KAFKA_BOOTSTRAP is set (.ci/kafka.sh start prints it).

const itPartitions = 3

// kafkaEnv is a broker to test against, with the input topic (itPartitions partitions).
type kafkaEnv struct {
	br    testsupport.Broker
	topic string
}

// kfakeEnv is an in-process kfake cluster with the topic "in".
func kfakeEnv(t testing.TB) kafkaEnv {
	t.Helper()
	topic := "in"
	return kafkaEnv{br: testsupport.KfakeBroker(t, kfake.SeedTopics(itPartitions, topic)), topic: topic}
}

// realEnv creates a fresh topic on the broker named by KAFKA_BOOTSTRAP, or skips.
func realEnv(t testing.TB) kafkaEnv {
	t.Helper()
	env := kafkaEnv{br: testsupport.RealBroker(t), topic: testsupport.UniqueName("ingest-it")}
	testsupport.CreateTopics(t, env.br, map[string]int{env.topic: itPartitions})
	return env
}

// itMessage is what the test produces: a partition, an index within it, and whether (and how)
// it is malformed.
type itMessage struct {
	p, i   int
	value  string
	reason string // expected dead-letter reason; "" when valid
}

func makeMessages(p, from, n int, withBad bool) []itMessage {
	var out []itMessage
	for i := from; i < from+n; i++ {
		m := itMessage{p: p, i: i, value: fmt.Sprintf(`{"p":%d,"i":%d,"temp":%d.5,"sensor":{"hum":%d}}`, p, i, i, p)}
		if withBad {
			switch i % 7 {
			case 2:
				m.value = fmt.Sprintf(`{"p":%d,"i":%d,"temp":"abc","sensor":{"hum":1}}`, p, i)
				m.reason = `field "temp": not a number: "abc"`
			case 4:
				m.value = fmt.Sprintf(`{"p":%d,"i":%d,"temp":1}`, p, i)
				m.reason = `field "sensor.hum": missing`
			case 6:
				m.value = fmt.Sprintf(`{"p":%d,"i":%d,"temp":1,}`, p, i)
				m.reason = fmt.Sprintf(`invalid JSON at byte %d: expected a string key`, len(m.value)-1)
			}
		}
		out = append(out, m)
	}
	return out
}

// produce writes msgs to their partitions and returns the offset of each, keyed by (p, i).
func produce(t testing.TB, env kafkaEnv, msgs []itMessage) map[[2]int]int64 {
	t.Helper()
	recs := make([]*kgo.Record, len(msgs))
	for j, m := range msgs {
		recs[j] = &kgo.Record{Topic: env.topic, Partition: int32(m.p), Key: []byte(fmt.Sprintf("k-%d-%d", m.p, m.i)), Value: []byte(m.value)}
	}
	testsupport.Produce(t, env.br, recs...)
	offsets := map[[2]int]int64{}
	for j, m := range msgs {
		offsets[[2]int{m.p, m.i}] = recs[j].Offset
	}
	return offsets
}

// committed returns the group's committed offset per partition (-1: none).
func committed(t *testing.T, env kafkaEnv, group string) map[int]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := testsupport.CommittedOffsets(ctx, env.br, group, env.topic, itPartitions)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int64{}
	for p, o := range offs {
		out[p] = o
	}
	return out
}

func itConfig(env kafkaEnv, group string) Config {
	c := Default()
	c.Brokers, c.Topic, c.GroupID = env.br.Addrs, env.topic, group
	c.Features = []string{"temp", "sensor.hum"}
	c.BatchSize = 16
	c.MaxWait = 50 * time.Millisecond
	c.HeartbeatInterval = 300 * time.Millisecond
	c.SessionTimeout = 6 * time.Second
	return c
}

// openSource is NewSource with a fresh checkpoint and Go allocator, closed at the test's end.
func openSource(t *testing.T, cfg Config) *Source {
	t.Helper()
	src, err := NewSource(cfg, checkpoint.New(), memory.NewGoAllocator(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func testLogger(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
}

// rowsOf checks a batch's columns against what was produced and returns its (partition,
// offset) pairs. It returns an error rather than failing the test: members call it from their
// own goroutines.
func rowsOf(b *batch.Batch, byOffset map[[2]int64]itMessage, batchSize int) ([][2]int64, error) {
	if b.Len() == 0 || b.Len() > batchSize || len(b.Payloads) != b.Len() {
		return nil, fmt.Errorf("batch of %d rows (%d payloads), batch size %d", b.Len(), len(b.Payloads), batchSize)
	}
	temp, hum, part, off, key := b.Feature(0), b.Feature(1), b.Partitions(), b.Offsets(), b.Keys()
	var out [][2]int64
	for r := 0; r < b.Len(); r++ {
		co := [2]int64{int64(part[r]), off[r]}
		m, ok := byOffset[co]
		if !ok {
			return nil, fmt.Errorf("row %d: partition %d offset %d was never produced", r, co[0], co[1])
		}
		if m.reason != "" {
			return nil, fmt.Errorf("row %d: malformed message %q arrived as a record", r, m.value)
		}
		var payload struct{ P, I int }
		if err := json.Unmarshal(b.Payloads[r], &payload); err != nil || payload.P != m.p || payload.I != m.i {
			return nil, fmt.Errorf("row %d (p %d, offset %d): payload %s, want p %d i %d", r, co[0], co[1], b.Payloads[r], m.p, m.i)
		}
		if temp[r] != float32(m.i)+0.5 || hum[r] != float32(m.p) || string(key.Value(r)) != fmt.Sprintf("k-%d-%d", m.p, m.i) {
			return nil, fmt.Errorf("row %d: temp %v hum %v key %q for %q", r, temp[r], hum[r], key.Value(r), m.value)
		}
		out = append(out, co)
	}
	return out, nil
}

func TestSourceKfake(t *testing.T) { testSource(t, kfakeEnv(t)) }

func TestSourceRealBroker(t *testing.T) { testSource(t, realEnv(t)) }

// testSource: a 3-partition topic with valid and malformed records. Every valid record must
// arrive once in a batch with the right coordinates and values, every malformed one as a dead
// letter with its reason; a Commit while the first batch is still unacknowledged must not pass
// it; after everything is acked, the committed offsets reach the end of every partition.
func testSource(t *testing.T, env kafkaEnv) {
	const perPartition = 40
	var msgs []itMessage
	for p := range itPartitions {
		msgs = append(msgs, makeMessages(p, 0, perPartition, true)...)
	}
	offsets := produce(t, env, msgs)
	byOffset := map[[2]int64]itMessage{}
	end := map[int]int64{}
	for _, m := range msgs {
		o := offsets[[2]int{m.p, m.i}]
		byOffset[[2]int64{int64(m.p), o}] = m
		end[m.p] = max(end[m.p], o+1)
	}

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cp := checkpoint.New()
	group := fmt.Sprintf("g-%d", time.Now().UnixNano())
	cfg := itConfig(env, group)
	src, err := NewSource(cfg, cp, mem, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	start := time.Now()
	seen := map[[2]int64]bool{}
	var held [][2]int64 // the first batch's records, acknowledged only at the end
	var heldAck func()  // acks them (through the acks Next attached), then releases
	batches, dead := 0, 0
	for len(seen) < len(msgs) {
		b, dls, err := src.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d of %d messages: %v", len(seen), len(msgs), err)
		}
		if b == nil && dls.Len() == 0 {
			t.Fatal("Next returned neither a batch nor dead letters")
		}
		var rows [][2]int64
		if b != nil {
			batches++
			rows, err = rowsOf(b, byOffset, cfg.BatchSize)
			if err != nil {
				b.Release()
				t.Fatal(err)
			}
		}
		for _, d := range dls.All() {
			co := [2]int64{int64(d.Partition), d.Offset}
			m, ok := byOffset[co]
			if !ok || m.reason == "" {
				t.Fatalf("dead letter at %v (%q): not a malformed message we produced", co, d.Reason)
			}
			if d.Reason != m.reason || string(d.Value) != m.value || d.Topic != env.topic || string(d.Key) != fmt.Sprintf("k-%d-%d", m.p, m.i) {
				t.Fatalf("dead letter %+v, want reason %q for %q", d, m.reason, m.value)
			}
			rows = append(rows, co)
			dead++
		}
		for _, co := range rows {
			if seen[co] {
				t.Fatalf("partition %d offset %d delivered twice", co[0], co[1])
			}
			seen[co] = true
		}
		ack := func() { b.Ack(); b.Release(); dls.Ack() }
		if held == nil {
			held, heldAck = rows, ack
			continue
		}
		ack()
	}
	elapsed := time.Since(start)
	wantDead := 0
	for _, m := range msgs {
		if m.reason != "" {
			wantDead++
		}
	}
	if dead != wantDead {
		t.Fatalf("%d dead letters, want %d", dead, wantDead)
	}

	// The first batch is still in flight: no partition may commit past its records.
	if _, err := src.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got := committed(t, env, group)
	for _, co := range held {
		if got[int(co[0])] > co[1] {
			t.Fatalf("partition %d committed %d past the unacknowledged offset %d", co[0], got[int(co[0])], co[1])
		}
	}
	heldAck()
	sent, err := src.Commit(ctx)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if len(sent) == 0 {
		t.Fatal("the final Commit sent nothing although the first batch was acknowledged")
	}
	if again, err := src.Commit(ctx); err != nil || again != nil {
		t.Fatalf("a Commit with nothing new sent %v (err %v)", again, err)
	}
	if got := committed(t, env, group); fmt.Sprint(got) != fmt.Sprint(end) {
		t.Fatalf("committed offsets %v, want the partition ends %v", got, end)
	}
	t.Logf("%d messages (%d dead letters) in %d batches, consumed in %v", len(msgs), dead, batches, elapsed)
	if err := src.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, _, err := src.Next(ctx); err == nil {
		t.Fatal("Next after Close returned no error")
	}
}

func TestSourceRebalanceKfake(t *testing.T) { testRebalance(t, kfakeEnv(t)) }

func TestSourceRebalanceRealBroker(t *testing.T) { testRebalance(t, realEnv(t)) }

// member is one group member consuming in its own goroutine, acking and committing every batch.
type member struct {
	src  *Source
	cp   *checkpoint.Checkpointer
	mu   sync.Mutex
	seen map[[2]int64]int
	err  error
	done chan struct{} // closed when run returns
}

// run consumes until ctx ends. Next is called with a short deadline so an idle member loops.
func (m *member) run(ctx context.Context, byOffset map[[2]int64]itMessage, batchSize int, t *testing.T) {
	defer close(m.done)
	fail := func(err error) {
		m.mu.Lock()
		m.err = err
		m.mu.Unlock()
	}
	for ctx.Err() == nil {
		nctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		b, _, err := m.src.Next(nctx)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				continue
			}
			fail(err)
			return
		}
		if b == nil {
			continue
		}
		rows, err := rowsOf(b, byOffset, batchSize)
		b.Record.Release()
		if err != nil {
			fail(err)
			return
		}
		m.mu.Lock()
		for _, co := range rows {
			m.seen[co]++
		}
		m.mu.Unlock()
		for _, co := range rows {
			m.cp.Done(int(co[0]), co[1])
		}
		if _, err := m.src.Commit(ctx); err != nil && ctx.Err() == nil {
			// A commit racing a rebalance may be refused (the generation moved on); the next
			// batch's commit carries the same offsets.
			t.Logf("commit: %v", err)
		}
	}
}

func (m *member) error() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

func (m *member) count() (int, map[[2]int64]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.seen), m.seen
}

// testRebalance: member A consumes alone, member B joins (a rebalance splits the partitions),
// both consume the rest, A leaves (B takes everything back). Every record must be delivered
// (at least once), B must have received records, and in the end the committed offsets reach
// the end of every partition.
func testRebalance(t *testing.T, env kafkaEnv) {
	var first, second []itMessage
	for p := range itPartitions {
		first = append(first, makeMessages(p, 0, 20, false)...)
		second = append(second, makeMessages(p, 20, 20, false)...)
	}
	// The topic is fresh and each half is one produce per partition, so offset = index. The
	// expectations are fixed before anything runs: the members read byOffset concurrently.
	byOffset := map[[2]int64]itMessage{}
	end := map[int]int64{}
	for _, m := range append(append([]itMessage(nil), first...), second...) {
		byOffset[[2]int64{int64(m.p), int64(m.i)}] = m
		end[m.p] = max(end[m.p], int64(m.i)+1)
	}
	checkOffsets := func(msgs []itMessage, offs map[[2]int]int64) {
		for _, m := range msgs {
			if o := offs[[2]int{m.p, m.i}]; o != int64(m.i) {
				t.Fatalf("partition %d message %d got offset %d; the test assumes a fresh topic", m.p, m.i, o)
			}
		}
	}
	checkOffsets(first, produce(t, env, first))

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	group := fmt.Sprintf("g-rebalance-%d", time.Now().UnixNano())
	cfg := itConfig(env, group)
	newMember := func() *member {
		cp := checkpoint.New()
		src, err := NewSource(cfg, cp, mem, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		// On a failed test, stop the reader's goroutines before the test ends (they log to t).
		// Close is idempotent.
		t.Cleanup(func() { src.Close() })
		return &member{src: src, cp: cp, seen: map[[2]int64]int{}, done: make(chan struct{})}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()

	a := newMember()
	actx, stopA := context.WithCancel(ctx)
	go a.run(actx, byOffset, cfg.BatchSize, t)
	waitFor(t, ctx, "A consumes the first records", func() bool { n, _ := a.count(); return n >= 20 })

	b := newMember()
	bctx, stopB := context.WithCancel(ctx)
	go b.run(bctx, byOffset, cfg.BatchSize, t)
	// Let B join (A notices the rebalance at its next heartbeat) before producing the rest.
	waitFor(t, ctx, "B joins and is assigned partitions", func() bool {
		return groupMembers(t, env, group) == 2
	})
	checkOffsets(second, produce(t, env, second))
	union := func() map[[2]int64]bool {
		u := map[[2]int64]bool{}
		for _, m := range []*member{a, b} {
			_, s := m.count()
			m.mu.Lock()
			for co := range s {
				u[co] = true
			}
			m.mu.Unlock()
		}
		return u
	}
	if !waitUntil(ctx, func() bool { return len(union()) == len(byOffset) }) {
		u := union()
		var missing [][2]int64
		for co := range byOffset {
			if !u[co] {
				missing = append(missing, co)
			}
		}
		na, _ := a.count()
		nb, _ := b.count()
		t.Fatalf("timed out: %d of %d records delivered (A %d, B %d; errors %v, %v); missing %v",
			len(u), len(byOffset), na, nb, a.error(), b.error(), missing)
	}
	nb, _ := b.count()
	if nb == 0 {
		t.Fatal("member B received no records: no rebalance happened")
	}

	// A leaves: stop its loop (so Close does not race its last Commit), then close it, which
	// leaves the group. B takes A's partitions and re-reads whatever A had not committed.
	stopA()
	<-a.done
	if err := a.src.Close(); err != nil {
		t.Errorf("close A: %v", err)
	}
	waitFor(t, ctx, "committed offsets reach the partition ends", func() bool {
		return fmt.Sprint(committed(t, env, group)) == fmt.Sprint(end)
	})
	stopB()
	<-b.done
	if err := b.src.Close(); err != nil {
		t.Errorf("close B: %v", err)
	}
	for i, m := range []*member{a, b} {
		if m.err != nil {
			t.Errorf("member %c: %v", 'A'+i, m.err)
		}
	}
	na, _ := a.count()
	nb, _ = b.count()
	t.Logf("%d records: A saw %d, B saw %d (re-deliveries included), in %v", len(byOffset), na, nb, time.Since(start))
}

// groupMembers returns the number of members of group with a partition assignment.
func groupMembers(t *testing.T, env kafkaEnv, group string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl := &kafka.Client{Addr: kafka.TCP(env.br.Addrs...), Timeout: 5 * time.Second}
	res, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil || len(res.Groups) != 1 || res.Groups[0].Error != nil || res.Groups[0].GroupState != "Stable" {
		return 0
	}
	n := 0
	for _, m := range res.Groups[0].Members {
		if len(m.MemberAssignments.Topics) > 0 {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	if !waitUntil(ctx, cond) {
		t.Fatalf("timed out waiting until %s", what)
	}
}

// waitUntil polls cond until it holds (true) or ctx ends (false).
func waitUntil(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

// TestSourceBatchEdges (kfake): a batch closes on MaxWait short of BatchSize (otherwise Next
// would block until the test's deadline), a window of only malformed messages yields no batch
// but dead letters, the event-time and key fields replace the Kafka ones, and a cancelled
// context ends a Next that has nothing.
func TestSourceBatchEdges(t *testing.T) {
	env := kfakeEnv(t)
	msgs := []itMessage{
		{p: 0, i: 0, value: `{"temp":1.5,"sensor":{"hum":2},"id":"dev-a","ts":"2026-11-21T05:00:00Z"}`},
		{p: 0, i: 1, value: `{"temp":2.5,"sensor":{"hum":3},"id":7,"ts":1700000000123}`},
	}
	produce(t, env, msgs)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cp := checkpoint.New()
	cfg := itConfig(env, fmt.Sprintf("g-edges-%d", time.Now().UnixNano()))
	cfg.BatchSize = 1000
	cfg.KeyField, cfg.EventTimeField = "id", "ts"
	src, err := NewSource(cfg, cp, mem, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var rows int
	var keys []string
	var times []int64
	for rows < 2 {
		b, dls, err := src.Next(ctx)
		if err != nil || dls.Len() != 0 || b == nil {
			t.Fatalf("Next: batch %v, %d dead letters, err %v", b, dls.Len(), err)
		}
		k, ts := b.Keys(), b.Timestamps()
		for r := 0; r < b.Len(); r++ {
			keys = append(keys, string(k.Value(r)))
			times = append(times, int64(ts.Value(r)))
		}
		rows += b.Len()
		b.Release()
	}
	if fmt.Sprint(keys) != "[dev-a 7]" || fmt.Sprint(times) != fmt.Sprint([]int64{tsMS, 1700000000123}) {
		t.Fatalf("keys %v, times %v", keys, times)
	}

	produce(t, env, []itMessage{{p: 1, i: 0, value: `not json`}, {p: 1, i: 1, value: `{"temp":1}`}})
	var dead []batch.DeadLetter
	for len(dead) < 2 {
		b, dls, err := src.Next(ctx)
		if err != nil || b != nil {
			t.Fatalf("Next over malformed messages: batch %v, err %v", b, err)
		}
		dead = append(dead, dls.All()...)
	}
	if dead[0].Reason != "invalid JSON at byte 0: expected a JSON object" || dead[1].Reason != `field "sensor.hum": missing` || dead[1].Partition != 1 || dead[1].Offset != 1 {
		t.Fatalf("dead letters %+v", dead)
	}
	if dead[0].Code != "malformed" || dead[1].Code != "missing" { // the words of outlierd-reason
		t.Fatalf("dead letters' codes %q, %q; want malformed, missing", dead[0].Code, dead[1].Code)
	}
	if dead[0].Field != "" || dead[1].Field != "sensor.hum" { // outlierd-field: the configured path, none for syntax
		t.Fatalf("dead letters' fields %q, %q; want none, sensor.hum", dead[0].Field, dead[1].Field)
	}
	if got := cp.Pending(0) + cp.Pending(1); got != 4 {
		t.Fatalf("%d records pending in the checkpointer, want 4 (every fetched message is registered)", got)
	}

	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, _, err := src.Next(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: %v", err)
	}
}
