package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// runGen writes a synthetic data set as CSV (header row) to stdout: the features, then for
// the uncertain kinds one uncertainty column "<feature>_sd" per feature and the label column.
// --kind sensors writes a labelled stream in time order (gen_sensors.go).
func runGen(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("gen", stdout, stderr)
	kind := fs.String("kind", "", "data set: g2d (N(0,I), any --dims), g3d (three 3-D Gaussians), one, three (uncertain, labelled), sensors (a labelled sensor stream in time order: the flags marked sensors:), machines (temp, pressure, humidity, vibration of machines in three operating modes, labelled spikes: the README's data/sensors.csv)")
	rows := fs.Int("rows", 0, "number of rows (required)")
	dims := fs.Int("dims", 0, "dimensions (default: 2 for g2d, 3 for g3d, 10 for one/three)")
	seed := fs.Uint64("seed", 1, "random seed")
	def := synth.DefaultUncertainParams()
	ratio := fs.Float64("outlier-ratio", def.OutlierRatio, "one/three: fraction of outliers")
	offset := fs.Float64("offset", def.Offset, "one: shift of the outliers' mean")
	odims := fs.Float64("outlier-dims", def.OutlierDims, "one/three: fraction of dimensions the outliers differ in")
	mult := fs.Float64("uncertainty-multiplier", def.UncertaintyMultiplier, "one/three: uncertainty = std * U(0,1) * multiplier")
	sensors := addSensorFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *kind == "" {
		return usageError{errors.New("--kind is required: g2d, g3d, one, three, sensors or machines (what each writes: outlierd help gen)")}
	}
	if err := oneOf("kind", *kind, "g2d", "g3d", "one", "three", "sensors", "machines"); err != nil {
		return err
	}
	if *rows == 0 {
		return usageError{errors.New("--rows is required (the rows to write, at least 2)")}
	}
	if *rows < 2 {
		return usageError{fmt.Errorf("--rows must be >= 2, got %d", *rows)}
	}
	if *rows > maxGenValues {
		return usageError{fmt.Errorf("--rows must be at most %d (gen holds the data set in memory), got %d", maxGenValues, *rows)}
	}
	set := flagsSet(fs)
	if *kind == "sensors" {
		for _, f := range []string{"dims", "outlier-ratio", "offset", "outlier-dims", "uncertainty-multiplier"} {
			if set[f] {
				return usageError{fmt.Errorf("--%s does not apply to --kind sensors (see --sensors)", f)}
			}
		}
		return genSensors(sensors, *rows, *seed, set, stdout)
	}
	for _, f := range sensors.names {
		if set[f] {
			return usageError{fmt.Errorf("--%s applies to --kind sensors only", f)}
		}
	}
	var d *synth.Data
	switch *kind {
	case "machines":
		for _, f := range []string{"dims", "offset", "outlier-dims", "uncertainty-multiplier"} {
			if set[f] {
				return usageError{fmt.Errorf("--%s does not apply to --kind machines (4 features; --outlier-ratio sets the share of spikes)", f)}
			}
		}
		if !(*ratio >= 0 && *ratio < 1) {
			return usageError{fmt.Errorf("--outlier-ratio must be in [0, 1), got %g", *ratio)}
		}
		d = synth.Sensors(*rows, *seed, *ratio)
	case "g2d", "g3d":
		for _, f := range []string{"outlier-ratio", "offset", "outlier-dims", "uncertainty-multiplier"} {
			if set[f] {
				return usageError{fmt.Errorf("--%s applies to --kind %s only", f, uncertainKinds[f])}
			}
		}
		if *kind == "g3d" {
			if set["dims"] && *dims != 3 {
				return usageError{fmt.Errorf("g3d is 3-dimensional, got --dims %d", *dims)}
			}
			d = synth.G3D(*rows, *seed)
		} else {
			if !set["dims"] {
				*dims = 2
			}
			if *dims < 1 {
				return usageError{fmt.Errorf("--dims must be >= 1, got %d", *dims)}
			}
			if err := genFits(*rows, *dims, 1, "--dims"); err != nil {
				return err
			}
			d = synth.Gaussian(*rows, *dims, *seed)
		}
	default:
		if set["offset"] && *kind == "three" {
			return usageError{fmt.Errorf("--offset applies to --kind one only")}
		}
		p := synth.UncertainParams{Rows: *rows, Dims: 10, Seed: *seed, OutlierRatio: *ratio, Offset: *offset, OutlierDims: *odims, UncertaintyMultiplier: *mult}
		if set["dims"] {
			p.Dims = *dims
		}
		if err := p.Validate(); err != nil {
			return usageError{err}
		}
		if err := genFits(*rows, p.Dims, 2, "--dims"); err != nil { // (and an uncertainty column each)
			return err
		}
		if *kind == "one" {
			d = synth.One(p)
		} else {
			d = synth.Three(p)
		}
	}
	return writeCSV(stdout, d)
}

// maxGenValues bounds the values gen generates (rows x value columns): it holds the data set
// in memory, 8 GiB of float32 at this bound. Past it a count panicked (makeslice: len out of
// range) or grew the heap until the process was killed.
const maxGenValues = 1 << 31

// genFits refuses rows x cols x per values past maxGenValues (per: the values a column takes a
// row), naming flag (the count of columns).
func genFits(rows, cols, per int, flag string) error {
	if cols > maxGenValues/rows/per {
		return usageError{fmt.Errorf("%s: %d rows x %d columns is more than the %d values gen holds in memory", flag, rows, cols*per, maxGenValues)}
	}
	return nil
}

// uncertainKinds names the kinds that take each option of the uncertain data sets (the
// refusal's message names them all, and only them).
var uncertainKinds = map[string]string{
	"outlier-ratio":          "one|three|machines",
	"offset":                 "one",
	"outlier-dims":           "one|three",
	"uncertainty-multiplier": "one|three",
}

func writeCSV(w io.Writer, d *synth.Data) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var line []byte
	for j, f := range d.Features {
		if j > 0 {
			line = append(line, ',')
		}
		line = append(line, f...)
	}
	if d.SD != nil {
		for _, f := range d.Features {
			line = append(line, ',')
			line = append(line, f...)
			line = append(line, "_sd"...)
		}
	}
	if d.Label != nil {
		line = append(line, ",label"...)
	}
	line = append(line, '\n')
	if _, err := bw.Write(line); err != nil {
		return err
	}
	for i := range d.Rows() {
		line = line[:0]
		for j := range d.Cols {
			if j > 0 {
				line = append(line, ',')
			}
			line = strconv.AppendFloat(line, float64(d.Cols[j][i]), 'g', -1, 32)
		}
		for j := range d.SD {
			line = append(line, ',')
			line = strconv.AppendFloat(line, float64(d.SD[j][i]), 'g', -1, 32)
		}
		if d.Label != nil {
			line = append(line, ',', '0'+d.Label[i])
		}
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}
