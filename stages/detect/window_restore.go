package detect

import (
	"cmp"
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"time"
)

// A start from detect.state_dir puts the saved global window back (window_state.go) before it
// installs the model snapshot: the followers' counts (the hypercube's) are then recounted over
// it, and the model serves with the window it was built from.
//
// The build triggers: when the model snapshot that loads is the one that served at the window's
// save (its version), the records since the last build and recalibration and the last build's
// start are the saved ones, so that refresh_records, recalibrate_records and refresh_interval
// fire as they would have without the stop (refresh_interval counts the time the instance was
// down: a restart after it rebuilds at its first batch). Any other model (an older snapshot: the
// newest was cut or failed; or none) is followed by a build from the restored window at the
// first batch. Without a window file (a state_dir of a release before it, a scorer's, a first
// start) the snapshot's model serves until min_records records arrived, as before.
//
// After a crash the window is the last periodic save's, and Kafka gives back the records after
// the last commit: those the window holds already (the commit lagged the save) are read again,
// those committed after the save are not (they are missing from the window: nothing reads them
// again). A record read again is a copy of one the window holds (at-least-once delivers it
// twice, the window must count it once): its saved copy is left out of the references (the
// significance mark) and the copy read again, scored again by the same model, stands with its
// new marks (rereadGuard). Both occupy the window until they fall out, so the window holds up to
// those records fewer distinct ones meanwhile. A graceful stop saves after its final commit:
// nothing it saved is read again (but the records held for a first model under
// before_model: hold, uncommitted, which the guard catches as after a crash).

// rereadGuard recognises, after a start from a saved window, the records read again that the
// window holds already, by identity (topic, partition, offset): per partition the saved records'
// offsets (ascending) and their stream indices. A partition's guard ends at its first record
// past the newest it saved (Kafka delivers a partition in offset order), the whole guard once
// every partition's did, or once the saved records fell out of the window (until).
type rereadGuard struct {
	topic string
	parts map[int32]*rereadPart
	until uint64 // the stream index at which the last saved record falls out
	left  int    // saved copies left out so far
	older bool   // a record older than the saved ones of its partition was read (warned once)
}

type rereadPart struct {
	offs []int64
	idx  []uint64
	hi   int64
}

// newRereadGuard is the guard of the records the ring holds, nil when it holds none.
func newRereadGuard(r *windowRing) *rereadGuard {
	n := r.held()
	if n == 0 {
		return nil
	}
	g := &rereadGuard{topic: r.topic, parts: map[int32]*rereadPart{}, until: r.pushed + uint64(len(r.parts))}
	c := uint64(len(r.parts))
	for i := r.pushed - uint64(n); i < r.pushed; i++ {
		p, o := r.parts[i%c], r.offs[i%c]
		rp := g.parts[p]
		if rp == nil {
			rp = &rereadPart{hi: o}
			g.parts[p] = rp
		}
		rp.offs, rp.idx, rp.hi = append(rp.offs, o), append(rp.idx, i), max(rp.hi, o)
	}
	for _, rp := range g.parts {
		if !slices.IsSorted(rp.offs) { // (a partition that moved away and back, or a copy held twice)
			perm := make([]int, len(rp.offs))
			for k := range perm {
				perm[k] = k
			}
			slices.SortStableFunc(perm, func(a, b int) int { return cmp.Compare(rp.offs[a], rp.offs[b]) })
			offs, idx := make([]int64, len(perm)), make([]uint64, len(perm))
			for k, j := range perm {
				offs[k], idx[k] = rp.offs[j], rp.idx[j]
			}
			rp.offs, rp.idx = offs, idx
		}
	}
	return g
}

// leaveOutReread leaves out of the references the saved copies of the records of a push (their
// topic, partitions and offsets) that the restored window holds already; it ends the guard when
// nothing is left for it to catch.
func (s *Stage) leaveOutReread(topic string, parts []int32, offs []int64) {
	g := s.ext.reread
	if topic == g.topic {
		for i, p := range parts {
			rp := g.parts[p]
			if rp == nil {
				continue
			}
			o := offs[i]
			if o > rp.hi {
				delete(g.parts, p)
				continue
			}
			if o < rp.offs[0] && !g.older {
				g.older = true
				s.warnOlderThanWindow(p, o, rp.offs[0])
			}
			k, _ := slices.BinarySearch(rp.offs, o)
			for ; k < len(rp.offs) && rp.offs[k] == o; k++ {
				s.recs.setSignificant(rp.idx[k])
				g.left++
			}
		}
	}
	if len(g.parts) == 0 || s.recs.pushed >= g.until {
		if g.left > 0 {
			s.deps.Log.Info().Int("records", g.left).Msg("records read again after the restart (after the window's last save, before a commit) found in the restored window: their saved copies are left out of the next builds, the copies read again stand")
		}
		s.ext.reread = nil
	}
}

