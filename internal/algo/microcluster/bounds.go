package microcluster

import (
	"math"
	"math/bits"
)

// Elkan bounds for the passes of Cluster after the first (Elkan, "Using the triangle inequality
// to accelerate k-means", ICML 2003). Per row and per centre, a lower bound on the distance from
// the row to the centre; after the centres move, each lower bound shrinks by the move of its own
// centre (triangle inequality). In a pass, each row first gets its exact float32 distance d_a to
// its assigned centre; a centre whose lower bound proves a float32 distance strictly above d_a
// can neither beat nor tie it and is not computed; the few others are, exactly as Assign does
// (same float32 distance, ties to the lowest index), and their bounds reset to the new exact
// values. The skips change no result (see thresholdLevel), so Cluster gives bit for bit the
// assignment and tuples of the plain loop (clusterPlain), and of gpukern.Cluster. Elkan's upper
// bound is replaced by d_a itself: almost every row needs it anyway after the large moves of the
// first passes, and it makes the threshold as tight as it can be.
//
// Hamerly's single lower bound (to the second nearest centre, shrunk by the largest move of any
// centre) was tried first and skipped almost nothing on the paper's default data (1,000,000 x 10,
// q = 200: 99.7%, 97% and 88% of the rows still recomputed in passes 2-4): in 10 dimensions the
// second nearest centre is barely farther than the nearest, while the centres move a lot in the
// first passes. The per-centre bounds keep the far centres out: about 6 exact distances per row
// instead of 200. They cost n*q bytes (200 MB for those defaults): each bound is a byte-sized level
// (lower bound = level * scale, rounded down), see elkanState.
//
// Bounds are on the real distance sqrt(D), D = sum_j (x_j - c_j)^2 in exact arithmetic over the
// float32 values, because only real distances obey the triangle inequality. The winner, though,
// is chosen on the float32 value d = SquaredDistance(x, c). The link (Higham, Accuracy and
// Stability of Numerical Algorithms, §3.1): t = fl(x_j - c_j) = (x_j - c_j)(1+e1), fl(t*t) adds a
// factor (1+e2), and the r-1 float32 additions that follow the first (exact) one add at most r-1
// more, every |e| <= u = 2^-24; all terms are non-negative, so nothing cancels and
// |d - D| <= gamma_{r+2} D, gamma_n = n u / (1 - n u). Underflow breaks the relative model only
// for products below 2^-126, each off by at most half a subnormal step 2^-150 (Go never enables
// flush-to-zero), so an absolute eta = r 2^-148 covers all of them with room to spare. Hence
//
//	(1-gamma) D - eta <= d <= (1+gamma) D + eta.
//
// boundParams.gamma is (r+2) 2^-23 = 2 (r+2) u, at least gamma_{r+2} while (r+2) u <= 1/2 (Cluster
// bounds only r <= maxBoundDims) and nearly twice it for any practical r: the spare absorbs the
// float64 rounding of the bound arithmetic itself (each float64 operation adds a relative 2^-53;
// the few per bound add up to < 2^-48, negligible next to 2^-23). Each bound is further nudged
// outwards by boundNudge where it is rounded.

// boundNudge is the relative outward nudge of a bound computed in float64: it covers the 2^-53
// roundings of the few operations that produced it.
const boundNudge = 0x1p-50

// boundParams holds the error constants of the float32 distance for r dimensions.
type boundParams struct {
	gamma, eta float64
	// slack64 is the relative error allowed on the float64 square root of a float64 sum of r
	// squares of exact differences (the centre moves): at most r+2 roundings of 2^-53 each.
	slack64 float64
}

func newBoundParams(r int) boundParams {
	return boundParams{
		gamma:   float64(r+2) * 0x1p-23,
		eta:     float64(r) * 0x1p-148,
		slack64: float64(r+4) * 0x1p-52,
	}
}

// lowerFromD32 bounds sqrt(D) from below given d = SquaredDistance: D >= (d - eta) / (1 + gamma).
// An overflowed d (+Inf) only says that the unrounded float32 value passed MaxFloat32.
func (p boundParams) lowerFromD32(d float32) float64 {
	v := float64(min(d, math.MaxFloat32))
	v = (v - p.eta) / (1 + p.gamma)
	if v <= 0 {
		return 0
	}
	return math.Sqrt(v) * (1 - boundNudge)
}

