package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/stages/ingest"
)

// sensorFlags are gen's options for --kind sensors (synth.SeriesParams; its file comment
// defines the stream and its labels). They are registered on gen's flag set and refused with
// the other kinds.
type sensorFlags struct {
	p         synth.SeriesParams
	ts        bool
	keyColumn string
	kindCol   bool
	names     []string // the flags' names, to refuse them with another kind
}

func addSensorFlags(fs *flag.FlagSet) *sensorFlags {
	sf := &sensorFlags{p: synth.DefaultSeriesParams()}
	p := &sf.p
	before := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
	fs.IntVar(&p.Sensors, "sensors", p.Sensors, "sensors: features per row (per key with --keys); without --keys at most 8: temp 70+-2, pressure 101.3+-0.4, humidity 45+-3, vibration, current, voltage, rpm, flow")
	fs.Float64Var(&p.Correlation, "correlation", p.Correlation, "sensors: share rho of each sensor's variance from a shared factor (pairwise correlation +-rho; humidity and voltage load negatively)")
	fs.IntVar(&p.Head, "head", 0, "sensors: the first N rows carry no anomaly (a clean warm-up)")
	fs.IntVar(&p.Sensor, "anomaly-sensor", p.Sensor, "sensors: index of the sensor anomalies hit (0 = temp); -1 draws one per anomaly")
	fs.Float64Var(&p.SpikeRate, "spike-rate", p.SpikeRate, "sensors: share of rows with a spike (exactly round(rate*rows) spikes, at distinct rows after --head)")
	fs.Float64Var(&p.SpikeMin, "spike-min", p.SpikeMin, "sensors: smallest spike, in the sensor's sd")
	fs.Float64Var(&p.SpikeMax, "spike-max", p.SpikeMax, "sensors: largest spike, in the sensor's sd (size uniform in [min, max])")
	fs.IntVar(&p.SpikeSign, "spike-sign", p.SpikeSign, "sensors: 1 up, -1 down, 0 either")
	fs.IntVar(&p.Shifts, "shifts", 0, "sensors: number of level shifts (value += shift-size sd, noise continues)")
	fs.Float64Var(&p.ShiftSize, "shift-size", p.ShiftSize, "sensors: level shift in sd (signed)")
	fs.IntVar(&p.ShiftLength, "shift-length", p.ShiftLength, "sensors: records of the key a shift lasts (0: to the end)")
	fs.IntVar(&p.Stuck, "stuck", 0, "sensors: number of stuck spans (a constant value, no noise)")
	fs.Float64Var(&p.StuckAt, "stuck-at", p.StuckAt, "sensors: stuck value in sd from the baseline (0: the sensor's last value before the span)")
	fs.IntVar(&p.StuckLength, "stuck-length", p.StuckLength, "sensors: records of the key a stuck span lasts (0: to the end)")
	fs.IntVar(&p.Bursts, "bursts", 0, "sensors: number of oscillation bursts (value += burst-size sd x sin(2 pi n / burst-period) around the ordinary level, noise continues: a vibration, a tremor)")
	fs.Float64Var(&p.BurstSize, "burst-size", p.BurstSize, "sensors: a burst's amplitude in sd (its readings stay within a few sd; the variance grows by size^2/2)")
	fs.IntVar(&p.BurstLength, "burst-length", p.BurstLength, "sensors: records of the key a burst lasts (0: to the end)")
	fs.IntVar(&p.BurstPeriod, "burst-period", p.BurstPeriod, "sensors: records of the key per cycle of a burst (>= 2)")
	fs.IntVar(&p.SpanLabel, "span-label", 0, "sensors: label the first N records of a shift, stuck span or burst 1 (0: every record of the span)")
	fs.Float64Var(&p.Drift, "drift", 0, "sensors: each mean moves this many sd (random sign per sensor) every --drift-every rows; normal, never labelled")
	fs.IntVar(&p.DriftEvery, "drift-every", p.DriftEvery, "sensors: rows per --drift sd")
	fs.Float64Var(&p.Daily, "daily", 0, "sensors: daily seasonality amplitude in sd (peak at 15:00 UTC); normal, never labelled")
	fs.IntVar(&p.Contextual, "contextual", 0, "sensors: contextual anomalies: a reading normal twelve hours away (needs --daily)")
	fs.Int64Var(&p.StartMS, "start-ms", p.StartMS, "sensors: timestamp of row 0, epoch ms (default 2026-01-01T00:00Z; every row's, start + (rows-1) x period, must be in the years 0000-9999, as replay and the pipeline read)")
	fs.Int64Var(&p.PeriodMS, "period-ms", p.PeriodMS, "sensors: sample period in ms (row i is at start + i*period; with --keys the fleet's, so a key reads about every keys x period: --keys 200 --period-ms 300 for one reading a minute a key)")
	fs.BoolVar(&sf.ts, "ts", false, "sensors: write a first column ts (epoch ms)")
	fs.IntVar(&p.Keys, "keys", 0, "sensors: a fleet of N keys (a key column; each row one reading of a random key) with their own baselines and noise")
	fs.StringVar(&sf.keyColumn, "key-column", "key", "sensors: the fleet's key column name")
	fs.Float64Var(&p.BaselineMin, "baseline-min", p.BaselineMin, "sensors: fleet baselines are uniform in [baseline-min, baseline-max]")
	fs.Float64Var(&p.BaselineMax, "baseline-max", p.BaselineMax, "sensors: see --baseline-min")
	fs.Float64Var(&p.NoiseMin, "noise-min", p.NoiseMin, "sensors: fleet noise sd is uniform in [noise-min, noise-max]")
	fs.Float64Var(&p.NoiseMax, "noise-max", p.NoiseMax, "sensors: see --noise-min")
	fs.Func("resolution", "sensors: quantised sensors: each sensor's quantum in raw units, comma-separated in sensor order (e.g. 0,0.5: pressure reads in steps of 0.5; 0 or missing: continuous)", func(v string) error {
		p.Resolution = p.Resolution[:0]
		for _, f := range strings.Split(v, ",") {
			q, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return fmt.Errorf("not a number: %q", f)
			}
			p.Resolution = append(p.Resolution, q)
		}
		return nil
	})
	fs.BoolVar(&sf.kindCol, "kind-column", false, "sensors: write a column anomaly_kind (spike, shift, stuck, burst, contextual, '+'-joined; empty when normal) before label; text: replay reads it as a feature unless a --config names the features (ingest.features)")
	fs.VisitAll(func(f *flag.Flag) {
		if !before[f.Name] {
			sf.names = append(sf.names, f.Name)
		}
	})
	return sf
}

