package metrics

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/outlierd/outlierd/stages/sink"
)

// The live view: a page at / (web/: HTML, JS and CSS embedded in the binary, nothing loaded from
// elsewhere) fed by server-sent events at /live/events from the feed (live.go) and the series.

//go:embed web
var webFS embed.FS

// Timing and bounds of the event stream.
const (
	// liveTick is how often a stream sends what the feed gained: an alert shows within it.
	liveTick = 250 * time.Millisecond
	// liveStatusEvery ticks, a stream sends the status (counters, lag, window, readiness).
	liveStatusEvery = 4
	// liveMaxStreams bounds the open pages: each is a goroutine and a copy of the feed per tick.
	liveMaxStreams = 16
	// liveMaxStreamsPerClient bounds one client's share of them (liveClient: its remote address,
	// an IPv6 one's /64), so that one client cannot hold every stream and lock the others out.
	// Behind a reverse proxy every page has the proxy's address: 4 pages at once through it
	// (X-Forwarded-For is not read: whoever connects writes it).
	liveMaxStreamsPerClient = 4
	// liveRetryAfter is the Retry-After (seconds) of a refused stream: the page's own retry
	// (web/app.js: EventSource gives up on a refusal) waits as long.
	liveRetryAfter = "5"
	// liveWriteTimeout bounds one event's write: a stalled page is dropped, never waited for
	// (the server's WriteTimeout would end every stream after 30 s).
	liveWriteTimeout = 10 * time.Second
)

// liveAssets serves the page's files under /live/.
func liveAssets() http.Handler {
	sub, err := fs.Sub(webFS, "web")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.StripPrefix("/live/", http.FileServerFS(sub))
}

