package ingest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/checkpoint"
	"github.com/outlierd/outlierd/internal/core/config"
)

// deriveConfig loads an ingest section (topic, group and features [temp] given) with the
// derive section yaml, through the strict loader, as the pipeline does.
func deriveConfig(t testing.TB, yaml string) Config {
	t.Helper()
	c := Default()
	doc := "topic: in\ngroup_id: g\nfeatures: [temp]\n" + yaml
	if err := config.LoadBytes("c.yaml", []byte(doc), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// rec is one input record of a Deriver test.
type rec struct {
	p    int32
	off  int64
	key  string
	temp float32
	ts   time.Time
}

func applyAll(t *testing.T, d *Deriver, recs []rec) [][]float32 {
	t.Helper()
	in := &Decoded{Values: make([]float32, 1)}
	var out [][]float32
	for _, r := range recs {
		in.Values[0] = r.temp
		out = append(out, slices.Clone(d.Apply(in, r.p, r.off, []byte(r.key), r.ts).Values))
	}
	return out
}

var monday6 = time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC) // a Monday, 06:00 UTC

// TestDeriveValuesByHand: every kind against values computed by hand (in the comments), for
// three keys interleaved in one partition.
func TestDeriveValuesByHand(t *testing.T) {
	c := deriveConfig(t, `derive:
  features:
    - {kind: diff, of: temp}
    - {kind: robust_z, of: temp, last: 4, min_values: 3}
    - {kind: time_of_day}
    - {kind: day_of_week}
`)
	d := deriverOf(t, c, "temp,temp.diff,temp.rz4,tod.sin,tod.cos,dow.sin,dow.cos")
	a := []float32{10, 12, 11, 15, 100, 13}
	b := []float32{5, 5, 5, 5, 6}
	cc := []float32{1, 1, 1, 3, 2}
	var recs []rec
	off := int64(0)
	for i := range 6 { // a, b and c interleaved: each key's own order is what counts
		for _, s := range []struct {
			key string
			v   []float32
		}{{"a", a}, {"b", b}, {"c", cc}} {
			if i < len(s.v) {
				recs = append(recs, rec{0, off, s.key, s.v[i], monday6})
				off++
			}
		}
	}
	got := map[string][][]float32{}
	for i, v := range applyAll(t, d, recs) {
		got[recs[i].key] = append(got[recs[i].key], v)
	}
	// diff: 0 for the first record, then x - previous x.
	for key, want := range map[string][]float32{"a": {0, 2, -1, 4, 85, -87}, "b": {0, 0, 0, 0, 1}, "c": {0, 0, 0, 2, -1}} {
		for i, w := range want {
			if got[key][i][1] != w {
				t.Errorf("key %s record %d: diff %v, want %v", key, i, got[key][i][1], w)
			}
		}
	}
	// robust_z over the previous 4 values, at least 3:
	//   a3 = 15 against {10,12,11}: median 11, |dev| {1,1,0}: MAD 1, z = 4/1.4826
	//   a4 = 100 against {10,12,11,15}: median 11.5, |dev| {1.5,.5,.5,3.5}: MAD 1, z = 88.5/1.4826
	//   a5 = 13 against {12,11,15,100} (10 fell out): median 13.5, |dev| {1.5,2.5,1.5,86.5}:
	//      MAD 2, z = -0.5/2.9652
	//   b4 = 6 against {5,5,5,5}: no spread at all, no floor: +1e6; b3 = 5 against {5,5,5}: 0
	//   c3 = 3 against {1,1,1}: no spread: +1e6
	//   c4 = 2 against {1,1,1,3}: MAD 0, mean |dev| 0.5: scale 1.2533 x 0.5, z = 1/0.62665
	want := map[string][]float64{
		"a": {0, 0, 0, 4 / 1.4826, 88.5 / 1.4826, -0.5 / 2.9652},
		"b": {0, 0, 0, 0, 1e6},
		"c": {0, 0, 0, 1e6, 1 / 0.62665},
	}
	for key, w := range want {
		for i := range w {
			// float32 storage: 1e-6 relative is its rounding.
			if g := float64(got[key][i][2]); math.Abs(g-w[i]) > 1e-6*math.Abs(w[i]) {
				t.Errorf("key %s record %d: robust z %v, want %v", key, i, g, w[i])
			}
		}
	}
	// Monday 06:00: a quarter of the day (sin 1, cos 0), 1/28 of the week.
	v := got["a"][0]
	ws, wc := math.Sincos(2 * math.Pi / 28)
	if v[3] != 1 || math.Abs(float64(v[4])) > 1e-7 || v[5] != float32(ws) || v[6] != float32(wc) {
		t.Errorf("tod %v, %v, dow %v, %v; want 1, 0, %v, %v", v[3], v[4], v[5], v[6], ws, wc)
	}
}

// TestDeriveTimezone: the wall clock of derive.timezone: 23:30 UTC on Monday is 00:30 on
// Tuesday in Berlin (CET, UTC+1 in November).
func TestDeriveTimezone(t *testing.T) {
	c := deriveConfig(t, "derive:\n  timezone: Europe/Berlin\n  features: [{kind: time_of_day}, {kind: day_of_week, name: week}]\n")
	d := mustDeriver(t, c)
	v := applyAll(t, d, []rec{{0, 0, "", 1, time.Date(2026, 11, 23, 23, 30, 0, 0, time.UTC)}})[0]
	ts, tc := math.Sincos(2 * math.Pi * 1800 / 86400)
	ws, wc := math.Sincos(2 * math.Pi * (86400 + 1800) / (7 * 86400))
	if v[1] != float32(ts) || v[2] != float32(tc) || v[3] != float32(ws) || v[4] != float32(wc) {
		t.Fatalf("got %v, want tod %v %v, week %v %v", v[1:], ts, tc, ws, wc)
	}
	if got := strings.Join(c.Columns(), ","); got != "temp,tod.sin,tod.cos,week.sin,week.cos" {
		t.Fatalf("columns %s", got)
	}
}

// TestDeriveDeterministicAcrossInterleavings: the derived values of each record depend on its
// key's order within its partition only: two partitions' records interleaved two ways (as two
// fetches may) give every record the same values, bit for bit.
func TestDeriveDeterministicAcrossInterleavings(t *testing.T) {
	c := deriveConfig(t, "derive:\n  features: [{kind: diff, of: temp}, {kind: robust_z, of: temp, last: 16}, {kind: robust_z, of: temp.diff, last: 8, name: jump}]\n")
	rng := rand.New(rand.NewPCG(3, 4))
	var parts [2][]rec
	for p := range parts {
		for i := range 400 {
			parts[p] = append(parts[p], rec{int32(p), int64(i), fmt.Sprint("k", rng.IntN(7)), float32(rng.NormFloat64()), monday6})
		}
	}
	run := func(seed uint64) map[[2]int64][]float32 {
		r := rand.New(rand.NewPCG(seed, 0))
		var seq []rec
		i, j := 0, 0
		for i < 400 || j < 400 { // a random merge keeps each partition's order
			if j == 400 || i < 400 && r.IntN(2) == 0 {
				seq, i = append(seq, parts[0][i]), i+1
			} else {
				seq, j = append(seq, parts[1][j]), j+1
			}
		}
		d := mustDeriver(t, c)
		out := map[[2]int64][]float32{}
		for k, v := range applyAll(t, d, seq) {
			out[[2]int64{int64(seq[k].p), seq[k].off}] = v
		}
		return out
	}
	x, y := run(1), run(2)
	nonzero := 0
	for id, v := range x {
		if !slices.Equal(v, y[id]) {
			t.Fatalf("record %v: %v in one interleaving, %v in another", id, v, y[id])
		}
		if v[3] != 0 {
			nonzero++
		}
	}
	// 14 series, each with its first 9 records before the z of the difference is known (a
	// diff, then min_values 8): about 674 of 800 records have one.
	if nonzero < 600 {
		t.Fatalf("only %d records have a robust z of the difference", nonzero)
	}
}

// TestDeriveStateIsBounded: at most max_keys series are held; the least recently seen is
// forgotten (its key starts afresh: diff 0), a recently seen one is kept; a partition read
// again from an earlier offset starts afresh.
func TestDeriveStateIsBounded(t *testing.T) {
	c := deriveConfig(t, "derive:\n  max_keys: 3\n  features: [{kind: diff, of: temp}]\n")
	d := mustDeriver(t, c)
	off := int64(0)
	diff := func(p int32, key string, v float32) float32 {
		off++
		return applyAll(t, d, []rec{{p, off, key, v, monday6}})[0][1]
	}
	for i := range 100 {
		diff(0, fmt.Sprint("k", i), float32(i))
		if d.Keys() > 3 {
			t.Fatalf("%d series held, max_keys 3", d.Keys())
		}
	}
	// k97, k98, k99 are held; touching k97 makes k98 the least recent.
	if got := diff(0, "k97", 100); got != 3 {
		t.Fatalf("k97's diff %v, want 3 (100 - 97: kept)", got)
	}
	diff(0, "new", 0) // evicts k98
	if got := diff(0, "k98", 200); got != 0 {
		t.Fatalf("k98's diff %v after eviction, want 0 (starts afresh)", got)
	}
	if got := diff(0, "k97", 101); got != 1 {
		t.Fatalf("k97's diff %v, want 1", got)
	}
	// The same key in another partition is another series.
	if got := diff(1, "k97", 50); got != 0 {
		t.Fatalf("k97 in partition 1: diff %v, want 0", got)
	}
	// Partition 0 read again from an earlier offset (a rebalance): its series start afresh.
	off = 0
	if got := diff(0, "k97", 7); got != 0 {
		t.Fatalf("after a re-read, diff %v, want 0", got)
	}
}

// deriverOf is c's Deriver, after checking that c's columns are cols (comma-separated).
func deriverOf(t *testing.T, c Config, cols string) *Deriver {
	t.Helper()
	if got := strings.Join(c.Columns(), ","); got != cols {
		t.Fatalf("columns %s, want %s", got, cols)
	}
	return mustDeriver(t, c)
}

// TestDeriveUncertainty: a difference's uncertainty is sqrt(sd^2 + previous sd^2), a robust
// z's sd / scale, the cyclic pairs' 0.
func TestDeriveUncertainty(t *testing.T) {
	c := deriveConfig(t, "uncertainty: {suffix: _sd}\nderive:\n  features: [{kind: diff, of: temp}, {kind: robust_z, of: temp, last: 3, min_values: 3}, {kind: time_of_day}]\n")
	d := deriverOf(t, c, "temp,temp.diff,temp.rz3,tod.sin,tod.cos")
	in := &Decoded{Values: make([]float32, 1), SD: make([]float32, 1)}
	var out *Decoded
	for i, v := range [][2]float32{{1, 3}, {2, 4}, {3, 1}, {5, 2}} {
		in.Values[0], in.SD[0] = v[0], v[1]
		out = d.Apply(in, 0, int64(i), nil, monday6)
	}
	// Last record 5 +- 2 after 3 +- 1: diff sd sqrt(4 + 1); against {1,2,3}: median 2, MAD 1,
	// scale 1.4826: z sd 2/1.4826.
	if out.SD[1] != float32(math.Sqrt(5)) || out.SD[2] != float32(2/1.4826) || out.SD[3] != 0 || out.SD[4] != 0 {
		t.Fatalf("uncertainties %v", out.SD)
	}
}

// TestDeriveExtremesStayFinite: values near FLT_MAX give finite differences and z.
func TestDeriveExtremesStayFinite(t *testing.T) {
	c := deriveConfig(t, "derive:\n  features: [{kind: diff, of: temp}, {kind: robust_z, of: temp, last: 2, min_values: 2}]\n")
	d := mustDeriver(t, c)
	var last []float32
	for i, v := range []float32{math.MaxFloat32, -math.MaxFloat32, math.MaxFloat32, -math.MaxFloat32} {
		last = applyAll(t, d, []rec{{0, int64(i), "", v, monday6}})[0]
		for _, x := range last {
			if math.IsInf(float64(x), 0) || math.IsNaN(float64(x)) {
				t.Fatalf("record %d: %v", i, last)
			}
		}
	}
	if last[1] != -math.MaxFloat32 {
		t.Fatalf("diff %v, want -FLT_MAX (clamped)", last[1])
	}
}

// TestRobustZAgainstSorting: the sorted-window robust z equals the definition computed by
// sorting the previous values and their distances to the median anew, bit for bit, over
// sequences with many ties (MAD 0 often) and both parities of the count.
func TestRobustZAgainstSorting(t *testing.T) {
	c := deriveConfig(t, "derive:\n  features: [{kind: robust_z, of: temp, last: 7, min_values: 2}, {kind: robust_z, of: temp, last: 10, min_values: 3, scale_floor: 0.25}]\n")
	d := mustDeriver(t, c)
	rng := rand.New(rand.NewPCG(1, 2))
	var hist []float32
	in := &Decoded{Values: make([]float32, 1)}
	want := func(last, minValues int, floor float64, x float32) float32 {
		prev := hist[max(0, len(hist)-last):]
		n := len(prev)
		if n < minValues {
			return 0
		}
		s := slices.Sorted(slices.Values(prev))
		mid := func(v []float64) float64 {
			if n%2 == 1 {
				return v[n/2]
			}
			return v[n/2-1]/2 + v[n/2]/2
		}
		f := make([]float64, n)
		for i, v := range s {
			f[i] = float64(v)
		}
		med := mid(f)
		dev := make([]float64, n)
		var sum float64
		for i, v := range f {
			dev[i] = math.Abs(v - med)
			sum += dev[i]
		}
		slices.Sort(dev)
		scale := 1.4826 * mid(dev)
		if scale == 0 {
			scale = 1.2533 * sum / float64(n)
		}
		scale = max(scale, floor)
		switch {
		case scale > 0:
			return float32(max(-zLimit, min(zLimit, (float64(x)-med)/scale)))
		case float64(x) > med:
			return zLimit
		case float64(x) < med:
			return -zLimit
		}
		return 0
	}
	for i := range 5000 {
		x := float32(rng.IntN(1 + i%7)) // few distinct values: ties, MAD 0
		if i%13 == 0 {
			x = float32(rng.NormFloat64())
		}
		in.Values[0] = x
		out := d.Apply(in, 0, int64(i), nil, monday6)
		if w0, w1 := want(7, 2, 0, x), want(10, 3, 0.25, x); out.Values[1] != w0 || out.Values[2] != w1 {
			t.Fatalf("record %d (%v after %v): z %v, %v; by sorting %v, %v", i, x, hist[max(0, len(hist)-10):], out.Values[1], out.Values[2], w0, w1)
		}
		hist = append(hist, x)
	}
}

// pipelineFile is the ingest section where the pipeline's file has it (the keys' paths and
// positions as there).
type pipelineFile struct {
	Ingest Config `yaml:"ingest"`
}

func (f *pipelineFile) Validate() error { return f.Ingest.Validate() }

// TestDeriveConfigErrors: each mistake is reported at its YAML key's line:column.
func TestDeriveConfigErrors(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"derive:\n  features:\n    - {kind: diff, of: hum}\n",
			`c.yaml:7:22: ingest.derive.features[0].of: "hum" is not a feature or an earlier derived feature`},
		{"derive:\n  features:\n    - kind: diff\n",
			`c.yaml:7:9: ingest.derive.features[0].of: required for diff: the feature to derive from`},
		{"derive:\n  features:\n    - kind: robust_z\n      of: temp\n      last: 1\n",
			`c.yaml:9:9: ingest.derive.features[0].last: 1 is not in [2, 100000]`},
		{"derive:\n  features:\n    - {kind: robust_z, of: temp, last: 5, min_values: 9}\n",
			`c.yaml:7:45: ingest.derive.features[0].min_values: 9 is not in [2, last = 5]`},
		{"derive:\n  features:\n    - {kind: time_of_day, of: temp}\n",
			`c.yaml:7:29: ingest.derive.features[0].of: not for time_of_day (it reads the record's timestamp)`},
		{"derive:\n  features:\n    - {kind: diff, of: temp, last: 3}\n",
			`c.yaml:7:32: ingest.derive.features[0].last: only for robust_z, mean and std`},
		{"derive:\n  features:\n    - {kind: lag, of: temp}\n",
			`c.yaml:7:10: ingest.derive.features[0].kind: "lag" is not one of "diff", "robust_z", "mean", "std", "time_of_day", "day_of_week"`},
		{"derive:\n  timezone: Mars/Olympus\n  features: [{kind: time_of_day}]\n",
			`c.yaml:6:5: ingest.derive.timezone: "Mars/Olympus" is not an IANA time zone (e.g. UTC, Europe/Berlin)`},
		{"derive:\n  timezone: Local\n  features: [{kind: time_of_day}]\n",
			`c.yaml:6:5: ingest.derive.timezone: "Local" is the host's zone: name the zone (e.g. Europe/Berlin), so that the config means the same on every host`},
		{"derive:\n  max_keys: -1\n  features: [{kind: time_of_day}]\n",
			`c.yaml:6:5: ingest.derive.max_keys: -1 is not in [1, 100000000]`},
		{"derive:\n  features:\n    - {kind: diff, of: temp}\n    - {kind: diff, of: temp}\n",
			`c.yaml:8:9: ingest.derive.features[1]: column name "temp.diff" is already used by ingest.derive.features[0]`},
		{"derive:\n  features:\n    - {kind: diff, of: temp, name: temp}\n",
			`c.yaml:7:9: ingest.derive.features[0]: column name "temp" is already used by ingest.features[0]`},
		{"derive:\n  features: []\n",
			`c.yaml:6:5: ingest.derive.features: at least one derived feature (or leave derive out)`},
		{"derive:\n  features:\n    - {kind: diff, of: temp, lag: 2}\n",
			"c.yaml:7:32: unknown key `lag` in ingest.derive.features[0]; the keys there are kind, last, min_values, name, of, scale_floor"},
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

// TestSourceDerives: the source's batches carry the derived columns after the features, each
// record's difference against its key's previous record of the partition (key_field "p": one
// series per partition; temp rises by 1 per record).
func TestSourceDerives(t *testing.T) {
	env := kfakeEnv(t)
	msgs := append(makeMessages(0, 0, 30, false), makeMessages(1, 0, 30, false)...)
	produce(t, env, msgs)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := itConfig(env, fmt.Sprintf("g-derive-%d", time.Now().UnixNano()))
	cfg.KeyField = "p"
	cfg.Derive = &Derive{Features: []DerivedFeature{{Kind: DeriveDiff, Of: "temp"}}}
	src, err := NewSource(cfg, checkpoint.New(), mem, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first := map[int32]bool{}
	for rows := 0; rows < len(msgs); {
		b, _, err := src.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(b.Features, ","); got != "temp,sensor.hum,temp.diff" {
			t.Fatalf("batch columns %s", got)
		}
		parts, diff := b.Partitions(), b.Feature(2)
		for r := range b.Len() {
			p, want := parts[r], float32(1)
			if !first[p] {
				first[p], want = true, 0
			}
			if diff[r] != want {
				t.Fatalf("partition %d row %d: temp.diff %v, want %v", p, r, diff[r], want)
			}
		}
		rows += b.Len()
		b.Release()
	}
}

// BenchmarkDeriveApply: the derive step per record (one goroutine, in fetch order), 1000 keys
// round robin, one feature: each kind alone and the four together.
func BenchmarkDeriveApply(b *testing.B) {
	for _, c := range []struct{ name, yaml string }{
		{"diff", "[{kind: diff, of: temp}]"},
		{"robust_z60", "[{kind: robust_z, of: temp, last: 60}]"},
		{"robust_z1440", "[{kind: robust_z, of: temp, last: 1440}]"},
		{"std64", "[{kind: std, of: temp, last: 64}]"},
		{"std1440", "[{kind: std, of: temp, last: 1440}]"},
		{"cyclic", "[{kind: time_of_day}, {kind: day_of_week}]"},
		{"all", "[{kind: diff, of: temp}, {kind: robust_z, of: temp, last: 60}, {kind: time_of_day}, {kind: day_of_week}]"},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := Default()
			cfg.Topic, cfg.GroupID, cfg.Features = "in", "g", []string{"temp"}
			if err := config.LoadBytes("b.yaml", []byte("topic: in\ngroup_id: g\nfeatures: [temp]\nderive:\n  features: "+c.yaml+"\n"), &cfg); err != nil {
				b.Fatal(err)
			}
			k, err := cfg.Check()
			if err != nil {
				b.Fatal(err)
			}
			d := k.NewDeriver()
			keys := make([][]byte, 1000)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "sensor-%d", i)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			vals := make([]float32, 4096)
			for i := range vals {
				vals[i] = float32(70 + 2*rng.NormFloat64())
			}
			in := &Decoded{Values: make([]float32, 1)}
			ts := monday6
			var off int64
			for b.Loop() {
				in.Values[0] = vals[off&4095]
				d.Apply(in, 0, off, keys[off%1000], ts.Add(time.Duration(off)*time.Second))
				off++
			}
		})
	}
}

