package ingest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/core/config"
)

// TestDeriveStdByHand: the sample standard deviation of each key's last 5 values, the current
// one included, less the two farthest from their mean (the oldest of a tie), for two keys
// interleaved; at a key's start, while the window fills, of all those seen (0 for the first).
func TestDeriveStdByHand(t *testing.T) {
	c := deriveConfig(t, "derive:\n  features: [{kind: std, of: temp, last: 5}]\n")
	d := deriverOf(t, c, "temp,temp.std5")
	recs := []rec{{0, 0, "a", 0, monday6}, {0, 1, "b", 4, monday6}, {0, 2, "a", 1, monday6}, {0, 3, "a", 1, monday6},
		{0, 4, "b", 8, monday6}, {0, 5, "a", 4, monday6}, {0, 6, "a", 4, monday6}, {0, 7, "b", 9, monday6},
		{0, 8, "a", 10, monday6}, {0, 9, "b", 1, monday6}, {0, 10, "a", 4, monday6}}
	// a: 0 -> 0; 0,1 -> sqrt(0.5); 0,1,1: mean 2/3 -> sqrt(1/3); 0,1,1,4: mean 1.5, (2.25 +
	// 0.25 + 0.25 + 6.25)/3 -> sqrt(3) (all of them: the window still filling).
	// 0,1,1,4,4 (full): mean 2, 0 and both 4s equally far: the oldest two (0, the first 4) out
	// -> 1,1,4: sqrt(3). 1,1,4,4,10: mean 4, 10 then the first 1 out -> 1,4,4: sqrt(3).
	// 1,4,4,10,4: mean 4.6, 10 and 1 out -> 4,4,4: 0.
	// b: 4 -> 0; 4,8 -> sqrt(8); 4,8,9: mean 7 -> sqrt(7); 4,8,9,1: mean 5.5, 41/3 -> sqrt(41/3).
	want := []float32{0, 0, float32(math.Sqrt(0.5)), float32(math.Sqrt(1.0 / 3)), float32(math.Sqrt(8)),
		float32(math.Sqrt(3)), float32(math.Sqrt(3)), float32(math.Sqrt(7)), float32(math.Sqrt(3)),
		float32(math.Sqrt(41.0 / 3)), 0}
	for i, row := range applyAll(t, d, recs) {
		// By hand the values are exact in float64 up to the last bit of the sqrt's argument
		// (1/3's and 41/3's rounding) and the sqrt's: one float32 ulp covers it.
		if math.Abs(float64(row[1]-want[i])) > float64(math.Nextafter32(want[i], math.MaxFloat32)-want[i]) {
			t.Errorf("record %d (key %s): std %v, want %v", i, recs[i].key, row[1], want[i])
		}
	}
}

// TestDeriveStdGolden: the Deriver's std of last 16 of a fixed series, bit for bit, against
// docs/bench/derive_std_golden.csv, which docs/bench/derive_std_golden.py computed in Python
// from the definition (a change to the derivation here must be made there too, then the file
// rewritten). The script computes it in exact rationals since stdfast27 (two float64 passes
// before, as the Go code did): the file's bits did not change. The series walks the filling start, a flat run at an ordinary value (exactly 0),
// values near 1e6 with a spread of 0.1 and a flat run there (where a running sum of squares
// cancels), an oscillation burst and a spike.
func TestDeriveStdGolden(t *testing.T) {
	text, err := os.ReadFile("../../docs/bench/derive_std_golden.csv")
	if err != nil {
		t.Fatal(err)
	}
	d := mustDeriver(t, deriveConfig(t, "derive:\n  features: [{kind: std, of: temp, last: 16}]\n"))
	in := &Decoded{Values: make([]float32, 1)}
	rows, zeros := 0, 0
	for n, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "x,") {
			continue
		}
		f := strings.Split(line, ",")
		x, err := strconv.ParseFloat(f[0], 64)
		if err != nil || len(f) != 2 {
			t.Fatalf("line %d: %q", n+1, line)
		}
		want, err := strconv.ParseUint(f[1], 16, 32)
		if err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		in.Values[0] = float32(x)
		out := d.Apply(in, 0, int64(rows), nil, time.Time{}).Values
		if got := math.Float32bits(out[1]); got != uint32(want) {
			t.Errorf("line %d (x %s): std %v (bits %08x), the file's %v (%08x)", n+1, f[0], out[1], got,
				math.Float32frombits(uint32(want)), want)
		}
		if out[1] == 0 {
			zeros++
		}
		rows++
	}
	// The series' first value, 50 of the flat run at 70 (61 equal values: its first is
	// the noise's last; 46 windows of them alone and 4 with one or two other values, left out)
	// and 29 of the one at 1e6 (40 values: 25 + 4) are 0.
	if rows != 600 || zeros != 1+50+29 {
		t.Fatalf("%d rows, %d zeros; want 600 and %d", rows, zeros, 1+50+29)
	}
}

