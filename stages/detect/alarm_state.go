package detect

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// The stage's alarm state in detect.state_dir (alarms-<sequence>.osnap, beside the models and
// the keys' state): what the flags after a restart rest on besides the models, so that a fault
// flagged before a stop goes on after it as without the stop (TestRestartContinuesAlarms): the
// stream's position (seriesAlarms.pos: the keys' caps' positions, alarmCap.at, count from it),
// the stage's cap (the last window's alarm starts: admitStart), the deadband's series in alarm on the
// global model's path, and the alert groups (alert_cooldown). Written with the keys' state, at
// the same point of the stream (saveKeys), on every role that flags (not a builder's).
//
// Format version 1 (sealed envelope: magic, version, payload length, payload, SHA-256):
//
//	payload: window u32 (the stage's cap's records: detect.window), position u64,
//	         cap: next u32, filled u32, ceil(window / 64) x u64 (the counted flags, a bit each:
//	         alarm starts; a file written before §12.30.2 holds every flag, read as starts: the
//	         cap is spent sooner for at most a window after the restart),
//	         series: keyless u64, newest u64, count u64, count x { key (length u32, bytes), at u64 },
//	         groups: (format 4: generation i64), count u64, count x { key (length u32, bytes),
//	         at i64 (ms), folded u32 (format 3: partition u32; format 4: flags u8) },
//	         (format 4: taken: count u32, count x { partition u32, offset i64, flags u8 }),
//	         keys' caps (a scorer's, else none): keys.window u32, count u64, count x { key (length
//	         u32, bytes), partition u32, next u32, filled u32, ceil(keys.window / 64) x u64, at u64 }
//
// Format 2 is format 1 with a scorer's fleet pool at the end (keys.tail: fleet: the pool it
// fits from its own records; keyed_fleet_state.go): 4 bytes when empty (every other role's:
// theirs is in the keys' state), 131,396 full. A file of format 1 starts a scorer's pool empty.
//
// Format 3 is format 2 with each group's partition after its folded (u32: the alert's record's
// source partition, an int32), so that the first assignment after a restart drops the groups
// of the partitions this instance no longer owns (DropAlertsOutside), as a rebalance does. A
// group of a file of format 1 or 2 has no known partition: it is dropped at the first
// assignment (the key's next flagged record a new alert), kept where no assignment is heard.
//
// Format 4 is format 3 with what a restart needs to tell whether the groups' partitions were
// this instance's throughout (pipeline keyScope.stayed): before the groups' count the consumer
// group generation they were last checked against (i64: -1 none, else an int32 at least 0:
// Stage.DropAlertsOutside's); after each group's partition a flags byte (bit 0: the alert's
// record had a timestamp, at; else at is 0; the other bits 0); and after the groups, where they
// stand on each partition (ascending): the offset after the furthest record of it they took (at
// least 0: they hold no effect of a record at or past it; at a clean stop, moved to the final
// commit where that went past records the groups never saw) and a flags byte (bit 0:
// committed, the clean stop's final commit left the group's committed offset there: every
// record below it written, acknowledged and committed by this instance, none after; the other
// bits 0). The first assignment after a restart keeps a partition's groups whatever the
// generations when its committed offset is still a committed one's (no member committed a
// record of it in between), and by the generations (its generation the one after the saved
// one: no other member can have owned the partition in between) only when its committed offset
// is at or past the saved one: below, records whose effects the groups hold are read again (a
// crash after a save made with their outputs unwritten), and an alert among them would fold
// into its own group, never emitted. In a file of format 3 or before the generation is not
// known (the first assignment keeps no group), and a group at 0 ms had no time (as those
// releases read it). (Format 4 was written in two steps within one session, 2026-11-28: the
// generation and flags, then the offsets; no release wrote the first step.)
//
// Format 5 is format 4 with a group's flag bit 1, dropped (alertGroup.dropped: its partition
// moved away, a generation was missed or a restart could not vouch for it, with records folded
// into it; it folds nothing, and its folded is the key's next alert's
// folded_into_previous_alert). Set only with folded above 0. Before format 5 such a group was
// forgotten at the drop, its count with it: a file of format 4 holds none. The counts of the
// groups pruned past the bound, held for their keys' next alerts (alert_carry.go), are saved as
// such groups too (2026-11-29: the same meaning, no format change), at most maxCarriedKeys more.
//
// Format 6 is format 5 with the stream's recent past at the end (recent_state.go: what
// scores.recent ranks against; 12 bytes when empty, a builder's). A file of format 5 or before
// starts it empty, as every restart did before (2026-11-29).
//
// A scorer's keys' caps are its own (its keys' models come from the model topic, their flags
// from it): each is given back to its key when the key's model is installed again after the
// restart (InstallKeyModels), so that its alarm goes on; those of keys whose partitions moved
// to another scorer are dropped at the rebalance (DropKeysOutside).
//
// A file of another detect.window is refused, and the older ones with it (ErrSnapshotMismatch: a
// new window starts the cap and the series empty, as Reconfigure does; the older files predate
// it); the keys' and the models' files load all the same. Keys' caps of another keys.window are
// dropped, the rest of the file loaded (TestAlarmStateOtherKeysWindow).
const (
	alarmsSnapshotMagic = "\x89ODAS\r\n\x1a"
	// AlarmsSnapshotFormat is the newest alarm state format this code reads and writes.
	AlarmsSnapshotFormat = 6
	alarmsPrefix         = "alarms-"
)

