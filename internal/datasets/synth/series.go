package synth

import (
	"fmt"
	"math"
	"math/bits"
)

// Sensor time series ('gen --kind sensors'): a labelled stream in file order, one reading per
// row, for the streaming side-by-side (docs/bench/stream_sbs.py). Each row is
//
//	value_j = mean_j(t) + sd_j * (sign_j * sqrt(rho) * z0 + sqrt(1-rho) * e_j)   (z0, e_j ~ N(0,1))
//
// so every sensor has marginal sd sd_j and two sensors correlate with +-rho (the shared factor
// z0: temperature and pressure rise together, humidity falls). mean_j(t) is the sensor's
// baseline plus drift plus daily seasonality. Anomalies are injected on top and labelled:
//
//   - spike: one row, value += U[SpikeMin, SpikeMax] * sd_j (sign per SpikeSign). Exactly
//     round(SpikeRate * Rows) spikes at distinct rows drawn uniformly from [Head, Rows).
//   - level shift: value += ShiftSize * sd_j (noise continues) for ShiftLength of that key's
//     records (0: to the end of the stream).
//   - stuck: value = the constant baseline + StuckAt * sd_j (StuckAt = 0: the sensor's last value
//     before the span), no noise, for StuckLength of that key's records (0: to the end).
//   - burst: value += BurstSize * sd_j * sin(2 pi n / BurstPeriod), n the span's record count
//     from 0 (noise continues), for BurstLength of that key's records (0: to the end): an
//     oscillation around the ordinary level (a vibration, a tremor) whose readings stay within
//     a few sd; its variance is sd_j^2 (1 + BurstSize^2 / 2).
//   - contextual: one row whose value is the sensor's normal value twelve hours away (the daily
//     term negated), placed only where |sin| >= 0.7, so it differs from the time of day's mean
//     by at least 1.4 * Daily sd while staying inside the stream's overall range.
//
// Resolution (a quantised sensor): value_j is rounded to the nearest multiple of
// Resolution[j] (raw units; 0 or a missing entry: not rounded) after every anomaly is
// applied, as an ADC or a display of fixed resolution reports it: a sensor whose noise is
// below its resolution reads one value for long stretches, and any change is a step of at
// least one quantum.
//
// Labels: a row is 1 when any anomaly touches it (Series.Kind names which). A level shift,
// stuck span or burst labels its first SpanLabel records 1 (the records of the span's key), or every
// record of the span when SpanLabel is 0, the default: the sensor is faulty for the whole span.
// With SpanLabel = N > 0 the span's later records are labelled 0 although their values are
// still off: use it to ask "is the fault raised within N readings", not "is every reading of
// it flagged". Drift and seasonality are normal behaviour and never labelled.
//
// A fleet (Keys > 0): each row is one reading of one of Keys sensors, the key drawn uniformly
// per row; each key and feature has its own baseline U[BaselineMin, BaselineMax] and noise sd
// U[NoiseMin, NoiseMax], and spikes, shifts and stuck spans are in units of that key's own sd.
// Spans count the records of their key. Spans and spikes may overlap; spans on one key wait
// for the key's previous span to end.

// SeriesParams are the knobs of the sensor stream. DefaultSeriesParams gives the issue's
// first scenario (3 correlated sensors, 0.1% spikes of +20..+30 sd on temperature).
type SeriesParams struct {
	Rows    int    // number of rows
	Seed    uint64 // selects the stream
	Sensors int    // features per row (per key in a fleet)
	// Correlation rho in [0, 1): the share of each sensor's variance from the shared factor.
	Correlation float64
	// Head rows at the start carry no anomaly (a clean warm-up); spans and spikes start after it.
	Head int
	// Sensor is the index of the sensor that anomalies hit; -1 draws one per anomaly.
	Sensor int

	SpikeRate, SpikeMin, SpikeMax float64 // rate of rows; size in sd
	SpikeSign                     int     // +1, -1, or 0 for either (equal odds)

	Shifts      int     // number of level shifts
	ShiftSize   float64 // in sd (signed)
	ShiftLength int     // records of the key; 0 = to the end

	Stuck       int     // number of stuck spans
	StuckAt     float64 // in sd from the baseline; 0 = the last value before the span
	StuckLength int     // records of the key; 0 = to the end

	Bursts      int     // number of oscillation bursts
	BurstSize   float64 // amplitude in sd
	BurstLength int     // records of the key; 0 = to the end
	BurstPeriod int     // records of the key per cycle, >= 2

	SpanLabel int // label the first SpanLabel rows of a span; 0 = every row

	Drift      float64 // the means move by Drift sd every DriftEvery rows (a random sign per sensor)
	DriftEvery int

	Daily      float64 // daily seasonality amplitude in sd (0: none)
	Contextual int     // contextual anomalies (needs Daily > 0)
	StartMS    int64   // timestamp of row 0, epoch ms
	PeriodMS   int64   // sample period: row i is at StartMS + i*PeriodMS

	Keys                     int // fleet size; 0 = one machine with the named sensors
	BaselineMin, BaselineMax float64
	NoiseMin, NoiseMax       float64

	// Resolution[j] is sensor j's quantum in raw units (0: continuous); entries beyond
	// Sensors are refused, missing ones are 0.
	Resolution []float64
}

