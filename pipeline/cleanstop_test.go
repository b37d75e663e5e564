package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestCleanRestartAlertGroupKfake: end to end, an instance stopped cleanly (its final commit,
// then a LeaveGroup: the group's next generation is an empty one, so the restart's first
// assignment is not the saved generation + 1) and started again with the same state_dir keeps
// its open alert groups when its partition's committed offset is still the one after the last
// record it took (alarm state format 4): s1's far record 5 minutes after its alert
// (alert_cooldown 10m) is folded into it (the last record before the stop a dead letter: the
// commit went past the records the groups took). Before, the missed generation dropped every group:
// it was a new alert. Another member of the group that read and committed records in between
// (the offset moved) drops them: a new alert. One that read them without committing (as one
// that crashed) keeps them: its outputs were written, and the records read again here fold
// into this instance's alert, which was written too.
func TestCleanRestartAlertGroupKfake(t *testing.T) {
	for _, other := range []otherMember{noOther, otherCommits, otherReadsOnly} {
		t.Run(other.String(), func(t *testing.T) {
			cleanRestartAlertGroup(t, testsupport.KfakeBroker(t), other)
		})
	}
}

// otherMember is what another member of the group does between the runs.
type otherMember int

const (
	noOther        otherMember = iota
	otherCommits               // reads records and commits them
	otherReadsOnly             // reads records, commits none
)

func (o otherMember) String() string {
	return [...]string{"alone", "another member commits", "another member reads only"}[o]
}

// TestCleanRestartAlertGroupRealBroker: TestCleanRestartAlertGroupKfake's clean stop and
// restart on Apache Kafka.
func TestCleanRestartAlertGroupRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	for _, other := range []otherMember{noOther, otherCommits} {
		t.Run(other.String(), func(t *testing.T) {
			cleanRestartAlertGroup(t, br, other)
		})
	}
}

func cleanRestartAlertGroup(t *testing.T, br testsupport.Broker, other otherMember) {
	run := newAlertRun(t, br)
	in, out, group := run.in, run.out, run.group
	// s1's records: 1201 its alert, 1519 far again 318 s later; 1500-1509 between the runs.
	const first, alert, between, again, last = 1500, 1201, 1510, 1519, 1540
	run.edit = func(i int, r *kgo.Record) {
		if i == first-1 { // a dead letter last: committed past the last record the groups took
			r.Value = []byte("not json")
		}
	}
	run.produce(0, first, alert)
	cfg := run.config(t, 10*time.Minute)
	r := startPipeline(t, cfg, nil)
	for deadline := time.Now().Add(60 * time.Second); r.p.Stats().RecordsOut.Load() < first-1 || r.p.Stats().DeadLetters.Load() < 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d records out and %d dead letters after 60 s, want %d and 1", r.p.Stats().RecordsOut.Load(), r.p.Stats().DeadLetters.Load(), first-1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil { // (a clean stop: final commit, state saved, LeaveGroup)
		t.Fatal(err)
	}
	run.produce(first, between, -1)
	want := int64(last - first)
	if other != noOther { // another member of the group reads 1500-1509
		rd := kafka.NewReader(kafka.ReaderConfig{Brokers: br.Addrs, GroupID: group, Topic: in, MaxWait: 200 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		for range between - first {
			read := rd.FetchMessage
			if other == otherCommits {
				read = rd.ReadMessage // (commits each one)
			}
			if _, err := read(ctx); err != nil {
				t.Fatalf("the other member: %v", err)
			}
		}
		cancel()
		if err := rd.Close(); err != nil {
			t.Fatal(err)
		}
		if other == otherCommits {
			want = last - between
		}
	}
	run.produce(between, last, again)
	runUntilOut(t, cfg, want)

	a, b := alertThenFlagged(t, br, out, alert, again, "after the restart")
	if b.Scores.Folded != (other != otherCommits) {
		t.Errorf("s1's far record 318 s after its alert, after a clean stop and restart (%s): folded %v (alert_timestamp %s), want %v (%s)",
			other, b.Scores.Folded, b.Scores.AlertTimestamp, other != otherCommits, b.Explanation)
	}
	if other != otherCommits && (a.Timestamp == nil || string(b.Scores.AlertTimestamp) != `"`+*a.Timestamp+`"`) {
		t.Errorf("folded into the alert of %s, want the first far record's", b.Scores.AlertTimestamp)
	}
}

// alertRun is a test's topics in, out and dlq (one partition each) and group on br for a run,
// a stop and a restart of one instance that keeps its alert groups, and its sensor records:
// keys s0, s1, s2 in turn, one a second from 2026-11-28 00:00 UTC, temp 20 ± 1 and hum 40 ± 1
// (PCG 20, 28, drawn in the records' order), temp 80 at the far one.
type alertRun struct {
	t                   *testing.T
	br                  testsupport.Broker
	in, out, dlq, group string
	t0                  time.Time
	rng                 *rand.Rand
	// edit, if set, changes record i before it is produced.
	edit func(i int, r *kgo.Record)
}

func newAlertRun(t *testing.T, br testsupport.Broker) *alertRun {
	t.Helper()
	run := &alertRun{t: t, br: br, in: testsupport.UniqueName("in"), out: testsupport.UniqueName("out"), dlq: testsupport.UniqueName("dlq"),
		group: testsupport.UniqueName("group")}
	testsupport.CreateTopics(t, br, map[string]int{run.in: 1, run.out: 1, run.dlq: 1})
	run.t0 = time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	run.rng = rand.New(rand.NewPCG(20, 28))
	return run
}

// produce writes records from to to-1 to the input topic, record far far out (-1: none).
func (run *alertRun) produce(from, to, far int) {
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		temp, hum := 20+run.rng.NormFloat64(), 40+run.rng.NormFloat64()
		if i == far {
			temp = 80
		}
		r := &kgo.Record{Topic: run.in, Partition: 0, Key: fmt.Appendf(nil, "s%d", i%3), Timestamp: run.t0.Add(time.Duration(i) * time.Second),
			Value: fmt.Appendf(nil, `{"temp":%.3f,"hum":%.3f}`, temp, hum)}
		if run.edit != nil {
			run.edit(i, r)
		}
		recs = append(recs, r)
	}
	testsupport.Produce(run.t, run.br, recs...)
}

// config is the run's configuration, validated: features temp and hum without uncertainty,
// flagged by significance, window 1000 (from 500 records, n 50), alarm rate 0.003, alerts
// folded for cooldown, a state_dir of the test's own.
func (run *alertRun) config(t *testing.T, cooldown time.Duration) Config {
	t.Helper()
	cfg := sensorConfig(run.br, run.in, run.out, run.dlq, run.group, sink.EmitAll)
	cfg.Ingest.Features, cfg.Ingest.Uncertainty = []string{"temp", "hum"}, nil
	cfg.Detect.FlagBy = detect.FlagBySignificance
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Distance.N = 1000, 500, 50
	cfg.Detect.AlarmRate, cfg.Detect.AlertCooldown = 0.003, cooldown
	cfg.Detect.StateDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}