var alarmsSnapshotFile = sealed.Format{Magic: alarmsSnapshotMagic, Name: "outlierd alarm state snapshot", Newest: AlarmsSnapshotFormat, MaxPayload: maxSnapshotPayload}

// alarmState is a copy of the stage's alarm state, for a save (the next batch changes it).
type alarmState struct {
	cap    alarmCap
	series seriesAlarms
	groups map[string]alertGroup
	// gen is the consumer group generation the groups were last checked against, genKnown
	// whether there was one (alertGroups').
	gen      int32
	genKnown bool
	// at is where the groups stand on each partition (alertGroups' taken and confirmed; format 4).
	at      AlertsAt
	keyCaps map[string]savedCap // a scorer's keys' caps
	fleet   *fleetTail          // a scorer's fleet pool (nil: empty)
	recent  *recentState        // the stream's recent past (format 6; nil: empty)
	// capsWindow is the keys' caps' records (keys.window) in the file read; capsDropped counts
	// those dropped for another keys.window (decodeAlarms).
	capsWindow, capsDropped int
}

// savedCap is a scorer's key's cap from the alarm state, with the key's partition.
type savedCap struct {
	partition int32
	cap       alarmCap
}

// alarmsCopy copies the stage's alarm state.
func (s *Stage) alarmsCopy() *alarmState {
	a := &alarmState{cap: s.alarms.clone(), series: s.series, groups: make(map[string]alertGroup, len(s.groups.open)),
		gen: s.groups.gen, genKnown: s.groups.genKnown,
		at: AlertsAt{Taken: maps.Clone(s.groups.taken), Committed: maps.Clone(s.groups.confirmed)}}
	if r := s.groups.restored; r != nil { // (no record taken since the restore: where it stood)
		a.at = AlertsAt{Taken: maps.Clone(r.Taken), Committed: maps.Clone(r.Committed)}
	}
	a.series.keyed, a.recent = maps.Clone(s.series.keyed), s.recentCopy()
	if s.keyed != nil && len(s.keyed.hand.back) > 0 { // (keys evicted since the last batch: their flags, as the next batch notes them)
		a.series.handBack(s.keyed.hand.back, s.series.pos, s.cfg.Window, capLimit(s.cfg.AlarmRate, s.cfg.Window))
	}
	for k, g := range s.groups.open {
		a.groups[k] = *g
	}
	for k, c := range s.groups.carried { // (as dropped groups: alert_carry.go; a key has one or the other)
		if o, ok := a.groups[k]; ok {
			o.folded += c.folded
			a.groups[k] = o
			continue
		}
		a.groups[k] = *c
	}
	if s.keyed != nil && s.keyed.follower {
		a.keyCaps = make(map[string]savedCap, len(s.keyed.keys)+len(s.ext.keyCaps))
		slab := make([]uint64, 0, len(s.keyed.keys)*((max(s.cfg.Keys.Window, 1)+63)/64)) // (one allocation: the copy is the save's pause)
		for k, st := range s.keyed.keys {
			c, at := *st.cap, len(slab)
			slab = append(slab, st.cap.bits...)
			c.bits = slab[at:len(slab):len(slab)]
			a.keyCaps[k] = savedCap{st.partition, c}
		}
		a.pendingCaps(s.ext.keyCaps, s.cfg.Keys.MaxKeys)
		a.fleet = s.keyed.fleet.fleetCopy()
	}
	return a
}

