package pipeline

import (
	"bytes"
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

// columnDef is one column and what it is; Gone: a column of the record no longer in force
// (kept for its definition: checkColumns).
type columnDef struct {
	Column string `json:"column"`
	Is     string `json:"is"`
	Gone   bool   `json:"gone,omitempty"`
}

// Cycles are c's cyclic time columns (ingest.derive's time_of_day and day_of_week pairs) as the
// detect stage takes them (detect.Deps.Cycles: read by a model whose window spans their period).
func Cycles(c ingest.Config) []detect.Cycle {
	if c.Derive == nil {
		return nil
	}
	var out []detect.Cycle
	for i := range c.Derive.Features {
		f := &c.Derive.Features[i]
		if p := f.Period(); p > 0 {
			cols := f.Columns()
			out = append(out, detect.Cycle{Sin: cols[0], Cos: cols[1], Period: p})
		}
	}
	return out
}

// columnDefs are c's columns (ingest.Config.Columns, in order) with their definitions: "a
// feature" for ingest.features, the derivation for a derived column, its defaults filled in (a
// value left out and the same value written define the same column).
func columnDefs(c ingest.Config) []columnDef {
	var defs []columnDef
	for _, f := range c.Features {
		defs = append(defs, columnDef{Column: f, Is: "a feature"})
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
			// (with trim, the mean of the window less its two values farthest from its mean,
			// trimmean27: another column than the plain mean's)
			is = fmt.Sprintf("mean of %s, last %d", f.Of, f.Last)
			if f.Trim > 0 {
				is += fmt.Sprintf(", less its %d farthest", f.Trim)
			}
		case ingest.DeriveStd:
			// (the definition in full: the spread of the window less its two values farthest from
			// its mean, trimstd26; a model of the plain std, spread26's, is another column's)
			is = fmt.Sprintf("std of %s, last %d, less its 2 farthest", f.Of, f.Last)
		default: // time_of_day, day_of_week: a (sin, cos) pair
			is = fmt.Sprintf("%s in %s", f.Kind, tz)
		}
		for i, col := range f.Columns() {
			d := is
			if n := len(f.Columns()); n > 1 {
				d += [2]string{" (sin)", " (cos)"}[min(i, 1)]
			}
			defs = append(defs, columnDef{Column: col, Is: d})
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
// (moveUnknown). The alarm state goes with the models, and alone when the columns in force
// changed otherwise (moveAlarms). aside is the directory the files went to ("": none moved):
// the detect stage keeps the alert groups of the alarm state there (detect.Deps.AlertGroupsFrom).
func checkColumns(ctx context.Context, cfg Config, log zerolog.Logger) (aside string, err error) {
	dir := cfg.Detect.StateDir
	if dir == "" {
		return "", nil
	}
	path := filepath.Join(dir, columnsFileName)
	// A crash in the record's atomic write left its temporary file (the old record is whole):
	// removed, as the stage removes its snapshots' (detect.OpenSnapshotDir).
	// (Not a glob: state_dir's path may hold its metacharacters. Not there yet: nothing left.)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if f := filepath.Join(dir, e.Name()); strings.HasPrefix(e.Name(), "."+columnsFileName+".tmp") && os.Remove(f) == nil {
			log.Warn().Str("file", f).Msg("removed a columns.txt left unfinished by a crash")
		}
	}
	if err := recoverCutMoves(dir, log); err != nil {
		return "", err
	}
	defs := columnDefs(cfg.Ingest)
	var old []columnDef
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if derived := defs[len(cfg.Ingest.Features):]; len(derived) > 0 {
			if aside, err = moveUnknown(ctx, dir, derived, log); err != nil {
				return "", err
			}
		}
	case err != nil:
		return "", fmt.Errorf("detect.state_dir: %w", err)
	default:
		if err := json.Unmarshal(data, &old); err != nil {
			// Not written so (the writes are atomic): an edit or damage. Going on would load
			// the snapshots by the columns' names alone, what the record is for, and write it
			// over; the operator fixes it, or removes it to have them matched by name.
			return "", fmt.Errorf("detect.state_dir: %s:%s: %w: the record of the columns the models there were built on; fix it, or remove it (the models are then matched by the columns' names only)",
				path, jsonPlace(data, err), err)
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
		if aside, err = moveModels(ctx, dir, changed, data, log); err != nil {
			return "", err
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
				d.Gone = true
				record = append(slices.Clip(record), d)
				now[d.Column] = true
			}
		}
	}
	if slices.Equal(old, record) {
		return aside, nil
	}
	if old != nil && len(changed) == 0 && !slices.Equal(inForce(old), defs) {
		// (the columns changed: the models they were saved with are not loaded)
		if aside, err = moveAlarms(ctx, dir, inForce(old), defs, log); err != nil {
			return "", err
		}
	}
	// state_dir need not exist yet (lint takes one that can be created): the stage would
	// create it (detect.OpenSnapshotDir), after this.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("detect.state_dir: %w", err)
	}
	_, err = atomicfile.Write(ctx, path, func(w io.Writer) error {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(record)
	})
	if err != nil {
		return "", fmt.Errorf("detect.state_dir: %w", err)
	}
	return aside, nil
}

