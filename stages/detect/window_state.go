package detect

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// The global window in detect.state_dir (window-<sequence>.osnap, beside the models, the keys'
// state and the alarm state; snapwin30): what the builds read (the window's columns, its
// uncertainty columns, and in step with them the records' identities, event times and the marks
// that leave a record out of the reference: significant, warming) and where the build triggers
// stood, so that a restart rebuilds on the usual triggers from the window it stopped with, not
// from min_records records read after it (before, the snapshot's model served until min_records
// had arrived, and the next model, and its calibration, were built from those alone).
// Written by saveKeys (keyed_save.go) with the keys' and the alarm state: at a graceful stop,
// after the final commit (Close), and at the periodic save (a model installed at least
// refresh_interval after the last save), on every role that keeps a window (not a scorer's).
//
// Format version 1 (sealed envelope: magic "\x89ODWN\r\n\x1a", version, payload length P,
// payload, SHA-256; integers little-endian):
//
//	payload: dims u32, flags u32 (bit 0: uncertainty columns follow the columns; bit 1: event
//	         times follow the offsets; others 0), dims x { name length u32, name UTF-8 },
//	         capacity u64 (detect.window at the save), pushed u64 (the stream index after the
//	         newest record: records pushed before it), held u64 (records in the window, at most
//	         capacity and pushed), topic (length u32, UTF-8),
//	         model version u64 (the serving model's at the save, 0: none), since build u64 and
//	         since recalibration u64 (records pushed since the last build and the last build or
//	         recalibration started), last build i64 (Unix ns, when the last build started),
//	         dims x held f32 (the columns, oldest first), if bit 0: dims x held f32,
//	         held x u32 (partitions, int32), held x i64 (offsets), if bit 1: held x i64 (event
//	         times, ms; math.MinInt64: none), held x u8 (bit 0: significant, bit 1: warming,
//	         bit 2: marked by a model blind to a cyclic pair, not re-judged yet (review31: a
//	         release before refuses a file with it set: logged, skipped); others 0)
//
// A file's payload length must be what its header says (dims, held, flags): a hostile header
// is refused before any allocation of the records. The hypercube's uncounted marks are not
// saved: every model's install recounts them by their rule over the window as it is
// (countsLeaveOut), and a start from the file installs its model after the window is back.
const (
	windowMagic = "\x89ODWN\r\n\x1a"
	// WindowSnapshotFormat is the newest window file format this code reads and writes.
	WindowSnapshotFormat = 1
	windowPrefix         = "window-"
	winFlagSDs           = 1
	winFlagTimes         = 2
	winMarkSig           = 1
	winMarkWarm          = 2
	winMarkBlind         = 4
)

var windowSnapshotFile = sealed.Format{Magic: windowMagic, Name: "outlierd window", Newest: WindowSnapshotFormat, MaxPayload: maxSnapshotPayload}

// windowState is the global window as a save copies it (and a start reads it back).
type windowState struct {
	features []string
	capacity int
	pushed   uint64
	topic    string
	// cols and sds (nil: none) are column-major, oldest first; parts, offs, times (nil: none),
	// sig and warm the ring's, in the same order.
	cols, sds [][]float32
	parts     []int32
	offs      []int64
	times     []int64
	sig, warm []bool
	// blind (nil: none kept) marks the significant records marked by a model blind to a cyclic
	// pair, not re-judged yet (cycles_rejudge.go).
	blind []bool
	// The build triggers (buildState): the serving model's version (0: none), the records since
	// the last build and recalibration, when the last build started.
	version              uint64
	sinceLast, sinceRank int
	lastBuild            time.Time
}

// held is the number of records the state holds.
func (w *windowState) held() int { return len(w.parts) }

