package microcluster

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// gridCols returns n rows of r integer coordinates in [0, side): many rows coincide and many
// row-centre distances tie exactly, so the lowest-index rule decides many assignments.
func gridCols(n, r, side int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	means := make([][]float32, r)
	for j := range r {
		means[j] = make([]float32, n)
		for i := range n {
			means[j][i] = float32(rng.IntN(side))
		}
	}
	return means
}

// TestClusterBoundedMatchesPlain: the bounded passes give bit for bit the assignment, tuples and
// anchors of assigning every row in every pass, for every worker count, and do skip work.
func TestClusterBoundedMatchesPlain(t *testing.T) {
	t.Parallel()
	three := func(n, r int, seed uint64) ([][]float32, [][]float32) {
		p := synth.DefaultUncertainParams()
		p.Rows, p.Dims, p.Seed = n, r, seed
		d := synth.Three(p)
		return d.Cols, d.SD
	}
	huge := func(n, r int, seed uint64) ([][]float32, [][]float32) {
		// Coordinates up to 4e19: many squared distances overflow float32 to +Inf and tie.
		m := gridCols(n, r, 5, seed)
		for j := range m {
			for i := range m[j] {
				m[j][i] *= 1e19
			}
		}
		return m, nil
	}
	cases := []struct {
		name    string
		data    func(n, r int, seed uint64) ([][]float32, [][]float32)
		n, r, q int
		iters   int
		// skips: the bounded passes must compute fewer than n*q distances (not asserted where
		// exact ties or overflow leave nothing to prove).
		skips bool
	}{
		{"grid r2 side 6", func(n, r int, s uint64) ([][]float32, [][]float32) { return gridCols(n, r, 6, s), nil }, 3000, 2, 12, 5, false},
		{"grid r4 side 4", func(n, r int, s uint64) ([][]float32, [][]float32) { return gridCols(n, r, 4, s), nil }, 9000, 4, 30, 4, false},
		{"grid r10 side 3", func(n, r int, s uint64) ([][]float32, [][]float32) { return gridCols(n, r, 3, s), nil }, 2000, 10, 50, 4, false},
		{"uniform r10", func(n, r int, s uint64) ([][]float32, [][]float32) { return randomCols(n, r, s) }, 6000, 10, 60, 5, true},
		{"three r5", three, 8000, 5, 40, 6, true},
		{"q1", func(n, r int, s uint64) ([][]float32, [][]float32) { return randomCols(n, r, s) }, 500, 3, 1, 3, false},
		{"overflow", huge, 1000, 3, 9, 4, false},
	}
	for _, tc := range cases {
		for _, seed := range []uint64{1, 2, 3} {
			means, sds := tc.data(tc.n, tc.r, seed)
			want, wantAssign, err := clusterPlain(means, sds, tc.q, tc.iters, seed, 1)
			if err != nil {
				t.Fatalf("%s seed %d: %v", tc.name, seed, err)
			}
			for _, w := range []int{1, 2, 3} {
				var computed []int
				got, gotAssign, err := cluster(means, sds, tc.q, tc.iters, seed, w, true, &computed)
				if err != nil {
					t.Fatalf("%s seed %d workers %d: %v", tc.name, seed, w, err)
				}
				if len(computed) != tc.iters-1 {
					t.Fatalf("%s: %d bounded passes, want %d", tc.name, len(computed), tc.iters-1)
				}
				for i := range wantAssign {
					if gotAssign[i] != wantAssign[i] {
						t.Fatalf("%s seed %d workers %d: row %d assigned %d, plain %d",
							tc.name, seed, w, i, gotAssign[i], wantAssign[i])
					}
				}
				assertSameTuples(t, got, want)
				for j := range want.Anchor {
					for c := range want.N {
						if math.Float64bits(got.Anchor[j][c]) != math.Float64bits(want.Anchor[j][c]) {
							t.Fatalf("%s seed %d workers %d: anchor %d/%d differs", tc.name, seed, w, j, c)
						}
					}
				}
				if tc.skips {
					for p, k := range computed {
						if k >= tc.n*tc.q/2 {
							t.Errorf("%s seed %d: bounded pass %d computed %d of %d distances", tc.name, seed, p+2, k, tc.n*tc.q)
						}
					}
				}
			}
		}
	}
}

// TestThresholdLevelNeverSkipsATie: a centre at exactly the assigned float32 distance (a tie,
// which the lowest index must win) or closer always stays a candidate, over the whole float32
// range, including subnormal, huge and overflowed distances.
func TestThresholdLevelNeverSkipsATie(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 5))
	for _, r := range []int{1, 3, 10, 100} {
		means, _ := randomCols(64, r, uint64(r))
		cent := make([][]float32, r)
		for j := range r {
			cent[j] = means[j][:8]
		}
		e := newElkanState(means, cent, 64, 8)
		check := func(d float32) {
			if lv, tl := e.levelOf(d), e.thresholdLevel(float64(d)); int(lv) > tl {
				t.Fatalf("r=%d d=%g: level %d above threshold %d, a tie would be skipped", r, d, lv, tl)
			}
		}
		for range 200000 {
			check(math.Float32frombits(rng.Uint32() >> 1)) // any non-negative float32, Inf and NaN aside
		}
		for _, d := range []float32{0, math.SmallestNonzeroFloat32, 1e-38, 1, math.MaxFloat32, float32(math.Inf(1))} {
			check(d)
		}
		// Around the scale, where the levels change.
		for l := range 256 {
			v := float32(float64(l) * e.scale)
			v *= v
			for _, d := range []float32{v, math.Nextafter32(v, 0), math.Nextafter32(v, 1e30)} {
				check(d)
			}
		}
	}
}

// TestLaneSub checks the byte-lane subtraction against per-byte arithmetic for every pair of
// byte values in every lane, with random neighbours that must not leak borrows into it.
func TestLaneSub(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	for lane := range 8 {
		sh := 8 * uint(lane)
		for x := range 256 {
			for y := range 256 {
				a := rng.Uint64()&^(0xff<<sh) | uint64(x)<<sh
				b := rng.Uint64()&^(0xff<<sh) | uint64(y)<<sh
				diff, below := laneSub(a, b)
				sat := laneSubSat(a, b)
				for l := range 8 {
					s := 8 * uint(l)
					ax, by := (a>>s)&0xff, (b>>s)&0xff
					if got := (diff >> s) & 0xff; got != (ax-by)&0xff {
						t.Fatalf("lane %d: %d - %d = %d", l, ax, by, got)
					}
					if got := (below>>s)&0xff == 0x80; got != (ax < by) {
						t.Fatalf("lane %d: %d < %d reported %v", l, ax, by, got)
					}
					if (below>>s)&0x7f != 0 {
						t.Fatalf("lane %d: stray bits in %x", l, below)
					}
					if got, want := (sat>>s)&0xff, uint64(max(int(ax)-int(by), 0)); got != want {
						t.Fatalf("lane %d: sat %d - %d = %d, want %d", l, ax, by, got, want)
					}
				}
			}
		}
	}
}