// genSensors writes the sensor stream as CSV: [ts,][key,]sensors...,[anomaly_kind,]label.
func genSensors(sf *sensorFlags, rows int, seed uint64, set map[string]bool, stdout io.Writer) error {
	sf.p.Rows, sf.p.Seed = rows, seed
	if sf.p.Keys == 0 {
		// They shape only a fleet: without one they would be ignored without a word.
		for _, f := range []string{"key-column", "baseline-min", "baseline-max", "noise-min", "noise-max"} {
			if set[f] {
				return usageError{fmt.Errorf("--%s applies to a fleet only (--keys N)", f)}
			}
		}
	}
	if sf.p.Keys > 0 && sf.keyColumn == "" {
		return usageError{fmt.Errorf("--key-column must not be empty")}
	}
	if sf.p.Keys > 0 && strings.ContainsAny(sf.keyColumn, ",\"\r\n") {
		// The header is written as is: such a name would shift every column after it.
		return usageError{fmt.Errorf("--key-column %q: a CSV column name cannot hold a comma, a quote or a line break", sf.keyColumn)}
	}
	if sf.p.Keys > rows {
		return usageError{fmt.Errorf("--keys must be at most --rows (%d), got %d", rows, sf.p.Keys)}
	}
	if err := genFits(rows, sf.p.Sensors, 1, "--sensors"); err != nil {
		return err
	}
	if err := genTimesFit(sf.p.StartMS, sf.p.PeriodMS, rows); err != nil {
		return err
	}
	s, err := synth.SensorSeries(sf.p)
	if err != nil {
		return usageError{err}
	}
	bw := bufio.NewWriterSize(stdout, 1<<20)
	var line []byte
	var head []string
	if sf.ts {
		head = append(head, "ts")
	}
	if s.Key != nil {
		head = append(head, sf.keyColumn)
	}
	head = append(head, s.Features...)
	if sf.kindCol {
		head = append(head, "anomaly_kind")
	}
	head = append(head, "label")
	seen := map[string]bool{}
	for _, h := range head {
		if seen[h] {
			return usageError{fmt.Errorf("column %q appears twice (--key-column)", h)}
		}
		seen[h] = true
	}
	for i, h := range head {
		if i > 0 {
			line = append(line, ',')
		}
		line = append(line, h...)
	}
	line = append(line, '\n')
	if _, err := bw.Write(line); err != nil {
		return err
	}
	for i := range s.Rows() {
		line = line[:0]
		if sf.ts {
			line = strconv.AppendInt(line, s.TS[i], 10)
			line = append(line, ',')
		}
		if s.Key != nil {
			line = append(line, s.Key[i]...)
			line = append(line, ',')
		}
		for j := range s.Cols {
			line = strconv.AppendFloat(line, float64(s.Cols[j][i]), 'g', -1, 32)
			line = append(line, ',')
		}
		if sf.kindCol {
			line = append(line, s.Kind[i]...)
			line = append(line, ',')
		}
		line = append(line, '0'+s.Label[i], '\n')
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// genTimesFit refuses a --start-ms, --rows and --period-ms whose first or last row's time is
// outside the years 0000-9999 (ingest.MinEventMS, MaxEventMS), naming the flags and the time:
// replay and the pipeline refuse such an event time (a dead letter, bad_event_time), so the
// stream would be read as none. A period < 1 or no rows is left to synth's checks.
func genTimesFit(start, period int64, rows int) error {
	const why = "the event times replay and the pipeline read are RFC 3339's years 0000-9999 (outside them a record is a dead letter, bad_event_time)"
	if start < ingest.MinEventMS {
		return usageError{fmt.Errorf("--start-ms %d is %s, before 0000-01-01T00:00:00Z: %s", start, genTime(start), why)}
	}
	if period < 1 || rows < 1 {
		return nil
	}
	hi, span := bits.Mul64(uint64(rows-1), uint64(period))
	flags := fmt.Sprintf("--start-ms %d + (--rows %d - 1) x --period-ms %d", start, rows, period)
	if hi != 0 || span > uint64(ingest.MaxEventMS-start) { // (start >= MinEventMS: no overflow)
		last := "past the largest epoch ms"
		if hi == 0 && span <= uint64(math.MaxInt64-start) {
			t := start + int64(span)
			last = fmt.Sprintf("%d (%s)", t, genTime(t))
		}
		return usageError{fmt.Errorf("%s: the last row's time would be %s, after 9999-12-31T23:59:59.999Z: %s; a smaller --start-ms, --rows or --period-ms", flags, last, why)}
	}
	return nil
}

// genTime is epoch milliseconds ms as RFC 3339 (in more digits or with a sign outside the
// years 0000-9999, as Go writes them).
func genTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.999Z07:00")
}
