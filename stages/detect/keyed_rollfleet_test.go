package detect

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// rollFleetFitted is a stage's pools for features (value, its std over 32, value, its mean over
// 32) with each full-class pool fed the deviations |N(0,1)| times scale (the reference: the
// non-rolling columns' pool at scale 1, the std's at 2, the mean's unfed) and folded: a fitted
// fleet as a pass's start leaves it.
func rollFleetFitted(t *testing.T) *rollFleet {
	t.Helper()
	f := newRollFleet([]int{0, 32, 0, 32})
	r := rand.New(rand.NewPCG(3, 4))
	n := rollReady
	f.begin(n)
	for i := range n {
		f.class[i] = 1
		obs := f.obs[i*4 : (i+1)*4]
		obs[0], obs[2] = float32(math.Abs(r.NormFloat64())), float32(math.Abs(r.NormFloat64()))
		obs[1], obs[3] = float32(2*math.Abs(r.NormFloat64())), float32(math.NaN())
	}
	if f.fit.ok[1][1] {
		t.Fatal("a pool fitted within its pass: fits change at a pass's start only")
	}
	f.begin(0)
	return f
}

// TestRollFleetWidths (keyroll28): the fleet's width of a rolling column is its pool's 99.9th
// percentile over the non-rolling columns' (at least 1), from the fit of the pass's start; a
// column whose pool is not fitted (here the mean's; every column of the young class) takes the
// prior, rollingWidth; a column that is not rolling is not the pools' to widen.
func TestRollFleetWidths(t *testing.T) {
	if newRollFleet(nil) != nil {
		t.Fatal("pools for a stage without a rolling column")
	}
	f := rollFleetFitted(t)
	fit := f.fit
	if !fit.ok[1][1] || !fit.ok[1][4] || fit.ok[1][3] || fit.ok[0][1] {
		t.Fatalf("fitted: std %v, reference %v, mean %v, young std %v; want true, true, false, false", fit.ok[1][1], fit.ok[1][4], fit.ok[1][3], fit.ok[0][1])
	}
	// The reference pool holds 2 x 2048 values, the std's 2048 (one a record): the 99.9th
	// percentile of |N(0,1)| is 3.29, of 2|N(0,1)| 6.58; with 2,048-4,096 draws each is within
	// about 10 % (its order statistic's sd), so the ratio is 2 within 20 %.
	w := f.width(1, 200, 200, 5)
	if got, want := w, fit.q[1][1]/fit.q[1][4]; got != want {
		t.Fatalf("width %v, want q_std / q_ref = %v", got, want)
	}
	if w < 1.6 || w > 2.4 {
		t.Fatalf("width %v of a column twice as spread as the reference; want about 2", w)
	}
	if got, want := f.width(3, 200, 200, 5), rollingWidth(200, 32, 5); got != want {
		t.Fatalf("an unfitted pool's width %v, want the prior %v", got, want)
	}
	if got, want := f.width(1, 100, 200, 5), rollingWidth(100, 32, 5); got != want {
		t.Fatalf("a young build's width %v (its class unfitted), want the prior %v", got, want)
	}
	cfg := Default()
	cfg.KeyBy, cfg.roll = KeyByKey, f
	ws := keyWidths(&cfg, 4, 200, nil)
	if ws[0] != 1 || ws[2] != 1 || ws[1] != w {
		t.Fatalf("keyWidths %v: want 1 for the raw columns and %v for the std", ws, w)
	}
	// A width is never below 1: a rolling column whose deviations stay within the reference's.
	f.fit.q[1][1] = f.fit.q[1][4] / 2
	if got := f.width(1, 200, 200, 5); got != 1 {
		t.Fatalf("width %v of a column narrower than the reference, want 1", got)
	}
}

