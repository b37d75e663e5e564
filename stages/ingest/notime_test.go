package ingest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/checkpoint"
	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestSourceNoTimestampKfake: a record whose Kafka timestamp is -1 ("none": message format v0,
// old producers) or 0 has no time in the batch (_timestamp null), not year 1: kafka-go reads
// a timestamp of 0 or less as Go's zero time, which the builder stored as -62135596800000 ms
// (the JSON output's "0001-01-01T00:00:00Z", the alert groups' year 1). With time_of_day
// derived, such a record has no wall clock: a dead letter (ingest.missing's rule: a missing
// value without a fill), code missing, field the pair's name, never a stop or a loss; derived
// features that need no time take it as any other.
func TestSourceNoTimestampKfake(t *testing.T) {
	env := kfakeEnv(t)
	t0 := time.UnixMilli(1_700_000_000_000)
	stamps := []time.Time{time.UnixMilli(-1), t0, time.UnixMilli(0), t0.Add(time.Second)}
	recs := make([]*kgo.Record, len(stamps))
	for i, at := range stamps {
		recs[i] = &kgo.Record{Topic: env.topic, Partition: 0, Key: []byte("k"), Timestamp: at,
			Value: fmt.Appendf(nil, `{"temp":%d,"sensor":{"hum":1}}`, i)}
	}
	testsupport.Produce(t, env.br, recs...)
	for _, tc := range []struct {
		name   string
		derive *DerivedFeature
		dead   []int64 // offsets that become dead letters
	}{
		{"plain", nil, nil},
		{"diff", &DerivedFeature{Kind: DeriveDiff, Of: "temp"}, nil},
		{"time_of_day", &DerivedFeature{Kind: DeriveTimeOfDay, Name: "hour"}, []int64{0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := itConfig(env, testsupport.UniqueName("g-notime"))
			cfg.BatchSize = 100
			if tc.derive != nil {
				cfg.Derive = &Derive{MaxKeys: 10, Features: []DerivedFeature{*tc.derive}}
			}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			src, err := NewSource(cfg, checkpoint.New(), mem, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			times := map[int64]string{}
			var dead []batch.DeadLetter
			for len(times)+len(dead) < len(stamps) {
				b, dls, err := src.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				dead = append(dead, dls.All()...)
				for i := range b.Len() {
					at, ok := b.Time(i)
					times[b.Offsets()[i]] = "null"
					if ok {
						times[b.Offsets()[i]] = fmt.Sprint(at.UnixMilli())
					}
				}
				if b != nil {
					b.Release()
				}
			}
			want := map[int64]string{0: "null", 1: fmt.Sprint(t0.UnixMilli()), 2: "null", 3: fmt.Sprint(t0.UnixMilli() + 1000)}
			for _, off := range tc.dead {
				delete(want, off)
			}
			if fmt.Sprint(times) != fmt.Sprint(want) {
				t.Errorf("times by offset %v, want %v", times, want)
			}
			if len(dead) != len(tc.dead) {
				t.Fatalf("dead letters %+v, want offsets %v", dead, tc.dead)
			}
			for i, d := range dead {
				if d.Offset != tc.dead[i] || d.Code != "missing" || d.Field != "hour" || !d.Time.IsZero() {
					t.Errorf("dead letter %+v, want offset %d, code missing, field hour, no time", d, tc.dead[i])
				}
			}
		})
	}
}
