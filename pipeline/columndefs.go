package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/atomicfile"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
)

// detect.state_dir's record of what each column of the models saved there is. The snapshots
// are matched to the configuration by the columns' names (detect: ErrSnapshotMismatch), and a
// derived column can keep its name while its definition changes: an explicit name
// (ingest.derive's name: d, of temp -> of pressure), a robust_z's min_values or scale_floor, or
// derive.timezone under time_of_day. A model built on the old values then scored the new
// ones, silently. columns.txt holds each column's definition as the last start found it;
// a start whose columns of the same names are defined otherwise moves the models and keys'
// state aside before the detect stage loads them (checkColumns).
const columnsFileName = "columns.txt"

// columnDef is one column and what it is.
type columnDef struct {
	Column string `json:"column"`
	Is     string `json:"is"`
}

// columnDefs are c's columns (ingest.Config.Columns, in order) with their definitions: "a
// feature" for ingest.features, the derivation for a derived column, its defaults filled in (a
// value left out and the same value written define the same column).
func columnDefs(c ingest.Config) []columnDef {
	var defs []columnDef
	for _, f := range c.Features {
		defs = append(defs, columnDef{f, "a feature"})
	}
	if c.Derive == nil {
		return defs
	}
	tz := c.Derive.Timezone
	if tz == "" {
		tz = "UTC"
	}
	for _, f := range c.Derive.Features {
		var is string
		switch f.Kind {
		case ingest.DeriveDiff:
			is = "diff of " + f.Of
		case ingest.DeriveRobustZ:
			mv := f.MinValues
			if mv == 0 {
				mv = min(f.Last, 10) // (ingest's default)
			}
			is = fmt.Sprintf("robust_z of %s, last %d, min_values %d, scale_floor %s", f.Of, f.Last, mv, strconv.FormatFloat(f.ScaleFloor, 'g', -1, 64))
		case ingest.DeriveMean:
			is = fmt.Sprintf("mean of %s, last %d", f.Of, f.Last)
		default: // time_of_day, day_of_week: a (sin, cos) pair
			is = fmt.Sprintf("%s in %s", f.Kind, tz)
		}
		for i, col := range f.Columns() {
			d := is
			if n := len(f.Columns()); n > 1 {
				d += [2]string{" (sin)", " (cos)"}[min(i, 1)]
			}
			defs = append(defs, columnDef{col, d})
		}
	}
	return defs
}

// derivedDefs are c's derived columns and their definitions as one text ("d: diff of temp;
// tod.sin: time_of_day in UTC (sin); ..."), empty without ingest.derive: what the model topic's
// messages carry (headerColumns), since a builder and its scorers must derive alike and the
// models name the columns only.
func derivedDefs(c ingest.Config) string {
	var parts []string
	for _, d := range columnDefs(c)[len(c.Features):] {
		parts = append(parts, d.Column+": "+d.Is)
	}
	return strings.Join(parts, "; ")
}

// checkColumns compares state_dir's columns.txt with cfg's columns. Where a column of the same
// name is defined otherwise, the models and keys' state there were built on other values under
// that name: they are moved into state_dir/columns-changed-<time>/ (kept for a rollback: never
// loaded from there), and a warning names the columns, their old and new definitions and the
// directory. Columns added, removed or reordered need nothing here (the snapshots' names do not
// match: the stage skips them, logged). Then columns.txt is written for the next start: cfg's
// columns, then those of the record that cfg lacks (renamed, removed: the snapshots built on
// them stay until pruned, and a column that comes back is compared with what it was). A
// state_dir without columns.txt (new, or of a release before it) has nothing to compare: where
// the stream has derived columns, the models and keys' state it holds are moved aside
// (moveUnknown).
func checkColumns(ctx context.Context, cfg Config, log zerolog.Logger) error {
	dir := cfg.Detect.StateDir
	if dir == "" {
		return nil
	}
	path := filepath.Join(dir, columnsFileName)
	defs := columnDefs(cfg.Ingest)
	var old []columnDef
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if derived := defs[len(cfg.Ingest.Features):]; len(derived) > 0 {
			if err := moveUnknown(ctx, dir, derived, log); err != nil {
				return err
			}
		}
	case err != nil:
		return fmt.Errorf("detect.state_dir: %w", err)
	default:
		if err := json.Unmarshal(data, &old); err != nil {
			// (not ours to judge further: the snapshots are checked by name as before)
			log.Warn().Err(err).Str("file", path).Msg("state_dir's columns file unreadable: written again, the snapshots matched by the columns' names only")
			old = nil
		}
	}
	was := map[string]string{}
	for _, d := range old {
		was[d.Column] = d.Is
	}
	var changed []string
	for _, d := range defs {
		if is, ok := was[d.Column]; ok && is != d.Is {
			changed = append(changed, d.Column)
			log.Warn().Str("column", d.Column).Str("was", is).Str("is", d.Is).Msg("column redefined under the same name since the models in detect.state_dir were saved")
		}
	}
	record := defs
	if len(changed) > 0 {
		if err := moveModels(ctx, dir, changed, data, log); err != nil {
			return err
		}
	} else {
		// The columns gone since keep their definitions: their models stay in state_dir (a
		// snapshot of other columns is skipped, not removed), and a start that brings such a
		// column back under another definition must find them built on the old one. (After a
		// move no model of theirs is left: the record is the columns in force.)
		now := map[string]bool{}
		for _, d := range defs {
			now[d.Column] = true
		}
		for _, d := range old {
			if !now[d.Column] {
				record = append(slices.Clip(record), d)
				now[d.Column] = true
			}
		}
	}
	if slices.Equal(old, record) {
		return nil
	}
	// state_dir need not exist yet (lint takes one that can be created): the stage would
	// create it (detect.OpenSnapshotDir), after this.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("detect.state_dir: %w", err)
	}
	_, err = atomicfile.Write(ctx, path, func(w io.Writer) error {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(record)
	})
	if err != nil {
		return fmt.Errorf("detect.state_dir: %w", err)
	}
	return nil
}

