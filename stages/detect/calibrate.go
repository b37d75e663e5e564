package detect

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"

	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// The combined score (docs/DESIGN.md, "the combined score").
//
// Each ranking detector gives a raw score, higher = more outlying:
//   - density: the per-feature tail score of package rank (ECOD: the sum over features of
//     -ln of the record's rarer tail probability in the window's own distribution of the feature,
//     the same one-feature-at-a-time view as the density test's mode independent, but summed
//     over the features instead of the minimum of 1-D tests);
//   - distance: w_k(q, R), the sum of the distances to the k nearest records of R, a uniform
//     sample of the window chosen by record identity (sample.go; score.sample records, in a standardised space of its own:
//     the model's normalisation for the paper's detectors does not change it); unlike
//     w_k(q, S) (the solving set: a verdict, exact only above w*) it ranks every record.
//
// A model calibrates each detector against its own window: calibration records (a uniform
// sample of the window, scored as members, i.e. without counting themselves) give the
// distribution of the raw score, and a record's calibrated score is -log10 of its tail
// probability there (rank.Calibration). The combined score is the mean of the calibrated
// scores of the detectors in score.detectors (score.combine: max, the larger): 2 means "as
// rare as the top 1% of the window, on average over the detectors". The mean is weighted per
// model (score.weights: agreement): the calibration records' raw scores give each detector a
// weight by how well the other confirms its top records, where the two rank the window alike
// (rank.AgreementWeights); equal weights with one feature, where both read the same coordinate
// and neither sees what the other misses. The alarm threshold is the (1 - alarm_rate) quantile of
// the calibration records' own combined scores, so flag_by: rate flags about alarm_rate of
// the records of a stream like the window, whatever the data's units.

// Score names, as replay's JSON and the benchmark report them.
const (
	ScoreCombined       = "combined"        // batch.Score.Score
	ScoreRecent         = "recent"          // batch.Score.Recent: the combined score among its series' recent ones (recent.go)
	ScoreDensity        = "density"         // the tail score (batch.Score.DensityScore)
	ScoreDistance       = "distance"        // w_k(q, R) to the window sample (batch.Score.DistanceScore)
	ScoreEtaProbability = "eta_probability" // 1 - the paper's lowest eta-probability
	ScoreSolvingSet     = "solving_set"     // w_k(q, S), the solving set's weight
	ScoreHypercube      = "hypercube"       // the hypercube detector's O = 1 - w/w_max (when enabled)
)

// ScoreNames lists every score a scored record carries.
func ScoreNames() []string {
	return []string{ScoreCombined, ScoreRecent, ScoreDensity, ScoreDistance, ScoreEtaProbability, ScoreSolvingSet, ScoreHypercube}
}

// DetectorScore returns score name of s (higher = more outlying); NaN for an unknown name or a
// detector that did not run.
func DetectorScore(s *batch.Score, name string) float64 {
	switch name {
	case ScoreCombined:
		return s.Score
	case ScoreRecent:
		return s.Recent
	case ScoreDensity:
		return s.DensityScore
	case ScoreDistance:
		return s.DistanceScore
	case ScoreEtaProbability:
		return 1 - s.EtaProbability
	case ScoreSolvingSet:
		return s.Weight
	case ScoreHypercube:
		if s.Hypercube != nil {
			return s.Hypercube.Score
		}
	}
	return math.NaN()
}

