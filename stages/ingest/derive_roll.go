package ingest

import "math/bits"

// What the rolling kinds with exact sums share (mean, derive_mean.go; std, derive_std.go): a
// series' window of the last `last` values (a ring, with uncertainty their sds' ring beside it),
// the window's exact sums (derive_wide.go), and, for std and a trimmed mean, its extremes
// (stdTop); taking a record's value in, and the sums of a full window less its two farthest
// values. Each kind then divides its own sums (mean: sum x / m; std: from sum x and sum x^2).

// wideSums is a window's exact sums (derive_wide.go), contiguous in w as a series holds them
// (meanWideLen, stdWideLen): sum x; with std sum x^2 (q); with uncertainty (sd) sum sd^2 (a), and
// with std sum x sd^2 and sum x^2 sd^2 (b, c).
type wideSums struct {
	w       []uint64
	std, sd bool
}

func (t wideSums) s() []uint64 { return t.w[:wideS] }
func (t wideSums) q() []uint64 { return t.w[wideS : wideS+wideQ] }
func (t wideSums) a() []uint64 {
	o := wideS
	if t.std {
		o += wideQ
	}
	return t.w[o : o+wideQ]
}
func (t wideSums) b() []uint64 { return t.w[wideS+2*wideQ : wideS+2*wideQ+wideB] }
func (t wideSums) c() []uint64 { return t.w[wideS+2*wideQ+wideB : wideS+2*wideQ+wideB+wideC] }

// add adds the value x with sd e to the sums, or removes it (remove): exactly.
func (t wideSums) add(x, e float32, remove bool) {
	mx, sx, neg := f32Fixed(x)
	wideAdd64(t.s(), mx, sx, neg != remove)
	if t.std {
		wideAdd64(t.q(), mx*mx, 2*sx, remove)
	}
	if !t.sd {
		return
	}
	me, se, _ := f32Fixed(e) // squared: its sign does not matter
	e2 := me * me
	wideAdd64(t.a(), e2, 2*se, remove)
	if !t.std {
		return
	}
	hi, lo := bits.Mul64(mx, e2)
	wideAddSigned(t.b(), hi, lo, sx+2*se, neg != remove)
	hi, lo = bits.Mul64(mx*mx, e2)
	wideAddSigned(t.c(), hi, lo, 2*sx+2*se, remove)
}

// keptIn is a copy of u in the Deriver's scratch: the sums of the values a window keeps (u's
// own are the series').
func (sc *stdScratch) keptIn(u wideSums) wideSums {
	return wideSums{w: sc.kept[:copy(sc.kept[:], u.w)], std: u.std, sd: u.sd}
}

// window is a rolling column's window in a series after its record's value was taken in: the
// values' ring (and with uncertainty the sds'; nil without), n the values it holds and p the
// oldest's index (where the next is written).
type window struct {
	ring, sds []float32
	n, p      int
}

// sd is the sd of the window's value i (0 without uncertainty).
func (w *window) sd(i int) float32 {
	if w.sds == nil {
		return 0
	}
	return w.sds[i]
}

// window is op's window in the series s as it is (k: op's index among d.ops), before roll.
func (d *Deriver) window(op *deriveOp, s *series, k int) window {
	w := window{ring: s.mring[op.slot : op.slot+op.last], n: int(s.fill[k]), p: int(s.pos[k])}
	if d.withSD {
		half := len(s.mring) / 2 // (the sds' rings start here)
		w.sds = s.mring[half+op.slot : half+op.slot+op.last]
	}
	return w
}

// roll takes the record's value of op's source (and its sd) into op's window w of the series s
// (k: op's index among d.ops; w as window gives it, then as after): once the window is full its
// oldest value leaves the exact sums, the new one takes its place in the ring and joins the sums,
// and with agg (std's extremes; nil: none) the extremes of the values since the ring's wrap
// follow, and at a wrap its suffixes'.
func (d *Deriver) roll(op *deriveOp, s *series, k int, w *window, sums wideSums, agg []int32) {
	x := d.out.Values[op.src]
	var e float32
	if w.sds != nil {
		e = d.out.SD[op.src]
	}
	if w.n == op.last { // the oldest value leaves
		sums.add(w.ring[w.p], w.sd(w.p), true)
	}
	w.ring[w.p] = x
	if w.sds != nil {
		w.sds[w.p] = e
	}
	sums.add(x, e, false)
	if agg != nil {
		since := extOf(w.ring, (*stdTop)(agg[:4]))
		since.put(int32(w.p+1), x)
		*(*stdTop)(agg[:4]) = since.id
	}
	w.n, w.p = min(w.n+1, op.last), (w.p+1)%op.last
	s.fill[k], s.pos[k] = int32(w.n), int32(w.p)
	if w.p == 0 && agg != nil { // a wrap: the suffixes' extremes of the pass just written
		stdSuffixes(w.ring, agg)
	}
}

// leaveOutFarthest removes from kept (a full window's sums, of its op.last values) its two values
// farthest from their mean (stdFarthest; sums the window's own, agg its extremes), and returns how
// many it keeps.
func (d *Deriver) leaveOutFarthest(w *window, sums, kept wideSums, agg []int32) int {
	for _, i := range d.stdFarthest(w.ring, agg, sums.s(), w.p) {
		kept.add(w.ring[i], w.sd(i), true)
	}
	return w.n - stdLeftOut
}