// TestDeriveStdStuckAfterNoiseIsZero: a sensor stuck at an ordinary value after a wild
// stretch (readings spread over ten decades) reads exactly 0 once its window holds the stuck
// value alone, in every pass of the ring. Float64 running sums of the values and their
// squares, updated by adding the new value and removing the old, keep a residue of such a
// stretch (low bits rounded away while the large values were in them): the test computes that
// scheme beside the Deriver on the same values and checks that it does leave one, so that the
// data exercise what the two passes avoid.
func TestDeriveStdStuckAfterNoiseIsZero(t *testing.T) {
	const last = 7
	d := mustDeriver(t, deriveConfig(t, "derive:\n  features: [{kind: std, of: temp, last: 7}]\n"))
	in := &Decoded{Values: make([]float32, 1)}
	off := int64(0)
	residues := 0
	for k := range 4 {
		key := []byte(fmt.Sprint("s", k))
		rng := rand.New(rand.NewPCG(uint64(k), 26))
		var ring [last]float64 // the running-sum scheme's window
		var s1, s2 float64
		n := 0
		for i := range 10001 + 21 {
			v := float32(71.3) // stuck from record 10001 of the series on
			if i < 10001 {
				v = float32(70 + float64(rng.NormFloat64()*math.Pow(10, -3+10*rng.Float64())))
			}
			in.Values[0] = v
			off++
			got := d.Apply(in, 0, off, key, monday6).Values[1]
			x, p := float64(v), i%last
			if n == last {
				s1 -= ring[p]
				s2 -= float64(ring[p] * ring[p])
			} else {
				n++
			}
			ring[p] = x
			s1 += x
			s2 += float64(x * x)
			if i >= 10001+last-1 {
				if got != 0 {
					t.Fatalf("series %s, stuck value %d: std %v, want 0", key, i-10001, got)
				}
				m := s1 / last
				if float64(s2-float64(last*float64(m*m))) != 0 {
					residues++
				}
			}
		}
	}
	if residues == 0 {
		t.Fatal("running sums left no residue on these values: the test no longer tells the two schemes apart")
	}
	t.Logf("running sums: %d of 60 stuck windows with a non-zero variance", residues)
}

// TestDeriveStdUncertainty: the std's sd is the first-order propagation sqrt(sum((x_i -
// mean)^2 sd_i^2)) / ((m - 1) std) over the m = n - 2 values kept (those left out move neither
// the std nor, to first order, its sd), and RMS(sd) / sqrt(m - 1) of those where the std is 0
// (the same for equal sds); while the window fills, the same over all the values seen (m = n).
func TestDeriveStdUncertainty(t *testing.T) {
	c := deriveConfig(t, "uncertainty: {suffix: _sd}\nderive:\n  features: [{kind: std, of: temp, last: 5}]\n")
	d := mustDeriver(t, c)
	in := &Decoded{Values: make([]float32, 1), SD: make([]float32, 1)}
	var got []float32
	for i, v := range [][2]float32{{5, 2}, {5, 4}, {2, 1}, {8, 3}, {20, 1}} {
		in.Values[0], in.SD[0] = v[0], v[1]
		got = append(got, d.Apply(in, 0, int64(i), nil, monday6).SD[1])
	}
	// 2; 5,5: std 0 -> sqrt((4+16)/2)/1 = sqrt(10); 5,5,2: mean 4, std sqrt(3), deviations
	// 1,1,-2: sqrt(4+16+4)/(2 sqrt(3)) = sqrt(2); 5,5,2,8: mean 5, std sqrt(6), deviations
	// 0,0,-3,3: sqrt(9+81)/(3 sqrt(6)) = sqrt(5/3); 5,5,2,8,20 (full): mean 8, 20 and 2 out,
	// 5,5,8: mean 6, std sqrt(3), deviations -1,-1,2: sqrt(4+16+36)/(2 sqrt(3)) = sqrt(14/3).
	want := []float32{2, float32(math.Sqrt(10)), float32(math.Sqrt(2)), float32(math.Sqrt(5.0 / 3)), float32(math.Sqrt(14.0 / 3))}
	for i := range want {
		// sqrt(14/3) arrives as sqrt(56)/(2 sqrt(3)), and so on: one float32 ulp of rounding apart.
		if math.Abs(float64(got[i]-want[i])) > float64(math.Nextafter32(want[i], math.MaxFloat32)-want[i]) {
			t.Fatalf("uncertainties %v, want %v", got, want)
		}
	}
}

