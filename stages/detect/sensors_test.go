package detect

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/quality"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// Issue 20's sensor streams: three correlated sensors (temperature 70 ± 2, pressure and
// humidity following it), in file order, through the stage with the default configuration
// (flag_by: significance). These streams are generated here; the defaults (min_score,
// TailQuantile, the cap) were chosen on streams of this kind and checked on the labelled sets
// (docs/BENCHMARKS.md §9 says which choice came from which data).

// sensorStream is n rows of the three sensors; spike(i, r) returns the temperature offset of
// row i (0: none) and whether it is an anomaly; shift(i) is added to every sensor's mean.
func sensorStream(n int, seed uint64, spike func(i int, r *rand.Rand) (float32, bool), shift func(i int) float32) (*synth.Data, []bool) {
	r := rand.New(rand.NewPCG(seed, 20))
	d := &synth.Data{Features: []string{"x1", "x2", "x3"}, Cols: make([][]float32, 3), SD: make([][]float32, 3)}
	for j := range 3 {
		d.Cols[j], d.SD[j] = make([]float32, n), make([]float32, n)
	}
	label := make([]bool, n)
	for i := range n {
		z := r.NormFloat64()
		temp := 70 + 2*z
		pres := 1000 + 3*z + 1.5*r.NormFloat64()
		hum := 40 - 1.5*z + r.NormFloat64()
		var off float32
		if spike != nil {
			off, label[i] = spike(i, r)
		}
		var s float32
		if shift != nil {
			s = shift(i)
		}
		d.Cols[0][i] = float32(temp) + off + s
		d.Cols[1][i] = float32(pres) + s*1.5
		d.Cols[2][i] = float32(hum) + s*0.5
	}
	return d, label
}

// streamScores feeds d through a stage with cfg in batches of 500 and returns every record's
// score, flag and suppressed mark in file order (the stage holds the records before its first
// model and scores them with it: every record is scored). Each build is awaited before the next
// batch (replay's order), so the models follow refresh_records exactly.
func streamScores(t *testing.T, cfg Config, d *synth.Data) (scores []float64, flagged, suppressed []bool, s *Stage) {
	t.Helper()
	scores, _, flagged, suppressed, s = streamScoresRecent(t, cfg, d)
	return scores, flagged, suppressed, s
}

// streamScoresRecent is streamScores with every record's recent score (batch.Score.Recent).
func streamScoresRecent(t *testing.T, cfg Config, d *synth.Data) (scores, recent []float64, flagged, suppressed []bool, s *Stage) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s, err := NewStage(cfg, d.Features, false, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	n := len(d.Cols[0])
	scores, recent, flagged, suppressed = make([]float64, n), make([]float64, n), make([]bool, n), make([]bool, n)
	seen := 0
	take := func(out []*batch.Batch) {
		for _, b := range out {
			first := int(b.Offsets()[0])
			for i, sc := range b.Scores {
				if !sc.Scored {
					t.Fatalf("row %d unscored", first+i)
				}
				scores[first+i], recent[first+i], flagged[first+i], suppressed[first+i] = sc.Score, sc.Recent, sc.Outlier, sc.Suppressed
				if sc.Outlier && (len(sc.Deviations) == 0 || Reason(&sc) == "") {
					t.Fatalf("row %d flagged without deviations or a reason: %+v", first+i, sc)
				}
				seen++
			}
			b.Release()
		}
	}
	for lo := 0; lo < n; lo += 500 {
		out, err := s.Process(context.Background(), makeBatch(t, mem, d, lo, min(lo+500, n), false))
		if err != nil {
			t.Fatal(err)
		}
		take(out)
		s.collect(true) // each build serves from the next batch on, as in replay: deterministic
	}
	out, err := s.Flush()
	if err != nil {
		t.Fatal(err)
	}
	take(out)
	if seen != n {
		t.Fatalf("%d of %d records came out", seen, n)
	}
	return scores, recent, flagged, suppressed, s
}

