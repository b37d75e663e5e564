package density

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"

	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/core/fanout"
)

// Mode chooses the subspaces tested (parameters a, b of the paper's algorithm 3).
type Mode int

const (
	// Independent (a = b = 1, the paper's proposal): each single dimension, in a random order per
	// object (drawn from its stream), stopping at the first that flags. O(r q s).
	Independent Mode = iota
	// Rollup is the exhaustive roll-up of Aggarwal and Yu (a = 1, b = r): all 2^r - 1 subspaces,
	// smallest first and lexicographic within a size; a flagged object is not tested further.
	// O((2^r - 1) q s); refused above MaxRollupDims.
	Rollup
	// Restricted roll-up (a = 1, b = 0): the prefixes {1}, {1,2}, ..., {1..r}. O(r(r+1)/2 q s).
	Restricted
	// Averaging (a = b = r): the full space only. O(r q s).
	Averaging
)

// MaxRollupDims is the largest dimensionality exhaustive roll-up accepts: at r = 20 it already
// tests 1,048,575 subspaces per object.
const MaxRollupDims = 20

var modeNames = map[Mode]string{Independent: "independent", Rollup: "rollup", Restricted: "restricted", Averaging: "averaging"}

// String is the mode's name as ParseMode accepts it.
func (m Mode) String() string {
	if s, ok := modeNames[m]; ok {
		return s
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode reads "independent", "rollup" (or "exhaustive", "exhaustive-rollup"), "restricted"
// (or "restricted-rollup") and "averaging" (or "global", "global-averaging"), case-insensitively.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "independent":
		return Independent, nil
	case "rollup", "roll-up", "exhaustive", "exhaustive-rollup":
		return Rollup, nil
	case "restricted", "restricted-rollup":
		return Restricted, nil
	case "averaging", "global", "global-averaging":
		return Averaging, nil
	}
	return 0, fmt.Errorf("density: unknown mode %q (want independent, rollup, restricted or averaging)", s)
}

// Granularity says what the tested objects are.
type Granularity int

const (
	// Cluster tests the q micro-clusters (mean = centroid, sd = sqrt(Delta)); members inherit
	// their cluster's verdict (Inherit). The paper's setting.
	Cluster Granularity = iota
	// Record tests each record with its own mean and uncertainty against the cluster density.
	Record
)

// String is the granularity's name as ParseGranularity accepts it.
func (g Granularity) String() string {
	switch g {
	case Cluster:
		return "cluster"
	case Record:
		return "record"
	}
	return fmt.Sprintf("Granularity(%d)", int(g))
}

// ParseGranularity reads "cluster" or "record".
func ParseGranularity(s string) (Granularity, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "cluster":
		return Cluster, nil
	case "record":
		return Record, nil
	}
	return 0, fmt.Errorf("density: unknown granularity %q (want cluster or record)", s)
}

// Params are the detection parameters.
type Params struct {
	// Eta is the density threshold (default 0.5; densities are per unit of the [0,1] scale).
	Eta float64
	// Delta is the eta-probability below which an object is an outlier (default 0.5).
	Delta float64
	// Samples is s, the samples per object and subspace (default 800). The standard error of an
	// eta-probability is sqrt(p(1-p)/s), 0.018 at p = 0.5, s = 800.
	Samples int
	// Mode chooses the subspaces (default Independent).
	Mode Mode
	// Seed selects the random streams (see rng.go); results are a function of it.
	Seed uint64
	// FirstIndex is the stream index of the first record of a batch (record i uses FirstIndex+i),
	// so that a stream split into batches draws as the whole would. Cluster c uses index c.
	FirstIndex uint64
	// Index, when not nil, is each record's own stream index (record i uses Index[i], and
	// FirstIndex is ignored): the pipeline derives it from the record's identity (topic,
	// partition, offset), so a redelivered record draws the same samples and gets the same
	// verdict whatever batch or process reads it. Records only; len(Index) must be the record count.
	Index []uint64
	// Workers is the number of goroutines (<= 0: GOMAXPROCS). Results do not depend on it.
	Workers int
	// Exact computes 1-D subspaces exactly instead of sampling them (see exact.go): all of mode
	// Independent, the first level of Rollup and the first prefix of Restricted. Much faster, and
	// free of sampling noise; other subspaces are still sampled.
	Exact bool
}