// TestDeriveStdExtremesStayFinite: values at +-FLT_MAX give a finite std (its squares are
// float64's, far from overflow; the std itself is clamped to FLT_MAX).
func TestDeriveStdExtremesStayFinite(t *testing.T) {
	d := mustDeriver(t, deriveConfig(t, "uncertainty: {suffix: _sd}\nderive:\n  features: [{kind: std, of: temp, last: 4}]\n"))
	in := &Decoded{Values: make([]float32, 1), SD: make([]float32, 1)}
	for i, v := range []float32{math.MaxFloat32, -math.MaxFloat32, math.MaxFloat32, -math.MaxFloat32, 0, -math.MaxFloat32} {
		in.Values[0], in.SD[0] = v, math.MaxFloat32
		out := d.Apply(in, 0, int64(i), nil, monday6)
		for _, x := range []float32{out.Values[1], out.SD[1]} {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("record %d: std %v, sd %v: not finite", i, out.Values[1], out.SD[1])
			}
		}
		// M,-M,M,-M: all equally far from their mean 0, the oldest two out; M,-M: std
		// sqrt(2) M.
		if i == 3 && out.Values[1] != math.MaxFloat32 {
			t.Fatalf("record %d: std %v, want FLT_MAX (clamped)", i, out.Values[1])
		}
	}
}

// TestDeriveStdEvictedAndReread: past max_keys the least recently seen key is forgotten and
// starts afresh when it comes back; a partition read again from an earlier offset starts its
// series afresh (the state is in memory only, as for the other kinds).
func TestDeriveStdEvictedAndReread(t *testing.T) {
	d := mustDeriver(t, deriveConfig(t, "derive:\n  max_keys: 1\n  features: [{kind: std, of: temp, last: 4}]\n"))
	out := applyAll(t, d, []rec{{0, 0, "a", 10, monday6}, {0, 1, "a", 20, monday6}, {0, 2, "b", 1, monday6},
		{0, 3, "a", 4, monday6}, {0, 4, "a", 8, monday6}})
	// Without the eviction a's fourth value would read 10,20,4,8: 20 and 4 out, sqrt(2).
	if out[3][1] != 0 || out[4][1] != float32(math.Sqrt(8)) {
		t.Fatalf("key a after its eviction: std %v, %v; want 0, sqrt(8) (4 alone, then 4,8)", out[3][1], out[4][1])
	}
	out = applyAll(t, d, []rec{{0, 5, "a", 9, monday6}, {0, 6, "a", 7, monday6}, {0, 3, "a", 100, monday6}})
	// 4,8,9,7: mean 7, 4 and 9 out, 8,7: sqrt(0.5); re-read from offset 3: 100 alone.
	if out[1][1] != float32(math.Sqrt(0.5)) || out[2][1] != 0 {
		t.Fatalf("std %v then, re-read, %v; want sqrt(0.5) then 0", out[1][1], out[2][1])
	}
}

// TestDeriveStdStateBound: the series' memory with a std stays within StateBound, and holds at
// least the values' rings, the exact sums and the extremes (derive_std.go's state).
func TestDeriveStdStateBound(t *testing.T) {
	used := checkStateBound(t, deriveConfig(t, "uncertainty: {suffix: _sd}\nderive:\n  max_keys: 20000\n  features: [{kind: std, of: temp, last: 64}]\n"))
	// The rings, the exact sums and the extremes themselves: the count saw them.
	if min := int64(20000 * (64*8 + 8*stdWideLen(true) + 4*stdAggLen(64))); used < min {
		t.Fatalf("%d bytes held, fewer than the rings', sums' and extremes' %d: the measure missed the state", used, min)
	}
}

// TestDeriveStdConfigErrors: std needs last, in range; robust_z's other keys are not for it;
// each at its YAML key's line:column.
func TestDeriveStdConfigErrors(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"derive:\n  features:\n    - {kind: std, of: temp}\n",
			`c.yaml:7:9: ingest.derive.features[0].last: 0 is not in [4, 100000]`},
		{"derive:\n  features:\n    - {kind: std, of: temp, last: 3}\n", // one value would be kept: always 0
			`c.yaml:7:31: ingest.derive.features[0].last: 3 is not in [4, 100000]`},
		{"derive:\n  features:\n    - {kind: std, of: temp, last: 5, scale_floor: 3}\n",
			`c.yaml:7:40: ingest.derive.features[0].scale_floor: only for robust_z`},
		{"derive:\n  features:\n    - {kind: std, last: 5}\n",
			`c.yaml:7:9: ingest.derive.features[0].of: required for std`},
		{"derive:\n  features:\n    - {kind: std, of: temp, last: 5}\n    - {kind: std, of: temp, last: 5}\n",
			`c.yaml:8:9: ingest.derive.features[1]: column name "temp.std5" is already used by ingest.derive.features[0]`},
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

