package pipeline

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/kafkasec"
	"github.com/outlierd/outlierd/internal/testsupport"
)

// tlsOnlyBroker listens like a broker's SSL or SASL_SSL listener met by a plaintext client: it
// reads the client's first bytes (a Kafka request, not a ClientHello) and answers with a TLS
// alert record (handshake_failure), as a broker's TLS listener does, then closes.
func tlsOnlyBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 512)
				if _, err := c.Read(buf); err != nil && err != io.EOF {
					return
				}
				c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28}) // alert, TLS 1.2, fatal handshake_failure
			}()
		}
	}()
	return ln.Addr().String()
}

// TestTopicCheckFailsFastOnATLSListener: a config without TLS against a broker's TLS listener (a
// forgotten ingest.security.tls.enabled) was taken for brokers that cannot be reached (an
// unexpected EOF): retried for topicCheckWait, 30 s, then "unreachable for 30s: ... broker
// appears to be expecting TLS". No retry fixes it: the check fails at once, saying what to set.
func TestTopicCheckFailsFastOnATLSListener(t *testing.T) {
	addr := tlsOnlyBroker(t)
	ref := TopicRef{Key: "ingest.topic", Name: "in", Brokers: []string{addr}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := ref.PartitionIDs(ctx, zerolog.Nop())
	if err == nil {
		t.Fatal("the topic check passed on a TLS listener without TLS")
	}
	// 5 s: the first attempt's round trip, on loopback, with room for a loaded machine; the
	// retries it replaces took 30 s.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the check took %s (%v), want it to fail at once", d, err)
	}
	for _, want := range []string{"ingest.topic", addr, "TLS", "ingest.security.tls.enabled"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestTopicCheckHintsAtAPlaintextListener: TLS on against a plaintext listener (the broker reads
// the ClientHello as a request and closes) fails every attempt with a bare EOF or reset, like a
// broker going away: the check waits its 30 s, then said only "unreachable ... EOF". The cut of a
// TLS handshake is named, and the error says which key may be wrong.
//
// The check's wait is cut once an attempt has failed so (its log line): before, a 1 s deadline
// stood in for that event, and one attempt on a loaded machine could outlast it. The cut may land
// in a backoff or in an attempt (kafka-go's transport dials on its own schedule): an attempt cut
// has the context's error, which says nothing of the brokers, so the check reports the attempt
// before it (topicPartitions).
func TestTopicCheckHintsAtAPlaintextListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 512)) // (the ClientHello, taken for a request too large to read)
			c.Close()
		}
	}()
	var logs testsupport.LogBuffer
	ref := TopicRef{Key: "sink.topic", Name: "out", Brokers: []string{ln.Addr().String()}, Security: kafkasec.Config{TLS: kafkasec.TLS{Enabled: true}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// (30 s: the first attempt fails at once on loopback; a check that never logs it ends
		// the test here, the wait cut all the same, and fails it.)
		deadline := time.After(30 * time.Second)
		for len(logs.Lines("unreachable; retrying")) == 0 {
			select {
			case <-deadline:
				cancel()
				return
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		cancel()
	}()
	_, err = ref.PartitionIDs(ctx, zerolog.New(&logs))
	if err == nil || !strings.Contains(err.Error(), "sink.security.tls.enabled") || !strings.Contains(err.Error(), "plaintext") {
		t.Errorf("error %v, want it to name sink.security.tls.enabled and a plaintext listener\n%s", err, logs.String())
	}
}
