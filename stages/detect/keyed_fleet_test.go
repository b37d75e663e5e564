package detect

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/outlierd/outlierd/internal/algo/rank"
)

// shiftFleet is a fleet of keys sensors read in turn (sensor s at 100*(s+1)*unit(s) with noise sd
// unit(s)), where sensor 0 ("shifted") moves by shift of its sd for length of its readings from
// its reading at, and spikes of spike sd come on rate of the others' readings. Labels: the
// shift's readings and the spikes.
func shiftFleet(keys, perKey, at, length int, shift, spike, rate float64, unit func(s int) float64, seed uint64) []fleetRow {
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
				v += spike * u
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
// such a reading near min_score and learns the shift within 25-100 records; under fleet the tail
// fitted on the fleet's pooled deviations makes more of it significant, which keeps it out of the
// key's builds for longer. Over six seeds: at least 450 of the 1,800 shifted records significant
// and at least twice own's count, no seed below own; the clean keys at most 0.1 % flagged.
// (Significance, not flags: a shift whose run breaks for a record cannot restart its alarm while
// the key's cap holds its first flags (§13.3), whatever the tail.)
func TestFleetTailFlagsAModerateShift(t *testing.T) {
	unit := func(int) float64 { return 2 }
	var own, fleet int
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6} {
		rows := shiftFleet(10, 2200, 1500, 300, 6, 0, 0, unit, seed)
		o, _, _ := fleetFlags(t, rows, TailOwn)
		f, others, _ := fleetFlags(t, rows, TailFleet)
		t.Logf("seed %d: the shift's 300 records significant: own %d, fleet %d; the clean keys' flags under fleet: %d of %d", seed, count(o), count(f), count(others), len(others))
		if count(f) < count(o) {
			t.Errorf("seed %d: fleet %d of the shift's records significant, own %d", seed, count(f), count(o))
		}
		if n := count(others); n > len(others)/1000 {
			t.Errorf("seed %d: %d of the clean keys' %d records flagged under fleet, want <= 0.1 %%", seed, n, len(others))
		}
		own, fleet = own+count(o), fleet+count(f)
	}
	if fleet < 450 || fleet < 2*own {
		t.Errorf("%d of the 1,800 shifted records significant under fleet, %d under own: want >= 450 and >= 2x own", fleet, own)
	}
}

// TestFleetTailUnlikeSensors: the fleet's pooled tail reads each key's deviations in that key's
// own robust sd, so on a fleet of sensors whose noise is 1 and 1000 (alternate keys) a +6 sd shift
// of 300 records is more often significant under fleet than under own whichever kind of key
// shifts (with the deviations in raw units the 1000s' would make the tail, and a key of unit 1
// would gain nothing), and the other keys' +8 sd spikes are flagged with precision >= 0.9 and
// no more than 0.02 below own's.
func TestFleetTailUnlikeSensors(t *testing.T) {
	for _, shifted := range []float64{1, 1000} {
		other := 1001 - shifted
		unit := func(s int) float64 { return []float64{shifted, other}[s%2] }
		rows := shiftFleet(10, 2200, 1500, 300, 6, 8, 0.002, unit, 4)
		var sig [2]int
		var prec [2]float64
		for m, tail := range []KeysTail{TailOwn, TailFleet} {
			shift, flags, labels := fleetFlags(t, rows, tail)
			tp, fp := 0, 0
			for i := range flags {
				switch {
				case flags[i] && labels[i]:
					tp++
				case flags[i]:
					fp++
				}
			}
			sig[m], prec[m] = count(shift), float64(tp)/float64(max(tp+fp, 1))
			t.Logf("shifted key of unit %g, %s: %d of the shift's 300 records significant; the others' spikes: %d flags, precision %.3f", shifted, tail, sig[m], tp+fp, prec[m])
		}
		if sig[1] <= sig[0] {
			t.Errorf("shifted key of unit %g: %d of its shift significant under fleet, %d under own: want more", shifted, sig[1], sig[0])
		}
		if prec[1] < 0.9 || prec[1] < prec[0]-0.02 {
			t.Errorf("shifted key of unit %g: the spikes' precision %.3f under fleet, %.3f under own: want >= 0.9 and no more than 0.02 lower", shifted, prec[1], prec[0])
		}
	}
}