// TestDeriveStdOfADiff: std may take an earlier derived column (the spread of a change: a
// high-pass band's RMS), named <of>.std<last>.
func TestDeriveStdOfADiff(t *testing.T) {
	c := deriveConfig(t, "derive:\n  features: [{kind: diff, of: temp}, {kind: std, of: temp.diff, last: 4}]\n")
	d := deriverOf(t, c, "temp,temp.diff,temp.diff.std4")
	out := applyAll(t, d, []rec{{0, 0, "", 1, monday6}, {0, 1, "", 3, monday6}, {0, 2, "", 3, monday6},
		{0, 3, "", 7, monday6}, {0, 4, "", 8, monday6}})
	// diffs 0, 2, 0, 4, 1: of (0, 2, 0, 4): mean 1.5, 4 then the older 0 out, (2, 0): sqrt(2);
	// of (2, 0, 4, 1): mean 1.75, 4 and 0 out, (2, 1): sqrt(0.5).
	if out[3][2] != float32(math.Sqrt2) || out[4][2] != float32(math.Sqrt(0.5)) {
		t.Fatalf("std of the diff %v %v", out[3][2], out[4][2])
	}
}

// TestDeriveStdSpikesLeftOut: two +25 sd spikes 10 records apart among ordinary readings do
// not move the std of last 32 while its window holds either: each record reads the sample
// standard deviation of the window's ordinary values (where it holds one spike, less the
// ordinary value farthest from the window's mean, the second left out). (The plain standard deviation read about
// 4.5 sd for the 32 records after one spike, the spike's aftermath, docs/BENCHMARKS.md §12.61;
// leaving out one value alone read about 4.6 sd where the window held both.) An oscillation
// burst of many values still raises it: 3 sd cycles of 8 over 16 records at least double it.
func TestDeriveStdSpikesLeftOut(t *testing.T) {
	const last = 32
	d := mustDeriver(t, deriveConfig(t, "derive:\n  features: [{kind: std, of: temp, last: 32}]\n"))
	rng := rand.New(rand.NewPCG(26, 61))
	var xs []float32
	for range 120 {
		xs = append(xs, float32(70+rng.NormFloat64()))
	}
	spike := []int{60, 70}
	for _, i := range spike {
		xs[i] += 25
	}
	in := &Decoded{Values: make([]float32, 1)}
	for i, x := range xs {
		in.Values[0] = x
		got := d.Apply(in, 0, int64(i), nil, monday6).Values[1]
		if i < spike[0] || i >= spike[1]+last {
			continue
		}
		var w []float64 // the window's ordinary values
		var all float64 // the window's mean
		for j := i + 1 - last; j <= i; j++ {
			all += float64(xs[j]) / last
			if j != spike[0] && j != spike[1] {
				w = append(w, float64(xs[j]))
			}
		}
		if len(w) == last-1 { // one spike: its ordinary value farthest from all is left out too
			far := 0
			for j, v := range w {
				if math.Abs(v-all) > math.Abs(w[far]-all) {
					far = j
				}
			}
			w = append(w[:far], w[far+1:]...)
		}
		if len(w) != last-2 {
			t.Fatalf("record %d: %d values kept", i, len(w))
		}
		var m, ss float64
		for _, v := range w {
			m += v / float64(len(w))
		}
		for _, v := range w {
			ss += (v - m) * (v - m)
		}
		want := math.Sqrt(ss / float64(len(w)-1))
		// The same 30 values and formula; the order of the sums and the float32 rounding of
		// the result differ: 1e-6 relative is ten float32 ulps.
		if math.Abs(float64(got)-want) > 1e-6*want {
			t.Fatalf("record %d (%d after the first spike): std %v, want %v (the ordinary values')", i, i-spike[0], got, want)
		}
	}
	before := d.Apply(in, 0, 120, nil, monday6).Values[1] // the last window held no spike
	var after float32
	for i := range 16 {
		in.Values[0] = float32(70 + rng.NormFloat64() + 3*math.Sin(2*math.Pi*float64(i)/8))
		after = d.Apply(in, 0, int64(121+i), nil, monday6).Values[1]
	}
	if after < 2*before {
		t.Fatalf("an oscillation burst over 16 of 32 records: std %v, from %v; want at least double", after, before)
	}
}
