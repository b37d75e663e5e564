package detect

// The counts of the alert groups pruned with records folded into them (alert_prune.go's steps 2
// and 3: past maxAlertKeys keys; the away groups' at their own bound: alert_away.go). Those records were folded into this instance's alert of the
// key, and no other alert counts them; before, the prune forgot them (the key's next alert said
// folded_into_previous_alert 0). Now a pruned group's count is carried: held in carried, the
// key's next alert here adds it to its folded_into_previous_alert, as a dropped group's
// (alarm.go). carried has its own bound, maxCarriedKeys (a sixteenth of the groups', about 100
// bytes and the key each): a fleet evicting groups faster than their keys alert again fills
// it, and then the oldest quarter's counts go to lost (AlertFoldedLost, the metric
// outlierd_alert_folded_lost_total), so that every folded record is either told by a later
// alert of its key or counted there (TestAlertGroupEvictedKeepsCount). A carried count is a
// dropped group in all but its map: saved in the alarm state as one (format 5's flag bit 1;
// no format change), restored among the groups (the prune at the restore carries it again past
// the bound), kept at a drop as dropped groups are, forgotten with the groups when the
// cooldown is set to 0. A key has a carried count or a group, never both (a new group takes
// the count into its alert).
const maxCarriedKeys = maxAlertKeys / 16

// carry keeps o's count (key k's group, pruned, or its away group's) for k's next alert
// (nothing when none folded): added to k's real group when it has another one (its next alert
// tells that one's count).
func (g *alertGroups) carry(k string, o *alertGroup) {
	if o == nil || o.folded == 0 {
		return
	}
	if r, ok := g.open[k]; ok && r != o {
		r.folded += o.folded
		return
	}
	if c, ok := g.carried[k]; ok {
		c.folded += o.folded
		c.at = max(c.at, o.at)
		return
	}
	if len(g.carried) >= maxCarriedKeys {
		g.pruneCarried()
	}
	if g.carried == nil {
		g.carried = map[string]*alertGroup{}
	}
	g.carried[k] = &alertGroup{at: o.at, timed: o.timed, folded: o.folded, partition: o.partition, dropped: true}
}

// pruneCarried drops the oldest quarter of the carried counts (by their alert's time, then the
// key), adding them to lost: amortised O(1) per count carried.
func (g *alertGroups) pruneCarried() {
	c := make([]agedGroup, 0, len(g.carried))
	for k, o := range g.carried {
		c = append(c, agedGroup{at: o.at, key: k, ended: true})
	}
	n := max(len(c)/4, 1)
	selectFirst(c, n)
	for _, a := range c[:n] {
		g.lost += uint64(g.carried[a.key].folded)
		delete(g.carried, a.key)
	}
}

// takeCarried is key k's carried count, for its alert now (0: none), forgotten here.
func (g *alertGroups) takeCarried(k string) int {
	c, ok := g.carried[k]
	if !ok {
		return 0
	}
	delete(g.carried, k)
	return c.folded
}

// AlertFoldedLost counts the flagged records folded into alerts whose count no later alert will
// tell (folded_into_previous_alert): their groups pruned past maxAlertKeys keys, then their
// carried counts past maxCarriedKeys (a running total).
func (s *Stage) AlertFoldedLost() uint64 { return s.groups.lost }
