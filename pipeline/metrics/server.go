package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

// Handler serves /metrics (Prometheus text or OpenMetrics, by content negotiation), /healthz
// (200 while the process serves HTTP: it is alive), /readyz (200 only while connected to
// the brokers, a model is serving and the pipeline is not stopping; 503 with the reasons
// otherwise, and while the pipeline starts, with what the start waits for: SetStarting) and
// the live view: the page at /, its files under /live/, its events at
// /live/events (liveview.go).
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", liveHeaders(http.HandlerFunc(livePage)))
	mux.Handle("GET /live/", liveHeaders(liveAssets()))
	mux.HandleFunc("GET /live/events", m.liveEvents)
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A failing collector yields the other series rather than a failed scrape.
		ErrorHandling: promhttp.ContinueOnError,
		// Bounds concurrent scrapes, each of which gathers every series.
		MaxRequestsInFlight: 4,
		// OpenMetrics to a scraper that asks for it (Prometheus does by default), the text
		// format otherwise: promhttp negotiates only with this set.
		EnableOpenMetrics: true,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ok, why := m.Ready(); !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %s\n", why)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// Server is the HTTP listener of one Metrics.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Listen binds addr (host:port; port 0 picks a free one) right away, so a taken port is an
// error at start-up, and serves m.Handler on it in a goroutine until Shutdown.
func Listen(addr string, m *Metrics, log zerolog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	// Every request's context ends when Shutdown begins, so the live view's event streams, which
	// never go idle, end instead of holding Shutdown until its deadline.
	base, stopStreams := context.WithCancel(context.Background())
	h := m.Handler()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		h = loopbackHostsOnly(h)
	}
	s := &Server{
		srv: &http.Server{
			BaseContext: func(net.Listener) context.Context { return base },
			Handler:     h,
			// A scrape is small and local; these bound what a stuck client can hold.
			ReadHeaderTimeout: 5 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
		},
		ln:   ln,
		done: make(chan error, 1),
	}
	s.srv.RegisterOnShutdown(stopStreams)
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		} else if err != nil {
			log.Error().Err(err).Str("addr", ln.Addr().String()).Msg("metrics listener stopped")
		}
		s.done <- err
	}()
	return s, nil
}

// loopbackHostsOnly wraps the handler of a listener on a loopback address: a request whose Host
// is not a loopback name (localhost, a 127.0.0.0/8 or ::1 address; any port) is answered 421.
// Only a browser sends such a request to a loopback port: a page that rebound its own name to
// 127.0.0.1 (DNS rebinding) to read the live view's records and /metrics under its own origin.
// A listener on other addresses (0.0.0.0 in a container) is reached by names the network gives
// it, and answers every Host.
func loopbackHostsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("host %q is not a loopback name: this listener (http.listen) is on a loopback address", r.Host),
				http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header (host or host:port) names the loopback interface.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Addr is the address the server listens on (with the port chosen when addr had port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Shutdown stops accepting, waits for the requests in flight until ctx ends, and returns once
// the serving goroutine has ended.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	if serr := <-s.done; err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("metrics: shutdown: %w", err)
	}
	return nil
}
