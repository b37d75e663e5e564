package pipeline

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport"
)

// gatedStage holds the first Process after armed until release closes: the detect goroutine
// busy (a slow batch, a paused instance) while the source goes on fetching and the consumer
// group rebalancing.
type gatedStage struct {
	Stage
	mu      sync.Mutex
	armed   bool
	entered chan struct{} // closed as the first Process after arm begins
	release chan struct{}
}

func newGatedStage(s Stage) *gatedStage {
	return &gatedStage{Stage: s, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedStage) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

func (g *gatedStage) Process(ctx context.Context, b *batch.Batch) ([]*batch.Batch, error) {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(g.entered)
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	}
	return g.Stage.Process(ctx, b)
}

// TestAlertGroupOfOldGenerationRecordRealBroker: on Apache Kafka, a record fetched in one
// generation of the consumer group and scored after its partition left the instance and came
// back (the detect goroutine busy meanwhile: a slow batch, a paused process) opens an alert
// group, and the instance's records of the partition after its return fold into that alert.
// Pinned as documented ("Continuing alerts"): that alert is the instance's own, written as the
// old record is scored (a duplicate of the other member's alert of the same record, read again
// there from the group's committed offset), so the records folded into it lose no page, and
// the key has one alert more per move of its partition, no more.
//
// Member A (this process) alone reads records 0-999 of each of two partitions: its alerts of
// a0 and a1 at 900, the rest of 900-999 folded. Its detect goroutine is then held on a batch
// (1000-1009) while it fetches 1010-1699 (a<p> far again at 1600-1695): old-generation records
// once B joins. B gets one partition (P; the range balancer's choice), reads it from A's commit
// (1000), alerts for its key at 1600 (its own model, groups empty) and commits 1700, then
// stops: A alone again has both partitions, its generations consecutive, P gone and back. A's
// detect goroutine resumes: the rebalance is taken before the next batch (P's alert group of
// 900 dropped), then the old records: P's key's 1600 is an alert here and opens a group, and
// its records 1605-1795 (those of 1700-1795 read in the new generation from B's commit) fold
// into it. The other partition was A's throughout: its key's records all fold into A's alert
// of 900, however often they are read again.
//
// "away": B stays, so P stays B's. A's old records of P, scored after the rebalance, open no
// group (one would outlive the drop of P's groups) but an away group (issue 20 item 4): the
// first, 1600, is an alert (a duplicate of B's) and the other 19 flagged records the held queue
// had fold into it. Before, each was an alert of its own: 20 alerts of P's key for 20 records.
// B's alert of 1600 and its records after it folded into it are the key's from then on.
func TestAlertGroupOfOldGenerationRecordRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	t.Run("back", func(t *testing.T) { oldGenerationRecord(t, br, true) })
	t.Run("away", func(t *testing.T) { oldGenerationRecord(t, br, false) })
}

