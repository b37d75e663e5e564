package solvingset

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sampleModel() *Model {
	return &Model{
		Features: []string{"x1", "température"},
		K:        2,
		WStar:    3.75,
		Points:   [][]float32{{0, 1, 2.5}, {-1, 0.25, 7}},
		Offset:   []float32{1, 2},
		Scale:    []float32{0.5, 4},
	}
}

func encode(t testing.TB, m *Model) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := m.Save(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// reseal rewrites the header's payload length and the checksum around payload, so that a
// test (or the fuzzer) reaches the payload decoder with content of its choice.
func reseal(version uint32, payload []byte) []byte {
	out := []byte(modelMagic)
	out = binary.LittleEndian.AppendUint32(out, version)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(payload)))
	out = append(out, payload...)
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

func TestModelRoundTrip(t *testing.T) {
	t.Parallel()
	for _, m := range []*Model{sampleModel(), {Features: []string{"a"}, K: 1, WStar: 0, Points: [][]float32{{5}}}} {
		got, err := Load(bytes.NewReader(encode(t, m)))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip: got %+v, want %+v", got, m)
		}
	}
	path := filepath.Join(t.TempDir(), "model.ossm")
	m := sampleModel()
	if err := m.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	m.WStar = 9 // overwrite: the rename replaces the old file
	if err := m.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("file round trip: got %+v, want %+v", got, m)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestModelFileRefused(t *testing.T) {
	t.Parallel()
	valid := encode(t, sampleModel())
	payload := valid[headerSize : len(valid)-sha256.Size]
	flip := func(i int) []byte {
		b := bytes.Clone(valid)
		b[i] ^= 0x40
		return b
	}
	withPayload := func(edit func(p []byte) []byte) []byte {
		return reseal(ModelVersion, edit(bytes.Clone(payload)))
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"header only", valid[:headerSize], "truncated"},
		{"truncated payload", valid[:len(valid)-40], "truncated"},
		{"truncated checksum", valid[:len(valid)-1], "truncated"},
		{"trailing bytes", append(bytes.Clone(valid), 0), "trailing bytes"},
		{"wrong magic", append([]byte("PK\x03\x04xxxx"), valid[8:]...), "wrong magic"},
		{"newer version", reseal(ModelVersion+1, payload), "newer"},
		{"version 0", reseal(0, payload), "version 0"},
		{"flipped payload byte", flip(headerSize + 30), "checksum mismatch"},
		{"flipped checksum byte", flip(len(valid) - 3), "checksum mismatch"},
		{"huge payload length", func() []byte {
			b := bytes.Clone(valid)
			binary.LittleEndian.PutUint64(b[12:], math.MaxUint64)
			return b
		}(), "exceeds the limit"},
		{"k zero", withPayload(func(p []byte) []byte { binary.LittleEndian.PutUint32(p, 0); return p }), "k must be in"},
		{"k above |S|", withPayload(func(p []byte) []byte { binary.LittleEndian.PutUint32(p, 4); return p }), "k must be in"},
		{"NaN w*", withPayload(func(p []byte) []byte {
			binary.LittleEndian.PutUint64(p[4:], math.Float64bits(math.NaN()))
			return p
		}), "w* must be"},
		{"dims zero", withPayload(func(p []byte) []byte { binary.LittleEndian.PutUint32(p[12:], 0); return p }), "dims 0"},
		{"too many points", withPayload(func(p []byte) []byte { binary.LittleEndian.PutUint64(p[16:], 1<<40); return p }), "cannot fit"},
		{"unknown flag", withPayload(func(p []byte) []byte { binary.LittleEndian.PutUint32(p[24:], 6); return p }), "unknown flags"},
		{"payload short", withPayload(func(p []byte) []byte { return p[:len(p)-2] }), "payload ends inside points"},
		{"payload long", withPayload(func(p []byte) []byte { return append(p, 1, 2, 3, 4) }), "unread bytes"},
		{"NaN point", withPayload(func(p []byte) []byte {
			binary.LittleEndian.PutUint32(p[len(p)-4:], math.Float32bits(float32(math.NaN())))
			return p
		}), "non-finite"},
	}
	for _, c := range cases {
		m, err := Load(bytes.NewReader(c.data))
		if err == nil {
			t.Errorf("%s: loaded %+v", c.name, m)
			continue
		}
		if !errors.Is(err, ErrModelFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want ErrModelFormat mentioning %q", c.name, err, c.want)
		}
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestModelSaveRefusesInvalid(t *testing.T) {
	t.Parallel()
	bad := []*Model{
		{Features: nil, K: 1, Points: nil},
		{Features: []string{"a"}, K: 2, Points: [][]float32{{1}}},
		{Features: []string{"a", "b"}, K: 1, Points: [][]float32{{1}, {1, 2}}},
		{Features: []string{"a"}, K: 1, Points: [][]float32{{1}}, Offset: []float32{0}},
		{Features: []string{"a"}, K: 1, Points: [][]float32{{float32(math.Inf(1))}}},
		{Features: []string{"\xff"}, K: 1, Points: [][]float32{{1}}},
	}
	for i, m := range bad {
		if err := m.Save(&bytes.Buffer{}); err == nil {
			t.Errorf("model %d: saved an invalid model", i)
		}
	}
}

// FuzzLoad: Load must never panic, and whatever it accepts must be a valid model that
// survives a round trip. Each input is tried as a whole file and, resealed with a correct
// header and checksum, as a payload, so the fuzzer reaches the decoder behind the checksum.
func FuzzLoad(f *testing.F) {
	valid := encode(f, sampleModel())
	f.Add(valid)
	f.Add(valid[:len(valid)-7])
	f.Add(valid[headerSize : len(valid)-sha256.Size])
	f.Add([]byte(modelMagic))
	f.Add(append(bytes.Clone(valid), 9))
	f.Add(reseal(ModelVersion+3, nil))
	corrupt := bytes.Clone(valid)
	corrupt[headerSize+5] ^= 1
	f.Add(corrupt)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, reseal(ModelVersion, data)} {
			m, err := Load(bytes.NewReader(in))
			if err != nil {
				continue
			}
			if verr := m.Validate(); verr != nil {
				t.Fatalf("Load accepted an invalid model: %v", verr)
			}
			again, err := Load(bytes.NewReader(encode(t, m)))
			if err != nil {
				t.Fatalf("re-encoded model refused: %v", err)
			}
			if math.IsNaN(again.WStar) || again.K != m.K || len(again.Points[0]) != len(m.Points[0]) {
				t.Fatalf("round trip changed the model")
			}
		}
	})
}
