package detect

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// TestOverlapScoresAsSynchronous: with Deps.Overlap, Process returns the batch before the one
// it is given (the device call of this one on its way), every batch comes back once, in stream
// order, with the scores, flags, suppressions and significance marks of the synchronous stage,
// through a live reconfiguration (which finishes the batch in flight under the configuration
// it began with) and Flush (which returns the last).
func TestOverlapScoresAsSynchronous(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg, d := overlapConfig(), testData(6000, 11)
	want, wantSig, _ := overlapRun(t, mem, cfg, d, Deps{Log: zerolog.Nop(), Accelerator: &fakeAccel{exact: true}})
	for _, depth := range []int{1, 3} {
		got, gotSig, lagged := overlapRun(t, mem, cfg, d, Deps{Log: zerolog.Nop(), Accelerator: &fakeAccel{exact: true}, Overlap: depth})
		sameVerdicts(t, want, got, wantSig, gotSig)
		if lagged < len(want)-2*depth {
			t.Fatalf("depth %d: %d of %d Process calls returned the batches before only: not overlapped", depth, lagged, len(want))
		}
	}
}

// TestOverlapLandingAsSynchronous: the pipeline's way with an overlapped stage (wait for
// Landing, then LandScored, between Process calls) scores as the synchronous stage, record for
// record, and LandScored returns scored batches without the next Process.
func TestOverlapLandingAsSynchronous(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg, d := overlapConfig(), testData(6000, 11)
	want, wantSig, _ := overlapRun(t, mem, cfg, d, Deps{Log: zerolog.Nop(), Accelerator: &fakeAccel{exact: true}})
	var landed int
	got, gotSig, _ := overlapRunLanding(t, mem, cfg, d, Deps{Log: zerolog.Nop(), Accelerator: &fakeAccel{exact: true}, Overlap: 3}, 2, &landed)
	sameVerdicts(t, want, got, wantSig, gotSig)
	if landed == 0 {
		t.Fatal("LandScored returned no batch after Landing: the batches went on only through Process and Flush")
	}
}

// overlapConfig is the test configuration under flag_by: significance with a cap that bites
// (4 flags per 2000 records): the cap and the marks depend on the order records are admitted;
// with the hypercube detector on.
func overlapConfig() Config {
	cfg := testConfig()
	cfg.FlagBy, cfg.MinScore, cfg.AlarmRate = FlagBySignificance, 1, 0.002
	cfg.Hypercube.Enabled = true // a follower: its counts must be those after the batch's own push
	return cfg
}

// overlapRun feeds rows [0, 1500) of d for the first model, then rows [1500, 5000) in batches
// of 250 through Process, with a live reconfiguration at row 3000 and Flush at the end. It
// returns each batch's scores by its first offset, the window's significance marks, and how
// many Process calls returned the batch before the one given.
func overlapRun(t *testing.T, mem memory.Allocator, cfg Config, d *synth.Data, deps Deps) (map[int64][]batch.Score, []bool, int) {
	t.Helper()
	return overlapRunLanding(t, mem, cfg, d, deps, 0, nil)
}

