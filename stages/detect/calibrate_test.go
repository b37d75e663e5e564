package detect

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// runAll feeds rows [0, rows) of d through s in batches of size and returns every score in order.
func runAll(t *testing.T, s *Stage, mem memory.Allocator, process func(*batch.Batch) ([]*batch.Batch, error), rows, size int, mk func(lo, hi int) *batch.Batch) ([]batch.Score, []uint64) {
	t.Helper()
	var scores []batch.Score
	var versions []uint64
	take := func(out []*batch.Batch) {
		for _, b := range out {
			scores = append(scores, b.Scores...)
			for range b.Len() {
				versions = append(versions, b.ModelVersion)
			}
			b.Record.Release()
		}
	}
	for lo := 0; lo < rows; lo += size {
		out, err := process(mk(lo, min(lo+size, rows)))
		if err != nil {
			t.Fatal(err)
		}
		take(out)
	}
	out, err := s.Flush()
	if err != nil {
		t.Fatal(err)
	}
	take(out)
	return scores, versions
}

// TestBatchCaseOneModelOfTheWholeData: with window = min_records = the data's rows and
// before_model hold, one model of every row scores every row (replay's batch case). Its
// density score must be the tail score of the whole data computed from the definition
// (a model of a prefix would count other records), and its distance score the k-NN weight
// against the window sample without the record itself (brute force here).
func TestBatchCaseOneModelOfTheWholeData(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const rows = 1500
	cfg := testConfig()
	cfg.Window, cfg.MinRecords, cfg.BeforeModel, cfg.FlagBy = rows, rows, BeforeModelHold, FlagByRate
	cfg.Score.Sample = 400
	s := newTestStage(t, cfg)
	d := testData(rows, 9)
	scores, versions := runAll(t, s, mem, func(b *batch.Batch) ([]*batch.Batch, error) { return s.Process(context.Background(), b) },
		rows, 200, func(lo, hi int) *batch.Batch { return makeBatch(t, mem, d, lo, hi, true) })
	if len(scores) != rows {
		t.Fatalf("%d of %d records came out", len(scores), rows)
	}
	m := s.Model()
	tail := rank.NewTail(d.Cols)
	want := make([]float64, rows)
	tail.Score(d.Cols, want)
	nm := m.Ranker.distanceSpace(d.Cols, nil)
	ref := m.Ranker.Ref
	for i, sc := range scores {
		if !sc.Scored || versions[i] != 1 {
			t.Fatalf("record %d: scored %v by model %d, want model 1", i, sc.Scored, versions[i])
		}
		if sc.DensityScore != want[i] {
			t.Fatalf("record %d: density score %v, the whole data's tail score %v", i, sc.DensityScore, want[i])
		}
		dist := make([]float64, len(ref.Points[0]))
		for r := range dist {
			var s2 float64
			for j := range nm {
				dd := float64(nm[j][i]) - float64(ref.Points[j][r])
				s2 += dd * dd
			}
			dist[r] = math.Sqrt(s2)
		}
		slices.Sort(dist)
		if dist[0] == 0 {
			dist = dist[1:] // the record itself, when drawn into the sample
		}
		var w float64
		for _, v := range dist[:ref.K] {
			w += v
		}
		// float32 coordinates and the kernels' float32 distances: 1e-4 relative is far below
		// the gaps between neighbours that ranking depends on.
		if math.Abs(sc.DistanceScore-w) > 1e-4*w {
			t.Fatalf("record %d: distance score %v, brute force %v", i, sc.DistanceScore, w)
		}
		if sc.Outlier != (sc.Score > sc.Threshold) {
			t.Fatalf("record %d: outlier %v with score %v, threshold %v", i, sc.Outlier, sc.Score, sc.Threshold)
		}
	}
}

// TestAlarmRateFlagsThatRate: with flag_by rate, records drawn like the window are flagged at
// about alarm_rate.
func TestAlarmRateFlagsThatRate(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.FlagBy, cfg.AlarmRate = FlagByRate, 0.05
	s := newTestStage(t, cfg)
	d := testData(cfg.MinRecords+4000, 3)
	feed(t, s, mem, d, 0, cfg.MinRecords, 250)
	if s.Model() == nil {
		t.Fatal("no model")
	}
	sc := scoreWith(t, s, mem, d, cfg.MinRecords, cfg.MinRecords+4000)
	flagged := 0
	for _, x := range sc {
		if x.Outlier {
			flagged++
		}
	}
	// Binomial(4000, 0.05): sd 13.8 records; the threshold's own sampling error (a quantile of
	// 1000 calibration records) adds about as much. 60 records is over 3 combined sd.
	if flagged < 200-60 || flagged > 200+60 {
		t.Fatalf("flagged %d of 4000 at alarm rate 0.05, want about 200", flagged)
	}
	// flag_by verdicts: the paper's rule decides, the scores are still there.
	if _, err := s.Reconfigure(func() Config { c := s.Config(); c.FlagBy = FlagByVerdicts; return c }()); err != nil {
		t.Fatal(err)
	}
	sc = scoreWith(t, s, mem, d, cfg.MinRecords, cfg.MinRecords+4000)
	for i, x := range sc {
		if x.Outlier != (x.DensityOutlier || x.DistanceOutlier) || math.IsNaN(x.Score) {
			t.Fatalf("record %d under flag_by verdicts: outlier %v, density %v, distance %v, score %v", i, x.Outlier, x.DensityOutlier, x.DistanceOutlier, x.Score)
		}
	}
}

