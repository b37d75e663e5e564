package detect

import (
	"fmt"
	"math"
	"slices"

	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/sealed"
)

// snapFlagRanker marks a snapshot that carries the model's ranking part (calibrate.go),
// written after the PROCLUS subspaces:
//
//	score.detectors (text), score.combine (text), score.sample u32, score.k u32,
//	tail: dims x { count u64, count x f32 (ascending) }, dims x spread f64,
//	distance space: dims x centre f64, dims x unit f64,
//	sample R: rows u64, k u32, dims x rows f32,
//	3 calibrations (density, distance, combined): { count u64, count x f64 (ascending), slope f64 },
//	with the weights (snapFlagWeights; a key's model from format 2): score.weights (text),
//	density weight f64, distance weight f64
//
// A ranking part without the weights (written before them) was built with equal weights and
// is read as such (score.weights equal, 0.5 each), so that it scores as it did, and serves any
// score.weights until the next build (rankerFits: an upgrade keeps serving the model it had).
// A snapshot without it (written before the ranking scores existed) is refused by Fits as
// built with other parameters, so the stage builds a model afresh.
const snapFlagRanker = 8

// snapFlagWeights marks a ranking part that ends with the detectors' weights (below); one
// without them was built with equal weights.
const snapFlagWeights = 16

// snapFlagWhiten marks a global model's ranking part followed by its whitening (encodeWhiten;
// detect.distance_space: whitened). A file without it is the standardised space's, as every
// file written before it; a reader before it refuses the file (unknown flags).
const snapFlagWhiten = 32

// snapFlagSpan marks a model whose window's event-time span (Model.WindowSpan: milliseconds,
// u64) ends the payload, after the ranking part and its whitening: written only where it is
// set (a stream with cyclic time columns, cycles.go), so every other model's file is as before.
// A reader before it refuses the file (unknown flags); a file without it reads as a span of 0
// (the cyclic columns unread until the next build).
const snapFlagSpan = 64

func encodeRanker(e *sealed.Encoder, r *Ranker, weights bool) {
	e.Text(string(r.Params.Detectors))
	e.Text(string(r.Params.Combine))
	e.U32(uint32(r.Params.Sample))
	e.U32(uint32(r.Params.K))
	for _, s := range r.Tail.Sorted {
		e.U64(uint64(len(s)))
		e.F32s(s)
	}
	e.F64s(r.Tail.Spread)
	e.F64s(r.Center)
	e.F64s(r.Unit)
	e.U64(uint64(len(r.Ref.Points[0])))
	e.U32(uint32(r.Ref.K))
	for _, c := range r.Ref.Points {
		e.F32s(c)
	}
	for _, c := range []rank.Calibration{r.Density, r.Distance, {Sorted: r.Combined()}} {
		e.U64(uint64(len(c.Sorted)))
		e.F64s(c.Sorted)
		e.F64(c.Slope)
	}
	if weights {
		e.Text(string(r.Params.Weights))
		e.F64(r.DensityWeight)
		e.F64(r.DistanceWeight)
	}
}

