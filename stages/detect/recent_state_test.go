package detect

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/sealed"
	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// feedScores is feed that returns the scores of the records passed on, in stream order.
func feedScores(t testing.TB, s *Stage, mem memory.Allocator, d *synth.Data, lo, hi, size int) []batch.Score {
	t.Helper()
	var scores []batch.Score
	for i := lo; i < hi; i += size {
		out, err := s.Process(context.Background(), makeBatch(t, mem, d, i, min(i+size, hi), s.withSD))
		if err != nil {
			t.Fatalf("Process rows %d..: %v", i, err)
		}
		for _, b := range out {
			scores = append(scores, b.Scores...)
			b.Record.Release()
		}
	}
	return scores
}

// TestRestartKeepsRecentScores: a stage stopped gracefully and started again from state_dir
// ranks every record after the restart (scores.recent) as the stage that was not stopped, bit for
// bit: the stream's ring of recent scores, its horizon and episode, the recent past's rows and
// the stale share (recent_past 100, recent_past_weight stale) are saved with the alarm state. It
// failed before (the restart started them empty): the first record after the restart ranked at
// its combined score itself (1.44, uninterrupted -1.68, below its episode's peak), and 927 of the
// 1,100 records ranked otherwise than uninterrupted (the horizon and the episode's peaks
// restarted with the ring).
func TestRestartKeepsRecentScores(t *testing.T) {
	mem, d, cfg := restartSetup(t, 2600)
	cfg.RecentPast, cfg.RecentPastWeight = 100, PastWeightStale
	stopAfter(t, cfg, mem, d, 1500, 250)
	b := newTestStage(t, cfg)
	got := feedScores(t, b, mem, d, 1500, 2600, 100)

	plain := cfg
	plain.StateDir = ""
	c := newTestStage(t, plain)
	feed(t, c, mem, d, 0, 1500, 250)
	want := feedScores(t, c, mem, d, 1500, 2600, 100)
	if len(got) != 1100 || len(want) != 1100 {
		t.Fatalf("%d and %d records scored after the restart and uninterrupted, want 1,100", len(got), len(want))
	}
	bad := 0
	for i := range got {
		g, w := got[i], want[i]
		if g.Score != w.Score || math.Float64bits(g.Recent) != math.Float64bits(w.Recent) {
			if bad++; bad <= 3 {
				t.Errorf("record %d: score %v, recent %v after the restart; uninterrupted %v, %v", 1500+i, g.Score, g.Recent, w.Score, w.Recent)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of the 1,100 records after the restart rank otherwise than uninterrupted", bad)
	}
	if b.past.filled != 100 || b.stale.held != 100 || b.recent.pfilled == 0 {
		t.Errorf("setup: the recent past of %d rows, %d stale marks, %d block maxima; want all three in use", b.past.filled, b.stale.held, b.recent.pfilled)
	}
}

// TestRecentStateRoundTrip: the recent past read back (its ring of scores with ties, wrapped,
// with a horizon; a past of rows with missing values, wrapped; a stale share) is the live one:
// every field, the ring's index and each feature's sorted values rebuilt as the live ones stand,
// and the next records rank alike. A ring that never went round, and an empty state, too.
func TestRecentStateRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 31))
	for _, n := range []int{37, 1000} { // (records: 37 fill no ring of 50 nor a past of 60)
		s := &Stage{features: []string{"a", "b"}}
		s.cfg.RecentPast, s.cfg.RecentPastWeight = 60, PastWeightStale
		for i := range n {
			x := float64(rng.IntN(12)) / 4 // (ties)
			s.recent.score(x, 50, 4)
			row := []float32{float32(rng.NormFloat64()), float32(math.Round(rng.NormFloat64()))}
			if i%7 == 0 {
				row[0] = float32(math.NaN())
			}
			if s.past.n == 0 {
				s.past.resize(60, 2)
			}
			s.past.decades(row)
			s.pastWeight(x)
		}
		if s.stale.held != min(n, 60) || s.recent.filled != min(n, 50) {
			t.Fatalf("setup: %d stale marks, %d scores held", s.stale.held, s.recent.filled)
		}
		var e sealed.Encoder
		encodeRecent(&e, s.recentCopy())
		d := sealed.NewDecoder(e.Payload())
		r, err := decodeRecent(d)
		if err != nil || d.Left() != 0 {
			t.Fatalf("%d records: %v, %d bytes left", n, err, d.Left())
		}
		o := &Stage{features: s.features}
		o.restoreRecent(r)
		g, w := o.recent, s.recent
		if !slices.Equal(g.idx, w.idx) || !slices.Equal(g.s, w.s) || !slices.Equal(g.peaks, w.peaks) || g.width != w.width ||
			g.next != w.next || g.filled != w.filled || g.pnext != w.pnext || g.pfilled != w.pfilled || g.cur != w.cur ||
			g.cnt != w.cnt || g.epPrev != w.epPrev || g.epCur != w.epCur {
			t.Errorf("%d records: the ring read back %+v, live %+v", n, g, w)
		}
		if !slices.Equal(o.past.x, s.past.x) && !nanEqual(o.past.x, s.past.x) || o.past.next != s.past.next || o.past.filled != s.past.filled {
			t.Errorf("%d records: the past read back at %d, %d filled; live %d, %d", n, o.past.next, o.past.filled, s.past.next, s.past.filled)
		}
		for j := range s.past.sorted {
			if !slices.Equal(o.past.sorted[j], s.past.sorted[j]) {
				t.Errorf("%d records: feature %d's sorted past rebuilt otherwise than the live one", n, j)
			}
		}
		if !slices.Equal(o.stale.over, s.stale.over) || o.stale.next != s.stale.next || o.stale.held != s.stale.held || o.stale.hits != s.stale.hits {
			t.Errorf("%d records: stale read back %+v, live %+v", n, o.stale, s.stale)
		}
		for range 200 {
			x := float64(rng.IntN(12)) / 4
			if a, b := o.recent.score(x, 50, 4), s.recent.score(x, 50, 4); math.Float64bits(a) != math.Float64bits(b) {
				t.Fatalf("%d records: the next score ranks %v read back, %v live", n, a, b)
			}
		}
	}
	var e sealed.Encoder
	encodeRecent(&e, nil)
	if r, err := decodeRecent(sealed.NewDecoder(e.Payload())); err != nil || len(e.Payload()) != 12 || r.ring.s != nil || r.past.n != 0 || r.stale.over != nil {
		t.Errorf("an empty recent past: %d bytes, read back %+v, %v", len(e.Payload()), r, err)
	}
}

