package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputFileCheckedBeforeTheWork: an output file that cannot be written (its directory
// missing, or a directory itself) was found only after the work, when it was created: a long
// replay, topn or proclus ran to its end, then failed, its result lost. Each command now refuses
// it before reading the input: here the input's own error (row 3 is not a number) would come
// first were the input read.
func TestOutputFileCheckedBeforeTheWork(t *testing.T) {
	input := writeFile(t, "bad.csv", "a,b\n1,2\n3,x\n4,5\n")
	dir := t.TempDir()
	for _, out := range []string{filepath.Join(dir, "missing", "out.csv"), dir} {
		for _, c := range []struct{ cmd, flag string }{
			{"replay", "--verdicts-out"}, {"topn", "--model-out"}, {"density", "--scores-out"},
			{"hypercube", "--scores-out"}, {"proclus", "--assignments-out"},
		} {
			_, errs, code := outlierd(t, c.cmd, "--input", input, "--device", "cpu", c.flag, out)
			if code == 0 || !strings.Contains(errs, c.flag+": open "+out+": ") || strings.Contains(errs, "not a number") {
				t.Errorf("%s %s %s: exit %d, stderr %q: want the output refused before the input is read", c.cmd, c.flag, out, code, errs)
			}
		}
	}
}
