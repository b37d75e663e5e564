package main

import (
	"fmt"
	"io"

	"github.com/outlierd/outlierd/stages/detect"
)

// replaySizes decides the window and min_records a replay runs with, from the flags, the
// config and the file's rows, and fits the sizes bounded by min_records to it.
type replaySizes struct {
	window, minRecords int // --window, --min-records; 0 (or below): not given, the config's
	// written reports whether the config file sets a key ("detect.min_records"): a value the
	// user wrote is kept where a default would give way.
	written func(path string) bool
	rows    int
	input   string
}

// apply sets dc's window and min_records. A flag wins; then a min_records the config writes
// (as the pipeline runs it: its first model at that many records, the rest a stream; capped
// at a smaller --window); then, where the window holds every row, the batch case (min_records
// = the rows: one model of the whole file); else the default, which detect.Config.Derive fits
// to the window as it fits the file's. Derive then fits density.clusters, distance.k and n
// and proclus.k to min_records as a config that wrote this window and min_records would have
// them (up too, where the flags raise them); it brings the config's written values down to
// min_records too, and stderr says so of those. The flags' errors name the flags (min_records 1 brought k down to 0 and was refused
// naming distance.k). Under before_model: hold a file too short for a model is refused, naming
// where min_records came from.
func (z replaySizes) apply(dc *detect.Config, stderr io.Writer) error {
	if z.window == 1 {
		return usageError{fmt.Errorf("--window %d: a window holds at least 2 records", z.window)}
	}
	if z.minRecords == 1 {
		return usageError{fmt.Errorf("--min-records %d: a model needs at least 2 records", z.minRecords)}
	}
	window := fmt.Sprintf("detect.window %d", dc.Window)
	if z.window > 0 {
		dc.Window, window = z.window, fmt.Sprintf("--window %d", z.window)
	}
	source := ""     // of min_records, for the short file's error
	follows := false // min_records is Derive's: the default fitted to the window
	switch {
	case z.minRecords > 0:
		if z.minRecords > dc.Window {
			return usageError{fmt.Errorf("--min-records %d is above %s: the first model is built of the window's records (--min-records %d or fewer, or a larger --window)",
				z.minRecords, window, dc.Window)}
		}
		dc.MinRecords = z.minRecords
	case z.written("detect.min_records"):
		source = " (the config's)"
		if dc.MinRecords > dc.Window { // only --window makes it so: the file's pair was valid
			fmt.Fprintf(stderr, "replay: detect.min_records %d (the config's) is above %s: capped at %d\n", dc.MinRecords, window, dc.Window)
			dc.MinRecords = dc.Window
		}
		if dc.Window >= z.rows && dc.MinRecords < z.rows {
			fmt.Fprintf(stderr, "replay: %s: detect.min_records %d (the config's): the first model is built of the first %s, the later ones replay as a stream, as in the pipeline (--min-records %d gives the batch case: one model of the whole file)\n",
				z.input, dc.MinRecords, plural(dc.MinRecords, "row", "rows"), z.rows)
		}
	case dc.Window >= z.rows && z.rows >= 2:
		dc.MinRecords = z.rows // the batch case: one model of the whole file scores every row
		// The config's window chose it, not the user: say so.
		if z.window <= 0 {
			stream := fmt.Sprintf(" (--window below %d replays them as a stream)", z.rows)
			if z.rows <= 2 {
				stream = "" // (a window holds at least 2 records)
			}
			fmt.Fprintf(stderr, "replay: %s: the batch case: detect.window %d holds every one of the file's %d rows, so one model of the whole file scores them all%s\n",
				z.input, dc.Window, z.rows, stream)
		}
	default:
		dc.MinRecords, follows = detect.Default().MinRecords, true
	}
	// Derive's rule once more, with this window and min_records; the sizes bounded by
	// min_records come down to it even where the config writes them (a short file must run).
	// Those the config leaves out start again from their defaults, as they would in a config
	// that wrote this window and min_records: the load derived them from the config's own, and
	// Derive only lowers (a config window of 100 kept density.clusters 100 under --window 10000).
	def := detect.Default()
	follow := []struct {
		key string
		v   *int
		def int
	}{{"density.clusters", &dc.Density.Clusters, def.Density.Clusters}, {"distance.k", &dc.Distance.K, def.Distance.K},
		{"distance.n", &dc.Distance.N, def.Distance.N}, {"proclus.k", &dc.Proclus.K, def.Proclus.K}}
	was := make([]int, len(follow))
	for i, f := range follow {
		was[i] = *f.v
		if !z.written("detect." + f.key) {
			*f.v = f.def
		}
	}
	dc.Derive(func(key string) bool { return key == "min_records" && !follows })
	switch {
	case dc.BeforeModel != detect.BeforeModelHold: // pass: rows without a model go out unscored
	case z.rows < 2:
		return usageError{fmt.Errorf("%s: %d row: a model needs at least 2 rows", z.input, z.rows)}
	case z.rows < dc.MinRecords:
		return usageError{fmt.Errorf("%s: %s, fewer than detect.min_records=%d%s: no model would score them (--min-records %d or fewer)",
			z.input, plural(z.rows, "row", "rows"), dc.MinRecords, source, z.rows)}
	}
	for i, f := range follow {
		if *f.v != was[i] && z.written("detect."+f.key) {
			fmt.Fprintf(stderr, "replay: detect.%s %d (the config's) is lowered to %d, to fit detect.min_records %d\n", f.key, was[i], *f.v, dc.MinRecords)
		}
	}
	return nil
}