// loadWindow puts back the newest window file of state_dir that reads back whole and fits the
// stream (windowState.fits), the others logged and skipped (one of other columns ends the search:
// the older ones are older still), and returns it (nil: none). A scorer keeps no window.
func (s *Stage) loadWindow(ctx context.Context) (*windowState, error) {
	d := s.ext.snaps
	if d == nil || s.deps.Role == RoleScorer {
		return nil, nil
	}
	files, err := d.list(windowPrefix)
	if err != nil {
		return nil, err
	}
	for k, path := range files {
		var w *windowState
		var sum uint64
		err := readSealedFile(ctx, path, windowSnapshotFile, func(format uint32, p []byte) (err error) {
			if w, err = decodeWindow(p); err == nil {
				err = w.fits(s.features, s.withSD)
			}
			if err == nil && format == WindowSnapshotFormat && k == 0 {
				sum = maphash.Bytes(s.ext.seed, p)
			}
			return err
		})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, ErrSnapshotMismatch) {
			s.deps.Log.Warn().Err(err).Str("file", path).Msg("window snapshot skipped, and the older ones: the window starts empty")
			return nil, nil
		}
		if err != nil {
			s.deps.Log.Warn().Err(err).Str("file", path).Msg("window snapshot skipped")
			continue
		}
		if err := s.restoreWindow(w); err != nil {
			return nil, err
		}
		if k == 0 && sum != 0 { // (the newest file, as it holds it: noteLoaded checks that the rest of the start left the window so)
			s.ext.saved.set(&s.ext.saved.window, sum, path)
		}
		ev := s.deps.Log.Info().Str("file", path).Int("records", s.win.Len()).Uint64("saved_with_model", w.version)
		if w.capacity != s.cfg.Window {
			ev = ev.Int("saved_window", w.capacity).Int("saved_records", w.held()).Int("window", s.cfg.Window)
		}
		ev.Msg("window loaded from snapshot: the next build reads it")
		return w, nil
	}
	return nil, nil
}

// restoreWindow fills the stage's empty window and ring with w's newest records, as many as
// the window holds now (detect.window shrank: the oldest are dropped; grew: all kept, the window
// fills on), under their stream indices, and arms the guard of the records read again.
func (s *Stage) restoreWindow(w *windowState) error {
	n := w.held()
	keep := min(n, s.cfg.Window)
	from := n - keep
	if err := s.win.Push(sliceRows(w.cols, from, n), sliceRows(w.sds, from, n), nil); err != nil {
		return err
	}
	r := s.recs
	r.pushed = w.pushed - uint64(keep)
	first := r.push(w.topic, w.parts[from:], w.offs[from:], w.warm[from:], nil)
	c := uint64(len(r.parts))
	for i := range keep {
		if w.sig[from+i] {
			r.setSignificant(first + uint64(i))
		}
		if w.blind != nil && w.blind[from+i] {
			r.setBlind(first + uint64(i)) // (re-judged once a model reads the pair: cycles_rejudge.go)
		}
		if r.times != nil {
			t := int64(noTime)
			if w.times != nil {
				t = w.times[from+i]
			}
			r.times[(first+uint64(i))%c] = t
		}
	}
	s.ext.reread = newRereadGuard(r)
	return nil
}

// resumeTriggers sets the build triggers after a start that restored w and installed the model
// snapshot m (nil: none): w's own when m served at w's save, else a build is due at once.
func (s *Stage) resumeTriggers(w *windowState, m *Model) {
	if w == nil || m == nil || w.version != m.Version {
		s.ext.rebuildDue = m != nil // (none: the first build starts once the window holds min_records)
		return
	}
	s.builds.sinceLast, s.builds.sinceRank, s.builds.lastBuild = w.sinceLast, w.sinceRank, w.lastBuild
	if w.lastBuild.After(time.Now()) { // (a clock set back since: count refresh_interval from now)
		s.builds.lastBuild = time.Now()
	}
	s.ext.rebuildDue = false
}

// warnOlderThanWindow says, once a start, that a record older than every saved record of its
// partition was read into the restored window: the group read the partition from before the
// window (a group without commits under ingest.start_offset earliest, as a builder's first
// start on the state_dir of a role-all run; offsets reset). Such records enter the window as new
// ones, behind the newer saved records, so the models built until the stream reaches the saved
// ones are built from older records, their window's times out of order (newuser31: a builder
// read 150,000 records already scored from offset 0 and published about 70 such models, the
// first with window_span 0, and nothing said so).
func (s *Stage) warnOlderThanWindow(partition int32, offset, oldest int64) {
	s.deps.Log.Warn().Int32("partition", partition).Int64("offset", offset).Int64("window_oldest_offset", oldest).
		Msg("records older than the restored window are being read into it: the group reads this partition from before the window (no committed offsets under ingest.start_offset earliest, as a builder's first start on a role-all run's state_dir, or offsets reset); until the stream reaches the window's records, models are built from older records")
}
