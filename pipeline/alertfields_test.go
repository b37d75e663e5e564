package pipeline

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/sink"
)

// alertOutput is the part of the JSON output TestPipelineAlertFieldsKfake reads.
type alertOutput struct {
	ID          string  `json:"id"`
	Offset      int64   `json:"offset"`
	Key         *string `json:"key"`
	Timestamp   *string `json:"timestamp"`
	Explanation string  `json:"explanation"`
	Scores      *struct {
		Outlier        bool            `json:"outlier"`
		Suppressed     bool            `json:"suppressed"`
		Folded         bool            `json:"folded"`
		AlertTimestamp json.RawMessage `json:"alert_timestamp"`
		FoldedInto     int             `json:"folded_into_previous_alert"`
	} `json:"scores"`
}

// alertOutputs reads topic's JSON outputs by offset (a record read again: its last output).
func alertOutputs(t *testing.T, br testsupport.Broker, topic string) map[int64]alertOutput {
	t.Helper()
	outs := map[int64]alertOutput{}
	for _, m := range testsupport.ReadTopic(t, br, topic, 1) {
		var o alertOutput
		if err := json.Unmarshal(m.Value, &o); err != nil {
			t.Fatalf("output %s: %v", m.Value, err)
		}
		outs[o.Offset] = o
	}
	return outs
}

// alertThenFlagged reads topic's outputs and checks the set-up of the alert-group restart tests:
// s1's record at offset alert opened an alert and its record at again (after what the test
// did in between, named by after) is flagged; it returns the two outputs (b's Folded is the
// test's question).
func alertThenFlagged(t *testing.T, br testsupport.Broker, topic string, alert, again int64, after string) (a, b alertOutput) {
	t.Helper()
	outs := alertOutputs(t, br, topic)
	a, b = outs[alert], outs[again]
	if a.Scores == nil || !a.Scores.Outlier || a.Scores.Folded {
		t.Fatalf("setup: s1's first far record: %+v, want an alert", a.Scores)
	}
	if b.Scores == nil || !b.Scores.Outlier {
		t.Fatalf("s1's far record %s: %+v, want flagged", after, b.Scores)
	}
	return a, b
}

// TestPipelineAlertFieldsKfake: end to end (emit: all, JSON), the outputs' alarm-cap and
// alert-group fields say what their explanations say. Three sensors, one reading a second
// each; s1 stuck far out twice, 25 minutes apart (alert_cooldown 10m: each time one alert and
// the rest folded into it, the second alert counting the first's folded records); s2 spiking
// once a minute in between, past a cap of 3 alarm starts per 1,000 records (suppressed).
func TestPipelineAlertFieldsKfake(t *testing.T) {
	alertFieldsRun(t, time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), false)
}

// TestPipelineAlertAtEpochKfake: an alert whose record's timestamp is exactly
// 1970-01-01T00:00:00Z (0 ms: s1's first stuck record here, its event time, ingest.event_time_field)
// is named by its folded records' alert_timestamp as any other; null is for an alert whose
// record had no timestamp. Before, the alert groups took a time of 0 for none: its folded
// records said null. (Through Kafka's own timestamp no record is at 0 ms: kafka-go reads one of
// 0 or less as no time, null: TestPipelineNoTimestampKfake.)
func TestPipelineAlertAtEpochKfake(t *testing.T) {
	alertFieldsRun(t, time.UnixMilli(0).Add(-1801*time.Second), true)
}