// DefaultSeriesParams are the first scenario's settings with every other anomaly off.
func DefaultSeriesParams() SeriesParams {
	return SeriesParams{
		Rows: 20000, Seed: 1, Sensors: 3, Correlation: 0.6, Sensor: 0,
		SpikeRate: 0.001, SpikeMin: 20, SpikeMax: 30, SpikeSign: 1,
		ShiftSize: 8, ShiftLength: 500, StuckAt: 8, StuckLength: 500,
		BurstSize: 2, BurstLength: 500, BurstPeriod: 8,
		DriftEvery:  5000,
		StartMS:     1767225600000, // 2026-01-01T00:00:00Z
		PeriodMS:    60000,
		BaselineMin: 0, BaselineMax: 1000, NoiseMin: 1, NoiseMax: 5,
	}
}

// seriesSensor is one named sensor of a single machine: baseline, noise sd and the sign of
// its loading on the shared factor.
type seriesSensor struct {
	name     string
	mean, sd float64
	sign     float64
}

// seriesSensors are the single machine's sensors, in column order (temperature 70 +- 2 as in
// the issue; the rest are plausible plant readings).
var seriesSensors = []seriesSensor{
	{"temp", 70, 2, 1}, {"pressure", 101.3, 0.4, 1}, {"humidity", 45, 3, -1},
	{"vibration", 0.5, 0.05, 1}, {"current", 12, 0.8, 1}, {"voltage", 230, 1.5, -1},
	{"rpm", 1500, 40, 1}, {"flow", 8, 0.6, 1},
}

