package main

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/datasets/csvfile"
)

// The device commands run their steps through internal/accel, which decides CPU or GPU and
// falls back to the CPU (same answers) with one policy, the pipeline's.

// openDevice maps a device choice (--device, or replay's config) to the accelerator. opt carries
// why the CUDA companion did not take over (main, companion.go). flag prefixes the error ("--"
// when the choice came from a flag).
func openDevice(choice string, log zerolog.Logger, opt accel.Options, flag string) (*accel.Device, error) {
	if err := oneOf("device", choice, "auto", "cpu", "cuda"); err != nil {
		return nil, err
	}
	d, err := accel.Open(choice, log, opt)
	if err != nil {
		return nil, fmt.Errorf("%s%w", flag, err)
	}
	return d, nil
}

// openInput is the preamble of the commands that score a CSV file: the device (its log line
// first; flag as for openDevice), then the file read with its label column. The caller closes
// the device.
func openInput(device, input, label string, log zerolog.Logger, opt accel.Options, flag string) (*accel.Device, *csvfile.Table, error) {
	dev, err := openDevice(device, log, opt, flag)
	if err != nil {
		return nil, nil, err
	}
	tab, err := csvfile.ReadFile(input, label)
	if err != nil {
		dev.Close()
		return nil, nil, err
	}
	warnLabelFeatures(log, tab)
	return dev, tab, nil
}

// labelNames are column names that usually hold the ground truth, not a measurement.
var labelNames = map[string]bool{"label": true, "labels": true, "class": true, "anomaly": true, "outlier": true,
	"is_anomaly": true, "is_outlier": true, "target": true, "ground_truth": true}

// warnLabelFeatures warns when a feature column is named like a label: without --label-column
// it is used as a feature, and the ground truth then decides the distances.
func warnLabelFeatures(log zerolog.Logger, tab *csvfile.Table) {
	for _, f := range tab.Features {
		if labelLike(f) {
			log.Warn().Str("file", tab.Path).Str("column", f).Msg(labelFeatureWarning(f))
		}
	}
}

// labelLike says whether a column's name says it holds the ground truth.
func labelLike(name string) bool { return labelNames[strings.ToLower(strings.TrimSpace(name))] }

// labelFeatureWarning is the warning about a label-like column f used as a feature.
func labelFeatureWarning(f string) string {
	return fmt.Sprintf("column %q is used as a feature, but its name says it is the ground truth: give --label-column %s to leave it out (and score against it)", f, f)
}

// noteCompanion logs why the CUDA companion did not take over, for the commands whose device the
// pipeline opens (run, demo): the CPU build's device line says only "built without CUDA".
func noteCompanion(log zerolog.Logger, choice string, opt accel.Options) {
	if opt.NoCompanion != "" && choice != "cpu" {
		log.Info().Str("reason", opt.NoCompanion).Msg("the CUDA companion did not take over")
	}
}
