package ingest

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/core/config"
)

// TestDeriveMeanByHand: the rolling mean of each key's last 3 values, the current one
// included, for two keys interleaved; fewer values at a key's start: the mean of those seen.
func TestDeriveMeanByHand(t *testing.T) {
	c := deriveConfig(t, "derive:\n  features: [{kind: mean, of: temp, last: 3}]\n")
	d := deriverOf(t, c, "temp,temp.mean3")
	recs := []rec{{0, 0, "a", 1, monday6}, {0, 1, "b", 4, monday6}, {0, 2, "a", 2, monday6}, {0, 3, "a", 3, monday6},
		{0, 4, "b", 8, monday6}, {0, 5, "a", 10, monday6}, {0, 6, "a", -6, monday6}}
	// a: 1 -> 1; 1,2 -> 1.5; 1,2,3 -> 2; 2,3,10 -> 5; 3,10,-6 -> 7/3. b: 4 -> 4; 4,8 -> 6.
	want := []float32{1, 4, 1.5, 2, 6, 5, float32(7.0 / 3)}
	for i, row := range applyAll(t, d, recs) {
		if row[1] != want[i] {
			t.Errorf("record %d (key %s): mean %v, want %v", i, recs[i].key, row[1], want[i])
		}
	}
}

// TestDeriveMeanUncertainty: the mean's sd is sqrt(sum of the values' sd^2) / their number.
func TestDeriveMeanUncertainty(t *testing.T) {
	c := deriveConfig(t, "uncertainty: {suffix: _sd}\nderive:\n  features: [{kind: mean, of: temp, last: 2}]\n")
	d := mustDeriver(t, c)
	in := &Decoded{Values: make([]float32, 1), SD: make([]float32, 1)}
	var got []float32
	for i, v := range [][2]float32{{1, 3}, {2, 4}, {5, 12}} {
		in.Values[0], in.SD[0] = v[0], v[1]
		got = append(got, d.Apply(in, 0, int64(i), nil, monday6).SD[1])
	}
	// 3; sqrt(9 + 16) / 2 = 2.5; sqrt(16 + 144) / 2 = sqrt(40).
	if want := []float32{3, 2.5, float32(math.Sqrt(40))}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("uncertainties %v, want %v", got, want)
	}
}

// TestDeriveMeanAgainstDirect: with trim 2, the exact running sums and the kept extremes give the mean of
// the last 7 values less the two farthest from their mean, found afresh by a sort, over many
// passes of the ring, on values far from zero (where a float64 running sum that never
// restarts would drift), for two keys interleaved.
func TestDeriveMeanAgainstDirect(t *testing.T) {
	d := mustDeriver(t, deriveConfig(t, "derive:\n  features: [{kind: mean, of: temp, last: 7, trim: 2}]\n"))
	rng := rand.New(rand.NewPCG(3, 4))
	hist := map[string][]float32{}
	for i := range 20000 {
		key := []string{"a", "b"}[rng.IntN(2)]
		v := float32(1e6 + 1000*rng.NormFloat64())
		hist[key] = append(hist[key], v)
		h := hist[key][max(0, len(hist[key])-7):]
		var all float64
		for _, x := range h {
			all += float64(x) / float64(len(h))
		}
		kept := slices.Clone(h)
		if len(h) == 7 { // the two farthest from the window's mean out (continuous values: no ties)
			slices.SortStableFunc(kept, func(a, b float32) int {
				return cmp.Compare(math.Abs(float64(b)-all), math.Abs(float64(a)-all))
			})
			kept = kept[2:]
		}
		var sum float64
		for _, x := range kept {
			sum += float64(x)
		}
		want := float32(sum / float64(len(kept)))
		got := applyAll(t, d, []rec{{0, int64(i), key, v, monday6}})[0][1]
		// The exact mean and this float64 sum of the same values: equal to about 1e-16
		// relative, so their float32 means differ by one ulp at most.
		if math.Abs(float64(got-want)) > float64(math.Nextafter32(want, math.MaxFloat32)-want) {
			t.Fatalf("record %d key %s: mean %v, want %v", i, key, got, want)
		}
	}
}

