package metrics

import (
	"bufio"
	"context"
	"encoding/json"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
	"github.com/outlierd/outlierd/stages/sink"
)

var liveFeatures = []string{"temp", "pressure"}

// liveBatch is a scored batch of n records at offsets first.., keyed "k<i%3>" (every 7th
// without a key), flagged at the offsets in flagged, with score = offset/10.
func liveBatch(tb testing.TB, first int64, n int, flagged ...int64) *batch.Batch {
	tb.Helper()
	out := map[int64]bool{}
	for _, o := range flagged {
		out[o] = true
	}
	rows := make([]testbatch.Row, n)
	for i := range rows {
		off := first + int64(i)
		var key []byte
		if i%7 != 6 {
			key = []byte("k" + string(rune('0'+i%3)))
		}
		rows[i] = testbatch.Row{Partition: 1, Offset: off, Key: key, Time: time.UnixMilli(1_700_000_000_000 + off),
			Features: []float32{float32(off), -float32(off)},
			Score:    batch.Score{Scored: true, Outlier: out[off], Score: float64(off) / 10, Threshold: 5}}
	}
	b := testbatch.New(tb, memory.NewGoAllocator(), "in", liveFeatures, false, true, rows)
	b.ModelVersion = 3
	return b
}

func TestRingSince(t *testing.T) {
	r := newRing[uint64](4)
	set := func(v *uint64, seq uint64) { *v = seq }
	for range 6 {
		r.push(0, set)
	}
	for _, c := range []struct {
		after uint64
		want  []uint64
	}{{0, []uint64{3, 4, 5, 6}}, {2, []uint64{3, 4, 5, 6}}, {4, []uint64{5, 6}}, {6, nil}} {
		if got := r.since(nil, c.after); !equal(got, c.want) {
			t.Errorf("since(%d) = %v, want %v (the last 4 of 6)", c.after, got, c.want)
		}
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestOfferBatch: a batch gives livePointsPerBatch evenly spaced points and every flagged
// record as an alert, with its id, key, values, record time and model; an unscored batch gives
// nothing; a batch with more flagged records than the ring holds keeps the last ones.
func TestOfferBatch(t *testing.T) {
	m := New()
	b := liveBatch(t, 100, 100, 110, 150, 197)
	defer b.Release()
	m.OfferBatch(b, 3)
	s := m.live.read(0, 0, 0)
	if len(s.points) != livePointsPerBatch {
		t.Fatalf("%d points of a batch of 100, want %d", len(s.points), livePointsPerBatch)
	}
	// stride 100/16 = 6 from 3: offsets 103, 109, ..., 193.
	if p := s.points[0]; p.score != 10.3 || p.threshold != 5 || p.key != "k0" || p.outlier {
		t.Errorf("first point %+v, want offset 103's score 10.3, threshold 5, key k0", p)
	}
	if p := s.points[livePointsPerBatch-1]; p.score != 19.3 {
		t.Errorf("last point's score %v, want offset 193's 19.3", p.score)
	}
	if len(s.alerts) != 3 {
		t.Fatalf("%d alerts, want the 3 flagged", len(s.alerts))
	}
	a := s.alerts[1]
	if a.offset != 150 || a.partition != 1 || a.topic != "in" || a.key != "k2" || a.model != 3 ||
		a.values[0] != 150 || a.values[1] != -150 || a.recordAt != 1_700_000_000_150 || a.score.Score != 15 {
		t.Errorf("alert %+v, want offset 150's", a)
	}
	if s.alerts[0].key != "k1" || s.alerts[2].key != "" { // offsets 110 (i=10) and 197 (i=97: no key)
		t.Errorf("keys %q, %q: want k1 and none", s.alerts[0].key, s.alerts[2].key)
	}

	unscored := liveBatch(t, 200, 10)
	defer unscored.Release()
	unscored.Scores = nil
	m.OfferBatch(unscored, 0)
	if s := m.live.read(0, 0, 0); len(s.points) != livePointsPerBatch {
		t.Errorf("an unscored batch added %d points", len(s.points)-livePointsPerBatch)
	}

	many := make([]int64, liveAlertCap+10)
	for i := range many {
		many[i] = 1000 + int64(i)
	}
	big := liveBatch(t, 1000, len(many), many...)
	defer big.Release()
	m.OfferBatch(big, len(many))
	s = m.live.read(0, 0, 0)
	if len(s.alerts) != liveAlertCap || s.alerts[0].offset != 1010 || s.alerts[liveAlertCap-1].offset != 1000+int64(liveAlertCap)+9 {
		t.Errorf("%d alerts from offset %d: want the last %d flagged, from 1010", len(s.alerts), s.alerts[0].offset, liveAlertCap)
	}
}

// sseEvent is one server-sent event.
type sseEvent struct{ name, data string }

// readEvents reads events from the stream into the channel until it ends.
func readEvents(t *testing.T, resp *http.Response, out chan<- sseEvent) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[len("data: "):]
		case line == "":
			out <- ev
			ev = sseEvent{}
		}
	}
	close(out)
}

