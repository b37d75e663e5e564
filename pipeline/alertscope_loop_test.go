package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
)

// TestRebalanceReadBeforeNextBatch: the detect goroutine reads a pending rebalance signal
// before it scores the next fetched batch. The fetch of a generation starts only after its
// assignment signalled (ingest: the group's callback returns first), so a batch of a partition
// that left and came back is scored after the drop of that partition's alert groups: its key's
// flagged record is a new alert, not folded into this instance's alert of before the move
// (another instance owned the key meanwhile). With the signal and the batch both ready, the
// detect loop's select picks either: before, about half of the trials folded the record into
// the old alert.
func TestRebalanceReadBeforeNextBatch(t *testing.T) {
	if folded, trials := rebalanceTrials(t, 0, false); folded > 0 {
		t.Errorf("%d of %d trials: the record of the partition back after a move folded into the alert of before the move (the batch scored before the rebalance signal was read)", folded, trials)
	}
}

// TestRebalanceAfterBatchesInFlight: overlapped (detect.Deps.Overlap, as on a GPU), the batches
// in flight at a rebalance (fetched before it) finish before the alert groups of the partitions
// that left are dropped: a group their records open goes with the others. Before, a batch in
// flight that finished after the drop (its partition back by then) opened a group of before
// the move, and the key's next record folded into it.
func TestRebalanceAfterBatchesInFlight(t *testing.T) {
	if folded, trials := rebalanceTrials(t, detect.OverlapOnGPU, false); folded > 0 {
		t.Errorf("%d of %d trials: the record of the partition back after a move folded into the alert of a record in flight at the move", folded, trials)
	}
}

// TestMissedGenerationDropsAlertGroups: through the detect loop, a key's alert group goes when
// the instance missed a generation of its consumer group (its next assignment two after the
// one before: its session expired, and the group went on without it), though that assignment
// names the same partitions: another member may have owned the key's partition in the missed
// generation and alerted for it (the committed offsets not known here: the offsets' rule of
// keyScope.stayed cannot keep it). The key's next flagged record is a new alert. Before, the
// partitions alone were compared (none left): it folded into the alert of before, in every
// trial.
func TestMissedGenerationDropsAlertGroups(t *testing.T) {
	if folded, trials := rebalanceTrials(t, 0, true); folded > 0 {
		t.Errorf("%d of %d trials: the record after a missed generation folded into the alert of before it", folded, trials)
	}
}

// rebalanceTrials runs trials of a key's far record on partition 0, that partition moving
// away and back (missed: a generation missed, the next assignment the same partitions), and
// the key's next far record (a new alert: another instance owned the key meanwhile) fetched
// after it, through the detect loop with the rebalance signal pending, and returns how many
// trials folded that record into the alert of before the move. overlap is
// detect.Deps.Overlap (the first record is still in flight when the loop starts).
func rebalanceTrials(t *testing.T, overlap int, missed bool) (folded, trials int) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := detect.Default()
	cfg.Window, cfg.MinRecords, cfg.Distance.N = 5000, 1000, 5
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	cfg.AlertCooldown = 10 * time.Minute
	dev, err := accel.Open("cpu", zerolog.Nop(), accel.Options{}) // (overlap takes an accelerator: the CPU's here)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	det, err := detect.NewStage(cfg, []string{"value"}, false, detect.Deps{Log: zerolog.Nop(), Role: detect.RoleAll, Accelerator: dev, Overlap: overlap})
	if err != nil {
		t.Fatal(err)
	}
	defer det.Close()
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	off := int64(0)
	mk := func(at time.Duration, rows ...testbatch.Row) *batch.Batch {
		for i := range rows {
			rows[i].Offset, rows[i].Time = off, t0.Add(at)
			off++
		}
		return testbatch.New(t, mem, "in", []string{"value"}, false, false, rows)
	}
	scores := map[int64]batch.Score{} // by offset, of the batches out
	take := func(bs []*batch.Batch) {
		for _, b := range bs {
			for i, o := range b.Offsets() {
				scores[o] = b.Scores[i]
			}
			b.Release()
		}
	}
	r := rand.New(rand.NewPCG(20, 28))
	var warm []testbatch.Row
	for i := range 1200 {
		warm = append(warm, testbatch.Row{Partition: int32(i % 2), Key: fmt.Appendf(nil, "x%d", i%10), Features: []float32{float32(70 + 2*r.NormFloat64())}})
	}
	bs, err := det.Process(context.Background(), mk(0, warm...))
	if err != nil {
		t.Fatal(err)
	}
	take(bs)
	bs, err = det.Drain()
	if err != nil || det.Model() == nil {
		t.Fatalf("setup: no model after the warm-up (%v)", err)
	}
	take(bs)

	scope := newKeyScope()
	gen := int32(1)
	scope.set(ingest.Assignment{Generation: gen, Partitions: []int32{0, 1}})
	<-scope.changed
	from, known := det.AlertsGeneration()
	det.DropAlertsOutside(scope.stayed(from, known, nil, det.AlertsTaken))
	det.OwnPartitions(scope.owns)
	trials = 16
	for k := range trials {
		key := fmt.Sprintf("a%d", k)
		at := time.Duration(k) * 30 * time.Minute
		far := func() testbatch.Row { return testbatch.Row{Partition: 0, Key: []byte(key), Features: []float32{200}} }
		first := off
		bs, err := det.Process(context.Background(), mk(at, far()))
		if err != nil {
			t.Fatal(err)
		}
		take(bs)
		if missed { // a generation missed: the next assignment's partitions the same
			gen += 2
			scope.set(ingest.Assignment{Generation: gen, Partitions: []int32{0, 1}})
		} else {
			scope.set(ingest.Assignment{Generation: gen + 1, Partitions: []int32{1}})    // partition 0 moves away
			scope.set(ingest.Assignment{Generation: gen + 2, Partitions: []int32{0, 1}}) // and back: the next generation's fetch starts now
			gen += 2
		}
		in, out := make(chan item, 1), make(chan item, 8)
		in <- item{b: mk(at+time.Minute, far())}
		close(in)
		p := loopPipeline(t, nil, nil, nil)
		p.det, p.stage, p.scope = det, det, scope
		if err := p.detectLoop(context.Background(), nil, in, out); err != nil {
			t.Fatal(err)
		}
		for len(out) > 0 {
			it := <-out
			take([]*batch.Batch{it.b})
		}
		if a := scores[first]; !a.Outlier || a.Grouped {
			t.Fatalf("trial %d: setup: %s's first far record flagged %v, grouped %v: want a new alert", k, key, a.Outlier, a.Grouped)
		}
		a, ok := scores[first+1]
		if !ok {
			t.Fatalf("trial %d: %s's second record not out of the detect loop", k, key)
		}
		if a.Grouped {
			folded++
		}
		select { // (the loop ended before it read the signal: read it here, for the next trial)
		case <-scope.changed:
			p.rebalanced()
		default:
		}
	}
	return folded, trials
}

