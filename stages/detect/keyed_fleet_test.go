package detect

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// shiftFleet is a fleet of keys sensors read in turn (sensor s at 100*(s+1)*unit(s) with noise sd
// unit(s)), where sensor 0 ("shifted") moves by shift of its sd for length of its readings from
// its reading at, and spikes of +8 sd come on rate of the others' readings. Labels: the shift's
// readings and the spikes.
func shiftFleet(keys, perKey, at, length int, shift, rate float64, unit func(s int) float64, seed uint64) []fleetRow {
	r := rand.New(rand.NewPCG(seed, 42))
	var rows []fleetRow
	for own := range perKey {
		for s := range keys {
			u := unit(s)
			v := 100*float64(s+1)*u + u*r.NormFloat64()
			name, label := fmt.Sprintf("sensor-%02d", s), false
			switch {
			case s == 0:
				name = "shifted"
				if own >= at && own < at+length {
					v += shift * u
					label = true
				}
			case r.Float64() < rate:
				v += 8 * u
				label = true
			}
			rows = append(rows, fleetRow{key: name, value: float32(v), spike: label})
		}
	}
	return rows
}

// fleetFlags runs rows through a keyed stage under keys.tail tail and returns which of the
// shifted key's shift records were significant, the flags and labels of the other keys' warm
// records.
func fleetFlags(t *testing.T, rows []fleetRow, tail KeysTail) (shift []bool, others, labels []bool) {
	t.Helper()
	cfg := keyedConfig()
	cfg.Keys.Tail = tail
	offs := make([]int64, len(rows))
	for i := range offs {
		offs[i] = int64(i)
	}
	sc := runFleet(t, cfg, rows, offs)
	for i, row := range rows {
		switch {
		case row.key == "shifted" && row.spike:
			shift = append(shift, sc[i].Score >= cfg.MinScore)
		case row.key != "shifted" && sc[i].ByKey:
			others, labels = append(others, sc[i].Outlier), append(labels, row.spike)
		}
	}
	return shift, others, labels
}

// TestFleetTailFlagsAModerateShift (docs/BENCHMARKS.md §13.4): one key of a fleet of 10 moves +6
// of its sd for 300 of its records. Under keys.tail: own its model's 200-record calibration puts
// such a reading near min_score and learns the shift within 25-100 records (about 0.15 of it
// flagged, §13.3); under fleet the tail fitted on the fleet's pooled deviations makes nearly
// every shifted reading significant, so it stays out of the key's builds until the shift fills
// outcastFloor of the window: at least half of the 300 flagged, and at least twice own's.
func TestFleetTailFlagsAModerateShift(t *testing.T) {
	unit := func(int) float64 { return 2 }
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6} {
		rows := shiftFleet(10, 2200, 1500, 300, 6, 0, unit, seed)
		own, _, _ := fleetFlags(t, rows, TailOwn)
		fleet, others, _ := fleetFlags(t, rows, TailFleet)
		o, f := count(own), count(fleet)
		t.Logf("seed %d: the shift's 300 records flagged: own %d, fleet %d; the other keys' flags under fleet: %d of %d", seed, o, f, count(others), len(others))
		if f < 150 || f < 2*o {
			t.Errorf("seed %d: fleet flagged %d of the shift's 300 records (own %d): want >= 150 and >= 2x own", seed, f, o)
		}
		if o >= 150 {
			t.Errorf("seed %d: own flagged %d of 300: the test no longer shows the weakness", seed, o)
		}
		if n := count(others); n > len(others)/1000 { // (clean keys: <= 0.1 % flagged)
			t.Errorf("seed %d: %d of the clean keys' %d records flagged under fleet, want <= 0.1 %%", seed, n, len(others))
		}
	}
}

// TestFleetTailUnlikeSensors: the fleet's pooled tail reads each key's deviations in that key's
// own robust sd, so a fleet of sensors whose noise is 1 and 1000 (alternate keys) with +8 sd
// spikes keeps its precision under fleet (>= 0.9, and no more than 0.02 below own's) and its
// recall (no lower than own's).
func TestFleetTailUnlikeSensors(t *testing.T) {
	unit := func(s int) float64 { return []float64{1, 1000}[s%2] }
	rows := shiftFleet(20, 1200, 1200, 0, 0, 0.003, unit, 3)
	var prec, rec [2]float64
	for m, tail := range []KeysTail{TailOwn, TailFleet} {
		_, flags, labels := fleetFlags(t, rows, tail)
		tp, fp, pos := 0, 0, 0
		for i := range flags {
			switch {
			case flags[i] && labels[i]:
				tp++
			case flags[i]:
				fp++
			}
			if labels[i] {
				pos++
			}
		}
		prec[m], rec[m] = float64(tp)/float64(max(tp+fp, 1)), float64(tp)/float64(max(pos, 1))
		t.Logf("%s: spikes %d, flagged %d, precision %.3f, recall %.3f", tail, pos, tp+fp, prec[m], rec[m])
	}
	if prec[1] < 0.9 || prec[1] < prec[0]-0.02 || rec[1] < rec[0] {
		t.Errorf("fleet precision %.3f, recall %.3f against own's %.3f, %.3f: want >= 0.9 and no worse", prec[1], rec[1], prec[0], rec[0])
	}
}

