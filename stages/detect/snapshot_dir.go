package detect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/atomicfile"
)

// ReadSnapshotFile reads a snapshot file.
func ReadSnapshotFile(path string) (*Model, error) {
	return readSnapshotFile(context.Background(), path)
}

// readSnapshotFile is ReadSnapshotFile ending when ctx does (sealed.ReadContext).
func readSnapshotFile(ctx context.Context, path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("detect: snapshot: %w", err)
	}
	defer f.Close()
	_, payload, err := snapshotFile.ReadContext(ctx, bufio.NewReader(f))
	var m *Model
	if err == nil {
		m, err = decodeSnapshot(payload)
	} else {
		err = sealedErr(err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// SnapshotDir keeps the newest model snapshots of a stage in a directory. Files are named
// model-<sequence>.osnap with a sequence number that only grows (taken from the directory at
// open), so "newest" never depends on the clock or on model versions, which restart at 1 when
// no snapshot fits. Save and LoadNewest are safe for concurrent use.
type SnapshotDir struct {
	dir  string
	keep int
	log  zerolog.Logger

	mu   sync.Mutex
	next uint64 // sequence number of the next Save
	// nextKeys is the next keys' state file's (keyed_snapshot.go: keys-<sequence>.osnap).
	nextKeys uint64
	// nextAlarms is the next alarm state file's (alarm_state.go: alarms-<sequence>.osnap).
	nextAlarms uint64
	// nextWindow is the next window file's (window_state.go: window-<sequence>.osnap).
	nextWindow uint64
	// write is atomicfile.Write (the tests' own in its place: a directory fsync cut).
	write func(ctx context.Context, path string, write func(io.Writer) error) (atomicfile.Written, error)
}

// OpenSnapshotDir creates dir if needed, removes temporary files that a crash during a Save
// left behind, and returns the directory; keep (>= 1) is how many snapshots Save keeps.
func OpenSnapshotDir(dir string, keep int, log zerolog.Logger) (*SnapshotDir, error) {
	if dir == "" {
		return nil, errors.New("detect: snapshot directory: empty path")
	}
	if keep < 1 {
		return nil, fmt.Errorf("detect: snapshot directory: keep must be >= 1, got %d", keep)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("detect: snapshot directory: %w", err)
	}
	d := &SnapshotDir{dir: dir, keep: keep, log: log, write: atomicfile.Write}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("detect: snapshot directory: %w", err)
	}
	files := []struct { // each kind of file: its name's prefix and its next sequence number
		prefix string
		next   *uint64
	}{{snapshotPrefix, &d.next}, {keysPrefix, &d.nextKeys}, {alarmsPrefix, &d.nextAlarms}, {windowPrefix, &d.nextWindow}}
	for _, e := range ents {
		name := e.Name()
		for _, f := range files {
			if strings.HasPrefix(name, "."+f.prefix) && strings.Contains(name, ".tmp") {
				if err := os.Remove(filepath.Join(dir, name)); err == nil {
					log.Warn().Str("file", name).Msg("removed a snapshot left unfinished by a crash")
				}
			}
			if seq, ok := snapshotSeq(name, f.prefix); ok && seq >= *f.next {
				*f.next = seq + 1
			}
		}
	}
	return d, nil
}

// Dir is the directory's path.
func (d *SnapshotDir) Dir() string { return d.dir }

// snapshotSeq parses <prefix><seq>.osnap (prefix model-, keys-, alarms- or window-).
func snapshotSeq(name, prefix string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	if s, ok = strings.CutSuffix(s, snapshotExt); !ok {
		return 0, false
	}
	seq, err := strconv.ParseUint(s, 10, 64)
	return seq, err == nil
}

// IsModelFile says whether name (a file name in detect.state_dir) is one of the files built on
// the columns' values: a model snapshot, a keys' state or the global window (window_state.go;
// not the alarm state: IsAlarmFile).
func IsModelFile(name string) bool {
	_, model := snapshotSeq(name, snapshotPrefix)
	_, keys := snapshotSeq(name, keysPrefix)
	_, win := snapshotSeq(name, windowPrefix)
	return model || keys || win
}

// IsAlarmFile says whether name (a file name in detect.state_dir) is an alarm state file: the
// verdicts' state that rests on the models it was saved with (pipeline: moved aside with them
// when the columns change).
func IsAlarmFile(name string) bool {
	_, alarms := snapshotSeq(name, alarmsPrefix)
	return alarms
}

// List returns the snapshot files, newest first.
func (d *SnapshotDir) List() ([]string, error) { return d.list(snapshotPrefix) }

// list returns the files <prefix><seq>.osnap, newest first.
func (d *SnapshotDir) list(prefix string) ([]string, error) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("detect: snapshot directory: %w", err)
	}
	type file struct {
		seq  uint64
		path string
	}
	var fs []file
	for _, e := range ents {
		if seq, ok := snapshotSeq(e.Name(), prefix); ok && e.Type().IsRegular() {
			fs = append(fs, file{seq, filepath.Join(d.dir, e.Name())})
		}
	}
	slices.SortFunc(fs, func(a, b file) int { return -cmpU64(a.seq, b.seq) })
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.path
	}
	return out, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Save writes m as the newest snapshot, atomically: a temporary file in the directory, fsync,
// rename, fsync of the directory, so a crash leaves the previous snapshots and either the whole
// new one or nothing. Then it removes all but the newest keep snapshots. It returns the path.
func (d *SnapshotDir) Save(m *Model) (path string, err error) {
	return d.SaveContext(context.Background(), m)
}