// TestAlertGroupsAfterRestartByGeneration: the alert groups saved at a stop (alarm state, with
// the generation they were last checked against: 5 here) are kept by the first assignment
// after the restart only when it is of the next generation (6: the stopped member's session
// was not renewed, no LeaveGroup sent, and the group's next generation is the restarted one's;
// no other member owned the partitions in between), and dropped when a generation came
// between (7: the stop left the group, whose next generation was another member's or an
// empty one). Before, a restart kept every group of a partition assigned again.
func TestAlertGroupsAfterRestartByGeneration(t *testing.T) {
	for _, c := range []struct {
		first  int32 // the first assignment's generation after the restart
		folded bool
	}{{6, true}, {7, false}} {
		t.Run(fmt.Sprintf("generation %d", c.first), func(t *testing.T) {
			g := newGroupRig(t)
			det := g.open()
			det.DropAlertsOutside(5, func(int32) bool { return true }) // (generation 5's assignment)
			g.warmThenAlert(det)
			det.Close() // (saves the model and the alarm state)
			det = g.open()
			defer det.Close()
			if gen, ok := det.AlertsGeneration(); !ok || gen != 5 {
				t.Fatalf("restored the groups' generation %d (known %v), want 5", gen, ok)
			}
			takeFirstAssignment(det, ingest.Assignment{Generation: c.first, Partitions: []int32{0, 1}, Offsets: []int64{1201, 1200}}) // (every record committed)
			got := g.process(det, 2*time.Minute, groupFar)
			if len(got) != 1 || !got[0].Outlier || got[0].Grouped != c.folded {
				t.Errorf("a's next far record after the restart, first assignment of generation %d: %+v; want flagged, folded into the alert of before %v", c.first, got, c.folded)
			}
			if gen, ok := det.AlertsGeneration(); !ok || gen != c.first {
				t.Errorf("the groups' generation after the first assignment: %d (known %v), want %d", gen, ok, c.first)
			}
		})
	}
}

