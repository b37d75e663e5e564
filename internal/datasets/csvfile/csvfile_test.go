package csvfile

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadGood(t *testing.T) {
	in := "a,b,label\n1,2,0\n3.5,-4e2,1\n\n 5 , 6 ,0\n"
	tab, err := Read(strings.NewReader(in), "x.csv", "label")
	if err != nil {
		t.Fatal(err)
	}
	if tab.Rows() != 3 || len(tab.Features) != 2 || tab.Features[1] != "b" {
		t.Fatalf("shape: rows %d features %v", tab.Rows(), tab.Features)
	}
	if tab.Cols[1][1] != -400 || tab.Cols[0][2] != 5 || tab.Label[1] != 1 {
		t.Fatalf("values: %v %v", tab.Cols, tab.Label)
	}
	if o := tab.Outliers(); !o[1] || o[0] {
		t.Fatalf("outliers: %v", o)
	}
}

func TestReadErrors(t *testing.T) {
	cases := []struct{ name, in, label, want string }{
		{"empty", "", "", "x.csv: empty file"},
		{"header only", "a,b\n", "", "x.csv: header only"},
		{"non-numeric", "a,b\n1,2\n3,abc\n", "", `x.csv:3:3: column "b": not a number: "abc"`},
		{"nan", "a,b\n1,NaN\n", "", `x.csv:2:3: column "b": "NaN" is not a finite number`},
		{"inf", "a,b\n+Inf,1\n", "", `x.csv:2:1: column "a": "+Inf" is not a finite number`},
		{"float32 overflow", "a\n1e39\n", "", `x.csv:2:1: column "a": "1e39" is out of float32 range`},
		{"ragged", "a,b\n1,2\n1,2,3\n", "", "x.csv:3: ragged row: 3 fields, the header has 2"},
		{"unknown label", "a,b\n1,2\n", "y", `x.csv:1: label column "y" not in the header`},
		{"empty cell", "a,b\n1,\n", "", `x.csv:2:3: column "b": empty cell`},
		{"duplicate header", "a,a\n1,2\n", "", `x.csv:1:3: header name "a" repeats column 1`},
		{"only label", "y\n1\n", "y", "x.csv:1: no feature columns"},
		{"bad quote", "a,b\n1,\"2\n", "", "x.csv:2:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.in), "x.csv", c.label)
			if err == nil {
				t.Fatalf("accepted %q", c.in)
			}
			if !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("got %q, want prefix %q", err, c.want)
			}
		})
	}
}

func TestReadFileMissing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope.csv")
	_, err := ReadFile(p, "")
	if err == nil || !strings.Contains(err.Error(), p+": cannot open") {
		t.Fatalf("got %v", err)
	}
}

func TestSplitUncertainty(t *testing.T) {
	in := "t,t_sd,p,label\n1,0.1,5,0\n2,0.2,6,1\n"
	tab, err := Read(strings.NewReader(in), "u.csv", "label")
	if err != nil {
		t.Fatal(err)
	}
	f, m, sd, err := tab.SplitUncertainty("_sd")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(f, ",") != "t,p" || m[1][1] != 6 || sd[0][1] != 0.2 || sd[1] != nil {
		t.Fatalf("features %v means %v sds %v", f, m, sd)
	}
	neg, _ := Read(strings.NewReader("t,t_sd\n1,-1\n"), "n.csv", "")
	if _, _, _, err := neg.SplitUncertainty("_sd"); err == nil || !strings.Contains(err.Error(), "negative uncertainty") {
		t.Fatalf("negative sd: %v", err)
	}
}

func TestReadSharedData(t *testing.T) {
	p := "../../../../shared/data/wdbc.csv"
	if _, err := os.Stat(p); err != nil {
		t.Skip("shared data not beside the checkout")
	}
	tab, err := ReadFile(p, "label")
	if err != nil {
		t.Fatal(err)
	}
	// The data README: wdbc is 367 rows, 30 features, 10 outliers.
	n := 0
	for _, o := range tab.Outliers() {
		if o {
			n++
		}
	}
	if tab.Rows() != 367 || len(tab.Features) != 30 || n != 10 {
		t.Fatalf("wdbc: %d rows, %d features, %d outliers", tab.Rows(), len(tab.Features), n)
	}
}

// FuzzRead: whatever the bytes, Read returns a table or an *Error, never panics, and an
// accepted table is rectangular with finite values.
func FuzzRead(f *testing.F) {
	for _, s := range []string{"a,b\n1,2\n", "a,label\n1,0\n2,1\n", "\"a\",b\n\"1\",2\n", "a\n1e39\n", "a,b\n1\n", ""} {
		f.Add([]byte(s), "label")
	}
	f.Fuzz(func(t *testing.T, data []byte, label string) {
		tab, err := Read(strings.NewReader(string(data)), "f.csv", label)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		rows := tab.Rows()
		for _, c := range tab.Cols {
			if len(c) != rows {
				t.Fatal("ragged table accepted")
			}
			for _, v := range c {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("non-finite value %v accepted", v)
				}
			}
		}
	})
}
