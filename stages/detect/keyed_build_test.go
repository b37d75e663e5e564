package detect

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"github.com/outlierd/outlierd/gpukern"
)

// keyWindows is n keys' states, keyWindow's for keys 0..n-1 drawn in turn from r.
func keyWindows(cfg *Config, n int, r *rand.Rand, sig int) []*keyState {
	sts := make([]*keyState, n)
	for i := range sts {
		sts[i] = keyWindow(cfg, i, r, sig)
	}
	return sts
}

// keyWindow is a key's state with a full window of w records of 3 features as the keyed
// benchmarks' stream has them (feature a around i, b and c standard normal), every sig-th
// record marked significant (0: none).
func keyWindow(cfg *Config, i int, r *rand.Rand, sig int) *keyState {
	w := cfg.Keys.Window
	st := &keyState{cols: make([][]float32, 3), sig: newFlagRing(w)}
	for j := range st.cols {
		st.cols[j] = make([]float32, w)
	}
	for t := range w {
		st.cols[0][t] = float32(i) + float32(r.NormFloat64())
		st.cols[1][t], st.cols[2][t] = float32(r.NormFloat64()), float32(r.NormFloat64())
		st.sig.set(t, sig > 0 && t%sig == 0)
	}
	st.size, st.next = w, r.IntN(w)
	return st
}