// decodeRanker reads what encodeRanker wrote for a model of these features and checks it;
// weighted says whether the weights follow the calibrations (see above).
func decodeRanker(d *sealed.Decoder, features []string, weighted bool) (*Ranker, error) {
	dims := len(features)
	r := &Ranker{}
	sorted, pts := modelHeaders(dims) // (as a key's build lays them out)
	r.Params.Detectors = ScoreDetectors(d.Text(64, "score.detectors"))
	r.Params.Combine = ScoreCombine(d.Text(64, "score.combine"))
	r.Params.Sample = int(d.U32("score.sample"))
	r.Params.K = int(d.U32("score.k"))
	for j := range dims {
		sorted[j] = d.F32s(d.U64("tail count"), "tail values")
	}
	spread := d.F64s(uint64(dims), "tail spreads")
	r.Center = d.F64s(uint64(dims), "distance centres")
	r.Unit = d.F64s(uint64(dims), "distance units")
	rows, k := d.U64("sample rows"), int(d.U32("sample k"))
	for j := range dims {
		pts[j] = d.F32s(rows, "sample values")
	}
	var cals [3]rank.Calibration
	for i := range cals {
		cals[i].Sorted = d.F64s(d.U64("calibration count"), "calibration scores")
		cals[i].Slope = math.Float64frombits(d.U64("calibration slope"))
	}
	r.Params.Weights, r.DensityWeight, r.DistanceWeight, r.beforeWeights = WeightsEqual, 0.5, 0.5, !weighted
	if weighted {
		r.Params.Weights = ScoreWeights(d.Text(64, "score.weights"))
		r.DensityWeight = math.Float64frombits(d.U64("density weight"))
		r.DistanceWeight = math.Float64frombits(d.U64("distance weight"))
	}
	if d.Err() != nil {
		return nil, sealedErr(d.Err())
	}
	// The calibrations' slopes and knees below search them as sorted: scores out of order (no
	// build's, but anyone's who can write to the model topic) would index past their end.
	for i := range cals {
		if err := checkCalibrationScores(cals[i].Sorted); err != nil {
			return nil, err
		}
	}
	// Laid out as a build lays them (buildRankerOn, buildKeyModel): the tails' values and the
	// sample in one allocation, the float64 arrays in another (below), so that a key read back holds
	// the heap its build did (keyBytes; each array alone rounds up to the allocator's next size).
	packed := pack(append(slices.Clone(sorted), pts...))
	sorted, pts = packed[:dims], packed[dims:]
	// The float64 arrays as a key's build lays them (keyBuild.prepare, finish): the centres,
	// units and spreads, the calibrations, their indexes.
	var m [3]int
	for i := range cals {
		m[i] = rank.IndexLen(len(cals[i].Sorted))
	}
	floats := pack([][]float64{r.Center, r.Unit, spread, cals[0].Sorted, cals[1].Sorted, cals[2].Sorted, make([]float64, m[0]+m[1]+m[2])})
	r.Center, r.Unit, spread = floats[0], floats[1], floats[2]
	for i := range cals {
		cals[i].Sorted = floats[3+i]
	}
	idx := floats[6]
	r.Tail = rank.TailOf(sorted, spread)
	r.Ref = &solvingset.Model{Points: pts, Features: features, K: k, WStar: math.Inf(1)}
	// The slopes are derived from the scores (rank.CalibrationOf): recomputed, so that a model
	// read back scores exactly as the one that was written.
	r.Density = rank.CalibrationIn(cals[0].Sorted, idx[:m[0]:m[0]])
	r.Distance = rank.CalibrationIn(cals[1].Sorted, idx[m[0]:m[0]+m[1]:m[0]+m[1]])
	r.Final = rank.CalibrationIn(cals[2].Sorted, idx[m[0]+m[1]:])
	if err := checkRanker(r); err != nil {
		return nil, err
	}
	return r, nil
}

// checkRanker refuses values no build produces.
func checkRanker(r *Ranker) error {
	switch r.Params.Detectors {
	case "both", ScoreDensity, ScoreDistance:
	default:
		return snapErr("score.detectors %q", r.Params.Detectors)
	}
	if r.Params.Combine != CombineMean && r.Params.Combine != CombineMax {
		return snapErr("score.combine %q", r.Params.Combine)
	}
	if r.Params.Weights != WeightsAgreement && r.Params.Weights != WeightsEqual {
		return snapErr("score.weights %q", r.Params.Weights)
	}
	// (A build's weights: each in [rank.WeightFloor, 1 - rank.WeightFloor], summing to 1 within
	// an ulp.)
	in := func(w float64) bool { return w >= rank.WeightFloor && w <= 1-rank.WeightFloor }
	if wa, wb := r.DensityWeight, r.DistanceWeight; !in(wa) || !in(wb) || math.Abs(wa+wb-1) > 1e-12 {
		return snapErr("detector weights %v, %v", r.DensityWeight, r.DistanceWeight)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	for j, s := range r.Tail.Sorted {
		if len(s) == 0 || !slices.IsSorted(s) || !finite(r.Tail.Spread[j]) || r.Tail.Spread[j] <= 0 {
			return snapErr("tail distribution of feature %d: %d values (sorted %v), spread %v", j, len(s), slices.IsSorted(s), r.Tail.Spread[j])
		}
		for _, v := range s {
			if !finite(float64(v)) {
				return snapErr("tail distribution of feature %d holds %v", j, v)
			}
		}
	}
	for j := range r.Center {
		if !finite(r.Center[j]) || !finite(r.Unit[j]) || r.Unit[j] <= 0 {
			return snapErr("distance space of feature %d: centre %v, unit %v", j, r.Center[j], r.Unit[j])
		}
	}
	rows := len(r.Ref.Points[0])
	if rows < 2 || r.Ref.K < 1 || r.Ref.K >= rows {
		return snapErr("distance sample of %d records with k = %d", rows, r.Ref.K)
	}
	for _, c := range r.Ref.Points {
		for _, v := range c {
			if !finite(float64(v)) {
				return snapErr("distance sample holds %v", v)
			}
		}
	}
	for _, c := range [][]float64{r.Density.Sorted, r.Distance.Sorted, r.Combined()} {
		if err := checkCalibrationScores(c); err != nil {
			return err
		}
	}
	if !finite(r.Density.Slope) || !finite(r.Distance.Slope) || r.Density.Slope < 0 || r.Distance.Slope < 0 {
		return snapErr("calibration slopes %v, %v", r.Density.Slope, r.Distance.Slope)
	}
	return nil
}

// checkCalibrationScores refuses calibration scores that are empty, not ascending or not finite
// (ascending with finite ends: every one finite; slices.IsSorted sees a NaN as out of order).
func checkCalibrationScores(c []float64) error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if len(c) == 0 || !slices.IsSorted(c) || !finite(c[0]) || !finite(c[len(c)-1]) {
		return snapErr("a calibration of %d scores is empty, unsorted or not finite", len(c))
	}
	return nil
}

