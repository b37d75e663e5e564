package ingest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stateYAML has every kind that keeps a series (diff, robust_z, mean plain and trimmed, std), with
// uncertainty.
const stateYAML = `uncertainty: {suffix: _sd}
derive:
  features:
    - {kind: diff, of: temp}
    - {kind: robust_z, of: temp, last: 8, min_values: 3}
    - {kind: mean, of: temp, last: 12}
    - {kind: mean, of: temp, last: 10, trim: 2}
    - {kind: std, of: temp, last: 40}
`

// stateStream is n records of 7 keys (bytes that are not UTF-8) over partitions 199-201, offsets per partition from 0, values
// noise with spikes (so that std's extremes move), sds positive.
func stateStream(n int) (recs []rec, sds []float32) {
	r := rand.New(rand.NewPCG(27, 7))
	next := map[int32]int64{}
	for range n {
		p := int32(r.IntN(3)) + 199 // (partition 200's id is not UTF-8, nor are the keys)
		v := float32(r.NormFloat64())
		if r.IntN(20) == 0 {
			v *= 30
		}
		recs = append(recs, rec{p: p, off: next[p], key: fmt.Sprintf("k\xff%d", r.IntN(7)), temp: v, ts: monday6})
		sds = append(sds, float32(0.1+r.Float64()))
		next[p]++
	}
	return recs, sds
}

// applySD is applyAll with uncertainties: each record's values and sds, and its warming flags.
func applySD(d *Deriver, recs []rec, sds []float32) (vals, sd [][]float32, warm [][]bool) {
	in := &Decoded{Values: make([]float32, 1), SD: make([]float32, 1)}
	for i, r := range recs {
		in.Values[0], in.SD[0] = r.temp, sds[i]
		o := d.Apply(in, r.p, r.off, []byte(r.key), r.ts)
		vals, sd, warm = append(vals, slices.Clone(o.Values)), append(sd, slices.Clone(o.SD)), append(warm, slices.Clone(o.Warming))
	}
	return vals, sd, warm
}

// TestDeriveStateRoundTrip: a Deriver loaded from the state another saved after n records
// continues exactly as that one does (values, uncertainties, warming flags), every kind.
func TestDeriveStateRoundTrip(t *testing.T) {
	c := deriveConfig(t, stateYAML)
	recs, sds := stateStream(600)
	const cut = 350
	a := mustDeriver(t, c)
	applySD(a, recs[:cut], sds[:cut])
	dir := t.TempDir()
	st, err := a.SaveState(context.Background(), dir)
	if err != nil || st.Keys != a.Keys() || st.Skipped != 0 {
		t.Fatalf("save: %+v %v (%d keys held)", st, err, a.Keys())
	}
	b := mustDeriver(t, c)
	keys, ok, err := b.LoadState(context.Background(), dir)
	if err != nil || !ok || keys != a.Keys() {
		t.Fatalf("load: %d keys, %v, %v; want %d", keys, ok, err, a.Keys())
	}
	wv, ws, ww := applySD(a, recs[cut:], sds[cut:])
	gv, gs, gw := applySD(b, recs[cut:], sds[cut:])
	for i := range wv {
		if !slices.Equal(gv[i], wv[i]) || !slices.Equal(gs[i], ws[i]) || !slices.Equal(gw[i], ww[i]) {
			t.Fatalf("record %d after the load: %v %v %v, uninterrupted %v %v %v", cut+i, gv[i], gs[i], gw[i], wv[i], ws[i], ww[i])
		}
	}
}