// MaxSamples bounds Params.Samples (and detect.density.samples, density --samples): 1,250
// times the default. The work is linear in it, per object and subspace: an overflow-sized
// value made every detection (every model build) run for ever.
const MaxSamples = 1_000_000

// DefaultParams are the paper's defaults: eta = delta = 0.5, s = 800, independent.
func DefaultParams() Params {
	return Params{Eta: 0.5, Delta: 0.5, Samples: 800, Mode: Independent, Seed: 1}
}

// Validate reports every problem at once.
func (p Params) Validate() error {
	var errs []error
	if !(p.Eta > 0) || math.IsInf(p.Eta, 0) {
		errs = append(errs, fmt.Errorf("eta must be finite and > 0, got %v", p.Eta))
	}
	if !(p.Delta >= 0 && p.Delta <= 1) {
		errs = append(errs, fmt.Errorf("delta must be in [0, 1], got %v", p.Delta))
	}
	if p.Samples < 1 || p.Samples > MaxSamples {
		errs = append(errs, fmt.Errorf("samples must be in [1, %d], got %d", MaxSamples, p.Samples))
	}
	if _, ok := modeNames[p.Mode]; !ok {
		errs = append(errs, fmt.Errorf("unknown mode %d", int(p.Mode)))
	}
	if len(errs) > 0 {
		return fmt.Errorf("density: invalid parameters: %w", errors.Join(errs...))
	}
	return nil
}

// Verdict is the result for one object.
type Verdict struct {
	// Outlier is true if the eta-probability fell below delta in a tested subspace.
	Outlier bool
	// EtaProbability is the lowest eta-probability seen over the tested subspaces (for an outlier
	// in modes that stop at the first flag, that of the flagging subspace or a lower earlier one).
	EtaProbability float64
	// Subspace holds the dimension indices (0-based, increasing) where EtaProbability was seen;
	// nil for an object that was not tested (an empty micro-cluster).
	Subspace []int
}

// checkRollup refuses exhaustive roll-up where it cannot finish.
func (m *Model) checkRollup(p Params, objects int) error {
	if p.Mode != Rollup || m.dims <= MaxRollupDims {
		return nil
	}
	subspaces := math.Ldexp(1, m.dims) - 1
	evals := float64(objects) * float64(p.Samples) * float64(m.k) * float64(m.dims) * math.Ldexp(1, m.dims-1)
	return fmt.Errorf("density: exhaustive roll-up refused for r=%d > %d: %.3g subspaces per object, about %.3g kernel evaluations for %d objects (s=%d, q=%d); use independent, restricted or averaging",
		m.dims, MaxRollupDims, subspaces, evals, objects, p.Samples, m.k)
}

// DetectRecords tests each record (column-major means, and sds = its uncertainty, or nil for
// certain records) against the model and writes out[i]. Deterministic for p.Seed and
// p.FirstIndex whatever p.Workers.
func (m *Model) DetectRecords(means, sds [][]float32, p Params, out []Verdict) error {
	if err := p.Validate(); err != nil {
		return err
	}
	n, err := checkColumns(means, sds)
	if err != nil {
		return err
	}
	if len(means) != m.dims {
		return fmt.Errorf("%w: records have %d dimensions, model %d", ErrShape, len(means), m.dims)
	}
	if len(out) != n {
		return fmt.Errorf("%w: %d verdicts for %d records", ErrShape, len(out), n)
	}
	if p.Index != nil && len(p.Index) != n {
		return fmt.Errorf("%w: %d stream indices for %d records", ErrShape, len(p.Index), n)
	}
	if err := m.checkRollup(p, n); err != nil {
		return err
	}
	var rg []region
	if p.Exact {
		rg = m.regionsFor(p.Eta)
	}
	parallelObjects(n, p.Workers, m.dims, func(i int, d *detector) {
		for j := range m.dims {
			d.x[j] = float64(means[j][i])
			d.psi[j] = 0
			if sds != nil {
				d.psi[j] = float64(sds[j][i])
			}
		}
		index := p.FirstIndex + uint64(i)
		if p.Index != nil {
			index = p.Index[i]
		}
		out[i] = d.detect(m, p, rg, index)
	})
	return nil
}

