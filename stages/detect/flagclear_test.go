package detect

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// runsOf counts the runs of true in b (a run: maximal consecutive true values).
func runsOf(b []bool) int {
	n := 0
	for i, v := range b {
		if v && (i == 0 || !b[i-1]) {
			n++
		}
	}
	return n
}

// TestFlagClearHoldsAFaultEpisode: a fault of the temperature whose combined score hovers about
// min_score (+5.5 sd on a 70 +- 2 sensor) chattered under the flag without a deadband: 48 alarms
// and clears in 600 records, each a false changepoint on SKAB's own scorer and a separate page
// (docs/BENCHMARKS.md §12.25). With detect.flag_clear (default 0.7 of min_score) the episode's
// flags come in 3 runs and cover more of it (up to the alarm cap: 100 flags a window of 5,000,
// 0.17 of the fault); a clean stream gains no flag.
func TestFlagClearHoldsAFaultEpisode(t *testing.T) {
	const lo, hi = 8000, 8600
	d, _ := sensorStream(12000, 11, nil, nil)
	for i := lo; i < hi; i++ {
		d.Cols[0][i] += 11
	}
	run := func(clear float64) (runs int, cover, clean float64) {
		cfg := Default()
		cfg.Window, cfg.MinRecords = 5000, 1000
		cfg.FlagClear = clear
		_, flagged, _, _ := streamScores(t, cfg, d)
		clean = share(flagged[cfg.MinRecords:lo])
		return runsOf(flagged[lo:hi]), share(flagged[lo:hi]), clean
	}
	runs0, cover0, clean0 := run(0)
	runs, cover, clean := run(Default().FlagClear)
	t.Logf("fault of 600 records: without the deadband %d runs of flags covering %.2f; with flag_clear %g %d runs covering %.2f; clean share %.4f / %.4f",
		runs0, cover0, Default().FlagClear, runs, cover, clean0, clean)
	if runs0 < 10 {
		t.Fatalf("the fault chatters in %d runs without the deadband: the stream no longer tests it", runs0)
	}
	if 2*runs > runs0 {
		t.Errorf("with flag_clear %d runs of flags against %d without: want at most half", runs, runs0)
	}
	if cover < cover0 {
		t.Errorf("with flag_clear the flags cover %.2f of the fault against %.2f without", cover, cover0)
	}
	if clean > 0.001 { // issue 20's healthy-stream target: at most 0.1 % flagged
		t.Errorf("%.4f of the clean records flagged with flag_clear", clean)
	}
}

// TestFlagClearSpikeNotExtended: a lone spike's following ordinary record is not held.
func TestFlagClearSpikeNotExtended(t *testing.T) {
	a := newAlarmCap(100)
	clear := 3.5
	steps := []struct {
		sig         bool
		score       float64
		flag, held  bool
		description string
	}{
		{false, 4, false, false, "ordinary, no flag before"},
		{true, 9, true, false, "a spike"},
		{false, 0.3, false, false, "the next record is ordinary: cleared"},
		{true, 6, true, false, "a fault starts"},
		{false, 4.2, true, true, "below min_score, above the clear level: held"},
		{false, 3.6, true, true, "still held"},
		{false, 3.4, false, false, "below the clear level: cleared"},
		{false, 4.8, false, false, "no flag before: not held"},
	}
	for i, st := range steps {
		flag, held := a.admitRun(st.sig, a.last(), st.score, clear, 10)
		if flag != st.flag || held != st.held {
			t.Errorf("step %d (%s): flag %v held %v, want %v %v", i, st.description, flag, held, st.flag, st.held)
		}
	}
	// The cap limits alarm starts: with one flag a window, a held record that continues the
	// alarm is flagged past it (and counted), one that would start an alarm is not, nor is a
	// significant record starting one.
	b := newAlarmCap(100)
	if f, _ := b.admitRun(true, b.last(), 9, clear, 1); !f {
		t.Fatal("the first significant record was not flagged")
	}
	if f, h := b.admitRun(false, b.last(), 4.5, clear, 1); !f || !h {
		t.Errorf("a record continuing the alarm past a spent cap: flag %v held %v, want held", f, h)
	}
	if f, h := b.admitRun(false, false, 4.5, clear, 1); f || h {
		t.Errorf("a record held with no alarm going on: flag %v held %v", f, h)
	}
	if f, _ := b.admitRun(true, false, 9, clear, 1); f {
		t.Errorf("a significant record starting an alarm past a spent cap was flagged")
	}
	if c := (&Config{FlagClear: 0, MinScore: 5, FlagBy: FlagBySignificance}).clearScore(); !math.IsInf(c, 1) {
		t.Errorf("flag_clear 0: clear level %g, want +Inf (off)", c)
	}
	if c := (&Config{FlagClear: 0.7, MinScore: 5, FlagBy: FlagBySignificance}).clearScore(); c != 3.5 {
		t.Errorf("flag_clear 0.7 at min_score 5: clear level %g, want 3.5", c)
	}
}