// overlapRunLanding is overlapRun that, after every landEvery-th Process call (none at 0),
// waits for Landing and takes what LandScored returns, counting those batches in landed.
func overlapRunLanding(t *testing.T, mem memory.Allocator, cfg Config, d *synth.Data, deps Deps, landEvery int, landed *int) (map[int64][]batch.Score, []bool, int) {
	t.Helper()
	s, err := NewStage(cfg, d.Features, true, deps)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	feed(t, s, mem, d, 0, 1500, 250) // the first model, built on the spot (before_model: hold)
	if s.Model() == nil {
		t.Fatal("no model after 1500 records")
	}
	fill, err := s.Drain() // the last batch of the fill, in flight with overlap
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range fill {
		b.Record.Release()
	}
	got := map[int64][]batch.Score{}
	var order []int64
	lagged := 0
	take := func(out []*batch.Batch) {
		for _, b := range out {
			first := b.Offsets()[0]
			if _, dup := got[first]; dup {
				t.Fatalf("batch at offset %d returned twice", first)
			}
			got[first] = slices.Clone(b.Scores)
			order = append(order, first)
			b.Record.Release()
		}
	}
	for lo := 1500; lo < 5000; lo += 250 {
		if lo == 3000 {
			next := cfg
			next.MinScore = 1.5 // live: applies from the next batch scored
			if _, err := s.Reconfigure(next); err != nil {
				t.Fatal(err)
			}
		}
		b := makeBatch(t, mem, d, lo, lo+250, true)
		out, err := s.Process(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(out, b) {
			lagged++
		}
		take(out)
		if landEvery > 0 && (lo-1500)/250%landEvery == landEvery-1 {
			if c := s.Landing(); c != nil {
				<-c
				more, err := s.LandScored()
				if err != nil {
					t.Fatal(err)
				}
				*landed += len(more)
				take(more)
			}
		}
	}
	rest, err := s.Flush()
	if err != nil {
		t.Fatal(err)
	}
	take(rest)
	if !slices.IsSorted(order) || len(order) != (5000-1500)/250 {
		t.Fatalf("batches came back at offsets %v, want each of 1500, 1750, .. 4750 once, in order", order)
	}
	return got, s.recs.significant(s.win.Len()), lagged
}

// sameVerdicts fails unless got has want's scores batch by batch, field for field, and want's
// significance marks; and unless the cap bit (some records flagged, some suppressed).
func sameVerdicts(t *testing.T, want, got map[int64][]batch.Score, wantSig, gotSig []bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d batches back, want %d", len(got), len(want))
	}
	flagged, suppressed := 0, 0
	for off, w := range want {
		if !reflect.DeepEqual(got[off], w) {
			for i := range w {
				if i >= len(got[off]) || !reflect.DeepEqual(got[off][i], w[i]) {
					t.Fatalf("record at offset %d: scores differ\n got %+v\nwant %+v", off+int64(i), at(got[off], i), w[i])
				}
			}
			t.Fatalf("batch at offset %d: the scores differ", off)
		}
		for _, sc := range w {
			if sc.Outlier {
				flagged++
			}
			if sc.Suppressed {
				suppressed++
			}
		}
	}
	if suppressed == 0 || flagged == 0 {
		t.Fatalf("%d flagged, %d suppressed: the cap did not bite, the test proves nothing about its order", flagged, suppressed)
	}
	if !slices.Equal(gotSig, wantSig) {
		t.Fatal("the significance marks in the window differ")
	}
	t.Logf("%d batches, %d flagged, %d suppressed", len(want), flagged, suppressed)
}

// at is s[i], or a zero Score past its end.
func at(s []batch.Score, i int) batch.Score {
	if i < len(s) {
		return s[i]
	}
	return batch.Score{}
}

// TestOverlapKeyedAsSynchronous: with key_by: key (models per key) the overlapped stage's scores
// are the synchronous stage's, record for record, through the keys' warm-up (issue 22 item 4:
// per-key scoring runs through the same path): with the keys' models on the CPU (their pass in
// finish, in stream order) and on a device (the keyed kernels' CPU twin: each batch's keys' pass
// on its own goroutine from the moment the batch before finished, beside the other batches'
// work, startChained). Run with -race: the chained passes and the stage share the keys' state.
// On the device both of the keys' paths run chained: the serial one (these batches of 250 records
// at the default parallelGrain) and the parallel one (parallelGrain lowered: its rounds, its builds
// left to run beside the finish, startBuilds/finishBuilds, which keysQuiet also finishes). The
// chained batches' global scoring runs each way (speculateShare): deferred to the keys' pass on
// the rows of keys without a model then, where the global model scores exactly the records the
// synchronous stage's does (counted in its device calls); started in begin on every record; and
// switching between the two as the keys warm. On a fleet within keys.max_keys and on one growing
// past it (warm keys evicted before their records within a batch: scored by the global model
// after the keys' pass, scoreLeftOver).
func TestOverlapKeyedAsSynchronous(t *testing.T) {
	defer func(v float64) { speculateShare = v }(speculateShare)
	for _, c := range []struct {
		dev, parallel bool
	}{{false, false}, {true, false}, {true, true}} {
		t.Run(fmt.Sprintf("keys-on-device=%v/parallel=%v", c.dev, c.parallel), func(t *testing.T) {
			if c.parallel {
				if runtime.GOMAXPROCS(0) < 2 {
					t.Skip("one core: the keys' parallel path never runs")
				}
				defer func(p int) { parallelGrain = p }(parallelGrain)
				parallelGrain = 16
			}
			for _, f := range []overlapFleet{{"within-max-keys", 20, 4000, 0, 100000}, {"growing-past-max-keys", 130, 16000, 100, 120}} {
				for _, g := range []struct {
					name  string
					share float64
				}{{"deferred", 2}, {"speculative", 0}, {"switching", 0.5}} {
					if !c.dev && g.name != "switching" {
						continue // (the keys' pass is not chained: nothing to defer)
					}
					speculateShare = g.share
					t.Run(f.name+"/"+g.name, func(t *testing.T) {
						wantRows, gotRows := overlapKeyedAsSynchronous(t, f, c.parallel, func() (Accelerator, bool, *atomic.Int64) {
							if !c.dev {
								return &fakeAccel{exact: true}, false, nil
							}
							a := &globalCountingAccel{keyedTwinAccel: &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}}
							return a, true, &a.rows
						})
						if c.dev && g.name == "deferred" && gotRows != wantRows {
							t.Fatalf("the global model scored %d records with overlap, %d without: want the same records", gotRows, wantRows)
						}
					})
				}
			}
		})
	}
}