// moveUnknown moves aside the models and keys' state of a state_dir without columns.txt (of a
// release before it, or the file deleted) when the stream has derived columns: nothing says
// which definitions they were built on, and the start that finds no columns.txt is the one that
// would miss a column redefined under its name (the models built on the old values loaded and
// scoring the new ones, silently; columns.txt then recording the new definition as theirs). A
// cold start once (logged, the files kept) is the cost of never scoring a model on another
// column than it was built on; an operator sure that ingest.derive has not changed since they
// were saved moves them back (deleting the newer files saved since) and restarts (columns.txt,
// written now, then matches and they load).
func moveUnknown(ctx context.Context, dir string, derived []columnDef, log zerolog.Logger) error {
	var names, defs []string
	for _, d := range derived {
		names = append(names, d.Column)
		defs = append(defs, d.Column+": "+d.Is)
	}
	return moveAside(ctx, dir, "columns-unknown-", nil, names, log.Warn().Strs("derived_now", defs),
		"models and keys' state of a state_dir without "+columnsFileName+" (written by a release before 2026-11-28, or the file deleted) moved aside, never loaded: "+
			"nothing records which definitions of the derived columns they were built on. If ingest.derive has not changed since they were saved, "+
			"stop the instance, move them back into detect.state_dir (deleting the files it saved since, newer) and start it ("+columnsFileName+" now records the definitions); else the first model is built from the stream")
}

// moveModels moves dir's model and keys' state files into a new subdirectory, with the columns'
// record they were built under (was, columns.txt's content): moved back together, the old
// config loads them (the record left in dir is the new columns', which would move them again).
func moveModels(ctx context.Context, dir string, changed []string, was []byte, log zerolog.Logger) error {
	return moveAside(ctx, dir, "columns-changed-", was, changed, log.Warn(),
		"models and keys' state built on columns since redefined moved aside with the columns' record they were built under, never loaded (kept for a rollback: all of it moved back, with the old config): the first model is built from the stream")
}

// moveAside moves dir's model and keys' state files into a new subdirectory <prefix><time>,
// with was as its columns.txt (nil: none), then logs ev (a warning) with the columns, the
// files, the directory and msg; nothing when dir holds none (or does not exist yet).
func moveAside(ctx context.Context, dir, prefix string, was []byte, columns []string, ev *zerolog.Event, msg string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		ev.Discard()
		return nil
	}
	if err != nil {
		return fmt.Errorf("detect.state_dir: %w", err)
	}
	aside := filepath.Join(dir, prefix+time.Now().UTC().Format("20060102T150405.000Z"))
	var moved []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !detect.IsModelFile(e.Name()) {
			continue
		}
		if len(moved) == 0 {
			if err := os.Mkdir(aside, 0o755); err != nil {
				return fmt.Errorf("detect.state_dir: %w", err)
			}
			if was != nil {
				if _, err := atomicfile.Write(ctx, filepath.Join(aside, columnsFileName), func(w io.Writer) error {
					_, err := w.Write(was)
					return err
				}); err != nil {
					return fmt.Errorf("detect.state_dir: %w", err)
				}
			}
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(aside, e.Name())); err != nil {
			return fmt.Errorf("detect.state_dir: %w", err)
		}
		moved = append(moved, e.Name())
	}
	if len(moved) == 0 {
		ev.Discard()
		return nil
	}
	ev.Strs("columns", columns).Strs("files", moved).Str("moved_to", aside).Msg(msg)
	return nil
}

// derivedMismatch says why a model whose message carries the builder's derived columns'
// definitions pub (headerColumns: said, "" when the builder derives none) does not fit an
// instance that derives own (detect.ErrSnapshotMismatch), or nil. A message without the header
// (a builder of a release before it) tells nothing: the columns' names were checked already.
func derivedMismatch(pub string, said bool, own string) error {
	if !said || pub == own {
		return nil
	}
	if pub == "" {
		pub = "none"
	}
	if own == "" {
		own = "none"
	}
	return fmt.Errorf("%w: built for derived columns [%s], this instance derives [%s] (ingest.derive: the builder and its scorers must derive alike)", detect.ErrSnapshotMismatch, pub, own)
}

// headerValue is m's header key's value, and whether m has the header.
func headerValue(m kafka.Message, key string) (string, bool) {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// columnsHeaderBytes is what headerColumns adds to a message carrying derived beyond
// modelChunkOverhead: the header without a value (a builder without derive), its key and two
// length bytes, is within that overhead's margin over what the other headers take.
func columnsHeaderBytes(derived string) int {
	if derived == "" {
		return 0
	}
	return len(headerColumns) + len(derived) + 10 // (two varint lengths, at most 5 bytes each)
}
