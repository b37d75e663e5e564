package testsupport

import (
	"io"
	"net"
	"sync"
	"testing"
)

// SilentBroker is the address of a listener that takes connections and requests and never
// answers: a broker that lost a request (a loaded one, under make test, held one 48 s). It and
// its connections close when the test ends.
func SilentBroker(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	closed := false
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed { // (accepted as the test ended)
				c.Close()
			}
			conns = append(conns, c)
			mu.Unlock()
			go io.Copy(io.Discard, c) //nolint:errcheck // (ends when the connection closes)
		}
	}()
	tb.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}
