package detect

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestKeyCapFlagsAFaultThroughItsFirstWindow: issue 20's stuck sensor under key_by: key, one key
// of a fleet: 400 readings of noise (100 +- 2), then stuck 30 sd out for two of its windows. Its
// readings are significant through its first window (TestKeyStuckSensorStaysSignificant); the
// key's cap (alarm_rate x keys.window: 4 of its last 200 records) flagged the first 4 and
// suppressed the rest. The cap limits the starts of a key's alarms, not the records of one going
// on: the fault is flagged through its first window (>= 95 % of it), and once its model has
// learnt the new normal nothing more is flagged. Before: 4 of 200.
func TestKeyCapFlagsAFaultThroughItsFirstWindow(t *testing.T) {
	cfg := keyedConfig()
	w := cfg.Keys.Window
	r := rand.New(rand.NewPCG(20, 21))
	rows, offs := amongOthers("stuck", 400+2*w, noiseAbout50(r), func(own int) (float32, bool) {
		if own >= 400 {
			return 160, true
		}
		return float32(100 + 2*r.NormFloat64()), false
	})
	stuckAt := slices.IndexFunc(rows, func(f fleetRow) bool { return f.spike })
	sc := runFleet(t, cfg, rows, offs)
	var flags []bool
	before := 0
	for i, row := range rows {
		switch {
		case row.key != "stuck":
		case i < stuckAt:
			if sc[i].Outlier {
				before++
			}
		default:
			flags = append(flags, sc[i].Outlier)
		}
	}
	first, late := count(flags[:w]), count(flags[len(flags)-w/4:])
	t.Logf("flagged: %d of the 400 readings before, %d of the first %d stuck readings, %d of the last %d", before, first, w, late, w/4)
	if float64(first) < 0.95*float64(w) {
		t.Errorf("%d of the first window's %d stuck readings flagged, want >= 95%%", first, w)
	}
	if late > 0 {
		t.Errorf("%d of the last %d stuck readings flagged: its model learnt them", late, w/4)
	}
	if limit := capLimit(cfg.AlarmRate, w); before > 2*limit {
		t.Errorf("%d of the 400 ordinary readings flagged, want at most %d", before, 2*limit)
	}
}

// TestKeyCapLimitsAlarmStarts: a key whose spikes are isolated (each reading after one is
// ordinary) starts an alarm at each: its cap flags at most alarm_rate x keys.window of them in
// any keys.window of its records, as before.
func TestKeyCapLimitsAlarmStarts(t *testing.T) {
	cfg := keyedConfig()
	w := cfg.Keys.Window
	limit := capLimit(cfg.AlarmRate, w)
	r := rand.New(rand.NewPCG(22, 21))
	rows, offs := amongOthers("spiky", 4*w, noiseAbout50(r), func(own int) (float32, bool) {
		if own >= 100 && own%10 == 0 {
			return 200, true
		}
		return float32(100 + 2*r.NormFloat64()), false
	})
	sc := runFleet(t, cfg, rows, offs)
	var flags []bool
	spikes := 0
	for i, row := range rows {
		if row.key == "spiky" {
			flags = append(flags, sc[i].Outlier)
			if row.spike && sc[i].Score >= cfg.MinScore {
				spikes++
			}
		}
	}
	most := 0
	for i := w; i <= len(flags); i++ {
		most = max(most, count(flags[i-w:i]))
	}
	t.Logf("%d significant spikes; at most %d flags in a window of %d of the key's records", spikes, most, w)
	if spikes < 2*limit {
		t.Fatalf("%d significant spikes: the test wants more than the cap", spikes)
	}
	if most > limit {
		t.Errorf("%d flags in a window of %d of the key's records, want at most %d", most, w, limit)
	}
}

func count(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}
