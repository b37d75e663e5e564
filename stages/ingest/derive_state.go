package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/outlierd/outlierd/internal/core/atomicfile"
	"github.com/outlierd/outlierd/internal/core/sealed"
)

// The derive state in detect.state_dir (DeriveStateFileName): the series of a Deriver, so that a
// restart does not warm every rolling column again for `last` records, nor give each key's first
// diff 0 again. Saved at a clean stop (pipeline.Run, after the final commit) and loaded at the
// start (pipeline.New) when its definitions are the config's (the file holds them: ingest's
// features, uncertainty, derive.timezone and each derived feature's kind, of, last, min_values,
// scale_floor and trim; any difference starts cold, logged). A file of a newer format, corrupt,
// truncated or unreadable starts cold with a warning: never a failed start.
//
// What is saved: each series' values as they are in memory (its rings, its previous values,
// mean's and std's exact sums and extremes: derive_mean.go, derive_std.go), so that the columns
// continue bit for bit as an uninterrupted run's (TestDeriveStateRestartContinues); and per
// partition the last offset applied (the watermark). Kafka delivers at least once: after a
// restart the records from the group's committed offset on are read again, and those at or
// below the watermark were applied before the save. They are not applied again (a record
// counted twice in a window): their derived values are computed on a copy of their series,
// which is left as saved (applyRedelivered). After a clean stop the watermark is the committed
// offset less one (every record fetched was processed and committed), so nothing is read
// again. After a failed final commit the records applied but not committed are read again and
// get values from a window that holds them already (at most `last` records a key see it), the
// state as an uninterrupted run's.
//
// Size: at most derive.max_keys series of at most StateBound's bytes each (the file holds a
// series' values and its key, under the bytes StateBound counts for it in memory); a key of
// over stateKeyCap bytes is not saved (its series warms again after a restart), so that the
// read can refuse a file over StateBound(stateKeyCap) before reading it.

// DeriveStateFileName is the derive state's file in detect.state_dir.
const DeriveStateFileName = "derive-state.osnap"

// DeriveStateFormat is the derive state file's format version.
const DeriveStateFormat = 1

const deriveStateMagic = "\x89ODDS\r\n\x1a"

// stateKeyCap is the longest key (bytes, the partition's 4 included) whose series is saved.
const stateKeyCap = 1024

// deriveStateFile is the sealed envelope of the derive state; its MaxPayload is the Deriver's
// (stateFormat).
func (d *Deriver) stateFormat() sealed.Format {
	bound := uint64(d.StateBound(stateKeyCap)) + uint64(len(d.def)) + 1<<20 // + definitions and partitions
	return sealed.Format{Magic: deriveStateMagic, Name: "outlierd derive state", Newest: DeriveStateFormat, MaxPayload: bound}
}

// definition is what the layout and meaning of cfg's series depend on, as text.
func definition(cfg Config, loc string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "features=%q uncertainty=%t timezone=%q\n", cfg.Features, cfg.Uncertainty != nil, loc)
	for _, f := range cfg.Derive.Features {
		fmt.Fprintf(&b, "%s kind=%s of=%q last=%d min_values=%d scale_floor=%v trim=%d\n",
			strings.Join(f.Columns(), ","), f.Kind, f.Of, f.Last, f.MinValues, f.ScaleFloor, f.Trim)
	}
	return b.String()
}

// StateSaved is what SaveState wrote.
type StateSaved struct {
	Keys, Skipped int // series saved; series not saved (a key over stateKeyCap bytes)
	Bytes         int // the payload's size
}

// SaveState writes the series to dir/DeriveStateFileName atomically (atomicfile: a crash
// leaves the old file or the new one), ending with ctx: EncodeState, then WriteState.
func (d *Deriver) SaveState(ctx context.Context, dir string) (StateSaved, error) {
	payload, st := d.EncodeState()
	return st, d.WriteState(ctx, dir, payload)
}

// EncodeState is the series' payload (a copy: the Deriver may go on once it returns).
func (d *Deriver) EncodeState() ([]byte, StateSaved) {
	var e sealed.Encoder
	e.Text(d.def)
	marks := maps.Clone(d.restored) // (a partition not read since the load keeps its watermark)
	if marks == nil {
		marks = map[int32]int64{}
	}
	maps.Copy(marks, d.lastOff)
	e.U32(uint32(len(marks)))
	for p, off := range marks {
		e.U32(uint32(p))
		e.U64(uint64(off))
	}
	var st StateSaved
	for s := d.lru.next; s != &d.lru; s = s.next {
		if len(s.id) > stateKeyCap {
			st.Skipped++
		} else {
			st.Keys++
		}
	}
	e.U32(uint32(st.Keys))
	for s := d.lru.next; s != &d.lru; s = s.next { // most recent first: a lower max_keys keeps them
		if len(s.id) > stateKeyCap {
			continue
		}
		e.U32(uint32(len(s.id))) // (bytes, not Text: a key is any bytes, the partition's too)
		e.Raw([]byte(s.id))
		seen := uint32(0)
		if s.seen {
			seen = 1
		}
		e.U32(seen)
		e.F32s(s.prevVal)
		e.F32s(s.ring)
		e.F32s(s.mring)
		for _, w := range s.wide {
			e.U64(w)
		}
		for _, v := range s.agg {
			e.U32(uint32(v))
		}
		for k := range s.fill {
			e.U32(uint32(s.fill[k]))
			e.U32(uint32(s.pos[k]))
		}
	}
	payload := e.Payload()
	st.Bytes = len(payload)
	return payload, st
}

