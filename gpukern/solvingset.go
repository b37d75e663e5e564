package gpukern

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// SolvingSetParams are the parameters of SolvingSet in the papers' names, with what the CPU
// twin's arithmetic fixes and the caller passes (internal/accel: from solvingset), so that the
// result equals the CPU's: the first candidates, the pruning margin and OUT.
type SolvingSetParams struct {
	// K is the number of nearest neighbours summed into a weight; 1 <= K < rows, K <= KNNMaxK.
	K int
	// N is the number of top outliers wanted; 1 <= N <= rows. Ties at w* may return more.
	N int
	// M is the number of candidates per iteration; M >= 1, and M*(dims+1) <= 12288 so that the
	// candidates fit in a block's shared memory.
	M int
	// First are the first candidates: min(M, rows) distinct rows (solvingset.FirstCandidates,
	// the CPU twin's seeded draw).
	First []int
	// Margin is the relative slack of the pruning tests, >= 1 (solvingset.PruneMargin(K)): an
	// upper bound u is below minOUT only when u*Margin < minOUT, which covers the rounding of
	// sums taken in another order.
	Margin float64
	// Out is OUT, empty: the host loop offers it each exact weight and prunes against its Min.
	Out TopWeights
}

// TopWeights is the papers' OUT, the N largest exact weights so far: Offer adds a weight, Min is
// minOUT (0 until N weights were offered), Len how many it holds. The caller passes the CPU
// twin's (solvingset.NewTopN(N)), so that minOUT and w* are the CPU's bit for bit.
type TopWeights interface {
	Offer(w float64)
	Min() float64
	Len() int
}

// Outlier is one top-n outlier: its row in the input and its exact weight w_k(row, D).
type Outlier struct {
	Row    int
	Weight float64
}

// SolvingSetResult is the outcome of SolvingSet, field for field solvingset.Result without the
// distance count.
type SolvingSetResult struct {
	// Outliers holds every row with weight >= WStar, by weight descending, ties by row ascending.
	Outliers []Outlier
	// WStar is w*, the weight of the n-th outlier.
	WStar float64
	// SolvingSet holds the rows of the solving set S in the order they became candidates.
	SolvingSet []int
	// Iterations is the number of iterations.
	Iterations int
}

// ssMaxShared is the shared memory (bytes) the candidates of one iteration may take in ss_dtoc.
const ssMaxShared = 48 * 1024

// The threads of an ss_candpart block (CANDNN_THREADS_Q64 and _Q256 in solvingset.cu, held
// together by TestCandPartThreads): the kernel strides its slice by them, so a launch with
// another count would skip entries.
const (
	ssCandThreadsQ64  = 1024
	ssCandThreadsQ256 = 256
)

// ssGatherWarps is ss_gather's candidates a block, a warp each (SS_GATHER_WARPS in
// solvingset.cu, held by TestCandPartThreads): a launch of ssGatherGrid(n) blocks of
// 32*ssGatherWarps threads gathers n candidates.
const ssGatherWarps = 4

// ssSelectSlice is the points (or pairs) a selection block takes its best of (SEL_SLICE in
// solvingset.cu, held by TestCandPartThreads).
const ssSelectSlice = 2048

// The selection's level plan (selectLaunch): ss_select leaves blocks lists of take pairs, and each
// further level keeps the best take of every ssSelectSlice pairs (ssSelectNext) while the list is
// longer than take and a level shrinks it (2*take <= ssSelectSlice): ssSelectLevels levels, the
// last of them one slice (its take pairs, sorted, are the selection). Levels ping-pong between
// ss_select's buffers (blocks*take pairs) and the second ones (ssSelect2Len), the last writing
// the final take pairs; TestSelectPlan holds every level's output to its buffer.

// ssSelectNext is the length of the level after one over L pairs.
func ssSelectNext(L, take int) int { return (L + ssSelectSlice - 1) / ssSelectSlice * take }

// ssSelectLevels is the number of levels after ss_select's blocks lists of take.
func ssSelectLevels(blocks, take int) int {
	levels := 0
	for L := blocks * take; L > take && 2*take <= ssSelectSlice; L = ssSelectNext(L, take) {
		levels++
	}
	return levels
}

// ssSelect2Len is the length of the second selection buffers for blocks first-level lists of
// take: the first further level's output, the longest that lands there.
func ssSelect2Len(blocks, take int) int {
	return max(1, (blocks*take+ssSelectSlice-1)/ssSelectSlice) * take
}

