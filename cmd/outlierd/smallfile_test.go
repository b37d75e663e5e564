package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestBatchDefaultsFollowSmallFiles: the batch commands' size defaults are made for larger
// files, and a small one was refused for a flag the command line never gave: `outlierd density`
// on 20 rows "--clusters must be in [1, rows=20], got 200", `topn` "k must be < rows: k=50,
// rows=20", `proclus --input data/sensors.csv` (the README's sample, 4 features) "l must be in
// [1, 4], got 5". A default the file cannot take is now lowered to what it can, and stderr says
// so; a value given on the command line is still checked and refused, in one line.
func TestBatchDefaultsFollowSmallFiles(t *testing.T) {
	var b strings.Builder
	b.WriteString("a,b\n")
	for i := range 20 {
		fmt.Fprintf(&b, "%d,%d\n", i%7, (i*3)%11)
	}
	path := writeFile(t, "small.csv", b.String())
	for _, c := range []struct {
		args []string
		note string
	}{
		{[]string{"topn"}, "--k 50 (the default) is lowered to 19"},
		{[]string{"density"}, "--clusters 200 (the default) is lowered to 20"},
		{[]string{"proclus"}, "--l 5 (the default) is lowered to 2"},
	} {
		args := append(append([]string{}, c.args...), "--input", path, "--device", "cpu", "--json")
		out, errs, code := outlierd(t, args...)
		if code != 0 || !strings.Contains(errs, c.note) || !strings.HasPrefix(out, "{") {
			t.Errorf("%v: exit %d, stderr %q: want exit 0 and %q", c.args, code, errs, c.note)
		}
	}
	// Given, a value the file cannot take is refused, every problem on the one line.
	_, errs, code := outlierd(t, "topn", "--input", path, "--device", "cpu", "--k", "50", "--n", "30")
	msg := strings.TrimSpace(errs[strings.Index(errs, "outlierd topn:"):])
	if code != 2 || strings.Contains(msg, "\n") || !strings.Contains(msg, "k must be < rows") || !strings.Contains(msg, "n must be <= rows") {
		t.Errorf("topn --k 50 --n 30 on 20 rows: exit %d, stderr %q: want exit 2 and both problems on one line", code, errs)
	}
}
