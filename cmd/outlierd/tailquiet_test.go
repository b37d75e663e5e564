package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// lateWriter is a stderr that keeps apart what is written after the command returned (end).
type lateWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ended bool
	late  []string
}

func (w *lateWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		w.late = append(w.late, string(p))
	} else {
		w.buf.Write(p)
	}
	return len(p), nil
}

func (w *lateWriter) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
}

// TestTailWritesNothingAfterItEnds: tail's partition readers log their errors to its stderr
// (the reasons a reader cannot connect, bd680f9); a reader still connecting when tail returned
// went on alone and logged its end ("error initializing the kafka reader for partition 0 of T:
// context canceled") after tail's last line, into a writer its caller had taken back: a data
// race with the in-process runs (go test -race ./cmd/outlierd failed TestTail), and a stray
// warning after the summary. Here the readers' offset lookup is held 1.5 s and tail gives up
// on them after 300 ms (tailConnectWait): once it has returned, nothing more may be written.
func TestTailWritesNothingAfterItEnds(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	path, _ := kafkaConfig(t, br, "json")
	createTopics(t, path, 2)
	cutTailConnectWait(t, 300*time.Millisecond)
	holdFirstOffsets(br, 1500*time.Millisecond)
	var stdout bytes.Buffer
	var stderr lateWriter
	code := run([]string{"tail", "--config", path, "--idle-exit", "100ms"}, &stdout, &stderr)
	stderr.end()
	if code != 1 || !strings.Contains(stderr.buf.String(), "have not all connected") {
		t.Fatalf("tail with readers held connecting: exit %d, stderr %q; want exit 1, the connection bound", code, stderr.buf.String())
	}
	// (The lookup is answered 1.2 s after tail returned; 3 s is room for a loaded machine.)
	time.Sleep(3 * time.Second)
	stderr.mu.Lock()
	defer stderr.mu.Unlock()
	if len(stderr.late) > 0 {
		t.Errorf("tail wrote to its stderr after it returned:\n%s", strings.Join(stderr.late, ""))
	}
}
