package detect

// A key's window and its rolling columns' warm-up (keywarm27; docs/BENCHMARKS.md §12.62).
//
// A record whose rolling column (ingest.derive's mean, std or robust_z over `last` values) was still
// warming when it came (a new key's first `last` - 1 records, every key's again after a restart,
// a rebalance or the derive's eviction of its series) is scored at its key's model's centre
// (warmup.go), and pushed into the key's window with its derived value, as every record is. The
// global model leaves such records out of its reference (windowRing.leaveOutWarming); a key's
// model did not, so every key's first model (keys.min_records 30 against a `last` of 32 or more)
// was built from partial windows alone: a std of 0 and of near 0 among them, read as the key's
// normal, and the key's next full-window values far out from it. Now a key's window remembers
// which of its records were warming (warmRing, in step with its rings) and each of its builds,
// on the cores or batched with the device's calibrations (keyBuild.window, buildKeyModelGeneral:
// the device's kernels see only R, which then holds none), leaves them out, unconditionally: the
// outcasts' floor (outcastFloor) guards a key's model against its own verdicts, and a warming
// value is no verdict but a partial statistic. A key's first build waits until its window holds
// keys.min_records records that were not warming, and a rebuild waits while it holds fewer (the
// key's previous model keeps scoring): its model is never built from fewer than min_records
// records (TestKeyBuildLeavesOutWarming). A key that never had a warming record carries no ring
// (a nil pointer) and builds exactly as before.

// warmRing marks a key's window's warming records (a flagRing in step with keyState.sig) and
// counts them.
type warmRing struct {
	ring  flagRing
	count int
}

// warmRingBytes is what a key's ring of warming marks takes at a window of w records: its bits
// (a flagRing's words) and the ring's 40 bytes, each allocation at the allocator's class (48
// bytes for the ring; the bits' 8-byte words fill theirs at a window that is a multiple of 64
// records, else up to one class more, not counted). keyBytes leaves it out: a key holds it only
// once a record of its series was warming (every key of a stream with a rolling column).
func warmRingBytes(w int) int64 { return int64(8*((w+63)/64)) + 48 }

// clone is a copy of w (nil for nil).
func (w *warmRing) clone() *warmRing {
	if w == nil {
		return nil
	}
	return &warmRing{ring: w.ring.clone(), count: w.count}
}

// noteWarming sets the window's place at's warming mark to v (the ring made at the key's first
// warming record), keeping the count.
func (st *keyState) noteWarming(at int, v bool) {
	w := st.warming
	if w == nil {
		if !v {
			return
		}
		w = &warmRing{ring: newFlagRing(st.sig.len())}
		st.warming = w
	}
	if was := w.ring.at(at); was != v {
		w.ring.set(at, v)
		if v {
			w.count++
		} else {
			w.count--
		}
	}
}

// warmingCount is how many of the window's records were warming.
func (st *keyState) warmingCount() int {
	if st.warming == nil {
		return 0
	}
	return st.warming.count
}

// warmingAt reports whether the window's place i holds a record that was warming.
func (st *keyState) warmingAt(i int) bool {
	return st.warming != nil && st.warming.ring.at(i)
}

// at reports whether any column of record i is warming (false without a warming record in the
// batch: w nil).
func (w *warmCells) at(i int) bool {
	if w == nil {
		return false
	}
	for _, a := range w.cols {
		if a != nil && a.IsNull(i) {
			return true
		}
	}
	return false
}

// dropWarming removes from kb.flat's rows records (d columns of rows, oldest first from the
// window's place first) those that were warming, sets kb.cols to the rest's columns and kb.bits
// to their significance, and returns how many remain. Compacted in place as window compacts
// its outcasts.
func (kb *keyBuild) dropWarming(st *keyState, first, rows int) int {
	w, d := st.sig.len(), len(st.cols)
	n := rows - st.warmingCount()
	kb.bits = grow(kb.bits, rows)
	t := 0
	for i := range rows {
		if p := (first + i) % w; !st.warmingAt(p) {
			kb.bits[t] = st.sig.at(p)
			t++
		}
	}
	kb.bits = kb.bits[:n]
	for j := range d {
		src, dst := kb.flat[j*rows:(j+1)*rows], kb.flat[j*n:(j+1)*n:(j+1)*n]
		t := 0
		for i, v := range src {
			if !st.warmingAt((first + i) % w) {
				dst[t] = v
				t++
			}
		}
		kb.cols[j] = dst
	}
	return n
}
