package proclus

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/outlierd/outlierd/internal/algo/euclid"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
)

// pcgStream is the second PCG word (the first is Params.Seed): "proclus" in ASCII.
const pcgStream = 0x70726f636c7573

// Run clusters column-major cols (cols[j][i] = row i in dimension j; finite values) on the CPU:
// p.Restarts runs, one after the other, each over all cores.
func Run(cols [][]float32, p Params) (*Result, error) {
	return RunEngine(cols, p, NewCPUEngine(cols, 0))
}

// RunEngine runs PROCLUS with the O(rows) passes on eng (over the same cols) and the control flow
// here: the same seed gives the same result on every engine that computes the same integers.
func RunEngine(cols [][]float32, p Params, eng Engine) (*Result, error) {
	dt, err := Prepare(cols)
	if err != nil {
		return nil, err
	}
	return dt.Run(p, eng)
}

// Data is a data set checked (equal lengths, finite values) and scanned for its fixed-point
// scales once, for several runs (the paper's several (k, l) settings on the same data).
type Data struct {
	cols   [][]float32
	rows   int
	scales []float64
}

// errShape is the sentinel of the columns' shape errors (no dimension, columns of unequal
// lengths), which microcluster.CheckColumns, the check of every algorithm over column-major
// data, reports.
var errShape = errors.New("proclus: inconsistent shapes")

// Prepare checks column-major cols (cols[j][i]) and computes their scales (one parallel pass, a
// goroutine per dimension). The columns are referenced, not copied: they must not change.
func Prepare(cols [][]float32) (*Data, error) {
	n, err := microcluster.CheckColumns(cols, nil, errShape)
	if err != nil {
		return nil, err
	}
	maxAbs, bad := columnMax(cols)
	for j, i := range bad {
		if i >= 0 {
			return nil, fmt.Errorf("proclus: row %d dimension %d is %v: data must be finite", i, j, cols[j][i])
		}
	}
	sc := make([]float64, len(cols))
	for j, m := range maxAbs {
		sc[j] = scaleFor(m, n)
	}
	return &Data{cols: cols, rows: n, scales: sc}, nil
}

// Rows is the number of rows.
func (dt *Data) Rows() int { return dt.rows }

// RunOnce is one run of PROCLUS from p.Seed (p.Restarts is not used) on eng, an engine over the
// same columns: the result has Restart 0, Seed p.Seed and no RestartCosts (Run, which compares
// the restarts, fills them).
func (dt *Data) RunOnce(p Params, eng Engine) (*Result, error) {
	cols, n := dt.cols, dt.rows
	p.Restarts = 1
	if err := p.Validate(n, len(cols)); err != nil {
		return nil, fmt.Errorf("proclus: %w", err)
	}
	rng := rand.New(rand.NewPCG(p.Seed, pcgStream))
	sample := sampleRows(rng, n, min(p.A*p.K, n))
	cands := greedy(cols, sample, min(p.B*p.K, len(sample)), rng)
	r := &runner{
		cols: cols, n: n, d: len(cols), p: p, eng: eng, rng: rng, cands: cands,
		scales: dt.scales,
		prev:   make([]float32, len(cands)),
		used:   make([]bool, len(cands)),
		hsum:   make([]int64, len(cands)*len(cols)),
		lsize:  make([]int64, len(cands)),
	}
	for s := range r.prev {
		r.prev[s] = -1 // no locality yet: the first band starts below the medoid's own distance 0
	}
	if err := eng.Begin(r.scales, len(cands)); err != nil {
		return nil, fmt.Errorf("proclus: %w", err)
	}
	res, err := r.run()
	if err != nil {
		return nil, err
	}
	res.Seed = p.Seed
	return res, nil
}

// runner is one run's host state. Per candidate slot s (FAST-PROCLUS): prev[s] is the squared
// radius δ'² of its last locality (-1: none), hsum[s*d+j] = H_{s,j} in fixed point and lsize[s] =
// |L_s|, kept between the candidate's uses and updated by the change only (theorem 3.2).
type runner struct {
	cols   [][]float32
	n, d   int
	p      Params
	eng    Engine
	rng    *rand.Rand
	cands  []int // candidate medoid rows (M)
	scales []float64
	prev   []float32
	used   []bool
	hsum   []int64
	lsize  []int64
}

// round is the outcome of one iteration (or the refinement's assignment).
type round struct {
	dims   [][]int
	counts []int64
	cost   float64
}

