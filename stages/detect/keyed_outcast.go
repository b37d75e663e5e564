package detect

import (
	"math"
	"slices"

	"github.com/outlierd/outlierd/internal/algo/order"
)

// A key's outcasts. The global model leaves every significant record of its window out of its
// next builds (alarm.go, withoutOutcasts): a fault does not become normal by repeating. A key's
// window is small (keys.window, 200) and its first model is built from keys.min_records records
// (30): such a model can be narrow by chance, and then ordinary readings 2-3 sd out are
// significant under it. Left out, they cut the window's tails; the next model is narrower and
// finds more of them significant, build after build (docs/BENCHMARKS.md §13.0.3: 37 of one key's
// 190 readings left out, ordinary readings scoring 11-54). So a key's significant record is left
// out only when it is also far out against the window's other records themselves: beyond
// outcastZ robust sd of their median on some feature. That test reads the data, not the models,
// and the other records' median and interquartile range hardly move when a few tail records
// join them: the rule cannot feed on itself. A fault far out (a stuck sensor, a spike) is beyond
// it as long as it is the window's minority, as before.

// outcastZ is the distance from the median, in robust sd (interquartile range / 1.349), at which
// a normal variable's two-sided tail probability is 10^-min_score: the deviation that is
// significant by itself (4.42 at min_score 5). math.Erfcinv(p) is Erfinv(1 - p), which loses p's
// digits as 1 - p rounds (10^-min_score off by 0.03 % at 14) and is +Inf from about 16.3 on, where
// 1 - p is 1: that turned a key's outcasts off (TestOutcastZ). So above min_score 10 the root of
// ln erfc(x) = -min_score ln 10 is found by Newton's method instead: ln erfc is concave, and from
// x = sqrt(min_score ln 10), above the root (erfc(x) < e^-x^2), its steps fall to it. Finite for
// every finite min_score.
func outcastZ(minScore float64) float64 {
	if minScore <= 10 {
		return math.Sqrt2 * math.Erfcinv(math.Pow(10, -minScore))
	}
	target := float64(-minScore * math.Ln10) // (rounded: not fused into l - target)
	x := math.Sqrt(minScore) * math.Sqrt(math.Ln10)
	for range 100 {
		l := logErfc(x)
		slope := -2 / math.SqrtPi * math.Exp(-float64(x*x)-l) // (d/dx ln erfc(x))
		next := x - (l-target)/slope
		if !(next < x) {
			break
		}
		x = next
	}
	return math.Sqrt2 * x
}

// logErfc is ln erfc(x) for x > 0: math.Erfc's up to 26 (erfc(26) is 6e-296), its asymptotic
// series beyond (the first omitted term under 1e-12 there), where math.Erfc underflows.
func logErfc(x float64) float64 {
	if x < 26 {
		return math.Log(math.Erfc(x))
	}
	u := 1 / float64(2*x*x)
	series := -u + float64(3*u*u) - float64(15*u*u*u) + float64(105*u*u*u*u)
	return -float64(x*x) - math.Log(float64(x*math.SqrtPi)) + math.Log1p(series)
}

// outcastRule is what keepFarOutcasts reads of the configuration: z (outcastZ of min_score), and
// recur, the most alarms the key's cap starts in its window (capLimit of alarm_rate and
// keys.window: 4 of 200; admitRun).
type outcastRule struct {
	z     float64
	recur int
}

// keyOutcastRule is the rule of cfg for a key's window of `window` records.
func keyOutcastRule(cfg *Config, window int) outcastRule {
	return outcastRule{z: outcastZ(cfg.MinScore), recur: capLimit(cfg.AlarmRate, window)}
}

// keepFarOutcasts clears bits[i] (a significant row of the window cols, columns of n rows in
// order, oldest first) unless row i lies beyond rule.z robust sd of the median of the rows whose
// bits are clear, on some feature; it returns how many bits stay set. scratch holds the clear
// rows' values while they are ordered (its grown slice is returned for reuse), beyond one flag per
// row. A feature whose clear rows have no spread (their middle half one value: a counter at 0, a
// closed door) has no robust sd: there a significant row off that value is beyond while it
// belongs to the window's newest run of significant rows (a fault going on: a stuck value) or at
// most rule.recur episodes of the window reach as far from that value (offConstant); a value
// that more episodes reach than the cap could flag is the key's behaviour
// (TestKeyRecurringEventsLearnt, TestKeyZeroInflatedLearnt), where it was kept out for good. A
// feature with fewer than two clear readings judges no row.
func keepFarOutcasts(cols [][]float32, bits []bool, rule outcastRule, scratch []float32, beyond []bool) (int, []float32) {
	n := len(bits)
	clear(beyond[:n])
	for _, c := range cols {
		s := scratch[:0]
		for i, v := range c {
			if !bits[i] && v == v { // (NaN has no place in an order: TestKeyOutcastsIgnoreNaN)
				s = append(s, v)
			}
		}
		scratch = s
		if len(s) < 2 {
			// No reference on this feature (fewer than two clear rows, or NaN in all but one of
			// them): it judges no row. Returning here left every bit set, and the general build
			// left out every significant row (TestKeyOutcastsWithoutReadings).
			continue
		}
		med, reach := robustReach(s, rule.z)
		if !(reach > 0) {
			scratch = offConstant(c, bits, med, rule.recur, beyond, s[:0])
			continue
		}
		for i, v := range c {
			if bits[i] && !beyond[i] && math.Abs(float64(v)-med) > reach {
				beyond[i] = true
			}
		}
	}
	out := 0
	for i := range bits {
		bits[i] = beyond[i]
		if bits[i] {
			out++
		}
	}
	return out, scratch
}

