package detect

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFarRecordsRankByBothScores: EDS's q1.1to0 (docs/BENCHMARKS.md §12.55's addendum) on a
// generated window. A raw word the window holds constant (unit 1 in the distance's space) moved
// by 26,266 units (record A, otherwise ordinary) and a continuous sensor moved 5,000 sd with two
// others at +6 sd (record B) are both far past the distance calibration's largest score; B's tail
// score is far higher (three features out against one). With the distance extrapolated linearly,
// A's calibrated distance is thousands of decades and the weighted mean ranks A first whatever
// the tail score says; past ten times the largest the distance grows as the tail score does (by
// the log of how far), so the two scores are weighed alike and B ranks first. Both stay far above
// min_score, and a record within the reach scores as before.
func TestFarRecordsRankByBothScores(t *testing.T) {
	const rows = 4000
	r := rand.New(rand.NewPCG(26, 5))
	cols := make([][]float32, 4)
	for j := range cols {
		cols[j] = make([]float32, rows)
		for i := range rows {
			if j == 0 {
				cols[j][i] = 1382 // feedVal: a PLC word constant in the window
			} else {
				cols[j][i] = float32(r.NormFloat64())
			}
		}
	}
	cfg := testConfig()
	rk, err := buildRanker(cols, sortedColumns(cols), []string{"feed", "x1", "x2", "x3"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	q := [][]float32{{27648, 1382, 1382}, {0.1, 5000, 3.5}, {-0.2, 6, 3.5}, {0.3, 6, -0.5}} // A, B, C (C: +6 sd on two, within reach)
	dens, dist := make([]float64, 3), make([]float64, 3)
	rk.Tail.Score(q, dens)
	rk.Ref.ScoreBatch(rk.distanceSpace(q, nil), dist, 0)
	top := rk.Distance.Sorted[len(rk.Distance.Sorted)-1]
	if !(dist[0] > dist[1] && dist[1] > 10*top) || !(dens[1] > dens[0]+10) {
		t.Fatalf("the records are not as built: distances %v (reach %v), tail scores %v", dist, 10*top, dens)
	}
	a, b := rk.combine(dens[0], dist[0]), rk.combine(dens[1], dist[1])
	t.Logf("A: tail %.1f nats, distance %.0f (%.1f decades linear, %.1f), combined %.2f; B: tail %.1f, distance %.0f (%.1f, %.1f), combined %.2f; weights %.2f/%.2f",
		dens[0], dist[0], rk.Distance.Surprisal(dist[0]), rk.Distance.SurprisalLength(dist[0]), a,
		dens[1], dist[1], rk.Distance.Surprisal(dist[1]), rk.Distance.SurprisalLength(dist[1]), b, rk.DensityWeight, rk.DistanceWeight)
	if !(b > a) {
		t.Fatalf("A (one constant word moved) %v ranks at or above B (three sensors out) %v", a, b)
	}
	if !(a > 10) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		t.Fatalf("far records' combined scores %v, %v: want finite and far above min_score", a, b)
	}
	if dist[2] > 10*top {
		t.Fatalf("C's distance %v is past the reach %v", dist[2], 10*top)
	}
	if got, want := rk.combine(dens[2], dist[2]), rk.Final.Surprisal(rk.meanOf(rk.Density.Surprisal(dens[2]), rk.Distance.Surprisal(dist[2]))); got != want {
		t.Fatalf("C, within the reach: %v, the linear extrapolation's %v", got, want)
	}
}
