package detect

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// TestWindowRingSpan: the span is the newest records' (the ring's capacity) event times, from
// the earliest to the latest whatever their order (partitions interleave), records without a
// time left out, and a resize keeps the times of the records it keeps.
func TestWindowRingSpan(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	tb := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"})
	defer tb.Release()
	for _, ms := range []int64{0, 1000, 9000, 5000, -1, 7000} { // (-1: no time)
		if ms < 0 {
			tb.AppendNull()
		} else {
			tb.Append(arrow.Timestamp(ms))
		}
	}
	ts := tb.NewTimestampArray()
	defer ts.Release()
	r := newWindowRing(4)
	r.times = make([]int64, 4)
	first := r.push("t", make([]int32, 6), []int64{0, 1, 2, 3, 4, 5}, nil, nil)
	r.pushTimes(first, ts, 0, 6)
	if got, want := r.span(), 4*time.Second; got != want { // (9000, 5000, none, 7000)
		t.Errorf("span %v, want %v", got, want)
	}
	if got, want := r.resize(2).span(), time.Duration(0); got != want { // (none, 7000: one time)
		t.Errorf("span after a resize to 2: %v, want %v", got, want)
	}
	if got, want := r.resize(3).span(), 2*time.Second; got != want { // (5000, none, 7000)
		t.Errorf("span after a resize to 3: %v, want %v", got, want)
	}
	r.pushTimes(r.push("t", []int32{0}, []int64{6}, nil, nil), ts, 1, 2) // (row 1: 1000)
	if got, want := r.span(), 6*time.Second; got != want {               // (5000, none, 7000, 1000)
		t.Errorf("span after a later record of an earlier time: %v, want %v", got, want)
	}
}

// TestSnapshotKeepsWindowSpan: a model's window span travels in its snapshot (and so on the
// model topic: a scorer reads the cyclic columns as its builder does); a model without one
// writes the file it wrote before the span existed (no flag: older releases read it).
func TestSnapshotKeepsWindowSpan(t *testing.T) {
	m := buildTestModel(t, testData(1500, 3), testConfig())
	plain := snapshotBytes(t, m)
	back, err := ReadSnapshot(bytes.NewReader(plain))
	if err != nil || back.WindowSpan != 0 {
		t.Fatalf("without a span: %v, span %v", err, back.WindowSpan)
	}
	m.WindowSpan = 36 * time.Hour
	spanned := snapshotBytes(t, m)
	if len(spanned) != len(plain)+8 {
		t.Errorf("a span adds %d bytes, want 8", len(spanned)-len(plain))
	}
	back, err = ReadSnapshot(bytes.NewReader(spanned))
	if err != nil || back.WindowSpan != m.WindowSpan {
		t.Fatalf("span %v read back as %v (%v)", m.WindowSpan, back.WindowSpan, err)
	}
}

// TestUnreadCycles: a model reads a cycle's columns only when its window spans the period.
func TestUnreadCycles(t *testing.T) {
	cyc, err := resolveCycles([]Cycle{{Sin: "tod.sin", Cos: "tod.cos", Period: 24 * time.Hour}, {Sin: "dow.sin", Cos: "dow.cos", Period: 7 * 24 * time.Hour}},
		[]string{"temp", "tod.sin", "tod.cos", "dow.sin", "dow.cos"})
	if err != nil {
		t.Fatal(err)
	}
	s := &Stage{features: make([]string, 5), cycles: cyc}
	for _, c := range []struct {
		span time.Duration
		want []bool
	}{
		{0, []bool{false, true, true, true, true}},
		{24*time.Hour - time.Millisecond, []bool{false, true, true, true, true}},
		{24 * time.Hour, []bool{false, false, false, true, true}},
		{7 * 24 * time.Hour, nil},
	} {
		got := s.unreadCycles(&Model{WindowSpan: c.span})
		if len(got) != len(c.want) || !slices.Equal(got, c.want) {
			t.Errorf("span %v: unread %v, want %v", c.span, got, c.want)
		}
	}
	if _, err := resolveCycles([]Cycle{{Sin: "tod.sin", Cos: "x", Period: time.Hour}}, []string{"tod.sin"}); err == nil {
		t.Error("a cycle of a column the stream lacks accepted")
	}
}