// offConstant is keepFarOutcasts for a feature c whose clear rows' middle half is med: it marks
// beyond the significant rows off med that are in the newest run of significant rows, or whose
// distance from med at most recur episodes of c reach. An episode is a run of consecutive
// significant rows off med; its reach, its largest distance. So a stuck value that has ended is
// one fault (counted by its rows it joined the builds, and the same fault again within the window
// went unseen: TestKeyStuckOnConstantAgain); a count that recurs (a counter's 1s) or an amount
// among many (rain: no two alike, TestKeyZeroInflatedLearnt) joins the builds, and only the
// cap's count of the farthest episodes stays out, as the cap starts at most that many alarms. sig is
// scratch (keepFarOutcasts' values, no longer read), returned grown.
func offConstant(c []float32, bits []bool, med float64, recur int, beyond []bool, sig []float32) []float32 {
	run := len(bits)
	for run > 0 && bits[run-1] {
		run--
	}
	// sig: each episode's reach, as float32 (a distance from a float32 value to a median of
	// float32 values; only their order is read).
	off := func(i int) bool { return bits[i] && float64(c[i]) != med && c[i] == c[i] }
	for i := 0; i < len(c); {
		if !off(i) {
			i++
			continue
		}
		reach := 0.0
		for ; i < len(c) && off(i); i++ {
			reach = max(reach, math.Abs(float64(c[i])-med))
		}
		sig = append(sig, float32(reach))
	}
	slices.Sort(sig)
	for i, v := range c {
		if !off(i) || beyond[i] {
			continue
		}
		// the episodes reaching at least this row's distance
		lo, _ := slices.BinarySearch(sig, float32(math.Abs(float64(v)-med)))
		if i >= run || len(sig)-lo <= recur {
			beyond[i] = true
		}
	}
	return sig
}

// robustReach is the median of s and z robust sd (interquartile range / 1.349) of it; s (at
// least two values) is reordered. The four order statistics are each selected among the values
// at or below the one before (the sort they replace was 15 % of a key's build).
func robustReach(s []float32, z float64) (med, reach float64) {
	m := len(s)
	q3, hi, lo, q1 := (3*(m-1))/4, m/2, (m-1)/2, (m-1)/4
	order.SelectNth(s, q3)
	order.SelectNth(s[:q3+1], hi)
	order.SelectNth(s[:hi+1], lo)
	order.SelectNth(s[:lo+1], q1)
	return (float64(s[lo]) + float64(s[hi])) / 2, z * (float64(s[q3]) - float64(s[q1])) / 1.349
}

// markWarmupOutcasts marks significant the readings of st's window (its warm-up: the records
// before its first model, scored by the global model, which is blind to the key's own baseline
// and found none of them significant) that lie beyond z robust sd of the warm-up's median on
// some feature, when the key's first build comes due. A spike among them then stays out of the
// key's models as its later significant records do (keepFarOutcasts confirms it at each build),
// instead of widening the key's tail for as long as it stays in the window. A feature whose
// warm-up has no spread (its middle half one value: counts, a 0/1 sensor) marks nothing: there
// every other value was beyond, the first model was the one value's and every later reading off
// it significant for good (TestKeyWarmupCountsNotOutcasts); its later significant records are
// judged by keepFarOutcasts' episodes (offConstant).
func markWarmupOutcasts(st *keyState, z float64) {
	w, rows := st.sig.len(), st.size
	if rows < 2 {
		return
	}
	first := (st.next - rows + w) % w
	s := make([]float32, 0, rows)
	for _, ring := range st.cols {
		s = s[:0]
		for i := range rows {
			if v := ring[(first+i)%w]; v == v && !st.warmingAt((first+i)%w) { // (NaN has no place in an order; a warming value none in the key's builds)
				s = append(s, v)
			}
		}
		if len(s) < 2 {
			continue
		}
		med, reach := robustReach(s, z)
		if !(reach > 0) {
			continue // (no spread: above)
		}
		for i := range rows {
			if v := ring[(first+i)%w]; math.Abs(float64(v)-med) > reach {
				st.sig.set((first+i)%w, true)
			}
		}
	}
}
