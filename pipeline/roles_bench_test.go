package pipeline

import (
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/sink"
)

// BenchmarkRoles measures what sizing a builder/scorers deployment needs, against the real
// broker: a backlog of OUTLIERD_BENCH_RECORDS (default 200,000) sensor records on 6 partitions
// drained by (a) one process with role all, (b) the builder alone (its own group: window and
// builds, no output), (c) the builder and one scorer, in this process. Reported: the drain time
// per configuration and the process CPU per 1000 records; a scorer's own cost is (c) - (b).
// The default detect configuration, emit: outliers.
//
//	.ci/with-kafka.sh go test -run '^$' -bench Roles -benchtime 1x ./pipeline/
func BenchmarkRoles(b *testing.B) {
	br := testsupport.RealBroker(b)
	n := envInt(b, "OUTLIERD_BENCH_RECORDS", 200_000)
	const parts = 6
	in := testsupport.UniqueName("rb-in")
	testsupport.CreateTopics(b, br, map[string]int{in: parts})
	input := newInput(in, parts, makeSensorRecords(b, n, parts, 13, 0.01, 0))
	produceSensors(b, br, input)
	for _, roles := range [][]string{{"all"}, {"builder"}, {"builder", "scorer"}} {
		name := roles[0]
		if len(roles) > 1 {
			name = "builder+scorer"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				out, dlq, group, mt := testsupport.UniqueName("rb-out"), testsupport.UniqueName("rb-dlq"), testsupport.UniqueName("rb-group"), testsupport.UniqueName("rb-models")
				testsupport.CreateTopics(b, br, map[string]int{out: parts, dlq: 1, mt: 1})
				cpu0, t0 := processCPU(b), time.Now()
				var rs []*running
				for _, role := range roles {
					cfg := sensorConfig(br, in, out, dlq, group, sink.EmitOutliers)
					cfg.Run.Role, cfg.Run.ModelTopic = detect.Role(role), mt
					rs = append(rs, startPipeline(b, cfg, nil))
				}
				// Done when every group that reads (the scoring group; the builder's own)
				// committed the whole backlog.
				for i, role := range roles {
					g := group
					if role == "builder" {
						g = BuilderGroup(group)
					}
					if role == "builder" && len(roles) > 1 && i == 0 {
						continue // the scorer's commit ends the run; the builder reads meanwhile
					}
					waitCommittedBelow(b, br, g, input, n, 10*time.Minute)
				}
				elapsed := time.Since(t0)
				cpu := processCPU(b) - cpu0
				for _, r := range rs {
					if err := r.stop(b, 40*time.Second); err != nil {
						b.Fatalf("stop: %v", err)
					}
				}
				b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
				b.ReportMetric(float64(cpu)/float64(time.Millisecond)/(float64(n)/1000), "cpu_ms/1k_records")
			}
		})
	}
}
