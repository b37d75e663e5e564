package detect

import (
	"math"

	"github.com/outlierd/outlierd/internal/algo/order"
)

// Which significant records the global model's next builds leave out (issue 20 items 3 and 4).
// A fault must not become normal by repeating (item 4: a stuck sensor flagged through its first
// window), and the model must follow the stream (item 3). Leaving out every significant record
// serves item 4 and fails item 3 where the normal state moves faster than the model follows: the
// records just past the reference's edge score significant, are left out, and the next build's
// edge stays where it was, build after build, while the stream moves on (a real water station's
// winter cooling, 8.4 to 4.0 °C over weeks: 31 % of its rows flagged, runs of 1,000-4,000
// records, outcasts up to 36 % of the window and its newest part; docs/BENCHMARKS.md §12.42).
//
// The principle: a record far from the window but near its own recent past is where the stream
// has moved; a record far from its recent past is where it jumped. The stream reaches a moving
// level through its own records, each within the ordinary spread of the ones just before it; a
// fault (a stuck or shifted sensor, a spike) leaves its recent past in one step. So a significant
// record is taken back into the builds when, on every feature, it lies within outcastZ robust sd
// (the window's, of its records that are not significant: the unit of the explanations) of the
// median of the jumpBaseline records before it, and no record of its episode before it jumped.
// An episode is a series of significant records whose gaps are shorter than jumpBaseline, so that
// a fault's records after its first (which are near the fault's own, and the deadband's held
// records between them) stay out with it; it ends once jumpBaseline records in a row are not
// significant: a baseline of their own. outcastZ is the deviation that is significant by itself
// at min_score (keyed_outcast.go): a record of a stream standing still passes it as often as a
// record of that stream scores significant. The outcast floor (alarm.go) still applies to the
// records that stay out.
//
// What it gives up: a fault that creeps in continuously (a sensor drifting by fouling) is taken
// in as a moving stream is; a joint fault whose features each stay within their spread of the
// recent past (a broken correlation) is taken in too, the test being per feature. The records
// are read in stream order: an interleaved fleet under one model (no key_by) compares a record
// with other series' records, the window's mixture, in the mixture's spread: a series' fault
// within the fleet's range is taken in there (key_by: key gives each series its own model and
// keyed_outcast.go's rule). An episode that begins within the window's first
// jumpBaseline records has no baseline: it stays out, as every significant record did before.

// jumpBaseline is the number of records before a significant record whose median is its recent
// level, and the run of records not significant that ends an episode. The median of 50 records
// of noise sd σ varies by about 1.25σ/√50 = 0.18σ, small against outcastZ (4.42σ at min_score 5);
// and 50 records are a few minutes of a plant's sensor at a second each, an hour at a minute.
const jumpBaseline = 50

// keepJumps clears the bits (significant records of the window cols, columns of n rows in
// stream order, oldest first) of the records the stream reached continuously (above), and
// returns how many it cleared. z is outcastZ of min_score.
func keepJumps(cols [][]float32, bits []bool, z float64) int {
	n := len(bits)
	some := false
	for _, b := range bits {
		if b {
			some = true
			break
		}
	}
	if !some || len(cols) == 0 || len(cols[0]) != n || n <= jumpBaseline {
		return 0
	}
	// Each feature's reach: z robust sd of the records not significant (0: no spread, or fewer
	// than two readings: any move off the recent level is a jump there).
	reach := make([]float64, len(cols))
	scratch := make([]float32, 0, n)
	for j, c := range cols {
		s := scratch[:0]
		for i, v := range c[:n] {
			if !bits[i] && v == v {
				s = append(s, v)
			}
		}
		if len(s) >= 2 {
			_, reach[j] = robustReach(s, z)
		}
		scratch = s
	}
	base := make([]float32, 0, jumpBaseline)
	near := func(i int) bool {
		for j, c := range cols {
			v := c[i]
			if v != v {
				return false
			}
			base = base[:0]
			for _, u := range c[i-jumpBaseline : i] {
				if u == u {
					base = append(base, u)
				}
			}
			if len(base) == 0 {
				return false
			}
			med := median32(base)
			if !(math.Abs(float64(v)-med) <= reach[j]) {
				return false
			}
		}
		return true
	}
	cleared, quiet, jumped := 0, jumpBaseline, true
	for i, b := range bits {
		if !b {
			quiet++
			continue
		}
		if quiet >= jumpBaseline { // a new episode: no baseline before the window's 50th record
			jumped = i < jumpBaseline
		}
		quiet = 0
		if !jumped && near(i) {
			bits[i] = false
			cleared++
		} else {
			jumped = true
		}
	}
	return cleared
}

// median32 is the median of s (reordered), as float64.
func median32(s []float32) float64 {
	m := len(s)
	hi, lo := m/2, (m-1)/2
	order.SelectNth(s, hi)
	if lo == hi {
		return float64(s[hi])
	}
	order.SelectNth(s[:hi], lo)
	return (float64(s[lo]) + float64(s[hi])) / 2
}
