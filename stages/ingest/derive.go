package ingest

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // derive.timezone works on hosts without a zoneinfo database
)

// Derived features (ingest.derive, Config.Derive), computed after decoding, on one goroutine,
// in record order: the source calls Deriver.Apply for each decoded record of a batch in fetch
// order (after the partition goroutines decoded the messages: decodeall.go), and replay for each row in file
// order. Kafka orders the records of a partition, not those of a topic, so a series is the
// records of one (partition, key) (records without a key: one series per partition): its
// differences and robust z follow that key's order within its partition whatever the
// interleaving of partitions in fetches, and a replay of the same records per partition gives
// the same values. A partition read again from an earlier offset
// (a rebalance, a restart of the group's member) starts its series afresh, as a process started
// at that offset would: each key's first difference is 0 again, its robust z 0 until min_values
// values, and its robust zs, means and stds warming (Decoded.Warming: the detect stage scores
// them at a value its model gives) until `last` (derive_warmup.go). A restart with detect.state_dir loads
// the series saved at the stop instead (derive_state.go), and they continue.
//
// Values are computed in float64 and stored as float32 like every feature, always finite:
//   - diff: x - previous x of the series; the series' first record gets 0 (no change known: a
//     feature cannot be missing, and 0 never raises a flag by itself). Uncertainty
//     sqrt(sd^2 + previous sd^2).
//   - robust_z: (x - median) / scale over the series' previous `last` values (x excluded, so a
//     spike does not dilute its own score). scale = 1.4826 MAD (the normal sd's consistent
//     estimate); when MAD is 0 (more than half the values equal), 1.2533 x the mean absolute
//     deviation (the same for a normal); at least scale_floor. With no scale at all (a history
//     of one value, no floor) z is 0 for that value and +-1e6 for any other; with fewer than
//     min_values previous values z is 0. Clamped to +-1e6. Uncertainty sd / scale.
//   - mean: the mean of the series' last `last` values, the current one included (with trim,
//     less the two farthest from their mean, std's two; at the series' start, while the window
//     fills, of all those seen). Uncertainty sqrt(sum of the kept values' sd^2) / their number
//     (independent errors): derive_mean.go.
//   - std: the sample standard deviation of the series' last `last` values, the current one
//     included, less the two farthest from their mean (at the series' start, while the
//     window fills, of all those seen; 0 for its first value): derive_std.go.
//   - time_of_day, day_of_week: the angle of the timestamp's wall-clock time in
//     derive.timezone within its day (0 at 00:00) or week (0 at Monday 00:00), as sin and cos,
//     so that 23:59 and 00:00 are neighbours. Uncertainty 0.

// zLimit bounds a robust z: a record a million robust units out is as far as any ranking needs,
// and it keeps the distances of many such columns finite in float32.
const zLimit = 1e6

// Deriver computes the derived features of Config.Derive. Not safe for concurrent use.
type Deriver struct {
	nFeat   int // len(Config.Features): the decoded columns
	cols    int // every feature column, derived ones included
	withSD  bool
	loc     *time.Location
	ops     []deriveOp
	wall    bool   // some op reads the record's wall-clock time (time_of_day, day_of_week)
	wallOf  string // the first such op's name (Config's: the dead letter's field without a time)
	nDiff   int    // diff slots per series
	ringLen int    // float32s of robust_z rings per series
	meanLen int    // float32s of mean and std rings per series (values, then with uncertainty their sds)
	wideLen int    // uint64s of mean's and std's exact sums per series (derive_wide.go)
	aggLen  int    // int32s of mean's and std's extremes per series (stdTop)

	series  map[string]*series
	lru     series // sentinel of the recency list: lru.next is the most recent
	maxKeys int
	// evictions counts the series evicted past max_keys (Stats); restoredN the series LoadState
	// loaded at the start.
	evictions uint64
	restoredN int
	lastOff   map[int32]int64 // the last offset applied per partition (a re-read resets it)
	// restored is the last offset applied per partition before the loaded state was saved
	// (derive_state.go): records at or below it are not applied again. Dropped per partition at
	// its first record past it.
	restored map[int32]int64
	def      string  // the definitions the series depend on (derive_state.go)
	scratch  *series // applyRedelivered's copy

	out    Decoded // Apply's result, reused
	keyBuf []byte
	stdScr stdScratch
}

