package synth

import (
	"math"
	"strings"
	"testing"
)

func mustSeries(t *testing.T, p SeriesParams) *Series {
	t.Helper()
	s, err := SensorSeries(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func meanSD(x []float64) (float64, float64) {
	var m, v float64
	for _, a := range x {
		m += a
	}
	m /= float64(len(x))
	for _, a := range x {
		v += (a - m) * (a - m)
	}
	return m, math.Sqrt(v / float64(len(x)-1))
}

// TestSeriesDefaultScenario: the first stream: 3 sensors, exactly 20 spikes of
// +20..+30 sd on temp (0.1% of 20,000), the normal rows at 70 +- 2 with the configured
// correlation, timestamps one period apart.
func TestSeriesDefaultScenario(t *testing.T) {
	s := mustSeries(t, DefaultSeriesParams())
	if s.Rows() != 20000 || s.Dims() != 3 || s.Key != nil || len(s.TS) != 20000 {
		t.Fatalf("shape: %d rows %d dims key %v", s.Rows(), s.Dims(), s.Key != nil)
	}
	if got := strings.Join(s.Features, ","); got != "temp,pressure,humidity" {
		t.Fatalf("features %s", got)
	}
	var normal [3][]float64
	spikes := 0
	for i := range s.Rows() {
		if i > 0 && s.TS[i]-s.TS[i-1] != 60000 {
			t.Fatalf("row %d: period %d", i, s.TS[i]-s.TS[i-1])
		}
		if s.Label[i] == 1 {
			spikes++
			if s.Kind[i] != "spike" {
				t.Fatalf("row %d: kind %q", i, s.Kind[i])
			}
			// temp = 70 + noise + 20..30 sd: the noise (sd 2) cannot bring it below 70 + 40 - 5*2.
			if v := s.Cols[0][i]; v < 100 || v > 140 {
				t.Errorf("spike row %d: temp %g outside 70+40..60 (+-5 sd of noise)", i, v)
			}
			continue
		}
		for j := range 3 {
			normal[j] = append(normal[j], float64(s.Cols[j][i]))
		}
	}
	if spikes != 20 {
		t.Fatalf("%d spikes, want exactly round(0.001*20000) = 20", spikes)
	}
	// 19,980 normal rows: the sample mean's sd is 2/sqrt(19980) = 0.014, the sample sd's about
	// 2/sqrt(2*19980) = 0.01; 0.1 is 7+ standard errors.
	for j, want := range [][2]float64{{70, 2}, {101.3, 0.4}, {45, 3}} {
		m, sd := meanSD(normal[j])
		if math.Abs(m-want[0]) > 0.1*want[1]*5 || math.Abs(sd-want[1]) > 0.05*want[1] {
			t.Errorf("%s: mean %.3f sd %.3f, want %g +- %g", s.Features[j], m, sd, want[0], want[1])
		}
	}
	// Correlation +rho between temp and pressure, -rho with humidity (the standard error of a
	// correlation at n = 19980 is about (1-rho^2)/sqrt(n) = 0.005).
	corr := func(a, b []float64) float64 {
		ma, sa := meanSD(a)
		mb, sb := meanSD(b)
		var c float64
		for i := range a {
			c += (a[i] - ma) * (b[i] - mb)
		}
		return c / float64(len(a)-1) / sa / sb
	}
	if c := corr(normal[0], normal[1]); math.Abs(c-0.6) > 0.03 {
		t.Errorf("corr(temp, pressure) = %.3f, want 0.6", c)
	}
	if c := corr(normal[0], normal[2]); math.Abs(c+0.6) > 0.03 {
		t.Errorf("corr(temp, humidity) = %.3f, want -0.6", c)
	}
}

func TestSeriesDeterministicPerSeed(t *testing.T) {
	p := DefaultSeriesParams()
	p.Rows, p.Shifts, p.Stuck, p.Daily, p.Contextual, p.Keys = 5000, 2, 2, 3, 5, 7
	a, b := mustSeries(t, p), mustSeries(t, p)
	for i := range a.Rows() {
		if a.Label[i] != b.Label[i] || a.Key[i] != b.Key[i] || a.Kind[i] != b.Kind[i] {
			t.Fatalf("row %d differs between two runs of seed %d", i, p.Seed)
		}
		for j := range a.Cols {
			if a.Cols[j][i] != b.Cols[j][i] {
				t.Fatalf("row %d col %d differs between two runs of seed %d", i, j, p.Seed)
			}
		}
	}
	p.Seed = 2
	c := mustSeries(t, p)
	same := 0
	for i := range a.Rows() {
		if a.Cols[0][i] == c.Cols[0][i] {
			same++
		}
	}
	if same > 10 {
		t.Fatalf("seeds 1 and 2 share %d of %d values", same, a.Rows())
	}
}

// TestSeriesSpans: a stuck span holds one value, no noise, at baseline + StuckAt sd for exactly
// StuckLength rows; a level shift moves the mean by ShiftSize sd; SpanLabel labels the first
// N rows of each span only.
func TestSeriesSpans(t *testing.T) {
	p := DefaultSeriesParams()
	p.Rows, p.SpikeRate, p.Head = 10000, 0, 1000
	p.Stuck, p.StuckAt, p.StuckLength = 1, 8, 400
	s := mustSeries(t, p)
	first, n := -1, 0
	for i := range s.Rows() {
		if s.Label[i] == 1 {
			if first < 0 {
				first = i
			}
			n++
			if s.Cols[0][i] != float32(70+8*2) || s.Kind[i] != "stuck" {
				t.Fatalf("row %d: stuck value %g kind %q, want 86 stuck", i, s.Cols[0][i], s.Kind[i])
			}
		}
	}
	if n != 400 || first < 1000 {
		t.Fatalf("stuck span: %d labelled rows from %d, want 400 after head 1000", n, first)
	}
	if s.Cols[0][first+400] == s.Cols[0][first+399] {
		t.Fatal("the sensor is still stuck after its span")
	}

	p.Stuck, p.Shifts, p.ShiftSize, p.ShiftLength, p.SpanLabel = 0, 1, -6, 2000, 10
	s = mustSeries(t, p)
	var labelled []int
	for i := range s.Rows() {
		if s.Label[i] == 1 {
			labelled = append(labelled, i)
		}
	}
	if len(labelled) != 10 || labelled[9]-labelled[0] != 9 {
		t.Fatalf("span-label 10: labelled rows %v, want 10 consecutive", labelled)
	}
	var in []float64
	for i := labelled[0]; i < min(labelled[0]+2000, s.Rows()); i++ {
		in = append(in, float64(s.Cols[0][i]))
	}
	// The shifted mean is 70 - 12; the mean of >= 1000 rows with sd 2 is within 0.2 of it.
	if m, _ := meanSD(in); len(in) >= 1000 && math.Abs(m-58) > 0.2 {
		t.Fatalf("level shift: mean %g over the span, want 58", m)
	}
}

// TestSeriesFleet: keys get their own baselines in [0, 1000] and noise sd in [1, 5], spikes
// are +k of that key's own sd, and every key is present.
func TestSeriesFleet(t *testing.T) {
	p := DefaultSeriesParams()
	p.Rows, p.Keys, p.Sensors, p.SpikeRate, p.SpikeMin, p.SpikeMax = 100000, 20, 1, 0.002, 8, 8
	s := mustSeries(t, p)
	if s.Features[0] != "value" || len(s.Key) != s.Rows() {
		t.Fatalf("fleet shape: %v, %d keys", s.Features, len(s.Key))
	}
	byKey := map[string][]float64{}
	var spikeRows []int
	for i := range s.Rows() {
		if s.Label[i] == 1 {
			spikeRows = append(spikeRows, i)
			continue
		}
		byKey[s.Key[i]] = append(byKey[s.Key[i]], float64(s.Cols[0][i]))
	}
	if len(byKey) != 20 || len(spikeRows) != 200 {
		t.Fatalf("%d keys, %d spikes; want 20 and 200", len(byKey), len(spikeRows))
	}
	stats := map[string][2]float64{}
	for k, x := range byKey {
		m, sd := meanSD(x)
		// About 5,000 rows a key: sd of the sample sd is sd/100; 10% is ten of them.
		if m < 0 || m > 1000 || sd < 0.9 || sd > 5.5 {
			t.Errorf("key %s: mean %g sd %g outside [0,1000] and [1,5]", k, m, sd)
		}
		stats[k] = [2]float64{m, sd}
	}
	for _, i := range spikeRows {
		st := stats[s.Key[i]]
		// +8 sd of the key's own noise, plus that noise: 3.5..12.5 sd with +-4.5 sd of slack.
		if z := (float64(s.Cols[0][i]) - st[0]) / st[1]; z < 3.5 || z > 12.5 {
			t.Errorf("spike row %d: %.1f of its key's sd, want about 8", i, z)
		}
	}
}

// TestSeriesDriftSeasonContext: drift moves the mean Drift sd every DriftEvery rows; the
// daily term peaks at 15:00; a contextual anomaly is the value of twelve hours away.
func TestSeriesDriftSeasonContext(t *testing.T) {
	p := DefaultSeriesParams()
	p.Rows, p.SpikeRate, p.Drift, p.DriftEvery = 20000, 0, 1, 5000
	s := mustSeries(t, p)
	col := func(j, a, b int) []float64 {
		var x []float64
		for i := a; i < b; i++ {
			x = append(x, float64(s.Cols[j][i]))
		}
		return x
	}
	for j, sd := range []float64{2, 0.4, 3} {
		m0, _ := meanSD(col(j, 0, 1000))
		m1, _ := meanSD(col(j, 19000, 20000))
		// 18,000 rows apart: 3.6 sd of drift; the windows' means have 0.1 sd of slack each.
		if d := math.Abs(m1-m0) / sd; math.Abs(d-3.6) > 0.3 {
			t.Errorf("%s: moved %.2f sd, want 3.6", s.Features[j], d)
		}
	}

	p.Drift, p.Daily, p.Contextual, p.Rows = 0, 5, 30, 14400 // ten days at one a minute
	s = mustSeries(t, p)
	var at15, at03 []float64
	ctx := 0
	for i := range s.Rows() {
		if s.Label[i] == 1 {
			ctx++
			hour := (s.TS[i] / 3600000) % 24
			v := float64(s.Cols[0][i])
			// Mean 70 + 10*sin; twelve hours away the mean is 70 - 10*sin, |sin| >= 0.7: the
			// reading sits on the other side of 70 from its hour's mean (noise 2 < 7).
			want := -math.Sin(2 * math.Pi * (float64(hour)/24 - 0.375))
			if (v-70)*want < 0 && math.Abs(want) > 0.8 {
				t.Errorf("contextual row %d at %02d:00: %g is on its hour's side of 70", i, hour, v)
			}
			continue
		}
		switch (s.TS[i] / 60000) % 1440 {
		case 15 * 60:
			at15 = append(at15, float64(s.Cols[0][i]))
		case 3 * 60:
			at03 = append(at03, float64(s.Cols[0][i]))
		}
	}
	if ctx != 30 {
		t.Fatalf("%d contextual anomalies, want 30", ctx)
	}
	m15, _ := meanSD(at15)
	m03, _ := meanSD(at03)
	// Ten readings each, sd 2: their means are within 2 (3 standard errors) of 80 and 60.
	if math.Abs(m15-80) > 2 || math.Abs(m03-60) > 2 {
		t.Fatalf("temp at 15:00 %.1f, at 03:00 %.1f; want 80 and 60", m15, m03)
	}
}

func TestSeriesValidate(t *testing.T) {
	p := DefaultSeriesParams()
	p.Sensors, p.Correlation, p.Contextual = 9, 1, 3
	err := p.Validate()
	if err == nil {
		t.Fatal("invalid params accepted")
	}
	for _, want := range []string{"sensors must be in [1, 8]", "correlation must be in [0, 1)", "contextual anomalies need daily"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// TestSeriesResolution: a quantised sensor reads multiples of its quantum, within half a
// quantum of the continuous stream of the same seed (the rounding is the only change: the
// other sensors and the labels are the same bits); a quantum coarser than the noise leaves a
// few values, most rows on one of them.
func TestSeriesResolution(t *testing.T) {
	p := DefaultSeriesParams()
	p.Rows, p.SpikeRate = 5000, 0
	p.Shifts, p.ShiftSize, p.ShiftLength, p.Sensor = 1, 5, 300, 1
	cont := mustSeries(t, p)
	p.Resolution = []float64{0, 1}
	q := mustSeries(t, p)
	distinct := map[float32]int{}
	for i := range q.Rows() {
		if q.Cols[0][i] != cont.Cols[0][i] || q.Cols[2][i] != cont.Cols[2][i] || q.Label[i] != cont.Label[i] {
			t.Fatalf("row %d: an unquantised sensor or the label changed", i)
		}
		v := float64(q.Cols[1][i])
		if v != math.Round(v) || math.Abs(v-float64(cont.Cols[1][i])) > 0.5+1e-4 {
			t.Fatalf("row %d: pressure %v, continuous %v", i, v, cont.Cols[1][i])
		}
		distinct[q.Cols[1][i]]++
	}
	top := 0
	for _, c := range distinct {
		top = max(top, c)
	}
	// pressure 101.3 +- 0.4 in steps of 1: 101 holds P(|z| < 0.5 / 0.4 around it) of the
	// normal rows, about 0.69 + the shift's rows elsewhere; 5 values at most besides the shift's.
	if len(distinct) > 8 || top < q.Rows()/2 {
		t.Fatalf("pressure in steps of 1: %d values, the commonest on %d of %d rows", len(distinct), top, q.Rows())
	}
	// A quantum below the values' float32 resolution (down to the smallest float64) changes no
	// value: it never overflows value/quantum into an infinite reading.
	for _, tiny := range []float64{1e-30, 5e-324} {
		p.Resolution = []float64{0, tiny}
		fine := mustSeries(t, p)
		for i := range fine.Rows() {
			if fine.Cols[1][i] != cont.Cols[1][i] {
				t.Fatalf("quantum %g: row %d: pressure %v, continuous %v", tiny, i, fine.Cols[1][i], cont.Cols[1][i])
			}
		}
	}
	p.Resolution = []float64{0, -1}
	if _, err := SensorSeries(p); err == nil || !strings.Contains(err.Error(), "resolution of sensor 1") {
		t.Fatalf("a negative quantum: %v", err)
	}
	p.Resolution = []float64{0, 0, 0, 1}
	if _, err := SensorSeries(p); err == nil || !strings.Contains(err.Error(), "4 entries for 3 sensors") {
		t.Fatalf("too many quanta: %v", err)
	}
}

// TestSeriesBurst: an oscillation burst adds BurstSize sd x sin(2 pi n / BurstPeriod) to the
// sensor for BurstLength records, around its ordinary level: every record of it is labelled
// "burst", its mean stays the baseline, its variance is sd^2 (1 + BurstSize^2 / 2), and the
// stream without bursts is the stream it was (no random draw added).
func TestSeriesBurst(t *testing.T) {
	p := DefaultSeriesParams()
	p.Rows, p.SpikeRate, p.Head = 10000, 0, 1000
	clean := mustSeries(t, p)
	p.Bursts, p.BurstSize, p.BurstLength, p.BurstPeriod = 1, 2, 800, 8
	s := mustSeries(t, p)
	var in []float64
	first := -1
	for i := range s.Rows() {
		if s.Label[i] == 1 {
			if first < 0 {
				first = i
			}
			if s.Kind[i] != "burst" {
				t.Fatalf("row %d: kind %q, want burst", i, s.Kind[i])
			}
			in = append(in, float64(s.Cols[0][i]))
		}
	}
	if len(in) != 800 || first < 1000 {
		t.Fatalf("burst: %d labelled rows from %d, want 800 after head 1000", len(in), first)
	}
	// Temperature 70 +- 2, amplitude 2 sd = 4: variance 4 (1 + 2) = 12. Over 800 rows the
	// noise's sample variance is within 3 x sqrt(2/800) = 15 % of its own (the sine's part is
	// exact over whole periods), and the mean within 3 x 2/sqrt(800) = 0.21 of 70.
	m, sd := meanSD(in)
	if math.Abs(m-70) > 0.21 || sd*sd < 4*(1-0.15)+8 || sd*sd > 4*(1+0.15)+8 {
		t.Fatalf("burst: mean %g, variance %g; want 70 and 12", m, sd*sd)
	}
	// The oscillation: values a half period apart differ by 2 x 4 sin(...) on average: the
	// lag-4 correlation of a sine of period 8 is -1 (noise dilutes it to -8/12).
	var c, v float64
	for i := 4; i < len(in); i++ {
		c += (in[i] - m) * (in[i-4] - m)
		v += (in[i] - m) * (in[i] - m)
	}
	if r := c / v; r > -0.5 {
		t.Fatalf("burst: lag-4 correlation %g, want about -0.67 (an oscillation of period 8)", r)
	}
	p.Bursts = 0
	again := mustSeries(t, p)
	for j := range clean.Cols {
		for i := range clean.Rows() {
			if again.Cols[j][i] != clean.Cols[j][i] {
				t.Fatalf("without bursts, sensor %d row %d differs from the stream before the option", j, i)
			}
		}
	}
	p.Bursts, p.BurstPeriod = 1, 1
	if _, err := SensorSeries(p); err == nil || !strings.Contains(err.Error(), "burst-period must be >= 2") {
		t.Fatalf("burst period 1: %v", err)
	}
}
