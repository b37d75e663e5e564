package detect

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestWhitenedSnapshotRefusesAHostileWhitening: a snapshot whose whitening no build writes is
// refused naming what is wrong, never loaded: W is the inverse root of a covariance, so it is
// symmetric (bit for bit: whitening mirrors each pair), its diagonal is positive, and its
// entries are far below whitenMax (so W z, |z| <= distanceLimit, stays finite: a value of
// 1e300 made every distance the clamp's). Loaded before the check: non-symmetric, a zero or
// negative diagonal, 1e300.
func TestWhitenedSnapshotRefusesAHostileWhitening(t *testing.T) {
	d := testData(2500, 3)
	m := buildTestModel(t, d, whitenedConfig())
	good := slices.Clone(m.Ranker.Whiten)
	for _, tc := range []struct {
		name string
		edit func(w []float64)
		want string
	}{
		{"not symmetric", func(w []float64) { w[1] = math.Nextafter(w[1], 2) }, "whitening is not symmetric: value (0, 1)"},
		{"a zero diagonal", func(w []float64) { w[4] = 0 }, "whitening's diagonal value 1 is 0"},
		{"a negative diagonal", func(w []float64) { w[8] = -w[8] }, "whitening's diagonal value 2 is -"},
		{"an entry of 1e300", func(w []float64) { w[1], w[3] = 1e300, 1e300 }, "whitening value 1 is 1e+300, beyond"},
		{"NaN", func(w []float64) { w[2], w[6] = math.NaN(), math.NaN() }, "whitening value 2 is NaN"},
	} {
		m.Ranker.Whiten = slices.Clone(good)
		tc.edit(m.Ranker.Whiten)
		got, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, m)))
		if !errors.Is(err, ErrSnapshotFormat) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (a model %v), want an error containing %q", tc.name, err, got != nil, tc.want)
		}
	}
	// A count that is not dims^2 (refused before these checks too).
	m.Ranker.Whiten = good[:4]
	if _, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, m))); !errors.Is(err, ErrSnapshotFormat) || !strings.Contains(err.Error(), "a whitening of 4 values for 3 features (want 9)") {
		t.Errorf("a whitening of 4 values: %v", err)
	}
	m.Ranker.Whiten = good
	if _, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, m))); err != nil {
		t.Fatalf("the model's own whitening: %v", err)
	}
}

// TestWhitenedSnapshotFlagWithoutItsParts: the whitening's flag bit without the ranking part is
// refused naming that (it read "unknown flags 0x31", though every bit is known: failed first),
// and without the matrix the payload ends inside its count.
func TestWhitenedSnapshotFlagWithoutItsParts(t *testing.T) {
	m := buildTestModel(t, testData(2500, 3), whitenedConfig())

	// The payload as written: the flags at byte 76 (five u64, five u32, the seed, dims, q).
	_, p, err := snapshotFile.Read(bytes.NewReader(snapshotBytes(t, m)))
	if err != nil {
		t.Fatal(err)
	}
	flags := binary.LittleEndian.Uint32(p[76:])
	if flags&(snapFlagRanker|snapFlagWhiten) != snapFlagRanker|snapFlagWhiten {
		t.Fatalf("flags %#x: the layout this test reads changed", flags)
	}
	if _, err := decodeSnapshot(p[:len(p)-8-9*8]); !errors.Is(err, ErrSnapshotFormat) || !strings.Contains(err.Error(), "whitening count") {
		t.Errorf("the whitening's flag without the matrix: %v", err)
	}
	q := slices.Clone(p)
	binary.LittleEndian.PutUint32(q[76:], flags&^snapFlagRanker)
	if _, err := decodeSnapshot(q); !errors.Is(err, ErrSnapshotFormat) || !strings.Contains(err.Error(), "a whitening without the ranking part") {
		t.Errorf("the whitening's flag without the ranking part: %v", err)
	}
}
