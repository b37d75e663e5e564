package main

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/stages/detect"
)

// loadReplayDetect loads a config file of the given text as replay does, returning its detect
// section (derived, as the pipeline runs it) and which keys it writes.
func loadReplayDetect(t *testing.T, text string) (detect.Config, func(string) bool) {
	t.Helper()
	cfg := replayConfig(pipeline.Default())
	written, err := config.LoadWritten(writeFile(t, "c.yaml", text), &cfg)
	if err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	return cfg.Detect, written
}

// detectSizes is the sizes Derive fits to the window and min_records.
type detectSizes struct{ Window, MinRecords, Clusters, K, N, ProclusK int }

func sizesOf(dc detect.Config) detectSizes {
	return detectSizes{dc.Window, dc.MinRecords, dc.Density.Clusters, dc.Distance.K, dc.Distance.N, dc.Proclus.K}
}

// TestReplaySizeFlagsAsIfWritten: --window W and --min-records M give the detect sizes the
// config would give had it written that window and min_records: the sizes it leaves out
// (density.clusters, distance.k and n, proclus.k) follow them as Derive makes them follow the
// file's, up as well as down, and the ones it writes stay. They stayed at what the config's
// window 100 had brought them down to (density.clusters 100 under --window 10000, where a
// config of window 10000 runs 200). In the stream case (the window below the file's rows)
// that is the pipeline's config itself; in the batch case replay's without flags.
func TestReplaySizeFlagsAsIfWritten(t *testing.T) {
	const stream, batch = 20000, 3000 // rows: above and below the window of 10000
	for _, c := range []struct {
		name, config       string
		window, minRecords int // the flags, 0: not given
		rows               int
		as                 string // the config with the flags written
	}{
		{"window up, stream", "detect:\n  window: 100\n", 10000, 0, stream, "detect:\n  window: 10000\n"},
		{"window up, batch", "detect:\n  window: 100\n", 10000, 0, batch, "detect:\n  window: 10000\n"},
		{"window up from 8", "detect:\n  window: 8\n", 10000, 0, stream, "detect:\n  window: 10000\n"},
		{"window down", "detect:\n  window: 10000\n", 100, 0, stream, "detect:\n  window: 100\n"},
		{"window up, k written", "detect:\n  window: 100\n  distance:\n    k: 20\n", 10000, 0, stream, "detect:\n  window: 10000\n  distance:\n    k: 20\n"},
		{"min_records up", "detect:\n  window: 10000\n  min_records: 100\n", 0, 8000, stream, "detect:\n  window: 10000\n  min_records: 8000\n"},
		{"min_records up, batch", "detect:\n  window: 10000\n  min_records: 100\n", 0, 2500, batch, "detect:\n  window: 10000\n  min_records: 2500\n"},
		{"min_records up from 8", "detect:\n  window: 10000\n  min_records: 8\n  proclus:\n    enabled: true\n", 0, 8000, stream, "detect:\n  window: 10000\n  min_records: 8000\n  proclus:\n    enabled: true\n"},
		{"both up", "detect:\n  window: 100\n", 10000, 8000, stream, "detect:\n  window: 10000\n  min_records: 8000\n"},
		{"proclus on, window up", "detect:\n  window: 100\n  proclus:\n    enabled: true\n", 10000, 0, stream, "detect:\n  window: 10000\n  proclus:\n    enabled: true\n"},
	} {
		dc, written := loadReplayDetect(t, c.config)
		before := sizesOf(dc)
		z := replaySizes{window: c.window, minRecords: c.minRecords, written: written, rows: c.rows, input: "f.csv"}
		if err := z.apply(&dc, io.Discard); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, wantWritten := loadReplayDetect(t, c.as)
		if c.rows < want.Window { // the batch case: replay's own choice, with the config's window
			z := replaySizes{written: wantWritten, rows: c.rows, input: "f.csv"}
			if err := z.apply(&want, io.Discard); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		// A case whose flags the config's own sizes already match would pass with the flags ignored.
		if before == sizesOf(want) {
			t.Fatalf("%s: setup: the config's sizes %+v are already the ones the flags should give", c.name, before)
		}
		if got, want := sizesOf(dc), sizesOf(want); got != want {
			t.Errorf("%s: %+v, want %+v (the config written with the flags' values)", c.name, got, want)
		}
	}
}

// TestReplayWindowFlagReplaysAsWritten: end to end, a config of window 8 replayed with
// --window 1500 scores the file as the config of window 1500 does, every detector's figures
// alike (density.clusters, distance.k and n stayed at the 8, 7 and 8 the window 8 had brought
// them to: the combined score, of score.k, was unchanged; the eta-probability's and the solving
// set's figures were not).
func TestReplayWindowFlagReplaysAsWritten(t *testing.T) {
	path, _ := labelledCSV(t, 3000)
	small := writeFile(t, "small.yaml", "detect:\n  window: 8\n")
	as := writeFile(t, "as.yaml", "detect:\n  window: 1500\n")
	figures := func(args ...string) string {
		t.Helper()
		out, errs, code := outlierd(t, append([]string{"replay", "--device", "cpu", "--json", "--input", path, "--label-column", "label"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var res replayResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		res.ElapsedMS = 0
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// The sizes as they stayed (window 8's), written: the figures the defect gave must differ.
	stayed := writeFile(t, "stayed.yaml", "detect:\n  window: 1500\n  density:\n    clusters: 8\n  distance:\n    k: 7\n    n: 8\n")
	if old, want := figures("--config", stayed), figures("--config", as); old == want {
		t.Fatalf("setup: window 8's sizes under window 1500 replay as window 1500's own (%s): the case misses its point", want)
	}
	if got, want := figures("--config", small, "--window", "1500"), figures("--config", as); got != want {
		t.Errorf("config window 8, --window 1500:\n%s\nwant (the config of window 1500)\n%s", got, want)
	}
}
