package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// topKeys returns the top-level keys of the JSON object js, in order.
func topKeys(t *testing.T, js []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Join(keys, ",")
}

// TestLabelQualityKeyOrder: the embedded labelQuality puts its figures where each command's JSON
// always had them (the order of keys is part of the output people diff), F1 left out of
// predict's, and none of them without labels.
func TestLabelQualityKeyOrder(t *testing.T) {
	one := 1.0
	q := labelQuality{Precision: &one, Recall: &one, F1: &one, ROCAUC: &one}
	noF1 := q
	noF1.F1 = nil
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"density", densityOutput{labelQuality: q},
			"mode,granularity,method,device,rows,dims,clusters,flagged,elapsed_ms,timings,uncertainty,precision,recall,f1,roc_auc"},
		{"density without labels", densityOutput{},
			"mode,granularity,method,device,rows,dims,clusters,flagged,elapsed_ms,timings,uncertainty"},
		{"predict", predictOutput{labelQuality: noF1}, "rows,w_star,flagged,results,device,precision,recall,roc_auc"},
		{"replay", replayResult{labelQuality: q, AveragePrecision: &one, Detectors: map[string]detectorQuality{"d": {}}, Keys: &replayKeys{}},
			"input,rows,features,batches,flagged,suppressed,unscored,models_built,elapsed_ms,device,precision,recall,f1,roc_auc,average_precision,detectors,keys"},
		{"replay without labels", replayResult{},
			"input,rows,features,batches,flagged,suppressed,unscored,models_built,elapsed_ms,device"},
	} {
		js, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := topKeys(t, js); got != c.want {
			t.Errorf("%s: keys %s\nwant %s", c.name, got, c.want)
		}
	}
}