// Validate reports every problem of p at once.
func (p SeriesParams) Validate() error {
	var errs []string
	add := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if p.Rows < 1 {
		add("rows must be >= 1, got %d", p.Rows)
	}
	// A check that only follows from an earlier problem is skipped: the first cause alone.
	sensorsOK := p.Sensors >= 1 && (p.Keys != 0 || p.Sensors <= len(seriesSensors))
	if !sensorsOK {
		add("sensors must be in [1, %d] (any number >= 1 with keys), got %d", len(seriesSensors), p.Sensors)
	}
	if !(p.Correlation >= 0 && p.Correlation < 1) {
		add("correlation must be in [0, 1), got %g", p.Correlation)
	}
	if p.Head < 0 || (p.Rows >= 1 && p.Head >= p.Rows) {
		add("head must be in [0, rows), got %d", p.Head)
	}
	if sensorsOK && (p.Sensor < -1 || p.Sensor >= p.Sensors) {
		add("sensor must be -1 (any) or in [0, %d), got %d", p.Sensors, p.Sensor)
	}
	rateOK := p.SpikeRate >= 0 && p.SpikeRate < 1
	if !rateOK {
		add("spike-rate must be in [0, 1), got %g", p.SpikeRate)
	}
	if !finite(p.SpikeMin) || !finite(p.SpikeMax) || p.SpikeMin < 0 || p.SpikeMax < p.SpikeMin {
		add("spike size must satisfy 0 <= min <= max, got %g..%g", p.SpikeMin, p.SpikeMax)
	}
	if p.SpikeSign < -1 || p.SpikeSign > 1 {
		add("spike sign must be -1, 0 or 1, got %d", p.SpikeSign)
	}
	if p.Shifts < 0 || p.Stuck < 0 || p.Bursts < 0 || p.ShiftLength < 0 || p.StuckLength < 0 || p.BurstLength < 0 || p.SpanLabel < 0 || p.Contextual < 0 {
		add("counts and lengths must be >= 0")
	}
	// Each span starts at a row: more than rows never start, and are held in memory first.
	if p.Shifts > p.Rows {
		add("shifts must be at most rows (%d), got %d", p.Rows, p.Shifts)
	}
	if p.Stuck > p.Rows {
		add("stuck must be at most rows (%d), got %d", p.Rows, p.Stuck)
	}
	if p.Bursts > p.Rows {
		add("bursts must be at most rows (%d), got %d", p.Rows, p.Bursts)
	}
	if p.Bursts > 0 && p.BurstPeriod < 2 {
		add("burst-period must be >= 2 records (a cycle), got %d", p.BurstPeriod)
	}
	if !finite(p.BurstSize) {
		add("burst size must be finite, got %g", p.BurstSize)
	}
	if !finite(p.ShiftSize) || !finite(p.StuckAt) || !finite(p.Drift) || !finite(p.Daily) || p.Daily < 0 {
		add("shift size, stuck-at, drift and daily must be finite (daily >= 0)")
	}
	if p.Drift != 0 && p.DriftEvery < 1 {
		add("drift-every must be >= 1 with drift, got %d", p.DriftEvery)
	}
	if p.Contextual > 0 && p.Daily == 0 {
		add("contextual anomalies need daily seasonality (daily > 0)")
	}
	if p.PeriodMS < 1 {
		add("period-ms must be >= 1, got %d", p.PeriodMS)
	} else if p.Rows >= 1 {
		// The last row's time start + (rows-1) x period must be an int64 of epoch ms: past it
		// the times wrapped around to negative ones. (uint64 arithmetic: MaxInt64 - start is the
		// headroom for any start.)
		hi, span := bits.Mul64(uint64(p.Rows-1), uint64(p.PeriodMS))
		if hi != 0 || span > uint64(math.MaxInt64)-uint64(p.StartMS) {
			add("start-ms %d + (rows-1) x period-ms %d is past the largest epoch ms (%d)", p.StartMS, p.PeriodMS, int64(math.MaxInt64))
		}
	}
	if p.Keys < 0 {
		add("keys must be >= 0, got %d", p.Keys)
	}
	if sensorsOK && len(p.Resolution) > p.Sensors {
		add("resolution has %d entries for %d sensors", len(p.Resolution), p.Sensors)
	}
	for j, q := range p.Resolution {
		if !finite(q) || q < 0 {
			add("resolution of sensor %d must be finite and >= 0, got %g", j, q)
		}
	}
	if p.Keys > 0 && (!finite(p.BaselineMin) || !finite(p.BaselineMax) || p.BaselineMax < p.BaselineMin ||
		!finite(p.NoiseMin) || !finite(p.NoiseMax) || p.NoiseMin <= 0 || p.NoiseMax < p.NoiseMin) {
		add("fleet: need baseline min <= max and 0 < noise min <= max, got %g..%g and %g..%g",
			p.BaselineMin, p.BaselineMax, p.NoiseMin, p.NoiseMax)
	}
	if rateOK && p.Contextual >= 0 && p.Rows >= 1 && p.Head >= 0 && p.Head < p.Rows && int(math.Round(p.SpikeRate*float64(p.Rows)))+p.Contextual > p.Rows-p.Head {
		add("more single-row anomalies than rows after head")
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("synth: sensors: %s", joinErrs(errs))
}

// Series is a generated sensor stream: the values, labels, timestamps and (in a fleet) keys.
type Series struct {
	Data
	TS  []int64  // epoch ms per row
	Key []string // the key per row; nil without a fleet
	// Kind names the anomaly of each labelled row ("spike", "shift", "stuck", "contextual";
	// joined by '+' where several overlap) and is "" elsewhere: for per-kind recall.
	Kind []string
}

// seriesSpan is one level shift, stuck span or burst, pending until its key's first record at or
// after Start.
type seriesSpan struct {
	start, key, sensor int
	stuck, burst       bool
	sign               float64
}

// spanState is the span a key is in: the records left and how many of them are labelled.
type spanState struct {
	span           seriesSpan
	left, labelled int // left < 0: to the end
	value          float64
	n              int // records of the span so far (a burst's phase)
}

// SensorSeries generates the stream of p (see the comment at the top of the file).
func SensorSeries(p SeriesParams) (*Series, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r := newRand(p.Seed)
	keys := max(p.Keys, 1)
	nf := p.Sensors
	// Per key and sensor: baseline, sd, factor sign, drift direction.
	base, sd, sign, drift := make([][]float64, keys), make([][]float64, keys), make([][]float64, keys), make([][]float64, keys)
	for k := range keys {
		base[k], sd[k], sign[k], drift[k] = make([]float64, nf), make([]float64, nf), make([]float64, nf), make([]float64, nf)
		for j := range nf {
			if p.Keys == 0 {
				s := seriesSensors[j]
				base[k][j], sd[k][j], sign[k][j] = s.mean, s.sd, s.sign
			} else {
				base[k][j] = p.BaselineMin + float64((p.BaselineMax-p.BaselineMin)*r.Float64())
				sd[k][j] = p.NoiseMin + float64((p.NoiseMax-p.NoiseMin)*r.Float64())
				sign[k][j] = 1
			}
			drift[k][j] = float64(1 - 2*r.IntN(2))
		}
	}
	s := &Series{Data: *newData(p.Rows, nf, false, true), TS: make([]int64, p.Rows), Kind: make([]string, p.Rows)}
	for j := range nf {
		if p.Keys == 0 {
			s.Features[j] = seriesSensors[j].name
		} else if nf == 1 {
			s.Features[j] = "value"
		} else {
			s.Features[j] = fmt.Sprintf("value%d", j+1)
		}
	}
	keyOf := make([]int, p.Rows)
	if p.Keys > 0 {
		s.Key = make([]string, p.Rows)
		width := len(fmt.Sprint(p.Keys - 1))
		names := make([]string, p.Keys)
		for k := range names {
			names[k] = fmt.Sprintf("sensor-%0*d", width, k)
		}
		for i := range keyOf {
			keyOf[i] = r.IntN(p.Keys)
			s.Key[i] = names[keyOf[i]]
		}
	}
	pickSensor := func() int {
		if p.Sensor >= 0 {
			return p.Sensor
		}
		return r.IntN(nf)
	}
	after := p.Rows - p.Head
	// Spans, by start row, per key.
	pending := make([][]seriesSpan, keys)
	addSpans := func(n int, stuck, burst bool, size float64) {
		for range n {
			sp := seriesSpan{start: p.Head + r.IntN(after), sensor: pickSensor(), stuck: stuck, burst: burst, sign: 1}
			if p.Keys > 0 {
				sp.key = keyOf[sp.start]
			}
			if size < 0 {
				sp.sign = -1
			}
			pending[sp.key] = append(pending[sp.key], sp)
		}
	}
	addSpans(p.Shifts, false, false, p.ShiftSize)
	addSpans(p.Stuck, true, false, p.StuckAt)
	addSpans(p.Bursts, false, true, 1) // (after the others: a stream without bursts draws as before)
	for k := range pending {
		sortSpans(pending[k])
	}
	// Single-row anomalies: distinct rows after Head; spikes first, then contextual ones.
	spike := make(map[int]float64)   // row -> signed size in sd
	context := make(map[int]bool)    // row -> contextual anomaly
	spikeSensor := make(map[int]int) // row -> sensor
	nSpikes := int(math.Round(p.SpikeRate * float64(p.Rows)))
	for len(spike) < nSpikes {
		i := p.Head + r.IntN(after)
		if _, dup := spike[i]; dup {
			continue
		}
		size := p.SpikeMin + float64((p.SpikeMax-p.SpikeMin)*r.Float64())
		if p.SpikeSign < 0 || (p.SpikeSign == 0 && r.IntN(2) == 0) {
			size = -size
		}
		spike[i], spikeSensor[i] = size, pickSensor()
	}
	daily := func(i, j int) float64 { // the seasonal phase: peaks at 15:00 UTC
		tod := float64((p.StartMS+int64(i)*p.PeriodMS)%86400000) / 86400000
		return math.Sin(2 * math.Pi * (tod - 0.375))
	}
	for tries := 0; len(context) < p.Contextual; tries++ {
		if tries > 100*p.Rows {
			return nil, fmt.Errorf("synth: sensors: cannot place %d contextual anomalies (|sin| >= 0.7) after head", p.Contextual)
		}
		i := p.Head + r.IntN(after)
		if _, dup := spike[i]; dup || context[i] || math.Abs(daily(i, 0)) < 0.7 {
			continue
		}
		context[i] = true
		spikeSensor[i] = pickSensor()
	}

	state := make([]*spanState, keys)
	last := make([][]float64, keys)
	for k := range last {
		last[k] = append([]float64(nil), base[k]...)
	}
	sqrtRho, sqrtRest := math.Sqrt(p.Correlation), math.Sqrt(1-p.Correlation)
	v := make([]float64, nf)
	for i := range p.Rows {
		k := keyOf[i]
		s.TS[i] = p.StartMS + int64(i)*p.PeriodMS
		z0 := r.NormFloat64()
		seas := 0.0
		if p.Daily > 0 {
			seas = daily(i, 0)
		}
		for j := range nf {
			mean := base[k][j] + float64(sign[k][j]*p.Daily*sd[k][j]*seas)
			if p.Drift != 0 {
				mean += drift[k][j] * p.Drift * sd[k][j] * float64(i) / float64(p.DriftEvery)
			}
			v[j] = mean + float64(sd[k][j]*(float64(sign[k][j]*sqrtRho*z0)+float64(sqrtRest*r.NormFloat64())))
		}
		var kinds []string
		// A span starts at the key's first record at or after its start row.
		if state[k] == nil && len(pending[k]) > 0 && pending[k][0].start <= i {
			sp := pending[k][0]
			pending[k] = pending[k][1:]
			st := &spanState{span: sp, left: -1, labelled: p.SpanLabel}
			length := p.ShiftLength
			if sp.burst {
				length = p.BurstLength
			}
			if sp.stuck {
				length = p.StuckLength
				st.value = last[k][sp.sensor]
				if p.StuckAt != 0 {
					st.value = base[k][sp.sensor] + float64(p.StuckAt*sd[k][sp.sensor])
				}
			}
			if length > 0 {
				st.left = length
			}
			if p.SpanLabel == 0 {
				st.labelled = -1
			}
			state[k] = st
		}
		if st := state[k]; st != nil {
			j := st.span.sensor
			kind := "shift"
			switch {
			case st.span.stuck:
				v[j], kind = st.value, "stuck"
			case st.span.burst:
				v[j] += float64(p.BurstSize * sd[k][j] * math.Sin(2*math.Pi*float64(st.n%p.BurstPeriod)/float64(p.BurstPeriod)))
				kind = "burst"
			default:
				v[j] += float64(p.ShiftSize * sd[k][j])
			}
			st.n++
			if st.labelled != 0 {
				kinds = append(kinds, kind)
				if st.labelled > 0 {
					st.labelled--
				}
			}
			if st.left > 0 {
				st.left--
				if st.left == 0 {
					state[k] = nil
				}
			}
		}
		if size, ok := spike[i]; ok {
			v[spikeSensor[i]] += float64(size * sd[k][spikeSensor[i]])
			kinds = append(kinds, "spike")
		}
		if context[i] {
			j := spikeSensor[i]
			v[j] -= float64(2 * sign[k][j] * p.Daily * sd[k][j] * seas) // the value of twelve hours away
			kinds = append(kinds, "contextual")
		}
		for j := range nf {
			if j < len(p.Resolution) && p.Resolution[j] > 0 {
				// (from 2^52 quanta on every float64 is a whole number of them: a quantum that
				// small changes nothing, and value/quantum may overflow to +-inf)
				if r := v[j] / p.Resolution[j]; math.Abs(r) < 1<<52 {
					v[j] = math.Round(r) * p.Resolution[j]
				}
			}
			s.Cols[j][i] = float32(v[j])
			last[k][j] = v[j]
		}
		if len(kinds) > 0 {
			s.Label[i] = 1
			s.Kind[i] = joinKinds(kinds)
		}
	}
	return s, nil
}

func sortSpans(sp []seriesSpan) {
	for i := 1; i < len(sp); i++ { // insertion sort: a handful of spans per key
		for j := i; j > 0 && sp[j].start < sp[j-1].start; j-- {
			sp[j], sp[j-1] = sp[j-1], sp[j]
		}
	}
}

func joinKinds(k []string) string {
	s := k[0]
	for _, x := range k[1:] {
		s += "+" + x
	}
	return s
}
