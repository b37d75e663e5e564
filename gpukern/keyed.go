package gpukern

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Models per key (keyed.cu; issue 21 item 2): every warm key's ranking model stays resident in a
// slot of a KeyedStore, and a batch's records, grouped by key, are scored against their own key's
// model in one launch. The raw scores are the CPU's bit for bit: the tail score of rank.Tail.Score
// and the k-NN weight of solvingset.KNNWeights (KeyedScoreReference is the CPU twin the parity
// tests hold the kernel to, and it to those two).

// KeyedMaxDims is the most features the keyed kernels take (keyed.cu: KEYED_MAXD).
const KeyedMaxDims = 64

// keyedBlock is keyed_score's threads per block (keyed.cu: KEYED_BLOCK): 8 warps, 8 chunks.
const keyedBlock = 256

// KeyedMaxK is the largest k the keyed kernels select (the 64-slot register queue).
const KeyedMaxK = 64

// KeyedShape is the shape of every slot of a store: Dims features, at most Window values per
// feature in the sorted tails and Window points in R.
type KeyedShape struct {
	Dims, Window int
}

// SlotBytes is the device memory one key's model takes (keyed.cu's slot layout, padded to 16).
func (s KeyedShape) SlotBytes() int {
	b := 24*s.Dims + 16 + 8*s.Dims*s.Window
	return (b + 15) &^ 15
}

// Check reports why the kernels cannot take the shape ("" when they can).
func (s KeyedShape) Check() string {
	switch {
	case s.Dims < 1 || s.Dims > KeyedMaxDims:
		return fmt.Sprintf("%d features (the keyed kernels take 1..%d)", s.Dims, KeyedMaxDims)
	case s.Window < 2 || s.Window > 1<<20:
		return fmt.Sprintf("a window of %d records (the keyed kernels take 2..%d)", s.Window, 1<<20)
	}
	return ""
}

// KeyedModel is one key's ranking model as the kernels read it: the tail score's distributions
// (rank.Tail's Sorted and Spread) and the distance score's window sample R with its space
// (detect's Ranker: Ref.Points, Ref.K, Center, Unit). Sorted's columns have one length n, Points'
// one length m, both at most the shape's Window; 1 <= K <= KeyedMaxK.
type KeyedModel struct {
	Sorted       [][]float32
	Spread       []float64
	Points       [][]float32
	Center, Unit []float64
	K            int
}

// check reports why m does not fit shape s (nil when it does).
func (m *KeyedModel) check(s KeyedShape) error {
	if len(m.Sorted) != s.Dims || len(m.Points) != s.Dims || len(m.Spread) != s.Dims || len(m.Center) != s.Dims || len(m.Unit) != s.Dims {
		return fmt.Errorf("gpukern: keyed model of %d/%d/%d/%d/%d features, the store's are %d", len(m.Sorted), len(m.Points), len(m.Spread), len(m.Center), len(m.Unit), s.Dims)
	}
	n, p := len(m.Sorted[0]), len(m.Points[0])
	if n > s.Window || p > s.Window {
		return fmt.Errorf("gpukern: keyed model of %d values and %d points, the store's window is %d", n, p, s.Window)
	}
	for j := range s.Dims {
		if len(m.Sorted[j]) != n || len(m.Points[j]) != p {
			return fmt.Errorf("gpukern: keyed model's feature %d has %d values and %d points, feature 0 %d and %d", j, len(m.Sorted[j]), len(m.Points[j]), n, p)
		}
	}
	if m.K < 1 || m.K > KeyedMaxK {
		return fmt.Errorf("gpukern: keyed model's k = %d (the kernels take 1..%d)", m.K, KeyedMaxK)
	}
	return nil
}