// moveUnknown moves aside the models, keys' state and alarm state of a state_dir without columns.txt (of a
// release before it, or the file deleted) when the stream has derived columns: nothing says
// which definitions they were built on, and the start that finds no columns.txt is the one that
// would miss a column redefined under its name (the models built on the old values loaded and
// scoring the new ones, silently; columns.txt then recording the new definition as theirs). A
// cold start once (logged, the files kept) is the cost of never scoring a model on another
// column than it was built on; an operator sure that ingest.derive has not changed since they
// were saved moves them back (deleting the newer files saved since) and restarts (columns.txt,
// written now, then matches and they load).
func moveUnknown(ctx context.Context, dir string, derived []columnDef, log zerolog.Logger) (string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("detect.state_dir: %w", err)
	}
	if !slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return e.Type().IsRegular() && detect.IsModelFile(e.Name()) }) {
		return "", nil // (no model to distrust: an alarm state alone stays, as without derived columns)
	}
	var names, defs []string
	for _, d := range derived {
		names = append(names, d.Column)
		defs = append(defs, d.Column+": "+d.Is)
	}
	return moveAside(ctx, dir, "columns-unknown-", modelOrAlarm, nil, names, log.Warn().Strs("derived_now", defs),
		"models, keys' state and alarm state of a state_dir without "+columnsFileName+" (written by a release before 2026-11-28, or the file deleted) moved aside, never loaded: "+
			"nothing records which definitions of the derived columns they were built on. If ingest.derive has not changed since they were saved, "+
			"stop the instance, move them back into detect.state_dir (deleting the files it saved since, newer) and start it ("+columnsFileName+" now records the definitions); else the first model is built from the stream")
}

// moveModels moves dir's model, keys' state and alarm state files into a new subdirectory, with
// the columns' record they were built under (was, columns.txt's content): moved back together,
// the old config loads them (the record left in dir is the new columns', which would move them
// again). The alarm state: moveAlarms.
func moveModels(ctx context.Context, dir string, changed []string, was []byte, log zerolog.Logger) (string, error) {
	return moveAside(ctx, dir, "columns-changed-", modelOrAlarm, was, changed, log.Warn(),
		"models, keys' state and alarm state built on columns since redefined moved aside with the columns' record they were built under, never loaded (kept for a rollback: all of it moved back, with the old config): the first model is built from the stream, the alarms start empty but for the alert groups")
}

// modelOrAlarm names the files a start moves aside with the models: theirs, the alarm state's and
// the derive state's (ingest.DeriveStateFileName: it refuses other definitions itself; moved with
// them for a rollback).
func modelOrAlarm(name string) bool {
	return detect.IsModelFile(name) || detect.IsAlarmFile(name) || name == ingest.DeriveStateFileName
}

