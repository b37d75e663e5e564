package testsupport

import (
	"sync"
	"syscall"
	"testing"
)

// ReservePort holds a loopback TCP port for the test, until release or the test's end: a
// socket bound to 127.0.0.1 on a port the kernel picks, which never listens, so connections to
// it are refused. Bound without SO_REUSEADDR, the port stays the test's: a Listen there fails
// (EADDRINUSE, whatever SO_REUSEADDR the listener sets), a bind to port 0 does not pick it and
// a connect() does not take it as its own port. A port handed out by a listener closed at once
// (net.Listen on port 0, Close) was free again "for a moment" only: any listener on the machine
// (another test's kfake or httptest server, another process) could take it while the test
// still counted on a refusal. release frees the port early, for a test that starts a listener
// there itself (only the moment between release and that listen is then exposed); it may be
// called more than once. The socket is close-on-exec: a child process does not inherit it.
func ReservePort(tb testing.TB) (port int, release func()) {
	tb.Helper()
	syscall.ForkLock.RLock() // (no fork between the socket and its close-on-exec flag)
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		tb.Fatalf("reserving a loopback port: socket: %v", err)
	}
	var once sync.Once
	release = func() { once.Do(func() { syscall.Close(fd) }) }
	tb.Cleanup(release)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatalf("reserving a loopback port: bind 127.0.0.1:0: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatalf("reserving a loopback port: getsockname: %v", err)
	}
	in, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		tb.Fatalf("reserving a loopback port: bound to %T, want an IPv4 address", sa)
	}
	return in.Port, release
}
