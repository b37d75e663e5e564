package detect

import (
	"math/rand/v2"
	"testing"
)

// TestSecondFaultStartsAnAlarm: after one alarm longer than the cap (a sensor stuck far out for
// 1,500 records, the cap 100 of a window of 5,000), a second, distinct fault 500 records later
// starts an alarm and is flagged while it lasts (docs/BENCHMARKS.md §12.30.1's stuck stream,
// §12.30.2). Under a cap where every flag counts, the first alarm's 1,500 flags kept the cap
// spent for a window and the second fault was suppressed whole.
func TestSecondFaultStartsAnAlarm(t *testing.T) {
	cfg := Default()
	cfg.Window, cfg.MinRecords = 5000, 1000
	cfg.Distance.N = 5
	const first, firstLen, second, secondLen = 10000, 1500, 12000, 600
	d, _ := sensorStream(second+secondLen+1000, 5, nil, nil)
	for i := first; i < first+firstLen; i++ {
		d.Cols[0][i] = 130
	}
	for i := second; i < second+secondLen; i++ {
		d.Cols[0][i] = 10
	}
	_, flagged, suppressed, _ := streamScores(t, cfg, d)
	f1, f2 := count(flagged[first:first+firstLen]), count(flagged[second:second+secondLen])
	t.Logf("first fault: %d of %d flagged; second: %d of %d flagged, %d suppressed", f1, firstLen, f2, secondLen, count(suppressed[second:second+secondLen]))
	if float64(f1) < 0.95*firstLen {
		t.Errorf("first fault: %d of %d flagged, want >= 95%%", f1, firstLen)
	}
	if float64(f2) < 0.95*secondLen {
		t.Errorf("second fault: %d of %d flagged, want >= 95%%", f2, secondLen)
	}
}

// TestCapBoundsChatter: a stream whose significant records are isolated (a spike every 10th
// record, 500 a window of 5,000, against a cap of 100) starts at most the cap's alarms in any
// window, and its cap is used (the stage flags about the cap's share, not every spike).
func TestCapBoundsChatter(t *testing.T) {
	cfg := Default()
	cfg.Window, cfg.MinRecords = 5000, 1000
	cfg.Distance.N = 5
	const from = 3000
	d, label := sensorStream(from+3*cfg.Window, 5, func(i int, r *rand.Rand) (float32, bool) {
		if i >= from && i%10 == 0 {
			return 60 + 10*float32(r.Float64()), true
		}
		return 0, false
	}, nil)
	_, flagged, suppressed, _ := streamScores(t, cfg, d)
	limit := capLimit(cfg.AlarmRate, cfg.Window)
	worst := 0
	for lo := 0; lo+cfg.Window <= len(flagged); lo += 50 {
		worst = max(worst, alarmStarts(flagged[lo:lo+cfg.Window]))
	}
	sig := count(flagged[from:]) + count(suppressed[from:])
	t.Logf("%d spikes, %d significant, %d flagged, %d suppressed; most alarm starts in a window %d (cap %d)",
		count(label), sig, count(flagged), count(suppressed), worst, limit)
	if worst > limit {
		t.Errorf("%d alarm starts within one window, cap %d", worst, limit)
	}
	if sig < 5*limit || worst < limit*9/10 {
		t.Errorf("setup: %d significant, at most %d starts a window: the chatter does not test the cap %d", sig, worst, limit)
	}
}

// TestStageCapCountsAlarmsOnce: the stage's cap (admitStart) counts an alarm once, at its start:
// a record continuing its series' alarm is flagged past a spent cap and not counted, so a long
// alarm leaves the cap's count at its start; a second start waits while the cap's starts fill
// it and goes once they have left the window. A key's cap (admitRun) counts every flag.
func TestStageCapCountsAlarmsOnce(t *testing.T) {
	const window, limit, clear = 20, 2, 3.5
	a, k := newAlarmCap(window), newAlarmCap(window)
	prevA, prevK := false, false
	for i := range 15 { // one alarm of 15 records
		fa, _ := a.admitStart(true, prevA, 9, clear, limit)
		fk, _ := k.admitRun(true, prevK, 9, clear, limit)
		if !fa || !fk {
			t.Fatalf("record %d of an alarm: stage %v key %v, want flagged", i, fa, fk)
		}
		prevA, prevK = fa, fk
	}
	if a.count != 1 || k.count != 15 {
		t.Errorf("after one alarm of 15 records the stage's cap counts %d (want 1), a key's %d (want 15)", a.count, k.count)
	}
	a.admitStart(false, true, 0, clear, limit) // the alarm ends
	k.admitRun(false, true, 0, clear, limit)
	if f, _ := a.admitStart(true, false, 9, clear, limit); !f {
		t.Errorf("a second alarm after a long one: not started by the stage's cap")
	}
	if f, _ := k.admitRun(true, false, 9, clear, limit); f {
		t.Errorf("a second alarm after a long one: started by a key's cap, whose window holds the first's 15 flags")
	}
	a.admitStart(false, true, 0, clear, limit)
	if f, _ := a.admitStart(true, false, 9, clear, limit); f { // two starts in the window: spent
		t.Errorf("a third start within the window: flagged past the cap's %d starts", limit)
	}
	for range window - 2 { // ordinary records until the first start leaves the window
		a.admitStart(false, false, 0, clear, limit)
	}
	if f, _ := a.admitStart(true, false, 9, clear, limit); !f {
		t.Errorf("a start once the first alarm's start left the window: suppressed (count %d)", a.count)
	}
}