// maxBoundBytes caps the per-centre bounds (n*ceil(q/8)*8 bytes) of the bounded passes; above it
// Cluster assigns every row in every pass (same result, more time) rather than take the memory.
const maxBoundBytes = 1 << 28

// maxBoundDims is the most dimensions for which boundParams.gamma bounds the float32 rounding
// ((r+2) u <= 1/2); Cluster assigns every row in every pass above it.
const maxBoundDims = 1<<23 - 2

// levelShift selects the float32 bits that index elkanState.table: sign, exponent and the top 6
// mantissa bits, so a bucket spans a relative 2^-6 of the squared distance (0.8% of the distance)
// and the table has 2^15 entries (32 KiB; the upper half, negative distances, is never read).
const levelShift = 17

// Byte-lane (SWAR) constants: the top and the bottom bit of each of the 8 bytes of a uint64.
const (
	laneHigh = 0x8080808080808080
	laneLow  = 0x0101010101010101
)

// laneSub returns the bytewise difference a - b (mod 256 in each byte) and, in bit 7 of each
// byte, whether that byte of a is below that of b (Hacker's Delight §2-18: the top bits are kept
// out of the subtraction so that no borrow crosses a byte, then restored, and the borrow out of
// each byte is recomputed from the top bits).
func laneSub(a, b uint64) (diff, below uint64) {
	diff = ((a | laneHigh) - (b &^ laneHigh)) ^ ((a ^ ^b) & laneHigh)
	below = ((^a & b) | (^(a ^ b) & diff)) & laneHigh
	return diff, below
}

// laneSubSat is the bytewise saturating difference max(a - b, 0).
func laneSubSat(a, b uint64) uint64 {
	d, below := laneSub(a, b)
	return d &^ ((below >> 7) * 0xff)
}

// elkanState carries the per-centre lower bounds between the passes of Cluster.
type elkanState struct {
	p     boundParams
	q     int
	qw    int // words per row: q levels packed 8 to a uint64, the last word padded with 255
	scale float64
	// level holds the bounds, row i in words [i*qw, (i+1)*qw), centre k in byte k%8 (from the
	// least significant) of word k/8: level * scale <= the real distance from row i to centre k,
	// for every k but assign[i] (whose level is stale while it is assigned). scale is the real
	// distance of one level. Any positive scale is correct; it is chosen so that 255 levels span
	// about 4 times the typical distance to the nearest centre, which resolves the competitive
	// centres finely. A padding byte holds 255 and never moves, so it is never a candidate.
	level []uint64
	// table[bits(d) >> levelShift] is the level of a squared float32 distance d: that of the
	// smallest d in its bucket, so a lower bound for all of them (lowerFromD32 is monotone).
	table *[1 << (32 - levelShift)]uint8
}

// newElkanState sizes the bounds for n rows and q centres and picks the level scale from the
// nearest-centre distances of up to 1024 evenly spaced rows (deterministic; it affects only the
// speed).
func newElkanState(means, cent [][]float32, n, q int) *elkanState {
	r := len(means)
	qw := (q + 7) / 8
	e := &elkanState{p: newBoundParams(r), q: q, qw: qw, level: make([]uint64, n*qw)}
	samples := min(n, 1024)
	x, c := make([]float32, r), make([]float32, r)
	var sum float64
	for s := range samples {
		i := s * (n / samples)
		for j := range r {
			x[j] = means[j][i]
		}
		best := float32(math.Inf(1))
		for k := range q {
			for j := range r {
				c[j] = cent[j][k]
			}
			best = min(best, SquaredDistance(x, c))
		}
		sum += math.Sqrt(float64(min(best, math.MaxFloat32)))
	}
	e.scale = 4 * sum / float64(samples) / 255
	if !(e.scale > 0) || math.IsInf(e.scale, 0) {
		e.scale = 1 // all sampled rows sit on centres: any positive scale is correct
	}
	e.table = new([1 << (32 - levelShift)]uint8)
	for b := range 1 << (32 - levelShift - 1) { // sign bit 0: distances are >= +0
		v := math.Float32frombits(uint32(b) << levelShift)
		// The floor of lower/scale, nudged down for the rounding of the division.
		l := e.p.lowerFromD32(v) / e.scale * (1 - boundNudge)
		e.table[b] = uint8(min(l, 255))
	}
	return e
}

