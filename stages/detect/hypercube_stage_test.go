package detect

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// diagonalData: two features on the line x = y (plus a little noise, uniform along it), so each
// feature alone is ordinary everywhere in [0, 1]; rows listed in odd are moved to an empty
// corner, (0.9, 0.1) or (0.1, 0.9) in turn: ordinary in each feature, alone in the joint space.
func diagonalData(rows int, odd map[int]bool) *synth.Data {
	r := rand.New(rand.NewPCG(8, 9))
	d := &synth.Data{Features: []string{"x1", "x2", "x3"}, Cols: make([][]float32, 3), SD: make([][]float32, 3)}
	for j := range 3 {
		d.Cols[j], d.SD[j] = make([]float32, rows), make([]float32, rows)
	}
	for i := range rows {
		t := r.Float64()
		d.Cols[0][i] = float32(t + r.NormFloat64()*0.01)
		d.Cols[1][i] = float32(t + r.NormFloat64()*0.01)
		d.Cols[2][i] = float32(r.Float64())
		if odd[i] {
			d.Cols[0][i], d.Cols[1][i] = 0.9, 0.1
			if i%2 == 0 {
				d.Cols[0][i], d.Cols[1][i] = 0.1, 0.9
			}
		}
	}
	return d
}

// TestHypercubeDetectorInTheStage: with detect.hypercube.enabled the counts follow the window
// batch by batch (equal to counts rebuilt from the window after many evictions and a model
// swap), a record ordinary in every feature but alone in the joint space is flagged by the
// hypercube detector (and so by combine any) where the density test, one feature at a time,
// does not flag it, and turning the detector off live removes its scores.
func TestHypercubeDetectorInTheStage(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.Hypercube.Enabled = true
	cfg.RefreshRecords = 1500
	odd := map[int]bool{4321: true, 5678: true}
	d := diagonalData(6000, odd)
	s := newTestStage(t, cfg)
	flagged := map[int]bool{}
	densityFlagged := map[int]bool{}
	for lo := 0; lo < 6000; lo += 250 {
		out, err := s.Process(context.Background(), makeBatch(t, mem, d, lo, lo+250, true))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range out {
			first := int(b.Offsets()[0])
			for i, sc := range b.Scores {
				if sc.Hypercube == nil {
					t.Fatalf("row %d: no hypercube score", first+i)
				}
				if sc.Hypercube.Outlier {
					if !sc.Outlier {
						t.Errorf("row %d: hypercube outlier, combined inlier under combine any", first+i)
					}
					flagged[first+i] = true
				}
				if sc.DensityOutlier {
					densityFlagged[first+i] = true
				}
			}
			b.Record.Release()
		}
		s.collect(true)
	}
	if s.Model().Version < 3 {
		t.Fatalf("model version %d: the counts never followed a swap", s.Model().Version)
	}
	for r := range odd {
		if !flagged[r] || densityFlagged[r] {
			t.Errorf("row %d: hypercube flagged %v, density %v; want the hypercube alone", r, flagged[r], densityFlagged[r])
		}
	}
	if len(flagged) > 60 { // 1%: the diagonal's own sparse ends may be alone in their cells
		t.Errorf("%d of 6000 rows flagged by the hypercube detector", len(flagged))
	}
	hc := s.followers[0].(*hypercubeDetector)
	incremental := hc.counts.Cells()
	if err := s.resetFollowers(); err != nil {
		t.Fatal(err)
	}
	if rebuilt := hc.counts.Cells(); !reflect.DeepEqual(incremental.Count, rebuilt.Count) || hc.counts.Total() != int64(s.win.Len()) {
		t.Fatalf("incremental counts differ from the window's: %d vs %d cells, total %d for %d records", incremental.Len(), rebuilt.Len(), hc.counts.Total(), s.win.Len())
	}
	off := cfg
	off.Hypercube.Enabled = false
	if _, err := s.Reconfigure(off); err != nil {
		t.Fatal(err)
	}
	if sc := scoreWith(t, s, mem, d, 100, 110); sc[0].Hypercube != nil || hc.counts != nil {
		t.Error("the detector still scores after it was turned off")
	}
}

// TestHypercubeLeavesOutWarming (derive28): the hypercube's counts leave out the window's
// records with a warming column (a rolling column whose window was still filling: its value a
// partial window's, warmup.go), as the models' references do (leaveOutWarming), incremental
// push by push and recounted at a model's install alike, past evictions and model swaps; a
// warming record is scored counting itself, as a counted one does (max_neighbours: "the record
// itself counts"), so one alone in the joint space reads 1 neighbour and one among others is
// not flagged for being left out. Under the references' floor (fewer than outcastFloor of the
// window not warming: a fleet's cold start) they are counted, so that the counts are never of
// an empty window, which flags every record.
func TestHypercubeLeavesOutWarming(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.Hypercube.Enabled = true
	cfg.RefreshRecords = 1500
	lone := 5678 // a warming record alone in the joint space (the corner (0.1, 0.9))
	d := diagonalData(6000, map[int]bool{lone: true})
	for _, every := range []int{4, 1} {
		s := newTestStage(t, cfg)
		warming := func(i int) bool { return i%every == 0 }
		hyper := 0
		for lo := 0; lo < 6000; lo += 250 {
			b := withWarmingWhere(t, makeBatch(t, mem, d, lo, lo+250, true), 2, func(i int) bool { return warming(lo + i) })
			out, err := s.Process(context.Background(), b)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range out {
				first := int(b.Offsets()[0])
				for i, sc := range b.Scores {
					if sc.Hypercube == nil {
						t.Fatalf("every %d, row %d: no hypercube score", every, first+i)
					}
					if sc.Hypercube.Outlier {
						hyper++
					}
					if first+i == lone && every == 4 && (sc.Hypercube.Neighbours != 1 || !sc.Hypercube.Outlier) {
						t.Errorf("the warming record alone in the joint space: %d neighbours (outlier %v), want 1 (itself)", sc.Hypercube.Neighbours, sc.Hypercube.Outlier)
					}
				}
				b.Record.Release()
			}
			s.collect(true)
		}
		if s.Model().Version < 3 {
			t.Fatalf("model version %d: the counts never followed a swap", s.Model().Version)
		}
		hc := s.followers[0].(*hypercubeDetector)
		held := s.win.Len()
		want := int64(0) // the window's records (the last held of 6000) not warming
		for i := 6000 - held; i < 6000; i++ {
			if !warming(i) {
				want++
			}
		}
		if every == 1 {
			want = int64(held) // (none not warming: under the floor, the window whole)
		}
		if got := hc.counts.Total(); got != want {
			t.Errorf("every %d: the counts hold %d records, want %d (the window's %d less those warming)", every, got, want, held)
		}
		incremental := hc.counts.Cells()
		if err := s.resetFollowers(); err != nil {
			t.Fatal(err)
		}
		if rebuilt := hc.counts.Cells(); !reflect.DeepEqual(incremental.Count, rebuilt.Count) || hc.counts.Total() != want {
			t.Errorf("every %d: incremental counts differ from the window's recount: %d vs %d cells, total %d, want %d", every, incremental.Len(), rebuilt.Len(), hc.counts.Total(), want)
		}
		if hyper > 60 { // 1%, as TestHypercubeDetectorInTheStage's: the diagonal's own sparse ends
			t.Errorf("every %d: %d of 6000 rows flagged by the hypercube detector", every, hyper)
		}
	}
}
