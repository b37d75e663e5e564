package detect

import (
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// A warming column's value from the record's neighbours (coldmean27; docs/BENCHMARKS.md §12.65).
//
// A rolling column (ingest.derive's mean, std or robust_z) whose window is still filling says nothing yet
// about its series, so the global model does not read it (warmup.go). warm26 scored it at the
// model's centre, the window's median of the column. For a column that follows the record's
// other columns that is a combination no record of the window has: a fleet of sensors whose
// baselines differ holds each record's rolling mean at its own raw value's level, and a warming
// record with its raw value at its key's baseline and its mean at the fleet's median is far from
// every record of the window (1,049-1,333 of 40,000 clean rows flagged during a fleet's cold
// start, §12.62). Now the value the model reads is the column's mean over the imputeK records of
// the model's sample R (Ranker.Ref, the distance score's reference: a uniform sample of the
// window by record identity) nearest to the record in its columns that are not warming, in the
// distance score's standardised units (each column by the window's median and winsorised sd).
// A column the other columns predict (a mean beside its raw value) gets its conditional level; a
// column they do not (a std beside the raw values) gets about the column's mean, within about
// 1/sqrt(imputeK) of its spread of warm26's median. A record whose every column is warming has
// nothing to condition on and is scored at the centre, as before.
//
// The value is made on the host before the batch is mapped to the normalised and distance
// spaces or sent to a device, as warm26's centre was: every detector and device scores the same
// numbers, and the kernels are unchanged. The explanation still reads a warming column at the
// median (centredColumns): a value the model made up is never named as a record's reason. The
// keys' models keep the centre of the key's model (warmCells.centre): a key's records share its
// level, so its centre is already the conditional one.
//
// Cost: a warming record's imputation is one pass over R (score.sample records, 2,048 by
// default) in its columns that are not warming, about what its distance score costs on the
// cores; only warming records (a series' first `last` - 1 after its key is first seen) pay it.

// imputeK is how many of R's records, the nearest to a warming record in its other columns,
// give a warming column its value (their mean of it). Fixed a priori, not fitted: small so that
// the neighbours come from the record's own neighbourhood (a fleet of 50 keys puts about 40 of
// R's 2,048 records at each key's level, a fleet of 1,000 keys two: then the nearest keys'),
// large enough that a column unrelated to the others varies by about a third of its spread
// (1/sqrt(10)) around its mean.
const imputeK = 10

// imputeGrain is the fewest warming records a goroutine imputes (each a pass over R).
const imputeGrain = 64

// warmingCols are b's columns' warming arrays (nil where the column has no warming record),
// nil when no column has one.
func warmingCols(b *batch.Batch, d int) []*array.Float32 {
	var w []*array.Float32
	for j := range d {
		if a := b.Warming(j); a != nil {
			if w == nil {
				w = make([]*array.Float32, d)
			}
			w[j] = a
		}
	}
	return w
}

// unreadCells are the values of a batch a model does not read: its warming values (a column's
// array null there: warmingCols) and, on every row, the cyclic columns the model's window did
// not span (all: Stage.unreadCycles, cycles.go).
type unreadCells struct {
	warm []*array.Float32 // per column, nil where none (nil: no column has one)
	all  []bool           // per column (nil: none)
}

// at reports whether column j of the batch's row i is not read.
func (u unreadCells) at(j, i int) bool {
	return u.all != nil && u.all[j] || u.warm != nil && u.warm[j] != nil && u.warm[j].IsNull(i)
}

// column reports whether some row of column j may not be read.
func (u unreadCells) column(j int) bool {
	return u.all != nil && u.all[j] || u.warm != nil && u.warm[j] != nil
}

// row reports whether some column of the batch's row i is not read.
func (u unreadCells) row(i int) bool {
	if u.all != nil {
		return true
	}
	for _, a := range u.warm {
		if a != nil && a.IsNull(i) {
			return true
		}
	}
	return false
}

// imputedColumns is means (the rows of b that rows names, all where nil) with each value the
// model does not read (unreadCells: a warming value; on every row, the cyclic columns of unread,
// Stage.unreadCycles) replaced by its imputation from the nearest records of m's sample R in
// the record's other columns (the file's comment), or by the model's centre where the record
// has no other column or m has no sample R. Columns without such a value are means' own
// slices; the others copies (the batch's buffer, which the sink writes, keeps the derived value).
//
// A model without a Ranker (no sample R, no centre) leaves warming values as they are, and
// explanations too (centredColumns). No such model serves a stream with a warming column (derive28,
// the closing note's "an old model without a Ranker scores warming values raw", checked): every
// build makes a Ranker (rankDetector, or the build fails) and a snapshot without one is refused
// by Fits (rankerFits: the state_dir's); the one way in is a scorer installing a publication of
// a builder released before the ranking scores (2026-11-23; InstallModel checks the features,
// not the parameters), whose configuration could not hold ingest.derive (2026-11-26), so its
// model's features are its ingest.features alone, and a deriving scorer's features add the
// derived columns: the follower refuses it ("built for features ...", pipeline/modeltopic.go's
// usable), short of input fields named as the scorer's derived columns.
func imputedColumns(m *Model, b *batch.Batch, means [][]float32, rows []int, unread []bool) [][]float32 {
	if m == nil || m.Ranker == nil || len(m.Ranker.Center) != len(means) || len(means) == 0 {
		return means
	}
	u := unreadCells{warm: warmingCols(b, len(means)), all: unread}
	if u.warm == nil && u.all == nil {
		return means
	}
	r := m.Ranker
	out := slices.Clone(means)
	for j := range out {
		if u.column(j) {
			out[j] = slices.Clone(means[j])
		}
	}
	n := len(means[0])
	var todo []int // the rows (of means) with a value not read
	for t := range n {
		if u.row(batchRow(rows, t)) {
			todo = append(todo, t)
		}
	}
	ref := r.standardisedRef()
	onChunks(len(todo), max(1, min(runtime.GOMAXPROCS(0), len(todo)/imputeGrain)), func(lo, hi int) {
		im := newImputer(r, ref, len(means))
		for _, t := range todo[lo:hi] {
			im.impute(out, u, t, batchRow(rows, t))
		}
	})
	return out
}

// batchRow is the batch's row of means' row t (rows nil: t itself).
func batchRow(rows []int, t int) int {
	if rows == nil {
		return t
	}
	return rows[t]
}

// imputer is one goroutine's scratch for imputing records' warming values.
type imputer struct {
	r     *Ranker
	ref   [][]float32 // R in the standardised space (nil: none, every warming value at the centre)
	obs   []int       // the record's columns not warming
	z     []float64   // the record's standardised coordinates (of obs)
	dist  []float64   // each record of R's squared distance in obs
	best  []int       // R's nearest records, nearest first
	bestD []float64   // their squared distances in obs
	// unread is a key's record's mask of the pairs its model does not read (warmCells.centre:
	// the keys' pool's scratch; unused by imputedColumns).
	unread []bool
}

func newImputer(r *Ranker, ref [][]float32, d int) *imputer {
	return new(imputer).reset(r, ref, d)
}

// reset makes im the scratch of imputations against r (R standardised: ref) in d columns,
// reusing its buffers (the keys' pass: keyImputers).
func (im *imputer) reset(r *Ranker, ref [][]float32, d int) *imputer {
	m := 0
	if len(ref) > 0 {
		m = len(ref[0])
	}
	im.r, im.ref = r, ref
	im.obs, im.best, im.bestD = slices.Grow(im.obs[:0], d), slices.Grow(im.best[:0], imputeK), slices.Grow(im.bestD[:0], imputeK)
	im.z, im.dist = resized(im.z, d), resized(im.dist, m)
	return im
}

// resized is s with length n, its array reused where it holds n.
func resized(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

// keyImputers are the keys' pass's imputation scratch (warmCells.centre: its workers').
var keyImputers = sync.Pool{New: func() any { return new(imputer) }}

// impute sets out's row t (the batch's row i) values not read (u) to their imputation.
func (im *imputer) impute(out [][]float32, u unreadCells, t, i int) {
	r := im.r
	im.obs = im.obs[:0]
	for j := range out {
		if !u.at(j, i) {
			im.obs = append(im.obs, j)
		}
	}
	m := 0
	if len(im.ref) > 0 {
		m = len(im.ref[0])
	}
	if len(im.obs) == 0 || m == 0 { // (nothing to condition on: the centre)
		for j := range out {
			if u.at(j, i) {
				out[j][t] = float32(r.Center[j])
			}
		}
		return
	}
	for _, j := range im.obs {
		im.z[j] = max(-distanceLimit, min(distanceLimit, (float64(out[j][t])-r.Center[j])/r.Unit[j]))
	}
	k := min(imputeK, m)
	dist := im.dist[:m]
	clear(dist)
	for _, j := range im.obs { // (column by column: R is column-major)
		zj, col := im.z[j], im.ref[j][:m]
		for p, v := range col {
			e := zj - float64(v)
			dist[p] += float64(e * e)
		}
	}
	im.best, im.bestD = im.best[:0], im.bestD[:0]
	for p, s := range dist {
		if len(im.best) == k && !(s < im.bestD[k-1]) { // (ties: the earlier record of R)
			continue
		}
		at := len(im.best)
		if at == k {
			at--
		} else {
			im.best, im.bestD = append(im.best, 0), append(im.bestD, 0)
		}
		for ; at > 0 && s < im.bestD[at-1]; at-- {
			im.best[at], im.bestD[at] = im.best[at-1], im.bestD[at-1]
		}
		im.best[at], im.bestD[at] = p, s
	}
	for j := range out {
		if !u.at(j, i) {
			continue
		}
		var sum float64
		for _, p := range im.best {
			sum += float64(im.ref[j][p])
		}
		v := float32(r.Center[j] + float64(r.Unit[j]*(sum/float64(len(im.best)))))
		if u.all != nil && u.all[j] {
			v = middleHalf(r, j, v)
		}
		out[j][t] = v
	}
}

// middleHalf is v within the middle half of column j of r's window (its tail's quartiles): a
// cyclic column the model does not read (cycles.go) is imputed from the record's neighbours in
// the other columns, and where those follow the time of day (a daily cycle) the neighbours'
// times sit at the window's arc's newest end, the very edge the rule keeps records off: the
// imputed value then weighed in the per-feature tail score and was named in a key's explanation
// (tod.sin +3.16 robust sd on a 5-key daily fleet, tod29c). Within the middle half its tail
// score is about nothing and it is never a deviation worth naming.
func middleHalf(r *Ranker, j int, v float32) float32 {
	if r.Tail == nil || j >= len(r.Tail.Sorted) || len(r.Tail.Sorted[j]) == 0 {
		return v
	}
	s := r.Tail.Sorted[j]
	return min(max(v, s[len(s)/4]), s[(3*len(s))/4])
}

// standardisedRef is R in the standardised space (x - Center) / Unit, column-major: Ref's own
// points in that space; under the whitened space (Whiten, d > 1) W's inverse applied to them
// (a copy); nil without R, or where W is singular (then a warming value is scored at the centre).
func (r *Ranker) standardisedRef() [][]float32 {
	if r.Ref == nil || len(r.Ref.Points) != len(r.Center) {
		return nil
	}
	pts, d := r.Ref.Points, len(r.Center)
	if len(r.Whiten) <= 1 {
		return pts
	}
	inv, ok := inverse(r.Whiten, d)
	if !ok {
		return nil
	}
	m := len(pts[0])
	out := make([][]float32, d)
	for j := range out {
		out[j] = make([]float32, m)
	}
	for p := range m {
		for j := range d {
			var s float64
			for c := range d {
				s += float64(inv[j*d+c] * float64(pts[c][p]))
			}
			out[j][p] = float32(s)
		}
	}
	return out
}

// inverse is the inverse of the d x d row-major matrix a (Gauss-Jordan, partial pivoting), false
// where a pivot is not finite and nonzero.
func inverse(a []float64, d int) ([]float64, bool) {
	w := slices.Clone(a)
	inv := make([]float64, d*d)
	for j := range d {
		inv[j*d+j] = 1
	}
	for c := range d {
		p := c
		for i := c + 1; i < d; i++ {
			if math.Abs(w[i*d+c]) > math.Abs(w[p*d+c]) {
				p = i
			}
		}
		piv := w[p*d+c]
		if piv == 0 || math.IsNaN(piv) || math.IsInf(piv, 0) {
			return nil, false
		}
		if p != c {
			for j := range d {
				w[p*d+j], w[c*d+j] = w[c*d+j], w[p*d+j]
				inv[p*d+j], inv[c*d+j] = inv[c*d+j], inv[p*d+j]
			}
		}
		for j := range d {
			w[c*d+j] /= piv
			inv[c*d+j] /= piv
		}
		for i := range d {
			if f := w[i*d+c]; i != c && f != 0 {
				for j := range d {
					w[i*d+j] -= float64(f * w[c*d+j])
					inv[i*d+j] -= float64(f * inv[c*d+j])
				}
			}
		}
	}
	return inv, true
}
