package pipeline

import (
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
)

// TestScorerKeyGaugesFollowRestoredModelsRealBroker: a scorer's outlierd_keys_live and
// outlierd_keys_bytes were set only after a batch was scored, so the keys' models it read from
// the model topic at its start (or at a rebalance, or as the builder published them) went
// uncounted while its input was quiet: 0 keys live on the dashboard with every key's model
// installed, until the next record (seen live: 5 keys live of 200 after a burst, 200 at the next
// record). The gauges now follow each install.
func TestScorerKeyGaugesFollowRestoredModelsRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts = 2
	in, out, dlq, group, mt := testsupport.UniqueName("kg-in"), testsupport.UniqueName("kg-out"), testsupport.UniqueName("kg-dlq"),
		testsupport.UniqueName("kg-group"), testsupport.UniqueName("kg-models")
	testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
	createCompactedTopic(t, br, mt, parts+1)
	recs := keyedRecords(t, 6_000, parts, 86)
	input := newInput(in, parts, recs)
	produceSome(t, br, input, recs)
	base := roleConfig(br, in, out, dlq, group, mt)
	base.Detect.FlagBy, base.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	builderCfg, scorerCfg := base, base
	builderCfg.Run.Role, scorerCfg.Run.Role = "builder", "scorer"
	scorerCfg.Ingest.StartOffset = ingest.StartLatest // a quiet input: it reads none of the records
	builder := startPipeline(t, builderCfg, nil)
	waitFor(t, 60*time.Second, "the builder publishing the global model and all 64 keys' models", func() bool {
		return len(keyModelsOnTopic(t, br, base)) == 64 && publishedModel(t, base) != nil
	})
	if err := builder.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	scorer := startPipeline(t, scorerCfg, nil)
	gauge := func(name string) float64 {
		fams, err := scorer.p.Metrics().Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == name {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	waitFor(t, 30*time.Second, "outlierd_keys_live 64 on a scorer that read every key's model and no record", func() bool {
		return gauge("outlierd_keys_live") == 64 && gauge("outlierd_keys_bytes") > 0
	})
	if n := scorer.p.Stats().RecordsOut.Load(); n != 0 {
		t.Fatalf("the scorer wrote %d records: its input was to be quiet", n)
	}
	if err := scorer.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}
