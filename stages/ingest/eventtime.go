package ingest

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// The record's event time (Config.EventTimeField): integer epoch milliseconds, RFC 3339, or the
// date and time as CSV exports and SQL write them, whose time without an offset is a wall clock
// of Config.EventTimeZone.

// parseEventTime parses integer epoch milliseconds (only digits, optional leading '-') or
// "2006-01-02T15:04:05" (a space or a T; a fraction after a point or a comma, optional; an
// offset Z, +hh:mm or PostgreSQL's +hh, optional) into Unix milliseconds. A time without an
// offset is a wall clock of z (nil: UTC).
//
// The fields have their fixed width: Go's layouts would also take an hour of one digit (a
// 12-hour clock's, "1:34:33" whose PM was lost) and an offset of 24 hours or more
// (go.dev/issue/54580), which no producer of this form means: they are refused.
func parseEventTime(text []byte, z *eventZone) (int64, error) {
	text = trimSpace(text)
	if epochDigits(text) {
		ms, err := strconv.ParseInt(string(text), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("epoch milliseconds out of range: %s", quoteShort(text))
		}
		return ms, checkEpochMS(ms, text)
	}
	var buf [64]byte
	if rfc, local, ok := asRFC3339(text, buf[:0]); ok {
		// rfc's fields have their width and its offset is in range, so time.Parse reads it with
		// its strict RFC 3339 parser; its lenient fallback can only refuse what that refused
		// (a day or hour out of range).
		if t, err := time.Parse(time.RFC3339Nano, string(rfc)); err == nil {
			ms := t.UnixMilli()
			if local && z != nil {
				ms -= z.offset(t.Unix()) * 1000
			}
			return ms, nil
		}
	}
	zone := "UTC"
	if z != nil {
		zone = z.loc.String() // the name it was loaded by
	}
	return 0, fmt.Errorf("not an RFC 3339 time, a time as \"2006-01-02 15:04:05\" (%s without an offset) or epoch milliseconds: %s", zone, quoteShort(text))
}

// epochDigits says whether text (trimmed) is an epoch number as parseEventTime reads one:
// digits, with an optional leading '-'.
func epochDigits(text []byte) bool {
	for i, c := range text {
		if !(c >= '0' && c <= '9' || c == '-' && i == 0 && len(text) > 1) {
			return false
		}
	}
	return len(text) > 0
}

// MinEventMS and MaxEventMS bound the instants an event time may be (and outlierd gen's
// times): RFC 3339's years 0000-9999, in UTC, which the outputs' "timestamp" is written in
// (Go's time.Format writes a year past 9999, or before 0, in more digits or with a sign, which
// no RFC 3339 reader takes). An epoch number beyond them is, in practice, a producer's epoch
// microseconds or nanoseconds: read as milliseconds the year 57878 for 2025-11-28's.
const (
	MinEventMS = -62167219200000 // 0000-01-01T00:00:00Z
	MaxEventMS = 253402300799999 // 9999-12-31T23:59:59.999Z
)

// checkEpochMS refuses epoch milliseconds ms (written as text) outside [MinEventMS, MaxEventMS].
func checkEpochMS(ms int64, text []byte) error {
	if ms >= MinEventMS && ms <= MaxEventMS {
		return nil
	}
	return fmt.Errorf("epoch milliseconds %s are the year %d, outside RFC 3339's years 0000-9999 that the outputs write: epoch microseconds or nanoseconds? (ingest.event_time_unit is ms)",
		quoteShort(text), time.UnixMilli(ms).UTC().Year())
}

// The units of an epoch number in ingest.event_time_field (Config.EventTimeUnit).
const (
	EventTimeMillis  = "ms"
	EventTimeSeconds = "s"
)

// parseEpochSeconds reads text as epoch seconds (ingest.event_time_unit: s): digits with an
// optional leading '-', an optional fraction after a point and an optional exponent ('e' or 'E',
// a sign, digits: Java's Double.toString, so Jackson, writes 1e7 and above so), rounded to the
// millisecond. ok is false when text is not of that form (a time as text, read by
// parseEventTime); err when it is and lies outside the years 0000-9999.
func parseEpochSeconds(text []byte) (ms int64, ok bool, err error) {
	text = trimSpace(text)
	digits, point, exp, expDigits := 0, false, false, 0
	for i, c := range text {
		switch {
		case c >= '0' && c <= '9' && exp:
			expDigits++
		case c >= '0' && c <= '9':
			digits++
		case c == '-' && i == 0:
		case c == '.' && !point && !exp && digits > 0:
			point = true
		case (c == 'e' || c == 'E') && !exp && digits > 0 && text[i-1] != '.':
			exp = true
		case (c == '+' || c == '-') && exp && expDigits == 0 && (text[i-1] == 'e' || text[i-1] == 'E'):
		default:
			return 0, false, nil
		}
	}
	if digits == 0 || text[len(text)-1] == '.' || (exp && expDigits == 0) {
		return 0, false, nil
	}
	// (v bounded before the conversion: v * 1000 past int64's range has no int64 value)
	v, perr := strconv.ParseFloat(string(text), 64)
	if perr == nil && math.Abs(v) <= float64(MaxEventMS)/1000+1 {
		if ms = int64(math.Round(v * 1000)); ms >= MinEventMS && ms <= MaxEventMS {
			return ms, true, nil
		}
	}
	return 0, true, fmt.Errorf("epoch seconds %s are outside RFC 3339's years 0000-9999 that the outputs write: epoch milliseconds or finer? (ingest.event_time_unit is s)", quoteShort(text))
}

