package detect

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// TestAlarmStateTruncated: every cut of a format-5 alarm state payload (a series in alarm, alert
// groups with their partitions, one of them not known, one at 0 ms, one without a time and one
// dropped, the
// groups' generation and the offsets they took to, one committed, a scorer's key's cap) is refused with an error, never a panic or a state
// read from part of it; a group count past what the payload holds is refused before its
// groups are read; the whole payload reads back to the same state, the groups' partitions,
// times and generation with it. Format 3's reading of the same bytes (no generation, no
// flags) does not take them whole either.
func TestAlarmStateTruncated(t *testing.T) {
	const window, keysWindow = 100, 70
	a := alarmFixture(window, keysWindow)
	p := a.encode(keysWindow)
	for n := range len(p) {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("payload cut at %d of %d bytes: panic %v", n, len(p), r)
				}
			}()
			if got, err := decodeAlarms(AlarmsSnapshotFormat, p[:n], window, keysWindow); err == nil {
				t.Fatalf("payload cut at %d of %d bytes read back without an error (%d groups)", n, len(p), len(got.groups))
			}
		}()
	}
	b, err := decodeAlarms(AlarmsSnapshotFormat, p, window, keysWindow)
	if err != nil {
		t.Fatal(err)
	}
	for k, g := range a.groups {
		if b.groups[k] != g {
			t.Errorf("group %q read back as %+v, want %+v", k, b.groups[k], g)
		}
	}
	if len(b.groups) != len(a.groups) || b.gen != a.gen || !b.genKnown || !bytes.Equal(b.encode(keysWindow), p) {
		t.Errorf("read back: %d groups of generation %d (known %v), want %d of %d", len(b.groups), b.gen, b.genKnown, len(a.groups), a.gen)
	}
	if fmt.Sprint(b.at) != fmt.Sprint(a.at) {
		t.Errorf("offsets taken read back %v, want %v", b.at, a.at)
	}
	if _, err := decodeAlarms(3, p, window, keysWindow); err == nil {
		t.Error("a format-4 payload read as format 3 without an error")
	}
	// A payload of format 4's first step (a build of the session that made it: the generation
	// and the groups' flags, no offsets taken) is refused, not read with another field's bytes
	// as the offsets' count (OPERATIONS: skipped as unreadable).
	{
		one := &alarmState{cap: *newAlarmCap(window), gen: 3, genKnown: true}
		q := one.encode(keysWindow)
		at := groupsAt(window) + 8 + 8 // (generation, group count: no groups)
		if got := binary.LittleEndian.Uint32(q[at:]); got != 0 {
			t.Fatalf("setup: %d partitions taken at byte %d, want 0 (the layout moved?)", got, at)
		}
		step := append(bytes.Clone(q[:at]), q[at+4:]...)
		if _, err := decodeAlarms(AlarmsSnapshotFormat, step, window, keysWindow); err == nil {
			t.Error("a payload of format 4's first step (no offsets taken) read without an error")
		}
	}
	// Offsets taken out of order, twice the same partition, negative, of a partition out of an
	// int32's range, or with an unknown flag: refused.
	for _, c := range []struct {
		name string
		edit func(q []byte, at int) // at: the partitions' count
	}{
		{"out of order", func(q []byte, at int) { binary.LittleEndian.PutUint32(q[at+4:], 9) }},
		{"the same partition twice", func(q []byte, at int) { binary.LittleEndian.PutUint32(q[at+4:], 7) }},
		{"a negative offset", func(q []byte, at int) { binary.LittleEndian.PutUint64(q[at+8:], 1<<63) }},
		{"partition 2^31", func(q []byte, at int) { binary.LittleEndian.PutUint32(q[at+17:], 1<<31) }},
		{"an unknown flag", func(q []byte, at int) { q[at+16] = 2 }},
	} {
		one := &alarmState{cap: *newAlarmCap(window), at: AlertsAt{Taken: map[int32]int64{2: 10, 7: 20}, Committed: map[int32]bool{2: true}}}
		q := one.encode(keysWindow)
		at := groupsAt(window) + 8 + 8 // (generation, group count: no groups)
		if got := binary.LittleEndian.Uint32(q[at:]); got != 2 || q[at+16] != 1 {
			t.Fatalf("setup: %d partitions at byte %d, the first's flags %d; want 2, 1 (the layout moved?)", got, at, q[at+16])
		}
		if _, err := decodeAlarms(AlarmsSnapshotFormat, q, window, keysWindow); err != nil {
			t.Fatalf("setup: %v", err)
		}
		c.edit(q, at)
		if _, err := decodeAlarms(AlarmsSnapshotFormat, q, window, keysWindow); err == nil {
			t.Errorf("offsets taken %s read without an error", c.name)
		}
	}
	// The group count: after the window, position, cap, keyless, newest, the series' count and
	// its one series, and the groups' generation.
	at := groupsAt(window) + 4 + len("s") + 8 + 8
	if got := binary.LittleEndian.Uint64(p[at:]); got != uint64(len(a.groups)) {
		t.Fatalf("setup: group count %d at byte %d, want %d (the layout moved?)", got, at, len(a.groups))
	}
	bad := bytes.Clone(p)
	binary.LittleEndian.PutUint64(bad[at:], 1<<40)
	if _, err := decodeAlarms(AlarmsSnapshotFormat, bad, window, keysWindow); err == nil {
		t.Error("a group count of 2^40 read without an error")
	}
	// A generation that is no int32 of Kafka's (nor -1, none): refused.
	for _, gen := range []int64{-2, 1 << 31} {
		bad := bytes.Clone(p)
		binary.LittleEndian.PutUint64(bad[at-8:], uint64(gen))
		if _, err := decodeAlarms(AlarmsSnapshotFormat, bad, window, keysWindow); err == nil {
			t.Errorf("the groups' generation %d read without an error", gen)
		}
	}
	// A group's flags other than its time's and dropped (format 5: with records folded), or a
	// time on a group without one: refused.
	for _, c := range []struct {
		name   string
		key    string
		g      alertGroup
		format uint32
		flags  byte // (0: as written)
	}{
		{"an unknown flag", "a", alertGroup{}, AlarmsSnapshotFormat, 4},
		{"a time without its flag", "u", alertGroup{at: 5}, AlarmsSnapshotFormat, 0},
		{"dropped with nothing folded", "z", alertGroup{at: 5, timed: true}, AlarmsSnapshotFormat, groupTimed | groupDropped},
		{"dropped in format 4", "y", alertGroup{at: 5, timed: true, folded: 2}, 4, groupTimed | groupDropped},
	} {
		one := &alarmState{cap: *newAlarmCap(window), groups: map[string]alertGroup{c.key: c.g}}
		q := one.encode(keysWindow)
		if c.flags != 0 {
			q[groupsAt(window)+8+8+4+len(c.key)+8+4+4] = c.flags // (generation, count, key, time, folded, partition)
		}
		if _, err := decodeAlarms(c.format, q, window, keysWindow); err == nil {
			t.Errorf("%s read without an error", c.name)
		}
	}
	// (The last case's bytes as format 5: read, the group dropped.)
	{
		one := &alarmState{cap: *newAlarmCap(window), groups: map[string]alertGroup{"y": {at: 5, timed: true, folded: 2, dropped: true}}}
		if b, err := decodeAlarms(AlarmsSnapshotFormat, one.encode(keysWindow), window, keysWindow); err != nil || !b.groups["y"].dropped {
			t.Errorf("a dropped group of format 5 read back as %+v, %v; want dropped", b.groups["y"], err)
		}
	}
}