// pendingCaps adds to a scorer's saved keys' caps those restored and still waiting for their
// key's model (keyCaps: its partition's model topic not read yet), so that a save before their
// models came back (the one at the global model's install, a stop) keeps them: at most maxKeys
// in all (the scorer's keys' bound), the waiting ones whose key was seen last first.
func (a *alarmState) pendingCaps(keyCaps map[string]savedCap, maxKeys int) {
	var wait []string
	for k := range keyCaps {
		if _, ok := a.keyCaps[k]; !ok {
			wait = append(wait, k)
		}
	}
	slices.SortFunc(wait, func(x, y string) int { // (newest position first; then by key: the same file for the same state)
		if c := cmpU64(keyCaps[y].cap.at, keyCaps[x].cap.at); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	for _, k := range wait[:min(len(wait), max(0, maxKeys-len(a.keyCaps)))] {
		c := keyCaps[k]
		c.cap = c.cap.clone() // (InstallKeyModels gives these words to the key)
		a.keyCaps[k] = c
	}
}

// encode is the alarm state file's payload (keysWindow: keys.window, the keys' caps' records).
// The older formats' writing, for the tests of their reading, is encodeAs (a test file's): it
// shares the sections that did not change (encodeSeries, encodeGroupHead, encodeKeyCaps,
// encodeFleet).
func (a *alarmState) encode(keysWindow int) []byte {
	var e sealed.Encoder
	a.encodeSeries(&e)
	gen := int64(-1)
	if a.genKnown {
		gen = int64(a.gen)
	}
	e.U64(uint64(gen))
	groups := savable(a.groups)
	e.U64(uint64(len(groups)))
	for _, k := range groups {
		g := a.groups[k]
		encodeGroupHead(&e, k, g)
		e.U32(uint32(g.partition))
		var flags byte
		if g.timed {
			flags |= groupTimed
		}
		if g.dropped {
			flags |= groupDropped
		}
		e.Raw([]byte{flags})
	}
	parts := slices.Sorted(maps.Keys(a.at.Taken))
	e.U32(uint32(len(parts)))
	for _, p := range parts {
		e.U32(uint32(p))
		e.U64(uint64(a.at.Taken[p]))
		var flags byte
		if a.at.Committed[p] {
			flags |= takenCommitted
		}
		e.Raw([]byte{flags})
	}
	a.encodeKeyCaps(&e, keysWindow)
	encodeFleet(&e, a.fleet)
	encodeRecent(&e, a.recent)
	return e.Payload()
}

// encodeSeries writes the payload's first sections, the same in every format: the stage's cap's
// records, the position, the cap, and the deadband's series.
func (a *alarmState) encodeSeries(e *sealed.Encoder) {
	e.U32(uint32(a.cap.n))
	e.U64(a.series.pos)
	encodeCap(e, &a.cap)
	e.U64(a.series.keyless)
	e.U64(a.series.newest)
	series := savable(a.series.keyed)
	e.U64(uint64(len(series)))
	for _, k := range series {
		e.Text(k)
		e.U64(a.series.keyed[k])
	}
}

// encodeGroupHead writes what an alert group holds in every format: its key, time and folded.
func encodeGroupHead(e *sealed.Encoder, k string, g alertGroup) {
	e.Text(k)
	e.U64(uint64(g.at))
	e.U32(uint32(g.folded))
}

// encodeKeyCaps writes the keys' caps (keysWindow: their records), the same in every format.
func (a *alarmState) encodeKeyCaps(e *sealed.Encoder, keysWindow int) {
	e.U32(uint32(keysWindow))
	caps := savable(a.keyCaps)
	e.U64(uint64(len(caps)))
	for _, k := range caps {
		c := a.keyCaps[k]
		e.Text(k)
		e.U32(uint32(c.partition))
		encodeCap(e, &c.cap)
		e.U64(c.cap.at)
	}
}

// savable is m's keys in order but those longer than a key read back may be (maxKeyLength): one
// such key (the messages' keys have no bound) would make the whole file unreadable; its series,
// group or cap starts empty after a restart instead.
func savable[V any](m map[string]V) []string {
	return slices.DeleteFunc(slices.Sorted(maps.Keys(m)), func(k string) bool { return len(k) > maxKeyLength })
}

// encodeCap writes a cap's next, filled and flags (decodeCap reads them).
func encodeCap(e *sealed.Encoder, c *alarmCap) {
	e.U32(uint32(c.next))
	e.U32(uint32(c.filled))
	for _, w := range c.bits {
		e.U64(w)
	}
}

// decodeCap reads a cap's next, filled and flags into c (newAlarmCap's).
func decodeCap(d *sealed.Decoder, c *alarmCap) error {
	n := c.n
	next, filled := d.U32("cap position"), d.U32("cap filled")
	if d.Err() == nil && (next >= uint32(n) || filled > uint32(n)) {
		return snapErr("alarm cap at %d, filled %d, of %d", next, filled, n)
	}
	c.next, c.filled = int32(next), int32(filled)
	for i := range c.bits {
		c.bits[i] = d.U64("cap flags")
	}
	if d.Err() != nil {
		return sealedErr(d.Err())
	}
	if r := n % 64; r != 0 && c.bits[len(c.bits)-1]>>r != 0 {
		return snapErr("alarm cap flags past its %d records", n)
	}
	for _, w := range c.bits {
		c.count += int32(bits.OnesCount64(w))
	}
	return nil
}

// groupTimed is a group's flag (format 4): the alert's record had a timestamp.
const groupTimed = 1

// groupDropped is a group's flag (format 5): the group was dropped with records folded into it
// (alertGroup.dropped), kept for its count.
const groupDropped = 2

// takenCommitted is a partition's flag (format 4): its offset taken was committed at a clean stop.
const takenCommitted = 1

// groupBytes is the least an alert group takes in an alarm state of format version format (its
// key empty): the key's length, its time and folded, from format 3 its partition, from format 4
// its flags.
func groupBytes(format uint32) int {
	switch {
	case format >= 4:
		return 4 + 8 + 4 + 4 + 1
	case format == 3:
		return 4 + 8 + 4 + 4
	}
	return 4 + 8 + 4
}

// decodeAlarms reads an alarm state payload of this format version for a stage of detect.window
// window and keys.window keysWindow.
func decodeAlarms(format uint32, p []byte, window, keysWindow int) (*alarmState, error) {
	d := sealed.NewDecoder(p)
	n := d.U32("window")
	if d.Err() == nil && n != uint32(window) {
		return nil, fmt.Errorf("%w: alarm state of a window of %d records, detect.window is %d", ErrSnapshotMismatch, n, window)
	}
	a := &alarmState{cap: *newAlarmCap(window)}
	a.series.pos = d.U64("position")
	if err := decodeCap(d, &a.cap); err != nil {
		return nil, err
	}
	a.series.keyless, a.series.newest = d.U64("keyless series"), d.U64("newest series")
	// A series takes at least 12 bytes and a group groupBytes(format): a count the payload
	// cannot hold is refused before any allocation.
	count := func(what string, least int) (uint64, error) {
		c := d.U64(what)
		if d.Err() != nil {
			return 0, sealedErr(d.Err())
		}
		if c > uint64(d.Left()/least) {
			return 0, snapErr("%d %s cannot fit in the %d bytes left", c, what, d.Left())
		}
		return c, nil
	}
	c, err := count("series", 12)
	if err != nil {
		return nil, err
	}
	if c > 0 {
		a.series.keyed = make(map[string]uint64, c)
	}
	for range c {
		k := d.Text(maxKeyLength, "series key")
		at := d.U64("series position")
		if d.Err() == nil && (at == 0 || at > a.series.pos) {
			return nil, snapErr("series %q at %d, the stream at %d", k, at, a.series.pos)
		}
		a.series.keyed[k] = at
	}
	if format >= 4 {
		gen := int64(d.U64("groups' generation"))
		if d.Err() == nil && (gen < -1 || gen > math.MaxInt32) {
			return nil, snapErr("alert groups of generation %d", gen)
		}
		a.gen, a.genKnown = int32(max(gen, 0)), gen >= 0
	}
	if c, err = count("alert groups", groupBytes(format)); err != nil {
		return nil, err
	}
	a.groups = make(map[string]alertGroup, c)
	for range c {
		k := d.Text(maxKeyLength, "group key")
		at, folded, part, dropped := int64(d.U64("group time")), d.U32("group folded"), int32(-1), false
		timed := at != 0 // (before format 4 a group at 0 had no time)
		if format >= 3 {
			part = int32(d.U32("group partition"))
		}
		if format >= 4 {
			f := d.Take(1, "group flags")
			if d.Err() != nil {
				return nil, sealedErr(d.Err())
			}
			known := byte(groupTimed)
			if format >= 5 {
				known |= groupDropped
			}
			if timed = f[0]&groupTimed != 0; f[0]&^known != 0 || !timed && at != 0 || f[0]&groupDropped != 0 && folded == 0 {
				return nil, snapErr("group %q: flags %#x, time %d, folded %d", k, f[0], at, folded)
			}
			dropped = f[0]&groupDropped != 0
		}
		a.groups[k] = alertGroup{at: at, timed: timed, folded: int(folded), partition: part, dropped: dropped}
	}
	if format >= 4 {
		c := d.U32("partitions taken")
		if d.Err() == nil && uint64(c) > uint64(d.Left()/13) {
			return nil, snapErr("%d partitions taken cannot fit in the %d bytes left", c, d.Left())
		}
		if c > 0 {
			a.at = AlertsAt{Taken: make(map[int32]int64, c), Committed: map[int32]bool{}}
		}
		prev := int64(-1)
		for range c {
			p, off := int64(d.U32("partition taken")), int64(d.U64("offset taken"))
			f := d.Take(1, "taken flags")
			if d.Err() != nil {
				return nil, sealedErr(d.Err())
			}
			if p <= prev || p > math.MaxInt32 || off < 0 || f[0]&^takenCommitted != 0 {
				return nil, snapErr("partition %d (after %d) taken to %d, flags %#x", p, prev, off, f[0])
			}
			a.at.Taken[int32(p)], prev = off, p
			if f[0]&takenCommitted != 0 {
				a.at.Committed[int32(p)] = true
			}
		}
	}
	// The keys' caps of another keys.window are read past and dropped (their flags are of
	// another window's records: the keys start them empty), the rest of the state kept.
	kw := d.U32("keys.window") // (any without caps: a stage without keys.* writes 0)
	if c, err = count("keys' caps", 24+8*((min(int(kw), maxWindow)+63)/64)); err != nil {
		return nil, err
	}
	if c > 0 && (kw < 1 || kw > maxWindow) {
		return nil, snapErr("keys' alarm caps of %d records", kw)
	}
	if a.capsWindow = int(kw); c > 0 && a.capsWindow == keysWindow {
		a.keyCaps = make(map[string]savedCap, c)
	}
	for range c {
		k := d.Text(maxKeyLength, "key")
		sc := savedCap{partition: int32(d.U32("partition")), cap: *newAlarmCap(a.capsWindow)}
		if err := decodeCap(d, &sc.cap); err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		if sc.cap.at = d.U64("cap's position"); sc.cap.at > a.series.pos {
			return nil, snapErr("key %q: alarm cap at position %d, the stream at %d", k, sc.cap.at, a.series.pos)
		}
		if a.keyCaps != nil {
			a.keyCaps[k] = sc
		} else {
			a.capsDropped++
		}
	}
	if d.Err() != nil {
		return nil, sealedErr(d.Err())
	}
	if format >= 2 {
		if a.fleet, err = decodeFleet(d); err != nil {
			return nil, err
		}
	}
	if format >= 6 {
		if a.recent, err = decodeRecent(d); err != nil {
			return nil, err
		}
	}
	if a.series.keyless > a.series.pos || a.series.newest > a.series.pos {
		return nil, snapErr("series at %d and %d, the stream at %d", a.series.keyless, a.series.newest, a.series.pos)
	}
	if d.Left() != 0 {
		return nil, snapErr("%d unread bytes at the end of the alarm state", d.Left())
	}
	return a, nil
}

// writeAlarms writes a's file to state_dir, ending with ctx (the file before it then stands).
// Nothing is written when the newest file holds the same (keyed_unchanged.go); stop: a stop's save.
func (s *Stage) writeAlarms(ctx context.Context, d *SnapshotDir, a *alarmState, keysWindow int, stop bool) {
	payload := a.encode(keysWindow)
	sum := maphash.Bytes(s.ext.seed, payload)
	if file, same := s.ext.saved.unchanged(&s.ext.saved.alarms, sum); same {
		s.notSavedAgain("alarm state", file, stop)
		return
	}
	path, err := d.saveAs(ctx, alarmsPrefix, &d.nextAlarms, func(w io.Writer) error {
		return alarmsSnapshotFile.WriteContext(ctx, w, AlarmsSnapshotFormat, payload)
	})
	if err != nil && cutBy(ctx, err) {
		s.cutSave("alarm state", 0)
		return
	}
	if err != nil {
		s.deps.Log.Error().Err(err).Msg("alarm state snapshot failed; a restart would start the alarms afresh")
		return
	}
	s.ext.saved.set(&s.ext.saved.alarms, sum, path)
	s.deps.Log.Debug().Str("file", path).Int("bytes", len(payload)).Msg("alarm state snapshot written")
}

// loadAlarms installs the newest alarm state of state_dir that reads back whole (the others
// logged and skipped) if it fits the stage's window (if not, none: those before it are older
// still). The stream's position is then the one it holds, else the one the keys' state was
// saved at (keysAt: the keys' caps' positions count from it).
func (s *Stage) loadAlarms(ctx context.Context, keysAt uint64) error {
	d := s.ext.snaps
	files, err := d.list(alarmsPrefix)
	if err != nil {
		return err
	}
	s.series.pos = keysAt
	if len(files) == 0 && s.deps.AlertGroupsFrom != "" {
		return s.adoptAlertGroups(ctx, s.deps.AlertGroupsFrom)
	}
	for _, path := range files {
		var a *alarmState
		err := readSealedFile(ctx, path, alarmsSnapshotFile, func(format uint32, p []byte) (err error) {
			a, err = decodeAlarms(format, p, s.cfg.Window, s.cfg.Keys.Window)
			if err == nil && format == AlarmsSnapshotFormat { // (a save of the same payload writes nothing: keyed_unchanged.go)
				s.ext.saved.set(&s.ext.saved.alarms, maphash.Bytes(s.ext.seed, p), path)
			}
			return err
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrSnapshotMismatch) {
			// The older files predate it (a window changed and back): their alarms are long over.
			s.deps.Log.Warn().Err(err).Str("file", path).Msg("alarm state snapshot skipped, and the older ones: the alarms start empty")
			return nil
		}
		if err != nil {
			s.deps.Log.Warn().Err(err).Str("file", path).Msg("alarm state snapshot skipped")
			continue
		}
		*s.alarms, s.series = a.cap, a.series
		if a.recent != nil {
			s.restoreRecent(a.recent)
		}
		s.restoreGroups(a)
		if s.keyed != nil && a.series.pos != keysAt { // (saved apart: the keys' positions moved with the stream's)
			s.keyed.rebase(keysAt, a.series.pos)
		}
		if s.keyed != nil && s.keyed.follower {
			s.ext.keyCaps = a.keyCaps
			if a.fleet != nil {
				s.keyed.fleet = *a.fleet
			}
		}
		if a.capsDropped > 0 {
			s.deps.Log.Warn().Str("file", path).Int("keys", a.capsDropped).Int("saved_keys_window", a.capsWindow).Int("keys_window", s.cfg.Keys.Window).
				Msg("keys' alarm caps of another detect.keys.window dropped: those keys start their caps empty")
		}
		inAlarm := len(a.series.keyed)
		if a.series.keyless != 0 { // (the records without a key: one series)
			inAlarm++
		}
		s.deps.Log.Info().Str("file", path).Int("series_in_alarm", inAlarm).Int("alert_groups", len(s.groups.open)).
			Msg("alarm state loaded from snapshot: alarms go on")
		return nil
	}
	return nil
}

// rebase moves the keys' caps' positions from a stream position at to to (a position before
// the stream's first, 0: unknown).
func (k *keyedScorer) rebase(at, to uint64) {
	for _, st := range k.keys {
		switch {
		case st.cap.at == 0:
		case to >= at:
			st.cap.at += to - at
		case st.cap.at > at-to:
			st.cap.at -= at - to
		default:
			st.cap.at = 0
		}
	}
}
