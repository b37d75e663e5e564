package detect

import (
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
)

// The alert groups are bounded (maxAlertKeys): a fleet with more keys than that alerting past
// their cooldowns would otherwise grow them without end. A new group at the limit first prunes
// them to alertKeysSlack below it, in this order (prune):
//  1. the groups whose cooldown has ended with nothing folded into them: they fold no record
//     again and carry nothing to the key's next alert, so dropping them changes no output;
//  2. then, if that leaves too many, the ended groups with records folded into
//     them, oldest alert first: their counts are carried to the keys' next alerts
//     (folded_into_previous_alert; alert_carry.go, under a bound of its own);
//  3. then the groups still within their cooldown, oldest alert first (evicted, counted): the
//     key's next flagged record within the cooldown is an alert of its own, one alert too many
//     for each evicted key, never one lost; its count is carried as in step 2.
//
// A group has ended when its partition's time (the newest timestamp of the partition's records
// taken so far: alertGroups.clock) is at least the cooldown past its alert: the time fold reads
// the cooldown by, per partition since a partition read behind the others (a consumer catching
// up) is behind in event time too, and the others' time would end its keys' groups early.
// Records without a timestamp move no clock; a group of a partition without a clock yet (one
// restored whose partition has had no timed record since) has not ended. The cooldown is the
// one in force at the prune: a reload that lowers it ends groups sooner, one that raises it
// does not bring back those pruned before. A record out of order, behind its partition's
// newest, may find its key's group pruned though it falls within the group's cooldown (one
// alert too many).
//
// Pruning goes down to alertKeysSlack below the limit, so that the next prune is at least
// that many new groups away: each visits every group (and selects the oldest of steps 2 and 3
// in linear time), O(maxAlertKeys / alertKeysSlack) per new group amortised.
const alertKeysSlack = maxAlertKeys / 16

// agedGroup is a group's alert time and key, to drop the oldest first (ties by key: the same
// groups go whatever the map's order), those ended before those open.
type agedGroup struct {
	at    int64
	key   string
	ended bool
}

// before says whether a goes before b: ended first, then the older alert, then the key.
func (a *agedGroup) before(b *agedGroup) bool {
	if a.ended != b.ended {
		return a.ended
	}
	return a.at < b.at || a.at == b.at && a.key < b.key
}

// partitionOf is record i's source partition (-1: not known).
func partitionOf(parts []int32, i int) int32 {
	if i < len(parts) {
		return parts[i]
	}
	return -1
}

// advance moves the partitions' clocks over records from to to of a batch (ts its timestamps,
// parts its partitions): a map write per run of one partition's records.
func (g *alertGroups) advance(ts *array.Timestamp, parts []int32, from, to int) {
	vals, nulls := ts.TimestampValues(), ts.NullN() > 0
	for i := from; i < to; {
		p, j := partitionOf(parts, i), i+1
		for j < to && partitionOf(parts, j) == p {
			j++
		}
		now, known := g.clock[p]
		for k, at := range vals[i:j] {
			if (!known || int64(at) > now) && (!nulls || ts.IsValid(i+k)) {
				now, known = int64(at), true
			}
		}
		if known {
			if g.clock == nil {
				g.clock = map[int32]int64{}
			}
			g.clock[p] = now
		}
		i = j
	}
}

// ended says whether o's cooldown (ms) has ended by its partition's clock (an untimed group,
// of an older release's alarm state, and a dropped one fold nothing: ended).
func (g *alertGroups) ended(o *alertGroup, cooldown int64) bool {
	if !o.timed || o.dropped {
		return true
	}
	now, known := g.clock[o.partition]
	// (as unsigned: a restored time far from the clock must not overflow)
	return known && now >= o.at && uint64(now)-uint64(o.at) >= uint64(cooldown)
}

// prune drops groups as the comment above says until at most maxAlertKeys - alertKeysSlack
// are left, and counts those evicted within their cooldown.
func (g *alertGroups) prune(cooldown time.Duration) {
	c, ended := g.aged[:0], 0
	ms := cooldownMS(cooldown)
	for k, o := range g.open {
		switch e := g.ended(o, ms); {
		case e && o.folded == 0:
			delete(g.open, k)
		default:
			c = append(c, agedGroup{o.at, k, e})
			if e {
				ended++
			}
		}
	}
	if need := len(g.open) - (maxAlertKeys - alertKeysSlack); need > 0 {
		selectFirst(c, need)
		for i := range c[:need] {
			g.carry(c[i].key, g.open[c[i].key])
			delete(g.open, c[i].key)
		}
		g.evicted += uint64(max(need-ended, 0))
	}
	clear(c) // (no key kept alive by the scratch)
	g.aged = c[:0]
}

// selectFirst reorders c so that c[:n] are its first n by agedGroup.before (0 <= n <= len(c);
// the elements are distinct: keys differ), in O(len(c)) on average: a quickselect, median of
// three pivots (c is in the map's order; a sort took about 14 ms a prune at the bound, more
// than the walk over the groups).
func selectFirst(c []agedGroup, n int) {
	// Every element of c[:lo] goes before every one of c[lo:], every one of c[hi:] after every
	// one of c[:hi], and lo <= n <= hi.
	lo, hi := 0, len(c)
	for hi-lo > 1 {
		m, last := lo+(hi-lo)/2, hi-1
		if c[m].before(&c[lo]) {
			c[m], c[lo] = c[lo], c[m]
		}
		if c[last].before(&c[m]) {
			c[last], c[m] = c[m], c[last]
			if c[m].before(&c[lo]) {
				c[m], c[lo] = c[lo], c[m]
			}
		}
		c[m], c[last] = c[last], c[m] // (the pivot, the median, at the end)
		pivot, s := c[last], lo
		for i := lo; i < last; i++ {
			if c[i].before(&pivot) {
				c[i], c[s] = c[s], c[i]
				s++
			}
		}
		c[s], c[last] = c[last], c[s]
		switch {
		case n == s || n == s+1:
			return
		case n < s:
			hi = s
		default:
			lo = s + 1
		}
	}
}

// afterRestore bounds the groups just read from an alarm state (a file may hold more than the
// limit): each partition's clock starts at its newest alert (its time was at least that), and
// past the limit they are pruned as fold would.
func (g *alertGroups) afterRestore(cooldown time.Duration) {
	g.clock, g.carried = nil, nil // (the counts carried were saved among the groups, dropped)
	for _, o := range g.open {
		if !o.timed || o.dropped {
			continue
		}
		if now, known := g.clock[o.partition]; !known || o.at > now {
			if g.clock == nil {
				g.clock = map[int32]int64{}
			}
			g.clock[o.partition] = o.at
		}
	}
	if len(g.open) > maxAlertKeys {
		g.prune(cooldown)
	}
}