// TestFleetTailFit: the pool takes a pass's noted deviations in record order, none before the
// pass ends; a shard is fitted once it holds fleetReady (its 99th and 99.9th percentiles),
// refitted every fleetRefit; the fleet's tail is the median of the shards' fits, so one shard's
// fault does not move it; the fleet's score is 0 up to the 99th percentile and rises a decade
// from there to the 99.9th, and on at that rate.
func TestFleetTailFit(t *testing.T) {
	keys := []string{"a", "b", "c"}
	for i, k := range keys { // (three shards)
		for _, o := range keys[:i] {
			if fleetShardOf(k) == fleetShardOf(o) {
				t.Fatalf("keys %q and %q share a shard: pick others", k, o)
			}
		}
	}
	var f fleetTail
	pass := func(n int, value func(i int) (string, float32)) {
		f.begin(n)
		for i := range n {
			k, v := value(i)
			f.obs[i], f.shard[i] = v, fleetShardOf(k)
		}
	}
	even := func(i int) float32 { return float32(i%1000) / 100 } // 0.00 .. 9.99, evenly
	pass(fleetReady, func(i int) (string, float32) { return "a", even(i) })
	if f.score(50) != 0 || f.shards[fleetShardOf("a")].size != 0 {
		t.Fatalf("before the pass ends: score %g, want 0 and an empty pool", f.score(50))
	}
	pass(2*fleetReady, func(i int) (string, float32) {
		if i%2 == 0 {
			return "b", even(i / 2)
		}
		return "c", 10 * even(i/2) // (a shard whose fault is 10x further out)
	})
	f.begin(0)
	if !f.ok || f.lo != 9.9 || math.Abs(f.hi-9.99) > 1e-6 {
		t.Fatalf("fit %v at %g and %g, want 9.9 and 9.99 (the median of the three shards')", f.ok, f.lo, f.hi)
	}
	for _, c := range []struct{ z, want float64 }{{1, 0}, {9.9, 0}, {f.hi, 3}, {f.lo + 2*(f.hi-f.lo), 4}} {
		if got := f.score(c.z); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("score(%g) = %g, want %g", c.z, got, c.want)
		}
	}
	pass(fleetRefit-1, func(int) (string, float32) { return "a", 100 })
	f.obs[0] = float32(math.NaN()) // (a record not pooled)
	f.begin(0)
	if a := f.shards[fleetShardOf("a")]; a.lo != 9.9 || a.size != fleetReady+fleetRefit-2 {
		t.Fatalf("shard a refitted after %d (pool %d, lo %g): want its fit kept until %d", fleetRefit-2, a.size, a.lo, fleetRefit)
	}
	pass(2, func(int) (string, float32) { return "a", 100 })
	f.begin(0)
	if a := f.shards[fleetShardOf("a")]; a.lo != 100 || f.lo != 100 {
		t.Fatalf("after %d more shard a's 99th percentile is %g and the fleet's %g, want 100 (the median of 9.9, 99 and 100)", fleetRefit, a.lo, f.lo)
	}
}

// TestFleetTailLiftShrinks: a record's score is its key's own where the fleet's is lower; raised
// to the fleet's for a key whose model holds at least three quarters of a window, by fleetWeight
// of the difference below that (none up to half a window); only a fully weighted key's records
// not significant are pooled.
func TestFleetTailLiftShrinks(t *testing.T) {
	f := fleetTail{ok: true, lo: 3, hi: 4} // (a fit: score(z) = 2 + (z - 3))
	f.begin(5)
	model := func(rows int) *Ranker {
		col := make([]float32, rows)
		for i := range col {
			col[i] = float32(i % 2)
		}
		cols := [][]float32{col}
		r, err := buildRanker(cols, sortedColumns(cols), []string{"v"}, keyedConfig())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	at := func(r *Ranker, z float64) [][]float32 { // the value z robust sd from r's median
		d0, d1 := r.Tail.Deviation(0, 0), r.Tail.Deviation(0, 1) // (linear in the value)
		return [][]float32{{float32((z - d0) / (d1 - d0))}}
	}
	for i, c := range []struct {
		rows      int
		z, own    float64
		want      float64
		pooled    bool
		situation string
	}{
		{200, 5, 1, 4, true, "a model of a full window, own 1, deviation 5: the fleet's 4"},
		{180, 5, 6, 6, false, "own above the fleet's: own"},
		{125, 5, 1, 2.5, false, "a model of 5/8 of a window: half the way to 4"},
		{100, 5, 1, 1, false, "a model of half a window: own"},
		{150, 10, 1, 9, false, "deviation 10: 9, significant"},
	} {
		r := model(c.rows)
		got := f.lift("k", r, at(r, c.z), c.own, 5, 200, i)
		if math.Abs(got-c.want) > 1e-4 {
			t.Errorf("%s: %g, want %g", c.situation, got, c.want)
		}
		if pooled := f.obs[i] == f.obs[i]; pooled != c.pooled || pooled && math.Abs(float64(f.obs[i])-c.z) > 1e-4 {
			t.Errorf("%s: pooled %v (%g), want %v", c.situation, pooled, f.obs[i], c.pooled)
		}
	}
	var none *fleetTail
	r := model(200)
	if got := none.lift("k", r, at(r, 5), 1, 5, 200, 0); got != 1 {
		t.Errorf("keys.tail own: %g, want own's 1", got)
	}
}

// TestValidateKeysTail: keys.tail is own or fleet, live.
func TestValidateKeysTail(t *testing.T) {
	for _, c := range []struct {
		tail KeysTail
		ok   bool
	}{{TailOwn, true}, {TailFleet, true}, {"pooled", false}, {"", false}} {
		cfg := keyedConfig()
		cfg.Keys.Tail = c.tail
		err := cfg.Validate()
		if c.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "detect.keys.tail: ") {
			t.Errorf("keys.tail %q: %v", c.tail, err)
		}
	}
	old, new := keyedConfig(), keyedConfig()
	new.Keys.Tail = TailFleet
	if ch := ConfigChanges(old, new); len(ch) != 1 || ch[0].Key != "detect.keys.tail" || ch[0].Kind != ChangeLive {
		t.Errorf("changes %+v, want detect.keys.tail live", ch)
	}
}