// TestFleetTailFit: the pool takes a pass's noted deviations in record order, none before the
// pass ends; a shard is fitted once it holds fleetReady (its 99th and 99.9th percentiles: ranks
// round(0.99 (n-1)) and round(0.999 (n-1))), refitted every fleetRefit; the fleet's tail is the
// median of the shards' fits, so one shard's fault does not move it; the fleet's score is 0 up to
// the 99th percentile and rises a decade from there to the 99.9th, and on at that rate.
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
	pass(fleetReady, func(i int) (string, float32) { return "a", float32(fleetReady - 1 - i) }) // 0 .. 1023
	if f.score(5000) != 0 || f.shards[fleetShardOf("a")].size != 0 {
		t.Fatalf("before the pass ends: score %g, want 0 and an empty pool", f.score(5000))
	}
	pass(2*fleetReady, func(i int) (string, float32) {
		if i%2 == 0 {
			return "b", float32(i / 2)
		}
		return "c", float32(10 * (i / 2)) // (a shard whose fault is 10x further out)
	})
	f.begin(0)
	if !f.ok || f.lo != 1013 || f.hi != 1022 {
		t.Fatalf("fit %v at %g and %g, want 1013 and 1022 (the median of the three shards')", f.ok, f.lo, f.hi)
	}
	for _, c := range []struct{ z, want float64 }{{1, 0}, {1013, 0}, {1022, 3}, {1031, 4}} {
		if got := f.score(c.z); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("score(%g) = %g, want %g", c.z, got, c.want)
		}
	}
	pass(fleetRefit, func(int) (string, float32) { return "a", 2000 })
	f.obs[0] = float32(math.NaN()) // (a record not pooled)
	f.begin(0)
	if a := f.shards[fleetShardOf("a")]; a.lo != 1013 || a.size != fleetReady+fleetRefit-1 || f.lo != 1013 {
		t.Fatalf("shard a refitted after %d (pool %d, lo %g): want its fit kept until %d", fleetRefit-1, a.size, a.lo, fleetRefit)
	}
	pass(1, func(int) (string, float32) { return "a", 2000 })
	f.begin(0)
	if a := f.shards[fleetShardOf("a")]; a.lo != 2000 || f.lo != 2000 {
		t.Fatalf("after %d more shard a's 99th percentile is %g and the fleet's %g, want 2000 (the median of 1013, 2000 and 10130)", fleetRefit, a.lo, f.lo)
	}
}

// TestTopQuantiles: the one-pass top values give the sorted values' ranks round(0.99 (n-1)) and
// round(0.999 (n-1)), ties (quantised deviations) and every pool size from the first fit to full.
func TestTopQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var top []float32
	for _, n := range []int{fleetReady, 1500, 2047, fleetPool} {
		for _, quantum := range []float64{0, 0.5} {
			a := make([]float32, n)
			for i := range a {
				v := math.Abs(r.NormFloat64())
				if quantum > 0 {
					v = math.Round(v/quantum) * quantum
				}
				a[i] = float32(v)
			}
			sorted := slices.Clone(a)
			slices.Sort(sorted)
			want99, want999 := sorted[int(math.Round(0.99*float64(n-1)))], sorted[int(math.Round(0.999*float64(n-1)))]
			var q99, q999 float32
			q99, q999, top = topQuantiles(a, top)
			if q99 != want99 || q999 != want999 {
				t.Errorf("n %d, quantum %g: %g and %g, want %g and %g", n, quantum, q99, q999, want99, want999)
			}
		}
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
		r.noteKey("k") // (as a key's build notes its model)
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
		got := f.lift(r, at(r, c.z), c.own, 5, 200, i)
		if math.Abs(got-c.want) > 1e-4 {
			t.Errorf("%s: %g, want %g", c.situation, got, c.want)
		}
		if pooled := !math.IsNaN(float64(f.obs[i])); pooled != c.pooled || pooled && math.Abs(float64(f.obs[i])-c.z) > 1e-4 {
			t.Errorf("%s: pooled %v (%g), want %v", c.situation, pooled, f.obs[i], c.pooled)
		}
	}
}

