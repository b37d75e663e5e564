package detect

import (
	"context"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// TestHeldRecordsMissNoWindowOutlier: with before_model hold, the first model is built from the
// very records it then scores. Every record whose exact weight in that window reaches w* (the
// exact rule) must come out as a distance outlier: the solving set holds every top-n outlier,
// and without excluding the record itself it would meet itself at distance 0 and be missed.
func TestHeldRecordsMissNoWindowOutlier(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.BeforeModel = BeforeModelHold
	s := newTestStage(t, cfg)
	d := testData(cfg.MinRecords, 5)
	var out []*batchScores
	for lo := 0; lo < cfg.MinRecords; lo += 250 {
		ready, err := s.Process(context.Background(), makeBatch(t, mem, d, lo, lo+250, true))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range ready {
			out = append(out, &batchScores{n: b.Len(), dist: distFlags(b.Scores)})
			b.Record.Release()
		}
	}
	m := s.Model()
	if m == nil || len(out) != cfg.MinRecords/250 {
		t.Fatalf("model %v, %d batches out", m != nil, len(out))
	}
	// The exact rule on the model's own (normalised) window, which is exactly these records.
	nm, _ := m.normalised(d.Cols, d.SD, nil)
	exact := solvingset.Weights(nm, m.Distance.K, 0)
	row, must := 0, 0
	for _, b := range out {
		for i := range b.n {
			if exact[row] >= m.Distance.WStar {
				must++
				if !b.dist[i] {
					t.Errorf("record %d: exact weight %v >= w* %v but not flagged", row, exact[row], m.Distance.WStar)
				}
			}
			row++
		}
	}
	if n := EffectiveN(cfg.Distance.N, cfg.Window, m.WindowRecords); must < n {
		t.Fatalf("only %d records reach w*, the top-n alone has %d", must, n)
	}
}

type batchScores struct {
	n    int
	dist []bool
}

func distFlags(sc []batch.Score) []bool {
	out := make([]bool, len(sc))
	for i, s := range sc {
		out[i] = s.DistanceOutlier
	}
	return out
}