// windowCopy copies the stage's window for a save (the next batch changes it), on the stage's
// goroutine: nil when it holds no record. At 1,000,000 records of 20 features about 93 MB
// (docs/BENCHMARKS.md §13.2.10). The records of the batches in flight (overlap.go: pushed, their
// verdicts, and so their significance marks, not decided yet; a periodic save's, a stop's has
// none) are left out, the newest of the window: after a crash they are read again (pushed
// afresh, marked by their verdicts then) or, committed after the save, missing, never in the
// references unmarked.
func (s *Stage) windowCopy() *windowState {
	r := s.recs
	cut := r.pushed // the stream index of the oldest record in flight
	for _, sc := range s.flight {
		if f, ok := s.pending[sc.b]; ok {
			cut = min(cut, f)
		}
	}
	undecided := int(r.pushed - cut)
	n := r.held() - undecided
	if n <= 0 || s.win.Len() != r.held() {
		return nil
	}
	w := &windowState{features: s.features, capacity: s.cfg.Window, pushed: cut, topic: r.topic,
		sinceLast: max(0, s.builds.sinceLast-undecided), sinceRank: max(0, s.builds.sinceRank-undecided),
		lastBuild: s.builds.lastBuild}
	w.sig, w.warm = r.marks(r.sig, r.held())[:n], r.marks(r.warm, r.held())[:n]
	w.cols, w.sds = s.win.Snapshot()
	w.cols, w.sds = sliceRows(w.cols, 0, n), sliceRows(w.sds, 0, n)
	lo, hi := r.runs(r.held())
	w.parts = slices.Concat(r.parts[lo[0]:lo[1]], r.parts[hi[0]:hi[1]])[:n]
	w.offs = slices.Concat(r.offs[lo[0]:lo[1]], r.offs[hi[0]:hi[1]])[:n]
	if r.times != nil {
		w.times = slices.Concat(r.times[lo[0]:lo[1]], r.times[hi[0]:hi[1]])[:n]
	}
	if r.blind != nil {
		w.blind = r.marks(r.blind, r.held())[:n]
	}
	if s.model != nil {
		w.version = s.model.Version
	}
	return w
}

// winPiece is how many values writeWindowPayload encodes between two writes (64 KiB of a
// column): a save holds that much of the encoding, not the payload, and looks at its context
// between pieces.
const winPiece = 16 << 10

// payloadLen is the length of w's payload in the format above.
func (w *windowState) payloadLen() uint64 {
	n := 4 + 4 + 3*8 + 4 + uint64(len(w.topic)) + 4*8 // (dims, flags, names below, capacity, pushed, held, topic, triggers)
	for _, f := range w.features {
		n += 4 + uint64(len(f))
	}
	return n + uint64(w.held())*winRecordBytes(len(w.features), w.flags())
}

// flags is w's payload flags.
func (w *windowState) flags() uint32 {
	var flags uint32
	if w.sds != nil {
		flags |= winFlagSDs
	}
	if w.times != nil {
		flags |= winFlagTimes
	}
	return flags
}

// winRecordBytes is the bytes a record takes in a payload of dims features under flags.
func winRecordBytes(dims int, flags uint32) uint64 {
	per := 4*uint64(dims) + 4 + 8 + 1 // (columns, partition, offset, marks)
	if flags&winFlagSDs != 0 {
		per += 4 * uint64(dims)
	}
	if flags&winFlagTimes != 0 {
		per += 8
	}
	return per
}

// writeWindowPayload writes w's payload in the format above to wr, winPiece values at a time
// (a save's file, or a digest: keyed_unchanged.go); ctx ends it between two pieces, with
// ctx.Err().
func writeWindowPayload(ctx context.Context, wr io.Writer, w *windowState) error {
	return writeWindowPieces(ctx, wr, w, leHost)
}

// leHost says whether this machine stores numbers little-endian, as the file does: a column's
// memory is then its encoding, copied as it is.
var leHost = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// writeWindowPieces is writeWindowPayload, the columns, partitions, offsets and event times
// copied from memory when raw (a little-endian host: 1,000,000 x 20 in 7-11 ms, not 47-104,
// docs/BENCHMARKS.md §13.2.11), encoded value by value otherwise (the same bytes:
// TestWindowPayloadRawIsEncoded).
func writeWindowPieces(ctx context.Context, wr io.Writer, w *windowState, raw bool) error {
	var e sealed.Encoder
	e.Grow(8 * winPiece) // (the largest piece: offsets or event times)
	out := func() error {
		if _, err := wr.Write(e.Payload()); err != nil {
			return err
		}
		e.Reset()
		return ctx.Err()
	}
	e.U32(uint32(len(w.features)))
	e.U32(w.flags())
	for _, f := range w.features {
		e.Text(f)
	}
	e.U64(uint64(w.capacity))
	e.U64(w.pushed)
	e.U64(uint64(w.held()))
	e.Text(w.topic)
	e.U64(w.version)
	e.U64(uint64(w.sinceLast))
	e.U64(uint64(w.sinceRank))
	e.U64(uint64(w.lastBuild.UnixNano()))
	if err := out(); err != nil {
		return err
	}
	for _, cols := range [][][]float32{w.cols, w.sds} {
		for _, c := range cols {
			if err := inPieces(&e, c, raw, (*sealed.Encoder).F32s, out); err != nil {
				return err
			}
		}
	}
	if err := inPieces(&e, w.parts, raw, func(e *sealed.Encoder, v []int32) {
		for _, p := range v {
			e.U32(uint32(p))
		}
	}, out); err != nil {
		return err
	}
	for _, v := range [][]int64{w.offs, w.times} { // (offsets, event times)
		if err := inPieces(&e, v, raw, func(e *sealed.Encoder, v []int64) {
			for _, x := range v {
				e.U64(uint64(x))
			}
		}, out); err != nil {
			return err
		}
	}
	marks := make([]byte, min(winPiece, w.held()))
	for lo := 0; lo < w.held(); lo += winPiece {
		m := marks[:min(winPiece, w.held()-lo)]
		for i := range m {
			m[i] = 0
			if w.sig[lo+i] {
				m[i] |= winMarkSig
			}
			if w.warm[lo+i] {
				m[i] |= winMarkWarm
			}
			if w.blind != nil && w.blind[lo+i] {
				m[i] |= winMarkBlind
			}
		}
		e.Raw(m)
		if err := out(); err != nil {
			return err
		}
	}
	return nil
}