// overlapFleet is a joiningFleet of sensors and rows (joining every joining rows) under
// keys.max_keys.
type overlapFleet struct {
	name                   string
	sensors, rows, joining int
	maxKeys                int
}

// globalCountingAccel counts the records of the global model's device calls (ScoreBatch).
type globalCountingAccel struct {
	*keyedTwinAccel
	rows atomic.Int64
}

func (a *globalCountingAccel) ScoreBatch(dens *density.Scoring, knn []solvingset.Scoring) error {
	switch {
	case dens != nil:
		a.rows.Add(int64(len(dens.Out)))
	case len(knn) > 0:
		a.rows.Add(int64(len(knn[0].Out)))
	}
	return a.keyedTwinAccel.ScoreBatch(dens, knn)
}

// overlapKeyedAsSynchronous runs f through a stage without overlap and one with, each on an
// accelerator of newAccel's (dev: it keeps the keys' models; rows, when not nil, counts the
// records of the global model's device calls), compares every record's scores, and returns the
// records the global model scored on the device in each (the synchronous stage's first).
func overlapKeyedAsSynchronous(t *testing.T, f overlapFleet, parallel bool, newAccel func() (a Accelerator, dev bool, rows *atomic.Int64)) (wantRows, gotRows int64) {
	_, dev, _ := newAccel()
	cfg := keyedConfig()
	// No global rebuild in the span: a build starts up to Overlap batches later with overlap.
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	cfg.Keys.MaxKeys = f.maxKeys
	rows := joiningFleet(f.sensors, f.rows, f.joining, 0.01, 7, "sensor-%03d")
	leftOver := 0 // (without overlap: records of keys warm when their batch began scored by the global model)
	run := func(depth int) ([]batch.Score, uint64, int64) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		accel, _, counted := newAccel()
		s, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.Nop(), Accelerator: accel, Overlap: depth})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var out []batch.Score
		sawChained := false
		take := func(bs []*batch.Batch) {
			for _, b := range bs {
				out = append(out, slices.Clone(b.Scores)...)
				b.Release()
			}
		}
		t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
		for lo := 0; lo < len(rows); lo += 250 {
			var tr []testbatch.Row
			warm := map[string]bool{}
			for i := lo; i < lo+250; i++ {
				tr = append(tr, testbatch.Row{Offset: int64(i), Key: []byte(rows[i].key), Time: t0.Add(time.Duration(i) * time.Second), Features: []float32{rows[i].value}})
				if depth == 0 { // (with overlap a chained pass may be writing the keys' map)
					if st := s.keyed.keys[rows[i].key]; st != nil && st.model != nil {
						warm[rows[i].key] = true
					}
				}
			}
			modelled := s.model != nil
			bs, err := s.Process(context.Background(), testbatch.New(t, mem, "fleet", []string{"value"}, false, false, tr))
			if err != nil {
				t.Fatal(err)
			}
			for _, sc := range s.flight {
				sawChained = sawChained || sc.chained && sc.keyedDone != nil
			}
			if depth == 0 && modelled {
				for i, sc := range bs[len(bs)-1].Scores {
					if !sc.ByKey && warm[rows[lo+i].key] {
						leftOver++
					}
				}
			}
			take(bs)
			s.KeyStats() // (after every Process call, as the pipeline's metrics: reads the figures a chained pass started from)
			if lo%1000 == 0 {
				s.KeyVersions() // (between Process calls: waits for a chained pass, keysQuiet)
			}
			if depth > 0 && lo%500 == 250 { // (as the pipeline lands a batch once scored)
				bs, err := s.LandScored()
				if err != nil {
					t.Fatal(err)
				}
				take(bs)
			}
		}
		bs, err := s.Flush()
		if err != nil {
			t.Fatal(err)
		}
		take(bs)
		if dev && depth > 0 && !sawChained {
			t.Fatal("no batch's keys' pass ran chained: the test proves nothing about it")
		}
		if ran := len(s.keyed.scratch.ws) >= 2; ran != parallel {
			t.Fatalf("the keys' parallel path ran: %v, want %v", ran, parallel)
		}
		if counted == nil {
			return out, s.builds.version, -1
		}
		return out, s.builds.version, counted.Load()
	}
	want, v, wantRows := run(0)
	got, gv, gotRows := run(3)
	if v != 1 || gv != 1 {
		t.Fatalf("model versions %d and %d: a global rebuild in the span", v, gv)
	}
	if len(got) != len(want) {
		t.Fatalf("%d scores, want %d", len(got), len(want))
	}
	byKey, flagged := 0, 0
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d: scores differ\n got %+v\nwant %+v", i, got[i], want[i])
		}
		if want[i].ByKey {
			byKey++
		}
		if want[i].Outlier {
			flagged++
		}
	}
	if byKey == 0 || flagged == 0 || f.maxKeys < f.sensors && leftOver == 0 {
		t.Fatalf("%d records scored by their key's model, %d flagged, %d of warm keys left to the global model: the test proves nothing", byKey, flagged, leftOver)
	}
	if dev && wantRows >= 0 && wantRows >= int64(len(want)-cfg.MinRecords) {
		t.Fatalf("the global model scored %d of %d records without overlap: it skipped no warm key's", wantRows, len(want))
	}
	t.Logf("%d records, %d scored by their key's model, %d flagged, %d of warm keys left to the global model; the global model scored %d without overlap, %d with",
		len(want), byKey, flagged, leftOver, wantRows, gotRows)
	return wantRows, gotRows
}