// BenchmarkKeyBuild: one key's model build (buildKeyModel) at the default settings (keys.window
// 200, keys.k 10, 3 features), a full window with a few records left out as significant: the
// work each of a key's rebuilds does, one build per keys.window/4 of its records.
func BenchmarkKeyBuild(b *testing.B) {
	cfg := Default()
	cfg.KeyBy = KeyByKey
	r := rand.New(rand.NewPCG(3, 3))
	sts := keyWindows(&cfg, 64, r, 37)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := buildKeyModel(sts[i%len(sts)], &cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// sameBits says where a and b differ (""), comparing every field, exported or not, floats by
// their bits, and slices by length, capacity and elements: two models equal here hold the same
// values in the same layout.
func sameBits(a, b reflect.Value, path string) string {
	if a.Kind() != b.Kind() {
		return path + ": kinds differ"
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		if math.Float64bits(a.Float()) != math.Float64bits(b.Float()) && !(a.Kind() == reflect.Float32 && math.Float32bits(float32(a.Float())) == math.Float32bits(float32(b.Float()))) {
			return fmt.Sprintf("%s: %v != %v", path, a.Float(), b.Float())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if a.Int() != b.Int() {
			return fmt.Sprintf("%s: %d != %d", path, a.Int(), b.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if a.Uint() != b.Uint() {
			return fmt.Sprintf("%s: %d != %d", path, a.Uint(), b.Uint())
		}
	case reflect.Bool:
		if a.Bool() != b.Bool() {
			return path + ": bools differ"
		}
	case reflect.String:
		if a.String() != b.String() {
			return fmt.Sprintf("%s: %q != %q", path, a.String(), b.String())
		}
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return path + ": one is nil"
			}
			return ""
		}
		return sameBits(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() || a.Cap() != b.Cap() {
			return fmt.Sprintf("%s: nil %v/%v, len %d/%d, cap %d/%d", path, a.IsNil(), b.IsNil(), a.Len(), b.Len(), a.Cap(), b.Cap())
		}
		for i := range a.Len() {
			if d := sameBits(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	case reflect.Array:
		for i := range a.Len() {
			if d := sameBits(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if d := sameBits(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); d != "" {
				return d
			}
		}
	default:
		return fmt.Sprintf("%s: kind %v not compared", path, a.Kind())
	}
	return ""
}

// modelLayout is where a model's arrays lie relative to its sorted columns' allocation and to
// its calibrations' (each array's offset in elements, -1 outside): the build's two shared
// allocations, which keyBytes counts.
func modelLayout(r *Ranker) []int {
	back := unsafe.Pointer(unsafe.SliceData(r.Tail.Sorted[0]))
	cal := unsafe.Pointer(unsafe.SliceData(r.Density.Sorted))
	off := func(base, p unsafe.Pointer, size uintptr) int {
		d := uintptr(p) - uintptr(base)
		if uintptr(p) < uintptr(base) || d > 1<<20 {
			return -1
		}
		return int(d / size)
	}
	var out []int
	for _, c := range append(slices.Clone(r.Tail.Sorted), r.Ref.Points...) {
		out = append(out, off(back, unsafe.Pointer(unsafe.SliceData(c)), 4))
	}
	for _, c := range [][]float64{r.Distance.Sorted, r.Combined(), r.Final.Sorted} {
		out = append(out, off(cal, unsafe.Pointer(unsafe.SliceData(c)), 8))
	}
	return out
}

// TestKeyBuildMatchesGeneral: a key's model built by keyBuild is the one buildRankerOn builds
// (buildKeyModelGeneral) bit for bit, every field and the layout of its allocations: the
// benchmarks' windows, windows with records left out as significant (and so many that the build
// takes them all), partly filled windows, ties on a grid, a constant feature, copies of records,
// values far out (the distance space's clamp), 1 to 5 features, keys.k from 1 to past the
// window, both combines, every detectors setting, both score.weights (by agreement: unequal
// past 200 records), other seeds and alarm rates. Windows past
// the shortcuts (-0, NaN, infinities, more than 4096 records) must take the general build, and
// the ordinary ones must not.
func TestKeyBuildMatchesGeneral(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	kinds := []string{"normal", "outcasts", "far-outcasts", "constant-outcasts", "constant-outcasts-wrapped", "mostly-outcasts", "partial", "grid", "constant", "copies", "far", "negzero", "nan", "inf", "warming", "warming-outcasts"}
	type setting struct {
		window, k, dims int
		detectors       ScoreDetectors
		combine         ScoreCombine
		weights         ScoreWeights
		seed            uint64
		rate            float64
	}
	settings := []setting{
		{200, 10, 3, DetectorsBoth, CombineMean, WeightsAgreement, 1, 0.02},
		{200, 10, 3, DetectorsBoth, CombineMax, WeightsAgreement, 7, 0.001},
		{40, 1, 1, DetectorsDensity, CombineMean, WeightsAgreement, 1, 0.02},
		{60, 50, 2, DetectorsDistance, CombineMean, WeightsAgreement, 3, 0.02},
		{64, 80, 5, DetectorsBoth, CombineMean, WeightsAgreement, 1, 0.02},
		{1000, 25, 4, DetectorsBoth, CombineMean, WeightsAgreement, 2, 0.02}, // (weights by agreement past 200 records)
		{1000, 25, 4, DetectorsBoth, CombineMean, WeightsEqual, 2, 0.02},
		{4096, 10, 3, DetectorsBoth, CombineMean, WeightsAgreement, 1, 0.02},
		{5000, 10, 2, DetectorsBoth, CombineMean, WeightsAgreement, 1, 0.02},
	}
	kb := new(keyBuild)
	fast := 0
	twin := &twinSelf{}
	for si, s := range settings {
		cfg := Default()
		cfg.KeyBy = KeyByKey
		cfg.Keys.Window, cfg.Keys.K, cfg.Seed, cfg.AlarmRate = s.window, s.k, s.seed, s.rate
		cfg.Score.Detectors, cfg.Score.Combine, cfg.Score.Weights = s.detectors, s.combine, s.weights
		var due []*keyState
		var wants []*Ranker
		for _, kind := range kinds {
			w := s.window
			st := &keyState{cols: make([][]float32, s.dims), sig: newFlagRing(w)}
			for j := range st.cols {
				st.cols[j] = make([]float32, w)
				for i := range w {
					v := float32(j*10) + float32(r.NormFloat64())
					switch kind {
					case "grid":
						v = float32(r.IntN(3))
					case "constant":
						if j == 0 {
							v = 4
						}
					case "copies":
						if i%4 != 0 {
							v = st.cols[j][i-i%4]
						}
					case "far-outcasts": // (some far out on the first feature only, significant with others near)
						if i%13 == 0 && j == 0 {
							v += 30
						}
					case "constant-outcasts", "constant-outcasts-wrapped": // (a counter: its value 4, 7 now and then, 9 in the newest rows)
						if j == 0 {
							v = 4
							switch {
							case i >= w-5:
								v = 9
							case i%9 == 0:
								v = 7
							}
						}
					case "far":
						if i%17 == 0 {
							v = float32(r.NormFloat64() * 1e12)
						}
					case "negzero":
						if i == w/2 {
							v = float32(math.Copysign(0, -1))
						}
					case "nan":
						if i == w/3 && j == 0 {
							v = float32(math.NaN())
						}
					case "inf":
						if i == w/3 {
							v = float32(math.Inf(1))
						}
					}
					st.cols[j][i] = v
				}
			}
			st.size, st.next = w, r.IntN(w)
			for i := range w {
				switch kind {
				case "outcasts":
					st.sig.set(i, r.IntN(10) == 0)
				case "far-outcasts":
					st.sig.set(i, i%13 == 0 || r.IntN(20) == 0)
				case "constant-outcasts", "constant-outcasts-wrapped": // (the window in ring order: next 0 below)
					st.sig.set(i, i%9 == 0 || i >= w-5 || (i%31 == 0 && i < w/2))
				case "mostly-outcasts":
					st.sig.set(i, r.IntN(100) != 0)
				case "warming", "warming-outcasts": // (records of a rolling column still filling, at -50: keyed_warmup.go)
					if warm := i%5 == 0 || (i >= w/4 && i < w/4+31); warm {
						st.noteWarming(i, true)
						for j := range st.cols {
							st.cols[j][i] = -50
						}
					}
					if kind == "warming-outcasts" {
						st.sig.set(i, r.IntN(10) == 0)
					}
				}
			}
			switch kind {
			case "constant-outcasts":
				st.next = 0
			case "constant-outcasts-wrapped": // (the same window, oldest first from a ring's middle: its newest run wraps past the end)
				off := 3 // (window rows w-5..w-1, the newest run, at ring places w-2, w-1, 0, 1, 2)
				for j, c := range st.cols {
					st.cols[j] = append(slices.Clone(c[w-off:]), c[:w-off]...)
				}
				sig := newFlagRing(w)
				for i := range w {
					sig.set((i+off)%w, st.sig.at(i))
				}
				st.sig, st.next = sig, off
			}
			if kind == "partial" {
				st.size = max(2, min(w, 3+r.IntN(w)))
			}
			want, werr := buildKeyModelGeneral(st, &cfg)
			due, wants = append(due, st), append(wants, want)
			if st.warming != nil && werr == nil { // (its warming records left out: none of their -50s in the model)
				n := st.size - st.warmingCount()
				if kind == "warming" && len(want.Tail.Sorted[0]) != n || want.Tail.Sorted[0][0] == -50 {
					t.Fatalf("%+v %s: the model holds %d records, from %v, of %d not warming", s, kind, len(want.Tail.Sorted[0]), want.Tail.Sorted[0][0], n)
				}
			}
			got, ok := kb.build(st, &cfg)
			general := kind == "negzero" || kind == "nan" || kind == "inf" || st.size > keyBuildMaxRows
			switch {
			case ok && general:
				t.Fatalf("%+v %s: built by keyBuild, want the general build", s, kind)
			case !ok && !general && werr == nil:
				t.Fatalf("%+v %s: keyBuild declined an ordinary window", s, kind)
			case !ok:
				continue
			case werr != nil:
				t.Fatalf("%+v %s: keyBuild built a model where the general build fails: %v", s, kind, werr)
			}
			fast++
			if d := sameBits(reflect.ValueOf(got), reflect.ValueOf(want), "Ranker"); d != "" {
				t.Fatalf("%+v %s: %s", s, kind, d)
			}
			if g, w := modelLayout(got), modelLayout(want); !slices.Equal(g, w) {
				t.Fatalf("%+v %s: layout %v, want %v", s, kind, g, w)
			}
		}
		// The same windows built together with their calibrations in one call of a device (the
		// kernel's CPU twin; every other setting's device fails, the cores take the calibrations).
		twin.fail = si%2 == 1
		got := make([]*Ranker, len(due))
		buildKeysBatched(due, got, &cfg, twin)
		for i, want := range wants {
			switch {
			case (got[i] == nil) != (want == nil):
				t.Fatalf("%+v %s, batched: built %v, the general build %v", s, kinds[i], got[i] != nil, want != nil)
			case want == nil:
				continue
			}
			if d := sameBits(reflect.ValueOf(got[i]), reflect.ValueOf(want), "Ranker"); d != "" {
				t.Fatalf("%+v %s, batched (device failing: %v): %s", s, kinds[i], twin.fail, d)
			}
			if g, w := modelLayout(got[i]), modelLayout(want); !slices.Equal(g, w) {
				t.Fatalf("%+v %s, batched: layout %v, want %v", s, kinds[i], g, w)
			}
		}
	}
	small := 0 // (the settings whose every window fits keyBuild; 5000's partial window may or may not, by the draw)
	for _, s := range settings {
		if s.window <= keyBuildMaxRows {
			small++
		}
	}
	if twin.calls < small || twin.sets < 25 {
		t.Fatalf("%d device calls for %d sets: the batched builds missed the device", twin.calls, twin.sets)
	}
	if fast < 50 {
		t.Fatalf("only %d windows took keyBuild", fast)
	}
}

// TestSortRows: sortRows32 and sortRows64 put the values in slices.Sort's order with each row
// beside its value, ties by row: values apart by a few ulps (which share sortRows64's packed
// key) and by more than its 2^32 ulps, ties, negatives, up to keyBuildMaxRows rows.
func TestSortRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 13, 200, keyBuildMaxRows} {
		v32, v64 := make([]float32, n), make([]float64, n)
		for i := range n {
			v32[i] = float32(r.IntN(50)-25) * 0.25
		}
		packed := make([]uint64, n)
		var rs radixScratch
		rs.sortRows32(v32, packed)
		want32 := slices.Clone(v32)
		slices.Sort(want32)
		for at, p := range packed {
			row := int(p & (1<<rowBits - 1))
			if v32[row] != want32[at] || key32(v32[row]) != uint32(p>>32) || at > 0 && packed[at-1]>>32 == p>>32 && int(packed[at-1]&(1<<rowBits-1)) > row {
				t.Fatalf("n=%d: sortRows32 at %d: row %d (%v), want %v", n, at, row, v32[row], want32[at])
			}
		}
		for _, spread := range []uint64{200000, 1 << 34} { // within a packed key's 2^32 ulps, and across them
			for i := range n {
				base := float64(r.IntN(20)) - 10
				v64[i] = math.Float64frombits(math.Float64bits(1+base*base) + r.Uint64N(spread))
				if r.IntN(3) == 0 {
					v64[i] = -v64[i]
				}
				if i > 0 && r.IntN(8) == 0 {
					v64[i] = v64[r.IntN(i)] // equal values: by row
				}
			}
			rs.sortRows64(v64, packed)
			want := make([]int, n) // rows by value, ties by row
			for i := range want {
				want[i] = i
			}
			slices.SortStableFunc(want, func(a, b int) int { return cmp.Compare(v64[a], v64[b]) })
			for at, p := range packed {
				if row := int(p & (1<<rowBits - 1)); row != want[at] {
					t.Fatalf("n=%d spread %d: sortRows64 at %d: row %d (%v), want row %d (%v)", n, spread, at, row, v64[row], want[at], v64[want[at]])
				}
			}
		}
	}
}

// twinSelf is a KeyedSelfWeigher on the keyed_self kernel's CPU twin (gpukern.KeyedSelfReference),
// counting its calls and sets; fail makes every call fail (a device failure).
type twinSelf struct {
	calls, sets int
	fail        bool
}

func (t *twinSelf) SelfWeightsCovered(dims, k int) bool { return true }

func (t *twinSelf) SelfWeights(sets [][][]float32, k []int, out [][]float64) error {
	t.calls++
	if t.fail {
		return errors.New("twinSelf: a device failure")
	}
	t.sets += len(sets)
	for s, set := range sets {
		gpukern.KeyedSelfReference(set, k[s], out[s])
	}
	return nil
}

// TestKeyBuildOutcastsAllocateNothing: keyBuild allocates the model and nothing else (its
// scratch is reused build after build), a window whose outcasts are judged on a feature without
// spread (offConstant) too: it allocates as the same window without significant rows does.
func TestKeyBuildOutcastsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates: allocations are counted without it")
	}
	const w = 200
	cfg := Default()
	cfg.KeyBy = KeyByKey
	allocs := func(sig bool) float64 {
		st := &keyState{cols: [][]float32{make([]float32, w), make([]float32, w)}, sig: newFlagRing(w), size: w}
		for i := range w {
			st.cols[0][i] = 4 // (a counter: 4, 7 on some rows, significant there)
			if i%9 == 0 {
				st.cols[0][i] = 7
			}
			st.cols[1][i] = float32(i%17) * 0.37
			st.sig.set(i, sig && i%9 == 0)
		}
		kb := new(keyBuild)
		if _, ok := kb.build(st, &cfg); !ok {
			t.Fatal("keyBuild declined the window")
		}
		return testing.AllocsPerRun(20, func() { kb.build(st, &cfg) })
	}
	if with, without := allocs(true), allocs(false); with != without {
		t.Errorf("%.0f allocations a build with the counter's outcasts, %.0f without", with, without)
	}
}