// TestAlertGroupsAfterCleanStopByOffset: at a clean stop the stage is told the offsets committed
// after the final commit (ConfirmAlertsCommitted); those of the partitions whose last record
// taken is the one before are saved with the groups (format 4), and a restart whose first
// assignment (a generation missed: the stop left the group) finds them unmoved keeps those
// partitions' groups: a's next far record is folded into its alert of before. A partition whose
// commit lagged the records taken (1 here) is not saved; one moved drops its groups. A partition
// kept so stands for the same offset at the next stop though none of its records came since.
func TestAlertGroupsAfterCleanStopByOffset(t *testing.T) {
	for _, c := range []struct {
		name    string
		offsets []int64 // the first assignment's after the restart, of partitions 0 and 1
		folded  bool
	}{{"unmoved", []int64{1201, 1200}, true}, {"moved", []int64{1230, 1200}, false}} {
		t.Run(c.name, func(t *testing.T) {
			g := newGroupRig(t)
			det := g.open()
			det.DropAlertsOutside(5, func(int32) bool { return true })
			g.warmThenAlert(det)
			det.ConfirmAlertsCommitted(map[int32]int64{0: 1201, 1: 1199}) // (1's last record, 1199, not committed)
			det.Close()
			restart := func(gen int32, want string) {
				det = g.open()
				if got := det.AlertsRestored(); got == nil || fmt.Sprint(*got) != want {
					t.Fatalf("restored %v, want %s", got, want)
				}
				takeFirstAssignment(det, ingest.Assignment{Generation: gen, Partitions: []int32{0, 1}, Offsets: c.offsets})
				if det.AlertsRestored() != nil {
					t.Error("the restored offsets outlived the first assignment")
				}
			}
			restart(7, "{map[0:1201 1:1200] map[0:true]}") // (1: taken to 1200, 1199 committed)
			if c.folded {                                  // a stop again, no record since: partition 0 still stands at 1201 (1 went)
				det.ConfirmAlertsCommitted(map[int32]int64{0: 1201, 1: 1200})
				det.Close()
				restart(9, "{map[0:1201] map[0:true]}")
			}
			defer det.Close()
			got := g.process(det, 2*time.Minute, groupFar)
			if len(got) != 1 || !got[0].Outlier || got[0].Grouped != c.folded {
				t.Errorf("a's next far record after the clean restart, partition 0's offset %d (saved 1201): %+v; want flagged, folded into the alert of before %v", c.offsets[0], got, c.folded)
			}
		})
	}
}

// TestAlertGroupsAfterCrashAheadOfCommit: the alarm state is saved where the stream is scored
// (a save with a new model; a crash leaves the last one), which may be past the outputs
// written and the offsets committed. A restart whose first assignment follows the saved
// generation (a crash: no LeaveGroup) then reads again records whose effects the groups hold:
// an alert whose output was never written would fold into its own group, never emitted. So the
// groups of a partition whose committed offset is below the offset after the last record the
// state took of it go (format 4 saves those offsets at every save); at or past it they stay.
// Before, the generation alone kept them: a's far record, read again, was folded into itself.
func TestAlertGroupsAfterCrashAheadOfCommit(t *testing.T) {
	for _, c := range []struct {
		name      string
		committed int64 // partition 0's, at the restart (the far record at 1200)
		from      int64 // where partition 0 is read again from
		folded    bool  // a's far record read (or a later one) folded into the alert of before
	}{{"the far record not committed", 1200, 1200, false}, {"committed", 1201, 1201, true}} {
		t.Run(c.name, func(t *testing.T) {
			g := newGroupRig(t)
			det := g.open()
			det.DropAlertsOutside(5, func(int32) bool { return true })
			g.warmThenAlert(det)
			det.Close() // (the save a crash leaves: no final commit confirmed)
			det = g.open()
			defer det.Close()
			takeFirstAssignment(det, ingest.Assignment{Generation: 6, Partitions: []int32{0, 1}, Offsets: []int64{c.committed, 1200}})
			g.off = c.from
			got := g.process(det, time.Minute, groupFar)
			if len(got) != 1 || !got[0].Outlier || got[0].Grouped != c.folded {
				t.Errorf("a's far record at offset %d after the restart, partition 0 committed at %d: %+v; want flagged, folded %v",
					c.from, c.committed, got, c.folded)
			}
		})
	}
}

// committingSource is a Source that says what it committed (ingest.Source.Committed).
type committingSource struct {
	*fakeSource
	committed map[int32]int64
}

func (s *committingSource) Committed() map[int32]int64 { return s.committed }

