package testsupport_test

import (
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestReservePort: the port refuses connections and no listener can take it until release;
// after release (twice: harmless) a listener can, and a child process never held it.
func TestReservePort(t *testing.T) {
	port, release := testsupport.ReservePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if c, err := net.Dial("tcp", addr); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial %s while reserved: %v, want the connection refused", addr, err)
	}
	if l, err := net.Listen("tcp", addr); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("listen on %s while reserved: %v, want EADDRINUSE", addr, err)
	}
	// A child started while the port is held must not inherit the socket (close-on-exec): it
	// would keep the port after release. /proc/self/fd of a shell lists its descriptors.
	out, err := exec.Command("sh", "-c", "ls -l /proc/self/fd/ | grep -c socket: || true").Output()
	if n, perr := strconv.Atoi(strings.TrimSpace(string(out))); err != nil || perr != nil {
		t.Fatalf("counting a child's sockets: %v %v (%q)", err, perr, out)
	} else if n > 0 {
		t.Errorf("a child process holds %d socket(s): the reserving socket is inherited", n)
	}
	release()
	release()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s after release: %v", addr, err)
	}
	l.Close()
}