// DetectClusters tests the q micro-clusters themselves (the paper's setting): cluster c has mean
// = its centroid and sd = sqrt(Delta) and draws from stream index c. The result has q entries;
// an empty cluster (no members, no mass) is not tested: Outlier false, EtaProbability 1, Subspace
// nil. Use Inherit to give members their cluster's verdict.
func (m *Model) DetectClusters(p Params) ([]Verdict, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	q := len(m.clusterN)
	if err := m.checkRollup(p, m.k); err != nil {
		return nil, err
	}
	var rg []region
	if p.Exact {
		rg = m.regionsFor(p.Eta)
	}
	out := make([]Verdict, q)
	parallelObjects(q, p.Workers, m.dims, func(c int, d *detector) {
		if m.clusterN[c] == 0 {
			out[c] = Verdict{EtaProbability: 1}
			return
		}
		for j := range m.dims {
			d.x[j], d.psi[j] = m.clusterMean[j][c], m.clusterSD[j][c]
		}
		out[c] = d.detect(m, p, rg, uint64(c))
	})
	return out, nil
}

// Inherit gives every member its cluster's verdict: out[i] = verdicts[assign[i]] (the Subspace
// slice is shared). assign values outside [0, len(verdicts)) are an error.
func Inherit(verdicts []Verdict, assign []int32, out []Verdict) error {
	if len(out) != len(assign) {
		return fmt.Errorf("%w: %d verdicts for %d members", ErrShape, len(out), len(assign))
	}
	for i, c := range assign {
		if c < 0 || int(c) >= len(verdicts) {
			return fmt.Errorf("density: member %d assigned to cluster %d of %d", i, c, len(verdicts))
		}
		out[i] = verdicts[c]
	}
	return nil
}

// EtaProbability estimates by sampling (the paper's algorithm 1) the eta-probability of an object
// with means x and uncertainties psi (one entry per dimension of the model) in the subspace dims,
// drawing s * len(dims) uniforms from g, sample-major. Most samples are decided by the model's
// density bounds (bounds.go) and the rest computed in full; the result is bit-identical to the
// plain loop's.
func (m *Model) EtaProbability(x, psi []float64, dims []int, eta float64, s int, g *XorShift64Star) float64 {
	if m.noBounds {
		return m.etaProbabilityPlain(x, psi, dims, eta, s, g)
	}
	p, _ := m.etaProbability(x, psi, dims, eta, s, g)
	return p
}

// etaProbability is EtaProbability, also returning how many samples the bounds left open.
func (m *Model) etaProbability(x, psi []float64, dims []int, eta float64, s int, g *XorShift64Star) (float64, int) {
	b := m.Bounds()
	a := float64(len(dims))
	var buf [16]float64
	xs := buf[:0]
	if len(dims) > len(buf) {
		xs = make([]float64, 0, len(dims))
	}
	xs = xs[:len(dims)]
	// The sample succeeds for sure above succeedAt and fails for sure below failAt (boundsSlack
	// covers the rounding of the sums and the division).
	succeedAt, failAt := a*eta*(1+boundsSlack), a*eta*(1-boundsSlack)
	success, open := 0, 0
	for range s {
		var lo, hi float64
		for q, j := range dims {
			u := x[j] + float64(psi[j]*PhiInv(g.Uniform()))
			xs[q] = u
			c := b.Cell(j, u)
			lo += b.Lower[c]
			hi += b.Upper[c]
		}
		switch {
		case lo > succeedAt:
			success++
		case hi < failAt:
		default:
			open++
			var dens float64
			for q, j := range dims {
				dens += m.Density(j, xs[q])
			}
			if dens/a > eta {
				success++
			}
		}
	}
	return float64(success) / float64(s), open
}

// etaProbabilityPlain is the paper's loop without the bounds: the reference the bounds must
// reproduce exactly (tests and benchmarks).
func (m *Model) etaProbabilityPlain(x, psi []float64, dims []int, eta float64, s int, g *XorShift64Star) float64 {
	a := float64(len(dims))
	success := 0
	for range s {
		var dens float64
		for _, j := range dims {
			xs := x[j] + float64(psi[j]*PhiInv(g.Uniform()))
			dens += m.Density(j, xs)
		}
		if dens/a > eta {
			success++
		}
	}
	return float64(success) / float64(s)
}

