package detect

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// arStream is probe_targets.py's AR(1) family: three sensors (70 +- 2, 1013 +- 1.5, 45 +- 3
// stationary sd) of AR(phi) noise, n rows; spike(i) adds a spike of that many stationary sd to
// the temperature (0: none).
func arStream(n int, phi float64, seed uint64, spike func(i int) float64) (*synth.Data, []bool) {
	r := rand.New(rand.NewPCG(seed, 29))
	level, sd := []float64{70, 1013, 45}, []float64{2, 1.5, 3}
	d := &synth.Data{Features: []string{"temp", "pres", "hum"}, Cols: make([][]float32, 3)}
	e := math.Sqrt(1 - float64(phi*phi))
	label := make([]bool, n)
	for j := range 3 {
		d.Cols[j] = make([]float32, n)
		x := r.NormFloat64()
		for i := range n {
			x = float64(phi*x) + float64(e*r.NormFloat64())
			d.Cols[j][i] = float32(level[j] + float64(sd[j]*x))
		}
	}
	for i := range n {
		if s := spike(i); s != 0 {
			d.Cols[0][i] += float32(s * sd[0])
			label[i] = true
		}
	}
	return d, label
}

// withYoung31 runs f with the candidate set to on.
func withYoung31(on bool, f func()) {
	was := young31
	young31 = on
	defer func() { young31 = was }()
	f()
}

// TestYoungOfReadsTheCorrelationTime: an AR(phi) window's columns read as autocorrelated with
// tau = (1 + phi) / (1 - phi) within 20 % (the robust estimate's spread at 50,000 rows of
// phi 0.99, about 250 independent stretches, is a few percent; 20 % leaves room for the
// window's MAD under-reading the stationary spread); independent columns give nil (main's
// model).
func TestYoungOfReadsTheCorrelationTime(t *testing.T) {
	withYoung31(true, func() {
		d, _ := arStream(50000, 0.99, 1, func(int) float64 { return 0 })
		y := youngOf(d.Cols)
		if y == nil {
			t.Fatal("AR(0.99): no autocorrelated column")
		}
		tau := math.Pow(10, y.shift)
		if want := 1.99 / 0.01; tau < 0.8*want || tau > 1.2*want {
			t.Errorf("AR(0.99) over 50,000 rows: tau %.0f (want %.0f within 20 %%)", tau, want)
		}
		iid, _ := arStream(50000, 0, 1, func(int) float64 { return 0 })
		if y := youngOf(iid.Cols); y != nil {
			t.Errorf("independent columns read as autocorrelated: %+v", y)
		}
	})
	if y := youngOf([][]float32{{1, 2, 3, 4}}); y != nil {
		t.Errorf("switch unset: youngOf = %+v, want nil (main's model)", y)
	}
}

// runYoung31 streams d through the default stage (cfg) with the candidate off or on, and returns
// every record's score, recent score and flag, the share of the clean rows after min_records
// that is flagged, the spikes left unflagged, and the stream's records when the hold began (0:
// no verdict held).
func runYoung31(t *testing.T, cfg Config, d *synth.Data, label []bool, on bool) (scores, recent []float64, flagged []bool, clean float64, missed, held int) {
	t.Helper()
	withYoung31(on, func() {
		var s *Stage
		scores, recent, flagged, _, s = streamScoresRecent(t, cfg, d)
		held = int(s.yhold.from)
		if held > 0 {
			t.Logf("verdicts held from record %d to %d (%s)", held, s.yhold.releasedAt, s.yhold.how)
		}
	})
	c, f := 0, 0
	for i := cfg.MinRecords; i < len(label); i++ {
		switch {
		case label[i] && !flagged[i]:
			missed++
		case !label[i]:
			c++
			if flagged[i] {
				f++
			}
		}
	}
	return scores, recent, flagged, float64(f) / float64(c), missed, held
}

// spikes is a spike function for arStream: +20-30 stationary sd on 0.1 % of the rows.
func spikes(seed uint64) func(int) float64 {
	r := rand.New(rand.NewPCG(seed, seed))
	return func(int) float64 {
		if r.Float64() < 0.001 {
			return 20 + 10*r.Float64()
		}
		return 0
	}
}

