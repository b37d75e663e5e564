package detect

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// farRun is the stage's every record in stream order (batches of 500, each build serving from
// the next batch): its scores and the model that scored each.
func farRun(t *testing.T, cfg Config, d *synth.Data) ([]batch.Score, []*Model) {
	t.Helper()
	return farRunChange(t, cfg, d, 500, -1, "")
}

// farRunChange is farRun in batches of size, with recent_far_side changed to side by a live
// reconfiguration before the batch that starts at record at (none: at < 0).
func farRunChange(t *testing.T, cfg Config, d *synth.Data, size, at int, side RecentFarSide) ([]batch.Score, []*Model) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	models := map[uint64]*Model{}
	s, err := NewStage(cfg, d.Features, false, Deps{Log: zerolog.Nop(), OnModel: func(m *Model, _ bool) { models[m.Version] = m }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	n := len(d.Cols[0])
	scores, by := make([]batch.Score, n), make([]*Model, n)
	take := func(out []*batch.Batch) {
		for _, b := range out {
			first := int(b.Offsets()[0])
			for i, sc := range b.Scores {
				scores[first+i], by[first+i] = sc, models[b.ModelVersion]
				if by[first+i] == nil || by[first+i].Ranker == nil {
					t.Fatalf("record %d: scored by model %d, not announced", first+i, b.ModelVersion)
				}
			}
			b.Release()
		}
	}
	for lo := 0; lo < n; lo += size {
		if lo == at {
			next := s.Config()
			next.RecentFarSide = side
			if r, err := s.Reconfigure(next); err != nil || len(r.Live) != 1 || r.RebuildStarted {
				t.Fatalf("recent_far_side %s at record %d: %+v, %v; want one live key", side, at, r, err)
			}
		}
		out, err := s.Process(context.Background(), makeBatch(t, mem, d, lo, min(lo+size, n), false))
		if err != nil {
			t.Fatal(err)
		}
		take(out)
		s.collect(true)
	}
	out, err := s.Flush()
	if err != nil {
		t.Fatal(err)
	}
	take(out)
	return scores, by
}

// plantStream is SKAB's testbed as §12.16 part 2 describes its first model's far side
// (docs/BENCHMARKS.md): a temperature a that drifts by drift of its sd a row from row 200 on, a
// flow c read in steps of 1 with a jitter of 0.001 (32, 33 on 13% of rows), six sensors of
// noise; the valve's fault at row onset takes the flow to 30, a level it never had.
func plantStream(seed uint64, rows, onset int, drift float64) (*synth.Data, [][]float32) {
	r := rand.New(rand.NewPCG(seed, 7))
	d := &synth.Data{Features: []string{"a", "c", "n1", "n2", "n3", "n4", "n5", "n6"}, Cols: make([][]float32, 8), SD: make([][]float32, 8)}
	raw := make([][]float32, rows)
	for i := range rows {
		row := make([]float32, 8)
		row[0] = float32(70 + drift*float64(max(0, i-200)) + r.NormFloat64())
		c := 32.0
		if r.Float64() < 0.13 {
			c = 33
		}
		if i >= onset {
			c = 30
		}
		row[1] = float32(c + 0.001*r.NormFloat64())
		for j := 2; j < 8; j++ {
			row[j] = float32(r.NormFloat64())
		}
		for j := range row {
			d.Cols[j], d.SD[j] = append(d.Cols[j], row[j]), append(d.SD[j], 0)
		}
		raw[i] = row
	}
	return d, raw
}

// TestRecentFarSide: recent_far_side: log through the stage on plantStream (drift 0.1 sd a
// row: the first model, of rows 0-199, scores a plant 50 sd away by the fault), with and without
// recent_past 100: flags and combined scores are the option off's bit for bit; every Recent is
// the ring's rank of the score less w x (score - Ranker.combineFar), plus w x the recent past's
// decades (w: stale's share; 1, and no decades, without recent_past), read against the model
// that scored the record; most records after row 300 are beyond the distance's calibration (the
// far side is exercised). And with recent_past, over 30 streams the fault's first reading ranks
// above every pre-fault record (rows 250 on) in more of them than with the linear far side (26
// against 20, docs/BENCHMARKS.md §12.23; at drifts of 0.01-0.06 sd a row the two are within a
// stream of each other).
func TestRecentFarSide(t *testing.T) {
	const rows, onset, past, streams = 1100, 700, 100, 30
	top := [2]int{} // streams whose fault's first reading outranks every pre-fault record: off, on
	for seed := uint64(1); seed <= streams; seed++ {
		d, raw := plantStream(seed, rows, onset, 0.1)
		for _, p := range []int{past, 0} {
			if p == 0 && seed > 3 {
				continue // (the definition without recent_past: three streams)
			}
			cfg := Default()
			cfg.Window, cfg.MinRecords, cfg.RecentPast = 5000, 200, p
			off, _ := farRun(t, cfg, d)
			cfg.RecentFarSide = FarSideLog
			on, by := farRun(t, cfg, d)
			var ring recentRing
			discounted := 0
			for i := range rows {
				if on[i].Score != off[i].Score || on[i].Outlier != off[i].Outlier || !on[i].Scored {
					t.Fatalf("seed %d, recent_past %d, record %d: recent_far_side changed a flag or a combined score", seed, p, i)
				}
				far := by[i].Ranker.combineFar(on[i].DensityScore, on[i].DistanceScore)
				if ex := by[i].Ranker.farExcess(on[i].Score, on[i].DensityScore, on[i].DistanceScore); ex != on[i].Score-far {
					t.Fatalf("seed %d, recent_past %d, record %d: farExcess %v, score less combineFar %v", seed, p, i, ex, on[i].Score-far)
				}
				if far < on[i].Score && i >= 300 {
					discounted++
				}
				w, dec := 1.0, 0.0
				if p > 0 {
					w, dec = staleShare(scoresOf(on), i, p), pastDefinition(raw, i, p)
				}
				want := ring.score(on[i].Score-w*(on[i].Score-far)+w*dec, cfg.RecentScores, cfg.RecentBlocks())
				if math.Abs(on[i].Recent-want) > 1e-12*max(1, math.Abs(want)) { // (the share's division in another order)
					t.Fatalf("seed %d, recent_past %d, record %d: recent %v, want %v (score %v, far %v, w %v)", seed, p, i, on[i].Recent, want, on[i].Score, far, w)
				}
			}
			if discounted < (rows-300)/2 {
				t.Errorf("seed %d, recent_past %d: %d records of rows 300 on beyond the distance's calibration: the far side is not exercised", seed, p, discounted)
			}
			if p == 0 {
				continue
			}
			for k, sc := range [][]batch.Score{off, on} {
				above := 0
				for _, s := range sc[250:onset] {
					if s.Recent >= sc[onset].Recent {
						above++
					}
				}
				if above == 0 {
					top[k]++
				}
			}
		}
	}
	t.Logf("the fault's first reading above every pre-fault record in %d of %d streams (linear far side: %d)", top[1], streams, top[0])
	if top[1] <= top[0] {
		t.Errorf("the fault's first reading outranks every pre-fault record in %d of %d streams with recent_far_side: log, %d with linear: want more", top[1], streams, top[0])
	}
}

// TestRecentFarSideLiveChange: recent_far_side changed live (linear to log and back) applies
// from the next batch on, with no rebuild: every record before the change ranks as a stage that
// kept the old setting, bit for bit, and every record from it on is the ring's rank of the new
// setting's score (score less farExcess under log), the ring holding the scores ranked before the
// change (not emptied: docs/BENCHMARKS.md §12.23's review, whose figures this logs), on plantStream
// (drift 0.1 sd a row, fault at 700, the change at 500) in batches of 50.
func TestRecentFarSideLiveChange(t *testing.T) {
	const rows, onset, at = 1100, 700, 500
	for _, sw := range []struct{ from, to RecentFarSide }{{FarSideLinear, FarSideLog}, {FarSideLog, FarSideLinear}} {
		for seed := uint64(1); seed <= 5; seed++ {
			d, _ := plantStream(seed, rows, onset, 0.1)
			cfg := Default()
			cfg.Window, cfg.MinRecords, cfg.RecentFarSide = 5000, 200, sw.from
			got, by := farRunChange(t, cfg, d, 50, at, sw.to)
			kept, _ := farRunChange(t, cfg, d, 50, -1, "")
			cfg.RecentFarSide = sw.to
			throughout, _ := farRunChange(t, cfg, d, 50, -1, "")
			var ring recentRing
			underLog, discounted := 0, 0 // (records of rows 300 on ranked under log; beyond the calibration)
			for i := range rows {
				if got[i].Score != kept[i].Score || got[i].Outlier != kept[i].Outlier {
					t.Fatalf("%s to %s, seed %d, record %d: the change moved a combined score or a flag", sw.from, sw.to, seed, i)
				}
				if i < at && math.Float64bits(got[i].Recent) != math.Float64bits(kept[i].Recent) {
					t.Fatalf("%s to %s, seed %d, record %d (before the change): recent %v, the unchanged stage's %v", sw.from, sw.to, seed, i, got[i].Recent, kept[i].Recent)
				}
				x, side := got[i].Score, sw.from
				if i >= at {
					side = sw.to
				}
				if side == FarSideLog {
					ex := by[i].Ranker.farExcess(got[i].Score, got[i].DensityScore, got[i].DistanceScore)
					if x -= ex; i >= 300 {
						underLog++
						if ex != 0 {
							discounted++
						}
					}
				}
				if want := ring.score(x, cfg.RecentScores, cfg.RecentBlocks()); math.Float64bits(got[i].Recent) != math.Float64bits(want) {
					t.Fatalf("%s to %s, seed %d, record %d: recent %v, want %v (%s)", sw.from, sw.to, seed, i, got[i].Recent, want, side)
				}
			}
			if discounted < underLog/4 {
				t.Errorf("%s to %s, seed %d: %d of the %d records of rows 300 on ranked under log beyond the distance's calibration: the far side is not exercised", sw.from, sw.to, seed, discounted, underLog)
			}
			top := func(sc []batch.Score) float64 {
				m := math.Inf(-1)
				for _, s := range sc[at:onset] {
					m = max(m, s.Recent)
				}
				return m
			}
			t.Logf("%s to %s, seed %d: pre-fault rows from the change: largest recent %.2f (%s throughout %.2f); the fault's first reading %.2f (%.2f)",
				sw.from, sw.to, seed, top(got), sw.to, top(throughout), got[onset].Recent, throughout[onset].Recent)
		}
	}
}

func scoresOf(sc []batch.Score) []float64 {
	out := make([]float64, len(sc))
	for i := range sc {
		out[i] = sc[i].Score
	}
	return out
}

// TestValidateRecentFarSide: recent_far_side is linear or log, and log is refused with key_by:
// key (the stream's series only), naming detect.recent_far_side.
func TestValidateRecentFarSide(t *testing.T) {
	for _, tc := range []struct {
		side  RecentFarSide
		keyed bool
		ok    bool
	}{{FarSideLinear, false, true}, {FarSideLog, false, true}, {FarSideLinear, true, true}, {FarSideLog, true, false}, {"", false, false}, {"cubic", false, false}} {
		c := Default()
		c.RecentFarSide = tc.side
		if tc.keyed {
			c.KeyBy = KeyByKey
		}
		err := c.Validate()
		if tc.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "detect.recent_far_side: ") {
			t.Errorf("recent_far_side %q, keyed %v: %v", tc.side, tc.keyed, err)
		}
	}
}