func share(b []bool) float64 {
	c := 0
	for _, v := range b {
		if v {
			c++
		}
	}
	return float64(c) / float64(len(b))
}

// sensorSpikes scores sensorStream(20000, seed) whose temperature gets +lo..+lo+width on a share
// rate of its rows with the default stage, in file order, and logs and returns the flags' counts
// and the score's average precision.
func sensorSpikes(t *testing.T, seed uint64, rate, lo, width float64) (quality.Confusion, float64) {
	t.Helper()
	d, label := sensorStream(20000, seed, func(i int, r *rand.Rand) (float32, bool) {
		if r.Float64() < rate {
			return float32(lo + width*r.Float64()), true
		}
		return 0, false
	}, nil)
	scores, flagged, _, _ := streamScores(t, Default(), d)
	c := quality.Count(flagged, label)
	ap := quality.AveragePrecision(scores, label)
	t.Logf("spikes %d: flagged %d, precision %.3f, recall %.3f, AP %.4f", c.TP+c.FN, c.TP+c.FP, c.Precision(), c.Recall(), ap)
	return c, ap
}

// TestSensorSpikesFlaggedByDefault: spikes of +40..+60 (20-30 sd of the noise) on 0.1% of a
// 20,000-row stream: every spike flagged, precision at least 0.9, average precision at least
// 0.95 (issue 20's target); before the fitted tails the window's edge capped the tail score and
// the quota flagged 2% (precision 0.05, AP 0.09). Each flagged spike names temperature first,
// at least 20 robust sd out.
func TestSensorSpikesFlaggedByDefault(t *testing.T) {
	c, ap := sensorSpikes(t, 1, 0.001, 40, 20)
	if c.TP+c.FN < 10 || c.FN != 0 || c.Precision() < 0.9 || ap < 0.95 {
		t.Errorf("precision %.3f, recall %.3f, AP %.4f: want every spike, precision >= 0.9, AP >= 0.95", c.Precision(), c.Recall(), ap)
	}
}

// TestSensorDenseSpikesFlagged: the new user's spike test (temperature 120-130 against
// 70 ± 2: +25..+30 sd) at its rate, 0.46% of 20,000 records (91 spikes with this seed; the issue
// had 93): every spike flagged, precision at least 0.9. The spikes are 0.46% of every window
// the models are built from, so a calibration that lets the window's own outliers squeeze new
// ones (a knee above the top 0.5%) misses them all (docs/BENCHMARKS.md §11.2: a knee at 99.9%
// flagged none).
func TestSensorDenseSpikesFlagged(t *testing.T) {
	c, _ := sensorSpikes(t, 8, 0.0046, 50, 10)
	if c.TP+c.FN < 50 || c.FN != 0 || c.Precision() < 0.9 {
		t.Errorf("precision %.3f, recall %.3f: want every spike, precision >= 0.9", c.Precision(), c.Recall())
	}
}

// TestSeasonalContextualRanked: stream_sbs.py's "seasonal" stream (three sensors with a daily
// cycle of ±5 sd, 20 contextual anomalies: a reading normal twelve hours away, inside the
// stream's range), default configuration, min_records 2000 as the benchmark replays it: the
// combined score ranks the anomalies after the probation with AP at least 0.9 (0.946 here, 0.942
// with equal weights; 0.940 in docs/BENCHMARKS.md §12's replay). Only the joint (distance) view
// sees them, and only the calibration's fitted tail (the knee, rank.TailQuantile) lifts that
// detector above the per-feature one's ordinary records: without the knee this test measured AP
// 0.103, with the knee lowered by 1 or 3 decades 0.927 and 0.622 (§11.2's last follow-up). The
// labelled tables would rather have it lower: this test is the other side of that trade, and of
// score.weights' agreement gate (without it the distance's unconfirmed top weighs less here
// too: AP 0.607-0.878, §11.2.1).
func TestSeasonalContextualRanked(t *testing.T) {
	p := synth.DefaultSeriesParams()
	p.SpikeRate, p.Daily, p.Contextual, p.Seed, p.Head = 0, 5, 20, 5, 2000
	s, err := synth.SensorSeries(p)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Default()
	cfg.MinRecords = 2000
	scores, _, _, _ := streamScores(t, cfg, &s.Data)
	label := make([]bool, len(s.Label)-p.Head)
	anomalies := 0
	for i := range label {
		label[i] = s.Label[p.Head+i] != 0
		if label[i] {
			anomalies++
		}
	}
	ap := quality.AveragePrecision(scores[p.Head:], label)
	t.Logf("contextual anomalies %d: AP %.3f", anomalies, ap)
	if anomalies != p.Contextual || ap < 0.9 {
		t.Errorf("%d contextual anomalies, AP %.3f: want %d, AP >= 0.9", anomalies, ap, p.Contextual)
	}
}

