package detect

import (
	"time"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// The away groups (issue 20 item 4). A record of a partition the instance no longer owns
// (fetched before a rebalance, scored after it: alertGroups.owns says so) is its new owner's
// to page for: this member commits none of those records ("partition moved to another member"
// in stages/ingest), so the new owner reads them again from the committed offset and alerts.
// Here such a record opens no group (one would outlive the rebalance's drop of its partition's
// groups, and fold the partition's records after its return into an alert of before the move);
// before, each such flagged record was therefore an alert of its own, a storm of duplicates
// for a key in alarm (one per record fetched and waiting as the partition left). Now the first
// flagged away record of a key is an alert (a duplicate of the new owner's page, as before) and
// opens an away group: the key's later flagged away records within the cooldown fold into it
// (Grouped, AlertAt naming it, as in any group). Folding them loses no page: each is the new
// owner's too. An away group:
//   - folds only away records: a record of a partition owned never reads it;
//   - is never saved in the alarm state (a restart has none) nor counted by the alert groups'
//     bound (maxAlertKeys): it has a bound of its own, maxAwayKeys, and never evicts a real
//     group;
//   - lives one generation at most: the one whose assignment moved its partition away (owns
//     names it). DropAlertsOutside drops it when it takes a later one, or when its partition is
//     owned again, so it is never carried to a partition that comes back (whose records open
//     real groups, as before). A group opened between the assignment and the detect goroutine's
//     turn at it (a batch being scored, or in flight on the device, as the rebalance came)
//     survives that turn: the records still queued fold into it.
type awayGroup struct {
	at        int64 // the alert's timestamp, ms
	folded    int
	partition int32
	gen       int32 // the generation of the assignment without the partition (owns')
}

// maxAwayKeys bounds the away groups: the keys flagged among the records in flight as their
// partition moved away (the fetched queue and the batches being scored), a few hundred for a
// queue of tens of thousands of records at a percent flagged. At the bound the ended ones are
// dropped first; if none has, the record is an alert of its own and opens none (as before away
// groups: one alert too many, never one lost).
const maxAwayKeys = maxAlertKeys / 16

// foldAway takes a flagged away record of key k (at ms, of partition part, which the
// assignment of generation gen does not hold) whose key's real group, if any (o), it did not
// fold into: into k's away group within the cooldown (within ms), else an alert opening one.
func (g *alertGroups) foldAway(sc *batch.Score, k string, o *alertGroup, at int64, part, gen int32, within uint64) {
	w, ok := g.away[k]
	if ok && at >= w.at && uint64(at-w.at) < within {
		sc.Grouped, sc.AlertAt, sc.AlertTimed = true, w.at, true
		w.folded++
		return
	}
	// An alert: it tells the counts folded into the key's earlier alerts here that no alert
	// told yet, its real group's, its away group's and a carried one; the real group goes (its
	// count told), as before away groups.
	if o != nil {
		sc.Folded = o.folded
		delete(g.open, k)
	}
	if ok {
		sc.Folded += w.folded
	}
	sc.Folded += g.takeCarried(k)
	if !ok && len(g.away) >= maxAwayKeys && !g.pruneAway(int64(within)) {
		return
	}
	if g.away == nil {
		g.away = map[string]*awayGroup{}
	}
	g.away[k] = &awayGroup{at: at, partition: part, gen: gen}
}

// pruneAway drops the away groups whose cooldown (ms) has ended by their partition's clock (each
// count not told yet carried to its key's next alert: alert_carry.go), and says whether that
// left room for one more.
func (g *alertGroups) pruneAway(cooldown int64) bool {
	for k, w := range g.away {
		if now, known := g.clock[w.partition]; known && now >= w.at && uint64(now)-uint64(w.at) >= uint64(cooldown) {
			g.carry(k, &alertGroup{at: w.at, timed: true, folded: w.folded, partition: w.partition})
			delete(g.away, k)
		}
	}
	return len(g.away) < maxAwayKeys
}

// awayCount is the count of records folded into key k's away group that no alert told yet, for
// a real alert of k now (its partition back before the detect goroutine's turn at the
// assignment, or another partition's record of the key): told there, the group's count starts
// again at 0 (the group stays, folding away records).
func (g *alertGroups) awayCount(k string) int {
	w, ok := g.away[k]
	if !ok {
		return 0
	}
	n := w.folded
	w.folded = 0
	return n
}

// dropAway forgets the away groups at the detect goroutine's turn at the assignment of
// generation gen: all but those opened under that very assignment whose partition it still
// does not hold (owns, asked now). One with records folded into it that no alert told leaves
// its count to its key's next alert here, as a dropped real group (dropOutside): added to the
// key's real group when it has one (open or dropped: its count goes to the key's next alert),
// else a dropped group of the key in the real groups, counted by their bound (a prune to make
// room carries the counts it drops: alert_carry.go).
func (g *alertGroups) dropAway(gen int32, cooldown time.Duration) {
	for k, w := range g.away {
		if w.gen == gen && g.owns != nil {
			if owned, _ := g.owns(w.partition); !owned {
				continue
			}
		}
		delete(g.away, k)
		if w.folded == 0 || cooldown <= 0 {
			continue
		}
		if o, ok := g.open[k]; ok {
			o.folded += w.folded
			continue
		}
		if len(g.open) >= maxAlertKeys {
			g.prune(cooldown)
		}
		if g.open == nil {
			g.open = map[string]*alertGroup{}
		}
		g.open[k] = &alertGroup{at: w.at, timed: true, folded: w.folded + g.takeCarried(k), partition: w.partition, dropped: true}
	}
}
