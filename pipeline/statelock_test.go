package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/dirlock"
)

// TestStateDirOfAnotherProcessRefused (newuser31): two processes started from one config file
// on one host (two instances of a group, or a builder and a scorer whose state_dir the file
// sets) shared detect.state_dir, each numbering its files from the directory at its start:
// they wrote keys-0, window-0, derive-state over each other, and a restart of the first loaded
// the second's 18 keys for its own 50, without a word. Now the second start is refused at once,
// before the topic check (here against brokers that cannot be reached, where the check would
// wait up to 30 s), naming the key, the directory and the process that holds it. The holder
// is the real binary, started on the same file and waiting in its own topic check.
func TestStateDirOfAnotherProcessRefused(t *testing.T) {
	bin := outlierdBinary(t)
	state := t.TempDir()
	y := fmt.Sprintf(`ingest:
  brokers: ["127.0.0.1:1"]
  topic: in
  features: [a, b]
detect:
  state_dir: %s
sink:
  brokers: ["127.0.0.1:1"]
  topic: out
  dead_letter_topic: dlq
http:
  listen: ""
`, state)
	cfgPath := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(cfgPath, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	log := newChildLog(t)
	holder := startChild(t, bin, cfgPath, log, "holder")
	defer holder.kill9(t)
	waitFor(t, 20*time.Second, "the first process in its topic check", func() bool {
		b, _ := os.ReadFile(log.path)
		return strings.Contains(string(b), "checking that the topics exist")
	})
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	p, err := New(ctx, cfg, zerolog.Nop())
	took := time.Since(start)
	if err == nil {
		p.closeOpened(context.Background())
		t.Fatal("a second process's start on the same detect.state_dir: no error")
	}
	for _, want := range []string{"detect.state_dir", state, "in use by another process", fmt.Sprintf("pid %d", holder.pid), "a state_dir of its own"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if took > time.Second { // (refused before the topic check, which waits up to 30 s here: 3 s by ctx)
		t.Errorf("refused after %s, want at once", took.Round(time.Millisecond))
	}
}

// TestStateDirLockFailureNotCalledShared: a state_dir whose lock cannot be taken for another
// reason than another process (here its lock file's name is a directory; a read-only
// directory, a full disk alike) is refused naming the key and the cause, without the advice of
// a state_dir shared by two processes (before, every failure said "every process needs a
// state_dir of its own", sending the operator after a second process that does not exist).
func TestStateDirLockFailureNotCalledShared(t *testing.T) {
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, dirlock.FileName), 0o755); err != nil {
		t.Fatal(err)
	}
	var p Pipeline
	p.cfg.Detect.StateDir = state
	err := p.lockStateDir()
	if err == nil {
		p.stateLock.Release()
		t.Fatal("a state_dir whose lock file is a directory: no error")
	}
	for _, want := range []string{"detect.state_dir", state, "is a directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	for _, wrong := range []string{"of its own", "in use by another process"} {
		if strings.Contains(err.Error(), wrong) {
			t.Errorf("error %q says %q: no other process holds it", err, wrong)
		}
	}
}