// TestOverlapWarmKeysSkipGlobalScoring: with batches overlapped as the pipeline runs them on a
// GPU (Deps.Overlap = OverlapOnGPU, the keys' models on a device: each batch's keys' pass
// chained), once every key has a model the global model scores no record at all, as without
// overlap (TestWarmKeysSkipGlobalScoring): its device calls carry no record, and every record is
// its key's model's, without the global model's fields. (The global model scored every record
// there before, its fields then cleared: the work of the rows the keys then judged, for nothing.)
func TestOverlapWarmKeysSkipGlobalScoring(t *testing.T) {
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	const warmUp, sensors = 6000, 20
	rows := fleet(sensors, warmUp+4000, 0.01, 11)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	accel := &globalCountingAccel{keyedTwinAccel: &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}}
	s, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.Nop(), Accelerator: accel, Overlap: OverlapOnGPU})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var scores []batch.Score
	take := func(bs []*batch.Batch, err error) {
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			scores = append(scores, slices.Clone(b.Scores)...)
			b.Release()
		}
	}
	process := func(lo, hi int) {
		for at := lo; at < hi; at += 250 {
			var tr []testbatch.Row
			for i := at; i < at+250; i++ {
				tr = append(tr, testbatch.Row{Offset: int64(i), Key: []byte(rows[i].key), Features: []float32{rows[i].value}})
			}
			take(s.Process(context.Background(), testbatch.New(t, mem, "fleet", []string{"value"}, false, false, tr)))
			s.KeyStats() // (the pipeline's metrics after every Process call)
			if at%1000 == 500 {
				take(s.LandScored())
			}
		}
	}
	process(0, warmUp)
	take(s.Drain())
	if st := s.KeyStats(); st.Live != sensors || s.model == nil {
		t.Fatalf("after the warm-up %d of %d keys have a model (global model %v): the test proves nothing", st.Live, sensors, s.model != nil)
	}
	warmedBy := accel.rows.Load()
	if warmedBy == 0 {
		t.Fatal("the global model scored no record in the warm-up: the count counts nothing")
	}
	accel.rows.Store(0)
	scores = scores[:0]
	process(warmUp, len(rows))
	take(s.Drain())
	if len(scores) != len(rows)-warmUp {
		t.Fatalf("%d records returned, want %d", len(scores), len(rows)-warmUp)
	}
	if n := accel.rows.Load(); n != 0 {
		t.Fatalf("every key warm: the global model scored %d of %d records with overlap, want none", n, len(scores))
	}
	for i, sc := range scores {
		if !sc.ByKey || sc.DensityOutlier || sc.DistanceOutlier || sc.EtaProbability != 0 || sc.Weight != 0 || sc.WStar != 0 || sc.Subspace != nil {
			t.Fatalf("record %d of warm keys: %+v, want its key's model's alone", warmUp+i, sc)
		}
	}
	t.Logf("the global model scored %d records of the warm-up's %d, none of the %d after", warmedBy, warmUp, len(scores))
}