// livePage serves index.html at /.
func livePage(w http.ResponseWriter, _ *http.Request) {
	page, err := webFS.ReadFile("web/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(page)
}

// liveHeaders wraps the page and its assets: the content security policy admits only this
// server (a CDN or an external font would be refused, and the browser test sees the refusal
// as a console error), and the files are revalidated so a new binary's page is never stale.
func liveHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// The events' payloads.
type (
	livePointJSON struct {
		T         int64          `json:"t"`
		Key       string         `json:"k"`
		Score     sink.JSONFloat `json:"s"`
		Threshold sink.JSONFloat `json:"th"`
		Outlier   bool           `json:"o"`
		Suppress  bool           `json:"u,omitempty"` // over the threshold, not flagged: the alarm cap
	}
	liveAlertJSON struct {
		T           int64            `json:"t"`
		RecordTime  int64            `json:"record_t,omitempty"`
		ID          string           `json:"id"`
		Key         string           `json:"key"`
		Score       sink.JSONFloat   `json:"score"`
		Threshold   sink.JSONFloat   `json:"threshold"`
		Model       uint64           `json:"model"`
		Explanation string           `json:"explanation"`
		Features    []string         `json:"features"`
		Values      []sink.JSONFloat `json:"values"`
		Warming     []string         `json:"warming,omitempty"` // the features still warming (their values partial windows')
	}
	liveModelJSON struct {
		Version       uint64         `json:"version"`
		Since         int64          `json:"since"`
		BuiltAt       int64          `json:"built_at"`
		BuildMillis   float64        `json:"build_ms"`
		WindowRecords int            `json:"window_records"`
		MicroClusters int            `json:"micro_clusters"`
		SolvingSet    int            `json:"solving_set"`
		WStar         sink.JSONFloat `json:"w_star"`
	}
	liveStatusJSON struct {
		T              int64            `json:"t"`
		RecordsIn      float64          `json:"records_in"`
		RecordsOut     float64          `json:"records_out"`
		Flagged        float64          `json:"flagged"`
		DeadLetters    float64          `json:"dead_letters"`
		Lag            *int64           `json:"lag"` // null until the first lag poll, and while the lag is unknown (lagstale.go)
		LagPartitions  map[string]int64 `json:"lag_partitions,omitempty"`
		Topic          string           `json:"topic,omitempty"`
		WindowRecords  float64          `json:"window_records"`
		WindowCapacity float64          `json:"window_capacity"`
		Device         string           `json:"device"`
		Ready          bool             `json:"ready"`
		NotReady       string           `json:"not_ready,omitempty"`
		ModelVersion   uint64           `json:"model_version"`
		ModelAge       float64          `json:"model_age_s,omitempty"`
	}
)

// value reads a counter's or gauge's current value (at the status rate, never per batch).
func value(c prometheus.Metric) float64 {
	var d dto.Metric
	if c.Write(&d) != nil {
		return 0
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// liveStatus is the status event's payload.
func (m *Metrics) liveStatus() liveStatusJSON {
	now := m.now()
	st := liveStatusJSON{T: now.UnixMilli(), RecordsIn: value(m.recordsIn), RecordsOut: value(m.recordsOut),
		Flagged: value(m.flagged), DeadLetters: value(m.deadLetters), WindowRecords: value(m.windowRecords),
		WindowCapacity: value(m.windowCapacity)}
	st.Ready, st.NotReady = m.Ready()
	m.mu.Lock()
	st.Device, st.Topic = m.device, m.topic
	if m.lag != nil {
		total := int64(0)
		st.LagPartitions = make(map[string]int64, len(m.lag))
		for p, l := range m.lag {
			total += max(l, 0)
			st.LagPartitions[strconv.Itoa(p)] = l
		}
		st.Lag = &total
	}
	if m.model != nil {
		st.ModelVersion, st.ModelAge = m.model.Version, now.Sub(m.model.BuiltAt).Seconds()
	}
	m.mu.Unlock()
	return st
}

// liveEvents streams the feed as server-sent events until the page goes away or the server
// shuts down (Listen cancels every request's context then): "points", "alerts" and "models"
// with what the feed gained since the last tick (everything it holds, first), "status" every
// liveStatusEvery ticks.
func (m *Metrics) liveEvents(w http.ResponseWriter, r *http.Request) {
	client := liveClient(r.RemoteAddr)
	if code, why := m.liveStreams.open(client); code != 0 {
		w.Header().Set("Retry-After", liveRetryAfter)
		http.Error(w, why, code)
		return
	}
	defer m.liveStreams.close(client)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // a proxy in front must not hold events back
	var buf []byte
	send := func(event string, v any) bool {
		data, err := json.Marshal(v)
		if err != nil {
			return false
		}
		buf = append(buf[:0], "event: "...)
		buf = append(buf, event...)
		buf = append(buf, "\ndata: "...)
		buf = append(buf, data...)
		buf = append(buf, "\n\n"...)
		_ = rc.SetWriteDeadline(time.Now().Add(liveWriteTimeout))
		_, err = w.Write(buf)
		return err == nil
	}
	var seenPoints, seenAlerts, seenModels uint64
	t := time.NewTicker(liveTick)
	defer t.Stop()
	for tick := 0; ; tick++ {
		snap := m.live.read(seenPoints, seenAlerts, seenModels)
		ok := true
		if n := len(snap.models); n > 0 {
			seenModels = snap.models[n-1].seq
			ok = send("models", modelsJSON(snap.models))
		}
		if n := len(snap.points); ok && n > 0 {
			seenPoints = snap.points[n-1].seq
			ok = send("points", pointsJSON(snap.points))
		}
		if n := len(snap.alerts); ok && n > 0 {
			seenAlerts = snap.alerts[n-1].seq
			ok = send("alerts", alertsJSON(snap.alerts))
		}
		if ok && tick%liveStatusEvery == 0 {
			ok = send("status", m.liveStatus())
		}
		if !ok || rc.Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}

func pointsJSON(ps []livePoint) []livePointJSON {
	out := make([]livePointJSON, len(ps))
	for i, p := range ps {
		out[i] = livePointJSON{T: p.at, Key: p.key, Score: sink.JSONFloat(p.score), Threshold: sink.JSONFloat(p.threshold), Outlier: p.outlier, Suppress: p.suppressed}
	}
	return out
}

// alertsJSON is the alerts event: each flagged record with the id and the explanation its
// output carries (stages/sink: the same functions).
func alertsJSON(as []liveAlert) []liveAlertJSON {
	out := make([]liveAlertJSON, len(as))
	for i, a := range as {
		e := liveAlertJSON{T: a.at, RecordTime: a.recordAt, ID: sink.OutputID(a.topic, a.partition, a.offset),
			Key: a.key, Score: sink.JSONFloat(a.score.Score), Threshold: sink.JSONFloat(a.score.Threshold), Model: a.model,
			Features: a.features, Values: make([]sink.JSONFloat, len(a.values)), Warming: a.warming, Explanation: sink.Explain(a.score)}
		for j, v := range a.values {
			e.Values[j] = sink.JSONFloat(v)
		}
		out[i] = e
	}
	return out
}

func modelsJSON(ms []liveModel) []liveModelJSON {
	out := make([]liveModelJSON, len(ms))
	for i, v := range ms {
		out[i] = liveModelJSON{Version: v.info.Version, Since: v.at, BuiltAt: v.info.BuiltAt.UnixMilli(),
			BuildMillis: float64(v.info.BuildTime.Microseconds()) / 1e3, WindowRecords: v.info.WindowRecords,
			MicroClusters: v.info.MicroClusters, SolvingSet: v.info.SolvingSetSize, WStar: sink.JSONFloat(v.info.WStar)}
	}
	return out
}

// liveStreamCap counts the open event streams, in all and by client.
type liveStreamCap struct {
	mu       sync.Mutex
	total    int
	byClient map[string]int // (a client's entry goes with its last stream)
}

// open takes a place for a stream of client, or says why not (the status code and the text).
func (c *liveStreamCap) open(client string) (code int, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.total >= liveMaxStreams:
		return http.StatusServiceUnavailable, fmt.Sprintf("too many live views open (%d, the most this server serves)", liveMaxStreams)
	case c.byClient[client] >= liveMaxStreamsPerClient:
		return http.StatusTooManyRequests, fmt.Sprintf("too many live views open from %s (%d, the most one client may hold)", client, liveMaxStreamsPerClient)
	}
	if c.byClient == nil {
		c.byClient = map[string]int{}
	}
	c.total++
	c.byClient[client]++
	return 0, ""
}

// close gives client's place back.
func (c *liveStreamCap) close(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.byClient[client]--; c.byClient[client] <= 0 {
		delete(c.byClient, client)
	}
}

// liveClient is who a request's remote address (host:port) counts as: its IP, an IPv6 one by
// its /64 (a host is given a /64 and may use any address in it).
func liveClient(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if ip = ip.Unmap(); ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// liveStreamsOpen is how many event streams are open.
func (m *Metrics) liveStreamsOpen() int {
	m.liveStreams.mu.Lock()
	defer m.liveStreams.mu.Unlock()
	return m.liveStreams.total
}