// inForce are the columns of a record that were in force at the start that wrote it.
func inForce(record []columnDef) []columnDef {
	return slices.DeleteFunc(slices.Clone(record), func(d columnDef) bool { return d.Gone })
}

// moveAlarms moves dir's alarm state aside when the columns in force changed from was to is (a
// column added, removed or reordered; moveModels moves it at a redefinition): the deadband's
// series in alarm and the stage's cap rest on the verdicts of the models saved with them,
// which this start does not load (the stage skips them by the columns' names). Kept, a series
// in alarm against the old model held its next records flagged against the new one at
// flag_clear x min_score, a score the new model alone does not flag at (the keys' own caps, in
// the keys' state, started afresh meanwhile). They start empty with the new model, as at a
// change of detect.window; the alert groups, which flag nothing, are kept (the stage reads them
// from the directory: detect.Deps.AlertGroupsFrom). (A record written before the gone columns
// were marked holds them as in force: a start on it sees them removed and moves the alarm
// state, once.)
func moveAlarms(ctx context.Context, dir string, was, is []columnDef, log zerolog.Logger) (string, error) {
	cols := func(defs []columnDef) string {
		var s []string
		for _, d := range defs {
			s = append(s, d.Column+": "+d.Is)
		}
		return strings.Join(s, "; ")
	}
	return moveAside(ctx, dir, "columns-changed-", detect.IsAlarmFile, nil, nil, log.Warn().Str("was", cols(was)).Str("is", cols(is)),
		"alarm state of other columns moved aside, never loaded (kept for a rollback): the series in alarm and the alarm caps start empty with the new columns' model, the alert groups are kept")
}

// moveAside moves dir's files that which names (detect.IsModelFile, IsAlarmFile) into a new
// subdirectory <prefix><time>, with was as its columns.txt (nil: none), then logs ev (a
// warning) with the columns (nil: left out), the files, the directory and msg; nothing when dir
// holds none (or does not exist yet). The subdirectory is filled under its name and
// partialSuffix, renamed once every file is in: a crash in the move leaves the suffix, and the
// next start undoes the move (recoverCutMoves) before it moves them again.
func moveAside(ctx context.Context, dir, prefix string, which func(name string) bool, was []byte, columns []string, ev *zerolog.Event, msg string) (string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		ev.Discard()
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("detect.state_dir: %w", err)
	}
	aside := filepath.Join(dir, prefix+time.Now().UTC().Format("20060102T150405.000Z"))
	work := aside + partialSuffix // (renamed to aside once every file is in: recoverCutMoves)
	var moved []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !which(e.Name()) {
			continue
		}
		if len(moved) == 0 {
			if err := os.Mkdir(work, 0o755); err != nil {
				return "", fmt.Errorf("detect.state_dir: %w", err)
			}
			if was != nil {
				if _, err := atomicfile.Write(ctx, filepath.Join(work, columnsFileName), func(w io.Writer) error {
					_, err := w.Write(was)
					return err
				}); err != nil {
					return "", fmt.Errorf("detect.state_dir: %w", err)
				}
			}
		}
		if moveAsideCut != nil {
			if err := moveAsideCut(len(moved)); err != nil {
				return "", err
			}
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(work, e.Name())); err != nil {
			return "", fmt.Errorf("detect.state_dir: %w", err)
		}
		moved = append(moved, e.Name())
	}
	if len(moved) == 0 {
		ev.Discard()
		return "", nil
	}
	if err := os.Rename(work, aside); err != nil {
		return "", fmt.Errorf("detect.state_dir: %w", err)
	}
	if columns != nil {
		ev = ev.Strs("columns", columns)
	}
	ev.Strs("files", moved).Str("moved_to", aside).Msg(msg)
	return aside, nil
}

// partialSuffix ends the name of a directory a move aside fills (moveAside): renamed without
// it once every file is in, so a directory of that name is a move a crash cut short.
const partialSuffix = ".partial"

