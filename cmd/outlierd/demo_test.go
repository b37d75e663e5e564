package main

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestDemoProducerKeepsItsRate: the demo's producer sent rate x 20 ms records a 20 ms tick,
// truncated and at least one: --rate 1 sent 50 records a second, --rate 120 sent 100 (2 a
// tick). It now sends what the rate is due by the time of each tick.
func TestDemoProducerKeepsItsRate(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.SeedTopics(1, "demo-rate"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	for _, rate := range []int{1, 120} {
		var produced, anomalies atomic.Int64
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		err := produce(ctx, cluster.ListenAddrs()[0], "demo-rate", rate, synth.NewSensorStream(1, 0.01, 0), &produced, &anomalies)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		// Due by the end: rate x the time it ran; at most one tick (20 ms) of it missing, and
		// the write of the last tick may still have been under way (0-1 tick more at most).
		ran := time.Since(start).Seconds()
		lo, hi := float64(rate)*(ran-0.2)-1, float64(rate)*ran+1
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