// EtaProbabilityExact is the exact eta-probability in the 1-D subspace {j} (see exact.go) of an
// object with mean x and uncertainty psi.
func (m *Model) EtaProbabilityExact(j int, x, psi, eta float64) float64 {
	return m.regionsFor(eta)[j].mass(x, psi)
}

// detector is one goroutine's scratch for testing objects.
type detector struct {
	x, psi []float64
	perm   []int
	sub    []int
	one    [1]int
}

// detect runs the mode's subspace search for the object in d.x, d.psi with stream index idx.
func (d *detector) detect(m *Model, p Params, rg []region, idx uint64) Verdict {
	g := ObjectStream(p.Seed, idx)
	best := Verdict{EtaProbability: math.Inf(1)}
	var bestSub []int
	// test evaluates one subspace and reports whether it flags the object.
	test := func(dims []int) bool {
		var pr float64
		if len(dims) == 1 && rg != nil {
			pr = rg[dims[0]].mass(d.x[dims[0]], d.psi[dims[0]])
		} else {
			pr = m.EtaProbability(d.x, d.psi, dims, p.Eta, p.Samples, &g)
		}
		if pr < best.EtaProbability {
			best.EtaProbability = pr
			bestSub = append(bestSub[:0], dims...)
		}
		return pr < p.Delta
	}
	r := m.dims
	switch p.Mode {
	case Independent:
		for j := range r {
			d.perm[j] = j
		}
		for k := r - 1; k >= 1; k-- {
			t := int(g.Bounded(uint64(k + 1)))
			d.perm[k], d.perm[t] = d.perm[t], d.perm[k]
		}
		for _, j := range d.perm {
			d.one[0] = j
			if test(d.one[:]) {
				best.Outlier = true
				break
			}
		}
	case Rollup:
	levels:
		for a := 1; a <= r; a++ {
			sub := d.sub[:a]
			for i := range sub {
				sub[i] = i
			}
			for {
				if test(sub) {
					best.Outlier = true
					break levels
				}
				if !nextCombination(sub, r) {
					break
				}
			}
		}
	case Restricted:
		for a := 1; a <= r; a++ {
			sub := d.sub[:a]
			sub[a-1] = a - 1
			if test(sub) {
				best.Outlier = true
				break
			}
		}
	case Averaging:
		sub := d.sub[:r]
		for i := range sub {
			sub[i] = i
		}
		best.Outlier = test(sub)
	}
	best.Subspace = append([]int(nil), bestSub...)
	return best
}

// nextCombination advances sub (increasing indices in [0, r)) to the next combination of its
// size in lexicographic order; false after the last.
func nextCombination(sub []int, r int) bool {
	a := len(sub)
	i := a - 1
	for i >= 0 && sub[i] == r-a+i {
		i--
	}
	if i < 0 {
		return false
	}
	sub[i]++
	for k := i + 1; k < a; k++ {
		sub[k] = sub[k-1] + 1
	}
	return true
}

// parallelObjects runs fn for objects 0..n-1 on the workers, handing out small blocks (per-object
// cost varies a lot: an early flag stops the search), with a detector's scratch per worker.
func parallelObjects(n, workers, dims int, fn func(i int, d *detector)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	const block = 16
	blocks := (n + block - 1) / block
	scratch := make([]*detector, max(1, min(workers, blocks)))
	fanout.EachWorker(workers, blocks, func(w, b int) {
		d := scratch[w]
		if d == nil {
			d = &detector{x: make([]float64, dims), psi: make([]float64, dims),
				perm: make([]int, dims), sub: make([]int, dims)}
			scratch[w] = d
		}
		for i := b * block; i < min((b+1)*block, n); i++ {
			fn(i, d)
		}
	})
}

// Scoring is one batch of records tested against a model: Model.DetectRecords(Means, SDs, Params,
// Out). Clusters are the micro-clusters the model was made from (density.NewModel), from which a
// device builds its copy of it. It is the unit a device takes in one call with a batch's other
// steps.
type Scoring struct {
	Model      *Model
	Clusters   *microcluster.MicroClusters
	Means, SDs [][]float32
	Params     Params
	Out        []Verdict
}
