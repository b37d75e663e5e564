package detect

import "os"

// The distance's weight past its calibration (prototype, branch weights24; docs/BENCHMARKS.md
// §12.52, rule docs/bench/notes/weights24_rule.md). The agreement weights (rank.AgreementWeights)
// are fitted on the window's records, within the calibrations; on skewed sensors they give the
// distance 0.74-0.78 of the mean, and a clean record far in a skewed sensor's tail is scored by
// the distance calibration's fitted exponential tail, decades above its rarity (§12.37). Under
// the switch OUTLIERD_FAR_WEIGHTS, the part of the distance's calibrated score past a bound
// counts at weight 0.5, not the distance's agreement weight, where that weight is above 0.5 (the
// weights do not favour the distance past its calibration): the mean is continuous and monotone
// in both calibrated scores, and unchanged below the bound or where the distance is not
// favoured. Bounds: knee, the distance calibration's knee (its 99th percentile's surprisal, where
// its fitted tail begins); top, its largest calibration score's surprisal. Host side only: the
// raw scores (and every kernel) are untouched.
type farWeightsMode int

const (
	farWeightsOff farWeightsMode = iota
	farWeightsKnee
	farWeightsTop
)

// farWeights is the switch, read once at start.
var farWeights = func() farWeightsMode {
	switch os.Getenv("OUTLIERD_FAR_WEIGHTS") {
	case "knee":
		return farWeightsKnee
	case "top":
		return farWeightsTop
	}
	return farWeightsOff
}()

// farBound is the distance's calibrated score past which its excess counts at weight 0.5.
func (r *Ranker) farBound() float64 {
	if farWeights == farWeightsKnee {
		return r.Distance.KneeBase()
	}
	s := r.Distance.Sorted
	if len(s) == 0 {
		return 0
	}
	return r.Distance.Surprisal(s[len(s)-1])
}
