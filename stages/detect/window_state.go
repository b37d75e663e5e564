package detect

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

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
//	         times, ms; math.MinInt64: none), held x u8 (bit 0: significant, bit 1: warming;
//	         others 0)
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
	if s.model != nil {
		w.version = s.model.Version
	}
	return w
}

// encodeWindowContext is w's payload in the format above; ctx ends it between columns.
func encodeWindowContext(ctx context.Context, w *windowState) ([]byte, error) {
	n, dims := w.held(), len(w.features)
	var e sealed.Encoder
	e.U32(uint32(dims))
	var flags uint32
	if w.sds != nil {
		flags |= winFlagSDs
	}
	if w.times != nil {
		flags |= winFlagTimes
	}
	e.U32(flags)
	for _, f := range w.features {
		e.Text(f)
	}
	e.U64(uint64(w.capacity))
	e.U64(w.pushed)
	e.U64(uint64(n))
	e.Text(w.topic)
	e.U64(w.version)
	e.U64(uint64(w.sinceLast))
	e.U64(uint64(w.sinceRank))
	e.U64(uint64(w.lastBuild.UnixNano()))
	for _, cols := range [][][]float32{w.cols, w.sds} {
		for _, c := range cols {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			e.F32s(c)
		}
	}
	for _, p := range w.parts {
		e.U32(uint32(p))
	}
	for _, o := range w.offs {
		e.U64(uint64(o))
	}
	for _, t := range w.times {
		e.U64(uint64(t))
	}
	marks := make([]byte, n)
	for i := range marks {
		if w.sig[i] {
			marks[i] |= winMarkSig
		}
		if w.warm[i] {
			marks[i] |= winMarkWarm
		}
	}
	e.Raw(marks)
	return e.Payload(), nil
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
	per := 4*uint64(dims) + 4 + 8 + 1 // (columns, partition, offset, marks)
	if flags&winFlagSDs != 0 {
		per += 4 * uint64(dims)
	}
	if flags&winFlagTimes != 0 {
		per += 8
	}
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
		if m&^(winMarkSig|winMarkWarm) != 0 {
			return nil, snapErr("window: record %d has marks %#x", i, m)
		}
		w.sig[i], w.warm[i] = m&winMarkSig != 0, m&winMarkWarm != 0
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
// stop's deadline) ends the encoding, the write and the fsyncs, the file being written removed
// and the last complete one standing (cutSave logs it).
func (s *Stage) writeWindow(ctx context.Context, d *SnapshotDir, w *windowState) {
	start := time.Now()
	payload, err := encodeWindowContext(ctx, w)
	var path string
	if err == nil {
		path, err = d.saveAs(ctx, windowPrefix, &d.nextWindow, func(wr io.Writer) error {
			return windowSnapshotFile.WriteContext(ctx, wr, WindowSnapshotFormat, payload)
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
	s.deps.Log.Debug().Str("file", path).Int("records", w.held()).Int("bytes", len(payload)).
		Dur("took", time.Since(start)).Msg("window snapshot written")
}