// sameAsMains fails unless every score, recent score and flag is main's bit for bit.
func sameAsMains(t *testing.T, what string, scores, recent []float64, flags []bool, mScores, mRecent []float64, mFlags []bool) {
	t.Helper()
	for i := range scores {
		if math.Float64bits(scores[i]) != math.Float64bits(mScores[i]) || math.Float64bits(recent[i]) != math.Float64bits(mRecent[i]) || flags[i] != mFlags[i] {
			t.Fatalf("%s: row %d: score %v recent %v flag %v, main's %v %v %v", what, i, scores[i], recent[i], flags[i], mScores[i], mRecent[i], mFlags[i])
		}
	}
}

// TestYoung31ImmatureModelIsMains: a window too short for its columns' correlation time (5,000
// rows of AR(0.999), tau 1,999: the first model is built from a full window, and every model
// reads n / tau_hat below 10) keeps main's behaviour exactly: nothing held, every score, recent
// score and flag main's bit for bit.
func TestYoung31ImmatureModelIsMains(t *testing.T) {
	d, label := arStream(20000, 0.999, 3, spikes(7))
	cfg := Default()
	cfg.Window = 5000
	mScores, mRecent, mFlags, mClean, _, _ := runYoung31(t, cfg, d, label, false)
	scores, recent, flags, _, _, held := runYoung31(t, cfg, d, label, true)
	if mClean == 0 {
		t.Fatal("main flags no clean row: the stream no longer shows a wander")
	}
	if held != 0 {
		t.Errorf("verdicts held from record %d under a full window's first model", held)
	}
	sameAsMains(t, "window 5,000", scores, recent, flags, mScores, mRecent, mFlags)
}

// TestYoung31InputEndsBeforeMaturity: an input that ends while the verdicts are held and no
// model has matured (8,000 rows of AR(0.999): about 4 correlation times; main's first model and
// its recalibrations serve) releases every held record with main's verdicts: every score,
// recent score and flag (after the cap and the deadband, run at the release) main's bit for bit.
func TestYoung31InputEndsBeforeMaturity(t *testing.T) {
	d, label := arStream(8000, 0.999, 3, spikes(7))
	cfg := Default()
	mScores, mRecent, mFlags, mClean, _, _ := runYoung31(t, cfg, d, label, false)
	if mClean == 0 {
		t.Fatal("main flags no clean row: the held verdicts would not be tested")
	}
	var s *Stage
	withYoung31(true, func() {
		var scores, recent []float64
		var flags []bool
		scores, recent, flags, _, s = streamScoresRecent(t, cfg, d)
		sameAsMains(t, "8,000 rows", scores, recent, flags, mScores, mRecent, mFlags)
	})
	if s.yhold.from == 0 || s.yhold.how != "main's: the input ended" {
		t.Errorf("the hold: from %d, released at %d by %q; want held and released by the input's end", s.yhold.from, s.yhold.releasedAt, s.yhold.how)
	}
}

// TestWanderingSensorsWithinT2: issue 20's T2 on a healthy AR(0.999) stream (§12.34 finding 1:
// main flags several percent of it; the target is at most 0.1 % of the rows after min_records),
// with T1's spikes (+20-30 stationary sd on 0.1 % of the rows) every one flagged; on the stream
// as is and with a fourth column held at one value (a command or a status, as every SMAP/MSL
// series has: §12.74). Main's behaviour fails it (the first check below asserts that, so the
// test keeps measuring the defect); the candidate's first model is main's (a 5,000-row window spans
// about 2.5 correlation times of tau 1,999): main's models serve it, their verdicts held until the
// first mature model re-judges them, and the spikes held meanwhile are flagged by it.
func TestWanderingSensorsWithinT2(t *testing.T) {
	const n = 60000 // (young31b_rule.md: fold B needs ten correlation times after the split, about 17,500 rows here)
	d, label := arStream(n, 0.999, 3, spikes(7))
	held := make([]float32, n)
	for i := range held {
		held[i] = 1
	}
	withHeld := &synth.Data{Features: append(slices.Clone(d.Features), "valve"), Cols: append(slices.Clone(d.Cols), held)}
	for _, tc := range []struct {
		name string
		d    *synth.Data
	}{{"three sensors", d}, {"and a column held at one value", withHeld}} {
		_, _, _, mainClean, _, _ := runYoung31(t, Default(), tc.d, label, false)
		_, _, _, clean, missed, waited := runYoung31(t, Default(), tc.d, label, true)
		t.Logf("AR(0.999) %s, %d rows: clean rows flagged main %.3f %%, candidate %.3f %%; spikes missed %d; the verdicts held from record %d", tc.name, n, 100*mainClean, 100*clean, missed, waited)
		if mainClean <= 0.001 {
			t.Fatalf("%s: main flags %.3f %% of the clean rows: the stream no longer shows the defect", tc.name, 100*mainClean)
		}
		if waited == 0 {
			t.Errorf("%s: no verdict held", tc.name)
		}
		if clean > 0.001 { // issue 20's T2: at most 0.1 %
			t.Errorf("%s: %.3f %% of the clean rows flagged (T2: at most 0.1 %%)", tc.name, 100*clean)
		}
		if missed > 0 {
			t.Errorf("%s: %d spikes not flagged (T1: every one)", tc.name, missed)
		}
	}
}