// nanEqual says whether a and b hold the same values, NaN equal to NaN.
func nanEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return x == y || x != x && y != y })
}

// TestRecentStateRefusals: a recent past section that is cut anywhere, whose ring's position is
// outside it, that holds a NaN score or a stale mark other than 0 and 1, or whose counts the
// bytes left cannot hold, is refused with an error naming it, never a panic nor an allocation of
// what it claims.
func TestRecentStateRefusals(t *testing.T) {
	s := &Stage{features: []string{"a"}}
	s.cfg.RecentPast, s.cfg.RecentPastWeight = 10, PastWeightStale
	s.past.resize(10, 1)
	for i := range 30 {
		s.recent.score(float64(i%5), 8, 2)
		s.past.decades([]float32{float32(i)})
		s.pastWeight(float64(i % 3))
	}
	var e sealed.Encoder
	encodeRecent(&e, s.recentCopy())
	p := e.Payload()
	for n := range len(p) {
		if _, err := decodeRecent(sealed.NewDecoder(p[:n])); err == nil {
			t.Fatalf("the section cut at %d of %d bytes read back", n, len(p))
		}
	}
	u32 := func(q []byte, at int, v uint32) []byte {
		q = slices.Clone(q)
		q[at], q[at+1], q[at+2], q[at+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		return q
	}
	scores := 4 + 6*4 + 3*8 // (the ring's first score)
	nan := slices.Clone(p)
	copy(nan[scores:], []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	staleAt := len(p) - 10 - 12 // (the stale section: n, next, held, 10 marks)
	marked := slices.Clone(p)
	marked[len(p)-1] = 2
	for _, c := range []struct {
		name, want string
		q          []byte
	}{
		{"ring position outside it", "recent scores of 8 places at 9", u32(p, 4, 9)},
		{"ring of more scores than bytes", "recent scores cannot fit", u32(p, 0, 1<<30)},
		{"a NaN score held", "NaN", nan},
		{"stale mark 2", "marked 2", marked},
		{"stale held past its ring", "stale records of 10 places", u32(p, staleAt+8, 11)},
	} {
		if _, err := decodeRecent(sealed.NewDecoder(c.q)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
