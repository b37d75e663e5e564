package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestKill9SameVerdictsRealBroker: with a sampling density mode (restricted), a process killed
// with -9 and restarted re-reads its uncommitted records; the restarted process serves the same
// model (from detect.state_dir) and must give every re-read record the verdict, weight and
// eta-probability it had before the kill. Both depend on the record's identity only: its
// density samples come from a stream derived from (topic, partition, offset), not from a count
// of records this process scored (which restarts at 0), and whether it is a member of the
// model's window (it does not count itself as a neighbour) is judged by its offset, not by this
// process's position in the stream (the restarted process had taken the first model's members
// for new records: their weights, and so distance verdicts, changed). On the sensor stream the
// restricted mode's verdicts are mostly decided by the exact 1-D test, so the sampled part is
// pinned more sharply by detect's TestSampledVerdictsFollowRecordIdentity.
func TestKill9SameVerdictsRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	bin := outlierdBinary(t)
	c := defaultE2E(br, sink.EmitAll)
	c.refreshRecords = 1 << 30 // one model: the snapshot the restart loads
	c.commitInterval = 3 * time.Second
	const parts = 3
	testsupport.CreateTopics(t, br, map[string]int{c.in: parts, c.out: parts, c.dlq: 1})
	input := newInput(c.in, parts, makeSensorRecords(t, 8000, parts, 61, 0.01, 0))
	produceSensors(t, br, input)
	state := t.TempDir()
	y := c.yaml()
	y = strings.Replace(y, "  combine: any\n", "  combine: any\n  state_dir: "+state+"\n  density:\n    mode: restricted\n    samples: 100\n", 1)
	y = strings.Replace(y, "refresh_interval: 30s", "refresh_interval: 1h", 1)
	cfgPath := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(cfgPath, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	log := newChildLog(t)
	outputs := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		end, err := testsupport.EndOffsets(ctx, br, c.out, parts)
		if err != nil {
			return 0
		}
		var n int64
		for _, e := range end {
			n += e
		}
		return n
	}
	first := startChild(t, bin, cfgPath, log, "first")
	waitFor(t, 90*time.Second, "4000 outputs and a snapshot", func() bool {
		snaps, _ := filepath.Glob(filepath.Join(state, "model-*.osnap"))
		return outputs() >= 4000 && len(snaps) > 0
	})
	first.kill9(t)
	second := startChild(t, bin, cfgPath, log, "second")
	waitFor(t, 90*time.Second, "every record output", func() bool { return outputs() >= 8000+1000 })
	if err := second.stop(t, 30*time.Second); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}

	type out struct {
		ID           string   `json:"id"`
		ModelVersion uint64   `json:"model_version"`
		Subspace     []string `json:"subspace"`
		Scores       *struct {
			Outlier         bool    `json:"outlier"`
			DensityOutlier  bool    `json:"density_outlier"`
			EtaProbability  float64 `json:"eta_probability"`
			DistanceOutlier bool    `json:"distance_outlier"`
			Weight          float64 `json:"weight"`
		} `json:"scores"`
	}
	byID := map[string][]out{}
	testsupport.ScanTopic(t, br, c.out, parts, func(r *kgo.Record) {
		var o out
		if err := json.Unmarshal(r.Value, &o); err != nil {
			t.Fatalf("output not JSON: %v", err)
		}
		byID[o.ID] = append(byID[o.ID], o)
	})
	pairs, sampled := 0, 0
	for id, os := range byID {
		for _, o := range os[1:] {
			a := os[0]
			if a.ModelVersion != 1 || o.ModelVersion != 1 || a.Scores == nil || o.Scores == nil {
				continue // only outputs of the same model (the snapshot's) must agree
			}
			pairs++
			if p := a.Scores.EtaProbability; len(a.Subspace) > 1 && p > 0 && p < 1 {
				sampled++ // a sampled estimate strictly inside (0, 1): draws decide its value
			}
			if *a.Scores != *o.Scores || strings.Join(a.Subspace, ",") != strings.Join(o.Subspace, ",") {
				t.Errorf("%s: before the kill %+v %v, after %+v %v", id, *a.Scores, a.Subspace, *o.Scores, o.Subspace)
			}
		}
	}
	t.Logf("%d ids, %d re-read records scored twice by model 1 (%d decided in a sampled subspace)", len(byID), pairs, sampled)
	if pairs < 100 {
		t.Fatalf("%d re-read pairs by the same model: the kill left too little to compare", pairs)
	}
}