// alarmFixture is an alarm state with a series in alarm, alert groups (with their partitions,
// one not known; one at 0 ms, one without a time; one dropped, format 5), their generation, and
// a scorer's key's cap.
func alarmFixture(window, keysWindow int) *alarmState {
	a := &alarmState{cap: *newAlarmCap(window), gen: 41, genKnown: true, groups: map[string]alertGroup{
		"a": {at: 1_700_000_000_000, timed: true, folded: 3, partition: 7},
		"b": {at: 1_700_000_060_000, timed: true, folded: 0, partition: -1},
		"e": {at: 0, timed: true, folded: 1, partition: 2},  // 1970-01-01T00:00:00Z
		"n": {at: 0, timed: false, folded: 2, partition: 2}, // no timestamp
		"d": {at: 1_700_000_030_000, timed: true, folded: 4, partition: 9, dropped: true},
	}, at: AlertsAt{Taken: map[int32]int64{2: 1234, 7: 99}, Committed: map[int32]bool{7: true}}}
	a.series.pos, a.series.keyless, a.series.newest = 500, 450, 490
	a.series.keyed = map[string]uint64{"s": 480}
	a.cap.next, a.cap.filled = 5, 5
	c := savedCap{partition: 2, cap: *newAlarmCap(keysWindow)}
	c.cap.at = 400
	a.keyCaps = map[string]savedCap{"k": c}
	return a
}

// groupsAt is the offset of an alarm state payload's groups (format 4: their generation, before
// it their count) when it holds no series in alarm, for a stage of window records: after the
// window, position, cap, keyless, newest and the series' count.
func groupsAt(window int) int {
	return 4 + 8 + 8 + 8*((window+63)/64) + 8 + 8 + 8
}

