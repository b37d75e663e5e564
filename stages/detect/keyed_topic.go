package detect

import (
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// Models per key in a builder/scorer deployment (run.role; docs/DESIGN.md "Models per key"):
// the builder keeps every key's window and builds its models exactly as role all does (it
// scores its records by their key's model too, to know which are significant and stay out of
// the key's next build, and drops those scores); the pipeline takes the keys whose model
// changed (TakeKeyModels) and publishes them on the model topic, one message per key;
// scorers install them (InstallKeyModels) and score each key's records with the newest they
// have, applying each key's alarm cap themselves. A scorer's keys keep no window.

// KeyModel is one key's model as a builder hands it out (Model nil: the key was evicted, so its
// published model no longer holds) and a scorer installs it (Version: the builder's; Partition:
// the input partition of the key's latest record at the builder, which scorers keep their
// partitions' keys by).
type KeyModel struct {
	Key       string
	Version   uint64
	Partition int32
	Model     *Ranker
}

// newKeyed is an empty keyedScorer of the stage's role.
func (s *Stage) newKeyed() *keyedScorer {
	k := newKeyedScorer()
	k.follower, k.cycles = s.deps.Role == RoleScorer, s.cycles
	if s.deps.Role == RoleBuilder {
		k.dirty = map[string]int32{}
	}
	k.hand.on = s.deps.Role != RoleBuilder // (a builder's keys flag nothing: their pass decides alone)
	return k
}

// takeStateOf makes the keys of o (loaded, without a device) and its fleet's pool k's own, and
// puts the warm keys' models on k's device.
func (k *keyedScorer) takeStateOf(o *keyedScorer) {
	k.keys, k.lru, k.bytes, k.warm = o.keys, o.lru, o.bytes, o.warm
	k.fleet = o.fleet
	if k.dev == nil {
		return
	}
	var warm []*keyState
	for _, st := range k.keys {
		if st.model != nil {
			warm = append(warm, st)
		}
	}
	k.install(warm)
}

// keyedBuilderPass runs a builder's batch through its keys (keyed.go's score: each warm key's
// records scored by its model, every record pushed into its key's window, the builds when due)
// and drops the scores: a builder outputs nothing.
func (s *Stage) keyedBuilderPass(b *batch.Batch) error {
	raw, _, err := s.columns(b)
	if err != nil {
		return err
	}
	b.Scores = make([]batch.Score, b.Len())
	s.keyed.score(&s.cfg, s.features, b, raw, b.Scores)
	s.keyed.finishBuilds()
	s.keyed.pass = keyedPass{} // (a builder ranks no recent scores)
	b.Scores = nil
	return nil
}

// TakeKeyModels returns, on a builder, the keys whose model changed since the last call, each
// with its newest model, and the keys evicted since (Model nil), in no particular order; nil on
// the other roles or without key_by.
func (s *Stage) TakeKeyModels() []KeyModel {
	s.keysQuiet()
	if s.keyed == nil || len(s.keyed.dirty) == 0 {
		return nil
	}
	out := make([]KeyModel, 0, len(s.keyed.dirty))
	for key, part := range s.keyed.dirty {
		km := KeyModel{Key: key, Partition: part}
		if st, ok := s.keyed.keys[key]; ok {
			km.Model, km.Partition = st.model, st.partition // (nil: evicted, and back cold since)
		}
		out = append(out, km)
	}
	clear(s.keyed.dirty)
	return out
}

// InstallKeyModels makes a scorer's keys serve the builder's models; a KeyModel without a model
// drops the key (the builder evicted it: its records are scored by the global model until it
// is warm again there). A version at or below the one a key serves is ignored, so a replayed
// model topic never moves a key back (versions only grow, across builders: modelkeys.go).
// Installed keys count as seen now (least-recently-seen order). Without key_by it does nothing.
func (s *Stage) InstallKeyModels(ms []KeyModel) {
	s.keysQuiet()
	k := s.keyed
	if k == nil || !k.follower {
		return
	}
	d := len(s.features)
	var onDevice []*keyState
	for _, m := range ms {
		if st, ok := k.keys[m.Key]; ok && m.Version <= st.version {
			continue
		}
		if m.Model == nil {
			if st, ok := k.keys[m.Key]; ok {
				k.evict(st, d)
			} else if c, ok := s.ext.keyCaps[m.Key]; ok { // (retired while the scorer was down: as its eviction)
				k.hand.evictedCap(m.Key, &c.cap)
				delete(s.ext.keyCaps, m.Key)
			}
			continue
		}
		st := k.state(m.Key, &s.cfg, d)
		st.model, st.version, st.partition = m.Model, m.Version, m.Partition
		if c, ok := s.ext.keyCaps[m.Key]; ok { // (its alarm before the restart goes on)
			*st.cap = c.cap
			delete(s.ext.keyCaps, m.Key)
		}
		k.markWarm(st)
		if k.dev != nil {
			onDevice = append(onDevice, st)
		}
	}
	if k.dev != nil { // each key still held once (installed twice, or evicted by a later one)
		seen := make(map[*keyState]bool, len(onDevice))
		live := onDevice[:0]
		for _, st := range onDevice {
			if !seen[st] && k.keys[st.key] == st {
				seen[st] = true
				live = append(live, st)
			}
		}
		k.install(live)
	}
}

// DropKeysOutside drops a scorer's keys whose partition keep refuses (after a rebalance: the
// partitions moved to another scorer) and returns how many it dropped. Without key_by, or on
// another role, it does nothing. (A rebalance drops the alert groups of those partitions on
// every role first: DropAlertsOutside.)
func (s *Stage) DropKeysOutside(keep func(partition int32) bool) int {
	s.keysQuiet()
	k := s.keyed
	if k == nil || !k.follower {
		return 0
	}
	var drop []*keyState
	for _, st := range k.keys {
		if !keep(st.partition) {
			drop = append(drop, st)
		}
	}
	for key, c := range s.ext.keyCaps { // (saved before a restart: their keys are another scorer's)
		if !keep(c.partition) {
			delete(s.ext.keyCaps, key)
		}
	}
	for _, st := range drop {
		k.remove(st, len(s.features)) // (moved, not evicted: not counted, nor its alarm handed back)
	}
	return len(drop)
}

// DropAlertsOutside forgets the alert groups (detect.alert_cooldown) whose alert's partition
// keep refuses (after a rebalance: moved to another instance, which alerts for their keys
// while it owns them, or not continuously this instance's: pipeline keyScope.stayed; a group
// of an unknown partition, from an alarm state of format 1 or 2, too unless keep takes -1) and
// returns how many. gen is the consumer group generation keep is of: the groups are checked
// against it from here (AlertsGeneration), and saved with it (alarm state format 4). Under
// key_by: none too, where the groups are per record key on the global model's path: a
// partition's keys are another instance's all the same. A key whose partition comes back
// starts a new alert (one too many at most, never one lost), not one folded into this
// instance's alert of before the move.
//
// A group dropped with records folded into it keeps its count for the key's next alert here
// (alertGroup.dropped), but at the first call after a restore only where its partition's
// restored offset was confirmed committed at a clean stop (AlertsAt.Committed): after a crash
// or a kill the groups may hold records whose outputs were never written, read again from the
// committed offset and folded anew, and their count would be told twice (nor is the alert it
// names sure to have been written); those counts go, as before.
func (s *Stage) DropAlertsOutside(gen int32, keep func(partition int32) bool) int {
	s.groups.gen, s.groups.genKnown = gen, true
	var counted func(int32) bool
	if s.groups.unchecked {
		r := s.groups.restored
		counted = func(p int32) bool { return r != nil && r.Committed[p] }
		s.groups.unchecked = false
	}
	if r := s.groups.restored; r != nil { // a partition kept still holds no record past its offset
		for p, off := range r.Taken {
			if _, ok := s.groups.taken[p]; !ok && keep(p) {
				if s.groups.taken == nil {
					s.groups.taken = map[int32]int64{}
				}
				s.groups.taken[p] = off
			}
		}
		s.groups.restored = nil
	}
	for p := range s.groups.taken { // (its groups go: none holds its records)
		if !keep(p) {
			delete(s.groups.taken, p)
		}
	}
	n := s.groups.dropOutside(gen, keep, counted, s.cfg.AlertCooldown)
	if n > 0 {
		s.deps.Log.Info().Int("alert_groups", n).Msg("alert groups dropped (their partition moved away, a generation was missed, or a restart could not vouch for it): their keys' next flagged records are new alerts")
	}
	return n
}

// AlertsGeneration is the consumer group generation the alert groups were last checked against
// (DropAlertsOutside), or the one restored with them from the alarm state (format 4); ok false
// when none: no assignment yet, or a state of format 3 or before.
func (s *Stage) AlertsGeneration() (gen int32, ok bool) { return s.groups.gen, s.groups.genKnown }

// AlertsRestored is where the alert groups restored from the alarm state (format 4) stand on
// each partition, until the first DropAlertsOutside (nil then, and without a restore, or from a
// file of format 3 or before): the first assignment's committed offsets are checked against it
// (pipeline keyScope.stayed).
func (s *Stage) AlertsRestored() *AlertsAt { return s.groups.restored }

// AlertsTaken is the offset after the furthest record of partition p the alert groups took (a
// partition read again does not lower it), and false when they took none since it was last
// dropped (DropAlertsOutside): a partition whose groups stay at a missed generation must have
// had every record they took committed (pipeline keyScope.stayed).
func (s *Stage) AlertsTaken(p int32) (int64, bool) {
	off, ok := s.groups.taken[p]
	return off, ok
}

// ConfirmAlertsCommitted tells the stage, at a clean stop, the consumer group's committed
// offsets after the final commit (this instance's: ingest.Source.Committed): the partitions
// whose offset is at or past the one after the furthest record the alert groups took of them
// are saved with it, as committed (AlertsAt after the restart). Call it after the last batch and before Close,
// whose save writes them.
func (s *Stage) ConfirmAlertsCommitted(committed map[int32]int64) { s.groups.confirm(committed) }

// AlertGroupEvictions counts the alert groups evicted within their cooldown so far (a running
// total): past maxAlertKeys keys with open groups, after those whose cooldown had ended, the
// oldest alerts' go (alert_prune.go), each key's next flagged record within its cooldown an
// alert of its own. Read it between Process calls.
func (s *Stage) AlertGroupEvictions() uint64 { return s.groups.evicted }

// OwnPartitions gives the stage what says whether the instance owns a partition now (its
// consumer group's latest assignment), and that assignment's generation, so that a record of a
// partition already moved away opens no alert group (DropAlertsOutside dropped that
// partition's) but an away group, which lives until DropAlertsOutside takes a later generation
// (alert_away.go). Before it is given, or nil: every partition. Call it before Process runs,
// or between its calls.
func (s *Stage) OwnPartitions(owns func(partition int32) (owned bool, gen int32)) {
	s.groups.owns = owns
}

// KeyVersions are the versions of the keys' models a scorer serves, by key (nil without key_by).
func (s *Stage) KeyVersions() map[string]uint64 {
	s.keysQuiet()
	if s.keyed == nil {
		return nil
	}
	out := make(map[string]uint64, s.keyed.warm)
	for key, st := range s.keyed.keys {
		if st.model != nil {
			out[key] = st.version
		}
	}
	return out
}

// KeyModelOf is the model a key scores with now (nil: none), and its version.
func (s *Stage) KeyModelOf(key string) (*Ranker, uint64) {
	s.keysQuiet()
	if s.keyed == nil {
		return nil, 0
	}
	if st, ok := s.keyed.keys[key]; ok {
		return st.model, st.version
	}
	return nil, 0
}

// ScoreRecord is the combined score a key's model gives a record of values x (one per feature):
// what a scorer's verdict for that record rests on (it is significant at min_score).
func (r *Ranker) ScoreRecord(x []float32) float64 {
	cols := make([][]float32, len(x))
	for j := range x {
		cols[j] = x[j : j+1]
	}
	dens, dist := make([]float64, 1), make([]float64, 1)
	r.Tail.Score(cols, dens)
	solvingset.KNNWeights(r.Ref.Points, r.distanceSpace(cols, nil), r.Ref.K, 1, dist)
	return r.combine(dens[0], dist[0])
}
