package pipeline

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestRefusingAddrHeld: refusingAddr's address must refuse connections for the whole test, so
// no other listener may take it meanwhile. It was a port handed out by a listener closed at
// once: free again "for a moment", and any Listen on the machine (another test's kfake or
// httptest server, another helper's process) could take it while a test waited for its
// connections to be refused (a 1-in-14,000 draw per such listen among the odd ephemeral ports
// that Linux hands to a bind to port 0 here; flaky31).
func TestRefusingAddrHeld(t *testing.T) {
	addr := refusingAddr(t)
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a listener took the refusing address %s: it is not held for the test", addr)
	} else if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("listen on the refusing address %s: %v, want EADDRINUSE (held)", addr, err)
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("a connection to the refusing address %s was accepted", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want the connection refused", addr, err)
	}
}
