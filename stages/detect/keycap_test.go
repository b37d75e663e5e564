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

// TestKeyCapContinuesPastItsLimit: a key's cap (admitRun) limits its alarms' starts: a record
// continuing an alarm (significant, or held at the clear level) is flagged past the cap and
// counted; an alarm's start waits until fewer than the cap's flags are in the window.
func TestKeyCapContinuesPastItsLimit(t *testing.T) {
	const window, limit, clear = 10, 2, 3.5
	a := newAlarmCap(window)
	steps := []struct {
		sig         bool
		score       float64
		flag, held  bool
		description string
	}{
		{true, 9, true, false, "an alarm starts"},
		{true, 9, true, false, "it goes on"},
		{true, 9, true, false, "past the cap (2 flags in the window)"},
		{false, 4, true, true, "held past the cap"},
		{true, 9, true, false, "significant again"},
		{false, 1, false, false, "cleared: the alarm ends"},
		{true, 9, false, false, "a start, 5 flags in the window: suppressed"},
		{true, 9, false, false, "its previous record not flagged: still a start, suppressed"},
		{false, 1, false, false, "ordinary"},
		{false, 1, false, false, "ordinary"},
		{false, 1, false, false, "ordinary: the first flag leaves the window, 4 in it"},
		{false, 1, false, false, "3 in it"},
		{true, 9, false, false, "a start with 2 flags in the window: suppressed"},
		{true, 9, true, false, "1 flag in the window: a start flagged"},
		{true, 9, true, false, "it goes on"},
	}
	for i, st := range steps {
		flag, held := a.admitRun(st.sig, a.last(), st.score, clear, limit)
		if flag != st.flag || held != st.held {
			t.Errorf("step %d (%s): flag %v held %v, want %v %v", i, st.description, flag, held, st.flag, st.held)
		}
	}
	// A held record needs its series' previous flag: on a key's first record by its own model
	// that is the key's last on the global path (decideWaiting's previous).
	b := newAlarmCap(window)
	for range 2 {
		b.admitOver(true, false, true, limit)
	}
	if f, h := b.admitRun(false, false, 4, clear, limit); f || h {
		t.Errorf("not significant, previous not flagged: flag %v held %v", f, h)
	}
	if f, h := b.admitRun(true, true, 9, clear, limit); !f || h {
		t.Errorf("a spent cap, previous flagged on the global path: flag %v held %v, want flagged", f, h)
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
