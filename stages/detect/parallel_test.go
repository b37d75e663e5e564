package detect

import (
	"math"
	"slices"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/rank"
)

// TestParallelTailIsSerial: the tail score in chunks on goroutines and the Tail made from the
// build's sorted columns give the serial results bit for bit, for batch sizes around the chunking's edges
// (one chunk, uneven chunks, more workers than rows allow).
func TestParallelTailIsSerial(t *testing.T) {
	d := testData(5000, 3)
	want := rank.NewTail(d.Cols)
	got := tailOfSorted(sortedColumns(d.Cols))
	for j := range d.Cols {
		if !slices.Equal(got.Sorted[j], want.Sorted[j]) || got.Spread[j] != want.Spread[j] {
			t.Fatalf("newTail feature %d differs from rank.NewTail", j)
		}
	}
	var scratch [][]float32
	for _, n := range []int{1, tailChunkRows - 1, tailChunkRows*2 + 1, 1000, 4999} {
		q := make([][]float32, len(d.Cols))
		for j := range q {
			q[j] = d.Cols[j][5000-n:]
		}
		serial, par := make([]float64, n), make([]float64, n)
		want.Score(q, serial)
		var wait func()
		wait, scratch = tailScores(got, q, par, scratch)
		wait()
		for i := range serial {
			if math.Float64bits(serial[i]) != math.Float64bits(par[i]) {
				t.Fatalf("n=%d row %d: parallel %v, serial %v", n, i, par[i], serial[i])
			}
		}
	}
}
