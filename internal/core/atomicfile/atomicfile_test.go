package atomicfile

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// content is a write of s.
func content(s string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

// check fails unless path holds want and its directory no temporary file.
func check(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != want {
		t.Errorf("%s holds %q (%v), want %q", path, b, err, want)
	}
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("a temporary file is left: %s", e.Name())
		}
	}
}

// TestWrite: a write replaces the file whole, its directory synced; a write that fails, or
// that the context ended, leaves the file as it was and no temporary file.
func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	w, err := Write(context.Background(), path, content("one"))
	if err != nil || w.DirSync != nil {
		t.Fatalf("Write: %+v, %v", w, err)
	}
	check(t, path, "one")
	if _, err := Write(context.Background(), path, content("two")); err != nil {
		t.Fatal(err)
	}
	check(t, path, "two")

	failed := errors.New("the encoder's")
	if _, err := Write(context.Background(), path, func(w io.Writer) error { io.WriteString(w, "thr"); return failed }); err != failed {
		t.Errorf("a failed write returned %v, want the writer's own error", err)
	}
	check(t, path, "two")

	ctx, cancel := context.WithCancel(context.Background())
	_, err = Write(ctx, path, func(w io.Writer) error {
		io.WriteString(w, "thr")
		cancel()
		_, err := io.WriteString(w, "ee")
		return err
	})
	if err != context.Canceled {
		t.Errorf("a write the context ended returned %v, want context.Canceled unwrapped", err)
	}
	check(t, path, "two")
	if _, err := Write(ctx, path, content("four")); err != context.Canceled {
		t.Errorf("a write under an ended context returned %v, want context.Canceled", err)
	}
	check(t, path, "two")
}

// hold replaces a sync with one that waits until the returned channel closes, then does it.
func hold[F any](t *testing.T, sync *func(F) error) chan struct{} {
	t.Helper()
	gate, was := make(chan struct{}), *sync
	*sync = func(x F) error { <-gate; return was(x) }
	t.Cleanup(func() { *sync = was })
	return gate
}

// TestSyncsEndWithTheContext: the file's fsync and the directory's were waited for whatever the
// context (a stop's deadline on a slow disk waited them out). A file fsync the context cut leaves
// the file as it was (its temporary file removed once the fsync returns); a directory fsync it cut
// leaves the new file complete and in place, and says it may not be durable.
func TestSyncsEndWithTheContext(t *testing.T) {
	// (Both fsyncs are held until the test lets them go: a return within 5 s of a 50 ms
	// deadline is the bound, with room for a loaded machine.)
	t.Run("file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "f")
		if _, err := Write(context.Background(), path, content("old")); err != nil {
			t.Fatal(err)
		}
		gate := hold(t, &syncFile)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		_, err := Write(ctx, path, content("new"))
		if took := time.Since(t0); err != context.DeadlineExceeded || took > 5*time.Second {
			t.Fatalf("Write with its file's fsync held: %v after %v, want context.DeadlineExceeded at once", err, took)
		}
		b, _ := os.ReadFile(path)
		if string(b) != "old" {
			t.Errorf("the file holds %q after a cut fsync, want the old content", b)
		}
		close(gate)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) == 1 {
				break
			}
		}
		check(t, path, "old")
	})
	t.Run("dir", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "f")
		gate := hold(t, &syncDir)
		defer close(gate)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		w, err := Write(ctx, path, content("new"))
		if took := time.Since(t0); err != nil || took > 5*time.Second {
			t.Fatalf("Write with its directory's fsync held: %v after %v, want no error at once", err, took)
		}
		if !errors.Is(w.DirSync, ErrDirSyncCut) || !errors.Is(w.DirSync, context.DeadlineExceeded) {
			t.Errorf("DirSync %v, want ErrDirSyncCut with the context's error", w.DirSync)
		}
		check(t, path, "new")
	})
}