// deriveOp is one derived feature, resolved to column indices.
type deriveOp struct {
	kind      DeriveKind
	src, dst  int // source column (diff, robust_z); first destination column
	slot      int // diff: its previous-value slot; robust_z, mean, std: its ring's start in the series
	wide, agg int // mean, std: its exact sums' and its extremes' start in the series
	last, min int
	floor     float64
	trim      bool // mean: its full window's 2 farthest values left out (derive_mean.go)
}

// series is the state of one (partition, key).
type series struct {
	id         string
	partition  int32
	prev, next *series
	seen       bool      // a previous record exists (diff)
	prevVal    []float32 // per diff: previous value, then (withSD) previous uncertainty
	ring       []float32 // each robust_z's previous values in arrival order, then each one's sorted
	mring      []float32 // each mean's and std's last values (a ring), then (withSD) their sds
	wide       []uint64  // per mean and std: its window's exact sums (meanWideLen, stdWideLen)
	agg        []int32   // per mean and std: its ring's extremes (stdAggLen)
	fill, pos  []int32   // per robust_z, mean and std: values held, next write position
}

// NewDeriver returns the Deriver of the checked config, in the derive.timezone Check loaded;
// nil without ingest.derive. It cannot fail: Check validated every derived feature.
func (k *Checked) NewDeriver() *Deriver {
	if k.cfg.Derive == nil {
		return nil
	}
	return newDeriver(k.cfg, k.deriveZone)
}

// newDeriver is the Deriver of cfg (with a derive section, validated) in the zone loc.
func newDeriver(cfg Config, loc *time.Location) *Deriver {
	cols := cfg.Columns()
	d := &Deriver{
		nFeat: len(cfg.Features), cols: len(cols), withSD: cfg.Uncertainty != nil, loc: loc,
		series: map[string]*series{}, maxKeys: cfg.Derive.MaxKeys, lastOff: map[int32]int64{},
		def: definition(cfg, loc.String()),
	}
	d.lru.next, d.lru.prev = &d.lru, &d.lru
	dst := d.nFeat
	for i, f := range cfg.Derive.Features {
		op := deriveOp{kind: f.Kind, dst: dst, last: f.Last, min: f.MinValues, floor: f.ScaleFloor}
		switch f.Kind {
		case DeriveDiff, DeriveRobustZ, DeriveMean, DeriveStd:
			// Check made sure `of` names an earlier column; a config changed after Check stops
			// here rather than indexing with -1 at the first record.
			if op.src = slices.Index(cols[:dst], f.Of); op.src < 0 {
				panic(fmt.Sprintf("ingest: derive.features[%d].of: %q is not a feature or an earlier derived feature (the config changed after Check)", i, f.Of))
			}
			switch f.Kind {
			case DeriveDiff:
				op.slot = d.nDiff
				d.nDiff++
			case DeriveMean: // a ring, exact sums, and with trim extremes as std's (derive_mean.go)
				op.slot, op.wide, op.agg, op.trim = d.meanLen, d.wideLen, d.aggLen, f.Trim > 0
				d.meanLen += f.Last
				d.wideLen += meanWideLen(d.withSD)
				if op.trim {
					d.aggLen += stdAggLen(f.Last)
				}
			case DeriveStd: // a ring as mean's, exact sums and extremes (derive_std.go)
				op.slot, op.wide, op.agg = d.meanLen, d.wideLen, d.aggLen
				d.meanLen += f.Last
				d.wideLen += stdWideLen(d.withSD)
				d.aggLen += stdAggLen(f.Last)
			default:
				op.slot = d.ringLen
				d.ringLen += f.Last
			}
		case DeriveTimeOfDay, DeriveDayOfWeek:
			if !d.wall {
				d.wall, d.wallOf = true, strings.TrimSuffix(f.Columns()[0], ".sin")
			}
		}
		d.ops = append(d.ops, op)
		dst += len(f.Columns())
	}
	if d.withSD {
		d.meanLen *= 2 // the sds' rings after the values'
	}
	d.out.Values = make([]float32, d.cols)
	if d.withSD {
		d.out.SD = make([]float32, d.cols)
	}
	for _, op := range d.ops {
		if op.kind.warms() {
			d.out.Warming = make([]bool, d.cols)
			break
		}
	}
	return d
}

