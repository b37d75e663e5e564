package detect

import (
	"fmt"
	"math"
	"os"
	"slices"
)

// A key's model on a rolling column (docs/BENCHMARKS.md §12.59.1, §12.86, §12.88; keyroll31's
// candidate 2 and keyroll31b's candidate, behind OUTLIERD_KEYROLL31B=1): a rolling mean or std of `last` readings moves slowly,
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

// keyroll31 is whether OUTLIERD_KEYROLL31B is 1 or 2 (keyroll31b's switch, docs/bench/notes/
// keyroll31b_rule.md; unset or any other value: main's code path): a key's model counts a
// rolling column's tail in independent values, calibrates out of sample (keyed_oos.go) and is
// first built from firstModelRecords records.
func keyroll31() bool { v := os.Getenv("OUTLIERD_KEYROLL31B"); return v == "1" || v == "2" }

// keyroll31bHold is whether OUTLIERD_KEYROLL31B is 2 (keyroll31b's candidate 2): candidate 1, and
// flag_clear's hold off on a key's model with a rolling column (keyClearScore).
func keyroll31bHold() bool { return os.Getenv("OUTLIERD_KEYROLL31B") == "2" }

// keyClearScore is clearScore for a record its key's own model decides: +Inf (no hold) under
// keyroll31b's candidate 2 when the stream has a rolling column. Such a column is a deadband of
// its own (consecutive records share last - 1 of its readings, so it cannot chatter), and a
// record held after a flagged one restates the same readings: counted in independent values,
// the hold adds no observation.
func (c *Config) keyClearScore() float64 {
	if c.corrNoHold {
		return math.Inf(1)
	}
	return c.clearScore()
}

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

// firstModelRecords is how many non-warming records a key's window must hold for its first
// model (keyroll31b's candidate): keys.min_records, but with rolling columns (corr) the same
// count in independent values, n / c_max >= keys.min_records, capped at the window w, the most a
// key's model can ever hold: min(keys.min_records x c_max, w). A model from fewer records holds
// less than min_records independent values of the column (at n = 30 and last 32, less than one)
// and calls the column's next wander a tail event; until the first model the global model scores
// the key, as before a key's first model on main.
func firstModelRecords(minRecords, w int, corr []float64) int {
	if corr == nil {
		return minRecords
	}
	cmax := 1.0
	for _, c := range corr {
		cmax = max(cmax, c)
	}
	return int(min(float64(minRecords)*cmax, float64(w)))
}

// corr is the key's model's correlation time of each feature (nil: none; Config.rolling).
func (c *Config) corr() []float64 {
	if c.rolling == nil {
		return nil
	}
	return *c.rolling
}
