package detect

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// TestParallelTailIsSerial: the tail score in chunks on goroutines and the Tail made from the
// build's sorted columns give the serial results bit for bit, for batch sizes around the chunking's edges
// (one chunk, uneven chunks, more workers than rows allow).
func TestParallelTailIsSerial(t *testing.T) {
	d := testData(5000, 3)
	want := rank.NewTail(d.Cols)
	got := rank.TailOfSorted(sortedColumns(d.Cols))
	for j := range d.Cols {
		if !slices.Equal(got.Sorted[j], want.Sorted[j]) || got.Spread[j] != want.Spread[j] {
			t.Fatalf("TailOfSorted feature %d differs from rank.NewTail", j)
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

// TestPrescoreScoresAsTheCPU: with an accelerator the tail score starts before the other
// detectors and runs beside them (prescore); every field of every score is the CPU path's, batch
// after batch (run with -race: the early goroutines share nothing with the other detectors).
func TestPrescoreScoresAsTheCPU(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.FlagBy = FlagByRate // the default: the ranking part scores
	s, _ := readyStage(t, mem, cfg)
	if s.Model() == nil || s.Model().Ranker == nil {
		t.Fatal("no model with a ranking part")
	}
	d := testData(6000, 11)
	var want [][]batch.Score
	ring := s.recent.clone() // both passes rank Recent against the same recent scores
	for lo := 2000; lo < 3000; lo += 250 {
		want = append(want, slices.Clone(scoreWith(t, s, mem, d, lo, lo+250)))
	}
	useAccelerator(s, &fakeAccel{exact: true}) // the CPU twins: scores through it must be the CPU's
	s.recent = ring
	for i, lo := 0, 2000; lo < 3000; i, lo = i+1, lo+250 {
		got := scoreWith(t, s, mem, d, lo, lo+250)
		for r := range got {
			if !reflect.DeepEqual(fmt.Sprint(got[r]), fmt.Sprint(want[i][r])) {
				t.Fatalf("batch %d record %d: accelerator path %+v, CPU %+v", i, r, got[r], want[i][r])
			}
		}
	}
}
