package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestLiveStreamsReleasedOnEveryExit (reread26): a live-view stream gives its place back on
// every way it ends, through a real listener: the page going away (its connection closed), the
// server's shutdown, and a write that fails; so the per-client cap (4) and the server's (16)
// never fill with streams that are gone. The page's place is its client's: a fifth page of
// the same address is refused (429) until one of the four went.
func TestLiveStreamsReleasedOnEveryExit(t *testing.T) {
	m := New()
	srv, err := Listen("127.0.0.1:0", m, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped { // (a Server is shut down once)
			srv.Shutdown(context.Background())
		}
	}()
	url := "http://" + srv.Addr() + "/live/events"
	// open opens a page and returns its status and the way to close it (the browser's tab).
	open := func() (int, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		// (a connection of its own, as a browser's tab: closing it is the page gone)
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("a page: %v", err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
		}
		return resp.StatusCode, cancel
	}
	var pages []context.CancelFunc
	defer func() {
		for _, c := range pages {
			c()
		}
	}()
	for range liveMaxStreamsPerClient {
		code, c := open()
		pages = append(pages, c)
		if code != http.StatusOK {
			t.Fatalf("a page within the cap: %d", code)
		}
	}
	waitStreams(t, m, liveMaxStreamsPerClient)
	if code, c := open(); code != http.StatusTooManyRequests {
		c()
		t.Fatalf("the client's page %d: %d, want 429", liveMaxStreamsPerClient+1, code)
	}
	// The page goes away: its connection closed, its place given back.
	pages[0]()
	waitStreams(t, m, liveMaxStreamsPerClient-1)
	code, c := open()
	pages = append(pages, c)
	if code != http.StatusOK {
		t.Fatalf("a page after one closed: %d, want 200", code)
	}
	waitStreams(t, m, liveMaxStreamsPerClient)
	// The server stops: every stream ends and gives its place back.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stopped = true
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with %d streams open: %v", liveMaxStreamsPerClient, err)
	}
	waitStreams(t, m, 0)
	if n := len(m.liveStreams.byClient); n != 0 {
		t.Fatalf("%d clients still counted after every stream ended", n)
	}

	// A write that fails (the page's connection broken under the write): the stream ends and
	// gives its place back.
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := httptest.NewRequest(http.MethodGet, "/live/events", nil)
		r.RemoteAddr = "192.0.2.7:40000"
		m.liveEvents(failingWriter{httptest.NewRecorder()}, r)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a stream whose writes fail did not end")
	}
	waitStreams(t, m, 0)
}

// failingWriter is a ResponseWriter whose writes fail, as a connection broken under them.
type failingWriter struct{ *httptest.ResponseRecorder }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestLiveClientIPv4MappedIsIPv4 (reread26): an IPv4 client reaching a dual-stack listener as
// an IPv4-mapped IPv6 address (::ffff:a.b.c.d) counts as that IPv4 address, not as the /64 of
// ::ffff:0:0 that every IPv4 client would share; an IPv6 /64 is one client whatever its
// interface's zone.
func TestLiveClientIPv4MappedIsIPv4(t *testing.T) {
	for remote, want := range map[string]string{
		"[::ffff:192.0.2.7]:40000":  "192.0.2.7",
		"192.0.2.7:40001":           "192.0.2.7",
		"[::ffff:198.51.100.3]:1":   "198.51.100.3",
		"[2001:db8:1:2::9]:40000":   "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::]:443": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:40000":      "fe80::/64",
		"not an address":            "not an address",
	} {
		if got := liveClient(remote); got != want {
			t.Errorf("liveClient(%q) = %q, want %q", remote, got, want)
		}
	}
	m := New()
	var cancels []func()
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	for i := range liveMaxStreamsPerClient {
		remote := "192.0.2.7:40000"
		if i%2 == 1 {
			remote = "[::ffff:192.0.2.7]:40000"
		}
		c, _ := openStream(t, m, remote)
		cancels = append(cancels, c)
	}
	waitStreams(t, m, liveMaxStreamsPerClient)
	_, done := openStream(t, m, "[::ffff:192.0.2.7]:41000")
	if w := <-done; w.Code != http.StatusTooManyRequests {
		t.Fatalf("the client's page %d, through its IPv4-mapped address: %d, want 429", liveMaxStreamsPerClient+1, w.Code)
	}
}