// TestRankingScoresStayFiniteAtExtremes: the largest float32 values (a sensor's "no reading"
// sentinel) in the window and in a query give finite scores, and the query ranks above the
// window's records: the tail score caps a feature's excess, the distance space is clamped.
func TestRankingScoresStayFiniteAtExtremes(t *testing.T) {
	d := testData(1500, 4)
	d.Cols[0][7] = math.MaxFloat32 // in the window
	cfg := testConfig()
	cfg.FlagBy = FlagByRate
	m, err := Build(d.Cols, d.SD, d.Features, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := m.Ranker
	// One sentinel must not set feature 0's unit of distance: it stays that of the others.
	clean := testData(1500, 4)
	_, want := standardisation(clean.Cols, sortedColumns(clean.Cols))
	if u := r.Unit[0]; !(u > want[0]/2 && u < want[0]*2) {
		t.Fatalf("feature 0's unit %v with one FLT_MAX in the window, %v without", u, want[0])
	}
	q := [][]float32{{-math.MaxFloat32, 0.5}, {math.MaxFloat32, 0.5}, {0.5, 0.5}}
	dens, dist := make([]float64, 2), make([]float64, 2)
	r.Tail.Score(q, dens)
	solvingsetKNN(r, q, dist)
	for i := range 2 {
		s := r.combine(dens[i], dist[i])
		if math.IsNaN(s) || math.IsInf(s, 0) || math.IsNaN(dens[i]) || math.IsInf(dist[i], 0) {
			t.Fatalf("query %d: density %v, distance %v, combined %v", i, dens[i], dist[i], s)
		}
	}
	if a, b := r.combine(dens[0], dist[0]), r.combine(dens[1], dist[1]); !(a > b) || !(a > r.Threshold(0.001)) {
		t.Fatalf("the extreme query scores %v, an ordinary one %v, threshold %v", a, b, r.Threshold(0.001))
	}
}

// solvingsetKNN is the distance score of raw queries as rankDetector.Score computes it for new records.
func solvingsetKNN(r *Ranker, q [][]float32, out []float64) {
	r.Ref.ScoreBatch(r.distanceSpace(q, nil), out, 1)
}

// TestReasonNamesEveryTestThatFired: the alarm threshold first, then the paper's verdicts and
// the hypercube's; nothing for a record no test flagged.
func TestReasonNamesEveryTestThatFired(t *testing.T) {
	s := batch.Score{Scored: true, Outlier: true, Score: 3.2, Threshold: 2.5, DensityOutlier: true, EtaProbability: 0.01,
		Subspace: []string{"temp"}, DistanceOutlier: true, Weight: 9, WStar: 6,
		Hypercube: &batch.HypercubeScore{Neighbours: 1, Outlier: true}, Deviations: []batch.Deviation{{Feature: "temp", RobustSD: -7.5}}}
	want := "score 3.2 >= threshold 2.5 (temp -7.5 robust sd from the window's median); eta-probability 0.01 < delta in [temp]; w_k(q,S) 9 >= w* 6; hypercube neighbours 1 <= max_neighbours"
	if got := Reason(&s); got != want {
		t.Errorf("Reason = %q, want %q", got, want)
	}
	if got := Reason(&batch.Score{Scored: true, Score: 1, Threshold: 2.5}); got != "" {
		t.Errorf("Reason of an inlier = %q, want empty", got)
	}
	// A test that fired on a record the flag rule left unflagged gives no reason: a verdict row
	// never says false beside an outlier's reason.
	if got := Reason(&batch.Score{Scored: true, Score: 1, Threshold: 2.5, DensityOutlier: true, Subspace: []string{"temp"}}); got != "" {
		t.Errorf("Reason of an unflagged record = %q, want empty", got)
	}
	// A suppressed record in the words of the sink's explanation (replay's said "suppressed, the
	// alarm cap is spent: ...", the output "not flagged, the alarm cap is spent (detect.alarm_rate): ...").
	sup := batch.Score{Scored: true, Suppressed: true, Score: 6, Threshold: 5}
	if got := Reason(&sup); got != "not flagged, the alarm cap is spent (detect.alarm_rate): score 6 >= threshold 5" {
		t.Errorf("Reason of a suppressed record = %q", got)
	}
}

// TestReasonSaysScoredByTheGlobalModel: under key_by, a flagged record of a key still warming
// was scored by the global model, and replay's reason says so as the sink's explanation does
// (docs/OPERATIONS.md, "Models per key": "their explanation says so"); it used to say nothing.
func TestReasonSaysScoredByTheGlobalModel(t *testing.T) {
	s := batch.Score{Scored: true, Outlier: true, Warming: true, Score: 6, Threshold: 5, DistanceOutlier: true, Weight: 9, WStar: 6}
	want := "score 6 >= threshold 5; scored by the global model: its key has too few records for its own (detect.keys.min_records); w_k(q,S) 9 >= w* 6"
	if got := Reason(&s); got != want {
		t.Errorf("Reason of a warming key's flagged record = %q, want %q", got, want)
	}
	s.Warming, s.ByKey, s.DistanceOutlier = false, true, false
	s.Deviations = []batch.Deviation{{Feature: "value", RobustSD: 8.2}}
	if got, want := Reason(&s), "score 6 >= threshold 5 (value +8.2 robust sd from its key's window's median)"; got != want {
		t.Errorf("Reason of a record its key's model scored = %q, want %q", got, want)
	}
	if got := Reason(&s); strings.Contains(got, "global model") {
		t.Errorf("Reason of a record its key's model scored = %q", got)
	}
	if got := Reason(&batch.Score{Scored: true, Warming: true, Score: 1, Threshold: 5}); got != "" {
		t.Errorf("Reason of a warming key's inlier = %q, want empty", got)
	}
}

// TestReasonSaysFoldedIntoAlert: under detect.alert_cooldown replay's reason says what the sink's
// explanation says of a flagged record folded into its key's open alert, and of an alert that
// folded others; it said neither, so a replay with a cooldown read as one without.
func TestReasonSaysFoldedIntoAlert(t *testing.T) {
	s := batch.Score{Scored: true, Outlier: true, Grouped: true, Score: 6, Threshold: 5, DistanceOutlier: true, Weight: 9, WStar: 6}
	want := "score 6 >= threshold 5; folded into this key's open alert (detect.alert_cooldown); w_k(q,S) 9 >= w* 6"
	if got := Reason(&s); got != want {
		t.Errorf("Reason of a record folded into an alert = %q, want %q", got, want)
	}
	s.Grouped, s.Folded = false, 12
	want = "score 6 >= threshold 5; 12 more flagged records of this key were folded into its previous alert (detect.alert_cooldown); w_k(q,S) 9 >= w* 6"
	if got := Reason(&s); got != want {
		t.Errorf("Reason of an alert after 12 folded records = %q, want %q", got, want)
	}
}

// TestReconfigureScoreRebuilds: a score.* change rebuilds the model with the new settings
// (the ranker is part of the model); alarm_rate applies to the next batch with the same model.
func TestReconfigureScoreRebuilds(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	s, flaggedRows := readyStage(t, mem, cfg)
	next := cfg
	next.Score.K, next.Score.Combine = 7, CombineMax
	r, err := s.Reconfigure(next)
	if err != nil || !r.RebuildStarted {
		t.Fatalf("score change: %+v %v, want a rebuild started", r, err)
	}
	s.collect(true)
	if m := s.Model(); m.Version != 2 || m.Ranker.Ref.K != 7 || m.Ranker.Params.Combine != CombineMax {
		t.Fatalf("version %d, ranker k %d combine %q: want 2, 7, max", m.Version, m.Ranker.Ref.K, m.Ranker.Params.Combine)
	}
	next.AlarmRate = 0.3
	if r, err = s.Reconfigure(next); err != nil || r.RebuildStarted || len(r.Rebuild) > 0 {
		t.Fatalf("alarm_rate change: %+v %v, want live", r, err)
	}
	next.FlagBy = FlagByRate
	if _, err = s.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	flagged := len(flaggedRows(1500, 2500)) // the records after the window, drawn like it
	// 30% of 1000 records like the window: binomial sd 14.5, plus the threshold's own error.
	if flagged < 230 || flagged > 370 || s.Model().Version != 2 {
		t.Fatalf("alarm rate 0.3 flagged %d of 1000 (model %d)", flagged, s.Model().Version)
	}
}

// TestDistanceLimitIsTheKernels: the stage's distance space is clamped as the keyed kernel and
// the accelerator's host fallback clamp it (gpukern.KeyedLimit), so a key scored on the device,
// on its CPU twin or by the stage itself gets the same distance.
func TestDistanceLimitIsTheKernels(t *testing.T) {
	if distanceLimit != gpukern.KeyedLimit {
		t.Fatalf("detect's distanceLimit %g, gpukern.KeyedLimit %g", float64(distanceLimit), float64(gpukern.KeyedLimit))
	}
}
