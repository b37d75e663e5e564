package detect

import (
	"context"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"
)

// TestOnModelPushesEveryServingModel: Deps.OnModel is told of every model that starts serving,
// so the pipeline needs no polling: a build (fresh), the serving model retuned by a reload of
// distance.n (not fresh: the same version, nothing to publish), and a model built after a
// restart from a snapshot; the snapshot loaded by NewStage itself is not announced (Model
// returns it).
func TestOnModelPushesEveryServingModel(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	type notice struct {
		m     *Model
		fresh bool
	}
	var got []notice
	deps := Deps{Log: zerolog.Nop(), OnModel: func(m *Model, fresh bool) { got = append(got, notice{m, fresh}) }}
	cfg := testConfig()
	cfg.StateDir = t.TempDir()
	s, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, deps)
	if err != nil {
		t.Fatal(err)
	}
	d := testData(6000, 11)
	feed(t, s, mem, d, 0, 1500, 250)
	if len(got) != 1 || !got[0].fresh || got[0].m != s.Model() || s.Model().Version != 1 {
		t.Fatalf("after the first build: %d notices, want one fresh notice of version 1", len(got))
	}
	next := cfg
	next.Distance.N = 5 // w* from the top weights: a new serving model of the same version
	if _, err := s.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].fresh || got[1].m != s.Model() || got[1].m == got[0].m || got[1].m.Version != 1 {
		t.Fatalf("after a reload of distance.n: %d notices, want a second, not fresh, of the retuned version 1", len(got))
	}
	s.Close()

	got = nil
	next.RefreshRecords = 1000 // (the restored window's model is rebuilt on its triggers: window_restore.go)
	r, err := NewStage(next, []string{"x1", "x2", "x3"}, true, deps)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Model() == nil || len(got) != 0 {
		t.Fatalf("restart from the snapshot: model %v, %d notices; want the snapshot serving, unannounced", r.Model(), len(got))
	}
	feed(t, r, mem, d, 1500, 2600, 250)
	r.collect(true)
	if len(got) != 1 || !got[0].fresh || got[0].m != r.Model() || r.Model().Version != 2 {
		t.Fatalf("after the rebuild: %d notices, want one fresh notice of version 2", len(got))
	}
}

// TestAbandonReleasesHeldBatches: batches held for the first model (before_model: hold) that
// never reached Flush (the run was abandoned: a failure or the hard stop) are released by
// Abandon; they were never passed on, so never acknowledged, and are read again after a restart.
func TestAbandonReleasesHeldBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	s, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	d := testData(600, 3)
	for lo := 0; lo < 600; lo += 200 { // 600 < min_records 1000: all held
		ready, err := s.Process(context.Background(), makeBatch(t, mem, d, lo, lo+200, true))
		if err != nil {
			t.Fatal(err)
		}
		if len(ready) != 0 {
			t.Fatalf("%d batches passed on before the first model under hold", len(ready))
		}
	}
	s.Close() // waits only: the held batches stay held (replay calls Close between batches)
	s.Abandon()
}
