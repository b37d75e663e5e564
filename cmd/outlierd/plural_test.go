package main

import (
	"regexp"
	"strings"
	"testing"
)

// oneWithPlural is a count of 1 with a plural noun: "the file has 1 rows", "1 dims".
var oneWithPlural = regexp.MustCompile(`\b1 (rows|records|dims|fields|feature columns|outliers|iterations|copies|cores|points|messages|models|occupied cells|anomalies)\b`)

// TestOneIsSingular: a count of one is said with its noun in the singular, in what the batch
// commands print on stdout and stderr: followDown's line of a one-row file said "the file has 1
// rows", a one-feature file's summary "1 dims", a one-field line "ragged row: 1 fields".
func TestOneIsSingular(t *testing.T) {
	if got := plural(1, "copy", "copies") + ", " + plural(0, "copy", "copies") + ", " + plural(int64(2), "row", "rows"); got != "1 copy, 0 copies, 2 rows" {
		t.Errorf("plural: %q", got)
	}
	oneRow := writeFile(t, "one.csv", "a,b\n1,2\n")
	oneCol := writeFile(t, "col.csv", "x\n1\n2\n3\n4\n5\n6\n")
	ragged := writeFile(t, "ragged.csv", "a,b\n1,2\n3\n")
	for _, args := range [][]string{
		{"density", "--input", oneRow},             // --clusters lowered: the file has 1 row
		{"proclus", "--input", oneCol, "--k", "2"}, // --l lowered: the file has 1 feature column
		{"topn", "--input", oneCol, "--k", "2", "--n", "1"},
		{"density", "--input", oneCol},
		{"hypercube", "--input", oneCol},
		{"proclus", "--input", oneCol, "--k", "2", "--l", "1"},
		{"replay", "--input", oneCol},
		{"density", "--input", ragged},
		{"replay", "--input", ragged},
	} {
		out, errs, _ := outlierd(t, append(args, "--device", "cpu")...)
		if m := oneWithPlural.FindString(out + errs); m != "" {
			t.Errorf("%v: %q in\n%s%s", args, m, out, errs)
		}
		if !strings.Contains(out+errs, "1 ") {
			t.Errorf("%v: no count of one to check in\n%s%s", args, out, errs)
		}
	}
}
