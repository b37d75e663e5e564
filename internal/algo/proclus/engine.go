package proclus

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"

	"github.com/outlierd/outlierd/internal/algo/euclid"
)

// Engine runs the O(rows) passes of PROCLUS over one data set (the heavy part; RunEngine keeps the
// control flow). Every sum is an int64 of fixed-point terms (Fixed), so two engines that compute
// the same terms agree exactly whatever their summation order. An engine owns a current and a
// best assignment of every row.
type Engine interface {
	// Begin starts a run: the per-dimension fixed-point scales (Scales) and the number of
	// candidate medoids (distance-cache slots, Query.Slot < slots).
	Begin(scales []float64, slots int) error
	// Locality computes, for every query q, over the rows p with q.Lo < euclid.Squared(p, medoid)
	// <= q.Hi: sums[q*dims+j] = Σ Fixed(|x_pj - m_j|, scales[j]) for every dimension j, and
	// counts[q] = their number (the change ΔL of theorem 3.1; the caller adds it with its sign).
	Locality(qs []Query, sums, counts []int64) error
	// Assign sets the current assignment: each row to the medoid nearest in Manhattan segmental
	// distance within its subspace (Segmental over centers[i] and dims[off[i]:off[i+1]]), ties to
	// the lowest i; with radius != nil a row farther than radius[i] from every medoid i gets -1.
	// counts[i] = rows in cluster i, sums[t] = Σ Fixed(x_pj, scales[j]) over cluster i's rows for
	// pair t (i, j = dims[t]).
	Assign(centers [][]float32, off, dims []int, radius []float64, counts, sums []int64) error
	// Spread computes sums[t] = Σ Fixed(|x_pj - center[t]|, scales[j]) over the rows p of the
	// current assignment's cluster i, for each pair t (i, j = dims[t]) with off as in Assign.
	Spread(center []float64, off, dims []int, sums []int64) error
	// KeepBest copies the current assignment to the best; UseBest copies the best to the current.
	KeepBest() error
	UseBest() error
	// Assignment copies the current assignment into dst (len = rows).
	Assignment(dst []int32) error
}

// Query is one medoid's locality change for Engine.Locality.
type Query struct {
	// Slot is the medoid's candidate index: its distance row is cached under it.
	Slot int
	// Fresh says the slot's distances are not computed yet (first use of the candidate).
	Fresh bool
	// Medoid holds the medoid's coordinates (all dimensions).
	Medoid []float32
	// Lo < squared distance <= Hi selects the rows (Lo = -1: from the medoid itself).
	Lo, Hi float32
}

// Scales returns per dimension j the power of two 2^s_j that Fixed multiplies by: the largest
// with rows * 2*max|x_j| * 2^s_j <= 2^62, so that no sum of rows terms (|x - m| <= 2*max|x_j|,
// |x| <= max|x_j|) overflows an int64. A term's rounding error is below 2^-s_j, about 2^-40 of
// max|x_j| for a million rows: far below float32's resolution of the data itself. cols must be
// finite (Prepare checks).
func Scales(cols [][]float32) []float64 {
	n := 0
	if len(cols) > 0 {
		n = len(cols[0])
	}
	m, _ := columnMax(cols)
	out := make([]float64, len(cols))
	for j := range out {
		out[j] = scaleFor(m[j], n)
	}
	return out
}

func scaleFor(maxAbs float64, n int) float64 {
	nb := bits.Len(uint(n)) // n < 2^nb
	e := 0
	if maxAbs > 0 {
		_, e = math.Frexp(maxAbs) // maxAbs < 2^e, so 2*maxAbs < 2^(e+1)
	}
	return math.Ldexp(1, 62-nb-(e+1))
}

// columnMax returns max|x| per column and the first row holding a NaN or an infinity (-1: none),
// one goroutine per column.
func columnMax(cols [][]float32) (maxAbs []float64, bad []int) {
	maxAbs, bad = make([]float64, len(cols)), make([]int, len(cols))
	var wg sync.WaitGroup
	for j, c := range cols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := float32(0)
			bad[j] = -1
			for i, v := range c {
				a := math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
				if !(a <= math.MaxFloat32) { // NaN or ±Inf
					bad[j] = i
					return
				}
				if a > m {
					m = a
				}
			}
			maxAbs[j] = float64(m)
		}()
	}
	wg.Wait()
	return maxAbs, bad
}

// Fixed rounds v*scale toward zero to an int64 (scale a power of two, so the product is exact;
// Go's conversion and CUDA's (long long) cast both truncate).
func Fixed(v, scale float64) int64 { return int64(v * scale) }

// Unfixed converts a fixed-point sum back to float64.
func Unfixed(s int64, scale float64) float64 { return float64(s) / scale }