// BenchmarkRankRecentFar: the stream's recent ranking of a batch of 1,000 plantStream records
// (rankRecent, on the stage's goroutine) under each recent_far_side, scored by a model that fits
// the plant (drift 0) and by one the plant has left (drift 0.1 sd a row: most records beyond the
// distance's calibration). ns/record.
func BenchmarkRankRecentFar(b *testing.B) {
	for _, drift := range []float64{0, 0.1} {
		for _, side := range []RecentFarSide{FarSideLinear, FarSideLog} {
			b.Run(fmt.Sprintf("%s/drift=%g", side, drift), func(b *testing.B) {
				d, _ := plantStream(1, 3000, 3000, drift)
				cfg := Default()
				cfg.Window, cfg.MinRecords, cfg.RecentFarSide = 5000, 200, side
				mem := memory.NewGoAllocator()
				s, err := NewStage(cfg, d.Features, false, Deps{Log: zerolog.Nop()})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				var last *batch.Batch
				for lo := 0; lo < 3000; lo += 500 {
					out, err := s.Process(context.Background(), makeBatch(b, mem, d, lo, lo+500, false))
					if err != nil {
						b.Fatal(err)
					}
					for _, o := range out {
						if last != nil {
							last.Release()
						}
						last = o
					}
					s.collect(true)
				}
				defer last.Release()
				r := s.model.Ranker
				for b.Loop() {
					s.rankRecent(last, r)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*last.Len()), "ns/record")
			})
		}
	}
}