// TestRollFleetPoolsNotedRecords (keyroll28): note pools a record's deviations from its key's model
// in that model's units, by the model's age, and the pass's notes reach the pools at the next
// pass's start in record order (begin).
func TestRollFleetPoolsNotedRecords(t *testing.T) {
	cfg := Default()
	cfg.KeyBy = KeyByKey
	cfg.Keys.Window = 200
	r := rand.New(rand.NewPCG(5, 6))
	st := &keyState{cols: make([][]float32, 2), sig: newFlagRing(200)}
	for j := range st.cols {
		st.cols[j] = make([]float32, 200)
		for i := range st.cols[j] {
			st.cols[j][i] = float32(10*j) + float32(r.NormFloat64())
		}
	}
	st.size = 200
	m, err := buildKeyModelGeneral(st, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := newRollFleet([]int{0, 32})
	f.begin(3)
	x := [][]float32{{3}, {10}}
	f.note(m, x, 200, 1)
	if f.class[0] != 255 || f.class[2] != 255 || f.class[1] != 1 {
		t.Fatalf("classes %v: want only record 1 noted, full", f.class)
	}
	if got, want := f.obs[2], float32(math.Abs(m.Tail.Deviation(0, 3))); got != want {
		t.Fatalf("deviation %v, want |Tail.Deviation| %v", got, want)
	}
	f.begin(0)
	if f.pools[1][2].size != 1 || f.pools[1][1].size != 1 || f.pools[0][1].size != 0 {
		t.Fatalf("pooled: reference %d, std %d, young %d; want 1, 1, 0", f.pools[1][2].size, f.pools[1][1].size, f.pools[0][1].size)
	}
}

// TestKeyBuildRollingWidthsEveryPath (keyroll28): with the fleet's widths a key's model is the
// same, bit for bit, from keyBuild, the general build and the batched build with the device's
// CPU twin (the device sees only R, mapped on the host with the widened unit); its rolling
// column's unit and spread are the unwidened build's times the fleet's width, its other columns'
// the same.
func TestKeyBuildRollingWidthsEveryPath(t *testing.T) {
	f := rollFleetFitted(t)
	cfg := Default()
	cfg.KeyBy = KeyByKey
	cfg.Keys.Window = 200
	plain := cfg
	cfg.roll = f
	r := rand.New(rand.NewPCG(7, 8))
	var due []*keyState
	var wants []*Ranker
	for _, kind := range []string{"normal", "outcasts"} {
		st := &keyState{cols: make([][]float32, 4), sig: newFlagRing(200)}
		for j := range st.cols {
			st.cols[j] = make([]float32, 200)
			for i := range st.cols[j] {
				st.cols[j][i] = float32(5*j) + float32(r.NormFloat64())
			}
		}
		st.size, st.next = 200, r.IntN(200)
		if kind == "outcasts" {
			for i := range 200 {
				st.sig.set(i, i%11 == 0)
			}
		}
		want, err := buildKeyModelGeneral(st, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := new(keyBuild).build(st, &cfg)
		if !ok {
			t.Fatalf("%s: keyBuild declined", kind)
		}
		if d := sameBits(reflect.ValueOf(got), reflect.ValueOf(want), "Ranker"); d != "" {
			t.Fatalf("%s: keyBuild and the general build differ: %s", kind, d)
		}
		if kind == "normal" {
			base, err := buildKeyModelGeneral(st, &plain)
			if err != nil {
				t.Fatal(err)
			}
			w := f.width(1, 200, 200, cfg.MinScore)
			if w == 1 {
				t.Fatal("the fitted fleet widens nothing: the test would not see a width")
			}
			for j := range 4 {
				ws := 1.0
				if j == 1 {
					ws = w
				} else if j == 3 {
					ws = rollingWidth(200, 32, cfg.MinScore)
				}
				if want.Unit[j] != base.Unit[j]*ws || want.Tail.Spread[j] != base.Tail.Spread[j]*ws {
					t.Fatalf("feature %d: unit %v spread %v, want the unwidened %v, %v times %v", j, want.Unit[j], want.Tail.Spread[j], base.Unit[j], base.Tail.Spread[j], ws)
				}
			}
		}
		due, wants = append(due, st), append(wants, want)
	}
	for _, fail := range []bool{false, true} {
		got := make([]*Ranker, len(due))
		buildKeysBatched(due, got, &cfg, &twinSelf{fail: fail})
		for i, want := range wants {
			if d := sameBits(reflect.ValueOf(got[i]), reflect.ValueOf(want), "Ranker"); d != "" {
				t.Fatalf("window %d, batched (device failing: %v): %s", i, fail, d)
			}
		}
	}
}
