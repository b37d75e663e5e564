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

// withYoung29b runs f with the candidate set to on.
func withYoung29b(on bool, f func()) {
	was := young29b
	young29b = on
	defer func() { young29b = was }()
	f()
}

// TestYoungOfReadsTheCorrelationTime: an AR(phi) window's columns read as autocorrelated with
// tau = (1 + phi) / (1 - phi) within 20 % (the robust estimate's spread at 50,000 rows of
// phi 0.99, about 250 independent stretches, is a few percent; 20 % leaves room for the
// window's MAD under-reading the stationary spread); independent columns give nil (main's
// model).
func TestYoungOfReadsTheCorrelationTime(t *testing.T) {
	withYoung29b(true, func() {
		d, _ := arStream(50000, 0.99, 1, func(int) float64 { return 0 })
		y := youngOf(d.Cols, uint64(len(d.Cols[0])))
		if y == nil {
			t.Fatal("AR(0.99): no autocorrelated column")
		}
		tau := math.Pow(10, y.shift)
		if want := 1.99 / 0.01; tau < 0.8*want || tau > 1.2*want || y.young {
			t.Errorf("AR(0.99) over 50,000 rows: tau %.0f (want %.0f within 20 %%), young %v (want mature)", tau, want, y.young)
		}
		iid, _ := arStream(50000, 0, 1, func(int) float64 { return 0 })
		if y := youngOf(iid.Cols, uint64(len(iid.Cols[0]))); y != nil {
			t.Errorf("independent columns read as autocorrelated: %+v", y)
		}
	})
}

// TestWanderingSensorsWithinT2: issue 20's T2 on a healthy AR(0.999) stream (§12.34 finding 1:
// main flags several percent of it; the target is at most 0.1 % of the rows after min_records),
// with T1's spikes (+20 stationary sd on 0.1 % of the rows) every one flagged; on the stream as
// is and with a fourth column held at one value (a command or a status, as every SMAP/MSL series
// has: §12.74 found that such a column of zero scale switched young29's discount off). Main's
// behaviour fails it (the first check below asserts that, so the test keeps measuring the
// defect), and so does young29's on the second stream.
func TestWanderingSensorsWithinT2(t *testing.T) {
	const n = 30000
	r := rand.New(rand.NewPCG(7, 7))
	d, label := arStream(n, 0.999, 3, func(int) float64 {
		if r.Float64() < 0.001 {
			return 20 + 10*r.Float64()
		}
		return 0
	})
	held := make([]float32, n)
	for i := range held {
		held[i] = 1
	}
	withHeld := &synth.Data{Features: append(slices.Clone(d.Features), "valve"), Cols: append(slices.Clone(d.Cols), held)}
	cfg := Default()
	for _, tc := range []struct {
		name string
		d    *synth.Data
	}{{"three sensors", d}, {"and a column held at one value", withHeld}} {
		run := func(on bool) (clean float64, missed int) {
			withYoung29b(on, func() {
				_, flagged, _, _ := streamScores(t, cfg, tc.d)
				c, f := 0, 0
				for i := cfg.MinRecords; i < n; i++ {
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
				clean = float64(f) / float64(c)
			})
			return clean, missed
		}
		mainClean, _ := run(false)
		clean, missed := run(true)
		t.Logf("AR(0.999) %s, %d rows: clean rows flagged main %.3f %%, candidate %.3f %%; spikes missed %d", tc.name, n, 100*mainClean, 100*clean, missed)
		if mainClean <= 0.001 {
			t.Fatalf("%s: main flags %.3f %% of the clean rows: the stream no longer shows the defect", tc.name, 100*mainClean)
		}
		if clean > 0.001 { // issue 20's T2: at most 0.1 %
			t.Errorf("%s: %.3f %% of the clean rows flagged (T2: at most 0.1 %%)", tc.name, 100*clean)
		}
		if missed > 0 {
			t.Errorf("%s: %d spikes not flagged (T1: every one)", tc.name, missed)
		}
	}
}

// TestYoungModelKeepsASustainedFault: a young model (AR(0.999) window of 5,000 rows, tau about
// 2,000) sees a fault that moved the temperature by 20 stationary sd in 100 ordinary-sized
// steps (0.2 sd each, under 5 step sd and about as many nats: no decisive step evidence) and
// stays there for 1,000 rows, from row 6,000. A random walk of the window's steps (sigma =
// 0.045 sd) reaches sigma sqrt(k + n/3) <= 2.8 sd by the fault's end (k <= 2,100 records after
// the window), and the window's median and the wander's own excursion take a few sd more, so
// the level stays beyond 5 reaches: flagged throughout. (A 12 sd fault, measured while writing
// this test, was flagged for its first 750 rows only: L fades as k grows, as the rule prices
// in.) young29's young rule min(S, E) saw such a fault at its onset only; main flags it and the
// wander too. Required: at least 90 % of the fault's rows after its ramp flagged (the deadband
// and cap may hold a few) and the clean rows within T2 (0.1 %).
func TestYoungModelKeepsASustainedFault(t *testing.T) {
	const n, at, ramp, hold, size = 12000, 6000, 100, 1000, 20.0
	d, _ := arStream(n, 0.999, 5, func(i int) float64 {
		switch {
		case i < at || i >= at+ramp+hold:
			return 0
		case i < at+ramp:
			return size * float64(i-at+1) / ramp
		}
		return size
	})
	cfg := Default()
	withYoung29b(true, func() {
		_, flagged, _, _ := streamScores(t, cfg, d)
		fault, clean, cleanFlags := 0, 0, 0
		for i := cfg.MinRecords; i < n; i++ {
			switch {
			case i >= at+ramp && i < at+ramp+hold:
				if flagged[i] {
					fault++
				}
			case i < at || i >= at+ramp+hold:
				clean++
				if flagged[i] {
					cleanFlags++
				}
			}
		}
		t.Logf("fault rows flagged %d of %d; clean rows flagged %d of %d", fault, hold, cleanFlags, clean)
		if fault < 9*hold/10 {
			t.Errorf("%d of the sustained fault's %d rows flagged (want at least 90 %%)", fault, hold)
		}
		if float64(cleanFlags) > 0.001*float64(clean) {
			t.Errorf("%d of %d clean rows flagged (T2: at most 0.1 %%)", cleanFlags, clean)
		}
	})
}
