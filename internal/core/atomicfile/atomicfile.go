// Package atomicfile writes a file so that a crash leaves either the file as it was or the whole
// new one, never a torn one: the content goes to a temporary file beside it (.<name>.tmp*), which
// is synced, closed and renamed over the file, then the directory is synced (the rename is
// durable only then). The detect stage's snapshots (stages/detect, SnapshotDir) and the
// solving-set model files (internal/algo/solvingset, Model.SaveFile) are written by it.
//
// Every wait ends with the caller's context (a stop's deadline): the content's writing (the
// writer fails once the context ends), the file's fsync and the directory's. A write or a file
// fsync the context cut leaves the file as it was (the temporary file is removed, once its
// fsync returns when that was cut); a directory fsync it cut leaves the new file in place and
// complete, only not known durable (Written.DirSync says so). A cut fsync goes on alone: a
// system call cannot be interrupted, only no longer waited for.
package atomicfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// ErrDirSyncCut is Written.DirSync's when the context ended before the directory's fsync did
// (wrapped with the context's error).
var ErrDirSyncCut = errors.New("the directory's fsync was still running when the context ended: the new file is complete and in place, but may not survive a power loss")

// Written is what Write did beyond its error.
type Written struct {
	// DirSync is the directory's fsync's outcome after the rename: nil when it succeeded (or
	// the directory cannot be opened, as on some platforms); ErrDirSyncCut when the context
	// ended first; the fsync's error otherwise. The new file is in place whatever it is.
	DirSync error
}

// The file system calls, replaced by the tests to make them slow.
var (
	syncFile = (*os.File).Sync
	syncDir  = func(dir string) error {
		d, err := os.Open(dir)
		if err != nil {
			return nil // (some platforms cannot open a directory: nothing to sync there)
		}
		defer d.Close()
		return d.Sync()
	}
)

// Write writes path atomically with what write writes (to a writer that fails with ctx's error
// once ctx ends). On an error the file at path is as it was and no temporary file is left (one
// whose fsync ctx cut is removed when that fsync returns): write's error as it returned it, or
// ctx.Err() (unwrapped) when ctx ended it, or the failed step's error with the path. With a nil
// error the new file is in place; Written.DirSync tells whether it is durable.
func Write(ctx context.Context, path string, write func(io.Writer) error) (Written, error) {
	if err := ctx.Err(); err != nil {
		return Written{}, err
	}
	fileSync, dirSync := syncFile, syncDir // (the goroutines below may outlive the call)
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return Written{}, fmt.Errorf("%s: %w", path, err)
	}
	tmp := f.Name()
	drop := func() {
		f.Close()
		os.Remove(tmp)
	}
	if err := write(sealed.ContextWriter(ctx, f)); err != nil {
		drop()
		if ctx.Err() != nil {
			return Written{}, ctx.Err() // (unwrapped: the callers tell a cut write from a failed one)
		}
		return Written{}, err
	}
	synced := make(chan error, 1)
	go func() { synced <- fileSync(f) }()
	select {
	case err = <-synced:
	case <-ctx.Done():
		go func() { <-synced; drop() }() // (the file's fsync goes on: its file is removed after it)
		return Written{}, ctx.Err()
	}
	if err != nil {
		drop()
		return Written{}, fmt.Errorf("%s: fsync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return Written{}, fmt.Errorf("%s: close: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return Written{}, fmt.Errorf("%s: rename: %w", path, err)
	}
	go func() { synced <- dirSync(dir) }()
	select {
	case err = <-synced:
		return Written{DirSync: err}, nil
	case <-ctx.Done():
		return Written{DirSync: fmt.Errorf("%w (%w)", ErrDirSyncCut, ctx.Err())}, nil
	}
}