// NeedsTime is the name of the first derived feature that reads the record's time
// (time_of_day, day_of_week: their pair's prefix, as the config names it), "" when none does. A
// record without a time (Apply's zero ts) has no value for it: the source makes it a dead letter.
func (d *Deriver) NeedsTime() string { return d.wallOf }

// StateBound is the most bytes the series can hold (derive.max_keys of them, keys of keyLen
// bytes): what Derive.MaxKeys documents, for the start's log line.
func (d *Deriver) StateBound(keyLen int) int64 {
	per := int64(8*d.nDiff+8*d.ringLen+4*d.meanLen+8*len(d.ops)+8*d.wideLen+4*d.aggLen) + seriesOverhead + int64(keyLen)
	return int64(d.maxKeys) * per
}

// seriesOverhead is a series' bytes beyond its values: the struct, its slice headers, the map
// entry and the key string's header (measured: about 220 with Go 1.26, TestDeriveStateBound,
// 308 with the map's growth once std's exact sums and extremes added two slices to the struct,
// 256 bytes with them; 350 leaves room).
const seriesOverhead = 350

// Keys is the number of series held (at most derive.max_keys).
func (d *Deriver) Keys() int { return len(d.series) }

// DeriveStats is what a Deriver holds, for the metrics (outlierd_derive_*).
type DeriveStats struct {
	Series    int    // series held (at most derive.max_keys)
	Evictions uint64 // series evicted past derive.max_keys so far (a running total; a re-read partition's are not)
	Restored  int    // series loaded from detect.state_dir at the start (0: none)
}

// Stats is the Deriver's DeriveStats.
func (d *Deriver) Stats() DeriveStats {
	return DeriveStats{Series: len(d.series), Evictions: d.evictions, Restored: d.restoredN}
}

// Apply returns in's record with its derived features after its features, and advances the
// record's series. Records must come in each partition's order: an offset at or below the last
// one applied for the partition means the partition is read again (a rebalance), and its series
// start afresh. key is the record's key (nil and empty are the same series), ts its timestamp.
// The result is valid until the next call.
func (d *Deriver) Apply(in *Decoded, partition int32, offset int64, key []byte, ts time.Time) *Decoded {
	if w, ok := d.restored[partition]; ok {
		if offset <= w { // applied before the state was saved: read again (derive_state.go)
			return d.applyRedelivered(in, partition, key, ts)
		}
		delete(d.restored, partition)
	}
	if last, ok := d.lastOff[partition]; ok && offset <= last {
		d.resetPartition(partition)
	}
	d.lastOff[partition] = offset
	return d.apply(in, partition, key, ts)
}

// apply is Apply once the partition's order is checked.
func (d *Deriver) apply(in *Decoded, partition int32, key []byte, ts time.Time) *Decoded {
	return d.applyTo(in, d.seriesOf(partition, key), ts)
}

// applyTo computes in's derived features on the series s, which it advances.
func (d *Deriver) applyTo(in *Decoded, s *series, ts time.Time) *Decoded {
	out := &d.out
	copy(out.Values, in.Values)
	if d.withSD {
		copy(out.SD, in.SD)
	}
	out.Key, out.HasKey, out.EventTime, out.HasEventTime, out.EventTimeText = in.Key, in.HasKey, in.EventTime, in.HasEventTime, in.EventTimeText
	var wall wallClock
	if d.wall { // once per record, whichever of time_of_day and day_of_week read it
		wall = wallClockOf(ts.In(d.loc))
	}
	for i := range d.ops {
		op := &d.ops[i]
		switch op.kind {
		case DeriveDiff:
			d.diff(op, s)
		case DeriveRobustZ: // (its window is the previous values: full from the (last+1)-th record)
			n := s.fill[i]
			d.robustZ(op, s, i)
			out.Warming[op.dst] = int(n) < op.last
		case DeriveMean:
			d.mean(op, s, i)
			out.Warming[op.dst] = int(s.fill[i]) < op.last
		case DeriveStd:
			d.std(op, s, i)
			out.Warming[op.dst] = int(s.fill[i]) < op.last
		case DeriveTimeOfDay, DeriveDayOfWeek:
			d.cyclic(op, wall)
		}
	}
	s.seen = true
	return out
}

