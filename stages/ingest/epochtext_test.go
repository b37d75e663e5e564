package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestSourceEpochSecondsOnlyOfNumbers: the source's epoch-seconds check (epochSeconds) is for
// an epoch number read as milliseconds, but it looked at the time as read whatever its form, so
// a time written as text in January 1970 (an RFC 3339 or "2006-01-02 15:04:05" time: a test
// fixture, a device without a real-time clock, a backfill of such data) in a message written
// now was a dead letter reading "epoch seconds where epoch milliseconds are read" (failed
// before the fix). A text time says its unit: it is read as it says; the same instant as an
// epoch number is still refused.
func TestSourceEpochSecondsOnlyOfNumbers(t *testing.T) {
	env := kfakeEnv(t)
	now := time.UnixMilli(1_764_304_016_250)
	texts := []string{`"1970-01-21T10:05:04.016Z"`, `"1970-01-21 10:05:04.016"`, `1764304016`}
	var recs []*kgo.Record
	for _, ts := range texts {
		recs = append(recs, &kgo.Record{Topic: env.topic, Partition: 0, Timestamp: now,
			Value: []byte(`{"temp":1,"sensor":{"hum":1},"ts":` + ts + `}`)})
	}
	testsupport.Produce(t, env.br, recs...)
	cfg := itConfig(env, testsupport.UniqueName("g-epochtext"))
	cfg.BatchSize, cfg.EventTimeField = 100, "ts"
	src := openSource(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	times, dead := map[int64]int64{}, map[int64]string{}
	for len(times)+len(dead) < len(recs) {
		b, dls, err := src.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dls.All() {
			dead[d.Offset] = d.Reason
		}
		if b != nil {
			for i := range b.Len() {
				at, _ := b.Time(i)
				times[b.Offsets()[i]] = at.UnixMilli()
			}
			b.Release()
		}
	}
	for i, ts := range texts[:2] {
		if got, ok := times[int64(i)]; !ok || got != 1_764_304_016 {
			t.Errorf("ts %s: time %d (read %v), dead letter %q; want the record at 1970-01-21T10:05:04.016Z", ts, got, ok, dead[int64(i)])
		}
	}
	if _, ok := dead[2]; !ok {
		t.Errorf("ts 1764304016 (epoch seconds) in a message written %s read as %d ms, want a dead letter", now.UTC().Format(time.RFC3339), times[2])
	}
}
