package main

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/algo/quality"
	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestDemoProducerKeepsItsRate: the demo's producer sent rate x 20 ms records a 20 ms tick,
// truncated and at least one: --rate 1 sent 50 records a second, --rate 99 sent 50 (1.98 a tick,
// 1), --rate 120 100 (2 a tick). It now sends what the rate is due by the time of each tick.
// Bounds over 2.5 s: at most what is due by the end and one record more (a loaded machine only
// makes the producer later); at least what was due 1 s before the end, less one: room for the
// last write under way and a stall or two of the loaded machine (a stall over demoCatchUp lets
// its records go; 200 ms before, too thin on a loaded 2-core machine), while the defect's
// 125 records at --rate 99 (148 due 1 s before the end) and 125 at --rate 1 (3 at most) fail.
func TestDemoProducerKeepsItsRate(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.SeedTopics(1, "demo-rate"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	for _, rate := range []int{1, 99} {
		var produced, anomalies atomic.Int64
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		start := time.Now()
		err := produce(ctx, cluster.ListenAddrs()[0], "demo-rate", rate, synth.NewSensorStream(1, 0.01, 0), &produced, &anomalies)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ran := time.Since(start).Seconds()
		lo, hi := float64(rate)*(ran-1)-1, float64(rate)*ran+1
		if got := float64(produced.Load()); got < lo || got > hi {
			t.Errorf("--rate %d for %.2f s: %v records produced, want %.0f to %.0f", rate, ran, got, lo, hi)
		}
	}
}

// TestDemoRateBound: --rate 100000000000 made the producer allocate a buffer of 2e9 messages
// (rate x 20 ms) and the process die ("fatal error: runtime: out of memory"). A rate above
// what one in-process broker can take is refused as a bad command line. (A child process: the
// defect killed the process that ran it.)
func TestDemoRateBound(t *testing.T) {
	runChild()
	for _, rate := range []string{"100000000000", strconv.Itoa(demoMaxRate + 1)} {
		cmd := childCommand(t, "demo", "--rate", rate, "--duration", "1s")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := cmd.ProcessState.ExitCode()
		if want := "--rate must be in [1, " + strconv.Itoa(demoMaxRate) + "]"; code != 2 || !strings.Contains(stderr.String(), want) {
			t.Errorf("--rate %s: exit %d (%v), stderr %.300q: want exit 2 and %q", rate, code, err, stderr.String(), want)
		}
	}
}

// TestDemoFiguresUndefinedUntilDefined: the demo's live line and its summary printed
// "precision 0.000  recall 0.000" before any record was flagged or any injected anomaly scored:
// a reader took it for a detector that misses everything. A figure not defined yet is "-"
// (precision with nothing flagged, recall with no anomaly scored, F1 with neither, as the
// --json figures are null: labelquality.go), a number once it is (0.000 when it is 0).
func TestDemoFiguresUndefinedUntilDefined(t *testing.T) {
	for _, tc := range []struct {
		name       string
		conf       quality.Confusion
		live, summ []string
	}{
		{"nothing yet", quality.Confusion{TN: 50},
			[]string{"precision -  recall -"}, []string{"precision       -\n", "recall          -\n", "F1              -\n"}},
		{"anomalies missed, nothing flagged", quality.Confusion{TN: 50, FN: 2},
			[]string{"precision -  recall 0.000"}, []string{"precision       -\n", "recall          0.000\n", "F1              0.000\n"}},
		{"flagged, no anomaly", quality.Confusion{TN: 50, FP: 1},
			[]string{"precision 0.000  recall -"}, []string{"precision       0.000\n", "recall          -\n", "F1              0.000\n"}},
		{"both", quality.Confusion{TN: 50, TP: 1, FP: 1},
			[]string{"precision 0.500  recall 1.000"}, []string{"precision       0.500\n", "recall          1.000\n", "F1              0.667\n"}},
	} {
		var st pipeline.Stats
		// The live line is printed on a non-terminal at whole multiples of 5 s since the start:
		// a start just now prints it unless a second passed in between (a loaded machine: again).
		var live strings.Builder
		for range 10 {
			d := &demoSummary{start: time.Now(), conf: tc.conf}
			d.live(&live, &st, 0)
			if live.Len() > 0 {
				break
			}
		}
		d := &demoSummary{start: time.Now(), conf: tc.conf}
		var summ strings.Builder
		d.final(&summ, &st, 0, 0)
		for _, want := range tc.live {
			if !strings.Contains(live.String(), want) {
				t.Errorf("%s: live line %q, want %q", tc.name, live.String(), want)
			}
		}
		for _, want := range tc.summ {
			if !strings.Contains(summ.String(), want) {
				t.Errorf("%s: summary %q, want %q", tc.name, summ.String(), want)
			}
		}
	}
}