// alertFieldsRun is TestPipelineAlertFieldsKfake's stream, its record i at t0 + i s: its Kafka
// timestamp, or with eventTime its "ts" field's (epoch ms; ingest.event_time_field).
func alertFieldsRun(t *testing.T, t0 time.Time, eventTime bool) {
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	const n = 4000
	rng := rand.New(rand.NewPCG(20, 28))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		k := i % 3
		temp, hum := 20+rng.NormFloat64(), 40+rng.NormFloat64()
		switch {
		case k == 1 && (i >= 1800 && i < 2100 || i >= 3300 && i < 3360): // s1 stuck
			temp = 80
		case k == 2 && i >= 2200 && i < 2800 && i%60 == 2: // s2's spikes
			temp = 80
		}
		at := t0.Add(time.Duration(i) * time.Second)
		recs[i] = &kgo.Record{Topic: in, Partition: 0, Key: fmt.Appendf(nil, "s%d", k), Timestamp: at,
			Value: fmt.Appendf(nil, `{"temp":%.3f,"hum":%.3f}`, temp, hum)}
		if eventTime {
			recs[i].Timestamp = time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
			recs[i].Value = fmt.Appendf(nil, `{"temp":%.3f,"hum":%.3f,"ts":%d}`, temp, hum, at.UnixMilli())
		}
	}
	testsupport.Produce(t, br, recs...)

	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Ingest.Features, cfg.Ingest.Uncertainty = []string{"temp", "hum"}, nil
	if eventTime {
		cfg.Ingest.EventTimeField = "ts"
	}
	cfg.Detect.FlagBy = detect.FlagBySignificance
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Distance.N = 1000, 500, 50
	cfg.Detect.AlarmRate, cfg.Detect.AlertCooldown = 0.003, 10*time.Minute
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	runUntilOut(t, cfg, n)

	outs := alertOutputs(t, br, out)
	if len(outs) != n {
		t.Fatalf("%d outputs, want %d (emit: all)", len(outs), n)
	}
	// Per key: its open alert's timestamp and the records folded into it so far.
	type alertGroup struct {
		at     string
		folded int
	}
	open := map[string]*alertGroup{}
	suppressed, folded, counted := 0, 0, 0
	for off := range int64(n) {
		o := outs[off]

		s := o.Scores
		if s == nil || o.Key == nil || o.Timestamp == nil {
			t.Fatalf("output %s: scores %v, key %v, timestamp %v", o.ID, s, o.Key, o.Timestamp)
		}
		e := o.Explanation
		if s.Suppressed != strings.HasPrefix(e, batch.SuppressedReason) || s.Suppressed && s.Outlier {
			t.Errorf("output %s: suppressed %v, outlier %v; explanation %q", o.ID, s.Suppressed, s.Outlier, e)
		}
		if s.Folded != strings.Contains(e, "folded into this key's open alert") || s.Folded && !s.Outlier {
			t.Errorf("output %s: folded %v, outlier %v; explanation %q", o.ID, s.Folded, s.Outlier, e)
		}
		if s.Suppressed {
			suppressed++
		}
		g := open[*o.Key]
		switch {
		case s.Folded:
			folded++
			if g == nil || string(s.AlertTimestamp) != `"`+g.at+`"` {
				t.Errorf("output %s: folded into the alert at %s, its key's last alert is %+v", o.ID, s.AlertTimestamp, g)
				continue
			}
			g.folded++
		case s.Outlier: // an alert: it counts the records folded into its key's previous one
			want := 0
			if g != nil {
				want = g.folded
			}
			says := want > 0 && strings.Contains(e, fmt.Sprintf("; %d more flagged records of this key were folded", want))
			if s.FoldedInto != want || says != (want > 0) || s.AlertTimestamp != nil {
				t.Errorf("output %s: an alert with folded_into_previous_alert %d, alert_timestamp %s, want %d (explanation %q)", o.ID,
					s.FoldedInto, s.AlertTimestamp, want, e)
			}
			if want > 0 {
				counted++
			}
			open[*o.Key] = &alertGroup{at: *o.Timestamp}
		default:
			if s.FoldedInto != 0 || s.AlertTimestamp != nil {
				t.Errorf("output %s: not flagged, folded_into_previous_alert %d, alert_timestamp %s", o.ID, s.FoldedInto, s.AlertTimestamp)
			}
		}
	}
	t.Logf("%d outputs: %d suppressed, %d folded, %d alerts counting a previous one's", n, suppressed, folded, counted)
	if suppressed == 0 || folded == 0 || counted == 0 {
		t.Fatalf("the stream was made to have suppressed records, folded ones and an alert counting them: %d, %d, %d", suppressed, folded, counted)
	}
}
