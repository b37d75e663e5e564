package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport"
)

// tempTimeConfig is a decoder's config of format with the feature temp and the event time ts
// in unit ("": the default, milliseconds), CSV's header temp,ts.
func tempTimeConfig(format Format, unit string) Config {
	return testConfig(format, []string{"temp"}, func(c *Config) {
		c.EventTimeField, c.EventTimeUnit = "ts", unit
		if format == FormatCSV {
			c.CSVHeader = []string{"temp", "ts"}
		}
	})
}

// tempTimeMessage is a record of tempTimeConfig's format with temp 1 and ts as written (a JSON
// number when ts is one).
func tempTimeMessage(format Format, ts string) string {
	switch format {
	case FormatCSV:
		return "1," + ts
	case FormatLogfmt:
		return "temp=1 ts=" + ts
	}
	return `{"temp":1,"ts":` + ts + `}`
}

// TestEventTimeBeyondRFC3339Refused: an epoch number read as milliseconds whose instant lies
// outside the years 0000-9999 (a producer's epoch microseconds or nanoseconds: 1764304016000000
// us is 2025-11-28, read as ms the year 57878) is a dead letter with ReasonBadTime, in every format
// and as a JSON number or string, never a record whose output "timestamp" is no RFC 3339 time
// (Go writes "57878-..." there, which RFC 3339 readers refuse). The bounds themselves are
// accepted (a time written as text has its four digits of year; its offset moves it at most a
// day past them).
func TestEventTimeBeyondRFC3339Refused(t *testing.T) {
	t.Parallel()
	lo := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	hi := time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()
	for _, format := range []Format{FormatJSON, FormatCSV, FormatLogfmt} {
		cfg := tempTimeConfig(format, "")
		dec := mustDecoder(t, cfg)
		out := cfg.NewDecoded()
		msg := func(ts string) string { return tempTimeMessage(format, ts) }
		var texts []string
		for _, ms := range []int64{lo, hi, 0, 1_764_304_016_000} {
			texts = append(texts, itoa(ms))
		}
		for _, ts := range texts {
			if err := dec.Decode([]byte(msg(ts)), out); err != nil || !out.HasEventTime || itoa(out.EventTime) != ts {
				t.Errorf("%s ts %s: %v, time %d, want it read", format, ts, err, out.EventTime)
			}
		}
		bad := []string{itoa(lo - 1), itoa(hi + 1), "1764304016000000", "1764304016000000000", "-1764304016000000"}
		if format == FormatJSON {
			bad = append(bad, `"1764304016000000"`)
		}
		for _, ts := range bad {
			var fe *FieldError
			err := dec.Decode([]byte(msg(ts)), out)
			if !errors.As(err, &fe) || fe.Field != "ts" || fe.Reason != ReasonBadTime || !strings.Contains(fe.Problem, "0000-9999") {
				t.Errorf("%s ts %s: %v (time %d), want a bad_event_time naming RFC 3339's years 0000-9999", format, ts, err, out.EventTime)
			}
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestSourceEpochSecondsRefusedKfake: an integer event time is epoch milliseconds; a producer
// that writes epoch seconds (Unix time, as Python's int(time.time()) and most shells give it)
// was read as a time in January 1970, silently: its output "timestamp", time_of_day and
// alert_cooldown all wrong. Where the record's Kafka timestamp (its producer's clock, or the
// broker's) says when it was written, an event time that read as seconds falls within
// epochSecondsSlack of it is one: a dead letter with code bad_event_time, the field, the source
// coordinates and a reason that says so. Milliseconds pass, late ones too (a day late), and a
// 1970 time without such a Kafka time (none: -1), or far from seconds' reading, is kept: an
// event time of 0 ms is a time (TestPipelineAlertAtEpochKfake).
func TestSourceEpochSecondsRefusedKfake(t *testing.T) {
	env := kfakeEnv(t)
	now := time.UnixMilli(1_764_304_016_250)
	type rec struct {
		written time.Time // the Kafka timestamp
		ts      string    // the event time field
		dead    bool
	}
	recs := []rec{
		{now, "1764304016250", false},                        // ms
		{now, "1764304016", true},                            // s
		{now, `"1764304016"`, true},                          // s, as a JSON string
		{now, "1764217616", true},                            // s, a day late
		{now, "1764217616250", false},                        // ms, a day late
		{now, `"2026-11-28T04:26:56Z"`, false},               // text
		{now, "0", false},                                    // the epoch itself: a time
		{now, "-1801000", false},                             // 1969-12-31T23:29:59Z
		{time.UnixMilli(-1), "1764304016", false},            // no Kafka time: nothing to tell by
		{now.Add(-40 * 24 * time.Hour), "1764304016", false}, // seconds, read 40 days off: past the slack
		{time.UnixMilli(1_764_304), "1764304", false},        // 1970, consistent with its Kafka time
		{now.Add(epochSecondsSlack - time.Second), "1764304016", true},
	}
	krecs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krecs[i] = &kgo.Record{Topic: env.topic, Partition: 0, Key: []byte("k"), Timestamp: r.written,
			Value: fmt.Appendf(nil, `{"temp":%d,"sensor":{"hum":1},"ts":%s}`, i, r.ts)}
	}
	testsupport.Produce(t, env.br, krecs...)
	cfg := itConfig(env, testsupport.UniqueName("g-epochs"))
	cfg.BatchSize, cfg.EventTimeField = 100, "ts"
	src := openSource(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := map[int64]bool{}
	var dead []batch.DeadLetter
	for len(seen) < len(recs) {
		b, dls, err := src.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dls.All() {
			dead = append(dead, d)
			seen[d.Offset] = true
		}
		if b != nil {
			for i := range b.Len() {
				seen[b.Offsets()[i]] = true
			}
			b.Release()
		}
	}
	isDead := map[int64]batch.DeadLetter{}
	for _, d := range dead {
		isDead[d.Offset] = d
	}
	for i, r := range recs {
		d, ok := isDead[int64(i)]
		if ok != r.dead {
			t.Errorf("offset %d (ts %s, written %s): dead letter %v, want %v (%+v)", i, r.ts, r.written.UTC().Format(time.RFC3339), ok, r.dead, d)
			continue
		}
		if ok && (d.Code != ReasonBadTime.String() || d.Field != "ts" || d.Topic != env.topic || d.Partition != 0 ||
			!strings.Contains(d.Reason, "epoch seconds") || !d.Time.Equal(r.written)) {
			t.Errorf("offset %d: dead letter %+v, want code bad_event_time, field ts, its coordinates and Kafka time, and a reason naming epoch seconds", i, d)
		}
	}
}

// TestEventTimeUnitSeconds: ingest.event_time_unit: s reads a producer's Unix seconds (an
// integer, or with a fraction, as Python's time.time() writes them) as such, in every format,
// as a number or a string; RFC 3339 texts are read as ever; seconds beyond the years 0000-9999
// are refused as milliseconds beyond them are. The source then takes a seconds time for what it
// is (no dead letter), and Validate refuses a unit it does not know. Without the key a
// producer of seconds had no remedy but to change: its records, refused as epoch seconds
// (TestSourceEpochSecondsRefusedKfake), were all dead letters.
func TestEventTimeUnitSeconds(t *testing.T) {
	t.Parallel()
	for _, format := range []Format{FormatJSON, FormatCSV, FormatLogfmt} {
		cfg := tempTimeConfig(format, "s")
		dec := mustDecoder(t, cfg)
		out := cfg.NewDecoded()
		msg := func(ts string) string { return tempTimeMessage(format, ts) }
		for ts, want := range map[string]int64{
			"1764304016": 1_764_304_016_000, "1764304016.25": 1_764_304_016_250, "-1.5": -1500, "0": 0,
			"1764304016.0004": 1_764_304_016_000, "2025-11-28T04:26:56.25Z": 1_764_304_016_250,
			// Java's Double.toString (Jackson's doubles) writes 1e7 and above in exponent form.
			"1.76430401625E9": 1_764_304_016_250, "1.76430401625e+9": 1_764_304_016_250, "1e3": 1_000_000,
		} {
			if format == FormatJSON && strings.Contains(ts, "T") {
				ts = `"` + ts + `"`
			}
			if err := dec.Decode([]byte(msg(ts)), out); err != nil || out.EventTime != want {
				t.Errorf("%s ts %s: %v, %d ms, want %d", format, ts, err, out.EventTime, want)
			}
		}
		for _, ts := range []string{"1764304016000000", "253402300800", "1e12", "12.5.1", "1e", "1.5E+"} {
			if format == FormatJSON && (ts == "12.5.1" || strings.HasSuffix(ts, "e") || strings.HasSuffix(ts, "+")) {
				continue // (no JSON: malformed)
			}
			var fe *FieldError
			if err := dec.Decode([]byte(msg(ts)), out); !errors.As(err, &fe) || fe.Reason != ReasonBadTime {
				t.Errorf("%s ts %s: %v (time %d), want a bad_event_time", format, ts, err, out.EventTime)
			}
		}
	}
	bad := testConfig(FormatJSON, []string{"temp"}, func(c *Config) { c.EventTimeField, c.EventTimeUnit = "ts", "us" })
	if _, err := bad.Check(); err == nil || !strings.Contains(err.Error(), "event_time_unit") {
		t.Errorf("event_time_unit us: %v, want it refused naming the key", err)
	}
	if !epochSeconds(1_764_304_016, time.UnixMilli(1_764_304_016_250)) {
		t.Fatal("(the ms reading of seconds is refused: the source's check the unit s turns off)")
	}
}

// TestSourceEpochSecondsUnitKfake: under ingest.event_time_unit: s the source takes a producer's
// seconds as the times they are (no dead letter, as under ms: TestSourceEpochSecondsRefusedKfake),
// and a message of milliseconds there is beyond the years 0000-9999, a dead letter.
func TestSourceEpochSecondsUnitKfake(t *testing.T) {
	env := kfakeEnv(t)
	now := time.UnixMilli(1_764_304_016_250)
	recs := []*kgo.Record{
		{Topic: env.topic, Partition: 0, Timestamp: now, Value: []byte(`{"temp":1,"sensor":{"hum":1},"ts":1764304016}`)},
		{Topic: env.topic, Partition: 0, Timestamp: now, Value: []byte(`{"temp":1,"sensor":{"hum":1},"ts":1764304016.25}`)},
		{Topic: env.topic, Partition: 0, Timestamp: now, Value: []byte(`{"temp":1,"sensor":{"hum":1},"ts":1764304016250}`)},
	}
	testsupport.Produce(t, env.br, recs...)
	cfg := itConfig(env, testsupport.UniqueName("g-seconds"))
	cfg.BatchSize, cfg.EventTimeField, cfg.EventTimeUnit = 100, "ts", EventTimeSeconds
	src := openSource(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	times := map[int64]int64{}
	var dead []batch.DeadLetter
	for len(times)+len(dead) < len(recs) {
		b, dls, err := src.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, dls.All()...)
		if b != nil {
			for i := range b.Len() {
				at, _ := b.Time(i)
				times[b.Offsets()[i]] = at.UnixMilli()
			}
			b.Release()
		}
	}
	if times[0] != 1_764_304_016_000 || times[1] != 1_764_304_016_250 || len(dead) != 1 || dead[0].Offset != 2 || dead[0].Code != ReasonBadTime.String() {
		t.Errorf("times %v, dead letters %+v: want offsets 0 and 1 at their seconds, 2 a bad_event_time", times, dead)
	}
}
