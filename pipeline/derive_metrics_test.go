package pipeline

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

// deriveGauges is the outlierd_derive_* values of p's registry (gauges and counters by name).
func deriveGauges(t *testing.T, p *Pipeline) map[string]float64 {
	t.Helper()
	fams, err := p.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			got[f.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return got
}

// TestDeriveMetrics: the pipeline exports ingest.derive's state: with derive.max_keys 3 and 5
// keys round robin in one partition, 3 series held and every record past the first 3 evicting
// the least recently seen (outlierd_derive_evictions_total 197 after 200 records); after a clean
// stop and a start on the same detect.state_dir, the 3 series saved are reported as restored.
// Failed before derivemetrics27 (no such series: nothing counted ingest.derive's evictions).
func TestDeriveMetrics(t *testing.T) {
	const keys, maxKeys, first, second = 5, 3, 200, 10
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	produce := func(from, n int) {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: in, Partition: 0, Key: fmt.Appendf(nil, "s%d", (from+i)%keys),
				Value: fmt.Appendf(nil, `{"temp":%d}`, (from+i)%17)}
		}
		testsupport.Produce(t, br, recs...)
	}
	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Ingest.Features, cfg.Ingest.Uncertainty = []string{"temp"}, nil
	cfg.Ingest.Derive = &ingest.Derive{MaxKeys: maxKeys, Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "temp"}}}
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Distance.N, cfg.Detect.Density.Clusters = 2000, 100, 20, 20
	cfg.Detect.StateDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// run starts the pipeline, checks the restored series right after New, waits until n
	// records are out, and returns the figures while it still runs.
	run := func(n int64, restored float64) map[string]float64 {
		r := startPipeline(t, cfg, nil)
		if got := deriveGauges(t, r.p)["outlierd_derive_state_restored_series"]; got != restored {
			t.Errorf("outlierd_derive_state_restored_series %v at the start, want %v", got, restored)
		}
		deadline := time.Now().Add(60 * time.Second)
		for r.p.Stats().RecordsOut.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d records out after 60 s", r.p.Stats().RecordsOut.Load(), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		got := deriveGauges(t, r.p)
		if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
			t.Fatal(err)
		}
		return got
	}
	produce(0, first)
	got := run(first, 0)
	for name, want := range map[string]float64{"outlierd_derive_series": maxKeys,
		"outlierd_derive_evictions_total": first - maxKeys, "outlierd_derive_state_restored_series": 0} {
		if got[name] != want {
			t.Errorf("first run: %s = %v, want %v", name, got[name], want)
		}
	}
	produce(first, second)
	got = run(second, maxKeys)
	// The restored series are s2, s3, s4 (the last 3 seen, s2 the least recent: the recency order
	// is saved); s0, s1, s2, ... come next, each evicting the key seen 3 records before it: every
	// record evicts (a new process: its counter starts at 0).
	for name, want := range map[string]float64{"outlierd_derive_series": maxKeys,
		"outlierd_derive_evictions_total": second, "outlierd_derive_state_restored_series": maxKeys} {
		if got[name] != want {
			t.Errorf("second run: %s = %v, want %v", name, got[name], want)
		}
	}
}