// rankerFits reports why a model's ranking part does not serve cfg, or nil.
func rankerFits(r *Ranker, cfg Config) error {
	if r == nil {
		return fmt.Errorf("%w: built without the ranking scores (an older snapshot)", ErrSnapshotMismatch)
	}
	p := r.Params
	if r.beforeWeights { // equal weights, written before the setting: serves either until the next build
		p.Weights = cfg.Score.Weights
	}
	if p != cfg.Score {
		return fmt.Errorf("%w: built with score %+v, the configuration has %+v", ErrSnapshotMismatch, r.Params, cfg.Score)
	}
	if space := r.space(); space != cfg.DistanceSpace {
		return fmt.Errorf("%w: built with distance_space %s, the configuration has %s", ErrSnapshotMismatch, space, cfg.DistanceSpace)
	}
	return nil
}

// space is the distance space r was built in (a key's model: standardised).
func (r *Ranker) space() DistanceSpace {
	if r.Whiten != nil {
		return SpaceWhitened
	}
	return SpaceStandardised
}

// encodeWhiten writes a global model's whitening (snapFlagWhiten): count u64, count x f64
// (d x d row-major, or 1 for one feature).
func encodeWhiten(e *sealed.Encoder, r *Ranker) {
	e.U64(uint64(len(r.Whiten)))
	e.F64s(r.Whiten)
}

// decodeWhiten reads what encodeWhiten wrote into r, a ranker of dims features, and checks it.
func decodeWhiten(d *sealed.Decoder, r *Ranker, dims int) error {
	want := uint64(dims * dims)
	if dims == 1 {
		want = 1
	}
	n := d.U64("whitening count")
	if d.Err() == nil && n != want {
		return snapErr("a whitening of %d values for %d features (want %d)", n, dims, want)
	}
	w := d.F64s(want, "whitening")
	if d.Err() != nil {
		return sealedErr(d.Err())
	}
	// W is the inverse root of a covariance (whitening): finite, within whitenMax, symmetric bit
	// for bit (the build mirrors each pair), its diagonal positive. Anything else is no build's,
	// and could map a record to NaN.
	for i, v := range w {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return snapErr("whitening value %d is %v", i, v)
		}
		if math.Abs(v) > whitenMax {
			return snapErr("whitening value %d is %v, beyond %v", i, v, whitenMax)
		}
	}
	for p := range dims {
		if v := w[p*dims+p]; !(v > 0) {
			return snapErr("whitening's diagonal value %d is %v, not positive", p, v)
		}
		for q := p + 1; q < dims; q++ {
			if a, b := w[p*dims+q], w[q*dims+p]; math.Float64bits(a) != math.Float64bits(b) {
				return snapErr("whitening is not symmetric: value (%d, %d) is %v, (%d, %d) %v", p, q, a, q, p, b)
			}
		}
	}
	if dims == 1 && w[0] != 1 {
		return snapErr("a one-feature whitening of %v, not 1", w[0])
	}
	r.Whiten = w
	return nil
}

// pack copies parts into one allocation, each part capped at its own length.
func pack[T any](parts [][]T) [][]T {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	back, out := make([]T, 0, n), make([][]T, len(parts))
	for i, p := range parts {
		lo := len(back)
		back = append(back, p...)
		out[i] = back[lo:len(back):len(back)]
	}
	return out
}