// SolvingSet runs the SolvingSet algorithm (ALGORITHMS.md §1) on the device and returns the exact
// top-n outliers, w* and the solving set. The top-n rows, their weights (bit for bit) and w* equal
// solvingset.SolvingSet's: distances, canonical weights, pruning and selection follow the CPU
// twin's arithmetic. The solving set also equals the CPU's as long as both build each neighbour
// heap in the same storage order (the upper bounds are plain sums in that order); the GPU inserts
// one distance at a time in candidate order. cols is column-major float32, finite. Device memory:
// about rows*(4*dims + 4*K + 4*M + 16) bytes.
func SolvingSet(d *Device, cols [][]float32, p SolvingSetParams) (SolvingSetResult, error) {
	rows, err := columnsShape("cols", cols)
	if err != nil {
		return SolvingSetResult{}, fmt.Errorf("gpukern.SolvingSet: %w", err)
	}
	if err := p.validate(rows, len(cols)); err != nil {
		return SolvingSetResult{}, fmt.Errorf("gpukern.SolvingSet: %w", err)
	}
	if i, j, bad := firstNonFinite(cols); bad {
		return SolvingSetResult{}, fmt.Errorf("gpukern.SolvingSet: row %d dimension %d is %v: data must be finite", i, j, cols[j][i])
	}
	return d.solvingSet(cols, rows, p)
}

func (p SolvingSetParams) validate(rows, dims int) error {
	var errs []error
	if rows < 2 {
		errs = append(errs, fmt.Errorf("need at least 2 rows, got %d", rows))
	}
	if rows > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("at most %d rows, got %d", math.MaxInt32, rows))
	}
	if p.K < 1 || p.K >= rows || p.K > KNNMaxK {
		errs = append(errs, fmt.Errorf("need 1 <= k < rows (%d) and k <= %d, got k=%d", rows, KNNMaxK, p.K))
	}
	if p.N < 1 || p.N > rows {
		errs = append(errs, fmt.Errorf("need 1 <= n <= rows (%d), got n=%d", rows, p.N))
	}
	if p.M < 1 {
		errs = append(errs, fmt.Errorf("need m >= 1, got m=%d", p.M))
	} else if min(p.M, rows)*(dims+1)*4 > ssMaxShared {
		errs = append(errs, fmt.Errorf("m=%d candidates of %d dimensions exceed the %d B of shared memory; use m <= %d",
			p.M, dims, ssMaxShared, ssMaxShared/4/(dims+1)))
	}
	if dims > MaxDims {
		errs = append(errs, fmt.Errorf("%d dimensions, at most %d supported", dims, MaxDims))
	}
	if p.M >= 1 && len(p.First) != min(p.M, rows) {
		errs = append(errs, fmt.Errorf("need min(m, rows) = %d first candidates, got %d", min(p.M, rows), len(p.First)))
	}
	seen := make(map[int]bool, len(p.First))
	for _, r := range p.First {
		if r < 0 || r >= rows || seen[r] {
			errs = append(errs, fmt.Errorf("first candidate %d is out of [0, %d) or repeated", r, rows))
			break
		}
		seen[r] = true
	}
	if p.Out == nil || p.Out.Len() != 0 {
		errs = append(errs, errors.New("need an empty OUT (Out)"))
	}
	if !(p.Margin >= 1) || math.IsInf(p.Margin, 0) {
		errs = append(errs, fmt.Errorf("need a finite margin >= 1, got %v", p.Margin))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid parameters: %w", errors.Join(errs...))
	}
	return nil
}

// topByKey is the last level of the top-m selection: of the (key, index) pairs that the device
// levels left (key < 0 = inactive; any order), the indices of the m best by key descending,
// index ascending, and their keys.
func topByKey(keys []float64, idx []int32, m int) ([]int, []float64) {
	type pair struct {
		key float64
		idx int32
	}
	var ps []pair
	for i, k := range keys {
		if k >= 0 {
			ps = append(ps, pair{k, idx[i]})
		}
	}
	slices.SortFunc(ps, func(a, b pair) int {
		if c := cmp.Compare(b.key, a.key); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	ps = ps[:min(m, len(ps))]
	out, outKeys := make([]int, len(ps)), make([]float64, len(ps))
	for i, p := range ps {
		out[i], outKeys[i] = int(p.idx), p.key
	}
	return out, outKeys
}

// finish builds the result from the candidates' exact weights (solvingset's run, final part).
func finish(weights []Outlier, out TopWeights, n int, sset []int, iter int) (SolvingSetResult, error) {
	if out.Len() < n {
		return SolvingSetResult{}, fmt.Errorf("internal error: %d weights for n=%d", out.Len(), n)
	}
	wstar := out.Min()
	var outliers []Outlier
	for _, o := range weights {
		if o.Weight >= wstar {
			outliers = append(outliers, o)
		}
	}
	slices.SortFunc(outliers, func(a, b Outlier) int {
		if c := cmp.Compare(b.Weight, a.Weight); c != 0 {
			return c
		}
		return cmp.Compare(a.Row, b.Row)
	})
	return SolvingSetResult{Outliers: outliers, WStar: wstar, SolvingSet: sset, Iterations: iter}, nil
}
