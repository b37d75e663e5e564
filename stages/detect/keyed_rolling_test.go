package detect

import (
	"math"
	"testing"
)

// TestFirstModelRecordsCountsIndependentValues: keyroll31b's gate (keyed_rolling.go). Without a
// rolling column a key's first model is due at keys.min_records (main's); with one of last c it
// waits for min_records independent values, min_records x c records, capped at the window.
func TestFirstModelRecordsCountsIndependentValues(t *testing.T) {
	for _, tc := range []struct {
		min, w int
		corr   []float64
		want   int
	}{
		{30, 200, nil, 30},                   // no rolling column: main's
		{30, 200, []float64{1, 1}, 30},       // raw columns only (c = 1)
		{30, 200, []float64{1, 32}, 200},     // 960 > the window: the full window
		{30, 2000, []float64{1, 32}, 960},    // a window that holds 30 independent values
		{30, 2000, []float64{4, 16, 1}, 480}, // the largest c decides
	} {
		if got := firstModelRecords(tc.min, tc.w, tc.corr); got != tc.want {
			t.Errorf("firstModelRecords(%d, %d, %v) = %d, want %d", tc.min, tc.w, tc.corr, got, tc.want)
		}
	}
}

// TestKeyClearScoreOffOnRollingKeys: keyroll31b's candidate 2 turns the hold off for a key's own
// model with a rolling column only; otherwise clearScore's flag_clear x min_score.
func TestKeyClearScoreOffOnRollingKeys(t *testing.T) {
	cfg := Default()
	if got, want := cfg.keyClearScore(), cfg.FlagClear*cfg.MinScore; got != want {
		t.Fatalf("keyClearScore without the switch = %g, want flag_clear x min_score %g", got, want)
	}
	cfg.corrNoHold = true
	if got := cfg.keyClearScore(); !math.IsInf(got, 1) {
		t.Fatalf("keyClearScore under candidate 2 = %g, want +Inf (no hold)", got)
	}
	if got := cfg.clearScore(); got != cfg.FlagClear*cfg.MinScore {
		t.Fatalf("the global path's clearScore = %g, want %g (unchanged)", got, cfg.FlagClear*cfg.MinScore)
	}
}