// TestSensorDeviationsExplainSpike: a flagged spike's explanation names the temperature first
// and how far out it is in robust units.
func TestSensorDeviationsExplainSpike(t *testing.T) {
	d, _ := sensorStream(6000, 3, nil, nil)
	d.Cols[0][5500] += 50 // 25 sd of the temperature's noise
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := Default()
	s, err := NewStage(cfg, d.Features, false, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for lo := 0; lo < 6000; lo += 500 {
		out, err := s.Process(context.Background(), makeBatch(t, mem, d, lo, lo+500, false))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range out {
			for i, sc := range b.Scores {
				if int(b.Offsets()[0])+i != 5500 {
					continue
				}
				if !sc.Outlier || len(sc.Deviations) == 0 || sc.Deviations[0].Feature != "x1" || sc.Deviations[0].RobustSD < 20 {
					t.Errorf("spike: outlier %v, deviations %+v: want flagged, x1 >= +20 robust sd first", sc.Outlier, sc.Deviations)
				}
			}
			b.Release()
		}
	}
}

// TestHealthyStreamRarelyFlagged: the same sensors without any anomaly: at most 0.1% of the
// records flagged (issue 20; the quota flagged 1.65%).
func TestHealthyStreamRarelyFlagged(t *testing.T) {
	d, _ := sensorStream(20000, 2, nil, nil)
	_, flagged, suppressed, _ := streamScores(t, Default(), d)
	t.Logf("flagged %.4f%%, suppressed %.4f%%", 100*share(flagged), 100*share(suppressed))
	if share(flagged) > 0.001 {
		t.Errorf("%.3f%% of a healthy stream flagged, want <= 0.1%%", 100*share(flagged))
	}
}

// TestDriftOneSDPerWindow: the sensors' means drift one standard deviation (of the temperature's
// noise, 2) every window of records, no anomaly: at most 1% flagged (issue 20; a model rebuilt
// every four windows flagged 84%). The model follows the stream: rebuilt every window/4.
func TestDriftOneSDPerWindow(t *testing.T) {
	cfg := Default()
	cfg.Window, cfg.MinRecords = 5000, 1000
	cfg.Distance.N = 5
	d, _ := sensorStream(30000, 4, nil, func(i int) float32 { return 2 * float32(i) / float32(cfg.Window) })
	_, flagged, _, s := streamScores(t, cfg, d)
	t.Logf("flagged %.3f%%, models %d", 100*share(flagged), s.Model().Version)
	if share(flagged) > 0.01 {
		t.Errorf("%.2f%% of a drifting stream flagged, want <= 1%%", 100*share(flagged))
	}
}

// TestStuckSensorStaysSignificant: a temperature sensor stuck 30 sd out for two windows. Its
// records are kept out of the next models (significant records are outcasts), so it is
// significant (flagged, or suppressed by the cap) through its first window instead of
// becoming the window's normal within a fraction of it; the cap holds the flags to alarm_rate
// of any window; and once the fault has filled the window it is learnt (not flagged forever).
func TestStuckSensorStaysSignificant(t *testing.T) {
	cfg := Default()
	cfg.Window, cfg.MinRecords = 5000, 1000
	cfg.Distance.N = 5
	const start = 10000
	d, _ := sensorStream(start+2*cfg.Window, 5, nil, nil)
	for i := start; i < len(d.Cols[0]); i++ {
		d.Cols[0][i] = 130
	}
	_, flagged, suppressed, _ := streamScores(t, cfg, d)
	sig := 0
	for i := start; i < start+cfg.Window; i++ {
		if flagged[i] || suppressed[i] {
			sig++
		}
	}
	first := count(flagged[start : start+cfg.Window])
	limit := capLimit(cfg.AlarmRate, cfg.Window)
	worst := 0
	for lo := 0; lo+cfg.Window <= len(flagged); lo += 100 {
		worst = max(worst, alarmStarts(flagged[lo:lo+cfg.Window]))
	}
	late := share(flagged[start+2*cfg.Window-1000:]) + share(suppressed[start+2*cfg.Window-1000:])
	t.Logf("significant %d, flagged %d of the first window's %d stuck records; most alarm starts in a window %d (cap %d); last 1000 significant %.2f", sig, first, cfg.Window, worst, limit, late)
	// 0.95: the build takes the outcasts back once they are 95% of the window (outcastFloor).
	if float64(sig) < 0.95*float64(cfg.Window) {
		t.Errorf("%d of the first window's %d stuck records significant, want >= 95%%", sig, cfg.Window)
	}
	// Issue 20 item 4: flagged (not suppressed) through its first window: the cap limits the
	// starts of alarms, not the records of one going on (alarmCap.admitRun). Before: the cap's
	// 100 of 5,000.
	if float64(first) < 0.95*float64(cfg.Window) {
		t.Errorf("%d of the first window's %d stuck records flagged, want >= 95%%", first, cfg.Window)
	}
	if worst > limit {
		t.Errorf("%d alarm starts within one window, cap %d", worst, limit)
	}
	if late > 0.1 {
		t.Errorf("%.2f of the stuck records still significant after two windows: the new normal is never learnt", late)
	}
}

// alarmStarts counts the flagged records whose predecessor is not flagged.
func alarmStarts(flags []bool) int {
	n := 0
	for i, f := range flags {
		if f && (i == 0 || !flags[i-1]) {
			n++
		}
	}
	return n
}

// TestCalibratedScoreFinite: the combined score of a FLT_MAX reading is finite and above every
// record nearer the window.
func TestCalibratedScoreFinite(t *testing.T) {
	d, _ := sensorStream(3000, 6, nil, nil)
	m, err := Build(d.Cols, nil, d.Features, Default(), 1)
	if err != nil {
		t.Fatal(err)
	}
	prev := math.Inf(-1)
	for _, x := range []float32{72, 80, 120, 1e6, 1e20, math.MaxFloat32} {
		q := [][]float32{{x}, {1000}, {40}}
		dens, dist := make([]float64, 1), make([]float64, 1)
		m.Ranker.Tail.Score(q, dens)
		solvingsetKNN(m.Ranker, q, dist)
		s := m.Ranker.combine(dens[0], dist[0])
		if math.IsNaN(s) || math.IsInf(s, 0) || !(s > prev) {
			t.Fatalf("temperature %g scores %v after %v: want finite and rising", x, s, prev)
		}
		prev = s
	}
}

// foldedOneMinute is rows (one feature, 0) scored, flagged where outlier says, as a batch folded
// into g's alert groups with alert_cooldown 1m; the caller releases it.
func foldedOneMinute(t *testing.T, mem memory.Allocator, g *alertGroups, rows []testbatch.Row, outlier func(i int) bool) *batch.Batch {
	t.Helper()
	for i := range rows {
		rows[i].Features = []float32{0}
		rows[i].Score = batch.Score{Scored: true, Outlier: outlier(i)}
	}
	b := testbatch.New(t, mem, "t", []string{"x"}, false, true, rows)
	g.fold(b, time.Minute)
	return b
}

// TestAlertCooldownFoldsPerKey: with alert_cooldown 1m, a key's flagged records within a
// minute of its last alert are grouped (not alerts of their own), the next alert after the
// cooldown counts them, and keys do not share groups.
func TestAlertCooldownFoldsPerKey(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	t0 := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	rows := []testbatch.Row{
		{Offset: 0, Key: []byte("a"), Time: t0},                       // alert
		{Offset: 1, Key: []byte("a"), Time: t0.Add(10 * time.Second)}, // grouped
		{Offset: 2, Key: []byte("b"), Time: t0.Add(20 * time.Second)}, // alert: another key
		{Offset: 3, Key: []byte("a"), Time: t0.Add(30 * time.Second)}, // grouped
		{Offset: 4, Key: []byte("a"), Time: t0.Add(40 * time.Second)}, // not flagged
		{Offset: 5, Key: []byte("a"), Time: t0.Add(70 * time.Second)}, // alert, folded 2
	}
	var g alertGroups
	b := foldedOneMinute(t, mem, &g, rows, func(i int) bool { return i != 4 })
	defer b.Release()
	want := []struct {
		grouped bool
		folded  int
	}{{false, 0}, {true, 0}, {false, 0}, {true, 0}, {false, 0}, {false, 2}}
	for i, w := range want {
		if sc := b.Scores[i]; sc.Grouped != w.grouped || sc.Folded != w.folded {
			t.Errorf("row %d: grouped %v folded %d, want %v %d", i, sc.Grouped, sc.Folded, w.grouped, w.folded)
		}
	}
	// A grouped record names the alert it joined by that alert's time (rows 1 and 3: row 0's).
	for i, sc := range b.Scores {
		want := int64(0)
		if sc.Grouped {
			want = t0.UnixMilli()
		}
		if sc.AlertAt != want {
			t.Errorf("row %d: grouped %v, alert at %d, want %d", i, sc.Grouped, sc.AlertAt, want)
		}
	}
	// Off (0): nothing is grouped.
	b.Scores[1].Grouped = false
	var off alertGroups
	off.fold(b, 0)
	if b.Scores[1].Grouped {
		t.Error("alert_cooldown 0 grouped a record")
	}
}

// TestAlertCooldownExactAtEveryScale: a record is folded when its time is less than the
// cooldown after its key's alert, whatever the scale. Record times are whole milliseconds, and
// the cooldown was cut down to them: a cooldown under 1ms folded nothing (0 < 0 never holds),
// 1.5ms folded the same millisecond only. And two times the int64 difference of which overflows
// (epoch milliseconds the decoder accepts, out of any sensor's range) read as one instant.
func TestAlertCooldownExactAtEveryScale(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	t0 := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		cooldown time.Duration
		a, b     time.Time // key k's alert, then its next flagged record
		grouped  bool
	}{
		{500 * time.Microsecond, t0, t0, true},
		{1500 * time.Microsecond, t0, t0.Add(time.Millisecond), true},
		{1500 * time.Microsecond, t0, t0.Add(2 * time.Millisecond), false},
		{time.Millisecond, t0, t0.Add(time.Millisecond), false},
		{time.Hour, time.UnixMilli(-(1 << 62)), time.UnixMilli(math.MaxInt64), false},
	} {
		b := testbatch.New(t, mem, "t", []string{"x"}, false, true, []testbatch.Row{
			{Key: []byte("k"), Time: c.a, Features: []float32{0}, Score: batch.Score{Scored: true, Outlier: true}},
			{Offset: 1, Key: []byte("k"), Time: c.b, Features: []float32{0}, Score: batch.Score{Scored: true, Outlier: true}},
		})
		var g alertGroups
		g.fold(b, c.cooldown)
		if got := b.Scores[1].Grouped; got != c.grouped {
			t.Errorf("cooldown %v, alert at %d ms, record at %d ms: grouped %v, want %v", c.cooldown, c.a.UnixMilli(), c.b.UnixMilli(), got, c.grouped)
		}
		b.Release()
	}
}

