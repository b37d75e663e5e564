package pipeline

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestGracefulRestartScoresAsUninterruptedKfake: a graceful stop and restart with detect.state_dir
// (the model snapshot, the alarm state and the window: snapwin30) scores every record after the
// restart as the run that was not stopped scores it, record for record, until the first model
// built after the restart serves in either run. The rebuild comes at the same record in both
// (refresh_records counted across the stop, on the restored window: records 700-1,699 at the
// 1,700th); the record its model first serves at depends on the build's time (the build runs
// beside the batches), so the runs are compared up to it. The equality promised: every field of
// every output (the scores, scores.recent among them, the flags, the alert fields, the
// explanation, the model version). Before, the window started empty: the restarted run
// rebuilt from the 500 records after the restart (min_records) at the 1,500th, where the
// uninterrupted run's model went on serving (its model served from the 1,600th here); and
// scores.recent, which ranks a score among its series' last scores, was left out of the
// comparison until snapwin31 saved the stream's recent past with the alarm state (a restart
// started it empty: stages/detect/recent_state.go).
func TestGracefulRestartScoresAsUninterruptedKfake(t *testing.T) {
	gracefulRestartScoresAsUninterrupted(t, testsupport.KfakeBroker(t))
}

// TestGracefulRestartScoresAsUninterruptedRealBroker: the same on Apache Kafka.
func TestGracefulRestartScoresAsUninterruptedRealBroker(t *testing.T) {
	gracefulRestartScoresAsUninterrupted(t, testsupport.RealBroker(t))
}

func gracefulRestartScoresAsUninterrupted(t *testing.T, br testsupport.Broker) {
	const stopAt, total, rebuildAt = 1000, 2000, 1700
	run := newAlertRun(t, br) // (s0, s1, s2 a second apart; one partition)
	outB := testsupport.UniqueName("out-restarted")
	testsupport.CreateTopics(t, br, map[string]int{outB: 1})
	config := func(out, group string) Config {
		cfg := run.config(t, 10*time.Minute) // window 1,000, min_records 500, significance
		cfg.Sink.Topic, cfg.Ingest.GroupID, cfg.Sink.Emit = out, group, "all"
		cfg.Detect.RefreshRecords, cfg.Detect.RecalibrateRecords, cfg.Detect.RefreshInterval = 1200, 1<<30, time.Hour
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	// Far records before and after the restart: alerts, folded records, a series in alarm.
	far := map[int]bool{620: true, 623: true, 905: true, 1010: true, 1013: true, 1400: true, 1650: true}
	produce := func(from, to int) {
		for i := from; i < to; {
			next := to
			for f := range far {
				if f >= i && f < next {
					next = f
				}
			}
			if next == i {
				run.produce(i, i+1, i)
				i++
				continue
			}
			run.produce(i, next, -1)
			i = next
		}
	}
	produce(0, stopAt)
	restarted := config(outB, testsupport.UniqueName("group-restarted"))
	runUntilOut(t, restarted, stopAt) // (the graceful stop: final commit, then the state saved)
	// The restart: the records to 1,600 first, then a pause, so that a build started by them (at
	// the 1,500th before snapwin30: min_records after the restart) serves the next batch.
	rb := startPipeline(t, restarted, nil)
	waitOut := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); rb.p.Stats().RecordsOut.Load() < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d records out after the restart in 60 s", rb.p.Stats().RecordsOut.Load(), n)
			}
		}
	}
	produce(stopAt, 1600)
	waitOut(600)
	time.Sleep(time.Second)
	produce(1600, total)
	waitOut(total - stopAt)
	if err := rb.stop(t, restarted.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatal(err)
	}
	runUntilOut(t, config(run.out, run.group), total) // the uninterrupted run, of the same records

	read := func(topic string) map[int64]map[string]any {
		outs := map[int64]map[string]any{}
		for _, m := range testsupport.ReadTopic(t, br, topic, 1) {
			var o map[string]any
			if err := json.Unmarshal(m.Value, &o); err != nil {
				t.Fatalf("output %s: %v", m.Value, err)
			}
			outs[int64(o["offset"].(float64))] = o // (a record read again: its last output)
		}
		return outs
	}
	a, b := read(run.out), read(outB)
	firstRebuilt := func(outs map[int64]map[string]any) int64 {
		for off := int64(0); off < total; off++ {
			if v, _ := outs[off]["model_version"].(float64); v > 1 {
				return off
			}
		}
		return total
	}
	until := min(firstRebuilt(a), firstRebuilt(b))
	if until < rebuildAt {
		t.Fatalf("a model after the first served from record %d (uninterrupted: %d, restarted: %d), want none before the rebuild's trigger at %d",
			until, firstRebuilt(a), firstRebuilt(b), rebuildAt)
	}
	bad, flagged := 0, 0
	for off := int64(0); off < until; off++ {
		ja, _ := json.Marshal(a[off])
		jb, _ := json.Marshal(b[off])
		if a[off] == nil || string(ja) != string(jb) {
			if bad++; bad <= 5 {
				t.Errorf("record %d: restarted %s\nuninterrupted %s", off, jb, ja)
			}
		}
		if sc, ok := a[off]["scores"].(map[string]any); ok && sc["outlier"] == true {
			flagged++
		}
	}
	if bad > 0 {
		t.Errorf("%d of the %d records before the first rebuild's model differ between the restarted and the uninterrupted run", bad, until)
	}
	if flagged < 3 {
		t.Errorf("setup: %d records flagged, want the far ones among them", flagged)
	}
	t.Logf("records 0-%d equal (the restart at %d; the rebuild's model first served at %d uninterrupted, %d restarted); %d flagged",
		until-1, stopAt, firstRebuilt(a), firstRebuilt(b), flagged)
}
