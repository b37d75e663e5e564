package testsupport_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestRoundTrip: what Produce writes, ReadTopic/ScanTopic read back (every record once, in
// offset order per partition, with its key, value and headers), EndOffsets counts, and
// ConsumeExactly returns them all. On kfake, and on the broker of KAFKA_BOOTSTRAP when set.
func TestRoundTrip(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		const parts = 3
		topic := testsupport.UniqueName("roundtrip")
		testsupport.CreateTopics(t, br, map[string]int{topic: parts})
		testsupport.CreateTopics(t, br, map[string]int{topic: parts}) // again: an existing topic is fine
		counts := []int{5, 0, 12}
		var recs []*kgo.Record
		for p, n := range counts {
			for i := range n {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: []byte(fmt.Sprintf("k%d", p)),
					Value: []byte(fmt.Sprintf("%d/%d", p, i)), Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}}})
			}
		}
		testsupport.Produce(t, br, recs...)
		for _, r := range recs {
			if want := strings.Split(string(r.Value), "/")[1]; fmt.Sprint(r.Offset) != want {
				t.Fatalf("record %s got offset %d back, want %s (a fresh partition starts at 0)", r.Value, r.Offset, want)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		end, err := testsupport.EndOffsets(ctx, br, topic, parts)
		if err != nil {
			t.Fatal(err)
		}
		for p, n := range counts {
			if end[p] != int64(n) {
				t.Errorf("partition %d: end offset %d, want %d", p, end[p], n)
			}
		}
		got := testsupport.ReadTopic(t, br, topic, parts)
		if len(got) != len(recs) {
			t.Fatalf("read %d records, want %d", len(got), len(recs))
		}
		next := make([]int64, parts)
		for _, r := range got {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d read after %d", r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition]++
			i, ok := testsupport.Header(r, "i")
			if want := fmt.Sprintf("%d/%s", r.Partition, i); !ok || string(r.Value) != want || string(r.Key) != fmt.Sprintf("k%d", r.Partition) {
				t.Errorf("record at %d/%d: key %q value %q header i %q (%v)", r.Partition, r.Offset, r.Key, r.Value, i, ok)
			}
		}
		if _, ok := testsupport.Header(got[0], "absent"); ok {
			t.Error("Header found a header that is not there")
		}
		if n := len(testsupport.ConsumeExactly(t, br, topic, len(recs))); n != len(recs) {
			t.Errorf("ConsumeExactly returned %d records, want %d", n, len(recs))
		}
	})
}

// TestLogBufferLines: Lines returns the written lines that contain every substring.
func TestLogBufferLines(t *testing.T) {
	var b testsupport.LogBuffer
	fmt.Fprintf(&b, "a warn x\nb info x\n\nc warn y\n")
	if got := b.Lines("warn"); len(got) != 2 || got[0] != "a warn x" || got[1] != "c warn y" {
		t.Errorf("Lines(warn) = %q", got)
	}
	if got := b.Lines("warn", "x"); len(got) != 1 || got[0] != "a warn x" {
		t.Errorf("Lines(warn, x) = %q", got)
	}
	if got := b.Lines(); len(got) != 3 {
		t.Errorf("Lines() = %q, want the 3 non-empty lines", got)
	}
}
