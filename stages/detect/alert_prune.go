package detect

import (
	"cmp"
	"slices"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
)

// The alert groups are bounded (maxAlertKeys): a fleet with more keys than that alerting past
// their cooldowns would otherwise grow them without end. At the limit they are pruned, in
// this order (prune):
//  1. the groups whose cooldown has ended with nothing folded into them: they fold no record
//     again and carry nothing to the key's next alert, so dropping them changes no output;
//  2. then, if that leaves more than the target, the ended groups with records folded into
//     them, oldest alert first: the key's next alert then counts none folded into its previous
//     one (folded_into_previous_alert);
//  3. then the groups still within their cooldown, oldest alert first (evicted, counted): the
//     key's next flagged record within the cooldown is an alert of its own, one alert too many
//     for each evicted key, never one lost.
//
// A group has ended when its partition's time (the newest timestamp of the partition's records
// taken so far: alertGroups.clock) is at least the cooldown past its alert: the time fold reads
// the cooldown by, per partition since a partition read behind the others (a consumer catching
// up) is behind in event time too, and the others' time would end its keys' groups early.
// Records without a timestamp move no clock; a group of a partition without a clock yet (one
// restored whose partition has had no timed record since) has not ended. The cooldown is the
// one in force at the prune: a reload that lowers it ends groups sooner, one that raises it
// does not bring back those pruned before. A record later than its partition's newest by more
// than the cooldown may find its key's group pruned (one alert too many), as it would find it
// ended had the records come in order.
//
// Pruning goes down to alertKeysSlack below the limit, so that the next prune is at least
// that many new groups away: each visits every group (and sorts the candidates of step 2 or
// 3), O(maxAlertKeys / alertKeysSlack) per new group amortised.
const alertKeysSlack = maxAlertKeys / 64

// agedGroup is a group's alert time and key, to drop the oldest first (ties by key: the same
// groups go whatever the map's order).
type agedGroup struct {
	at  int64
	key string
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
	for i := from; i < to; {
		p := partitionOf(parts, i)
		now, known := g.clock[p]
		j := i
		for ; j < to && partitionOf(parts, j) == p; j++ {
			if ts.IsValid(j) {
				if at := int64(ts.Value(j)); !known || at > now {
					now, known = at, true
				}
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

// ended says whether o's cooldown has ended by its partition's clock (an untimed group, of an
// older release's alarm state, folds nothing: ended).
func (g *alertGroups) ended(o *alertGroup, cooldown time.Duration) bool {
	if !o.timed {
		return true
	}
	now, known := g.clock[o.partition]
	// (as unsigned: a restored time far from the clock must not overflow)
	return known && now >= o.at && uint64(now)-uint64(o.at) >= uint64(cooldown.Milliseconds())
}

// prune drops groups as the comment above says until at most maxAlertKeys - alertKeysSlack
// are left, and counts those evicted within their cooldown.
func (g *alertGroups) prune(cooldown time.Duration) {
	var ended, open []agedGroup
	for k, o := range g.open {
		switch {
		case !g.ended(o, cooldown):
			open = append(open, agedGroup{o.at, k})
		case o.folded > 0:
			ended = append(ended, agedGroup{o.at, k})
		default:
			delete(g.open, k)
		}
	}
	need := len(g.open) - (maxAlertKeys - alertKeysSlack)
	need -= g.dropOldest(ended, need)
	g.evicted += uint64(g.dropOldest(open, need))
}

// dropOldest drops the n oldest groups of c (all of them when n >= len(c)) and returns how many.
func (g *alertGroups) dropOldest(c []agedGroup, n int) int {
	if n <= 0 {
		return 0
	}
	if n < len(c) {
		slices.SortFunc(c, func(a, b agedGroup) int {
			if a.at != b.at {
				return cmp.Compare(a.at, b.at)
			}
			return cmp.Compare(a.key, b.key)
		})
	} else {
		n = len(c)
	}
	for _, a := range c[:n] {
		delete(g.open, a.key)
	}
	return n
}

// afterRestore bounds the groups just read from an alarm state (a file may hold more than the
// limit): each partition's clock starts at its newest alert (its time was at least that), and
// past the limit they are pruned as fold would.
func (g *alertGroups) afterRestore(cooldown time.Duration) {
	g.clock = nil
	for _, o := range g.open {
		if !o.timed {
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