// TestDeriveMeanEvictedStartsAfresh: past max_keys the least recently seen key is forgotten;
// when it comes back its mean is of its new values alone.
func TestDeriveMeanEvictedStartsAfresh(t *testing.T) {
	d := mustDeriver(t, deriveConfig(t, "derive:\n  max_keys: 1\n  features: [{kind: mean, of: temp, last: 3}]\n"))
	out := applyAll(t, d, []rec{{0, 0, "a", 10, monday6}, {0, 1, "a", 20, monday6}, {0, 2, "b", 1, monday6}, {0, 3, "a", 4, monday6}})
	if out[3][1] != 4 {
		t.Fatalf("key a after its eviction: mean %v, want 4 (its new value alone)", out[3][1])
	}
}

// mustDeriver is c's Deriver, made as the source and replay make it (c must pass Check).
func mustDeriver(t testing.TB, c Config) *Deriver {
	t.Helper()
	k, err := c.Check()
	if err != nil {
		t.Fatal(err)
	}
	return k.NewDeriver()
}

// checkStateBound gives c's Deriver (one column temp, with its sd) 40,000 keys of one value each
// (value i, sd 1, key i in 32 digits) and checks that the heap it holds then stays within its
// StateBound(32); it returns what it holds.
func checkStateBound(t *testing.T, c Config) (used int64) {
	t.Helper()
	d := mustDeriver(t, c)
	var before, after runtime.MemStats
	// Two collections: after one, what earlier tests left (9.6 MB in the package's run) could
	// still be counted here and be freed during the count, which then read 6.3 MB, not 15.9.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	in := &Decoded{Values: make([]float32, 1), SD: make([]float32, 1)}
	for i := range 40000 {
		in.Values[0], in.SD[0] = float32(i), 1
		d.Apply(in, 0, int64(i), fmt.Appendf(nil, "%032d", i), monday6)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	used, bound := int64(after.HeapAlloc)-int64(before.HeapAlloc), d.StateBound(32)
	t.Logf("%d series: %d bytes held, bound %d", d.Keys(), used, bound)
	if used > bound {
		t.Fatalf("%d series hold %d bytes, over the bound %d", d.Keys(), used, bound)
	}
	runtime.KeepAlive(d)
	return used
}

// TestDeriveMeanConfigErrors: mean needs last; robust_z's other keys are not for it.
func TestDeriveMeanConfigErrors(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"derive:\n  features:\n    - {kind: mean, of: temp}\n",
			`ingest.derive.features[0].last: 0 is not in [2, 100000]`},
		{"derive:\n  features:\n    - {kind: mean, of: temp, last: 5, min_values: 3}\n",
			`ingest.derive.features[0].min_values: only for robust_z`},
		{"derive:\n  features:\n    - {kind: mean, last: 5}\n",
			`ingest.derive.features[0].of: required for mean`},
		{"derive:\n  features:\n    - {kind: mean, of: temp, last: 5, trim: 1}\n",
			`c.yaml:7:41: ingest.derive.features[0].trim: 1 is not 0 or 2`},
		{"derive:\n  features:\n    - {kind: mean, of: temp, last: 3, trim: 2}\n",
			`c.yaml:7:41: ingest.derive.features[0].trim: 2 needs last >= 4 (last 3 would keep fewer than 2 values)`},
		{"derive:\n  features:\n    - {kind: std, of: temp, last: 5, trim: 2}\n",
			`c.yaml:7:40: ingest.derive.features[0].trim: only for mean (std always leaves its 2 farthest out)`},
	}
	for _, tc := range tests {
		c := pipelineFile{Ingest: Default()}
		doc := "ingest:\n  topic: in\n  group_id: g\n  features: [temp]\n  " + strings.ReplaceAll(strings.TrimSuffix(tc.yaml, "\n"), "\n", "\n  ") + "\n"
		err := config.LoadBytes("c.yaml", []byte(doc), &c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant %s", tc.yaml, err, tc.want)
		}
	}
}
