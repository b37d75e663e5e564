package metrics

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// getWithHost GETs path from addr with the request's Host header set to host.
func getWithHost(t *testing.T, addr, host, path string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	// (A request answered with the live view's event stream never ends: the timeout ends it.)
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		t.Errorf("GET %s with Host %q: %v", path, host, err)
		return 0
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode
}

// TestLoopbackListenerRefusesForeignHosts: a listener on a loopback address (the default,
// 127.0.0.1:9464) answers only requests addressed to a loopback name (localhost, 127.0.0.1,
// [::1], with any port); one whose Host is another name gets 421. Before, it answered any Host:
// a web page the operator opens could rebind its own name to 127.0.0.1 (DNS rebinding) and
// read the live view's events (record keys, feature values, alerts) and /metrics from the
// browser, the same-origin policy satisfied by the attacker's own name.
func TestLoopbackListenerRefusesForeignHosts(t *testing.T) {
	s, err := Listen("127.0.0.1:0", New(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	port := s.Addr()[strings.LastIndex(s.Addr(), ":"):]
	for _, host := range []string{s.Addr(), "localhost" + port, "LocalHost", "127.0.0.1", "[::1]" + port, "127.8.9.10" + port} {
		if st := getWithHost(t, s.Addr(), host, "/healthz"); st != http.StatusOK {
			t.Errorf("Host %q: %d, want 200", host, st)
		}
	}
	for _, host := range []string{"attacker.example" + port, "attacker.example", "localhost.attacker.example" + port, "10.0.0.1" + port} {
		for _, path := range []string{"/", "/live/events", "/metrics", "/readyz"} {
			if st := getWithHost(t, s.Addr(), host, path); st != http.StatusMisdirectedRequest {
				t.Errorf("Host %q %s: %d, want 421", host, path, st)
			}
		}
	}
}

// TestAnyHostOnAWildcardListener: a listener on every interface (0.0.0.0:9464 in a container)
// is reached by whatever name the network gives it (a Service's, a pod's IP): every Host is
// answered there.
func TestAnyHostOnAWildcardListener(t *testing.T) {
	s, err := Listen("0.0.0.0:0", New(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	addr := "127.0.0.1" + s.Addr()[strings.LastIndex(s.Addr(), ":"):]
	if st := getWithHost(t, addr, "outlierd.monitoring.svc:9464", "/healthz"); st != http.StatusOK {
		t.Errorf("a Service's name on 0.0.0.0: %d, want 200", st)
	}
}