// TestYoung31InputEndsAfterAnImmatureJudge: a model of main's cadence reads mature (its
// reference without main's outcasts) while the judge built from the repaired window does not
// ((6'): the hold goes on under it), at the input's end: every held record is still released,
// with main's verdicts (the first 13,000 rows of seed 3's AR(0.999) stream: the model built at
// 13,000 reads mature, its judge, built at the end, does not). A replay of SKAB's other/14.csv
// lost its 905 rows this way before the fix: the release returned nothing when the judge read
// immature at the input's end.
func TestYoung31InputEndsAfterAnImmatureJudge(t *testing.T) {
	d, _ := arStream(19000, 0.999, 3, spikes(7))
	for j, c := range d.Cols {
		d.Cols[j] = c[:13000]
	}
	withYoung31(true, func() {
		_, _, flagged, _, s := streamScoresRecent(t, Default(), d) // (fails on a row that does not come out)
		if s.yhold.judges == 0 || s.yhold.how != "main's: the input ended" {
			t.Fatalf("the hold: %d judges, released at %d by %q; want a judge read immature and the release at the input's end", s.yhold.judges, s.yhold.releasedAt, s.yhold.how)
		}
		if len(flagged) != 13000 {
			t.Fatalf("%d rows out of 15,000", len(flagged))
		}
	})
}

// TestYoung31bHeldFaultKeepsItsFlags: a fault held before the first mature model (a level shift
// of +10 stationary sd on the temperature over 600 rows, 10,000-10,599, of the 60,000-row
// AR(0.999) stream: well inside fold A, the hold splitting at about 17,500) is judged by a model
// that has not read it (young31b_rule.md (6b)) and keeps its flags: at least half of its rows
// flagged, as main flags them. young31's judge had read the held records (§12.84: SKAB's
// valve1/7 301 -> 0 flags); the clean rows stay within T2.
func TestYoung31bHeldFaultKeepsItsFlags(t *testing.T) {
	const n, lo, hi = 60000, 10000, 10600
	d, label := arStream(n, 0.999, 3, spikes(7))
	for i := lo; i < hi; i++ {
		d.Cols[0][i] += 10 * 2 // (the temperature's stationary sd is 2)
		label[i] = true
	}
	count := func(flags []bool) (k int) {
		for i := lo; i < hi; i++ {
			if flags[i] {
				k++
			}
		}
		return k
	}
	_, _, mFlags, _, _, _ := runYoung31(t, Default(), d, label, false)
	_, _, flags, clean, _, held := runYoung31(t, Default(), d, label, true)
	t.Logf("fault rows flagged: main %d, candidate %d of %d; clean rows flagged %.3f %%; held from %d", count(mFlags), count(flags), hi-lo, 100*clean, held)
	if count(mFlags) < (hi-lo)/2 {
		t.Fatalf("main flags %d of the fault's %d rows: the fault no longer shows", count(mFlags), hi-lo)
	}
	if held == 0 || held > lo {
		t.Fatalf("the hold began at %d: the fault is not in fold A", held)
	}
	if k := count(flags); k < (hi-lo)/2 {
		t.Errorf("the candidate flags %d of the held fault's %d rows (at least half: main flags %d)", k, hi-lo, count(mFlags))
	}
	if clean > 0.001 {
		t.Errorf("%.3f %% of the clean rows flagged (T2: at most 0.1 %%)", 100*clean)
	}
}