// TestDeriveStateBound: the documented per-series estimate holds: max_keys series of 32-byte
// keys, each robust_z of last 60 and a diff, stay within StateBound (heap measured).
func TestDeriveStateBound(t *testing.T) {
	c := deriveConfig(t, "derive:\n  max_keys: 20000\n  features: [{kind: diff, of: temp}, {kind: robust_z, of: temp, last: 60}]\n")
	d := mustDeriver(t, c)
	var before, after runtime.MemStats
	// Two collections: after one, what earlier tests left (9.6 MB in the package's run) could
	// still be counted here and be freed during the count, which then read 6.3 MB, not 15.9.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	in := &Decoded{Values: make([]float32, 1)}
	for i := range 40000 { // twice max_keys: the memory of evicted series is reused
		in.Values[0] = float32(i)
		d.Apply(in, 0, int64(i), fmt.Appendf(nil, "%032d", i), monday6)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	used, bound := int64(after.HeapAlloc)-int64(before.HeapAlloc), d.StateBound(32)
	t.Logf("%d series: %d bytes held, bound %d", d.Keys(), used, bound)
	if d.Keys() != 20000 || used > bound {
		t.Fatalf("%d series hold %d bytes, over the bound %d", d.Keys(), used, bound)
	}
	runtime.KeepAlive(d)
}

// TestNewDeriverOfAConfigChangedAfterCheck: a derived feature whose column went away after Check
// (which the Checked forbids) stops the Deriver's making with its key, not the first record's
// decoding with an index of -1.
func TestNewDeriverOfAConfigChangedAfterCheck(t *testing.T) {
	c := deriveConfig(t, "derive:\n  features: [{kind: diff, of: temp}]\n")
	k, err := c.Check()
	if err != nil {
		t.Fatal(err)
	}
	c.Derive.Features[0].Of = "humidity" // the Checked shares the section
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `derive.features[0].of: "humidity"`) {
			t.Fatalf("NewDeriver after the change: recovered %v", r)
		}
	}()
	k.NewDeriver()
}