// TestDeriveStateRedelivered: after a load, the records at or below each partition's saved
// offset (read again: Kafka's at least once) are not counted twice: the records after them get
// an uninterrupted run's values. Without the watermark (derive_state.go) they were applied a
// second time, in their windows twice, which failed first.
func TestDeriveStateRedelivered(t *testing.T) {
	c := deriveConfig(t, stateYAML)
	recs, sds := stateStream(600)
	const cut, again = 350, 40 // the last `again` records before the save are delivered again
	a := mustDeriver(t, c)
	applySD(a, recs[:cut], sds[:cut])
	dir := t.TempDir()
	if _, err := a.SaveState(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	b := mustDeriver(t, c)
	if _, ok, err := b.LoadState(context.Background(), dir); !ok || err != nil {
		t.Fatal(ok, err)
	}
	applySD(b, recs[cut-again:cut], sds[cut-again:cut])
	wv, _, _ := applySD(a, recs[cut:], sds[cut:])
	gv, _, _ := applySD(b, recs[cut:], sds[cut:])
	for i := range wv {
		if !slices.Equal(gv[i], wv[i]) {
			t.Fatalf("record %d after the re-delivered ones: %v, uninterrupted %v", cut+i, gv[i], wv[i])
		}
	}
}

// TestDeriveStateRefused: a file that is corrupt, truncated, of a newer format or saved under
// other definitions (a std's last changed, uncertainty dropped, another timezone) is refused with
// ErrDeriveState and leaves the Deriver cold; no file is no state and no error.
func TestDeriveStateRefused(t *testing.T) {
	c := deriveConfig(t, stateYAML)
	recs, sds := stateStream(200)
	a := mustDeriver(t, c)
	applySD(a, recs, sds)
	dir := t.TempDir()
	if _, err := a.SaveState(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, DeriveStateFileName)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	load := func(c Config, b []byte) (*Deriver, error) {
		d := mustDeriver(t, c)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, ok, err := d.LoadState(context.Background(), dir)
		if ok || d.Keys() != 0 {
			t.Errorf("loaded %d keys (ok %v), want a cold start", d.Keys(), ok)
		}
		return d, err
	}
	spoil := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	for name, b := range map[string][]byte{
		"corrupt":   spoil(func(b []byte) []byte { b[len(b)/2] ^= 1; return b }),
		"truncated": spoil(func(b []byte) []byte { return b[:len(b)-40] }),
		"newer":     spoil(func(b []byte) []byte { b[8] = DeriveStateFormat + 1; return b }),
		"magic":     spoil(func(b []byte) []byte { b[1] = 'X'; return b }),
	} {
		if _, err := load(c, b); !errors.Is(err, ErrDeriveState) {
			t.Errorf("%s: %v, want ErrDeriveState", name, err)
		}
	}
	for name, yaml := range map[string]string{
		"last":        "uncertainty: {suffix: _sd}\nderive:\n  features:\n    - {kind: diff, of: temp}\n    - {kind: robust_z, of: temp, last: 8, min_values: 3}\n    - {kind: mean, of: temp, last: 12}\n    - {kind: mean, of: temp, last: 10, trim: 2}\n    - {kind: std, of: temp, last: 41}\n",
		"uncertainty": "derive:\n  features:\n    - {kind: diff, of: temp}\n    - {kind: robust_z, of: temp, last: 8, min_values: 3}\n    - {kind: mean, of: temp, last: 12}\n    - {kind: mean, of: temp, last: 10, trim: 2}\n    - {kind: std, of: temp, last: 40}\n",
		"timezone":    stateYAML + "  timezone: Europe/Berlin\n",
		"trim":        strings.Replace(stateYAML, "trim: 2", "trim: 0", 1),
		"min_values":  "uncertainty: {suffix: _sd}\nderive:\n  features:\n    - {kind: diff, of: temp}\n    - {kind: robust_z, of: temp, last: 8, min_values: 4}\n    - {kind: mean, of: temp, last: 12}\n    - {kind: mean, of: temp, last: 10, trim: 2}\n    - {kind: std, of: temp, last: 40}\n",
	} {
		if _, err := load(deriveConfig(t, yaml), good); !errors.Is(err, ErrDeriveState) {
			t.Errorf("definitions changed (%s): %v, want ErrDeriveState", name, err)
		}
	}
	os.Remove(path)
	if _, ok, err := mustDeriver(t, c).LoadState(context.Background(), dir); ok || err != nil {
		t.Errorf("no file: %v %v, want nothing loaded and no error", ok, err)
	}
}

// TestDeriveStateMaxKeysLowered: a state of more series than derive.max_keys now allows keeps the
// most recent ones.
func TestDeriveStateMaxKeysLowered(t *testing.T) {
	c := deriveConfig(t, stateYAML)
	a := mustDeriver(t, c)
	var recs []rec
	for i := range 10 {
		recs = append(recs, rec{off: int64(i), key: fmt.Sprint(i), temp: float32(i), ts: monday6})
	}
	applySD(a, recs, make([]float32, len(recs)))
	dir := t.TempDir()
	if _, err := a.SaveState(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	c.Derive.MaxKeys = 4
	b := mustDeriver(t, c)
	if n, ok, err := b.LoadState(context.Background(), dir); n != 4 || !ok || err != nil {
		t.Fatalf("%d keys loaded, %v %v; want 4", n, ok, err)
	}
	for i := 6; i < 10; i++ {
		if _, ok := b.series["\x00\x00\x00\x00"+fmt.Sprint(i)]; !ok {
			t.Errorf("key %d (of the 4 most recent) not loaded", i)
		}
	}
}

// BenchmarkDeriveStateSave and BenchmarkDeriveStateLoad: the derive state of 10,000 keys (a std,
// a mean and a robust_z over 60, a diff; keys of 8 bytes) encoded and written (fsync included),
// and read back; bytes/key against StateBound's per key.
func BenchmarkDeriveStateSave(b *testing.B) { benchDeriveState(b, false) }
func BenchmarkDeriveStateLoad(b *testing.B) { benchDeriveState(b, true) }

func benchDeriveState(b *testing.B, load bool) {
	const keys = 10000
	c := deriveConfig(b, "derive:\n  max_keys: 10000\n  features:\n    - {kind: diff, of: temp}\n    - {kind: robust_z, of: temp, last: 60}\n    - {kind: mean, of: temp, last: 60}\n    - {kind: std, of: temp, last: 60}\n")
	d := mustDeriver(b, c)
	in := &Decoded{Values: make([]float32, 1)}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range keys * 64 {
		in.Values[0] = float32(r.NormFloat64())
		d.Apply(in, 0, int64(i), fmt.Appendf(nil, "key%05d", i%keys), monday6)
	}
	dir := b.TempDir()
	st, err := d.SaveState(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if load {
			if _, _, err := mustDeriver(b, c).LoadState(context.Background(), dir); err != nil {
				b.Fatal(err)
			}
		} else if _, err := d.SaveState(context.Background(), dir); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.Bytes)/keys, "bytes/key")
	b.ReportMetric(float64(d.StateBound(8))/keys, "bound_bytes/key")
}
