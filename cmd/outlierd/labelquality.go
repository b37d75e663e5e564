package main

import "github.com/outlierd/outlierd/internal/algo/quality"

// labelQuality is the figures measured against --label-column that density, predict, replay,
// topn and hypercube report, embedded in their JSON objects: encoding/json writes an embedded
// struct's fields in place, in this order, so each object reads as if they were its own. All nil
// (left out) without labels; topn and hypercube, which report no flags' precision, set ROCAUC
// alone.
type labelQuality struct {
	Precision *float64 `json:"precision,omitempty"`
	Recall    *float64 `json:"recall,omitempty"`
	F1        *float64 `json:"f1,omitempty"` // predict's JSON has never had it: nil there
	ROCAUC    *float64 `json:"roc_auc,omitempty"`
}

// setCounts sets the precision, recall and F1 of the flags' confusion c.
func (q *labelQuality) setCounts(c quality.Confusion) {
	p, r, f := c.Precision(), c.Recall(), c.F1()
	q.Precision, q.Recall, q.F1 = &p, &r, &f
}
