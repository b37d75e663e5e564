package detect

import (
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// TestRestartContinuesFleetTail: under keys.tail: fleet a restart from detect.state_dir leaves
// every record's verdict after it as the uninterrupted stream's. The stop falls after the
// shards' first fits, between two refits, with the last pass's deviations not yet pooled, and
// before a +6 sd shift of one key that the fleet's tail makes more significant than the key's
// own does. Before, the pool was not saved: after the restart the keys scored by their own tails
// until their shards held fleetReady again, and the shift's records differed.
func TestRestartContinuesFleetTail(t *testing.T) {
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour // (one global model throughout)
	cfg.Keys.Tail = TailFleet
	unit := func(int) float64 { return 2 }
	rows := shiftFleet(10, 1600, 1300, 300, 6, 8, 0.002, unit, 3)
	stop := 10*1300 + 7
	var cuts []int
	for c := 500; c < len(rows); c += 500 {
		cuts = append(cuts, c)
	}
	own := cfg
	own.Keys.Tail = TailOwn
	ownRef := restartRun(t, own, nil, rows, cuts, 0)
	for _, c := range []struct {
		name string
		cuts []int
		deps func() Deps
	}{
		{"batches of 500", cuts, nil},
		{"one batch after the stop, parallel", []int{5000, 10000, stop}, nil},
		{"keys on a device, overlapped", cuts, func() Deps {
			return Deps{Accelerator: &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}, Overlap: OverlapOnGPU}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref := restartRun(t, cfg, c.deps, rows, c.cuts, 0)
			// The fleet's tail decides records after the stop: its verdicts differ from own's.
			if n := verdictsDiffer(ref[stop:], ownRef[stop:]); n < 20 {
				t.Fatalf("setup: %d verdicts after the stop differ between keys.tail fleet and own, want >= 20", n)
			}
			got := restartRun(t, cfg, c.deps, rows, c.cuts, stop)
			bad := 0
			for i := stop; i < len(rows); i++ {
				if d := sameVerdict(&got[i], &ref[i]); d != "" {
					if bad++; bad <= 10 {
						t.Errorf("record %d (%s) after the restart: %s", i, rows[i].key, d)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of the %d records after the restart differ from the uninterrupted run's", bad, len(rows)-stop)
			}
		})
	}
}

// verdictsDiffer counts the records whose verdicts differ between a and b.
func verdictsDiffer(a, b []batch.Score) int {
	n := 0
	for i := range a {
		if sameVerdict(&a[i], &b[i]) != "" {
			n++
		}
	}
	return n
}