// encode writes m into dst (SlotBytes bytes) in keyed.cu's slot layout.
func (m *KeyedModel) encode(s KeyedShape, dst []byte) {
	clear(dst)
	le := binary.LittleEndian
	d, w := s.Dims, s.Window
	for j := range d {
		le.PutUint64(dst[8*j:], math.Float64bits(m.Spread[j]))
		le.PutUint64(dst[8*(d+j):], math.Float64bits(m.Center[j]))
		le.PutUint64(dst[8*(2*d+j):], math.Float64bits(m.Unit[j]))
	}
	h := 24 * d
	le.PutUint32(dst[h:], uint32(len(m.Sorted[0])))
	le.PutUint32(dst[h+4:], uint32(len(m.Points[0])))
	le.PutUint32(dst[h+8:], uint32(m.K))
	f := h + 16
	for j := range d {
		for i, v := range m.Sorted[j] {
			le.PutUint32(dst[f+4*(j*w+i):], math.Float32bits(v))
		}
		for i, v := range m.Points[j] {
			le.PutUint32(dst[f+4*((d+j)*w+i):], math.Float32bits(v))
		}
	}
}

// KeyedLogs is the table of natural logarithms the kernels read, logs[c] = math.Log(c) for c =
// 0..window: the host's bits, so the tail score's surprisals are the CPU's.
func KeyedLogs(window int) []float64 {
	logs := make([]float64, window+1)
	for c := range logs {
		logs[c] = math.Log(float64(c))
	}
	return logs
}

// KeyedLimit bounds the distance space's coordinates, x' = clamp((x - center) / unit,
// +-KeyedLimit): detect's distanceLimit (a stage test holds them equal) and keyed.cu's
// KEYED_LIMIT, so that the kernel, its CPU twin here and the host's fallback in
// internal/accel clamp alike. Float32 squared distances of a few hundred features stay finite,
// and a record a million units out is already as far as any ranking needs.
const KeyedLimit = 1e6

// KeyedScoreReference is the CPU twin of keyed_score for one record x (finite values, one per
// feature): the tail score in nats and w_k(q, R), with host set where the tail score needs the
// host's log1p (then tail is not the score: the caller scores that record's tail itself). Same
// arithmetic, step for step, as the kernel (keyed.cu); logs is KeyedLogs of at least the model's n.
func KeyedScoreReference(m *KeyedModel, x []float32, logs []float64) (tail, dist float64, host bool) {
	d := len(m.Sorted)
	n := len(m.Sorted[0])
	lnN := logs[n]
	q := make([]float32, d)
	for j := range d {
		s, h := keyedSurprisal(m.Sorted[j], x[j], m.Spread[j], lnN, logs)
		tail += s
		host = host || h
		t := (float64(x[j]) - m.Center[j]) / m.Unit[j]
		if t > KeyedLimit {
			t = KeyedLimit
		} else if t < -KeyedLimit {
			t = -KeyedLimit
		}
		q[j] = float32(t)
	}
	mp := len(m.Points[0])
	if m.K > mp {
		return tail, math.Inf(1), host
	}
	d2 := make([]float32, mp)
	for i := range mp {
		var a float32
		for j := range d {
			u := q[j] - m.Points[j][i]
			if j == 0 {
				a = float32(u * u) // (the conversions keep each product rounded: no fused multiply-add)
			} else {
				a += float32(u * u)
			}
		}
		d2[i] = a
	}
	slices.Sort(d2)
	for i := range m.K {
		dist += float64(float32(math.Sqrt(float64(d2[i]))))
	}
	return tail, dist, host
}

// keyedSurprisal is keyed.cu's keyed_surprisal: rank's surprisal of x among ascending s.
func keyedSurprisal(s []float32, x float32, spread, base float64, logs []float64) (float64, bool) {
	n := len(s)
	a, b := 0, 0
	if n > 0 {
		for l := n; l > 1; {
			half := l >> 1
			if s[a+half-1] <= x {
				a += half
			}
			if s[b+half-1] < x {
				b += half
			}
			l -= half
		}
		if s[a] <= x {
			a++
		}
		if s[b] < x {
			b++
		}
	}
	le, ge := a, n-b
	switch {
	case n > 0 && x < s[0]:
		u := (float64(s[0]) - float64(x)) / spread
		return base - logs[max(le, 1)] + u, !(u <= base)
	case n > 0 && x > s[n-1]:
		u := (float64(x) - float64(s[n-1])) / spread
		return base - logs[max(ge, 1)] + u, !(u <= base)
	}
	return base - logs[max(min(le, ge), 1)], false
}