// WriteState writes EncodeState's payload to dir/DeriveStateFileName atomically (safe beside
// the Deriver's use: it reads only the payload and the format).
func (d *Deriver) WriteState(ctx context.Context, dir string, payload []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("derive state: %w", err)
	}
	f := d.stateFormat()
	_, err := atomicfile.Write(ctx, filepath.Join(dir, DeriveStateFileName), func(w io.Writer) error {
		return f.WriteContext(ctx, w, DeriveStateFormat, payload)
	})
	return err
}

// ErrDeriveState is a derive state file refused (corrupt, truncated, of a newer format, of other
// definitions): the start is cold.
var ErrDeriveState = errors.New("derive state")

// LoadState replaces the series with those of dir/DeriveStateFileName. ok is false with a nil
// error when there is no file; a file refused leaves the Deriver empty (cold) and says why. The
// Deriver must be new (no record applied).
func (d *Deriver) LoadState(ctx context.Context, dir string) (keys int, ok bool, err error) {
	path := filepath.Join(dir, DeriveStateFileName)
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: %w", ErrDeriveState, err)
	}
	defer fh.Close()
	_, payload, err := d.stateFormat().ReadContext(ctx, fh)
	if err != nil {
		return 0, false, sealed.Wrap(err, ErrDeriveState, path)
	}
	if err := d.decodeState(payload); err != nil {
		d.reset()
		return 0, false, fmt.Errorf("%w: %s: %w", ErrDeriveState, path, err)
	}
	d.restoredN = len(d.series)
	return len(d.series), true, nil
}

// decodeState installs payload's series (the Deriver empty).
func (d *Deriver) decodeState(payload []byte) error {
	r := sealed.NewDecoder(payload)
	if def := r.Text(1<<20, "definitions"); r.Err() == nil && def != d.def {
		return fmt.Errorf("saved under other definitions of the derived columns (was %q, is %q)", def, d.def)
	}
	nPart := r.U32("partitions")
	if r.Err() == nil && uint64(nPart)*12 > uint64(r.Left()) {
		return fmt.Errorf("%d partitions claimed, %d bytes left", nPart, r.Left())
	}
	restored := map[int32]int64{}
	for range nPart {
		p, off := r.U32("partition"), r.U64("offset")
		restored[int32(p)] = int64(off)
	}
	n := r.U32("series")
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		idLen := r.U32("key length")
		if r.Err() == nil && (idLen < 4 || idLen > stateKeyCap) {
			return fmt.Errorf("series %d: key of %d bytes", i, idLen)
		}
		id := string(r.Take(uint64(idLen), "key"))
		seen := r.U32("seen")
		s := d.newSeries()
		copy(s.prevVal, r.F32s(uint64(len(s.prevVal)), "previous values"))
		copy(s.ring, r.F32s(uint64(len(s.ring)), "robust_z rings"))
		copy(s.mring, r.F32s(uint64(len(s.mring)), "mean and std rings"))
		for j := range s.wide {
			s.wide[j] = r.U64("mean and std sums")
		}
		for j := range s.agg {
			s.agg[j] = int32(r.U32("std and trimmed mean extremes"))
		}
		for k := range s.fill {
			s.fill[k], s.pos[k] = int32(r.U32("fill")), int32(r.U32("position"))
		}
		if r.Err() != nil {
			break
		}
		if seen > 1 {
			return fmt.Errorf("series %d: flag %d", i, seen)
		}
		if err := d.checkSeries(s); err != nil {
			return fmt.Errorf("series %d: %w", i, err)
		}
		if _, dup := d.series[id]; dup {
			return fmt.Errorf("series %d: key saved twice", i)
		}
		if len(d.series) >= d.maxKeys { // derive.max_keys lowered since: the most recent kept
			continue
		}
		s.seen = seen == 1
		s.id = id
		s.partition = int32(uint32(id[0]) | uint32(id[1])<<8 | uint32(id[2])<<16 | uint32(id[3])<<24)
		d.series[id] = s
		s.prev, s.next = d.lru.prev, &d.lru // to the back: the file is most recent first
		d.lru.prev.next = s
		d.lru.prev = s
	}
	if err := r.Err(); err != nil {
		return err
	}
	if r.Left() != 0 {
		return fmt.Errorf("%d bytes after the last series", r.Left())
	}
	d.restored = restored
	return nil
}

