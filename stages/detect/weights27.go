package detect

import (
	"math"
	"os"

	"github.com/outlierd/outlierd/internal/algo/rank"
)

// The agreement weights past a detector's calibration (prototype, branch weights27;
// docs/bench/notes/weights27_rule.md). The weights (rank.AgreementWeights) are fitted on the
// calibration records; a shared few-percent tail (a rolling column's aftermath) tips them
// toward the density, and a true spike, far past the distance's calibration, loses the
// significance its distance gave it (docs/BENCHMARKS.md §12.61). Under the switch
// OUTLIERD_WEIGHTS27, the part of a detector's calibrated score past a bound counts at weight
// 0.5 where its agreement weight is below 0.5: top, the surprisal of its largest calibration
// score; knee, its knee's (the 99th percentile's); decade, its k-th largest's, k = ceil(n
// TailQuantile / 10) (round 2 of the rule). Host side only.
type weights27Mode int

const (
	weights27Off weights27Mode = iota
	weights27Knee
	weights27Top
	weights27Decade
)

// weights27 is the switch, read once at start.
var weights27 = func() weights27Mode {
	switch os.Getenv("OUTLIERD_WEIGHTS27") {
	case "knee":
		return weights27Knee
	case "top":
		return weights27Top
	case "decade":
		return weights27Decade
	}
	return weights27Off
}()

// weights27Bound is the calibrated score past which the excess counts at weight 0.5.
func weights27Bound(c *rank.Calibration) float64 {
	if weights27 == weights27Knee {
		return c.KneeBase()
	}
	s := c.Sorted
	if len(s) == 0 {
		return 0
	}
	k := 1
	if weights27 == weights27Decade { // one decade of tail past the knee: the 5th largest of 4096
		k = max(int(math.Ceil(float64(len(s))*rank.TailQuantile/10)), 1)
	}
	return c.Surprisal(s[len(s)-k])
}