// cpuEngine is the CPU Engine: the passes split the rows into chunks over worker goroutines, each
// with private int64 sums added at the end (exact, so the result is independent of the split).
// It does not cache distances: recomputing a row's squared distance costs about what reading a
// cached one does on a CPU, and needs no rows x candidates matrix.
type cpuEngine struct {
	cols      [][]float32
	n, d      int
	workers   int
	scales    []float64
	cur, best []int32
}

// NewCPUEngine returns the CPU engine for column-major cols (cols[j][i]) with workers goroutines
// (<= 0: GOMAXPROCS).
func NewCPUEngine(cols [][]float32, workers int) Engine {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	n := 0
	if len(cols) > 0 {
		n = len(cols[0])
	}
	return &cpuEngine{cols: cols, n: n, d: len(cols), workers: workers}
}

func (e *cpuEngine) Begin(scales []float64, slots int) error {
	if len(scales) != e.d {
		return fmt.Errorf("proclus: %d scales for %d dimensions", len(scales), e.d)
	}
	e.scales = scales
	if e.cur == nil {
		e.cur, e.best = make([]int32, e.n), make([]int32, e.n)
	}
	return nil
}

// parallel runs fn over row ranges [lo, hi) on the workers, each with its own accumulator of
// size acc (zeroed), and adds the accumulators into out.
func (e *cpuEngine) parallel(acc int, out []int64, fn func(lo, hi int, sums []int64)) {
	// A fixed part per worker, not fanout's dispensed indices (exact int64 sums: any split agrees).
	const minChunk = 1 << 14
	w := max(1, min(e.workers, e.n/minChunk))
	parts := make([][]int64, w)
	var wg sync.WaitGroup
	for t := range w {
		parts[t] = make([]int64, acc)
		lo, hi := e.n*t/w, e.n*(t+1)/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi, parts[t])
		}()
	}
	wg.Wait()
	clear(out)
	for _, p := range parts {
		for i, v := range p {
			out[i] += v
		}
	}
}

func (e *cpuEngine) Locality(qs []Query, sums, counts []int64) error {
	nq, d := len(qs), e.d
	acc := make([]int64, nq*d+nq)
	e.parallel(nq*d+nq, acc, func(lo, hi int, s []int64) {
		for p := lo; p < hi; p++ {
			for q := range qs {
				dist := euclid.Squared(e.cols, p, qs[q].Medoid)
				if !(qs[q].Lo < dist && dist <= qs[q].Hi) {
					continue
				}
				s[nq*d+q]++
				row := s[q*d : q*d+d]
				for j, c := range e.cols {
					row[j] += Fixed(math.Abs(float64(c[p])-float64(qs[q].Medoid[j])), e.scales[j])
				}
			}
		}
	})
	copy(sums, acc[:nq*d])
	copy(counts, acc[nq*d:])
	return nil
}

func (e *cpuEngine) Assign(centers [][]float32, off, dims []int, radius []float64, counts, sums []int64) error {
	k, np := len(centers), len(dims)
	acc := make([]int64, k+np)
	e.parallel(k+np, acc, func(lo, hi int, s []int64) {
		for p := lo; p < hi; p++ {
			best, bestD, inside := 0, math.Inf(1), radius == nil
			for i := range k {
				sum := 0.0
				for _, j := range dims[off[i]:off[i+1]] {
					sum += math.Abs(float64(e.cols[j][p]) - float64(centers[i][j]))
				}
				seg := sum / float64(off[i+1]-off[i])
				if seg < bestD {
					best, bestD = i, seg
				}
				if radius != nil && seg <= radius[i] {
					inside = true
				}
			}
			if !inside {
				e.cur[p] = -1
				continue
			}
			e.cur[p] = int32(best)
			s[best]++
			for t := off[best]; t < off[best+1]; t++ {
				j := dims[t]
				s[k+t] += Fixed(float64(e.cols[j][p]), e.scales[j])
			}
		}
	})
	copy(counts, acc[:k])
	copy(sums, acc[k:])
	return nil
}

func (e *cpuEngine) Spread(center []float64, off, dims []int, sums []int64) error {
	e.parallel(len(dims), sums, func(lo, hi int, s []int64) {
		for p := lo; p < hi; p++ {
			c := e.cur[p]
			if c < 0 {
				continue
			}
			for t := off[c]; t < off[c+1]; t++ {
				j := dims[t]
				s[t] += Fixed(math.Abs(float64(e.cols[j][p])-center[t]), e.scales[j])
			}
		}
	})
	return nil
}

func (e *cpuEngine) KeepBest() error { copy(e.best, e.cur); return nil }

func (e *cpuEngine) UseBest() error { copy(e.cur, e.best); return nil }

func (e *cpuEngine) Assignment(dst []int32) error { copy(dst, e.cur); return nil }
