package main

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/outlierd/outlierd/internal/algo/quality"
)

// labelQuality is the figures measured against --label-column that density, predict, replay,
// topn and hypercube report, embedded in their JSON objects: encoding/json writes an embedded
// struct's fields in place, in this order, so each object reads as if they were its own. All nil
// (left out) without labels; topn and hypercube, which report no flags' precision, set ROCAUC
// alone.
//
// With labels each figure a command reports is there, a number, or null where the labels leave
// it undefined (it read 0, while replay's stderr said recall was undefined): recall with no row
// labelled an outlier, precision with no row flagged, F1 with neither (F1 is 2TP/(2TP+FP+FN),
// so 0 where one side is empty and the other not: scikit-learn's definition), ROC AUC and
// average precision without both kinds of label. A reader tells "not measured" (no
// --label-column: the key is left out) from "not defined" (null), and an average over runs
// cannot take an undefined figure for a 0.
type labelQuality struct {
	Precision *figure `json:"precision,omitempty"`
	Recall    *figure `json:"recall,omitempty"`
	F1        *figure `json:"f1,omitempty"` // predict's JSON has never had it: nil there
	ROCAUC    *figure `json:"roc_auc,omitempty"`
}

// setCounts sets the precision, recall and F1 of the flags' confusion c, NaN (null) where c
// leaves them undefined.
func (q *labelQuality) setCounts(c quality.Confusion) {
	p, r, f := math.NaN(), math.NaN(), math.NaN()
	if c.TP+c.FP > 0 {
		p = c.Precision()
	}
	if c.TP+c.FN > 0 {
		r = c.Recall()
	}
	if c.TP+c.FP+c.FN > 0 {
		f = c.F1() // (0 when one side is empty: TP is 0 then)
	}
	q.Precision, q.Recall, q.F1 = fig(p), fig(r), fig(f)
}

// figure is a figure measured against the labels, as the --json objects write it: a number, or
// null where it is not defined (NaN or ±Inf here; JSON has no number for them).
type figure float64

// MarshalJSON writes f as encoding/json writes a float64, or null.
func (f figure) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(v)
}

// fig is v as a reported figure: never nil, so the key is written; null when v is not finite.
func fig(v float64) *figure {
	f := figure(v)
	return &f
}

// defined reports whether f is a figure with a value (not left out, not null).
func (f *figure) defined() bool {
	return f != nil && !math.IsNaN(float64(*f)) && !math.IsInf(float64(*f), 0)
}

// fmtOpt is a figure for the text output at 4 decimals, "n/a" when not defined.
func fmtOpt(v *figure) string {
	if !v.defined() {
		return "n/a"
	}
	return strconv.FormatFloat(float64(*v), 'f', 4, 64)
}

// fmtFigure is a figure for the text output at 3 decimals, "n/a" when not defined.
func fmtFigure(v *figure) string {
	if !v.defined() {
		return "n/a"
	}
	return strconv.FormatFloat(float64(*v), 'f', 3, 64)
}
