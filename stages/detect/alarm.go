package detect

import (
	"math"
	"slices"
	"time"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// The flag under flag_by: significance (docs/DESIGN.md, "Flags"): a record is significant when
// its combined score reaches min_score; it is flagged when it is significant and the alarm cap
// allows it: a record that starts an alarm (its series' previous record not flagged) while fewer
// than alarm_rate x window are counted over the last `window` records (the stage's cap: alarm
// starts, admitStart; a key's: every flag, admitRun), a record that continues one always; a
// significant record over the cap is suppressed (explained, not flagged).
// Significant records are kept out of the next models' reference (outcasts), so a fault does not
// become normal by repeating, and is flagged until the model learns it (after about a window).

// outcastFloor is the share of the window a build keeps at least: significant records are
// left out of a build while the others are at least this share of the window; a window where
// fewer remain (a level shift that has lasted almost a whole window) is built from whole, so
// a new normal is learnt after about a window instead of never.
const outcastFloor = 0.05

// leavesOut reports whether a build of a window snapshot of rows records (of a window of
// `window`) leaves its out outcasts out: some are, and at least outcastFloor of the window (or
// of the rows it holds while it fills), and two records, remain.
func leavesOut(rows, out, window int) bool {
	return out > 0 && float64(rows-out) >= outcastFloor*float64(min(window, rows)) && rows-out >= 2
}

// withoutOutcasts returns the rows of a window snapshot (cols, sds: column-major, oldest first)
// whose bits are clear, or the snapshot itself when nothing is left out or too few would remain
// (outcastFloor of the window, or of the rows it holds while it fills). The second result is
// how many rows were left out.
func withoutOutcasts(cols, sds [][]float32, bits []bool, window int) ([][]float32, [][]float32, int) {
	rows := 0
	if len(cols) > 0 {
		rows = len(cols[0])
	}
	if len(bits) != rows {
		return cols, sds, 0
	}
	out := 0
	for _, b := range bits {
		if b {
			out++
		}
	}
	if !leavesOut(rows, out, window) {
		return cols, sds, 0
	}
	keep := func(src [][]float32) [][]float32 {
		if src == nil {
			return nil
		}
		dst := make([][]float32, len(src))
		for j, c := range src {
			d := make([]float32, 0, rows-out)
			for i, v := range c {
				if !bits[i] {
					d = append(d, v)
				}
			}
			dst[j] = d
		}
		return dst
	}
	return keep(cols), keep(sds), out
}

// alarmCap counts over the last `window` records the flags that spend it: flag_by: significance
// starts an alarm only while fewer than floor(alarm_rate * window) of them are counted. A key's
// cap counts every flag (admitRun), the stage's an alarm once, at its start (admitStart).
type alarmCap struct {
	bits []uint64 // the last n records' counted flags, a flagRing's (ring)
	// n (the ring's length), next, filled and count (the bits set in the ring) as int32: with at,
	// the struct's 48 bytes of heap, as without it (TestAlarmCapSize).
	n, next, filled, count int32
	// at is the stream position of the record admitted last (seriesAlarms' numbering; 0: not
	// known): a key's cap keeps it for its series' flag handed back to the global model's path
	// at its eviction (keyedScorer.evict); saved with the key (keys' state format 3, a scorer's
	// alarm state: alarm_state.go).
	at uint64
}

func newAlarmCap(window int) *alarmCap {
	r := newFlagRing(max(window, 1))
	return &alarmCap{bits: r.bits, n: r.n}
}

// ring is the cap's flags as a flagRing (sharing its bits).
func (a *alarmCap) ring() flagRing { return flagRing{bits: a.bits, n: a.n} }

// clone is an independent copy (a save's: the next batch changes the cap).
func (a *alarmCap) clone() alarmCap {
	c := *a
	c.bits = a.ring().clone().bits
	return c
}

// admitOver takes the next record in stream order: whether it is significant, and the number
// of flags allowed per window; it returns whether the record is flagged. over flags a
// significant record whatever the window's count (an alarm going on: admitRun, admitStart);
// its flag counts unless over and not overCounts.
func (a *alarmCap) admitOver(significant, over, overCounts bool, limit int) bool {
	n, r := a.n, a.ring()
	if a.filled == n && r.at(int(a.next)) {
		a.count--
	}
	flag := significant && (over || int(a.count) < limit)
	counted := flag && (overCounts || !over)
	r.set(int(a.next), counted)
	if counted {
		a.count++
	}
	a.next = (a.next + 1) % n
	a.filled = min(a.filled+1, n)
	return flag
}

// last is whether the record admitted last was flagged (false before any): the alarm's state
// that detect.flag_clear's deadband holds, and that a key's alarm goes on from (admitRun). Only
// a cap that counts every flag knows it (a key's); the stage's ring holds alarm starts, and its
// series' alarms are seriesAlarms'.
func (a *alarmCap) last() bool {
	if a.filled == 0 {
		return false
	}
	return a.ring().at(int((a.next - 1 + a.n) % a.n))
}

// admitRun is a key's cap (detect.key_by: key): admitOver with detect.flag_clear's deadband. A
// record that is not significant but whose series' previous record was flagged (previous) and
// whose score reaches clear is flagged too (held). The cap limits the starts of the key's
// alarms, not the records of one going on: a record that continues its alarm (the previous
// record flagged, its own score at least clear: significant or held) is flagged even when the
// window's flags have spent the cap; one that would start an alarm is flagged only while fewer
// than limit of the key's window's records are. Every flag counts, so after an alarm longer
// than the cap the key starts no other until its flags leave its window: a key's fault longer
// than its window (200 records) is learnt, and its return to the former level would otherwise
// be flagged at once as a new alarm (docs/BENCHMARKS.md §13.3; counting an alarm once there
// doubled those flags, and 2-3x those of a key whose model lags a fast drift, §12.30.2). What
// bounds an alarm is the model, which takes a fault that has filled its window as the new
// normal (outcastFloor; a key's: keyed_outcast.go). It returns the flag and whether the record
// was held.
func (a *alarmCap) admitRun(significant, previous bool, score, clear float64, limit int) (flag, held bool) {
	held = !significant && score >= clear && previous
	flag = a.admitOver(significant || held, previous, true, limit)
	return flag, held && flag
}

// admitStart is the stage's cap (the global model's path: every stream without key_by: key, and
// a key's records while it warms): admitRun's deadband and rule, where previous is the record's
// series' (seriesAlarms), but an alarm counts once, at its start: a record continuing its
// series' alarm is flagged and not counted. So the cap bounds the alarms started in any
// `window` records to limit (a stream of isolated significant records: limit flags), and one
// alarm however long leaves the next one free to start: under every flag counting, one fault of
// 6,000 records at the defaults kept the stream from starting any other alarm for about a
// window (a second fault 3,000 records later suppressed whole: docs/BENCHMARKS.md §12.30.1,
// §12.30.2). A fault's alarm is bounded by the model (about a window: outcastFloor), and a page
// per alarm by detect.alert_cooldown; a stream whose model lags it (a drift of tens of sd a
// window) is flagged while it lags, where counting every flag suppressed most of it (§12.30.2).
// Under a cap of records (before §12.30.1) a plant's fault of hours stopped being flagged after
// 1,000 records.
func (a *alarmCap) admitStart(significant, previous bool, score, clear float64, limit int) (flag, held bool) {
	held = !significant && score >= clear && previous
	flag = a.admitOver(significant || held, previous, false, limit)
	return flag, held && flag
}

// seriesAlarms is the deadband's memory of the series in alarm on the global model's path: the
// series whose last record was flagged, with that record's position in the stream. A record's
// series is its key (a fleet on one topic, interleaved by sensor: the sensor's previous record
// decides its hold, not another sensor's); the records without a key or with an empty one are
// one series (as key_by: key and alert_cooldown read them). Under key_by: key a key's series
// is here while it warms and its own cap's once its model scores it: its first records by its
// model end it here, an evicted key's last flag comes back (keyed_handover.go). Positions
// count every record of the stream, so a flag more than `window` records back no longer holds
// whichever model scored the records between. Bounded: past twice the cap's starts per window
// stale entries are dropped, so the series kept are about those in alarm (at most alarm_rate x
// window of them start in a window), and all are forgotten once the newest is stale. Nothing is
// looked up while no series is in alarm (a healthy stream's cost: a length check a record).
type seriesAlarms struct {
	keyed   map[string]uint64 // key -> position of its last record, which was flagged
	keyless uint64            // position of the last keyless record if it was flagged, else 0
	newest  uint64            // the newest position in keyed
	pos     uint64            // the stream's records before the batch (positions start at 1)
}

// expire forgets every series whose flag is more than window records before position q: all of
// keyed when its newest is, so that the records go back to a length check each (a key flagged
// once and never seen again, an event id, would keep it otherwise). It reports whether any
// series is left.
func (s *seriesAlarms) expire(q uint64, window int) bool {
	if s.keyless != 0 && q-s.keyless > uint64(window) {
		s.keyless = 0
	}
	if len(s.keyed) > 0 && q-s.newest > uint64(window) {
		clear(s.keyed)
	}
	return s.keyless != 0 || len(s.keyed) > 0
}

// inAlarm reports whether the series of key (empty: the keyless records') had its previous
// record flagged, at most window records before position q.
func (s *seriesAlarms) inAlarm(key []byte, q uint64, window int) bool {
	at := s.keyless
	if len(key) > 0 {
		if len(s.keyed) == 0 {
			return false
		}
		at = s.keyed[string(key)] // (a lookup by a converted []byte: no allocation)
	}
	return at != 0 && q-at <= uint64(window)
}

// note records the flag of key's record at position q, in stream order, dropping stale series
// past 2 x limit.
func (s *seriesAlarms) note(key []byte, q uint64, flagged bool, window, limit int) {
	switch {
	case len(key) == 0 && flagged:
		s.keyless = q
	case len(key) == 0:
		s.keyless = 0
	case !flagged:
		s.forget(key)
	default:
		if s.keyed == nil {
			s.keyed = map[string]uint64{}
		}
		s.keyed[string(key)], s.newest = q, max(s.newest, q) // (a key handed back: an earlier position)
		if len(s.keyed) > 2*limit {
			for k, at := range s.keyed {
				if q-at > uint64(window) {
					delete(s.keyed, k)
				}
			}
		}
	}
}

// forget ends key's series: its record just taken was not flagged on this path.
func (s *seriesAlarms) forget(key []byte) {
	if len(key) == 0 {
		s.keyless = 0
	} else if len(s.keyed) > 0 {
		delete(s.keyed, string(key))
	}
}

// capLimit is the number of flags the cap allows per window of records (the stage's window,
// or a key's): alarm_rate of it, at least one.
func capLimit(alarmRate float64, window int) int {
	return max(1, int(math.Floor(alarmRate*float64(window))))
}

// explainDeviations names, for every flagged or suppressed record, the features farthest from
// the window's median in robust standard deviations (the ranking's tail distributions): the
// farthest, and any other at least 3 robust sd out and at least half as far, at most three.
// byKey: explain the records scored by a key's model (keyed.go, with that key's r) or the others.
func explainDeviations(r *Ranker, features []string, raw [][]float32, scores []batch.Score, byKey bool) {
	if r == nil || r.Tail == nil {
		return
	}
	type dev struct {
		j int
		z float64
	}
	var devs []dev
	n := len(scores)
	var rows []int
	if n >= 2*scoresGrain { // (a batch's: its flagged rows found on the cores; a key's record alone allocates nothing)
		rows = rowsWhere(scores, func(sc *batch.Score) bool { return (sc.Outlier || sc.Suppressed) && sc.ByKey == byKey })
		n = len(rows)
	}
	for t := range n {
		i := t
		if rows != nil {
			i = rows[t]
		}
		sc := &scores[i]
		if !sc.Outlier && !sc.Suppressed || sc.ByKey != byKey {
			continue
		}
		devs = devs[:0]
		for j := range raw {
			devs = append(devs, dev{j, r.Tail.Deviation(j, raw[j][i])})
		}
		slices.SortStableFunc(devs, func(a, b dev) int {
			switch za, zb := math.Abs(a.z), math.Abs(b.z); {
			case za > zb:
				return -1
			case za < zb:
				return 1
			}
			return 0
		})
		sc.Deviations = sc.Deviations[:0]
		for t, d := range devs {
			if t > 0 && (t >= 3 || math.Abs(d.z) < 3 || math.Abs(d.z) < math.Abs(devs[0].z)/2) {
				break
			}
			sc.Deviations = append(sc.Deviations, batch.Deviation{Feature: features[d.j], RobustSD: d.z})
		}
	}
}

// alertGroups folds continuing alerts per key (detect.alert_cooldown): the last alert's time
// of each key and the flagged records folded into it since. Bounded: at maxAlertKeys keys the
// ended groups are pruned, then the oldest alerts' (alert_prune.go: one alert too many for
// each key evicted within its cooldown, never one lost).
// A group is this instance's alert: it goes with its partition at a rebalance (dropOutside),
// since another instance alerts for the key while it owns the partition.
type alertGroups struct {
	open map[string]*alertGroup
	// owns says whether the instance owns a partition now, and the generation of the
	// assignment that says so (nil: every one; OwnPartitions): a record of a partition moved
	// away, fetched before the rebalance and scored after it, opens no group, which would
	// outlive the drop; its key's flagged away records fold into an away group of their own
	// (away: alert_away.go), never saved.
	owns func(partition int32) (owned bool, gen int32)
	away map[string]*awayGroup
	// gen is the consumer group generation the groups were last checked against (dropOutside's
	// caller: Stage.DropAlertsOutside), genKnown whether there was one: saved with them (alarm
	// state format 4), so that the first assignment after a restart keeps them only when it
	// follows that generation (pipeline keyScope.stayed).
	gen      int32
	genKnown bool
	// unchecked: restored from an alarm state and not yet checked against an assignment
	// (Stage.DropAlertsOutside).
	unchecked bool
	// taken is, of each partition, the offset after the furthest record the groups took (fold;
	// a partition read again does not lower it): they hold no effect of a record at or past it.
	// confirmed are those a clean stop's final commit left at or past it, taken then moved to
	// the commit (confirm): every record below taken written, acknowledged and committed by this
	// instance, none after. Both are saved with the groups (alarm state format 4); restored are the saved ones,
	// until the first assignment after the restart compares them with its committed offsets
	// (pipeline keyScope.stayed). A record taken after clears confirmed and restored.
	taken     map[int32]int64
	confirmed map[int32]bool
	restored  *AlertsAt
	// clock is each partition's time, the newest timestamp of its records taken (-1: records
	// of no known partition), by which prune tells the groups that ended; evicted counts the
	// groups dropped within their cooldown for the bound (AlertGroupEvictions).
	clock   map[int32]int64
	evicted uint64
	aged    []agedGroup // prune's scratch
	// carried are the counts of groups pruned with records folded into them, for their keys'
	// next alerts, and lost those dropped past carried's bound (alert_carry.go).
	carried map[string]*alertGroup
	lost    uint64
}

// AlertsAt is where the alert groups restored from the alarm state (format 4) stand on each
// partition: Taken, the offset after the furthest record of it they took (they hold no effect of
// one at or past it; a partition without records taken has none), and Committed, those whose
// Taken a clean stop's final commit left as the group's committed offset.
type AlertsAt struct {
	Taken     map[int32]int64
	Committed map[int32]bool
}

// take notes the furthest offset of each partition in b (a batch holds a partition's records
// in fetch order, in runs: one map write a run) and clears confirmed and restored.
func (g *alertGroups) take(b *batch.Batch) {
	parts, offs := b.Partitions(), b.Offsets()
	if len(parts) == 0 || len(offs) != len(parts) {
		return
	}
	if g.taken == nil {
		g.taken = map[int32]int64{}
	}
	for i, p := range parts {
		if i+1 == len(parts) || parts[i+1] != p {
			if t, ok := g.taken[p]; !ok || offs[i]+1 > t {
				g.taken[p] = offs[i] + 1
			}
		}
	}
	g.confirmed, g.restored = nil, nil
}

// confirm marks the partitions whose committed offset (committed: this instance's, after its
// final commit) is at or past taken's, and takes it as theirs: every record below it written
// and acknowledged, those past taken's (dead letters, records passed unscored) of no effect on
// the groups, so they stand for exactly the records below it.
func (g *alertGroups) confirm(committed map[int32]int64) {
	g.confirmed = map[int32]bool{}
	for p, off := range g.taken {
		if c, ok := committed[p]; ok && c >= off {
			g.taken[p], g.confirmed[p] = c, true
		}
	}
}

type alertGroup struct {
	at    int64 // the alert's timestamp, ms (0 when it had none)
	timed bool  // the alert's record had a timestamp (at): 0 ms is a time too
	// (fold opens groups of timed alerts only; an untimed one is read from an alarm state file
	// of an older release, and folds nothing.)
	folded int
	// dropped: the group was dropped (dropOutside: its partition moved away, a generation was
	// missed, a restart could not vouch for it) with records folded into it. It folds nothing
	// more, and is left only to carry folded to the key's next alert here: those records were
	// folded into this instance's previous alert of the key, and no other alert counts them.
	// Whatever its partition does after, it stays until that alert (or the bound: prune takes
	// it as an ended group with records folded into it).
	dropped bool
	// partition is the alert's record's source partition (-1: not known, a group read from an
	// alarm state file of format 1 or 2): a key's records come from one partition when the
	// producers partition by key; the records without a key, one series, from any.
	partition int32
}

const maxAlertKeys = 1 << 16

// cooldownMS is the cooldown in whole milliseconds, the unit of record times, rounded up: d ms
// is within the cooldown while d < cooldownMS (cut down, a cooldown under 1ms folded nothing);
// fold and prune read it alike.
func cooldownMS(cooldown time.Duration) int64 {
	ms := cooldown.Milliseconds()
	if cooldown%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// fold takes the flagged records of b in order: each one within its key's cooldown after the
// key's last alert is Grouped, with that alert's time; any other is an alert carrying Folded.
// Off (cooldown 0, as a reload can set it), every flagged record is an alert of its own: the
// groups are forgotten, so that on again none folds a record into an alert that others followed.
func (g *alertGroups) fold(b *batch.Batch, cooldown time.Duration) {
	g.take(b)
	if cooldown <= 0 {
		g.open, g.away, g.carried = nil, nil, nil
		return
	}
	keys, ts, parts := b.Keys(), b.Timestamps(), b.Partitions()
	// Unsigned, a difference of two far times does not overflow into a small one.
	within := uint64(cooldownMS(cooldown))
	if g.open == nil {
		g.open = map[string]*alertGroup{}
	}
	if ts == nil {
		return
	}
	next := 0 // (the clocks stand at the records before next: a prune reads them as of record i)
	for _, i := range rowsWhere(b.Scores, func(sc *batch.Score) bool { return sc.Outlier }) {
		sc := &b.Scores[i]
		// A record without a timestamp (a Kafka timestamp of -1 or 0) is an alert of its own:
		// its distance from the key's last alert is unknown, so it folds into no group and opens
		// none; the key's group stays for its timed records (an alert at 0 ms had a time).
		if !ts.IsValid(i) {
			continue
		}
		g.advance(ts, parts, next, i+1)
		next = i + 1
		k := string(recordKey(keys, i))
		at := int64(ts.Value(i))
		o, ok := g.open[k]
		if ok && o.timed && !o.dropped && at >= o.at && uint64(at-o.at) < within {
			sc.Grouped, sc.AlertAt, sc.AlertTimed = true, o.at, o.timed
			o.folded++
			continue
		}
		part := partitionOf(parts, i)
		if g.owns != nil {
			if owned, gen := g.owns(part); !owned {
				g.foldAway(sc, k, o, at, part, gen, within)
				continue
			}
		}
		if ok {
			sc.Folded = o.folded
		}
		sc.Folded += g.takeCarried(k) + g.awayCount(k)
		if !ok && len(g.open) >= maxAlertKeys {
			g.prune(cooldown)
		}
		g.open[k] = &alertGroup{at: at, timed: true, partition: part}
	}
	g.advance(ts, parts, next, ts.Len())
}

// dropOutside forgets the groups whose partition keep refuses (moved to another instance; one
// of an unknown partition too, unless keep takes -1) and returns how many. The key's next
// flagged record here is then a new alert: the other instance may have alerted since (at most
// one alert too many, as past maxAlertKeys; folded into this instance's old alert, it would not
// be emitted under emit: outliers and would name an alert that others followed). A group with
// records folded into it stays, dropped (folding nothing), for its count: the key's next alert
// here says it (folded_into_previous_alert); but where counted (nil: everywhere) refuses its
// partition it goes with its count, as before (Stage.DropAlertsOutside: a restart's records
// read again). The away groups go too but those opened under the
// assignment of generation gen (dropAway: never counted, duplicates of the owners' alerts),
// theirs likewise left to their keys' next alerts; cooldown is the one in force, for the bound.
func (g *alertGroups) dropOutside(gen int32, keep, counted func(partition int32) bool, cooldown time.Duration) int {
	n := 0
	for k, o := range g.open {
		switch {
		case o.dropped || keep(o.partition):
		case o.folded > 0 && (counted == nil || counted(o.partition)):
			o.dropped = true
			n++
		default:
			delete(g.open, k)
			n++
		}
	}
	g.dropAway(gen, cooldown)
	return n
}