// TestLiveEvents: a page's stream first gets everything the feed holds (models, points, alerts
// with the explanation the pipeline set, non-finite scores spelled as the sink spells them),
// then the status, then only what is new.
func TestLiveEvents(t *testing.T) {
	m := New()
	m.SetModel(ModelInfo{Version: 3, BuiltAt: time.Now(), BuildTime: 1500 * time.Millisecond, WindowRecords: 5000, WStar: 7.5})
	b := liveBatch(t, 0, 32, 5)
	defer b.Release()
	b.Scores[5].Score, b.Scores[5].SubspaceOf = math.Inf(1), "far out"
	explanation := sink.Explain(b.Scores[5])
	m.OfferBatch(b, 1)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/live/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := make(chan sseEvent, 100)
	go readEvents(t, resp, events)
	next := func(want string) string {
		t.Helper()
		timeout := time.After(3 * time.Second)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("the stream ended before a %q event", want)
				}
				if ev.name == want {
					return ev.data
				}
				if ev.name == "alerts" || ev.name == "models" {
					t.Fatalf("an unexpected %q event before %q: %s", ev.name, want, ev.data)
				}
			case <-timeout:
				t.Fatalf("no %q event within 3 s", want)
			}
		}
	}
	var models []map[string]any
	if err := json.Unmarshal([]byte(next("models")), &models); err != nil || len(models) != 1 ||
		models[0]["version"] != 3.0 || models[0]["build_ms"] != 1500.0 || models[0]["w_star"] != 7.5 {
		t.Errorf("models event %v (%v), want version 3 built in 1500 ms, w* 7.5", models, err)
	}
	var points []map[string]any
	if err := json.Unmarshal([]byte(next("points")), &points); err != nil || len(points) != livePointsPerBatch {
		t.Errorf("points event: %d points (%v), want %d", len(points), err, livePointsPerBatch)
	}
	var alerts []map[string]any
	if err := json.Unmarshal([]byte(next("alerts")), &alerts); err != nil || len(alerts) != 1 {
		t.Fatalf("alerts event %v (%v), want the one flagged record", alerts, err)
	}
	if a := alerts[0]; a["id"] != "in/1/5" || a["score"] != "Infinity" || a["explanation"] != explanation || a["key"] != "k2" {
		t.Errorf("alert %v: want id in/1/5, score \"Infinity\", the sink's explanation %q, key k2", a, explanation)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(next("status")), &st); err != nil || st["model_version"] != 3.0 || st["device"] != "cpu" {
		t.Errorf("status %v (%v)", st, err)
	}
	// Only what is new comes next.
	b2 := liveBatch(t, 100, 16, 107)
	defer b2.Release()
	m.OfferBatch(b2, 1)
	if err := json.Unmarshal([]byte(next("alerts")), &alerts); err != nil || len(alerts) != 1 || alerts[0]["id"] != "in/1/107" {
		t.Errorf("next alerts event %v (%v), want only in/1/107", alerts, err)
	}
}

