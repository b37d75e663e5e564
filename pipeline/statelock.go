package pipeline

import (
	"errors"
	"fmt"
	"os"

	"github.com/outlierd/outlierd/internal/core/dirlock"
)

// lockStateDir takes detect.state_dir for this process (internal/core/dirlock: a flock held
// until closeOpened, or the process's end, a crash's too), before the topic check and before
// anything reads or writes the directory. A second process on the same directory (two
// instances, or a builder and a scorer, started from one config file on one host) is refused
// at once: the files are numbered from the directory at each start, so the two wrote the same
// names over each other, removed each other's unfinished files, and a restart loaded the
// other's keys', derive and window state without a word (newuser31, docs/BENCHMARKS.md
// §12.87).
func (p *Pipeline) lockStateDir() error {
	dir := p.cfg.Detect.StateDir
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pipeline: detect.state_dir: %w", err)
	}
	l, err := dirlock.Acquire(dir)
	if errors.Is(err, dirlock.ErrBusy) {
		return fmt.Errorf("pipeline: detect.state_dir %w: every process needs a state_dir of its own (each instance of a consumer group, the builder, each scorer)", err)
	}
	if err != nil { // (the lock file cannot be made or locked: no other process involved)
		return fmt.Errorf("pipeline: detect.state_dir %s: taking its lock: %w", dir, err)
	}
	p.stateLock = l
	return nil
}