// TestAlertCooldownOffForgetsGroups: alert_cooldown is live (a reload changes it between
// batches, the stage's groups kept). Turned off, every flagged record is an alert of its own, so
// the groups open before are no longer the keys' last alerts: turned on again, a key's next
// flagged record is a new alert, not folded into (and naming, alert_timestamp) the alert of
// before the pause, which the alerts in the pause followed.
func TestAlertCooldownOffForgetsGroups(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	t0 := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	one := func(at time.Duration) *batch.Batch {
		return testbatch.New(t, mem, "t", []string{"x"}, false, true, []testbatch.Row{
			{Key: []byte("a"), Time: t0.Add(at), Features: []float32{0}, Score: batch.Score{Scored: true, Outlier: true}},
		})
	}
	var g alertGroups
	for _, c := range []struct {
		at       time.Duration
		cooldown time.Duration
	}{
		{0, 10 * time.Minute},           // a's alert
		{time.Minute, 10 * time.Minute}, // folded into it
		{2 * time.Minute, 0},            // off: an alert of its own
	} {
		b := one(c.at)
		g.fold(b, c.cooldown)
		b.Release()
	}
	b := one(3 * time.Minute) // on again
	defer b.Release()
	g.fold(b, 10*time.Minute)
	if sc := b.Scores[0]; sc.Grouped || sc.AlertAt != 0 || sc.Folded != 0 {
		t.Errorf("after the cooldown was off: grouped %v (alert at %v) folded %d, want a new alert (not grouped, folded 0)",
			sc.Grouped, time.UnixMilli(sc.AlertAt).UTC(), sc.Folded)
	}
}