// recoverCutMoves undoes the moves aside a crash cut short (a directory <prefix><time>.partial
// in dir): their model, keys' and alarm state files go back into dir, where the rest of that
// state still is and columns.txt still records what it was built on (written after the move),
// and the directory, with its columns.txt and a temporary file of its write, is removed; the
// start then moves all of it aside again, into one directory, if its columns still differ. A
// file of the same name already in dir (not a crash's leftover: nothing writes there between
// the crash and this) stays in the directory, which then stays, logged, with its columns.txt
// and without the suffix: an ordinary directory aside. (Before, it kept the suffix, and a later
// start, once the namesake had been moved aside, moved the file back into dir, under the
// record of the columns then in force: TestColumnsCutMoveKeptNeverComesBack.) A crash in this
// undoing leaves the directory as it was minus the files moved back: the next start goes on.
func recoverCutMoves(dir string, log zerolog.Logger) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("detect.state_dir: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasSuffix(name, partialSuffix) ||
			!strings.HasPrefix(name, "columns-changed-") && !strings.HasPrefix(name, "columns-unknown-") {
			continue
		}
		cut := filepath.Join(dir, name)
		files, err := os.ReadDir(cut)
		if err != nil {
			return fmt.Errorf("detect.state_dir: %w", err)
		}
		var back, kept, record []string
		for _, f := range files {
			from, to := filepath.Join(cut, f.Name()), filepath.Join(dir, f.Name())
			switch {
			case !f.Type().IsRegular():
				kept = append(kept, f.Name())
			case modelOrAlarm(f.Name()):
				if _, err := os.Lstat(to); err == nil {
					kept = append(kept, f.Name())
					continue
				}
				if err := os.Rename(from, to); err != nil {
					return fmt.Errorf("detect.state_dir: %w", err)
				}
				back = append(back, f.Name())
			case f.Name() == columnsFileName:
				record = append(record, from) // (removed below unless something stays)
			case strings.HasPrefix(f.Name(), "."+columnsFileName+".tmp"):
				if err := os.Remove(from); err != nil {
					return fmt.Errorf("detect.state_dir: %w", err)
				}
			default:
				kept = append(kept, f.Name())
			}
		}
		ev := log.Warn().Strs("moved_back", back).Str("directory", cut)
		if len(kept) > 0 {
			done := strings.TrimSuffix(cut, partialSuffix)
			if err := os.Rename(cut, done); err != nil {
				return fmt.Errorf("detect.state_dir: a move aside cut short, undone in part: %w", err)
			}
			ev.Strs("kept", kept).Str("renamed_to", done).Msg("a move aside cut short (a crash) undone in part: the files kept in its directory have namesakes in detect.state_dir (or are not the move's); the directory stays, an ordinary one aside (its name without .partial)")
			continue
		}
		for _, f := range record {
			if err := os.Remove(f); err != nil {
				return fmt.Errorf("detect.state_dir: %w", err)
			}
		}
		if err := os.Remove(cut); err != nil {
			return fmt.Errorf("detect.state_dir: %w", err)
		}
		ev.Msg("a move aside cut short (a crash) undone: its files moved back into detect.state_dir, whose columns.txt still records what they were built on; moved aside again below if the columns still differ")
	}
	return nil
}

// moveAsideCut, in tests, cuts a move aside short before its next file (moved: the files moved
// so far), as a crash there would: its error ends the move where it is.
var moveAsideCut func(moved int) error

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

// jsonPlace is "line:column" (1-based, bytes) of the byte where err, json.Unmarshal's of data,
// was found: a syntax or type error's offset (the bytes read with the fault); "1:1" otherwise.
func jsonPlace(data []byte, err error) string {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	at := max(min(int(off), len(data))-1, 0)
	line := 1 + bytes.Count(data[:at], []byte("\n"))
	col := at - bytes.LastIndexByte(data[:at], '\n')
	return fmt.Sprintf("%d:%d", line, col)
}
