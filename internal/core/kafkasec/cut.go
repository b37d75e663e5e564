package kafkasec

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// CutAtEnd is dialer with each connection it opens cut when ctx ends (its socket's deadline set
// to now), until release: kafka-go bounds a dial's TCP and TLS handshakes by the context but not
// its SASL exchange (Conn.saslHandshake and saslAuthenticate, requests without a deadline), so a
// broker that took the connection and never answered the handshake held a dial past any
// context (pipeline's TestModelTopicDialsBoundedUnderSASL, ingest's
// TestDialPartitionBoundedUnderSASL). Call release before ctx's cancel where the dial's
// connection lives on; it keeps no deadline then (kafka-go sets its socket's anew at each
// request).
func CutAtEnd(ctx context.Context, dialer *kafka.Dialer) (*kafka.Dialer, func()) {
	d := *dialer
	dial := d.DialFunc
	if dial == nil { // (kafka-go's own, Dialer.dialContext; its DualStack is the default since Go 1.12)
		dial = (&net.Dialer{LocalAddr: d.LocalAddr, FallbackDelay: d.FallbackDelay, KeepAlive: d.KeepAlive}).DialContext
	}
	var mu sync.Mutex
	var stops []func() bool
	d.DialFunc = func(dctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(dctx, network, address)
		if err == nil {
			mu.Lock()
			stops = append(stops, context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) }))
			mu.Unlock()
		}
		return c, err
	}
	return &d, func() {
		mu.Lock()
		defer mu.Unlock()
		for _, stop := range stops {
			stop()
		}
	}
}
