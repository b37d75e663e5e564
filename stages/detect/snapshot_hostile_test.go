package detect

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/algo/rank"
)

// Hostile models: the model topic is written by whoever may write to it, and its SHA-256 is a
// checksum, not a signature, so a scorer must refuse (never panic on) any snapshot or key's
// model whose values no build produces.

// unsortedCalibrations returns copies of r whose calibration i (density, distance, combined)
// is 2,500 scores (a key's has 200: a message says how many) with the knee (the score at
// rank.TailQuantile from the top) above the largest: finite, but not ascending.
func unsortedCalibrations(r *Ranker) []*Ranker {
	var out []*Ranker
	for i := range 3 {
		c := *r
		cals := []*[]float64{&c.Density.Sorted, &c.Distance.Sorted, &c.Final.Sorted}
		n := 2500
		s := make([]float64, n)
		for j := range s {
			s[j] = float64(j) / 100
		}
		s[int(math.Round((1-rank.TailQuantile)*float64(n-1)))] = s[n-1] + 1
		*cals[i] = s
		out = append(out, &c)
	}
	return out
}

// TestSnapshotUnsortedCalibrationRefused: a snapshot whose calibration scores are not ascending
// is refused with ErrSnapshotFormat. Before the fix decodeRanker computed the calibrations'
// slopes and knees (rank.CalibrationIn, which searches them as sorted) before checkRanker
// looked at the order, and panicked (index out of range in Calibration.empirical): one message
// on the model topic stopped every scorer, and again at each restart (the topic is compacted).
func TestSnapshotUnsortedCalibrationRefused(t *testing.T) {
	m := buildTestModel(t, testData(2500, 1), testConfig())
	for i, r := range unsortedCalibrations(m.Ranker) {
		t.Run(fmt.Sprint("calibration ", i), func(t *testing.T) {
			bad := *m
			bad.Ranker = r
			_, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, &bad)))
			if !errors.Is(err, ErrSnapshotFormat) {
				t.Fatalf("unsorted calibration %d: %v, want ErrSnapshotFormat", i, err)
			}
		})
	}
}

// TestKeyModelUnsortedCalibrationRefused is the same for a key's model message (DecodeKeyModel,
// the same decodeRanker).
func TestKeyModelUnsortedCalibrationRefused(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := keyedConfig()
	s := newFleetStage(t, cfg, []string{"value"})
	feedFleet(t, s, mem, fleet(3, 3000, 0, 5), 0, 3000)
	defer s.Close()
	r, _ := s.KeyModelOf("sensor-001")
	if r == nil {
		t.Fatal("sensor-001 has no model")
	}
	for i, bad := range unsortedCalibrations(r) {
		v, err := EncodeKeyModel([]string{"value"}, &cfg, "sensor-001", 1, bad)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := DecodeKeyModel(v, []string{"value"}, &cfg); !errors.Is(err, ErrSnapshotFormat) {
			t.Errorf("unsorted calibration %d: %v, want ErrSnapshotFormat", i, err)
		}
	}
}
