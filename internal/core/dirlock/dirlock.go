// Package dirlock keeps a directory to one process: an advisory lock (flock(2), exclusive, not
// waited for) on a file in it, taken at the start and held until the process lets it go or
// ends (the kernel releases it then, after a crash or a SIGKILL too: no stale lock is left
// behind). detect.state_dir is such a directory: its files are numbered by a sequence each
// process takes from the directory at its start, so two processes on one directory wrote the
// same names over each other (the last rename won: one instance's keys' state, derive state and
// window replaced the other's) and each removed the other's unfinished files; a restart then
// loaded another process's state, silently (newuser31, docs/BENCHMARKS.md §12.87).
//
// Within one process a directory may be taken again while it is held (a pipeline that is
// started again after a failed start, the tests' restarts in one process): the holds are
// counted and the lock is released with the last. Only another process is refused.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// FileName is the lock file's name in the directory. It holds the pid of the process that
// holds the lock and when it took it, for the refusal's message (the lock itself is the flock,
// not the file: a file left by a process that is gone is no lock).
const FileName = ".outlierd.lock"

// ErrBusy is what a refusal because another process holds the directory wraps (errors.Is):
// other failures (the lock file cannot be made or locked) are not it.
var ErrBusy = errors.New("in use by another process")

// Lock is one hold of a directory.
type Lock struct {
	key  string
	once sync.Once
}

// held are this process's locked directories (by their resolved path) and their holds.
var (
	mu   sync.Mutex
	held = map[string]*entry{}
)

type entry struct {
	f     *os.File
	holds int
}

// Acquire locks dir (which must exist) for this process. It fails at once, naming the process
// that holds it, when another process does; what names the directory (a config key) is the
// caller's to add.
func Acquire(dir string) (*Lock, error) {
	key, err := filepath.Abs(dir)
	if err == nil {
		key, err = filepath.EvalSymlinks(key)
	}
	if err != nil {
		return nil, fmt.Errorf("dirlock: %s: %w", dir, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if e, ok := held[key]; ok {
		e.holds++
		return &Lock{key: key}, nil
	}
	path := filepath.Join(key, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	busy, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dirlock: %s: %w", path, err)
	}
	if busy {
		owner, _ := os.ReadFile(path)
		f.Close()
		who := strings.TrimSpace(string(owner))
		if who == "" {
			who = "a process that has not written its pid yet"
		}
		return nil, fmt.Errorf("%s is %w (%s; its lock %s)", dir, ErrBusy, who, FileName)
	}
	// Who holds it, for another process's refusal (the lock is already ours: a failure here
	// only leaves that message poorer).
	if f.Truncate(0) == nil {
		fmt.Fprintf(f, "pid %d, locked at %s", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	}
	held[key] = &entry{f: f, holds: 1}
	return &Lock{key: key}, nil
}

// Release gives this hold up; the last hold of the process releases the lock. A second call
// does nothing.
func (l *Lock) Release() {
	if l == nil {
		return
	}
	l.once.Do(func() {
		mu.Lock()
		defer mu.Unlock()
		e, ok := held[l.key]
		if !ok {
			return
		}
		if e.holds--; e.holds == 0 {
			delete(held, l.key)
			e.f.Close() // (closing the descriptor releases the flock)
		}
	})
}
