package ingest

import (
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/core/config"
)

// TestParseEventTimeWithoutZone: the event time as CSV exports and SQL write it ("2020-03-09
// 10:34:33", SKAB's datetime column; a space or a T, an optional fraction, no zone offset) is
// read as UTC, where it was refused ("not an RFC 3339 time or epoch milliseconds") and every
// such record went to the dead letters; RFC 3339 with its offset and epoch milliseconds read as
// before; a date alone, or a time with a bad field, still fails.
func TestParseEventTimeWithoutZone(t *testing.T) {
	want := time.Date(2020, 3, 9, 10, 34, 33, 0, time.UTC).UnixMilli()
	for _, c := range []struct {
		in string
		ms int64
	}{
		{"2020-03-09 10:34:33", want},
		{"2020-03-09T10:34:33", want},
		{"2020-03-09 10:34:33.250", want + 250},
		{"2020-03-09 11:34:33+01:00", want},
		{"2020-03-09T10:34:33Z", want},
		{"2020-03-09T12:34:33+02:00", want},
		{"1583750073000", want},
		// PostgreSQL's timestamptz, as psql and COPY write it: an offset of whole hours is +hh.
		{"2020-03-09 11:34:33+01", want},
		{"2020-03-09 05:34:33.25-05", want + 250},
		{"2020-03-09 16:04:33+05:30", want},
	} {
		ms, err := parseEventTime([]byte(c.in), nil)
		if err != nil || ms != c.ms {
			t.Errorf("%q: %d, %v; want %d", c.in, ms, err, c.ms)
		}
	}
	for _, bad := range []string{"2020-03-09", "2020-03-09 25:00:00", "yesterday", "2020-03-09 10:34", "2020-03-09 10:34:33+0100", "2020-03-09 23:59:60"} {
		if _, err := parseEventTime([]byte(bad), nil); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// BenchmarkParseEventTime: the per-record cost of the event-time forms (ns/op and allocs per
// record): RFC 3339, and the CSV/SQL forms read as RFC 3339 after a rewrite, in UTC; and a wall
// clock of Europe/Berlin, in the zone's period kept from the record before (a stream's case) and
// in another each record (winter and summer alternating: every record looks its period up).
func BenchmarkParseEventTime(b *testing.B) {
	for _, in := range []string{"2020-03-09T10:34:33.250Z", "2020-03-09T11:34:33+01:00", "2020-03-09 10:34:33", "2020-03-09 10:34:33.250", "2020-03-09 11:34:33+01"} {
		b.Run(in, func(b *testing.B) {
			text := []byte(in)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseEventTime(text, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	z := mustZone(b, "Europe/Berlin")
	for _, c := range []struct{ name, a, b string }{
		{"Europe/Berlin kept 2020-03-09 10:34:33", "2020-03-09 10:34:33", "2020-03-09 10:34:34"},
		{"Europe/Berlin kept 2020-03-09 10:34:33.250", "2020-03-09 10:34:33.250", "2020-03-09 10:34:33.500"},
		{"Europe/Berlin looked up 2020-03-09 10:34:33", "2020-03-09 10:34:33", "2020-07-09 10:34:33"},
	} {
		b.Run(c.name, func(b *testing.B) {
			texts := [2][]byte{[]byte(c.a), []byte(c.b)}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := parseEventTime(texts[i&1], z); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// goLayouts are the layouts that read the event time before it was read as RFC 3339 alone
// (after time.RFC3339Nano): Go's reading of the forms, lenient on an hour of one digit and an
// offset's range (go.dev/issue/54580).
var goLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07"}

// strictlyRefused matches what parseEventTime refuses of what goLayouts take: a hour of one
// digit, an offset's hour above 23 or its minute above 59.
var strictlyRefused = regexp.MustCompile(`^\d{4}-\d\d-\d\d[ T]\d:|[+-](2[4-9]|[3-9]\d)(:\d\d)?$|[+-]\d\d:[6-9]\d$`)

// tWithShortOffset matches PostgreSQL's offset of whole hours after a T, which goLayouts read
// after a space only, and parseEventTime after either (the separator and the offset are each
// one of their forms).
var tWithShortOffset = regexp.MustCompile(`^.{10}T.*[+-]\d\d$`)

// TestParseEventTimeAsGoLayoutsButStrict: asRFC3339's rewrite read as RFC 3339 gives every input
// the result goLayouts give it (the first that reads it), the same instant or an error for both,
// but for what strictlyRefused matches, which it refuses and they take, and tWithShortOffset,
// which it reads and they refuse: a list of edges, and 20000 inputs put together from pieces
// right and wrong.
func TestParseEventTimeAsGoLayoutsButStrict(t *testing.T) {
	slow := func(text string) (int64, bool) {
		var tm time.Time
		var err error
		for _, l := range goLayouts {
			if tm, err = time.Parse(l, text); err == nil {
				break
			}
		}
		return tm.UnixMilli(), err == nil
	}
	ins := []string{"2020-03-09 10:34:33", "2020-03-09T10:34:33", "2020-03-09 10:34:33.2", "2020-03-09 10:34:33.123456789",
		"2020-03-09 10:34:33.1234567891234", "2020-03-09 10:34:33Z", "2020-03-09 10:34:33 Z", "2020-03-09 10:34:33+01",
		"2020-03-09 10:34:33-05", "2020-03-09 10:34:33+01:00", "2020-03-09 10:34:33.5+01", "2020-03-09 10:34:33+0100",
		"2020-03-09 10:34:33+1", "2020-03-09 24:00:00", "2020-03-09 23:59:60", "2020-02-30 10:00:00", "2020-03-09 1:34:33",
		"2020-03-09 10:34:33,5", "2020-03-09 10:34:33+24:00", "2020-03-09t10:34:33", "2020-03-09 10:34:33.", "0000-01-01 00:00:00",
		"2020-03-09 10:34:33+01:0", "2020-03-09 10:34:33 +01:00", "2020-03-09_10:34:33", "2020-03-09 10:34:33Z07",
		"2020-03-09T10:34:33." + strings.Repeat("1", 60) + "+01:00", "2020-03-09 10:34:33." + strings.Repeat("1", 60)}
	rng := rand.New(rand.NewPCG(5, 6))
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	for range 20000 {
		ins = append(ins, pick("2020-03-09", "2020-3-09", "2020-02-29", "2021-02-29", "0000-01-01", "9999-12-31", "2020-13-01", "20-03-09")+
			pick(" ", "T", "t", "_", "")+pick("10", "1", "7", "00", "23", "24", "")+":"+pick("34", "4", "59", "60")+":"+pick("33", "3", "59", "60", "")+
			pick("", "", ".", ".5", ".250", ",5", ",", ".1234567891", ",123456789123")+
			pick("", "", "Z", "z", "+01:00", "+01", "-05", "+24:00", "-24", "+23:59", "+23:60", "-01:60", "+0100", "+1", " +01:00", "+01:0", "-00:00", "+05:30", "+99:00", "Z07", "+"))
	}
	refused, widened := 0, 0
	for _, in := range ins {
		ms, err := parseEventTime([]byte(in), nil)
		want, ok := slow(in)
		switch {
		case ok && err != nil && strictlyRefused.MatchString(in):
			refused++
		case !ok && err == nil && tWithShortOffset.MatchString(in):
			if tm, err := time.Parse(time.RFC3339Nano, in+":00"); err != nil || tm.UnixMilli() != ms {
				t.Errorf("%q: %d; %q: %d, %v", in, ms, in+":00", tm.UnixMilli(), err)
			}
			widened++
		case (err == nil) != ok || ok && ms != want:
			t.Errorf("%q: %d, %v; the layouts: %d, ok %v", in, ms, err, want, ok)
		}
	}
	if refused == 0 || widened == 0 {
		t.Errorf("%d the layouts take refused, %d they refuse read: the pieces miss a case", refused, widened)
	}
}

// TestParseEventTimeErrorQuotesTheInput: a refused time's error (the dead letter's reason)
// quotes the text the record holds, not asRFC3339's rewrite of it ("2020-02-30T10:00:00Z").
func TestParseEventTimeErrorQuotesTheInput(t *testing.T) {
	for _, in := range []string{"2020-02-30 10:00:00", "2020-03-09 25:00:00+01", "2020-03-09T25:00:00"} {
		_, err := parseEventTime([]byte(in), nil)
		if err == nil || !strings.HasSuffix(err.Error(), strconv.Quote(in)) {
			t.Errorf("%q: error %v, want it to end with the input quoted", in, err)
		}
	}
}

// TestParseEventTimeStrict: what Go's layouts take beyond the documented form
// (go.dev/issue/54580; in RFC 3339 as in the CSV/SQL forms) is refused, the error quoting the
// record's text: an hour of one digit (a 12-hour clock's, its AM/PM lost: "1:34:33" may be
// 13:34) and an offset's hour above 23 or minute above 59 (RFC 3339's ranges; no zone has
// one). A comma before the fraction (ISO 8601's, Python logging's and log4j's "10:34:33,250")
// is read as the point, after a space or a T, with an offset or without.
func TestParseEventTimeStrict(t *testing.T) {
	for _, in := range []string{"2020-03-09 1:34:33", "2020-03-09T1:34:33", "2020-03-09T1:34:33Z", "2020-03-09 1:34:33.5+01:00",
		"2020-03-09 1:34:33+01", "2020-03-09 10:34:33+24:00", "2020-03-09T10:34:33-24:00", "2020-03-09 10:34:33+24", "2020-03-09 10:34:33-24",
		"2020-03-09 10:34:33.5+24:00", "2020-03-09 10:34:33+01:60", "2020-03-09T10:34:33+01:60", "2020-03-09 10:34:33+23:60"} {
		_, err := parseEventTime([]byte(in), nil)
		if err == nil || !strings.HasSuffix(err.Error(), strconv.Quote(in)) {
			t.Errorf("%q: error %v, want it refused, quoted", in, err)
		}
	}
	want := time.Date(2020, 3, 9, 10, 34, 33, 250e6, time.UTC).UnixMilli()
	for _, in := range []string{"2020-03-09 10:34:33,250", "2020-03-09T10:34:33,25", "2020-03-09 11:34:33,250+01:00", "2020-03-09T10:34:33,250Z",
		"2020-03-09 11:34:33,25+01", "2020-03-09T11:34:33,25+01", "2020-03-09T11:34:33.25+01"} {
		if ms, err := parseEventTime([]byte(in), nil); err != nil || ms != want {
			t.Errorf("%q: %d, %v; want %d", in, ms, err, want)
		}
	}
}

func mustZone(t testing.TB, name string) *eventZone {
	t.Helper()
	loc, err := loadZone(name)
	z := newEventZone(loc)
	if err != nil || z == nil {
		t.Fatalf("%s: %v, %v", name, z, err)
	}
	return z
}

// TestEventTimeZone: a time without an offset is a wall clock of event_time_zone, in winter and
// in summer; a repeated wall clock (autumn) is its first instant; a skipped one (spring) is read
// with the offset before the gap (RFC 5545): Europe/Berlin and America/New_York, on either side
// of UTC (where time.Date picks the other instant of Berlin's repeated 02:30 and the other side
// of New York's gap), Pacific/Apia's skipped day (2011-12-30) and Australia/Lord_Howe's
// half-hour shift. A time with an offset, Z or epoch milliseconds is the same instant in any
// zone; a refused time names the zone.
func TestEventTimeZone(t *testing.T) {
	utc := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	for _, c := range []struct{ zone, in, want string }{
		{"Europe/Berlin", "2020-03-09 10:34:33", "2020-03-09T09:34:33Z"},
		{"Europe/Berlin", "2020-07-09T10:34:33.250", "2020-07-09T08:34:33.25Z"},
		{"Europe/Berlin", "2020-07-09 10:34:33,5", "2020-07-09T08:34:33.5Z"},
		{"Europe/Berlin", "2021-03-28 01:59:59", "2021-03-28T00:59:59Z"},
		{"Europe/Berlin", "2021-03-28 02:00:00", "2021-03-28T01:00:00Z"}, // the gap: 03:00 CEST
		{"Europe/Berlin", "2021-03-28 02:30:00", "2021-03-28T01:30:00Z"}, // 03:30 CEST (time.Date: the same)
		{"Europe/Berlin", "2021-03-28 03:00:00", "2021-03-28T01:00:00Z"},
		{"Europe/Berlin", "2021-10-31 01:59:59", "2021-10-30T23:59:59Z"},
		{"Europe/Berlin", "2021-10-31 02:00:00", "2021-10-31T00:00:00Z"}, // repeated: the first, CEST
		{"Europe/Berlin", "2021-10-31 02:30:00", "2021-10-31T00:30:00Z"}, // (time.Date: 01:30Z, CET)
		{"Europe/Berlin", "2021-10-31 02:59:59", "2021-10-31T00:59:59Z"},
		{"Europe/Berlin", "2021-10-31 03:00:00", "2021-10-31T02:00:00Z"},
		{"America/New_York", "2021-03-14 02:30:00", "2021-03-14T07:30:00Z"}, // 03:30 EDT (time.Date: 06:30Z, 01:30 EST)
		{"America/New_York", "2021-11-07 01:30:00", "2021-11-07T05:30:00Z"}, // repeated: the first, EDT
		{"America/New_York", "2021-11-07 02:00:00", "2021-11-07T07:00:00Z"},
		{"Pacific/Apia", "2011-12-29 23:59:59", "2011-12-30T09:59:59Z"},
		{"Pacific/Apia", "2011-12-30 12:00:00", "2011-12-30T22:00:00Z"}, // a skipped day: the 31st's 12:00
		{"Pacific/Apia", "2011-12-31 12:00:00", "2011-12-30T22:00:00Z"},
		{"Australia/Lord_Howe", "2021-04-04 01:45:00", "2021-04-03T14:45:00Z"}, // repeated half hour: +11:00 first
		{"Australia/Lord_Howe", "2021-10-03 02:15:00", "2021-10-02T15:45:00Z"}, // skipped: +10:30 before
		{"Europe/Berlin", "2020-03-09 10:34:33Z", "2020-03-09T10:34:33Z"},
		{"Europe/Berlin", "2020-03-09 10:34:33+02", "2020-03-09T08:34:33Z"},
		{"Europe/Berlin", "2020-03-09T10:34:33-05:00", "2020-03-09T15:34:33Z"},
		{"Europe/Berlin", "1583750073000", "2020-03-09T10:34:33Z"},
		{"UTC", "2021-10-31 02:30:00", "2021-10-31T02:30:00Z"},
	} {
		loc, err := loadZone(c.zone)
		if err != nil {
			t.Fatal(err)
		}
		z := newEventZone(loc)
		if ms, err := parseEventTime([]byte(c.in), z); err != nil || ms != utc(c.want) {
			t.Errorf("%s %q: %v, %v; want %s", c.zone, c.in, time.UnixMilli(ms).UTC(), err, c.want)
		}
	}
	_, err := parseEventTime([]byte("2020-03-09 25:00:00"), mustZone(t, "Europe/Berlin"))
	if want := `(Europe/Berlin without an offset) or epoch milliseconds: "2020-03-09 25:00:00"`; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %v, want it to end %s", err, want)
	}
}

// wallRef is the instant (Unix seconds) of the wall clock w (its fields read as UTC) in loc by
// RFC 5545's rule, found without eventZone: of w less each offset loc has within 26 hours of it
// (sampled every 30 minutes), the earliest instant whose wall clock in loc is w; where none is
// (a gap), w less the offset of the last sample whose wall clock is before w.
func wallRef(w int64, loc *time.Location) int64 {
	best, found := int64(0), false
	var before int64
	for k := -52; k <= 52; k++ {
		u := time.Unix(w+int64(k)*1800, 0).In(loc)
		_, off := u.Zone()
		if c := w - int64(off); !found || c < best {
			if _, coff := time.Unix(c, 0).In(loc).Zone(); coff == off {
				best, found = c, true
			}
		}
		if wallOf(u) < w {
			before = int64(off)
		}
	}
	if found {
		return best
	}
	return w - before
}

// wallOf is t's wall clock in its location as Unix seconds of those fields read as UTC.
func wallOf(t time.Time) int64 {
	_, off := t.Zone()
	return t.Unix() + int64(off)
}

// TestEventZoneAgainstReference: eventZone.offset gives wallRef's instant for the wall clocks
// around every transition from 1840 to 2040 of zones with the hard cases (DST either side of UTC,
// half-hour DST, negative DST (Dublin), transitions at midnight (Sao Paulo), Ramadan's pauses
// (Casablanca), skipped and repeated days (Apia, Kiritimati, Manila 1844, Sitka 1867)), one zone
// taking them in order, another shuffled (its kept period tested), a third fresh for each; where
// time.Date's instant has the wall clock, eventZone's has it too and is not later.
func TestEventZoneAgainstReference(t *testing.T) {
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Europe/Dublin", "America/Sao_Paulo",
		"Africa/Casablanca", "Pacific/Apia", "Pacific/Kiritimati", "Asia/Manila", "America/Sitka", "Asia/Kolkata", "Antarctica/Troll"}
	if testing.Short() {
		zones = zones[:3]
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, name := range zones {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		var walls []int64
		end := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
		for tm := time.Date(1840, 1, 1, 0, 0, 0, 0, time.UTC).In(loc); ; {
			_, e := tm.ZoneBounds()
			if e.IsZero() || e.After(end) {
				break
			}
			_, before := e.Add(-time.Second).Zone()
			_, after := e.Zone()
			for _, edge := range []int64{e.Unix() + int64(before), e.Unix() + int64(after)} {
				for _, d := range []int64{-5400, -3601, -3600, -1800, -1, 0, 1, 1799, 1800, 3599, 3600, 5400} {
					walls = append(walls, edge+d)
				}
			}
			tm = e
		}
		walls = append(walls, time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC).Unix(), time.Date(2026, 7, 15, 12, 0, 0, 0, time.UTC).Unix())
		shuffled := slicesShuffled(walls, rng)
		inOrder, mixed := mustZone(t, name), mustZone(t, name)
		for i, w := range walls {
			want := wallRef(w, loc)
			if got := w - inOrder.offset(w); got != want {
				t.Errorf("%s wall %s: %s, want %s", name, time.Unix(w, 0).UTC().Format(time.DateTime), time.Unix(got, 0).In(loc), time.Unix(want, 0).In(loc))
			}
			if got := w - mustZone(t, name).offset(w); got != want {
				t.Errorf("%s wall %s, a fresh zone: %s, want %s", name, time.Unix(w, 0).UTC().Format(time.DateTime), time.Unix(got, 0).In(loc), time.Unix(want, 0).In(loc))
			}
			if s := shuffled[i]; s-mixed.offset(s) != wallRef(s, loc) {
				t.Errorf("%s wall %s, shuffled: %s", name, time.Unix(s, 0).UTC().Format(time.DateTime), time.Unix(s-mixed.offset(s), 0).In(loc))
			}
			f := time.Unix(w, 0).UTC()
			td := time.Date(f.Year(), f.Month(), f.Day(), f.Hour(), f.Minute(), f.Second(), 0, loc)
			if wallOf(td) == w && (wallOf(time.Unix(want, 0).In(loc)) != w || want > td.Unix()) {
				t.Errorf("%s wall %s: %s, time.Date %s", name, f.Format(time.DateTime), time.Unix(want, 0).In(loc), td)
			}
		}
		if len(walls) < 50 {
			t.Errorf("%s: %d walls: the transitions were not found", name, len(walls))
		}
	}
}

func slicesShuffled(s []int64, rng *rand.Rand) []int64 {
	out := append([]int64(nil), s...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestParseEventTimeZoneAllocates0: a wall clock of a zone is read without allocating, in the
// kept period and when looking another up.
func TestParseEventTimeZoneAllocates0(t *testing.T) {
	z := mustZone(t, "Europe/Berlin")
	winter, summer := []byte("2020-03-09 10:34:33.250"), []byte("2020-07-09 10:34:33")
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"kept", func() { _, _ = parseEventTime(winter, z) }},
		{"looked up", func() { _, _ = parseEventTime(winter, z); _, _ = parseEventTime(summer, z) }},
	} {
		if n := testing.AllocsPerRun(100, c.f); n != 0 {
			t.Errorf("%s: %v allocations a run", c.name, n)
		}
	}
}

// TestEventTimeZoneConfig: ingest.event_time_zone defaults to UTC; a name that is not an IANA
// zone, and "Local" (the host's), are errors at the key's line:column.
func TestEventTimeZoneConfig(t *testing.T) {
	if c := Default(); c.EventTimeZone != "UTC" {
		t.Errorf("default %q", c.EventTimeZone)
	}
	for _, c := range []struct{ zone, want string }{
		{"Europe/Berlin", ""},
		{"Mars/Olympus", `c.yaml:6:3: ingest.event_time_zone: "Mars/Olympus" is not an IANA time zone (e.g. UTC, Europe/Berlin)`},
		{"Local", `c.yaml:6:3: ingest.event_time_zone: "Local" is the host's zone: name the zone (e.g. Europe/Berlin), so that the config means the same on every host`},
	} {
		f := pipelineFile{Ingest: Default()}
		doc := "ingest:\n  topic: in\n  features: [temp]\n  event_time_field: ts\n\n  event_time_zone: " + c.zone + "\n"
		err := config.LoadBytes("c.yaml", []byte(doc), &f)
		if c.want == "" && (err != nil || f.Ingest.EventTimeZone != c.zone) || c.want != "" && (err == nil || err.Error() != c.want) {
			t.Errorf("%s: %v, want %q", c.zone, err, c.want)
		}
	}
}

// TestDecodersReadEventTimeZone: each format's decoder reads a time without an offset in
// event_time_zone, and a time with one, or epoch milliseconds (a JSON number too), as it is.
func TestDecodersReadEventTimeZone(t *testing.T) {
	local := time.Date(2026, 7, 1, 6, 0, 0, 0, time.UTC).UnixMilli() // 08:00 CEST
	for _, c := range []struct {
		format Format
		msg    string
		ms     int64
	}{
		{FormatJSON, `{"temp":1,"ts":"2026-07-01 08:00:00"}`, local},
		{FormatJSON, `{"temp":1,"ts":"2026-07-01T08:00:00Z"}`, local + 2*3600e3},
		{FormatJSON, `{"temp":1,"ts":1782885600000}`, local},
		{FormatCSV, `1,2026-07-01 08:00:00`, local},
		{FormatCSV, `1,2026-07-01 09:00:00+03`, local},
		{FormatLogfmt, `temp=1 ts="2026-07-01T08:00:00"`, local},
		{FormatLogfmt, `temp=1 ts=1782885600000`, local},
	} {
		cfg := testConfig(c.format, []string{"temp"}, func(c *Config) {
			c.EventTimeField, c.EventTimeZone = "ts", "Europe/Berlin"
			if c.Format == FormatCSV {
				c.CSVHeader = []string{"temp", "ts"}
			}
		})
		d := mustDecoder(t, cfg)
		out := cfg.NewDecoded()
		if err := d.Decode([]byte(c.msg), out); err != nil || !out.HasEventTime || out.EventTime != c.ms {
			t.Errorf("%s %s: %v, %v; want %v", c.format, c.msg, time.UnixMilli(out.EventTime).UTC(), err, time.UnixMilli(c.ms).UTC())
		}
	}
}
