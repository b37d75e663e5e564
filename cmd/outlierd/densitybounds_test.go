package main

import (
	"strings"
	"testing"
)

// TestDensityWorkFlagsBounded: density --iterations 9223372036854775807 ran for ever (the
// clustering's passes, unbounded); --samples the same where a mode samples. Both are refused
// past the bounds the pipeline's detect.density keys share.
func TestDensityWorkFlagsBounded(t *testing.T) {
	input := writeFile(t, "d.csv", "a,b\n1,2\n2,3\n3,5\n4,4\n")
	for _, c := range []struct{ flag, value, want string }{
		{"--iterations", "9223372036854775807", "--iterations must be in [1, 1000], got 9223372036854775807"},
		{"--samples", "1000001", "--samples must be in [1, 1000000], got 1000001"},
	} {
		_, errs, code := outlierd(t, "density", "--input", input, "--device", "cpu", "--clusters", "2", c.flag, c.value)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%s %s: exit %d, stderr %q: want exit 2 and %q", c.flag, c.value, code, errs, c.want)
		}
	}
}
