package rank

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// scoreRef is Tail.Score as it was before the drain work (issue 12 item 6): sort.Search for
// both counts and ln(n) per call. It pins the optimised Score bit for bit.
func scoreRef(t *Tail, q [][]float32, out []float64) {
	for i := range out {
		var sum float64
		for j := range q {
			s := t.Sorted[j]
			n := len(s)
			x := q[j][i]
			le := sort.Search(n, func(i int) bool { return s[i] > x })
			ge := n - sort.Search(n, func(i int) bool { return s[i] >= x })
			base := math.Log(float64(n))
			left := base - math.Log(float64(max(le, 1)))
			right := base - math.Log(float64(max(ge, 1)))
			if n > 0 && x < s[0] {
				left += beyond((float64(s[0])-float64(x))/t.Spread[j], base)
			}
			if n > 0 && x > s[n-1] {
				right += beyond((float64(x)-float64(s[n-1]))/t.Spread[j], base)
			}
			sum += max(left, right)
		}
		out[i] = sum
	}
}

// TestTailScoreMatchesReference: continuous, discrete (ties), constant, heavy-tailed and
// one-value features, queries inside, on and beyond the window's values, and NaN; windows with
// and without the bucket index, built by NewTail, by TailOf (a snapshot read back) and as a
// literal (no index); and TailSurprisal of the window's own values by their counts.
func TestTailScoreMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 2, 17, 40, 5000, 50000} {
		const d = 5
		cols := make([][]float32, d)
		for j := range cols {
			cols[j] = make([]float32, n)
			for i := range cols[j] {
				switch j {
				case 0:
					cols[j][i] = float32(rng.NormFloat64())
				case 1:
					cols[j][i] = float32(rng.IntN(5))
				case 2:
					cols[j][i] = 3
				case 3:
					cols[j][i] = float32(rng.ExpFloat64())
				default:
					cols[j][i] = float32(math.Exp(rng.NormFloat64() * 4)) // a few far outliers
				}
			}
		}
		tl := NewTail(cols)
		const rows = 400
		q := make([][]float32, d)
		for j := range q {
			q[j] = make([]float32, rows)
			for i := range q[j] {
				switch i % 4 {
				case 0:
					q[j][i] = cols[j][rng.IntN(n)] // a window value: ties
				case 1:
					q[j][i] = float32(rng.NormFloat64() * 10) // beyond the range too
				case 2:
					q[j][i] = float32(rng.IntN(7) - 1)
				default:
					q[j][i] = float32(rng.Float64())
				}
			}
		}
		q[0][3] = float32(math.NaN())
		want, got := make([]float64, rows), make([]float64, rows)
		scoreRef(tl, q, want)
		for _, c := range []struct {
			name string
			tl   *Tail
		}{{"NewTail", tl}, {"TailOf", TailOf(tl.Sorted, tl.Spread)}, {"literal", &Tail{Sorted: tl.Sorted, Spread: tl.Spread}}} {
			c.tl.Score(q, got)
			for i := range want {
				if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
					t.Fatalf("%s n=%d row %d: reference %v, got %v", c.name, n, i, want[i], got[i])
				}
			}
		}
		// A window's own values by their counts (TailSurprisal): what the reference gives them.
		for j, c := range cols {
			for i := 0; i < n; i += 1 + n/100 {
				x := c[i]
				lt, le := sort.Search(n, func(i int) bool { return tl.Sorted[j][i] >= x }), sort.Search(n, func(i int) bool { return tl.Sorted[j][i] > x })
				ref := make([]float64, 1)
				scoreRef(&Tail{Sorted: tl.Sorted[j : j+1], Spread: tl.Spread[j : j+1]}, [][]float32{{x}}, ref)
				if got := TailSurprisal(n, lt, le); math.Float64bits(got) != math.Float64bits(ref[0]) {
					t.Fatalf("n=%d feature %d value %v: TailSurprisal %v, reference %v", n, j, x, got, ref[0])
				}
			}
		}
		if indexed := tl.index[0].start != nil; indexed != (n >= 4*valuesPerBucket) {
			t.Fatalf("n=%d: index built %v", n, indexed)
		}
	}
}

// BenchmarkTailScore: the ranking score's density part for 1000 records against a window of
// 50,000, 8 features (the default config's shape). ns/op is per record.
//
//	go test -run '^$' -bench TailScore -count 5 ./internal/algo/rank/
func BenchmarkTailScore(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const n, d, rows = 50000, 8, 1000
	cols, q := make([][]float32, d), make([][]float32, d)
	for j := range cols {
		cols[j], q[j] = make([]float32, n), make([]float32, rows)
		for i := range cols[j] {
			cols[j][i] = float32(rng.NormFloat64())
		}
		for i := range q[j] {
			q[j][i] = float32(rng.NormFloat64())
		}
	}
	tl := NewTail(cols)
	out := make([]float64, rows)
	b.Run("optimised", func(b *testing.B) {
		for b.Loop() {
			tl.Score(q, out)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/record")
	})
	b.Run("reference", func(b *testing.B) {
		for b.Loop() {
			scoreRef(tl, q, out)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/record")
	})
}