// levelOf is the level of a squared float32 distance d (>= 0, possibly +Inf).
func (e *elkanState) levelOf(d float32) uint64 {
	return uint64(e.table[math.Float32bits(d)>>levelShift])
}

// setLevel stores level l for centre k in a row's words.
func setLevel(words []uint64, k int32, l uint64) {
	sh := 8 * uint(k&7)
	words[k>>3] = words[k>>3]&^(0xff<<sh) | l<<sh
}

// thresholdLevel returns t such that every centre whose level exceeds t has a float32 distance
// strictly greater than dMax, so it can neither beat nor tie a centre at float32 distance <= dMax
// (ties go to the lowest index, and a strict gap leaves no tie to break). A level above t means a
// real distance z > T = sqrt((dMax + eta) / (1 - gamma)), hence z^2 (1 - gamma) - eta > dMax, and
// the float32 distance is at least that (see above). t = 255 skips nothing; so does a dMax that is
// not below MaxFloat32 (an overflowed distance ties with every other overflowed one).
func (e *elkanState) thresholdLevel(dMax float64) int {
	if !(dMax < math.MaxFloat32) {
		return 255
	}
	t := math.Sqrt((dMax+e.p.eta)/(1-e.p.gamma)) * (1 + boundNudge) / e.scale * (1 + boundNudge)
	if t >= 255 {
		return 255
	}
	return int(t)
}

// centreMoves returns move[c] >= the real distance that centre c moved from old to cur
// (column-major float32, q each).
func centreMoves(old, cur [][]float32, p boundParams) []float64 {
	r, q := len(cur), len(cur[0])
	move := make([]float64, q)
	for c := range q {
		var s float64
		for j := range r {
			// The difference of two float32 values is exact in float64 (24-bit significands).
			t := float64(cur[j][c]) - float64(old[j][c])
			s += float64(t * t)
		}
		move[c] = math.Sqrt(s) * (1 + p.slack64)
	}
	return move
}

// assignFirst is Assign (same float32 distances, ties to the lowest index, same result) that also
// initialises the bounds from the distances of every row to every centre.
func (e *elkanState) assignFirst(means, cent [][]float32, assign []int32, workers int) {
	r, q, qw, n := len(means), e.q, e.qw, len(assign)
	ct := rowMajor32(cent)
	parallelRanges(n, workers, func(lo, hi int) {
		tile := make([][4]float32, assignBlock/4*r)
		dist := make([][4]float32, q)
		var res [4]int32
		for b := lo; b < hi; b += assignBlock {
			end := min(b+assignBlock, hi)
			rows := end - b
			fillTile(tile, means, b, end)
			for g := 0; g*4 < rows; g++ {
				nearest4(tile[g*r:(g+1)*r], ct, q, dist, &res)
				for k := 0; k < 4 && b+g*4+k < end; k++ {
					i := b + g*4 + k
					assign[i] = res[k]
					words := e.level[i*qw : i*qw+qw]
					full := q / 8
					for w := range full {
						d := dist[w*8 : w*8+8 : w*8+8]
						words[w] = e.levelOf(d[0][k]) | e.levelOf(d[1][k])<<8 |
							e.levelOf(d[2][k])<<16 | e.levelOf(d[3][k])<<24 |
							e.levelOf(d[4][k])<<32 | e.levelOf(d[5][k])<<40 |
							e.levelOf(d[6][k])<<48 | e.levelOf(d[7][k])<<56
					}
					if full < qw {
						word := uint64(math.MaxUint64) // padding bytes stay 255
						for t, c := 0, full*8; c < q; t, c = t+1, c+1 {
							word = word&^(0xff<<(8*t)) | e.levelOf(dist[c][k])<<(8*t)
						}
						words[full] = word
					}
				}
			}
		}
	})
}