// TestFlagClearHeldRecordExplained: a held record's explanation says it is held, with its score
// below the threshold, so the reason never contradicts the flag.
func TestFlagClearHeldRecordExplained(t *testing.T) {
	sc := batch.Score{Scored: true, Outlier: true, Held: true, Score: 4.2, Threshold: 5,
		Deviations: []batch.Deviation{{Feature: "temp", RobustSD: 5.4}}}
	r := Reason(&sc)
	if !strings.HasPrefix(r, "held: score 4.2 < threshold 5") || !strings.Contains(r, "detect.flag_clear") || !strings.Contains(r, "temp") {
		t.Errorf("held record's reason %q", r)
	}
}

// TestFlagClearHeldKeyRecordNotSignificant: a record its key's deadband held (ByKey, Outlier,
// Held, below min_score) is not significant in the global model's window either, so the global
// model's next builds keep it in their reference as the key's model does; its key's significant
// records (flagged or suppressed) are left out.
func TestFlagClearHeldKeyRecordNotSignificant(t *testing.T) {
	cfg := Default()
	cfg.KeyBy = KeyByKey
	s := &Stage{cfg: cfg, recs: newWindowRing(8), pending: map[*batch.Batch]uint64{}, alarms: newAlarmCap(8)}
	b := &batch.Batch{Scores: []batch.Score{
		{Scored: true, ByKey: true, Outlier: true, Score: 9, Threshold: 5},
		{Scored: true, ByKey: true, Outlier: true, Held: true, Score: 4.2, Threshold: 5},
		{Scored: true, ByKey: true, Suppressed: true, Score: 6, Threshold: 5},
		{Scored: true, ByKey: true, Score: 1, Threshold: 5},
	}}
	s.pending[b] = s.recs.push("t", []int32{0, 0, 0, 0}, []int64{0, 1, 2, 3}, nil, nil)
	s.capAlarms(b, true)
	got, want := s.recs.significant(4), []bool{true, false, true, false}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d (%+v): significant %v, want %v", i, b.Scores[i], got[i], want[i])
		}
	}
}

// TestFlagClearLastAfterKeysRestore: a key's alarm state (the last record's flag, which the
// deadband holds) survives the keys' state file, its ring wrapped or not: the restored key
// holds (or clears) its next record as the running one does.
func TestFlagClearLastAfterKeysRestore(t *testing.T) {
	cfg := keyedConfig()
	features := []string{"temp"}
	w := cfg.Keys.Window
	for _, n := range []int{1, 7, w - 1, w, w + 1, 3*w + 5} {
		for _, lastFlagged := range []bool{false, true} {
			k := newKeyedScorer()
			st := k.state("a", &cfg, len(features))
			for i := range n {
				sig := i == n-1 && lastFlagged || i%100 == 3 && i < n-1
				st.cap.admitOver(sig, false, true, capLimit(cfg.AlarmRate, w))
			}
			if st.cap.last() != lastFlagged {
				t.Fatalf("%d records: last %v, want %v", n, st.cap.last(), lastFlagged)
			}
			r := newKeyedScorer()
			if _, err := r.decodeKeys(context.Background(), KeysSnapshotFormat, k.encodeKeys(features, &cfg), features, &cfg); err != nil {
				t.Fatal(err)
			}
			rc := r.keys["a"].cap
			if rc.last() != lastFlagged || rc.count != st.cap.count {
				t.Errorf("%d records, last flagged %v: restored last %v count %d, want count %d", n, lastFlagged, rc.last(), rc.count, st.cap.count)
			}
			f0, h0 := st.cap.admitRun(false, st.cap.last(), 4, cfg.clearScore(), capLimit(cfg.AlarmRate, w))
			f1, h1 := rc.admitRun(false, rc.last(), 4, cfg.clearScore(), capLimit(cfg.AlarmRate, w))
			if f0 != f1 || h0 != h1 || h1 != lastFlagged {
				t.Errorf("%d records, last flagged %v: next record held %v/%v restored, %v/%v running", n, lastFlagged, f1, h1, f0, h0)
			}
		}
	}
}