// checkSeries refuses a series whose positions would index outside its rings.
func (d *Deriver) checkSeries(s *series) error {
	for k, op := range d.ops {
		if !op.kind.rolls() {
			continue
		}
		if f, p := s.fill[k], s.pos[k]; f < 0 || int(f) > op.last || p < 0 || int(p) >= op.last {
			return fmt.Errorf("feature %d: fill %d, position %d outside last %d", k, f, p, op.last)
		}
		if op.kind == DeriveStd || op.kind == DeriveMean && op.trim {
			for _, a := range s.agg[op.agg : op.agg+stdAggLen(op.last)] {
				if a < 0 || int(a) > op.last {
					return fmt.Errorf("feature %d: extreme index %d outside last %d", k, a, op.last)
				}
			}
		}
	}
	return nil
}

// rolls is whether a kind keeps a ring (fill and pos index it).
func (k DeriveKind) rolls() bool {
	return k == DeriveRobustZ || k == DeriveMean || k == DeriveStd
}

// reset forgets every series (a refused load).
func (d *Deriver) reset() {
	clear(d.series)
	d.lru.next, d.lru.prev = &d.lru, &d.lru
	d.restored = nil
}

// applyRedelivered is Apply for a record at or below its partition's restored watermark: it was
// applied before the state was saved, so it is not applied again; its values are computed on a
// copy of its series (as the record following the saved window), the series left as it is.
func (d *Deriver) applyRedelivered(in *Decoded, partition int32, key []byte, ts time.Time) *Decoded {
	d.keyBuf = binary.LittleEndian.AppendUint32(d.keyBuf[:0], uint32(partition))
	d.keyBuf = append(d.keyBuf, key...)
	s, ok := d.series[string(d.keyBuf)]
	if !ok { // not saved (evicted, a long key): a new series, as any
		return d.apply(in, partition, key, ts)
	}
	c := d.scratchOf(s)
	return d.applyTo(in, c, ts)
}

// scratchOf is a copy of s in the Deriver's scratch series (reused).
func (d *Deriver) scratchOf(s *series) *series {
	c := d.scratch
	if c == nil {
		c = d.newSeries()
		d.scratch = c
	}
	c.seen = s.seen
	copy(c.prevVal, s.prevVal)
	copy(c.ring, s.ring)
	copy(c.mring, s.mring)
	copy(c.wide, s.wide)
	copy(c.agg, s.agg)
	copy(c.fill, s.fill)
	copy(c.pos, s.pos)
	return c
}

// EncodeDeriveState is the source's derive state at this point of the stream (between two Next
// calls), for WriteDeriveState; ok is false without ingest.derive.
func (s *Source) EncodeDeriveState() (payload []byte, st StateSaved, ok bool) {
	s.nextMu.Lock()
	defer s.nextMu.Unlock()
	if s.derive == nil {
		return nil, StateSaved{}, false
	}
	payload, st = s.derive.EncodeState()
	return payload, st, true
}

// WriteDeriveState writes EncodeDeriveState's payload to dir (derive_state.go): on any
// goroutine, while Next goes on.
func (s *Source) WriteDeriveState(ctx context.Context, dir string, payload []byte) error {
	return s.derive.WriteState(ctx, dir, payload)
}

// DeriveStats is the source's Deriver's DeriveStats, for the metrics; ok is false without
// ingest.derive. Between two Next calls (the fetch goroutine's).
func (s *Source) DeriveStats() (st DeriveStats, ok bool) {
	s.nextMu.Lock()
	defer s.nextMu.Unlock()
	if s.derive == nil {
		return DeriveStats{}, false
	}
	return s.derive.Stats(), true
}

// LoadDeriveState loads the source's derive state from dir before its first Next, logging what
// it did: a file refused (newer, corrupt, other definitions) is a warning and a cold start,
// never an error.
func (s *Source) LoadDeriveState(ctx context.Context, dir string) {
	s.nextMu.Lock()
	defer s.nextMu.Unlock()
	if s.derive == nil || dir == "" {
		return
	}
	keys, ok, err := s.derive.LoadState(ctx, dir)
	switch {
	case err != nil:
		s.log.Warn().Err(err).Msg("derive state not loaded: the rolling columns start cold (warming for `last` records a key)")
	case ok:
		s.log.Info().Int("keys", keys).Msg("derive state loaded from detect.state_dir: the rolling columns continue")
	}
}