// SaveContext is Save ending when ctx does (a stop's deadline) with ctx.Err(): the file being
// written is removed, the previous ones stay.
func (d *SnapshotDir) SaveContext(ctx context.Context, m *Model) (path string, err error) {
	return d.saveAs(ctx, snapshotPrefix, &d.next, func(w io.Writer) error { return WriteSnapshot(w, m) })
}

// saveAs is SaveContext of what write writes (to a writer that fails once ctx ends), as
// <prefix><*next>.osnap, keeping the newest keep files of that prefix (internal/core/atomicfile:
// temporary file, fsync, rename, fsync of the directory). ctx ends every wait: the write and the
// file's fsync (ctx.Err(), the files before it stand), and the directory's fsync, logged: the
// new file is then complete and in place but may not survive a power loss, so the older files
// are kept past keep (a stop's: the next save prunes them). A directory fsync that failed is
// logged, and the older files pruned as after one that succeeded (a file system that cannot
// sync a directory would otherwise keep every file).
func (d *SnapshotDir) saveAs(ctx context.Context, prefix string, next *uint64, write func(io.Writer) error) (path string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	path = filepath.Join(d.dir, fmt.Sprintf("%s%020d%s", prefix, *next, snapshotExt))
	var writeErr error
	w, err := d.write(ctx, path, func(w io.Writer) error {
		writeErr = write(w)
		return writeErr
	})
	switch {
	case err == nil:
	case cutBy(ctx, err):
		return "", ctx.Err() // (unwrapped: the callers tell a cut save from a failed one)
	case err == writeErr:
		return "", err
	default:
		return "", fmt.Errorf("detect: snapshot %w", err)
	}
	*next++
	switch {
	case errors.Is(w.DirSync, atomicfile.ErrDirSyncCut):
		d.log.Warn().Err(w.DirSync).Str("dir", d.dir).Str("file", path).
			Msg("fsync of the snapshot directory cut by the stop's deadline (run.shutdown_timeout): the newest snapshot is complete, but may not survive a power loss; the older ones are kept")
		return path, nil
	case w.DirSync != nil:
		d.log.Warn().Err(w.DirSync).Str("dir", d.dir).Msg("fsync of the snapshot directory failed; the newest snapshot may not survive a power loss")
	}
	files, lerr := d.list(prefix)
	if lerr != nil {
		d.log.Warn().Err(lerr).Msg("listing snapshots to prune them failed")
		return path, nil
	}
	for _, old := range files[min(d.keep, len(files)):] {
		if rerr := os.Remove(old); rerr != nil {
			d.log.Warn().Err(rerr).Str("file", old).Msg("removing an old snapshot failed")
		}
	}
	return path, nil
}

// cutBy says whether err is ctx's: a save the stop's deadline ended.
func cutBy(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, ctx.Err())
}

// cutSave logs a save of what (keys of them) that the stop's deadline ended, or came before: its
// file was removed unfinished (or never begun), the newest complete one stands, and the next
// start loads it (the state it holds is older: that save's).
func (s *Stage) cutSave(what string, keys int) {
	ev := s.deps.Log.Warn()
	if keys > 0 {
		ev = ev.Int("keys", keys)
	}
	ev.Msg(what + " not saved: the stop's deadline (run.shutdown_timeout) came first; the last complete save stands, and the next start loads it")
}

// SkippedSnapshot is a snapshot LoadNewest passed over, with the reason.
type SkippedSnapshot struct {
	Path   string
	Reason error
}

// Loaded is the outcome of LoadNewest.
type Loaded struct {
	// Model is the newest snapshot that reads back intact and fits, with w* set for the
	// configuration's n (Model.WithN); nil when none does.
	Model *Model
	// Path is Model's file.
	Path string
	// Skipped are the newer snapshots passed over (corrupt, truncated, another format, or
	// built for other features or parameters), newest first.
	Skipped []SkippedSnapshot
}

// LoadNewest returns the newest snapshot that is intact and fits features and cfg
// (Model.Fits). Every snapshot passed over is logged with its reason, and none is ever
// loaded half: a file either reads back whole with its checksum or is skipped. The error is
// only for a directory that cannot be read.
func (d *SnapshotDir) LoadNewest(features []string, cfg Config) (Loaded, error) {
	return d.LoadNewestContext(context.Background(), features, cfg)
}

// LoadNewestContext is LoadNewest ending when ctx does, with ctx.Err() (a stop during the start:
// the snapshot being read is not passed over).
func (d *SnapshotDir) LoadNewestContext(ctx context.Context, features []string, cfg Config) (Loaded, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out Loaded
	files, err := d.List()
	if err != nil {
		return out, err
	}
	for _, path := range files {
		m, err := readSnapshotFile(ctx, path)
		if ctx.Err() != nil {
			return Loaded{}, ctx.Err()
		}
		if err == nil {
			err = m.Fits(features, cfg)
		}
		if err == nil {
			var ok bool
			if m, ok = m.WithN(cfg.Distance.N); !ok { // Fits checked n
				err = fmt.Errorf("%w: no w* for n = %d", ErrSnapshotMismatch, cfg.Distance.N)
			}
		}
		if err != nil {
			d.log.Warn().Err(err).Str("file", path).Msg("model snapshot skipped")
			out.Skipped = append(out.Skipped, SkippedSnapshot{Path: path, Reason: err})
			continue
		}
		out.Model, out.Path = m, path
		return out, nil
	}
	return out, nil
}
