package detect

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// TestExtremeValuesAreScoredAndFlagged: finite but extreme readings (FLT_MAX, the common "no
// reading" sentinel, and 1e20) in a stream of N(0, 0.1) values never stop the stage, get finite
// scores, and are both flagged — by the model that sees them as new records and by the models
// built from windows that contain them (where min-max scaling put 1e20 next to the inliers).
func TestExtremeValuesAreScoredAndFlagged(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.RefreshRecords = 500 // rebuild often: later models are built from windows with the extremes
	s := newTestStage(t, cfg)
	const rows = 6000
	r := rand.New(rand.NewPCG(3, 4))
	d := &synth.Data{Features: []string{"x1", "x2", "x3"}, Cols: make([][]float32, 3), SD: make([][]float32, 3)}
	for j := range 3 {
		d.Cols[j], d.SD[j] = make([]float32, rows), make([]float32, rows)
		for i := range rows {
			d.Cols[j][i] = float32(r.NormFloat64() * 0.1)
		}
	}
	extreme := map[int]float32{}
	for i := 1500; i < rows; i += 700 { // after the first model, then every 700 records
		v := float32(math.MaxFloat32)
		if (i/700)%2 == 0 {
			v = 1e20
		}
		if (i/700)%3 == 0 {
			v = -v
		}
		d.Cols[i%3][i] = v
		d.SD[i%3][i] = float32(math.MaxFloat32) // an extreme uncertainty too
		extreme[i] = v
	}
	flagged, inliersFlagged := 0, 0
	perModel, perModelDist := map[uint64]int{}, map[uint64]int{}
	defer func() { t.Logf("flags per model %v, by distance %v", perModel, perModelDist) }()
	for lo := 0; lo < rows; lo += 250 {
		out, err := s.Process(context.Background(), makeBatch(t, mem, d, lo, lo+250, true))
		if err != nil {
			t.Fatalf("rows %d..%d: %v", lo, lo+250, err)
		}
		for _, b := range out {
			first := int(b.Offsets()[0])
			for i, sc := range b.Scores {
				row := first + i
				if math.IsNaN(sc.Weight) || math.IsInf(sc.Weight, 0) || math.IsNaN(sc.EtaProbability) {
					t.Errorf("row %d: weight %v, eta-probability %v: want finite", row, sc.Weight, sc.EtaProbability)
				}
				if v, ok := extreme[row]; ok {
					if !sc.Outlier || !sc.DistanceOutlier || !sc.DensityOutlier {
						t.Errorf("row %d = %g: %+v, want flagged by both detectors", row, v, sc)
					}
					flagged++
				} else if sc.Outlier {
					inliersFlagged++
					perModel[b.ModelVersion]++
					if sc.DistanceOutlier {
						perModelDist[b.ModelVersion]++
					}
				}
			}
			b.Record.Release()
		}
		s.collect(true) // builds run on their own goroutine: let each one serve before the next batch
	}
	if flagged != len(extreme) || s.Model().Version < 5 {
		t.Fatalf("%d of %d extreme records scored, model version %d: want all, and >= 5 models", flagged, len(extreme), s.Model().Version)
	}
	// The models built with the extremes in their windows still tell the N(0, 0.1) records
	// apart: a scale squeezed by the extremes flags either none or all of them. 10% is far above
	// the rate of these settings on clean data (about 2-4%) and far below "all".
	if inliersFlagged > rows/10 {
		t.Errorf("%d of %d ordinary records flagged", inliersFlagged, rows)
	}
	for j, o := range s.Model().Offset {
		if sc := s.Model().Scale[j]; sc < 1 || math.Abs(float64(o)) > 1 {
			t.Errorf("feature %d: offset %v scale %v, want the bulk's [about -0.3, 0.3] mapped to [0,1]", j, o, sc)
		}
	}
}

// TestEffectiveN: n scales to the records a model was built from, never below 1 or above them.
func TestEffectiveN(t *testing.T) {
	for _, tc := range []struct{ n, window, rows, want int }{
		{50, 50000, 5000, 5}, {50, 50000, 50000, 50}, {50, 50000, 60000, 50}, {50, 50000, 10, 1},
		{5, 100, 3, 1}, {20, 2000, 1000, 10}, {20, 2000, 1001, 11}, {40, 50, 30, 24}, {5, 5, 2, 2},
	} {
		if got := EffectiveN(tc.n, tc.window, tc.rows); got != tc.want {
			t.Errorf("EffectiveN(%d, %d, %d) = %d, want %d", tc.n, tc.window, tc.rows, got, tc.want)
		}
	}
}