// TestLivePage: / is the page, its files are served from the binary, and nothing in them
// points outside this server (no CDN, no external font); the policy header says so to the
// browser.
func TestLivePage(t *testing.T) {
	srv := httptest.NewServer(New().Handler())
	defer srv.Close()
	for path, ctype := range map[string]string{"/": "text/html", "/live/app.js": "javascript", "/live/style.css": "text/css"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), ctype) {
			t.Errorf("GET %s: %d %q, want 200 %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), ctype)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	if resp, err := http.Get(srv.URL + "/nothing"); err != nil || resp.StatusCode != 404 {
		t.Errorf("GET /nothing: %v %v, want 404", resp.StatusCode, err)
	}
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(\s*['"]?(https?:)?//`)
	err := fs.WalkDir(webFS, "web", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := webFS.ReadFile(path)
		if err != nil {
			return err
		}
		if m := external.Find(data); m != nil {
			t.Errorf("%s refers to %q: the page must load nothing from elsewhere", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestShutdownEndsLiveStreams: an open page does not hold Shutdown until its deadline.
func TestShutdownEndsLiveStreams(t *testing.T) {
	s, err := Listen("127.0.0.1:0", New(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + s.Addr() + "/live/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a page open: %v", err)
	}
	// A tick (250 ms) is the most a stream takes to see its context end.
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %s with a page open", d)
	}
}

// BenchmarkOfferBatch is the live view's hand-off on the sink goroutine for one acknowledged
// batch of 1000 records with 1% flagged (the demo's alarm rate), the cost the pipeline pays per
// batch with http.listen set; pipeline's BenchmarkAcked sets it beside the rest of that step.
func BenchmarkOfferBatch(b *testing.B) {
	flagged := make([]int64, 0, 10)
	for i := range int64(10) {
		flagged = append(flagged, 50+100*i)
	}
	bt := liveBatch(b, 0, 1000, flagged...)
	defer bt.Release()
	m := New()
	b.ReportAllocs()
	for b.Loop() {
		m.OfferBatch(bt, len(flagged))
	}
}

// TestLiveAlertAsTheSinkWrites: an alert carries the id and the explanation of the record's
// output, and spells its floats as the output does (encoding/json's shortest form: 1e-7, not
// strconv's 'g' 1e-07; "Infinity" and "NaN" for the non-finite ones).
func TestLiveAlertAsTheSinkWrites(t *testing.T) {
	sc := batch.Score{Scored: true, Outlier: true, Score: 1e-7, Threshold: math.Inf(1), SubspaceOf: "far out"}
	a := liveAlert{topic: "in", partition: 2, offset: 9, score: sc, features: liveFeatures, values: []float32{0.5, float32(math.NaN())}}
	data, err := json.Marshal(alertsJSON([]liveAlert{a}))
	if err != nil {
		t.Fatal(err)
	}
	why, _ := json.Marshal(sink.Explain(sc))
	for _, want := range []string{`"id":"in/2/9"`, `"score":1e-7`, `"threshold":"Infinity"`, `"values":[0.5,"NaN"]`, `"explanation":` + string(why)} {
		if !strings.Contains(string(data), want) {
			t.Errorf("alert %s: no %s", data, want)
		}
	}
}

// TestLiveFeedBoundsKeys: the feed keeps at most liveKeyMax bytes of a record's key (cut on a
// rune boundary, marked with "…"). The keys come from whoever writes to the input topic: before,
// the feed kept each key whole, so records with 1 MB keys (a broker's default message limit)
// held about 8.6 GB in the rings (8,192 points and 512 alerts) and every page that opened was
// sent all of it.
func TestLiveFeedBoundsKeys(t *testing.T) {
	m := New()
	huge := strings.Repeat("x", liveKeyMax-1) + "é" + strings.Repeat("y", 1<<20) // é straddles the bound
	rows := make([]testbatch.Row, 32)
	for i := range rows {
		rows[i] = testbatch.Row{Partition: 1, Offset: int64(i), Key: []byte(huge), Features: []float32{1, 2},
			Score: batch.Score{Scored: true, Outlier: i%2 == 0, Score: 9, Threshold: 5}}
	}
	b := testbatch.New(t, memory.NewGoAllocator(), "in", liveFeatures, false, true, rows)
	defer b.Release()
	m.OfferBatch(b, 16)
	s := m.live.read(0, 0, 0)
	if len(s.points) == 0 || len(s.alerts) != 16 {
		t.Fatalf("%d points, %d alerts: want some and 16", len(s.points), len(s.alerts))
	}
	want := strings.Repeat("x", liveKeyMax-1) + "…" // (the whole é does not fit: cut before it)
	for _, p := range s.points {
		if p.key != want {
			t.Fatalf("a point's key of %d bytes (%q...), want the first %d bytes of the rune-whole key and …", len(p.key), p.key[:min(len(p.key), 8)], liveKeyMax-1)
		}
	}
	for _, a := range s.alerts {
		if a.key != want {
			t.Fatalf("an alert's key of %d bytes, want %d", len(a.key), len(want))
		}
	}
}