func (d *Deriver) diff(op *deriveOp, s *series) {
	x := d.out.Values[op.src]
	v, sd := 0.0, 0.0
	if s.seen {
		v = float64(x) - float64(s.prevVal[op.slot])
		if d.withSD {
			a, b := float64(d.out.SD[op.src]), float64(s.prevVal[d.nDiff+op.slot])
			sd = math.Sqrt(float64(a*a) + float64(b*b))
		}
	}
	s.prevVal[op.slot] = x
	d.out.Values[op.dst] = finite32(v)
	if d.withSD {
		s.prevVal[d.nDiff+op.slot] = d.out.SD[op.src]
		d.out.SD[op.dst] = finite32(sd)
	}
}

// robustZ is op's z of the current value against the series' previous values, which it then
// joins (the oldest falls out past op.last). k is op's index among d.ops (for fill and pos).
// The series keeps its previous values twice: in arrival order (a ring: which one falls out)
// and sorted (the median is read off, the MAD found by a binary search, the update one
// insertion): O(log last) plus two moves of at most last values, where selecting the median
// and the MAD anew was O(last) with unpredictable branches (3.5 us a record at last = 60).
func (d *Deriver) robustZ(op *deriveOp, s *series, k int) {
	x := d.out.Values[op.src]
	ring := s.ring[op.slot : op.slot+op.last]
	sorted := s.ring[d.ringLen+op.slot : d.ringLen+op.slot+op.last]
	n := int(s.fill[k])
	z, sd := 0.0, 0.0
	if n >= op.min {
		vals := sorted[:n]
		med := float64(vals[n/2])
		if n%2 == 0 {
			med = float64(float64(vals[n/2-1])/2) + float64(med/2)
		}
		mad := medianDistance(vals, med)
		scale := 1.4826 * mad
		if scale == 0 {
			var sumAD float64
			for _, v := range vals {
				sumAD += math.Abs(float64(v) - med)
			}
			scale = 1.2533 * sumAD / float64(n)
		}
		scale = max(scale, op.floor)
		xf := float64(x)
		switch {
		case scale > 0 && !math.IsInf(scale, 0):
			z = (xf - med) / scale
			if d.withSD {
				sd = float64(d.out.SD[op.src]) / scale
			}
		case xf > med:
			z = zLimit
		case xf < med:
			z = -zLimit
		}
		z = max(-zLimit, min(zLimit, z))
	}
	d.out.Values[op.dst] = float32(z)
	if d.withSD {
		d.out.SD[op.dst] = finite32(sd)
	}
	p := int(s.pos[k])
	if n == op.last { // the oldest value leaves the sorted copy
		i, _ := slices.BinarySearch(sorted[:n], ring[p])
		copy(sorted[i:n-1], sorted[i+1:n])
		n--
	}
	i, _ := slices.BinarySearch(sorted[:n], x)
	copy(sorted[i+1:n+1], sorted[i:n])
	sorted[i] = x
	ring[p] = x
	s.pos[k] = int32((p + 1) % op.last)
	s.fill[k] = int32(n + 1)
}

