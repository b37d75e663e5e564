package detect

import (
	"math/rand/v2"
	"testing"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// flatWindow is a window of n records of three features: a raw word constant at 1382 (a PLC's
// valve position, EDS's feedVal through a probation), a 0/1 tag constant at 0, and a continuous
// sensor N(0, 1).
func flatWindow(n int) [][]float32 {
	rng := rand.New(rand.NewPCG(25, 1))
	cols := [][]float32{make([]float32, n), make([]float32, n), make([]float32, n)}
	for i := range n {
		cols[0][i], cols[1][i], cols[2][i] = 1382, 0, float32(rng.NormFloat64())
	}
	return cols
}

// TestFlatFeatureCountsOneUnit: a feature without spread in the window (its winsorised values
// constant, unit 1 in raw units) counts any change as one unit of the distance space, whatever
// its raw size, so that a raw word the window never saw move (EDS q1.1to0: feedVal 1382 -> 27648
// in normal rows, 26,266 units) does not outrank a continuous sensor 8 sd past the window's
// range, and the distance does not depend on the word's raw units; a 0/1 tag's switch counts one
// unit as before (BENCHMARKS §12.55's addendum). On the code that clamped every coordinate at
// ±distanceLimit the raw word's move was 26,266 units and outranked the sensor's excursion.
func TestFlatFeatureCountsOneUnit(t *testing.T) {
	cols := flatWindow(4000)
	features := []string{"feedVal", "pump", "temp"}
	r, err := buildRanker(cols, sortedColumns(cols), features, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	q := [][]float32{{27648, 1382, 1382, 1382}, {0, 0, 1, 0}, {0, 8, 0, 0}} // word moved; sensor +8 sd; tag switched; nothing
	space := r.distanceSpace(q, nil)
	// The coordinates: the moved word and the switched tag one unit each, the sensor's about 8
	// (its winsorised sd is a little under 1: the clamp at the 0.5 % quantiles), the rest 0.
	if space[0][0] != 1 || space[1][2] != 1 || space[0][1] != 0 || space[1][1] != 0 {
		t.Errorf("the features without spread: word %v (moved), %v; tag %v (switched), %v; want 1, 0, 1, 0",
			space[0][0], space[0][1], space[1][2], space[1][1])
	}
	dist := make([]float64, 4)
	r.Ref.ScoreBatch(space, dist, 0)
	if !(dist[1] > dist[0]) {
		t.Errorf("distance of the raw word's move %v >= the sensor's 8 sd excursion %v; want below", dist[0], dist[1])
	}
	// The word in units of 1/100 (x 100): its move counts the same one unit (the window's
	// records hash otherwise, so R and the distances themselves differ: the coordinate is compared).
	w100 := [][]float32{make([]float32, len(cols[0])), cols[1], cols[2]}
	for i := range w100[0] {
		w100[0][i] = 138200
	}
	r100, err := buildRanker(w100, sortedColumns(w100), features, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if x := r100.distanceSpace([][]float32{{2764800}, {0}, {0}}, nil)[0][0]; x != space[0][0] {
		t.Errorf("the word's move in units of 1/100 is %v units, in its own %v; want the same", x, space[0][0])
	}
	// Read back from a snapshot, the model maps and scores alike.
	var e sealed.Encoder
	encodeRanker(&e, r, true)
	back, err := decodeRanker(sealed.NewDecoder(e.Payload()), features, true)
	if err != nil {
		t.Fatal(err)
	}
	db := make([]float64, 4)
	back.Ref.ScoreBatch(back.distanceSpace(q, nil), db, 0)
	for i := range dist {
		if db[i] != dist[i] {
			t.Errorf("record %d: distance %v read back, %v written", i, db[i], dist[i])
		}
	}
}