func (r *runner) run() (*Result, error) {
	k := r.p.K
	// The first medoids: k distinct candidates at random.
	perm := make([]int, len(r.cands))
	for i := range perm {
		perm[i] = i
	}
	for i := range k {
		j := i + r.rng.IntN(len(perm)-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	cur := slices.Clone(perm[:k])

	var best []int
	var bestRound round
	var bad []int
	costBest := math.Inf(1)
	iterations := 0
	for itr := 0; itr < r.p.ItrPat; {
		rd, err := r.iterate(cur)
		if err != nil {
			return nil, err
		}
		iterations++
		itr++
		if rd.cost < costBest {
			itr, costBest, best, bestRound = 0, rd.cost, slices.Clone(cur), rd
			if err := r.eng.KeepBest(); err != nil {
				return nil, fmt.Errorf("proclus: %w", err)
			}
			bad = r.badMedoids(rd.counts)
		}
		cur = r.replace(best, bad)
	}
	res, err := r.refine(best, bestRound)
	if err != nil {
		return nil, err
	}
	res.BestCost, res.Iterations = costBest, iterations
	return res, nil
}

// centers returns the coordinates of the medoids (candidate slots).
func (r *runner) centers(slots []int) [][]float32 {
	out := make([][]float32, len(slots))
	for i, s := range slots {
		out[i] = rowOf(r.cols, r.cands[s])
	}
	return out
}

func rowOf(cols [][]float32, row int) []float32 {
	x := make([]float32, len(cols))
	for j, c := range cols {
		x[j] = c[row]
	}
	return x
}

// iterate is one round of the iterative phase with medoids cur (candidate slots).
func (r *runner) iterate(cur []int) (round, error) {
	k, d := len(cur), r.d
	ctr := r.centers(cur)
	// ComputeL: δ_i² to the nearest other medoid, then only the change of each locality.
	var qs []Query
	var qslot []int
	var qsign []int64
	for i, s := range cur {
		delta := float32(math.Inf(1)) // k = 1: the locality is every row
		for j, t := range cur {
			if j != i {
				delta = min(delta, euclid.Squared(r.cols, r.cands[t], ctr[i]))
			}
		}
		if delta == r.prev[s] {
			continue
		}
		q := Query{Slot: s, Fresh: !r.used[s], Medoid: ctr[i], Lo: r.prev[s], Hi: delta}
		sign := int64(1)
		if delta < r.prev[s] {
			q.Lo, q.Hi, sign = delta, r.prev[s], -1
		}
		qs, qslot, qsign = append(qs, q), append(qslot, s), append(qsign, sign)
		r.prev[s] = delta
	}
	if len(qs) > 0 {
		sums, counts := make([]int64, len(qs)*d), make([]int64, len(qs))
		if err := r.eng.Locality(qs, sums, counts); err != nil {
			return round{}, fmt.Errorf("proclus: localities: %w", err)
		}
		for q, s := range qslot {
			r.used[s] = true
			r.lsize[s] += qsign[q] * counts[q]
			for j := range d {
				r.hsum[s*d+j] += qsign[q] * sums[q*d+j]
			}
		}
	}
	// FindDimensions from X_ij = H_ij / |L_i|.
	X := make([][]float64, k)
	for i, s := range cur {
		X[i] = make([]float64, d)
		if r.lsize[s] > 0 {
			for j := range d {
				X[i][j] = Unfixed(r.hsum[s*d+j], r.scales[j]) / float64(r.lsize[s])
			}
		}
	}
	dims := FindDimensions(X, r.p.L)
	counts, cost, err := r.assignAndCost(ctr, dims, nil)
	if err != nil {
		return round{}, err
	}
	return round{dims: dims, counts: counts, cost: cost}, nil
}

// flatten lists the (cluster, dimension) pairs: cluster i's dimensions are dims[off[i]:off[i+1]].
func flatten(dims [][]int) (off, flat []int) {
	off = make([]int, len(dims)+1)
	for i, ds := range dims {
		flat = append(flat, ds...)
		off[i+1] = len(flat)
	}
	return off, flat
}

// assignAndCost assigns every row (AssignPoints; outliers when radius != nil) and evaluates the
// clusters (EvaluateClusters, equation 2): the mean over the clustered rows of the segmental
// distance to the cluster's centroid in its subspace. An empty cluster adds nothing.
func (r *runner) assignAndCost(ctr [][]float32, dims [][]int, radius []float64) ([]int64, float64, error) {
	off, flat := flatten(dims)
	k := len(dims)
	counts, sums := make([]int64, k), make([]int64, len(flat))
	if err := r.eng.Assign(ctr, off, flat, radius, counts, sums); err != nil {
		return nil, 0, fmt.Errorf("proclus: assignment: %w", err)
	}
	mu := make([]float64, len(flat))
	for i := range k {
		if counts[i] == 0 {
			continue
		}
		for t := off[i]; t < off[i+1]; t++ {
			mu[t] = Unfixed(sums[t], r.scales[flat[t]]) / float64(counts[i])
		}
	}
	spread := make([]int64, len(flat))
	if err := r.eng.Spread(mu, off, flat, spread); err != nil {
		return nil, 0, fmt.Errorf("proclus: cluster spread: %w", err)
	}
	cost, clustered := 0.0, int64(0)
	for i := range k {
		if counts[i] == 0 {
			continue
		}
		w := 0.0
		for t := off[i]; t < off[i+1]; t++ {
			w += Unfixed(spread[t], r.scales[flat[t]]) / float64(counts[i])
		}
		w /= float64(off[i+1] - off[i])
		cost += float64(float64(counts[i]) * w)
		clustered += counts[i]
	}
	if clustered > 0 {
		cost /= float64(clustered)
	}
	return counts, cost, nil
}

// badMedoids returns the clusters with fewer than rows/k*MinDev rows, or else the smallest one
// (ties to the lowest index).
func (r *runner) badMedoids(counts []int64) []int {
	thr := float64(r.n) / float64(r.p.K) * r.p.MinDev
	var bad []int
	small := 0
	for i, c := range counts {
		if float64(c) < thr {
			bad = append(bad, i)
		}
		if c < counts[small] {
			small = i
		}
	}
	if len(bad) == 0 {
		bad = []int{small}
	}
	return bad
}

// replace returns best with each bad medoid (in index order) replaced by a random candidate not
// among the medoids; when every candidate is in use the medoid stays.
func (r *runner) replace(best, bad []int) []int {
	next := slices.Clone(best)
	in := make([]bool, len(r.cands))
	for _, s := range next {
		in[s] = true
	}
	var avail []int
	for s, u := range in {
		if !u {
			avail = append(avail, s)
		}
	}
	for _, i := range bad {
		if len(avail) == 0 {
			break
		}
		t := r.rng.IntN(len(avail))
		next[i] = avail[t]
		avail = slices.Delete(avail, t, t+1)
	}
	return next
}

// refine is the refinement phase: dimensions from the best clusters (L = C_best, average
// distances to the medoid), reassignment in them, and the outliers outside every sphere Δ_i.
func (r *runner) refine(best []int, br round) (*Result, error) {
	k, d := len(best), r.d
	ctr := r.centers(best)
	if err := r.eng.UseBest(); err != nil {
		return nil, fmt.Errorf("proclus: %w", err)
	}
	all := make([][]int, k)
	center := make([]float64, 0, k*d)
	for i := range all {
		all[i] = make([]int, d)
		for j := range d {
			all[i][j] = j
			center = append(center, float64(ctr[i][j]))
		}
	}
	off, flat := flatten(all)
	sums := make([]int64, len(flat))
	if err := r.eng.Spread(center, off, flat, sums); err != nil {
		return nil, fmt.Errorf("proclus: refinement spread: %w", err)
	}
	// An empty best cluster has X = 0 (its locality is the medoid alone).
	X := make([][]float64, k)
	for i := range k {
		X[i] = make([]float64, d)
		if c := br.counts[i]; c > 0 {
			for j := range d {
				X[i][j] = Unfixed(sums[i*d+j], r.scales[j]) / float64(c)
			}
		}
	}
	dims := FindDimensions(X, r.p.L)
	radius := make([]float64, k)
	for i := range k {
		radius[i] = math.Inf(1)
		for j := range k {
			if j != i {
				radius[i] = min(radius[i], Segmental(ctr[j], ctr[i], dims[i]))
			}
		}
	}
	// The restarts' criterion first: equation 2 with every row in its nearest cluster. Cost
	// (below) leaves the outliers out, so it rewards a run that misses a cluster and sets its
	// rows aside as outliers; this one charges them.
	_, full, err := r.assignAndCost(ctr, dims, nil)
	if err != nil {
		return nil, err
	}
	counts, cost, err := r.assignAndCost(ctr, dims, radius)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Medoids: make([]int, k), Dims: dims, Centers: ctr, Radius: radius,
		Assignment: make([]int32, r.n), Sizes: make([]int, k), Cost: cost, FullCost: full,
	}
	clustered := 0
	for i, s := range best {
		res.Medoids[i] = r.cands[s]
		res.Sizes[i] = int(counts[i])
		clustered += int(counts[i])
	}
	res.Outliers = r.n - clustered
	if err := r.eng.Assignment(res.Assignment); err != nil {
		return nil, fmt.Errorf("proclus: %w", err)
	}
	return res, nil
}

// FindDimensions picks the subspaces from the average distances X (k x d): per medoid i, Y_i =
// mean_j X_ij, σ_i = sqrt(Σ_j (X_ij - Y_i)² / (d-1)) (algorithm 4; the printed formula without
// the square is wrong), Z_ij = (X_ij - Y_i)/σ_i (0 when σ_i = 0 or d = 1: no dimension stands
// out); each medoid takes its 2 lowest Z (1 when d = 1), then the lowest remaining Z of all
// medoids fill up to k*l in all. Ties go to the lowest medoid, then the lowest dimension. Each
// subspace is returned ascending.
func FindDimensions(X [][]float64, l int) [][]int {
	k := len(X)
	d := len(X[0])
	type zc struct {
		z    float64
		i, j int
	}
	less := func(a, b zc) int {
		return cmp.Or(cmp.Compare(a.z, b.z), cmp.Compare(a.i, b.i), cmp.Compare(a.j, b.j))
	}
	per := min(2, d)
	total := min(max(k*l, k*per), k*d)
	dims := make([][]int, k)
	var rest []zc
	for i, x := range X {
		y := 0.0
		for _, v := range x {
			y += v
		}
		y /= float64(d)
		sigma := 0.0
		if d > 1 {
			for _, v := range x {
				sigma += float64((v - y) * (v - y))
			}
			sigma = math.Sqrt(sigma / float64(d-1))
		}
		zs := make([]zc, d)
		for j, v := range x {
			zs[j] = zc{0, i, j}
			if sigma > 0 {
				zs[j].z = (v - y) / sigma
			}
		}
		slices.SortFunc(zs, less)
		for _, z := range zs[:per] {
			dims[i] = append(dims[i], z.j)
		}
		rest = append(rest, zs[per:]...)
	}
	slices.SortFunc(rest, less)
	for _, z := range rest[:total-k*per] {
		dims[z.i] = append(dims[z.i], z.j)
	}
	for i := range dims {
		slices.Sort(dims[i])
	}
	return dims
}

// sampleRows draws m distinct rows of n uniformly (a partial Fisher-Yates shuffle over a sparse
// map: O(m)), returned ascending so that ties later go to the lowest row.
func sampleRows(rng *rand.Rand, n, m int) []int {
	out := make([]int, m)
	if m >= n {
		for i := range out {
			out[i] = i
		}
		return out
	}
	swapped := make(map[int]int, 2*m)
	at := func(i int) int {
		if v, ok := swapped[i]; ok {
			return v
		}
		return i
	}
	for i := range m {
		j := i + rng.IntN(n-i)
		vi, vj := at(i), at(j)
		out[i] = vj
		swapped[j] = vi
	}
	slices.Sort(out)
	return out
}

// greedy picks m candidate medoids from sample farthest-first: a random first one, then each time
// the sample row whose squared distance to the nearest picked candidate is largest (ties to the
// lowest row). It returns their rows in pick order. The sample is gathered row-major first (the
// rows are scattered over the columns); the distances are euclid.Squared's sequence.
func greedy(cols [][]float32, sample []int, m int, rng *rand.Rand) []int {
	d := len(cols)
	pts := make([]float32, len(sample)*d)
	for s, row := range sample {
		for j, c := range cols {
			pts[s*d+j] = c[row]
		}
	}
	first := rng.IntN(len(sample))
	dist := make([]float32, len(sample))
	for s := range dist {
		dist[s] = float32(math.Inf(1))
	}
	picked := make([]bool, len(sample))
	out := []int{sample[first]}
	picked[first] = true
	last := first
	for len(out) < m {
		c := pts[last*d : last*d+d]
		next, far := -1, float32(-1)
		for s := range sample {
			if picked[s] {
				continue
			}
			x := pts[s*d : s*d+d]
			var acc float32
			for j, v := range x {
				t := v - c[j]
				acc += float32(t * t)
			}
			dist[s] = min(dist[s], acc)
			if dist[s] > far {
				next, far = s, dist[s]
			}
		}
		picked[next] = true
		out = append(out, sample[next])
		last = next
	}
	return out
}
