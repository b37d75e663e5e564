// Package csvfile reads a numeric CSV file with a header row into the column-major float32
// layout that the detectors use. It is the batch (file) counterpart of the Kafka decoders.
//
// Every problem is reported as "file:line:column: what", line and column 1-based, the column
// being the byte position in the line (as an editor shows it) followed by the header name.
package csvfile

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// Table is a CSV file's numeric content, column-major.
type Table struct {
	// Path is the file the table was read from (used in messages).
	Path string
	// Features are the names of the feature columns, in file order.
	Features []string
	// Cols holds the feature values: Cols[j][i] is data row i (header excluded) of feature j.
	Cols [][]float32
	// LabelName is the label column's name, "" when none was asked for.
	LabelName string
	// Label holds the label column's values (nil when none); a non-zero label marks an outlier.
	Label []float64
}

// Rows is the number of data rows.
func (t *Table) Rows() int {
	if len(t.Cols) == 0 {
		if t.Label != nil {
			return len(t.Label)
		}
		return 0
	}
	return len(t.Cols[0])
}

// Outliers returns the label column as booleans (non-zero = outlier), or nil without labels.
func (t *Table) Outliers() []bool {
	if t.Label == nil {
		return nil
	}
	out := make([]bool, len(t.Label))
	for i, v := range t.Label {
		out[i] = v != 0
	}
	return out
}

// Error is a problem at a place in a CSV file.
type Error struct {
	Path         string
	Line, Column int // 1-based; 0 when the problem is not at one place
	Msg          string
}

func (e *Error) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("%s: %s", e.Path, e.Msg)
	case e.Column == 0:
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.Path, e.Line, e.Column, e.Msg)
}

// ReadFile reads path; labelColumn, if not empty, names a column that is read as the label
// and is not a feature.
func ReadFile(path, labelColumn string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Path: path, Msg: fmt.Sprintf("cannot open: %v", unwrapPathErr(err))}
	}
	defer f.Close()
	return Read(f, path, labelColumn)
}

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// utf8BOM is the byte order mark a spreadsheet's "CSV UTF-8" export begins with.
const utf8BOM = "\ufeff"

// SkipBOM is r without a leading UTF-8 byte order mark: left in, it would be part of the
// first column's name ("\ufefftemp", shown as "temp"), which then names nothing.
func SkipBOM(r io.Reader) io.Reader {
	br := bufio.NewReader(r)
	if p, err := br.Peek(len(utf8BOM)); err == nil && string(p) == utf8BOM {
		_, _ = br.Discard(len(utf8BOM))
	}
	return br
}

// Read reads CSV from r (a leading byte order mark skipped); name is used in messages.
func Read(r io.Reader, name, labelColumn string) (*Table, error) {
	cr := csv.NewReader(SkipBOM(r))
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1 // ragged rows get our own message, with the expected count
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &Error{Path: name, Msg: "empty file: expected a header row"}
	}
	if err != nil {
		return nil, csvErr(name, err)
	}
	header = append([]string(nil), header...)
	t := &Table{Path: name, LabelName: labelColumn}
	labelIdx := -1
	seen := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		header[i] = h
		line, col := cr.FieldPos(i)
		if h == "" {
			return nil, &Error{Path: name, Line: line, Column: col, Msg: fmt.Sprintf("header column %d has no name", i+1)}
		}
		if prev, dup := seen[h]; dup {
			return nil, &Error{Path: name, Line: line, Column: col, Msg: fmt.Sprintf("header name %q repeats column %d", h, prev+1)}
		}
		seen[h] = i
		if h == labelColumn {
			labelIdx = i
		} else {
			t.Features = append(t.Features, h)
		}
	}
	if labelColumn != "" && labelIdx < 0 {
		return nil, &Error{Path: name, Line: 1, Msg: fmt.Sprintf("label column %q not in the header (columns: %s)", labelColumn, strings.Join(header, ", "))}
	}
	if len(t.Features) == 0 {
		return nil, &Error{Path: name, Line: 1, Msg: "no feature columns"}
	}
	t.Cols = make([][]float32, len(t.Features))
	if labelIdx >= 0 {
		t.Label = []float64{}
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvErr(name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" && len(header) > 1 {
			continue // a blank line (encoding/csv already skips truly empty ones)
		}
		if len(rec) != len(header) {
			return nil, &Error{Path: name, Line: line, Msg: fmt.Sprintf("ragged row: %d %s, the header has %d", len(rec), fieldsNoun(len(rec)), len(header))}
		}
		j := 0
		for i, cell := range rec {
			v, msg := parseCell(cell)
			if msg != "" {
				l, c := cr.FieldPos(i)
				return nil, &Error{Path: name, Line: l, Column: c, Msg: fmt.Sprintf("column %q: %s", header[i], msg)}
			}
			if i == labelIdx {
				t.Label = append(t.Label, v)
				continue
			}
			t.Cols[j] = append(t.Cols[j], float32(v))
			j++
		}
	}
	if t.Rows() == 0 {
		return nil, &Error{Path: name, Msg: "header only: no data rows"}
	}
	return t, nil
}

// parseCell parses one numeric cell; it refuses what a float32 feature cannot hold.
func parseCell(cell string) (float64, string) {
	s := strings.TrimSpace(cell)
	if s == "" {
		return 0, "empty cell"
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, fmt.Sprintf("%q is out of range", s)
		}
		return 0, fmt.Sprintf("not a number: %q", s)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Sprintf("%q is not a finite number", s)
	}
	if math.Abs(v) > math.MaxFloat32 {
		return 0, fmt.Sprintf("%q is out of float32 range", s)
	}
	return v, ""
}

func csvErr(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &Error{Path: name, Line: pe.Line, Column: pe.Column, Msg: pe.Err.Error()}
	}
	return &Error{Path: name, Msg: err.Error()}
}

// SplitUncertainty separates uncertainty columns from features: a column named
// "<feature><suffix>" whose "<feature>" is also a column becomes that feature's uncertainty.
// It returns the remaining features, their values and, row-aligned, their uncertainty
// columns (nil entries for features without one; sds is nil when no feature has one).
// A negative uncertainty is an error with its row.
func (t *Table) SplitUncertainty(suffix string) (features []string, means, sds [][]float32, err error) {
	idx := map[string]int{}
	for j, f := range t.Features {
		idx[f] = j
	}
	isSD := make([]bool, len(t.Features))
	sdOf := map[int]int{}
	if suffix != "" {
		for j, f := range t.Features {
			base, ok := strings.CutSuffix(f, suffix)
			if !ok {
				continue
			}
			if b, ok := idx[base]; ok {
				isSD[j] = true
				sdOf[b] = j
			}
		}
	}
	for j, f := range t.Features {
		if isSD[j] {
			continue
		}
		features = append(features, f)
		means = append(means, t.Cols[j])
	}
	if len(sdOf) == 0 {
		return features, means, nil, nil
	}
	for _, f := range features {
		b := idx[f]
		sj, ok := sdOf[b]
		if !ok {
			sds = append(sds, nil)
			continue
		}
		for i, v := range t.Cols[sj] {
			if v < 0 {
				return nil, nil, nil, &Error{Path: t.Path, Msg: fmt.Sprintf("data row %d, column %q: negative uncertainty %g", i+1, t.Features[sj], v)}
			}
		}
		sds = append(sds, t.Cols[sj])
	}
	return features, means, sds, nil
}

// fieldsNoun is "field" for 1, else "fields" (a row of one field said "1 fields").
func fieldsNoun(n int) string {
	if n == 1 {
		return "field"
	}
	return "fields"
}