// medianDistance is the median of |v - med| over the sorted values vals (the MAD when med is
// their median): the distances below med, read downwards, and above it, read upwards, are two
// sorted sequences, whose k-th smallest a binary search finds.
func medianDistance(vals []float32, med float64) float64 {
	n := len(vals)
	m, _ := slices.BinarySearchFunc(vals, med, func(v float32, t float64) int { return cmp.Compare(float64(v), t) })
	below := func(t int) float64 { return med - float64(vals[m-1-t]) } // ascending in t
	above := func(t int) float64 { return float64(vals[m+t]) - med }   // ascending in t
	a, b := m, n-m
	kth := func(k int) float64 { // the k-th smallest (0-based) of the two sequences
		lo, hi := max(0, k+1-b), min(k+1, a) // i taken from below, k+1-i from above
		for lo < hi {
			i := lo + (hi-lo)/2
			if j := k + 1 - i; j > 0 && below(i) < above(j-1) {
				lo = i + 1
			} else {
				hi = i
			}
		}
		i, j := lo, k+1-lo
		switch {
		case i == 0:
			return above(j - 1)
		case j == 0:
			return below(i - 1)
		}
		return max(below(i-1), above(j-1))
	}
	if n%2 == 1 {
		return kth(n / 2)
	}
	return float64(kth(n/2-1)/2) + float64(kth(n/2)/2)
}

// wallClock is a record's time in derive.timezone as the cyclic features read it.
type wallClock struct {
	sec float64 // seconds since midnight
	day int     // day of the week, Monday 0
}

func wallClockOf(t time.Time) wallClock {
	return wallClock{sec: float64(t.Hour()*3600+t.Minute()*60+t.Second()) + float64(t.Nanosecond())/1e9,
		day: (int(t.Weekday()) + 6) % 7}
}

func (d *Deriver) cyclic(op *deriveOp, w wallClock) {
	var frac float64
	if op.kind == DeriveTimeOfDay {
		frac = w.sec / 86400
	} else {
		frac = (float64(float64(w.day)*86400) + w.sec) / (7 * 86400)
	}
	sin, cos := math.Sincos(2 * math.Pi * frac)
	d.out.Values[op.dst], d.out.Values[op.dst+1] = float32(sin), float32(cos)
	if d.withSD {
		d.out.SD[op.dst], d.out.SD[op.dst+1] = 0, 0
	}
}

// finite32 is v as a float32, +-FLT_MAX where it overflows (the difference of two values near
// +-FLT_MAX): a feature is always finite.
func finite32(v float64) float32 {
	return float32(max(-math.MaxFloat32, min(math.MaxFloat32, v)))
}

// seriesOf finds or makes the series of (partition, key), most recent from now on; a new one
// past max_keys reuses the least recently seen series' memory.
func (d *Deriver) seriesOf(partition int32, key []byte) *series {
	d.keyBuf = binary.LittleEndian.AppendUint32(d.keyBuf[:0], uint32(partition))
	d.keyBuf = append(d.keyBuf, key...)
	s, ok := d.series[string(d.keyBuf)] // no allocation: the compiler's map index of a []byte
	if ok {
		d.unlink(s)
	} else {
		if len(d.series) >= d.maxKeys {
			s = d.lru.prev
			d.evictions++
			d.unlink(s)
			delete(d.series, s.id)
			s.seen = false
			clear(s.fill)
			clear(s.pos)
			clear(s.wide)
			clear(s.agg)
		} else {
			s = d.newSeries()
		}
		s.id, s.partition = string(d.keyBuf), partition
		d.series[s.id] = s
	}
	s.next, s.prev = d.lru.next, &d.lru // to the front
	d.lru.next.prev = s
	d.lru.next = s
	return s
}

// newSeries is an empty series of d's layout.
func (d *Deriver) newSeries() *series {
	return &series{prevVal: make([]float32, 2*d.nDiff), ring: make([]float32, 2*d.ringLen),
		mring: make([]float32, d.meanLen),
		wide:  make([]uint64, d.wideLen), agg: make([]int32, d.aggLen),
		fill: make([]int32, len(d.ops)), pos: make([]int32, len(d.ops))}
}

func (d *Deriver) unlink(s *series) {
	s.prev.next, s.next.prev = s.next, s.prev
}

// resetPartition forgets the series of partition p (it is being read again).
func (d *Deriver) resetPartition(p int32) {
	for id, s := range d.series {
		if s.partition == p {
			d.unlink(s)
			delete(d.series, id)
		}
	}
	delete(d.lastOff, p)
}