// keyedChunk is the most records of one key a warp takes (keyed.cu: a chunk's count).
const keyedChunk = 32

// keyedChunks groups records by slot: order lists the records slot by slot (stream order within
// a slot), chunks holds (slot, first position in order, count <= keyedChunk) triples. The order
// is a stable radix sort on the slot, a byte a pass and as many passes as the largest slot needs
// (three at a million keys): the order of a sort by (slot, position), with no comparisons.
func keyedChunks(slot []int32) (order []int32, chunks []int32) {
	var sc chunkScratch
	return sc.chunksOf(slot, 0)
}

// chunkScratch is keyedChunks' memory, kept from call to call (KeyedGrouper): a batch's arrays
// allocated anew each call were fresh memory, whose first writes cost more than the work
// (docs/BENCHMARKS.md §13.1.4).
type chunkScratch struct {
	order, tmp, chunks []int32
}

// int32s is buf resized to n (its memory reused when it fits; the values are not cleared).
func int32s(buf []int32, n int) []int32 {
	if cap(buf) < n {
		return make([]int32, n)
	}
	return buf[:n]
}

// chunksOf is keyedChunks in sc's memory (valid until sc's next use), the chunks' positions
// counted from first.
func (sc *chunkScratch) chunksOf(slot []int32, first int) (order []int32, chunks []int32) {
	n := len(slot)
	sc.order, sc.tmp = int32s(sc.order, n), int32s(sc.tmp, n)
	order, tmp := sc.order, sc.tmp
	chunks = sc.chunks[:0]
	defer func() { sc.chunks = chunks }()
	var top uint32
	for i, s := range slot {
		order[i] = int32(i)
		top = max(top, uint32(s))
	}
	for shift := 0; shift < 32 && top>>shift != 0; shift += 8 {
		var at [257]int
		for _, i := range order {
			at[(uint32(slot[i])>>shift)&0xff+1]++
		}
		for d := 1; d < len(at); d++ {
			at[d] += at[d-1]
		}
		for _, i := range order {
			d := (uint32(slot[i]) >> shift) & 0xff
			tmp[at[d]] = i
			at[d]++
		}
		order, tmp = tmp, order
	}
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && j-i < keyedChunk && slot[order[j]] == slot[order[i]] {
			j++
		}
		chunks = append(chunks, slot[order[i]], int32(first+i), int32(j-i))
		i = j
	}
	return order, chunks
}

// KeyedGrouper lays out one part of a keyed call's records in the kernels' form: grouped by
// slot, row-major. A call's records may come in parts, each grouped on a goroutine of its own
// (internal/accel's keyed Score: a part for each detect worker's records), and the call takes
// the parts' chunks as they are (KeyedStore.ScoreGrouped): of the call's host side only the
// packed copy of the values for the upload runs over all its records on one goroutine. A part's
// slots may recur in another part (a key's records in two parts are two chunks: the same
// scores). Its memory is kept for its next Group.
type KeyedGrouper struct{ sc chunkScratch }

// Group places records r < len(slot) (values x[j][rows[r]], or x[j][r] where rows is nil) at
// positions first, first+1, ... of a keyed call, grouped by slot: the record at position first+p
// is order[p], its values written to xs[(first+p)*d : (first+p+1)*d] (d = len(x)); chunks are
// its (slot, position, count) triples, positions counted from the call's start. Both are valid
// until g's next Group.
func (g *KeyedGrouper) Group(slot, rows []int32, x [][]float32, first int, xs []float32) (order, chunks []int32) {
	order, chunks = g.sc.chunksOf(slot, first)
	d := len(x)
	at := first * d
	for _, r := range order {
		i := int(r)
		if rows != nil {
			i = int(rows[r])
		}
		for j := range d {
			xs[at+j] = x[j][i]
		}
		at += d
	}
	return order, chunks
}