// windowDigest is the digest (keyed_unchanged.go) of w's payload, that is of the bytes
// between a window file's header and its checksum, under seed: maphash.Bytes of a file's
// payload is the same number. ctx ends it as it ends writeWindowPayload.
func windowDigest(ctx context.Context, seed maphash.Seed, w *windowState) (uint64, error) {
	var h maphash.Hash
	h.SetSeed(seed)
	err := writeWindowPayload(ctx, &h, w)
	return h.Sum64(), err
}

// inPieces encodes v winPiece values at a time, each piece written out by out: its memory when
// raw (a little-endian host's: each value's bits, little-endian), else by put.
func inPieces[T int32 | int64 | float32](e *sealed.Encoder, v []T, raw bool, put func(*sealed.Encoder, []T), out func() error) error {
	for lo := 0; lo < len(v); lo += winPiece {
		p := v[lo:min(len(v), lo+winPiece)]
		if raw {
			e.Raw(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(p))), len(p)*int(unsafe.Sizeof(p[0]))))
		} else {
			put(e, p)
		}
		if err := out(); err != nil {
			return err
		}
	}
	return nil
}

// decodeWindow reads a payload of the format above. A header the payload cannot hold, a count
// out of its bounds or a mark with an unknown bit is refused (ErrSnapshotFormat), before any
// allocation of the records.
func decodeWindow(p []byte) (*windowState, error) {
	d := sealed.NewDecoder(p)
	dims, flags := d.U32("dims"), d.U32("flags")
	if d.Err() != nil {
		return nil, sealedErr(d.Err())
	}
	if dims < 1 || dims > maxSnapshotDims {
		return nil, snapErr("window: dims %d out of range [1, %d]", dims, maxSnapshotDims)
	}
	if flags&^(winFlagSDs|winFlagTimes) != 0 {
		return nil, snapErr("window: unknown flags %#x", flags)
	}
	w := &windowState{features: make([]string, dims)}
	for j := range w.features {
		w.features[j] = d.Text(maxSnapshotName, fmt.Sprintf("window feature %d name", j))
	}
	capacity, pushed, held := d.U64("window capacity"), d.U64("window pushed"), d.U64("window held")
	w.topic = d.Text(maxSnapshotName, "window topic")
	w.version = d.U64("model version")
	sinceLast, sinceRank, last := d.U64("since build"), d.U64("since recalibration"), int64(d.U64("last build"))
	if d.Err() != nil {
		return nil, sealedErr(d.Err())
	}
	switch {
	case capacity < 1 || capacity > maxWindow:
		return nil, snapErr("window: capacity %d out of range [1, %d]", capacity, maxWindow)
	case held < 1 || held > capacity || held > pushed:
		return nil, snapErr("window: %d records held in a window of %d, %d pushed", held, capacity, pushed)
	case sinceLast > pushed || sinceRank > pushed:
		return nil, snapErr("window: %d and %d records since the last build and recalibration, %d pushed", sinceLast, sinceRank, pushed)
	}
	per := winRecordBytes(int(dims), flags)
	if held > math.MaxUint64/per || held*per != uint64(d.Left()) {
		return nil, snapErr("window: %d records of %d features (flags %#x) cannot be the %d bytes left", held, dims, flags, d.Left())
	}
	w.capacity, w.pushed, w.sinceLast, w.sinceRank = int(capacity), pushed, int(sinceLast), int(sinceRank)
	w.lastBuild = time.Unix(0, last)
	n := int(held)
	read := func(what string) [][]float32 {
		cols := make([][]float32, dims)
		for j := range cols {
			cols[j] = d.F32s(held, what)
		}
		return cols
	}
	w.cols = read("window columns")
	if flags&winFlagSDs != 0 {
		w.sds = read("window uncertainty columns")
	}
	w.parts, w.offs = make([]int32, n), make([]int64, n)
	for i := range w.parts {
		w.parts[i] = int32(d.U32("partition"))
	}
	for i := range w.offs {
		w.offs[i] = int64(d.U64("offset"))
	}
	if flags&winFlagTimes != 0 {
		w.times = make([]int64, n)
		for i := range w.times {
			w.times[i] = int64(d.U64("event time"))
		}
	}
	marks := d.Take(held, "marks")
	if d.Err() != nil {
		return nil, sealedErr(d.Err())
	}
	w.sig, w.warm = make([]bool, n), make([]bool, n)
	for i, m := range marks {
		if m&^(winMarkSig|winMarkWarm|winMarkBlind) != 0 {
			return nil, snapErr("window: record %d has marks %#x", i, m)
		}
		w.sig[i], w.warm[i] = m&winMarkSig != 0, m&winMarkWarm != 0
		if m&winMarkBlind != 0 {
			if w.blind == nil {
				w.blind = make([]bool, n)
			}
			w.blind[i] = true
		}
	}
	return w, nil
}