func oldGenerationRecord(t *testing.T, br testsupport.Broker, back bool) {
	ag := newAlertGen(t, br)
	ag.faults = [][2]int{{900, 1000}, {1600, 1800}}
	ag.queueBatches = 32 // (every old-generation batch fetched while detect is held waits in the queue)
	load := func(name, out string) Config {
		cfg, err := LoadConfigBytes(name+".yaml", []byte(ag.yaml(t, "b", out)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfgA, cfgB := load("a", ag.outA), load("b", ag.outB)
	cl := &kafka.Client{Addr: kafka.TCP(br.Addrs...), Timeout: 5 * time.Second}
	// Each wait is for an event (commits, the group's members, an assignment heard); 30 s
	// bounds one on a loaded 2-core machine (each takes a second or two here).
	const limit = 30 * time.Second
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(limit); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after %s", what, limit)
			}
		}
	}

	ag.produce(t, 0, 1000)
	var gate *gatedStage
	a := startPipeline(t, cfgA, func(p *Pipeline) { gate = newGatedStage(p.stage); p.stage = gate })
	defer func() {
		select {
		case <-gate.release:
		default:
			close(gate.release) // (a failure while held: the stop's drain must not wait on it)
		}
	}()
	ag.waitCommitted(t, 1000, limit)
	memberA := ag.members(t, cl, 1, limit)[0]
	gate.arm()
	ag.produce(t, 1000, 1010)
	select {
	case <-gate.entered:
	case <-time.After(limit):
		t.Fatalf("A's detect goroutine took no batch of 1000-1009 in %s", limit)
	}
	ag.produce(t, 1010, 1700)
	wait("A fetched 1000-1699 of both partitions", func() bool { return a.p.Stats().RecordsIn.Load() >= 2*1700 })

	b := startPipeline(t, cfgB, nil)
	ag.members(t, cl, 2, limit)
	moved := int32(-1) // P
	wait("B committed 1700 of its partition", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := testsupport.CommittedOffsets(ctx, br, ag.group, ag.in, 2)
		for p, off := range offs {
			if err == nil && off == 1700 {
				moved = int32(p)
			}
		}
		return moved >= 0
	})
	if back {
		if err := b.stop(t, cfgB.Run.ShutdownTimeout+10*time.Second); err != nil {
			t.Fatalf("B's graceful stop: %v", err)
		}
		if m := ag.members(t, cl, 1, limit); m[0] != memberA {
			t.Fatalf("the group's member after B's stop: %s, want A (%s)", m[0], memberA)
		}
		wait("A heard partition P back", func() bool { return a.p.scope.keep(moved) })
	} else {
		wait("A heard partition P away", func() bool { return !a.p.scope.keep(moved) && a.p.scope.keep(1-moved) })
	}
	ag.produce(t, 1700, 1800)
	close(gate.release)
	ag.waitCommitted(t, 1800, limit)
	if err := a.stop(t, cfgA.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatalf("A's graceful stop: %v", err)
	}
	if !back {
		if err := b.stop(t, cfgB.Run.ShutdownTimeout+10*time.Second); err != nil {
			t.Fatalf("B's graceful stop: %v", err)
		}
	}

	kp := fmt.Sprintf("a%d", moved)   // P's key
	kq := fmt.Sprintf("a%d", 1-moved) // the other's
	var alertP *genOutput             // A's first alert of P's key after its return
	alert900 := map[string]string{}   // A's alerts at 900, by key
	alertsA := map[string][]int{}
	foldedP := 0 // A's records of P's key read in the new generation (1700-1795) folded into alertP
	for _, o := range ag.outputs(t, ag.outA) {
		if !o.flagged {
			continue
		}
		if !o.grouped {
			alertsA[o.key] = append(alertsA[o.key], o.idx)
			if o.idx == 900 {
				alert900[o.key] = o.ts
			}
			if o.key == kp && o.idx >= 1000 && alertP == nil {
				alertP = &o
			}
			continue
		}
		switch {
		case o.key == kq && o.alertAt != alert900[kq]:
			t.Errorf("A's record %d of %s (partition %d, A's throughout) folded into the alert of %s, want its alert at 900 (%s)", o.idx, kq, 1-moved, o.alertAt, alert900[kq])
		case o.key == kp && o.idx >= 1000 && (alertP == nil || o.alertAt != alertP.ts):
			t.Errorf("A's record %d of %s (partition %d, back %v) folded into the alert of %s, want A's alert of 1600 (%+v)", o.idx, kp, moved, back, o.alertAt, alertP)
		case o.key == kp && o.idx >= 1700 && !back:
			t.Errorf("A's record %d of %s (partition %d, B's since): A read it, want B alone", o.idx, kp, moved)
		case o.key == kp && (o.idx >= 1700 || !back && o.idx > 1600):
			foldedP++
		}
	}
	if wantP := []int{900, 1600}; fmt.Sprint(alertsA[kp]) != fmt.Sprint(wantP) {
		t.Errorf("A's alerts of %s (partition %d, moved to B, back %v): at %v, want %v", kp, moved, back, alertsA[kp], wantP)
	}
	switch {
	case back && foldedP != 20:
		t.Errorf("A's records of %s read in the new generation (1700-1795) folded into its alert of 1600: %d, want 20", kp, foldedP)
	case !back && foldedP != 19:
		t.Errorf("A's records of %s of the old generation after 1600 (1605-1695) folded into its alert of 1600 (an away group): %d, want 19", kp, foldedP)
	}
	if want := []int{900}; fmt.Sprint(alertsA[kq]) != fmt.Sprint(want) {
		t.Errorf("A's alerts of %s (partition %d, A's throughout): at %v, want %v", kq, 1-moved, alertsA[kq], want)
	}
	var alertsB []int
	foldedB := 0
	for _, o := range ag.outputs(t, ag.outB) {
		switch {
		case o.flagged && !o.grouped:
			alertsB = append(alertsB, o.idx)
			if o.key != kp {
				t.Errorf("B's alert of %s at %d: want only %s's (B had partition %d alone)", o.key, o.idx, kp, moved)
			}
		case o.flagged:
			foldedB++
		}
	}
	if fmt.Sprint(alertsB) != "[1600]" {
		t.Errorf("B's alerts at %v, want [1600] (its first of %s)", alertsB, kp)
	}
	if want := map[bool]int{true: 19, false: 39}[back]; foldedB != want {
		t.Errorf("B's records folded into its alert of 1600: %d, want %d", foldedB, want)
	}
	t.Logf("partition %d moved to B (back %v); A's alerts %v, B's %v", moved, back, alertsA, alertsB)
}