// epochSecondsSlack is how far from a record's Kafka timestamp an event time read as epoch
// seconds may fall and still be taken for epoch seconds (epochSeconds). Wide enough for a
// producer's backlog (a month late), narrow enough that no millisecond time of a live stream
// comes near it: a time in milliseconds whose reading as seconds is this close to when it was
// written is in January 1970 (for 2026's records, 1970-01-21), which only a backfill of 1970
// data written in 2026 would be.
const epochSecondsSlack = 30 * 24 * time.Hour

// epochSeconds says whether event time ms (epoch milliseconds as read) is a producer's epoch
// seconds: read as seconds, it is within epochSecondsSlack of written, the record's Kafka
// timestamp (the zero time, none, tells nothing), and read as milliseconds it is not. The
// decoders read an integer as milliseconds; the source refuses such a record (a dead letter,
// bad_event_time) rather than place it in January 1970, where its output timestamp,
// time_of_day and alert_cooldown would all be wrong.
func epochSeconds(ms int64, written time.Time) bool {
	if written.IsZero() || ms <= 0 || ms > math.MaxInt64/1000 {
		return false
	}
	near := func(d int64) bool {
		return d > -epochSecondsSlack.Milliseconds() && d < epochSecondsSlack.Milliseconds()
	}
	// (and not near as milliseconds too: a time of 1970's first month written then)
	return near(ms*1000-written.UnixMilli()) && !near(ms-written.UnixMilli())
}

// epochSecondsReason is the dead letter's reason for such a record of field.
func epochSecondsReason(field string, ms int64, written time.Time) string {
	return fmt.Sprintf("field %q: epoch seconds where epoch milliseconds are read: %d is %s as milliseconds, and the message was written at %s (its Kafka timestamp); write milliseconds or an RFC 3339 time, or read a producer of seconds with ingest.event_time_unit: s",
		field, ms, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano), written.UTC().Format(time.RFC3339Nano))
}

// asRFC3339 checks the form parseEventTime reads and writes it into buf as RFC 3339 (a T for
// the space, a point for the comma, ":00" after PostgreSQL's +hh, Z for no offset: local true),
// so that the RFC 3339 parser reads every form, without the failed parses (an error allocated
// each) of trying layouts in turn. Text that is RFC 3339 already comes back as it is. ok false:
// not the form (ranges other than the offset's are the parser's to check).
func asRFC3339(text, buf []byte) (out []byte, local, ok bool) {
	// The separators pin every field to its width (an hour of one digit would put a minute
	// digit at 13); the digits are the parser's to check.
	const form = "2006-01-02T15:04:05"
	if len(text) < len(form) || text[4] != '-' || text[7] != '-' || text[10] != 'T' && text[10] != ' ' || text[13] != ':' || text[16] != ':' {
		return nil, false, false
	}
	i := len(form) // after the seconds: an optional fraction, then an optional offset
	comma := false
	if i < len(text) && (text[i] == '.' || text[i] == ',') {
		comma = text[i] == ','
		j := i + 1
		for j < len(text) && text[j] >= '0' && text[j] <= '9' {
			j++
		}
		if j == i+1 {
			return nil, false, false // a point without digits
		}
		i = j
	}
	var tail string
	switch off := text[i:]; {
	case len(off) == 0:
		tail, local = "Z", true
	case len(off) == 1 && off[0] == 'Z':
	case len(off) == 6 && off[3] == ':' && offsetOK(off[:3]) && twoDigits(off[4:], 59):
	case len(off) == 3 && offsetOK(off):
		tail = ":00"
	default:
		return nil, false, false
	}
	if tail == "" && !comma && text[10] == 'T' {
		return text, false, true // RFC 3339 as it is
	}
	if cap(buf) < len(text)+len(tail) {
		buf = make([]byte, 0, len(text)+len(tail)) // only a fraction of dozens of digits
	}
	out = append(append(buf[:0], text...), tail...)
	out[10] = 'T'
	if comma {
		out[len(form)] = '.'
	}
	return out, local, true
}

