package main

import (
	"errors"
	"strings"
	"testing"
)

// failingWriter is a stdout that refuses every write, as a full disk (/dev/full) does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestStdoutWriteFailureFails: replay's, hypercube's, proclus' and density's text reports went
// to a stdout that refused them and the command exited 0 (`outlierd replay ... > report.txt` on
// a full disk: an empty report, status 0); their --json, gen and topn said so, exit 1. Every
// command's failed stdout write is now its failure.
func TestStdoutWriteFailureFails(t *testing.T) {
	var b strings.Builder
	b.WriteString("a,b\n")
	for i := range 40 {
		b.WriteString(strings.Repeat("1", 1+i%3) + "," + strings.Repeat("2", 1+i%5) + "\n")
	}
	input := writeFile(t, "small.csv", b.String())
	for _, args := range [][]string{
		{"replay", "--input", input, "--device", "cpu"},
		{"hypercube", "--input", input, "--device", "cpu"},
		{"proclus", "--input", input, "--device", "cpu", "--k", "2", "--l", "1"},
		{"density", "--input", input, "--device", "cpu", "--clusters", "5"},
	} {
		var stderr strings.Builder
		code := run(args, failingWriter{}, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "no space left on device") {
			t.Errorf("%v to a stdout that refuses writes: exit %d, stderr %q: want exit 1 naming the write's error", args, code, stderr.String())
		}
	}
}