// checkChunks counts the parts' chunks and reports why they are not a grouped call's of n
// records against slots 0..slots-1 (nil when they are): (slot, position, count) triples, the
// count 1..keyedChunk (keyed.cu's chunk), the parts' chunks in order covering positions 0..n-1
// once each, as KeyedGroupers at consecutive firsts lay them out. A position no chunk covers
// would come back holding whatever the device's scratch held; a ragged list would shift every
// later part's triples.
func checkChunks(chunks [][]int32, n, slots int) (nchunk int, err error) {
	next := 0
	for w, c := range chunks {
		if len(c)%3 != 0 {
			return 0, fmt.Errorf("part %d: %d values, not (slot, position, count) triples", w, len(c))
		}
		for t := 0; t < len(c); t += 3 {
			sl, at, cnt := c[t], int(c[t+1]), int(c[t+2])
			if sl < 0 || int(sl) >= slots {
				return 0, fmt.Errorf("part %d: slot %d: no model installed (capacity %d)", w, sl, slots)
			}
			if at != next || cnt < 1 || cnt > keyedChunk || at+cnt > n {
				return 0, fmt.Errorf("part %d: chunk (slot %d, position %d, %d records): want position %d, 1..%d records of the %d", w, sl, at, cnt, next, keyedChunk, n)
			}
			next = at + cnt
		}
		nchunk += len(c) / 3
	}
	if next != n {
		return 0, fmt.Errorf("the chunks cover positions 0..%d of %d records", next, n)
	}
	return nchunk, nil
}

// KeyedScores are a grouped call's scores by position (KeyedStore.ScoreGrouped): the device's
// download as it comes, kept by the caller from call to call.
type KeyedScores struct {
	back []uint64 // n tail scores' bits, n distances' bits, n host flags (int32, two a word)
	n    int
}

// resize makes room for n records' scores.
func (o *KeyedScores) resize(n int) {
	m := 2*n + (n+1)/2
	if cap(o.back) < m {
		o.back = make([]uint64, m)
	}
	o.back, o.n = o.back[:m], n
}

// Tail is the tail score at position p (rank.Tail.Score's bits) unless Host(p).
func (o *KeyedScores) Tail(p int) float64 { return math.Float64frombits(o.back[p]) }

// Dist is w_k(q, R) at position p (solvingset.KNNWeights's bits).
func (o *KeyedScores) Dist(p int) float64 { return math.Float64frombits(o.back[o.n+p]) }

// Host reports whether the tail score at position p needs the host (KeyedScoreReference).
func (o *KeyedScores) Host(p int) bool {
	return uint32(o.back[2*o.n+p/2]>>(32*(p&1))) != 0 // (the kernel's int32 flags, little-endian)
}

// keyedScoreParams is keyed_score_q*'s parameter (keyed.cu: KeyedScoreParams).
type keyedScoreParams struct {
	Slots     uint64 `c:"slots"`
	SlotBytes int64  `c:"slot_bytes"`
	D         int64  `c:"d"`
	W         int64  `c:"w"`
	Logs      uint64 `c:"logs"`
	Chunks    uint64 `c:"chunks"`
	NChunk    int64  `c:"nchunk"`
	X         uint64 `c:"x"`
	N         int64  `c:"n"`
	Tail      uint64 `c:"tail"`
	Dist      uint64 `c:"dist"`
	Host      uint64 `c:"host"`
}

// keyedInstallParams is keyed_install's parameter (keyed.cu: KeyedInstallParams).
type keyedInstallParams struct {
	Staged    uint64 `c:"staged"`
	Slot      uint64 `c:"slot"`
	Count     int64  `c:"count"`
	SlotBytes int64  `c:"slot_bytes"`
	Slots     uint64 `c:"slots"`
}
