package detect

import (
	"fmt"
	"os"
	"slices"
)

// A key's model on a rolling column (docs/BENCHMARKS.md §12.59.1, §12.86; keyroll31's
// candidate, behind OUTLIERD_KEYROLL31=1): a rolling mean or std of `last` readings moves slowly,
// so a key's window of n records holds about n / last independent values of it, and its tail
// (rank.Tail) counts that column in independent values (rank.Tail.Corr): a value beyond the
// window's range says ln(n / last), not ln n. The global model, whose window spans the whole
// fleet, is not changed.

// Rolling is a rolling column of the stream: ingest.derive's mean or std over Last readings of a
// series, whose consecutive values share Last - 1 readings.
type Rolling struct {
	Column string
	Last   int
}

// keyroll31 is whether OUTLIERD_KEYROLL31 is 1 or 2 (the candidates' switch; unset: main's code
// path); keyroll31OOS whether it is 2 (candidate 2: keyed_oos.go).
func keyroll31() bool    { v := os.Getenv("OUTLIERD_KEYROLL31"); return v == "1" || v == "2" }
func keyroll31OOS() bool { return os.Getenv("OUTLIERD_KEYROLL31") == "2" }

// rollingCorr is each feature's correlation time under the switch (the Last of its Rolling, 1
// for every other feature), nil without the switch or without a rolling column: a rolling
// mean of Last independent readings has the integrated autocorrelation time 1 + 2 sum_{k<Last}
// (1 - k/Last) = Last (a rolling variance's values share Last - k squared terms: the same).
func rollingCorr(rolling []Rolling, features []string) ([]float64, error) {
	if len(rolling) == 0 || !keyroll31() {
		return nil, nil
	}
	corr := make([]float64, len(features))
	for j := range corr {
		corr[j] = 1
	}
	for _, r := range rolling {
		j := slices.Index(features, r.Column)
		if j < 0 || r.Last < 1 {
			return nil, fmt.Errorf("detect: rolling column %q (last %d): not one of the stream's features %v", r.Column, r.Last, features)
		}
		corr[j] = float64(r.Last)
	}
	return corr, nil
}
