package sink

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// TestHypercubeInOutputs: the hypercube detector's result is in "scores" (and its flag in the
// explanation) only when it ran, also next to non-finite scores; without it the JSON is as before.
func TestHypercubeInOutputs(t *testing.T) {
	with := batch.Score{Scored: true, Outlier: true, Weight: 1, WStar: 2, EtaProbability: 0.9,
		Hypercube: &batch.HypercubeScore{Score: 0.98, Neighbours: 1, Outlier: true}}
	for _, w := range []float64{1, math.Inf(1)} {
		with.Weight = w
		got, err := json.Marshal(scoresJSON(&with))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(got), `"hypercube":{"score":0.98,"neighbours":1,"outlier":true}`) {
			t.Errorf("weight %v: scores %s lack the hypercube result", w, got)
		}
	}
	if e := Explain(with); !strings.Contains(e, "sparse in the joint space: 1 window records") {
		t.Errorf("explanation %q does not name the hypercube flag", e)
	}
	without := with
	without.Hypercube, without.Weight = nil, 1
	got, _ := json.Marshal(scoresJSON(&without))
	if strings.Contains(string(got), "hypercube") {
		t.Errorf("scores %s mention a detector that did not run", got)
	}
}

// TestProclusInExplanation: a density verdict from a PROCLUS cluster's subspace names the
// cluster; a record outside every cluster says so instead of an eta-probability it did not fail.
func TestProclusInExplanation(t *testing.T) {
	low := batch.Score{Scored: true, Outlier: true, DensityOutlier: true, EtaProbability: 0.01,
		Subspace: []string{"temp", "vibration"}, SubspaceOf: "PROCLUS cluster 3"}
	if e := Explain(low); !strings.Contains(e, "low density in subspace temp+vibration (PROCLUS cluster 3): eta-probability 0.01 < delta") {
		t.Errorf("explanation %q", e)
	}
	off := low
	off.EtaProbability, off.SubspaceOf = 1, "outside every PROCLUS cluster; nearest: cluster 2"
	if e := Explain(off); !strings.Contains(e, "outside every PROCLUS cluster; nearest: cluster 2 in subspace temp+vibration") || strings.Contains(e, "< delta") {
		t.Errorf("explanation %q", e)
	}
}
