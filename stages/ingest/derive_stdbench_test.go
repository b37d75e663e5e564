package ingest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkDeriveStd: the derive step per record with one std over a full window (prefilled
// before the clock starts: BenchmarkDeriveApply's std cases time windows still filling), at
// last 64, 1440 (a day of minutes), 10080 (a week) and 100000 (the range's end), keys round
// robin (1000 at 64, fewer where the windows are longer: 100000 values held in all, one key at
// 100000), values 70 +- 2; with uncertainty at 64 and 1440 ("sd").
func BenchmarkDeriveStd(b *testing.B) { benchRolling(b, "std", "") }

// BenchmarkDeriveMean: the same for one plain mean (exact sums since trimmean27; float64 sums
// before).
func BenchmarkDeriveMean(b *testing.B) { benchRolling(b, "mean", "") }

// BenchmarkDeriveMeanTrim: the same for one mean with trim 2 (exact sums and std's extremes).
func BenchmarkDeriveMeanTrim(b *testing.B) { benchRolling(b, "mean", ", trim: 2") }

// benchRolling is BenchmarkDeriveStd's cases for the rolling kind `kind`, its other keys (", k:
// v") after `last`.
func benchRolling(b *testing.B, kind, more string) {
	for _, c := range []struct {
		last   int
		withSD bool
	}{{64, false}, {1440, false}, {10080, false}, {100000, false}, {64, true}, {1440, true}} {
		name := fmt.Sprint("last", c.last)
		if c.withSD {
			name += "sd"
		}
		b.Run(name, func(b *testing.B) {
			yaml := fmt.Sprintf("derive:\n  max_keys: 1000\n  features: [{kind: %s, of: temp, last: %d%s}]\n", kind, c.last, more)
			if c.withSD {
				yaml = "uncertainty: {suffix: _sd}\n" + yaml
			}
			cfg := deriveConfig(b, yaml)
			d := mustDeriver(b, cfg)
			nk := max(1, min(1000, 100000/c.last))
			keys := make([][]byte, nk)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "sensor-%d", i)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			vals := make([]float32, 4096)
			for i := range vals {
				vals[i] = float32(70 + 2*rng.NormFloat64())
			}
			in := &Decoded{Values: make([]float32, 1), SD: make([]float32, 1)}
			in.SD[0] = 0.1
			var off int64
			step := func() {
				in.Values[0] = vals[off&4095]
				d.Apply(in, 0, off, keys[off%int64(nk)], monday6.Add(time.Duration(off)*time.Second))
				off++
			}
			for range nk * c.last { // every window full
				step()
			}
			for b.Loop() {
				step()
			}
		})
	}
}