// TestFlagClearHoldsPerKeyWithoutKeyBy: under key_by: none, a fleet on one topic (records
// interleaved by key, e.g. the sensor id as the Kafka message key) is held per key: the series
// whose previous record decides a hold is the record's key's, not the stream's. Sensor a's fault
// hovers about min_score with b's ordinary records between: a's records stay held; b's record
// right after a's flag is not held by a's alarm; records without a key are one series.
func TestFlagClearHoldsPerKeyWithoutKeyBy(t *testing.T) {
	cfg := Default() // key_by: none, min_score 5, flag_clear 0.7: the clear level 3.5
	steps := []struct {
		key        string // "": no key
		score      float64
		flag, held bool
		why        string
	}{
		{"a", 9, true, false, "a's fault starts"},
		{"b", 4, false, false, "b right after: a's alarm does not hold b"},
		{"a", 4.2, true, true, "a's next record, b's between: held by a's alarm"},
		{"b", 0.3, false, false, "b ordinary"},
		{"a", 3.8, true, true, "a still held"},
		{"", 6, true, false, "a record without a key, significant"},
		{"a", 3.9, true, true, "a still held: the keyless record is another series"},
		{"", 3.9, true, true, "the keyless series held by its own previous record"},
		{"a", 3.4, false, false, "a below the clear level: cleared"},
		{"a", 4.5, false, false, "a not held again without a flag before"},
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rows := make([]testbatch.Row, len(steps))
	for i, st := range steps {
		rows[i] = testbatch.Row{Offset: int64(i), Features: []float32{0}}
		if st.key != "" {
			rows[i].Key = []byte(st.key)
		}
	}
	b := testbatch.New(t, mem, "fleet", []string{"x"}, false, false, rows)
	defer b.Release()
	b.Scores = make([]batch.Score, len(steps))
	for i, st := range steps {
		b.Scores[i] = batch.Score{Scored: true, Score: st.score, Threshold: cfg.MinScore, Outlier: st.score >= cfg.MinScore}
	}
	s := &Stage{cfg: cfg, recs: newWindowRing(64), pending: map[*batch.Batch]uint64{}, alarms: newAlarmCap(64)}
	s.capAlarms(b, true)
	for i, st := range steps {
		if sc := b.Scores[i]; sc.Outlier != st.flag || sc.Held != st.held {
			t.Errorf("record %d (%s): flagged %v held %v, want %v %v", i, st.why, sc.Outlier, sc.Held, st.flag, st.held)
		}
	}
}

// TestFlagClearSeriesBounded: the deadband's memory of keys in alarm stays within about twice
// the cap's flags per window however many keys pass (a key flagged once and never seen again
// is forgotten once it is a window old), a key's flag more than window records back does not
// hold, and once the newest flag is stale every series is forgotten.
func TestFlagClearSeriesBounded(t *testing.T) {
	const window, limit = 100, 2
	a, s := newAlarmCap(window), seriesAlarms{}
	for i := range 10_000 {
		key, q := []byte(strconv.Itoa(i)), uint64(i+1)
		flag, _ := a.admitStart(true, s.inAlarm(key, q, window), 9, 3.5, limit)
		s.note(key, q, flag, window, limit)
		if len(s.keyed) > 2*limit+1 {
			t.Fatalf("after %d keys %d kept in alarm, want at most %d", i+1, len(s.keyed), 2*limit+1)
		}
	}
	s = seriesAlarms{}
	s.note([]byte("a"), 1, true, window, limit)
	s.note(nil, 2, true, window, limit)
	if !s.inAlarm([]byte("a"), 1+window, window) || !s.inAlarm([]byte{}, 2+window, window) {
		t.Errorf("a flag %d records back does not hold", window)
	}
	if s.inAlarm([]byte("a"), 2+window, window) || s.inAlarm(nil, 3+window, window) {
		t.Errorf("a flag %d records back still holds", window+1)
	}
	if !s.expire(1+window, window) || len(s.keyed) != 1 || s.keyless != 2 {
		t.Errorf("expire forgot a series still in alarm")
	}
	if s.expire(3+window, window) || len(s.keyed) != 0 || s.keyless != 0 {
		t.Errorf("every flag stale: %d keys and the keyless series at %d still kept", len(s.keyed), s.keyless)
	}
}

// TestAlarmCapSize: a key's alarm cap, with the position its key's series is handed back at
// (alarmCap.at), stays within the 48 bytes of heap it took before (a key's bytes, keyBytes).
func TestAlarmCapSize(t *testing.T) {
	if n := unsafe.Sizeof(alarmCap{}); n > 48 {
		t.Errorf("alarmCap is %d bytes, want at most 48", n)
	}
}

// TestMergeRows: the ascending union of two ascending row lists.
func TestMergeRows(t *testing.T) {
	for _, c := range []struct{ a, b, want []int }{
		{nil, nil, nil},
		{[]int{1, 4}, nil, []int{1, 4}},
		{nil, []int{2}, []int{2}},
		{[]int{0, 3, 5, 9}, []int{1, 3, 4, 10}, []int{0, 1, 3, 4, 5, 9, 10}},
	} {
		if got := mergeRows(c.a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("mergeRows(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// capStep is one record given to capAlarms: its key (nullKey: a null key), whether its key's
// model scored it (its flag and hold then its key's, which capAlarms leaves), its combined score,
// and the flag and hold wanted.
type capStep struct {
	key        string
	byKey      bool
	score      float64
	flag, held bool
	why        string
}

// keyStep is a capStep under key_by: key with evict: the key evicted right after the record (its
// next record warming again, or its model's first again).
type keyStep struct {
	capStep
	evict bool
}

const nullKey = "\x00null"

// runCapSteps gives each batch of steps to one stage's capAlarms in turn (min_score 5) and
// checks every record's flag and hold.
func runCapSteps(t *testing.T, cfg Config, batches ...[]capStep) {
	t.Helper()
	kb := make([][]keyStep, len(batches))
	for bi, steps := range batches {
		for _, st := range steps {
			kb[bi] = append(kb[bi], keyStep{capStep: st})
		}
	}
	runKeySteps(t, cfg, kb...)
}

// runKeySteps is runCapSteps with the keys' states as the keys' pass leaves them: a key's
// model's records admitted into its cap with the flag given, but those of a key whose cap has
// admitted none yet (its first batch by its model), left to capAlarms (keyed_handover.go); its
// evictions handed back.
func runKeySteps(t *testing.T, cfg Config, batches ...[]keyStep) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := &Stage{cfg: cfg, recs: newWindowRing(64), pending: map[*batch.Batch]uint64{}, alarms: newAlarmCap(cfg.Window)}
	s.keyed = newKeyedScorer()
	s.keyed.hand.on = true
	states := map[string]*keyState{}
	for bi, steps := range batches {
		rows := make([]testbatch.Row, len(steps))
		for i, st := range steps {
			rows[i] = testbatch.Row{Offset: int64(i), Features: []float32{0}}
			if st.key != nullKey {
				rows[i].Key = []byte(st.key)
			}
		}
		b := testbatch.New(t, mem, "fleet", []string{"x"}, false, false, rows)
		b.Scores = make([]batch.Score, len(steps))
		s.keyed.hand.start(s.series.pos)
		for i, st := range steps {
			sc := batch.Score{Scored: true, Score: st.score, Threshold: cfg.MinScore, Outlier: st.score >= cfg.MinScore}
			if st.byKey {
				sc.ByKey, sc.Outlier, sc.Held = true, st.flag, st.held
				ks := states[st.key]
				if ks == nil {
					ks = &keyState{key: st.key, cap: newAlarmCap(cfg.Keys.Window)}
					states[st.key] = ks
				}
				if !s.keyed.hand.waits(ks, i) {
					ks.cap.admitOver(st.flag, false, true, 1<<20) // (the keys' pass's decision, given)
				} else {
					sc.Outlier, sc.Held = st.score >= cfg.MinScore || st.score >= cfg.clearScore(), false
				}
			}
			if st.evict {
				if ks := states[st.key]; ks != nil {
					ks.gone = true
					s.keyed.hand.evicted(ks)
					delete(states, st.key)
				}
			}
			b.Scores[i] = sc
		}
		s.capAlarms(b, true)
		for i, st := range steps {
			if sc := b.Scores[i]; sc.Outlier != st.flag || sc.Held != st.held {
				t.Errorf("batch %d record %d (%s): flagged %v held %v, want %v %v", bi, i, st.why, sc.Outlier, sc.Held, st.flag, st.held)
			}
		}
		b.Release()
	}
}

// TestFlagClearKeySeriesAcrossItsModels: under key_by: key a key's series goes on whichever model
// scores its records: a warming key's records are held by its series on the global model's path;
// its first record by its own model is held by its last warming record's flag (at most a window
// back), decided in its key's cap; a key evicted with its last record flagged by its own cap
// has its next record, warming again, held by that flag (evicted within a batch or between
// batches, at most a window back), and one whose last record was not flagged is not held by an
// older flag. Before, neither path continued the other's alarm.
func TestFlagClearKeySeriesAcrossItsModels(t *testing.T) {
	cfg := Default()
	cfg.KeyBy, cfg.Window, cfg.AlarmRate = KeyByKey, 50, 0.5 // (a cap of 25 flags: never spent here)
	g := func(key string, score float64, flag, held bool, why string) keyStep {
		return keyStep{capStep: capStep{key, false, score, flag, held, why}}
	}
	own := func(key string, score float64, flag, held bool, why string) keyStep {
		return keyStep{capStep: capStep{key, true, score, flag, held, why}}
	}
	evicted := func(s keyStep) keyStep { s.evict = true; return s }
	filler := func(n int) []keyStep {
		out := make([]keyStep, n)
		for i := range out {
			out[i] = g("f", 0.2, false, false, "another key's record")
		}
		return out
	}
	runKeySteps(t, cfg,
		[]keyStep{
			g("a", 9, true, false, "a warming, significant"),
			g("a", 4, true, true, "a still warming: held by its series"),
			own("a", 4.2, true, true, "a's first record by its own model: held by its last warming record's flag"),
			own("a", 4.1, true, true, "a's next, in the same batch: held in its cap too"),
			evicted(own("a", 1, false, false, "a's model's record, cleared, then a evicted")),
			g("a", 4, false, false, "a warming again: its previous record was not flagged"),
		},
		[]keyStep{g("b", 9, true, false, "b warming, significant")},
		[]keyStep{own("b", 1, false, false, "b's model's first record, below the clear level"), g("c", 0.2, false, false, "c warming")},
		[]keyStep{own("b", 4, false, false, "b's next: its previous record was not flagged")},
		[]keyStep{g("d", 9, true, false, "d warming, significant"), evicted(own("d", 4.2, true, true, "d's model's first, held; d evicted within the batch"))},
		[]keyStep{g("d", 4, true, true, "d back on the global model: held by its model's flag")},
		[]keyStep{g("e", 9, true, false, "e warming, significant"), own("e", 9, true, false, "e's model's first, significant")},
		[]keyStep{evicted(own("e", 4.5, true, true, "e's next, held by its cap; e evicted between batches"))},
		[]keyStep{g("e", 4, true, true, "e back on the global model: held by its cap's last flag")},
		[]keyStep{g("h", 9, true, false, "h warming, significant")},
		filler(49), // h's first record by its model comes window records after its flag: held
		[]keyStep{evicted(own("h", 4, true, true, "h's model's first, a window after its warming flag: held; h evicted"))},
		filler(50), // h's next record, warming again, is window+1 records after its model's flag
		[]keyStep{g("h", 4, false, false, "h back on the global model a window and one after its flag: not held")},
		[]keyStep{g("k", 9, true, false, "k warming, significant")},
		filler(50),
		[]keyStep{own("k", 4, false, false, "k's model's first, a window and one after its warming flag: not held")},
	)
}

// TestFlagClearStaleInStreamRecords: a series' flag more than `window` records of the stream
// back no longer holds, the records its keys' models scored counted too (key_by: key). Before,
// only the global model's records were counted: a warming key's flag held across any number
// of warm keys' records.
func TestFlagClearStaleInStreamRecords(t *testing.T) {
	cfg := Default()
	cfg.KeyBy, cfg.Window, cfg.AlarmRate = KeyByKey, 8, 0.5 // (a cap of 4 flags: never spent here)
	warm := func(n int) []capStep {
		out := make([]capStep, n)
		for i := range out {
			out[i] = capStep{"w", true, 0.5, false, false, "a warm key's record"}
		}
		return out
	}
	runCapSteps(t, cfg,
		[]capStep{{"a", false, 9, true, false, "a warming, significant"}},
		warm(7), // a's next record is window records after its flag: held
		[]capStep{{"a", false, 4, true, true, "a's flag window records back: held"}},
		warm(8), // a's next record is window+1 records after its flag: not held
		[]capStep{{"a", false, 4, false, false, "a's flag window+1 records back: not held"}},
	)
}

// TestFlagClearEmptyKeyIsNoKey: a record whose key is empty is in the keyless records' series,
// as key_by: key (one key "") and alert_cooldown's groups read it, whichever other keys share
// its batch. Before, an empty key was a series of its own in a batch holding other keys' bytes
// and the keyless series in a batch without (Arrow's empty value of no value buffer is nil).
func TestFlagClearEmptyKeyIsNoKey(t *testing.T) {
	cfg := Default()
	runCapSteps(t, cfg,
		[]capStep{{"x", false, 0.3, false, false, "another key"}, {"", false, 9, true, false, "an empty key beside another key, significant"}},
		[]capStep{{"", false, 4, true, true, "the next empty key, in a batch of empty keys (Arrow reads it as nil): held"}},
		[]capStep{{nullKey, false, 4, true, true, "a keyless record: the same series, held"}},
		[]capStep{
			{nullKey, false, 9, true, false, "a keyless record, significant"},
			{"x", false, 0.3, false, false, "another key"},
			{"", false, 4, true, true, "an empty key beside another key: the keyless series, held"},
		},
	)
}

// TestFlagClearSeriesForgottenWhenStale: under key_by: none too, once the newest flag of a
// keyed series is more than `window` records back the memory is emptied, so the stream's
// records go back to a length check each (a key flagged once and never seen again, such as
// an event id, kept every later record's lookup and delete before).
func TestFlagClearSeriesForgottenWhenStale(t *testing.T) {
	cfg := Default()
	cfg.Window = 8
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := &Stage{cfg: cfg, recs: newWindowRing(64), pending: map[*batch.Batch]uint64{}, alarms: newAlarmCap(cfg.Window)}
	for bi, keys := range [][]string{{"event-1"}, {"b", "b", "b", "b", "b", "b", "b", "b"}, {"b"}} {
		rows := make([]testbatch.Row, len(keys))
		for i, k := range keys {
			rows[i] = testbatch.Row{Offset: int64(i), Features: []float32{0}, Key: []byte(k)}
		}
		b := testbatch.New(t, mem, "events", []string{"x"}, false, false, rows)
		b.Scores = make([]batch.Score, len(keys))
		for i := range b.Scores {
			b.Scores[i] = batch.Score{Scored: true, Score: 0.3, Threshold: cfg.MinScore}
		}
		if bi == 0 {
			b.Scores[0] = batch.Score{Scored: true, Score: 9, Threshold: cfg.MinScore, Outlier: true}
		}
		s.capAlarms(b, true)
		b.Release()
		if want := bi < 2; (len(s.series.keyed) > 0) != want {
			t.Errorf("after batch %d: %d keys in alarm kept, want some %v", bi, len(s.series.keyed), want)
		}
	}
}