// assignNext updates assign for the centres cur, which replaced old since the last pass,
// computing only the distances that the bounds cannot rule out. It returns the number of exact
// row-centre distances computed.
func (e *elkanState) assignNext(means, old, cur [][]float32, assign []int32, workers int) int {
	r, q, qw, n := len(means), e.q, e.qw, len(assign)
	move := centreMoves(old, cur, e.p)
	// Moves in levels, rounded up (the nudge covers the rounding of the division), packed like
	// the levels; padding bytes move by 0.
	mv := make([]uint64, qw)
	for c, m := range move {
		l := uint64(math.Ceil(min(m/e.scale*(1+boundNudge), 255)))
		mv[c>>3] |= l << (8 * uint(c&7))
	}
	ct := rowMajor32(cur)
	counts := make([]int, resolveWorkers(workers))
	parallelRangesIndexed(n, workers, func(w, lo, hi int) {
		kept := make([]int32, 0, q)
		x := make([]float32, r)
		var dd [4]float32
		computed := 0
		for i := lo; i < hi; i++ {
			a := assign[i]
			words := e.level[i*qw : i*qw+qw]
			// The exact float32 distance to the own centre first, computed as SquaredDistance
			// does (index order, every step rounded, no FMA): Elkan's upper bound (the last
			// distance plus the move) is too loose to rule out much after the large moves of the
			// first passes, and this costs one distance of the ~6 that a row needs anyway.
			for j := range r {
				x[j] = means[j][i]
			}
			da := SquaredDistance(x, ct[int(a)*r:int(a)*r+r])
			computed++
			tl := e.thresholdLevel(float64(da))
			// Shrink every bound by its centre's move and list the centres at or below tl.
			kept = kept[:0]
			mv := mv[:len(words)]
			if tl < 255 {
				lim := uint64(tl+1) * laneLow
				for wi, word := range words {
					word = laneSubSat(word, mv[wi])
					words[wi] = word
					_, below := laneSub(word, lim)
					for below != 0 {
						k := int32(wi*8 + bits.TrailingZeros64(below)>>3)
						if k != a { // its level is stale: its distance is da
							kept = append(kept, k)
						}
						below &= below - 1
					}
				}
			} else {
				for wi, word := range words {
					words[wi] = laneSubSat(word, mv[wi])
				}
				for k := range int32(q) {
					if k != a {
						kept = append(kept, k)
					}
				}
			}
			best, win := da, a
			for g := 0; g < len(kept); g += 4 {
				var idx [4]int32
				for t := range 4 {
					idx[t] = kept[min(g+t, len(kept)-1)] // pad with the last candidate
				}
				distance1x4(x, ct, &idx, &dd)
				for t := 0; t < 4 && g+t < len(kept); t++ {
					k, d := idx[t], dd[t]
					setLevel(words, k, e.levelOf(d))
					if d < best || d == best && k < win {
						best, win = d, k
					}
				}
			}
			computed += len(kept)
			if win != a {
				setLevel(words, a, e.levelOf(da))
				assign[i] = win
			}
		}
		counts[w] += computed
	})
	total := 0
	for _, c := range counts {
		total += c
	}
	return total
}

// distance1x4 computes the float32 squared distances (as SquaredDistance) from one row x to the
// four centres idx of the row-major table cent: four independent sums hide the add latency.
func distance1x4(x, cent []float32, idx *[4]int32, d *[4]float32) {
	r := len(x)
	c0 := cent[int(idx[0])*r : int(idx[0])*r+r]
	c1 := cent[int(idx[1])*r : int(idx[1])*r+r]
	c2 := cent[int(idx[2])*r : int(idx[2])*r+r]
	c3 := cent[int(idx[3])*r : int(idx[3])*r+r]
	c0, c1, c2, c3 = c0[:len(x)], c1[:len(x)], c2[:len(x)], c3[:len(x)]
	var d0, d1, d2, d3 float32
	for j, v := range x {
		t0, t1, t2, t3 := v-c0[j], v-c1[j], v-c2[j], v-c3[j]
		d0 = float32(d0 + float32(t0*t0))
		d1 = float32(d1 + float32(t1*t1))
		d2 = float32(d2 + float32(t2*t2))
		d3 = float32(d3 + float32(t3*t3))
	}
	d[0], d[1], d[2], d[3] = d0, d1, d2, d3
}

// rowMajor32 returns column-major centroids ([dim][cluster]) as one row-major slice, the layout
// nearest4 reads.
func rowMajor32(cent [][]float32) []float32 {
	r, q := len(cent), len(cent[0])
	out := make([]float32, q*r)
	for j := range r {
		for c := range q {
			out[c*r+j] = cent[j][c]
		}
	}
	return out
}