// TestStuckWhileWindowFills: a sensor stuck far out soon after the first model, while the
// window (W = 50,000, the default) still holds a few thousand records and recalibrations come
// every quarter of them: the stuck records stay out of the recalibrations (the outcast floor is
// a share of the records held, not of the capacity), so the fault stays significant. Before,
// the floor of 5% of 50,000 took the stuck records back into the model within 900 records.
func TestStuckWhileWindowFills(t *testing.T) {
	cfg := Default()
	cfg.MinRecords = 2000
	d, _ := sensorStream(8000, 7, nil, nil)
	for i := 2150; i < 7150; i++ {
		d.Cols[0][i] = 86 // +8 sd of the temperature's noise
	}
	_, flagged, suppressed, _ := streamScores(t, cfg, d)
	sig := 0
	for i := 2150; i < 7150; i++ {
		if flagged[i] || suppressed[i] {
			sig++
		}
	}
	t.Logf("significant %d of 5000 stuck records", sig)
	if sig < 4500 {
		t.Errorf("%d of 5000 stuck records significant, want >= 4500", sig)
	}
}

// TestFirstModelFromMinRecords: a plant whose first batch spans its healthy start and the
// beginning of a fault (replay's batches of 500 here, 1000 by default, against min_records 200):
// the first model is built from the first min_records records alone, so the fault's records in
// that batch are judged against the healthy start. Before, the model was built from the whole
// first batch, the fault included, and judged it normal (SKAB: 0 of its faults' rows flagged,
// docs/BENCHMARKS.md §12.11).
func TestFirstModelFromMinRecords(t *testing.T) {
	cfg := Default()
	cfg.Window, cfg.MinRecords = 5000, 200
	cfg.Distance.N = 5
	const start = 250 // the fault begins inside the first batch of 500
	d, _ := sensorStream(1500, 8, nil, func(i int) float32 {
		if i >= start {
			return 16 // +8 sd of the temperature's noise, the other sensors following
		}
		return 0
	})
	_, flagged, suppressed, s := streamScores(t, cfg, d)
	sig := 0
	for i := start; i < 500; i++ {
		if flagged[i] || suppressed[i] {
			sig++
		}
	}
	t.Logf("significant %d of the first batch's %d fault records; models %d", sig, 500-start, s.Model().Version)
	if sig < 500-start-5 { // a few healthy-looking records of a 6 sd shift may fall short of min_score
		t.Errorf("%d of the first batch's %d fault records significant, want all but 5", sig, 500-start)
	}

	// The first model's records: min_records, not the batch.
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	st, err := NewStage(cfg, d.Features, false, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out, err := st.Process(context.Background(), makeBatch(t, mem, d, 0, 500, false))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range out {
		b.Release()
	}
	if got := st.Model().WindowRecords; got != cfg.MinRecords {
		t.Errorf("first model built from %d records, want min_records %d", got, cfg.MinRecords)
	}
}

// TestQuantisedSensorStepRanks: a pressure sensor read in steps of 3 (7.5 sd of its noise:
// 98% of the readings on one value, 2% one step below, interquartile range 0) steps up one
// quantum for 300 records (synth's level shift of +8 sd, rounded). The step was never seen, so
// its first records must rank above every healthy record (the onset NAB-style scorers reward)
// and some be flagged. With the range (one quantum) as the tail's unit where the interquartile
// range is 0, the step was one unit past the window's largest value: none of it was flagged
// (here its onset's recent 4.49 against the healthy records' 4.24; now 5.39, 21 flagged; in
// the 20,000-row stream of docs/BENCHMARKS.md §12.15 the onset was below them, 4.21 against 5.18).
func TestQuantisedSensorStepRanks(t *testing.T) {
	p := synth.DefaultSeriesParams()
	p.Rows, p.Head, p.Seed, p.SpikeRate = 4000, 2000, 3, 0
	p.Shifts, p.ShiftSize, p.ShiftLength, p.Sensor = 1, 8, 300, 1
	p.Resolution = []float64{0, 3}
	s, err := synth.SensorSeries(p)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Default()
	cfg.MinRecords = p.Head
	_, recent, flagged, _, _ := streamScoresRecent(t, cfg, &s.Data)
	start := -1
	var healthy float64
	for i := p.Head; i < p.Rows; i++ {
		if s.Label[i] == 1 && start < 0 {
			start = i
		}
		if s.Label[i] == 0 {
			healthy = max(healthy, recent[i])
		}
	}
	if start < 0 || start+300 > p.Rows {
		t.Fatalf("the shift starts at row %d of %d", start, p.Rows)
	}
	onset, nflag := math.Inf(-1), 0
	for i := start; i < start+300; i++ {
		if i < start+30 {
			onset = max(onset, recent[i])
		}
		if flagged[i] {
			nflag++
		}
	}
	t.Logf("step at row %d: onset recent %.2f, healthy records' largest %.2f; %d of its 300 records flagged", start, onset, healthy, nflag)
	if !(onset > healthy) || nflag == 0 {
		t.Errorf("onset %.2f against healthy %.2f, %d flagged: want the onset above every healthy record and a flag", onset, healthy, nflag)
	}
}

// TestAlertCooldownUntimed: a flagged record without a timestamp (a Kafka timestamp of -1 or
// 0) is an alert of its own: how far it is from the key's last alert is not known, so it folds
// into no group, and it opens none (the key's open group stays for its timed records, which
// fold into it as before; its count leaves the untimed alert out). Before, it was at 0 ms: an
// alert closing the key's group (the next timed record a new alert), and at 0 ms the epoch's.
func TestAlertCooldownUntimed(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	t0 := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	rows := []testbatch.Row{
		{Offset: 0, Key: []byte("a")},                                  // untimed: an alert, no group
		{Offset: 1, Key: []byte("a")},                                  // untimed: an alert again
		{Offset: 2, Key: []byte("a"), Time: t0},                        // alert: opens a's group
		{Offset: 3, Key: []byte("a")},                                  // untimed: an alert, the group stays
		{Offset: 4, Key: []byte("a"), Time: t0.Add(10 * time.Second)},  // folded into offset 2's
		{Offset: 5, Key: []byte("b"), Time: time.UnixMilli(0)},         // 1970: a time, b's group
		{Offset: 6, Key: []byte("b")},                                  // untimed: not folded into 1970's
		{Offset: 7, Key: []byte("b"), Time: time.UnixMilli(1000)},      // folded into 1970's
		{Offset: 8, Key: []byte("a"), Time: t0.Add(100 * time.Second)}, // alert, folded 1
	}
	var g alertGroups
	b := foldedOneMinute(t, mem, &g, rows, func(int) bool { return true })
	defer b.Release()
	want := []struct {
		grouped bool
		folded  int
		at      int64
	}{{false, 0, 0}, {false, 0, 0}, {false, 0, 0}, {false, 0, 0}, {true, 0, t0.UnixMilli()},
		{false, 0, 0}, {false, 0, 0}, {true, 0, 0}, {false, 1, 0}}
	for i, w := range want {
		sc := b.Scores[i]
		if sc.Grouped != w.grouped || sc.Folded != w.folded || sc.AlertAt != w.at || sc.AlertTimed != w.grouped {
			t.Errorf("offset %d: grouped %v folded %d alert at %d (timed %v), want %v %d %d", i, sc.Grouped, sc.Folded, sc.AlertAt, sc.AlertTimed, w.grouped, w.folded, w.at)
		}
	}
	if len(g.open) != 2 || !g.open["a"].timed || g.open["a"].at != t0.Add(100*time.Second).UnixMilli() || !g.open["b"].timed || g.open["b"].at != 0 {
		t.Errorf("open groups %v, want a's at offset 8's time and b's at 0 ms, both timed", g.open)
	}
}

// TestAlertGroupsTaken: the groups note, per partition, the offset after the furthest record
// they took (a partition read again from an earlier offset does not lower it: the groups still
// hold the effects of the records past the re-read); a clean stop's commit confirms those it
// equals or passes (records the groups never saw: taken moves to it), and a record taken after
// clears the confirmation.
func TestAlertGroupsTaken(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	var g alertGroups
	fold := func(parts []int32, offs []int64) {
		rows := make([]testbatch.Row, len(parts))
		for i := range rows {
			rows[i] = testbatch.Row{Partition: parts[i], Offset: offs[i], Features: []float32{0}, Score: batch.Score{Scored: true}}
		}
		b := testbatch.New(t, mem, "t", []string{"x"}, false, true, rows)
		g.fold(b, time.Minute)
		b.Release()
	}
	fold([]int32{0, 0, 1, 1, 0}, []int64{5, 6, 10, 11, 7})
	fold([]int32{0}, []int64{3}) // (partition 0 read again)
	if fmt.Sprint(g.taken) != "map[0:8 1:12]" {
		t.Fatalf("taken %v, want map[0:8 1:12]", g.taken)
	}
	fold([]int32{3}, []int64{20})
	g.confirm(map[int32]int64{0: 8, 1: 11, 2: 4, 3: 25}) // (3: dead letters after 20, say)
	if fmt.Sprint(g.confirmed) != "map[0:true 3:true]" || fmt.Sprint(g.taken) != "map[0:8 1:12 3:25]" {
		t.Errorf("confirmed %v, taken %v; want partitions 0 and 3 (1's commit lags, 2 took nothing), 3 at its commit, 25",
			g.confirmed, g.taken)
	}
	fold([]int32{2}, []int64{4})
	if g.confirmed != nil || g.taken[2] != 5 {
		t.Errorf("after a record taken: confirmed %v, taken %v; want none, 2 taken to 5", g.confirmed, g.taken)
	}
}
