package ingest

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDeriveGolden: the Deriver's diff and robust_z:60 of a fixed series, bit for bit, against
// docs/bench/derive_golden.csv, which docs/bench/unseen.py's derive_columns() wrote: the
// benchmark's peers get these columns computed in Python (`unseen.py --peer-derive`,
// docs/BENCHMARKS.md §12.33), and a change to the derivation here must be made there too (then
// the file rewritten: `unseen.py --check-derive` checks the Python side). The series walks the
// filling history, ties where MAD is 0 and the mean absolute deviation is not, a history without
// spread (+-1e6), a spike and values that float32 rounds.
func TestDeriveGolden(t *testing.T) {
	text, err := os.ReadFile("../../docs/bench/derive_golden.csv")
	if err != nil {
		t.Fatal(err)
	}
	c := deriveConfig(t, `derive:
  features:
    - {kind: diff, of: temp}
    - {kind: robust_z, of: temp, last: 60}
`)
	d := mustDeriver(t, c)
	in := &Decoded{Values: make([]float32, 1)}
	rows := 0
	for n, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "x,") {
			continue
		}
		f := strings.Split(line, ",")
		x, err := strconv.ParseFloat(f[0], 64)
		if err != nil || len(f) != 3 {
			t.Fatalf("line %d: %q", n+1, line)
		}
		in.Values[0] = float32(x) // as the decoder stores a parsed number
		out := d.Apply(in, 0, int64(rows), nil, time.Time{}).Values
		for j, name := range []string{"diff", "rz60"} {
			want, err := strconv.ParseUint(f[1+j], 16, 32)
			if err != nil {
				t.Fatalf("line %d: %v", n+1, err)
			}
			if got := math.Float32bits(out[1+j]); got != uint32(want) {
				t.Errorf("line %d (x %s): %s %v (bits %08x), the file's %v (%08x)", n+1, f[0], name,
					out[1+j], got, math.Float32frombits(uint32(want)), want)
			}
		}
		rows++
	}
	if rows != 600 {
		t.Fatalf("%d rows, want 600", rows)
	}
}
