package gpukern

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFirstNonFinite: the fast test finds the plain scan's first NaN or ±Inf (by dimension,
// then row) wherever it is: in the first or last value, at odd and even positions, in columns
// that start at a 4-byte but not 8-byte boundary (sub-slices), with several bad values, in small
// inputs (one goroutine) and large ones (a goroutine a column), and nothing where all values are
// finite, including the largest float32 and subnormals.
func TestFirstNonFinite(t *testing.T) {
	plain := func(cols [][]float32) (int, int, bool) {
		for j, c := range cols {
			for i, v := range c {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return i, j, true
				}
			}
		}
		return 0, 0, false
	}
	r := rand.New(rand.NewPCG(22, 2))
	bads := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x7fc00001), math.Float32frombits(0xffffffff)}
	for _, rows := range []int{0, 1, 2, 3, 7, 1000, 1_000_001} {
		for _, offset := range []int{0, 1} {
			for trial := range 12 {
				cols := make([][]float32, 3)
				for j := range cols {
					c := make([]float32, rows+offset)
					for i := range c {
						switch r.IntN(4) {
						case 0:
							c[i] = math.MaxFloat32
						case 1:
							c[i] = -math.SmallestNonzeroFloat32
						default:
							c[i] = float32(r.NormFloat64())
						}
					}
					cols[j] = c[offset:]
				}
				if rows > 0 && trial > 0 {
					for range 1 + r.IntN(3) {
						j := r.IntN(len(cols))
						i := r.IntN(rows)
						switch trial {
						case 1:
							i = 0
						case 2:
							i = rows - 1
						}
						cols[j][i] = bads[r.IntN(len(bads))]
					}
				}
				wi, wj, wok := plain(cols)
				gi, gj, gok := firstNonFinite(cols)
				if gi != wi || gj != wj || gok != wok {
					t.Fatalf("rows %d offset %d trial %d: got (%d, %d, %v), want (%d, %d, %v)", rows, offset, trial, gi, gj, gok, wi, wj, wok)
				}
			}
		}
	}
}

// BenchmarkFirstNonFinite: the finite check of a 1M x 10 SolvingSet input, the fast test
// against the plain loop it replaces.
func BenchmarkFirstNonFinite(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	cols := make([][]float32, 10)
	for j := range cols {
		cols[j] = make([]float32, 1_000_000)
		for i := range cols[j] {
			cols[j][i] = float32(r.NormFloat64())
		}
	}
	b.Run("fast", func(b *testing.B) {
		for range b.N {
			if _, _, bad := firstNonFinite(cols); bad {
				b.Fatal("non-finite")
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		for range b.N {
			for _, c := range cols {
				for _, v := range c {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						b.Fatal("non-finite")
					}
				}
			}
		}
	})
}