// TestCleanStopTakesPendingRebalance: a clean stop whose last rebalance the detect goroutine
// did not take (the loop ended with the signal pending: partition 0 moved away and back,
// another member committing records of it meanwhile) takes it before the offsets committed are
// confirmed to the stage: the groups of the partition that was not the instance's throughout
// go, and are not saved as standing for the commit. Before, they were confirmed at the other
// member's offset (the instance's own commit left it there), and a restart finding it unmoved
// kept them: a's next far record folded into the alert of before the move.
func TestCleanStopTakesPendingRebalance(t *testing.T) {
	g := newGroupRig(t)
	both := []int32{0, 1}
	det := g.open()
	scope := newKeyScope()
	src := &committingSource{}
	p := &Pipeline{det: det, scope: scope, src: src, log: zerolog.Nop()}
	scope.set(ingest.Assignment{Generation: 5, Partitions: both, Offsets: []int64{0, 0}})
	<-scope.changed
	p.rebalanced()
	det.OwnPartitions(scope.owns)
	g.warmThenAlert(det)
	// 0 moves away and back, another member committing it to 1230 meanwhile; the stop comes
	// before the detect goroutine's turn.
	scope.set(ingest.Assignment{Generation: 6, Partitions: []int32{1}, Offsets: []int64{1200}, Own: []int64{1200}})
	scope.set(ingest.Assignment{Generation: 7, Partitions: both, Offsets: []int64{1230, 1200}, Own: []int64{-1, 1200}})
	src.committed = map[int32]int64{0: 1230, 1: 1200}
	p.confirmAlerts()
	det.Close()
	det = g.open()
	defer det.Close()
	if got := det.AlertsRestored(); got != nil && got.Committed[0] {
		t.Errorf("restored %v: partition 0 saved as committed, though another member had it", *got)
	}
	takeFirstAssignment(det, ingest.Assignment{Generation: 9, Partitions: both, Offsets: []int64{1230, 1200}})
	if got := g.process(det, 2*time.Minute, groupFar); len(got) != 1 || !got[0].Outlier || got[0].Grouped {
		t.Errorf("a's next far record after the restart: %+v; want a new alert (partition 0 was another member's before the stop)", got)
	}
}

// groupRig is the alert-group restart tests' stage and stream: one feature, a window of 5,000
// never rebuilt, alert_cooldown 10 minutes, the state in a temporary directory, and records at
// consecutive offsets (off) timed from t0 plus the batch's time.
type groupRig struct {
	t   *testing.T
	cfg detect.Config
	mem *memory.CheckedAllocator
	t0  time.Time
	off int64
}

// groupFar is key a's far record on partition 0: an alert, or folded into a's open one.
var groupFar = testbatch.Row{Partition: 0, Key: []byte("a"), Features: []float32{200}}

func newGroupRig(t *testing.T) *groupRig {
	cfg := detect.Default()
	cfg.Window, cfg.MinRecords, cfg.Distance.N = 5000, 1000, 5
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	cfg.AlertCooldown = 10 * time.Minute
	cfg.StateDir = t.TempDir()
	g := &groupRig{t: t, cfg: cfg, mem: memory.NewCheckedAllocator(memory.DefaultAllocator), t0: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)}
	t.Cleanup(func() { g.mem.AssertSize(t, 0) }) // (after the test's own deferred Close)
	return g
}

// open opens the stage on the rig's state directory (restoring what a Close saved).
func (g *groupRig) open() *detect.Stage {
	det, err := detect.NewStage(g.cfg, []string{"value"}, false, detect.Deps{Log: zerolog.Nop(), Role: detect.RoleAll})
	if err != nil {
		g.t.Fatal(err)
	}
	return det
}

// process scores rows (at the next offsets, at t0 + at) and returns their scores.
func (g *groupRig) process(det *detect.Stage, at time.Duration, rows ...testbatch.Row) []batch.Score {
	for i := range rows {
		rows[i].Offset, rows[i].Time = g.off, g.t0.Add(at)
		g.off++
	}
	bs, err := det.Process(context.Background(), testbatch.New(g.t, g.mem, "in", []string{"value"}, false, false, rows))
	if err != nil {
		g.t.Fatal(err)
	}
	more, err := det.Drain()
	if err != nil {
		g.t.Fatal(err)
	}
	var out []batch.Score
	for _, b := range append(bs, more...) {
		out = append(out, b.Scores...)
		b.Release()
	}
	return out
}

// warmThenAlert scores 1,200 ordinary records (partition 0 at even offsets, 1 at odd ones,
// ten keys) and then groupFar (offset 1200), which must be a new alert.
func (g *groupRig) warmThenAlert(det *detect.Stage) {
	r := rand.New(rand.NewPCG(20, 28))
	var warm []testbatch.Row
	for i := range 1200 {
		warm = append(warm, testbatch.Row{Partition: int32(i % 2), Key: fmt.Appendf(nil, "x%d", i%10), Features: []float32{float32(70 + 2*r.NormFloat64())}})
	}
	g.process(det, 0, warm...)
	if got := g.process(det, time.Minute, groupFar); len(got) != 1 || !got[0].Outlier || got[0].Grouped {
		g.t.Fatalf("setup: a's far record: %+v, want a new alert", got)
	}
}

// takeFirstAssignment gives a restarted det its first assignment a, as the pipeline takes it.
func takeFirstAssignment(det *detect.Stage, a ingest.Assignment) {
	scope := newKeyScope()
	scope.set(a)
	<-scope.changed
	p := &Pipeline{det: det, scope: scope, log: zerolog.Nop()}
	det.OwnPartitions(scope.owns)
	p.rebalanced()
}