func fmtG(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// Ranker is a model's ranking part: the detectors' raw scores, their calibration against the
// window, and the calibration records' combined scores (the alarm threshold's reference).
type Ranker struct {
	// Tail is the density detector's per-feature distributions (raw units).
	Tail *rank.Tail
	// Ref is the window sample R of the distance score with its k, in the distance space:
	// x' = (x - Center[j]) / Unit[j] (standardised features, clamped to ±distanceLimit), times
	// Whiten where it is not nil.
	Ref          *solvingset.Model
	Center, Unit []float64
	// Whiten is the global model's whitening under detect.distance_space: whitened (whiten.go):
	// d x d, row-major, applied to the standardised coordinates ([1] for one feature: the
	// identity, no product taken); nil in the standardised space and in every key's model.
	Whiten []float64
	// Density and Distance calibrate the two raw scores.
	Density, Distance rank.Calibration
	// Final calibrates the calibration records' combined scores before the final calibration
	// (Combined: the mean, or max, of their detectors' calibrated scores, ascending, its
	// Sorted), so that the combined score is -log10 of a tail probability among the window's
	// records, as min_score reads it.
	Final rank.Calibration
	// Params are the score settings the ranker was built with (Params.Detectors: which
	// calibrated scores the combined score averages).
	Params ScoreConfig
	// DensityWeight and DistanceWeight weight the two calibrated scores in the mean (sum 1;
	// 0.5 each unless Params.Weights is agreement: rank.AgreementWeights of the calibration
	// records' raw scores). Part of the model, as its calibrations are: Combined was computed
	// with them.
	DensityWeight, DistanceWeight float64
	// beforeWeights marks a ranker read from a snapshot written before score.weights (built
	// with equal weights): it serves any score.weights until the next build, so that an
	// upgrade's first start keeps the model it had (rankerFits), and is written back so.
	beforeWeights bool
	// fleetShard and fleetRows are a key's model's shard of the fleet's pool plus one (0: not
	// noted) and its rows, what keys.tail: fleet reads at every record (noteKey,
	// keyed_fleet.go). fleetUnscaled marks its features (the first 16) without an interquartile
	// range (rank.Tail.Scaled). In the struct's padding: a model's bytes are the same.
	fleetShard    uint8
	fleetUnscaled uint16
	fleetRows     int32
}

// Combined are the calibration records' combined scores before the final calibration (the
// mean, or max, of their detectors' calibrated scores), ascending: what Final calibrates.
func (r *Ranker) Combined() []float64 { return r.Final.Sorted }

// calibrationRecords is how many window records calibrate the scores: enough that the
// threshold of the alarm rate rests on at least 10 records above it (at 4096 and more).
func calibrationRecords(rows int, alarmRate float64) int {
	c := 4096
	if alarmRate > 0 {
		c = max(c, int(math.Ceil(10/alarmRate)))
	}
	return min(c, rows)
}

// buildRanker builds the ranking part from the window's raw columns (sorted: the same, each
// ascending). Deterministic for a seed, and a function of the window's records whatever their
// order (sample.go).
func buildRanker(cols, sorted [][]float32, features []string, cfg Config) (*Ranker, error) {
	return buildRankerOn(cols, sorted, features, cfg, 0, nil)
}

// buildRankerOn is buildRanker on workers goroutines (0: every core; 1: the caller's alone, as a
// key's build on a worker of its own, keyed_parallel.go, where a 200-record window's k-NN split
// over the cores costs more goroutines than it saves). The same bits for any workers.
// refIn, where not nil, holds the window sample R in the distance space (a column of
// min(score.sample, rows) each; a key's build passes them in its sorted window's allocation).
func buildRankerOn(cols, sorted [][]float32, features []string, cfg Config, workers int, refIn [][]float32) (*Ranker, error) {
	rows := len(cols[0])
	r := &Ranker{Tail: rank.TailOfSorted(sorted), Params: cfg.Score}
	r.Center, r.Unit = standardisationOn(cols, sorted, workers)
	keys := recordKeys(cols, cfg.Seed) // R and the calibration records by identity (sample.go)
	m := min(cfg.Score.Sample, rows)
	k := min(cfg.Score.K, m-1)
	if k < 1 {
		return nil, fmt.Errorf("detect: the distance score needs a window sample of at least 2 records, has %d", m)
	}
	if cfg.DistanceSpace == SpaceWhitened {
		r.Whiten = whitening(cols, sorted, keys, r.Center, r.Unit)
	}
	// Only the picked rows are mapped to the distance space (the map is per value): at W = 1M
	// mapping the whole window was 15% of this build.
	ref := r.distanceSpace(pick(cols, smallestKeys(keys, m, saltSample)), refIn)
	r.Ref = &solvingset.Model{Points: ref, Features: features, K: k, WStar: math.Inf(1)}

	c := calibrationRecords(rows, cfg.AlarmRate)
	calIdx := smallestKeys(keys, c, saltCalibration)
	calRaw := pick(cols, calIdx)
	calNorm := r.distanceSpace(calRaw, nil)
	dens, dist := make([]float64, c), make([]float64, c)
	r.Tail.Score(calRaw, dens)
	solvingset.KNNWeightsMembers(ref, calNorm, k, workers, dist) // members: a record is not its own neighbour
	// The three calibrations in one allocation (each alone rounds up to the allocator's next
	// size: 192 bytes of a key's 1,600-byte calibration).
	cal := make([]float64, 3*c)
	r.Density, r.Distance = rank.NewCalibrationIn(cal[:0:c], dens), rank.NewCalibrationIn(cal[c:c:2*c], dist)
	combined := cal[2*c : 3*c : 3*c]
	r.DensityWeight, r.DistanceWeight = 0.5, 0.5
	if cfg.Score.Weights == WeightsAgreement && cfg.Score.Detectors == DetectorsBoth && cfg.Score.Combine == CombineMean && len(cols) > 1 {
		r.DensityWeight, r.DistanceWeight = rank.AgreementWeights(dens, dist)
	}
	for i := range c {
		combined[i] = r.mean(dens[i], dist[i])
	}
	slices.Sort(combined)
	r.Final = rank.CalibrationOf(combined)
	return r, nil
}

// standardisation is each feature's median and winsorised standard deviation (float64): the
// distance score's space, as k-NN detectors are used in practice (a feature in large units
// would otherwise dominate every distance). The deviation is taken of the values clamped to
// the window's [0.5%, 99.5%] quantiles, so a few extreme records (a FLT_MAX sentinel) do not
// squeeze every other record of their feature to one point; the median centres the clamped
// range (distances do not depend on the centre). A feature without spread gets unit 1.
// sorted holds each column in ascending order (sortedColumns).
func standardisation(cols, sorted [][]float32) (center, unit []float64) {
	return standardisationOn(cols, sorted, 0)
}

// standardisationOn is standardisation, a goroutine per feature unless workers is 1.
func standardisationOn(cols, sorted [][]float32, workers int) (center, unit []float64) {
	center, unit = make([]float64, len(cols)), make([]float64, len(cols))
	each := onWorkers
	if workers == 1 {
		each = func(dims int, f func(j int)) {
			for j := range dims {
				f(j)
			}
		}
	}
	each(len(cols), func(j int) {
		buf := sorted[j]
		center[j], unit[j] = 0, 1
		n := len(buf)
		if n == 0 {
			return
		}
		lo, hi := float64(buf[int(0.005*float64(n-1))]), float64(buf[int(math.Ceil(0.995*float64(n-1)))])
		center[j] = float64(buf[(n-1)/2])
		var mean, m2 float64
		for i, v := range buf { // Welford on the clamped values, sorted: the window order changes no bit
			x := min(max(float64(v), lo), hi)
			d := x - mean
			mean += d / float64(i+1)
			m2 += float64(d * (x - mean))
		}
		if sd := math.Sqrt(m2 / float64(n)); sd > 0 && !math.IsInf(1/sd, 0) {
			unit[j] = sd
		}
	})
	return center, unit
}

// distanceSpace maps raw columns to the distance score's space (into dst, reused when it fits).
func (r *Ranker) distanceSpace(cols, dst [][]float32) [][]float32 {
	if len(dst) != len(cols) {
		dst = make([][]float32, len(cols))
	}
	for j, c := range cols {
		if cap(dst[j]) < len(c) {
			dst[j] = make([]float32, len(c))
		}
		dst[j] = dst[j][:len(c)]
	}
	if len(cols) == 0 {
		return dst
	}
	if len(r.Whiten) > 1 {
		r.whitenedSpace(cols, dst)
		return dst
	}
	onRows(len(cols[0]), func(lo, hi int) { // (a batch's: a division a value, on the stage's goroutine)
		for j, c := range cols {
			for i := lo; i < hi; i++ {
				dst[j][i] = float32(max(-distanceLimit, min(distanceLimit, (float64(c[i])-r.Center[j])/r.Unit[j])))
			}
		}
	})
	return dst
}

// distanceLimit bounds the distance space's coordinates: float32 squared distances of a
// few hundred features stay finite, and a record a million units out is already as far as
// any ranking needs. The keyed kernel and internal/accel's host fallback clamp by the same
// bound, gpukern.KeyedLimit (TestDistanceLimitIsTheKernels).
const distanceLimit = 1e6

// pick returns the rows idx of column-major cols (a copy).
func pick(cols [][]float32, idx []int) [][]float32 {
	out := make([][]float32, len(cols))
	for j, c := range cols {
		out[j] = make([]float32, len(idx))
		for t, i := range idx {
			out[j][t] = c[i]
		}
	}
	return out
}

// combine is the combined score of raw detector scores: their mean (score.detectors,
// score.combine) calibrated against the calibration records' own (Final).
func (r *Ranker) combine(density, distance float64) float64 {
	return r.Final.Surprisal(r.mean(density, distance))
}

// mean is the weighted mean (or max: score.combine) of the calibrated scores of the detectors in
// score.detectors. The conversions keep the products from fusing into one multiply-add, which
// would change the bits with the build's instruction set; with equal weights 0.5a + 0.5b has
// the bits of (a + b)/2 (halving is exact), the mean before the weights.
func (r *Ranker) mean(density, distance float64) float64 {
	switch r.Params.Detectors {
	case DetectorsDensity:
		return r.Density.Surprisal(density)
	case DetectorsDistance:
		return r.Distance.Surprisal(distance)
	}
	return r.meanOf(r.Density.Surprisal(density), r.Distance.Surprisal(distance))
}

// combineFar is combine with the distance's calibration extrapolated beyond its largest score
// as a Pareto tail of index 1 (rank.Calibration.SurprisalFar), not linearly: what Recent ranks
// under detect.recent_far_side: log. The distance is a length (the sum of k distances in the
// standardised space), whose linear extrapolation makes a record far out, that every
// neighbour is far from, gain decades by ordinary noise on its other features; the density's
// raw score is already in nats (a sum of -ln tail probabilities) and the combined mean in
// decades, so their calibrations keep extrapolating linearly. Equal to combine wherever the
// distance does not pass its calibration's largest score (docs/BENCHMARKS.md §12.23).
func (r *Ranker) combineFar(density, distance float64) float64 {
	switch r.Params.Detectors {
	case DetectorsDensity:
		return r.combine(density, distance)
	case DetectorsDistance:
		return r.Final.Surprisal(r.Distance.SurprisalFar(distance))
	}
	return r.Final.Surprisal(r.meanOf(r.Density.Surprisal(density), r.Distance.SurprisalFar(distance)))
}

// farExcess is score (combine's of density and distance) less combineFar's: 0 without a search
// where the distance is within its calibration or score.detectors is density, where combineFar
// is combine bit for bit (rankRecent's per record, on the stage's goroutine: a model that fits
// its series has few records beyond its calibration, and the three calibrations took about 0.24
// µs a record of that goroutine).
func (r *Ranker) farExcess(score, density, distance float64) float64 {
	s := r.Distance.Sorted
	if r.Params.Detectors == DetectorsDensity || len(s) == 0 || !(distance > s[len(s)-1]) {
		return 0
	}
	return score - r.combineFar(density, distance)
}

// meanOf is the weighted mean (or max) of both detectors' calibrated scores.
func (r *Ranker) meanOf(a, b float64) float64 {
	if r.Params.Combine == CombineMax {
		return max(a, b)
	}
	return float64(r.DensityWeight*a) + float64(r.DistanceWeight*b)
}

// Threshold is the combined score above which about rate of the window's records lie: the
// calibration records' combined score of rank floor((1-rate) c); records flag when their
// score exceeds it. A rate below 1/c gives the largest calibration score.
func (r *Ranker) Threshold(rate float64) float64 {
	combined := r.Combined()
	c := len(combined)
	if c == 0 {
		return math.Inf(1)
	}
	above := int(math.Floor(rate * float64(c)))
	return r.Final.Surprisal(combined[max(c-1-above, 0)])
}

// rankDetector is the calibrated ranking as a Detector: its part of a model is the Ranker
// (the tail score's distributions, the window sample of the k-NN distance score, their
// calibration and the alarm threshold's reference); it writes the raw scores, the combined
// score and the threshold of the alarm rate, by which flag_by: rate decides. It reads the raw
// means (its own spaces) and no other detector's fields.
type rankDetector struct {
	accel             Accelerator
	density, distance []float64   // scratch, batch after batch
	space             [][]float32 // the batch in the distance score's space
	chunks            [][]float32 // the tail score's column headers per goroutine (tailScores)
	tailWait          func()      // the tail score started by prescore, nil when none runs
}

// prescore starts the batch's tail score on the cores before the other detectors score, so
// that it runs while their steps run on the GPU (issue 12 item 5); Score waits for it. On the
// CPU nothing starts early: the other detectors' steps take every core themselves.
func (d *rankDetector) prescore(q *Query, n int) {
	d.settle()
	r := q.Model.Ranker
	if d.accel == nil || r == nil {
		return
	}
	if cap(d.density) < n {
		d.density, d.distance = make([]float64, n), make([]float64, n)
	}
	d.tailWait, d.chunks = tailScores(r.Tail, q.Raw, d.density[:n], d.chunks)
}

// settle waits for a tail score that prescore started (one a failed batch left running must
// not write into the next batch's scores).
func (d *rankDetector) settle() {
	if d.tailWait != nil {
		d.tailWait()
		d.tailWait = nil
	}
}

// Build builds the Ranker from the window's raw columns.
func (d *rankDetector) Build(m *Model, w *BuildWindow) error {
	var err error
	m.Ranker, err = buildRanker(w.Raw, w.Sorted, m.Features, *w.Cfg)
	return err
}

// Score writes DensityScore, DistanceScore, Score and Threshold (left as they are, NaN and
// +Inf, for a model without a Ranker). Records of the model's own window (Members, by
// identity) are scored as members: not their own neighbour.
func (d *rankDetector) Score(q *Query, out []batch.Score) error {
	m, n := q.Model, len(out)
	r := m.Ranker
	if r == nil {
		return nil
	}
	if cap(d.distance) < n { // (plan, when it ran, made it: its results are in it)
		d.distance = make([]float64, n)
	}
	if d.tailWait == nil { // not started by prescore: the tail score first, on every core
		if cap(d.density) < n {
			d.density = make([]float64, n)
		}
		var wait func()
		wait, d.chunks = tailScores(r.Tail, q.Raw, d.density[:n], d.chunks)
		wait()
	}
	density, distance := d.density[:n], d.distance[:n]
	if !q.planned { // the CPU (with a device, plan's call computed them)
		d.space = r.distanceSpace(q.Raw, d.space)
		r.Ref.ScoreBatch(d.space, distance, 0)
	}
	rescoreMembers(m, q, r.Ref.Points, r.Ref.K, d.space, distance)
	d.settle()
	threshold := q.Cfg.MinScore // flag_by: significance (alarm.go: the cap follows)
	if q.Cfg.FlagBy != FlagBySignificance {
		threshold = r.Threshold(q.Cfg.AlarmRate)
	}
	// The calibrations (three binary searches and logs a record) on every core: each record
	// writes its own score.
	onChunks(n, max(1, min(runtime.GOMAXPROCS(0), n/combineGrain)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i].DensityScore, out[i].DistanceScore = density[i], distance[i]
			out[i].Threshold = threshold
			out[i].Score = r.combine(density[i], distance[i])
		}
	})
	return nil
}