// TestFleetTailKeyBytes: keys.tail: fleet adds nothing to a key: what it notes on a key's model
// (noteKey) sits in the Ranker's padding (416 bytes, the allocator's class warmOverhead was
// measured with), the pool is the fleet's.
func TestFleetTailKeyBytes(t *testing.T) {
	if n := unsafe.Sizeof(Ranker{}); n != 416 {
		t.Errorf("Ranker is %d bytes, was 416: keyBytes' warmOverhead wants measuring again", n)
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
	old.Keys.Tail, new.Keys.Tail = TailOwn, TailFleet // (fleet is the default: from own to it)
	if ch := ConfigChanges(old, new); len(ch) != 1 || ch[0].Key != "detect.keys.tail" || ch[0].Kind != ChangeLive {
		t.Errorf("changes %+v, want detect.keys.tail live", ch)
	}
}

// TestFleetDeviationLeavesUnscaledOut: a feature whose window's middle half is one value (a
// count's 0s: rank.Tail.Scaled false) has no scale the fleet's pool shares: it is left out of a
// record's deviation (a noted model's mask, as rank.Tail.Scaled reads it), and a record whose
// every feature is so has none for the pool. Under the fleet's tail a count's 1, thousands of its
// spread-made sd out, was significant for good (TestKeyRecurringEventsLearnt failed: 40 of 50
// ones significant, want at most 10).
func TestFleetDeviationLeavesUnscaledOut(t *testing.T) {
	count := make([]float32, 200) // 0s, a 1 in 20: interquartile range 0
	noise := make([]float32, 200) // 0..199: interquartile range 100
	for i := range count {
		if i%20 == 0 {
			count[i] = 1
		}
		noise[i] = float32(i)
	}
	for _, c := range []struct {
		situation string
		cols      [][]float32
		rec       []float32
		z         float64
		scaled    bool
	}{
		{"count alone", [][]float32{count}, []float32{1}, 0, false},
		// (noise's median 100, its robust sd 99 / 1.349: its quartiles 50 and 149)
		{"count and noise", [][]float32{count, noise}, []float32{1, 299.5}, 199.5 / (99 / 1.349), true},
		{"noise and count", [][]float32{noise, count}, []float32{100, 1}, 0, true},
	} {
		r := &Ranker{Tail: rank.NewTail(c.cols)}
		raw := make([][]float32, len(c.rec))
		for j, v := range c.rec {
			raw[j] = []float32{v}
		}
		r.noteKey("door")
		for j := range c.cols {
			if unscaled := r.fleetUnscaled&(1<<j) != 0; unscaled == r.Tail.Scaled(j) {
				t.Errorf("%s: feature %d marked unscaled %v, rank.Tail.Scaled %v", c.situation, j, unscaled, r.Tail.Scaled(j))
			}
		}
		z, scaled := deviation(r, raw)
		if scaled != c.scaled || math.Abs(z-c.z) > 1e-3 {
			t.Errorf("%s: deviation %g (scaled %v), want %g (%v)", c.situation, z, scaled, c.z, c.scaled)
		}
	}
	// lift pools nothing for a record without a scaled feature.
	var f fleetTail
	f.begin(1)
	r := &Ranker{Tail: rank.NewTail([][]float32{count})}
	r.noteKey("door")
	r.fleetRows = 200
	f.lift(r, [][]float32{{1}}, 0, 5, 200, 0)
	if !math.IsNaN(float64(f.obs[0])) {
		t.Errorf("a count's record pooled (%g): its 0s would thin the fleet's tail", f.obs[0])
	}
}
