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

// TestWindowRingSpan: the span runs from the median time of the ring's oldest hundredth (in
// arrival order) to its newest hundredth's, records without a time left out, so a few wrong
// clocks move it by nothing (tod29b); a resize keeps the times of the records it keeps.
func TestWindowRingSpan(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const n = 3000 // (pushed to a ring of 2,000: the newest 2,000 held, times 1,000 s .. 2,999 s)
	tb := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"})
	defer tb.Release()
	for i := range n {
		switch i {
		case 1000: // (the oldest held: a clock in 2100)
			tb.Append(4102444800000)
		case 1003: // (a clock at 0)
			tb.Append(0)
		case 2500:
			tb.AppendNull()
		case 2999: // (the newest: a clock at 0)
			tb.Append(0)
		default:
			tb.Append(arrow.Timestamp(int64(i) * 1000))
		}
	}
	ts := tb.NewTimestampArray()
	defer ts.Release()
	r := newWindowRing(2000)
	r.times = make([]int64, 2000)
	first := r.push("t", make([]int32, n), make([]int64, n), nil, nil)
	r.pushTimes(first, ts, 0, n)
	// The oldest 20 held: 0, 1,001, 1,002, 1,004 .. 1,019 s and 2100, the 11th 1,011 s; the newest
	// 20: 0, 2,980 .. 2,998 s, the 11th 2,989 s.
	if got, want := r.span(), (2989-1011)*time.Second; got != want {
		t.Errorf("span %v, want %v", got, want)
	}
	small := r.resize(150) // (k = 1: the newest's time less the oldest's, 2,850 s .. 0: none)
	if got := small.span(); got != 0 {
		t.Errorf("span of a ring whose newest time precedes its oldest: %v, want 0", got)
	}
	if got, want := r.resize(1000).span(), (2994-2005)*time.Second; got != want { // (the oldest 10: 2,000 .. 2,009 s, the 6th 2,005 s; the newest 10: 0, 2,990 .. 2,998 s, the 6th 2,994 s)
		t.Errorf("span after a resize to 1,000: %v, want %v", got, want)
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

// TestKeyReadingIntervalPastABadClock (tod29b): a key's reading interval is not taken over by
// one record whose clock is wrong: a time in the future moved the key's latest time there, so
// no later interval counted (every later record was "out of order") and the interval stayed at
// the one huge gap, the key's window "spanning" decades; one bad interval moves the average by at
// most a bounded factor and the average follows the key's rate again within a few records.
func TestKeyReadingIntervalPastABadClock(t *testing.T) {
	st := &keyState{}
	ms := int64(1767225600000)
	for range 50 {
		st.noteTime(ms)
		ms += 20000
	}
	st.noteTime(4102444800000) // (2100-01-01)
	if st.gapMs > 4*20000 {
		t.Errorf("one gap of 75 years took the interval to %.0f ms, want at most 4 x 20,000", st.gapMs)
	}
	for range 50 {
		st.noteTime(ms)
		ms += 20000
	}
	if st.gapMs < 19000 || st.gapMs > 21000 {
		t.Errorf("50 readings 20 s apart after the bad clock: interval %.0f ms, want 20,000 within 5 %%", st.gapMs)
	}
}
