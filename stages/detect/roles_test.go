package detect

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/hypercube"
)

// TestScorerHypercubeGivesBuildersVerdicts (issue 21): a scorer keeps no window, so its
// hypercube counts stayed empty and every record had w = 0 <= max_neighbours: all flagged. The
// builder now publishes its counts with each model (PublishedHypercube) and the scorer scores
// with them: every record's w and verdict equal those of the builder's counts, the two rows
// alone in the joint space are flagged and the ordinary rows are not; a model whose builder
// had the detector off gives the scorer no hypercube verdict rather than a wrong one.
func TestScorerHypercubeGivesBuildersVerdicts(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.Hypercube.Enabled = true
	odd := map[int]bool{2345: true, 2346: true}
	d := diagonalData(3000, odd)
	features := []string{"x1", "x2", "x3"}

	var builder *Stage
	var published []byte
	var model *Model
	builder, err := NewStage(cfg, features, true, Deps{Log: zerolog.Nop(), Role: RoleBuilder, OnModel: func(m *Model, fresh bool) {
		if fresh {
			model, published = m, builder.PublishedHypercube()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer builder.Close()
	feed(t, builder, mem, d, 0, 2000, 250)
	builder.collect(true)
	if model == nil || published == nil {
		t.Fatalf("builder: model %v, %d bytes of hypercube counts published", model, len(published))
	}

	scorer, err := NewStage(cfg, features, true, Deps{Log: zerolog.Nop(), Role: RoleScorer})
	if err != nil {
		t.Fatal(err)
	}
	defer scorer.Close()
	if _, ok, err := scorer.InstallModel(model, published); err != nil || !ok {
		t.Fatalf("InstallModel: %v %v", ok, err)
	}
	// The builder's verdicts: its counts, read back from what it published, scoring the rows.
	cells, err := hypercube.ReadCells(published)
	if err != nil {
		t.Fatal(err)
	}
	ref := hypercube.CountsOf(cells)
	flagged := 0
	for lo := 2000; lo < 3000; lo += 250 {
		b := makeBatch(t, mem, d, lo, lo+250, true)
		out, err := scorer.Process(context.Background(), b)
		if err != nil || len(out) != 1 {
			t.Fatalf("Process: %d batches, %v", len(out), err)
		}
		means, _, _ := scorer.columns(b)
		nm, _ := model.normalised(means, nil, nil)
		w, o := make([]int64, b.Len()), make([]float64, b.Len())
		if err := ref.Score(nm, w, o); err != nil {
			t.Fatal(err)
		}
		for i, sc := range b.Scores {
			h := sc.Hypercube
			want := w[i] <= int64(cfg.Hypercube.MaxNeighbours)
			if h == nil || h.Neighbours != w[i] || h.Score != o[i] || h.Outlier != want {
				t.Fatalf("row %d: scorer's hypercube %+v, the builder's counts give w %d O %v outlier %v", lo+i, h, w[i], o[i], want)
			}
			if h.Outlier {
				flagged++
				if !odd[lo+i] {
					t.Errorf("row %d (ordinary, on the diagonal) flagged by the hypercube", lo+i)
				}
			} else if odd[lo+i] {
				t.Errorf("row %d (alone in the joint space) not flagged", lo+i)
			}
		}
		b.Release()
	}
	if flagged != len(odd) {
		t.Errorf("%d of 1000 rows flagged by the hypercube, want the %d odd ones", flagged, len(odd))
	}

	// A builder with the detector off publishes no counts: no hypercube verdict at all.
	off, err := NewStage(cfg, features, true, Deps{Log: zerolog.Nop(), Role: RoleScorer})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if _, _, err := off.InstallModel(model, nil); err != nil {
		t.Fatal(err)
	}
	b := makeBatch(t, mem, d, 2000, 2250, true)
	if _, err := off.Process(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for i, sc := range b.Scores {
		if sc.Hypercube != nil {
			t.Fatalf("row %d: hypercube verdict %+v from a model published without counts", 2000+i, *sc.Hypercube)
		}
	}
	b.Release()
}

// TestModelPublicationSizes measures what docs/OPERATIONS.md states of the model topic: the
// bytes a builder publishes per model (its snapshot, plus its hypercube counts when that
// detector is on) for 3 features at the default settings and windows of 2k, 10k and 50k
// records of synthetic uncertain data. It checks that the size grows with the window and stays
// under 2 MB at 50k (so a model is a few chunks at the default max_message_bytes and fits the
// model topic's segments many times over).
func TestModelPublicationSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a model of 50,000 records")
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	prev := 0
	for _, w := range []int{2000, 10_000, 50_000} {
		cfg := Default()
		cfg.Window, cfg.MinRecords = w, w
		cfg.Hypercube.Enabled = true
		d := testData(w, 5)
		var s *Stage
		var model *Model
		var cube []byte
		s, err := NewStage(cfg, d.Features, true, Deps{Log: zerolog.Nop(), Role: RoleBuilder, OnModel: func(m *Model, fresh bool) {
			if fresh {
				model, cube = m, s.PublishedHypercube()
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		feed(t, s, mem, d, 0, w, 1000)
		s.collect(true)
		s.Close()
		if model == nil {
			t.Fatalf("window %d: no model", w)
		}
		var snap bytes.Buffer
		if err := WriteSnapshot(&snap, model); err != nil {
			t.Fatal(err)
		}
		size := snap.Len() + len(cube)
		t.Logf("3 features, window %d: snapshot %d bytes + hypercube counts %d bytes = %d bytes (solving set %d)",
			w, snap.Len(), len(cube), size, len(model.Distance.Points[0]))
		if size <= prev || size > 2<<20 {
			t.Errorf("window %d: %d bytes (window before: %d)", w, size, prev)
		}
		prev = size
	}
}

// TestReconfigureRejectedChangesNothing: a reload that turns the hypercube detector on in a
// scorer whose model came without counts (its builder has it off) was refused, "nothing
// changed", while the stage had taken the whole new configuration (its other keys too) before
// the detector's reset failed: the pipeline's reloader kept the old one as the one in force. It
// is applied as a new model without counts is (install: the detector off until a model with
// counts comes), or refused with nothing changed.
func TestReconfigureRejectedChangesNothing(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	d := diagonalData(2000, nil)
	features := []string{"x1", "x2", "x3"}
	var model *Model
	builder, err := NewStage(cfg, features, true, Deps{Log: zerolog.Nop(), Role: RoleBuilder, OnModel: func(m *Model, fresh bool) {
		if fresh {
			model = m
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer builder.Close()
	feed(t, builder, mem, d, 0, 2000, 250)
	builder.collect(true)
	if model == nil {
		t.Fatal("the builder built no model")
	}
	scorer, err := NewStage(cfg, features, true, Deps{Log: zerolog.Nop(), Role: RoleScorer})
	if err != nil {
		t.Fatal(err)
	}
	defer scorer.Close()
	if _, ok, err := scorer.InstallModel(model, nil); err != nil || !ok {
		t.Fatalf("InstallModel: %v %v", ok, err)
	}
	// A new window in a scorer with the detector on: the window's reset failed the same way,
	// the window re-created and the configuration left as it was.
	on := cfg
	on.Hypercube.Enabled = true
	other, err := NewStage(on, features, true, Deps{Log: zerolog.Nop(), Role: RoleScorer})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, _, err := other.InstallModel(model, nil); err != nil {
		t.Fatal(err)
	}
	wider := on
	wider.Window = on.Window * 2
	_, err = other.Reconfigure(wider)
	if got := other.Config().Window; err == nil && got != wider.Window || err != nil && (got != on.Window || other.win.Cap() != on.Window) {
		t.Fatalf("Reconfigure of the window: %v; the stage's detect.window %d, its window's capacity %d (was %d)", err, got, other.win.Cap(), on.Window)
	}

	next := cfg
	next.Hypercube.Enabled = true
	next.Density.Eta = cfg.Density.Eta / 2
	if _, err := scorer.Reconfigure(next); err != nil {
		if got := scorer.Config(); got.Density.Eta != cfg.Density.Eta || got.Hypercube.Enabled {
			t.Fatalf("Reconfigure refused (%v), but the stage took eta %v and hypercube.enabled %v", err, got.Density.Eta, got.Hypercube.Enabled)
		}
		return
	}
	if got := scorer.Config(); got.Density.Eta != next.Density.Eta || !got.Hypercube.Enabled {
		t.Fatalf("Reconfigure applied, but the stage has eta %v and hypercube.enabled %v", got.Density.Eta, got.Hypercube.Enabled)
	}
	b := makeBatch(t, mem, d, 1000, 1250, true)
	defer b.Release()
	if _, err := scorer.Process(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for i, sc := range b.Scores {
		if sc.Hypercube != nil {
			t.Fatalf("row %d: hypercube verdict %+v without counts", 1000+i, *sc.Hypercube)
		}
	}
}