// fits says why w cannot be the window of a stream of features (with uncertainty columns when
// withSD), or nil: the same features in the same order, as a model snapshot's (Model.Fits), and
// the uncertainty columns when the stream has them (a window without them cannot be built from
// under density's uncertainty; one with them, of a stream that has none now, would be built
// from values the stream no longer reads).
func (w *windowState) fits(features []string, withSD bool) error {
	if !slices.Equal(w.features, features) {
		return fmt.Errorf("%w: a window of features [%s], the stream has [%s]", ErrSnapshotMismatch,
			strings.Join(w.features, " "), strings.Join(features, " "))
	}
	if (w.sds != nil) != withSD {
		return fmt.Errorf("%w: a window with uncertainty columns %v, the stream's %v", ErrSnapshotMismatch, w.sds != nil, withSD)
	}
	return nil
}

// writeWindow saves w to d (window-<sequence>.osnap), as the keys' state is saved: ctx (the
// stop's deadline) ends the digest, the encoding, the write and the fsyncs, the file being
// written removed and the last complete one standing (cutSave logs it). The payload is encoded
// as it is written (sealed.Format.WriteStream): a save holds the window's copy and pieces of
// its encoding, not the copy and the whole encoding. Nothing is written when the newest window
// file holds the same payload (keyed_unchanged.go: its digest, of the bytes the file would
// hold); stop: a stop's save.
func (s *Stage) writeWindow(ctx context.Context, d *SnapshotDir, w *windowState, stop bool) {
	start := time.Now()
	sum, err := windowDigest(ctx, s.ext.seed, w)
	if err == nil {
		if file, same := s.ext.saved.unchanged(&s.ext.saved.window, sum); same {
			s.notSavedAgain("window", file, stop)
			return
		}
	}
	var path string
	if err == nil {
		path, err = d.saveAs(ctx, windowPrefix, &d.nextWindow, func(wr io.Writer) error {
			return windowSnapshotFile.WriteStream(ctx, wr, WindowSnapshotFormat, w.payloadLen(), func(pw io.Writer) error {
				return writeWindowPayload(ctx, pw, w)
			})
		})
	}
	if err != nil && cutBy(ctx, err) {
		s.cutSave("window", 0)
		return
	}
	if err != nil {
		s.deps.Log.Error().Err(err).Int("records", w.held()).Msg("window snapshot failed; a restart would rebuild from the records read after it")
		return
	}
	s.ext.saved.set(&s.ext.saved.window, sum, path)
	s.deps.Log.Debug().Str("file", path).Int("records", w.held()).Uint64("bytes", w.payloadLen()).
		Dur("took", time.Since(start)).Msg("window snapshot written")
}
