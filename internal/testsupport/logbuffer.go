package testsupport

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer is a log destination that several goroutines write (a logger's, a client's) and
// the test reads back.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the lines written so far that contain every one of subs.
func (b *LogBuffer) Lines(subs ...string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}