// TestOverlapFarSideAsSynchronous: under recent_far_side: log the overlapped stage (depths 1 and
// 3: finish ranks each batch with the model that began it, in stream order) gives the synchronous
// stage's scores record for record, Recent included; the far side is exercised (Recent differs
// from linear's on some records).
func TestOverlapFarSideAsSynchronous(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg, d := overlapConfig(), testData(6000, 11)
	lin, _, _ := overlapRun(t, mem, cfg, d, Deps{Log: zerolog.Nop(), Accelerator: &fakeAccel{exact: true}})
	cfg.RecentFarSide = FarSideLog
	want, wantSig, _ := overlapRun(t, mem, cfg, d, Deps{Log: zerolog.Nop(), Accelerator: &fakeAccel{exact: true}})
	moved := 0
	for off, w := range want {
		for i := range w {
			if w[i].Recent != lin[off][i].Recent {
				moved++
			}
		}
	}
	if moved == 0 {
		t.Fatal("recent_far_side: log ranked every record as linear: the far side is not exercised")
	}
	for _, depth := range []int{1, 3} {
		got, gotSig, _ := overlapRun(t, mem, cfg, d, Deps{Log: zerolog.Nop(), Accelerator: &fakeAccel{exact: true}, Overlap: depth})
		sameVerdicts(t, want, got, wantSig, gotSig)
	}
}