// encodeAs is the payload in format version format (an older one: what the older files hold,
// for the tests of their reading; what it lacks, left out); the newest is encode's. Format 5 is
// 6 without the recent past; 4 is 5 without the dropped groups (and their flag). Formats 1-3 differ from 4 only in what 4 added: the groups' generation, their flags, the offsets taken;
// 3 added the groups' partitions, 2 the keys' fleet.
func (a *alarmState) encodeAs(format uint32, keysWindow int) []byte {
	if format == AlarmsSnapshotFormat {
		return a.encode(keysWindow)
	}
	withoutRecent := func(a *alarmState) []byte { // (format 6's layout without the recent past at its end)
		p := a.encode(keysWindow)
		var r sealed.Encoder
		encodeRecent(&r, a.recent)
		return p[:len(p)-len(r.Payload())]
	}
	if format == 5 {
		return withoutRecent(a)
	}
	// Before format 5 a dropped group was forgotten at the drop: the files hold none.
	b := *a
	b.groups = maps.Clone(a.groups)
	maps.DeleteFunc(b.groups, func(_ string, g alertGroup) bool { return g.dropped })
	a = &b
	if format == 4 { // format 5's layout
		return withoutRecent(a)
	}
	if format < 1 || format > 4 {
		panic(fmt.Sprintf("encodeAs: no writer for alarm state format %d (the newest is %d)", format, AlarmsSnapshotFormat))
	}
	var e sealed.Encoder
	a.encodeSeries(&e)
	groups := savable(a.groups)
	e.U64(uint64(len(groups)))
	for _, k := range groups {
		g := a.groups[k]
		encodeGroupHead(&e, k, g)
		if format >= 3 {
			e.U32(uint32(g.partition))
		}
	}
	a.encodeKeyCaps(&e, keysWindow)
	if format >= 2 {
		encodeFleet(&e, a.fleet)
	}
	return e.Payload()
}

// TestAlarmStateOlderFormats: a payload of format 3 (the groups' partitions, no flags, no
// generation, no offsets taken) or 2 (no partitions either) reads back: its groups' generation
// not known (the first assignment after the restart keeps none: pipeline keyScope.stayed), no
// offsets taken, a group at 0 ms without a time (as those releases wrote a group without one),
// the others with theirs.
func TestAlarmStateOlderFormats(t *testing.T) {
	const window, keysWindow = 100, 70
	a := alarmFixture(window, keysWindow)
	for _, format := range []uint32{2, 3} {
		b, err := decodeAlarms(format, a.encodeAs(format, keysWindow), window, keysWindow)
		if err != nil {
			t.Fatalf("format %d: %v", format, err)
		}
		if b.at.Taken != nil {
			t.Errorf("format %d: offsets taken %v, want none (before format 4)", format, b.at)
		}
		if b.genKnown || len(b.groups) != len(a.groups)-1 {
			t.Errorf("format %d: %d groups, generation known %v; want %d (the dropped one not in the file), not known", format, len(b.groups), b.genKnown, len(a.groups)-1)
		}
		for k, g := range a.groups {
			if g.dropped {
				continue
			}
			want := g
			want.timed = g.at != 0
			if format < 3 {
				want.partition = -1
			}
			if b.groups[k] != want {
				t.Errorf("format %d: group %q read back as %+v, want %+v", format, k, b.groups[k], want)
			}
		}
	}
}

// TestAlarmStateGroupCountExact: the alert group count is checked against the bytes a group of
// the file's format takes at least (its key's length, its time and folded; from format 3 its
// partition: 20 bytes; from format 4 its flags: 21), not 16 (format 2's) for every format: a
// count that groups of the format before would fit in the bytes left is refused with the
// count's error before any group is read or its map made. Before, it passed the check and
// failed later, reading groups.
func TestAlarmStateGroupCountExact(t *testing.T) {
	const window, keysWindow = 100, 70
	a := &alarmState{cap: *newAlarmCap(window), groups: map[string]alertGroup{}, genKnown: true, gen: 3}
	a.series.pos = 500
	for i := range 40 {
		a.groups[string(rune('a'+i%26))+string(rune('a'+i/26))] = alertGroup{at: 1_700_000_000_000, timed: true, partition: int32(i)}
	}
	for _, c := range []struct {
		format      uint32
		least, less int // a group's least bytes in the format, and in the one before
	}{{2, 16, 15}, {3, 20, 16}, {4, 21, 20}} {
		p := a.encodeAs(c.format, keysWindow)
		at := groupsAt(window)
		if c.format >= 4 {
			at += 8 // (the groups' generation)
		}
		if got := binary.LittleEndian.Uint64(p[at:]); got != 40 {
			t.Fatalf("format %d: setup: group count %d at byte %d, want 40 (the layout moved?)", c.format, got, at)
		}
		left := len(p) - at - 8
		n := uint64(left / c.less)
		if n*uint64(c.least) <= uint64(left) {
			t.Fatalf("format %d: setup: %d groups of %d bytes fit the %d bytes left", c.format, n, c.least, left)
		}
		bad := bytes.Clone(p)
		binary.LittleEndian.PutUint64(bad[at:], n)
		_, err := decodeAlarms(c.format, bad, window, keysWindow)
		if want := fmt.Sprintf("%d alert groups cannot fit in the %d bytes left", n, left); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("format %d: a group count of %d (%d-byte groups fit the %d bytes left, %d-byte ones not): %v, want the count's error %q",
				c.format, n, c.less, left, c.least, err, want)
		}
	}
}