// offsetOK reports whether s is +hh or -hh with hh at most 23, RFC 3339's range.
func offsetOK(s []byte) bool { return (s[0] == '+' || s[0] == '-') && twoDigits(s[1:], 23) }

// twoDigits reports whether s is two digits of a number at most max.
func twoDigits(s []byte, max int) bool {
	return s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9' && int(s[0]-'0')*10+int(s[1]-'0') <= max
}

// eventZone reads the wall clocks of Config.EventTimeZone as instants, by RFC 5545's rule
// (iCalendar, §3.3.5; java.time's and Python's fold=0 alike): a wall clock that a transition
// repeats (autumn) is its first instant, the offset before the transition; one that a
// transition skips (spring) is read with the offset before the gap too, so it lands as far
// after the gap's start as it is written after it ("02:30" in Europe/Berlin's gap is 03:30
// CEST, 01:30 UTC): what a clock that changes late (a logger that syncs hourly) meant.
// time.Date picks either instant of a repeated time and either side of a gap, as the sign of
// the offset falls, and says it does not guarantee which.
//
// It keeps the last period it looked up, so that a stream's times (months of one offset) cost
// two comparisons; not safe for concurrent use (one per decoder, as the decoder's buffers).
type eventZone struct {
	loc *time.Location
	// Wall clocks (Unix seconds of the wall clock read as UTC) in [lo, hi) are first the
	// instant wall - off: the period last looked up, less the wall clocks an earlier period has.
	lo, hi, off int64
}

// newEventZone is the zone loc (loadZone's) for a decoder; nil for UTC (no offset to look up:
// time.LoadLocation gives "" and "UTC" as time.UTC) and for nil.
func newEventZone(loc *time.Location) *eventZone {
	if loc == nil || loc == time.UTC {
		return nil
	}
	return &eventZone{loc: loc}
}

// loadZone loads an IANA zone, refusing "Local": the host's zone would make the config mean
// another thing on another host.
func loadZone(name string) (*time.Location, error) {
	if name == "Local" {
		return nil, fmt.Errorf(`"Local" is the host's zone: name the zone (e.g. Europe/Berlin), so that the config means the same on every host`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IANA time zone (e.g. UTC, Europe/Berlin)", name)
	}
	return loc, nil
}

// offset is the zone's offset (seconds east of UTC) for the wall clock wall (Unix seconds of
// the wall clock read as UTC): the instant is wall - offset.
func (z *eventZone) offset(wall int64) int64 {
	if z.lo <= wall && wall < z.hi {
		return z.off
	}
	return z.lookup(wall)
}

// zoneReach bounds a zone's offset, in seconds: none reaches a day (tzdata's largest, local
// mean times of the 19th century, are under 16 hours).
const zoneReach = 24 * 3600

// lookup is offset without the kept period: it looks the zone's periods up around wall and
// keeps the one it picks.
func (z *eventZone) lookup(wall int64) int64 {
	// The periods (spans of one offset) over [wall - reach, wall + reach]: every instant whose
	// wall clock can be wall.
	type period struct{ start, end, off int64 }
	const never = 1 << 62 // a period without a start or an end (far from overflowing with an offset)
	var ps [16]period     // (2 days: no zone changes more than a few times in as many)
	n := 0
	for x := wall - zoneReach; n < len(ps); n++ {
		t := time.Unix(x, 0).In(z.loc)
		_, off := t.Zone()
		s, e := t.ZoneBounds()
		ps[n] = period{-never, never, int64(off)}
		if !s.IsZero() {
			ps[n].start = s.Unix()
		}
		if !e.IsZero() {
			ps[n].end = e.Unix()
		}
		if ps[n].end > wall+zoneReach {
			n++
			break
		}
		x = ps[n].end
	}
	pick := n - 1 // (not reached: the periods cover every instant wall can be)
	for i, p := range ps[:n] {
		if u := wall - p.off; p.start <= u && u < p.end {
			pick = i // the first (earliest) instant whose wall clock is wall
			break
		} else if u < p.start && i > 0 {
			pick = i - 1 // wall is in the gap before this period, none before it: the offset before the gap
			break
		}
	}
	// Kept: the period's wall clocks, less those an earlier period has too (the earlier's: the
	// first instant), including those not looked up, before ps[0]: their wall clocks are before
	// ps[0].start + reach. (A later period's repeats of them are later instants.)
	p := ps[pick]
	z.off, z.lo, z.hi = p.off, max(p.start+p.off, ps[0].start+zoneReach), p.end+p.off
	for _, q := range ps[:pick] {
		z.lo = max(z.lo, q.end+q.off)
	}
	return p.off
}
