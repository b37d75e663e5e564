package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// openStream runs the live view's event stream for a client at remote (host:port) until the
// returned cancel; done gives the recorder once the handler returned (at once: a refusal).
func openStream(t *testing.T, m *Metrics, remote string) (cancel func(), done <-chan *httptest.ResponseRecorder) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/live/events", nil)
	r.RemoteAddr = remote
	out := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		m.liveEvents(w, r)
		out <- w
	}()
	return stop, out
}

// waitStreams waits until m has n streams open.
func waitStreams(t *testing.T, m *Metrics, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for m.liveStreamsOpen() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d live streams open, want %d", m.liveStreamsOpen(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLiveStreamsPerClient: one client (by remote address) holds at most liveMaxStreamsPerClient
// of the server's liveMaxStreams streams; the next of its pages gets 429 with Retry-After,
// another client's page still opens, and a page closed frees its place. Before, one client could
// open all 16 and lock every other page out (503).
func TestLiveStreamsPerClient(t *testing.T) {
	m := New()
	var cancels []func()
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	var first func()
	var firstDone <-chan *httptest.ResponseRecorder
	for i := range liveMaxStreamsPerClient {
		c, done := openStream(t, m, "192.0.2.7:"+strconv.Itoa(40000+i))
		cancels = append(cancels, c)
		if i == 0 {
			first, firstDone = c, done
		}
	}
	waitStreams(t, m, liveMaxStreamsPerClient)
	_, done := openStream(t, m, "192.0.2.7:41000")
	select {
	case w := <-done:
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
			t.Fatalf("client's page %d: %d, Retry-After %q; want 429 with Retry-After", liveMaxStreamsPerClient+1, w.Code, w.Header().Get("Retry-After"))
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("client's page %d opened: one client holds more than %d streams", liveMaxStreamsPerClient+1, liveMaxStreamsPerClient)
	}
	c, _ := openStream(t, m, "198.51.100.3:40000") // another client
	cancels = append(cancels, c)
	waitStreams(t, m, liveMaxStreamsPerClient+1)
	first()
	<-firstDone
	c, _ = openStream(t, m, "192.0.2.7:41001")
	cancels = append(cancels, c)
	waitStreams(t, m, liveMaxStreamsPerClient+1)
}

// TestLiveStreamsServerCap: the server's cap still holds across clients (503 with Retry-After
// past liveMaxStreams), and IPv6 clients count by their /64 (one host picks any address in it).
func TestLiveStreamsServerCap(t *testing.T) {
	m := New()
	var cancels []func()
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	for i := range liveMaxStreams {
		c, _ := openStream(t, m, "10.0.0."+strconv.Itoa(i/liveMaxStreamsPerClient+1)+":"+strconv.Itoa(40000+i))
		cancels = append(cancels, c)
	}
	waitStreams(t, m, liveMaxStreams)
	_, done := openStream(t, m, "10.0.9.9:40000")
	if w := <-done; w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("page %d of the server: %d, Retry-After %q; want 503 with Retry-After", liveMaxStreams+1, w.Code, w.Header().Get("Retry-After"))
	}
	for _, c := range cancels {
		c()
	}
	waitStreams(t, m, 0)
	for i := range liveMaxStreamsPerClient {
		c, _ := openStream(t, m, "[2001:db8:1:2::"+strconv.Itoa(i+1)+"]:40000")
		cancels = append(cancels, c)
	}
	waitStreams(t, m, liveMaxStreamsPerClient)
	_, done = openStream(t, m, "[2001:db8:1:2:ffff::9]:40000")
	if w := <-done; w.Code != http.StatusTooManyRequests {
		t.Fatalf("a page from another address of the same /64: %d, want 429", w.Code)
	}
}