// combineGrain is the fewest records per goroutine of the ranking's calibrations (about 0.3 µs
// a record: below it a goroutine costs more than it saves).
const combineGrain = 512

// plan adds the batch's distances to the window sample R to the batch's accelerator call.
func (d *rankDetector) plan(q *Query, p *devicePlan) {
	r, n := q.Model.Ranker, len(q.Raw[0])
	if r == nil {
		return
	}
	if cap(d.distance) < n { // (d.density may be in use: prescore's tail score writes it)
		d.distance = make([]float64, n)
	}
	d.space = r.distanceSpace(q.Raw, d.space)
	p.knn = append(p.knn, solvingset.Scoring{Model: r.Ref, Queries: d.space, Out: d.distance[:n]})
}

// Explain: "score X >= threshold T (temp +23.4 robust sd from the window's median)", said
// to be suppressed when the alarm cap held it back; a record the alarm's deadband held
// (detect.flag_clear) says so.
func (d *rankDetector) Explain(s *batch.Score) string {
	var e string
	switch {
	case s.Held:
		e = "held: score " + fmtG(s.Score) + " < threshold " + fmtG(s.Threshold) + " " + batch.HeldReason
	case s.Score >= s.Threshold:
		e = "score " + fmtG(s.Score) + " >= threshold " + fmtG(s.Threshold)
	default:
		return ""
	}
	if devs := batch.DeviationsText(s); devs != "" {
		e += " (" + devs + ")"
	}
	if s.Suppressed {
		e = batch.SuppressedReason + ": " + e
	}
	return e
}
