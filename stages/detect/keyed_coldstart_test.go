package detect

import (
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/algo/quality"
)

// BenchmarkKeyedColdStart: the cold start of models per key on a fleet that grows (issue 21
// item 5). 2,000 sensors join one every 100 readings over the first 200,000, then the fleet
// stays; 400,000 readings in file order through the detect stage at the default configuration
// with key_by: key (keys.min_records 30: a key's first 30 records are scored by the global
// model, Score.Warming). Per phase of 50,000 readings it logs the share scored by the global
// model and the spikes found among those records and among the warm keys' ones; it reports the
// whole stream's share, recalls, precision and AP, and records/s. Run with -benchtime 1x.
func BenchmarkKeyedColdStart(b *testing.B) {
	const sensors, rows, joinEvery, phase = 2000, 400_000, 100, 50_000
	data := joiningFleet(sensors, rows, joinEvery, 0.002, 7, "sensor-%04d")
	offs := make([]int64, rows)
	label := make([]bool, rows)
	for i := range data {
		offs[i], label[i] = int64(i), data[i].spike
	}
	cfg := Default()
	cfg.KeyBy = KeyByKey
	for range b.N {
		t0 := time.Now()
		sc := runFleet(b, cfg, data, offs)
		elapsed := time.Since(t0)
		if len(sc) != rows {
			b.Fatalf("%d scores for %d records", len(sc), rows)
		}
		type tally struct{ n, warming, coldSpikes, coldFound, warmSpikes, warmFound int }
		count := func(lo, hi int) (t tally) {
			for i := lo; i < hi; i++ {
				s := sc[i]
				t.n++
				if s.Warming {
					t.warming++
				}
				switch {
				case label[i] && s.Warming:
					t.coldSpikes++
					if s.Outlier {
						t.coldFound++
					}
				case label[i]:
					t.warmSpikes++
					if s.Outlier {
						t.warmFound++
					}
				}
			}
			return t
		}
		ratio := func(a, c int) float64 {
			if c == 0 {
				return 0
			}
			return float64(a) / float64(c)
		}
		for lo := 0; lo < rows; lo += phase {
			t := count(lo, lo+phase)
			b.Logf("rows %6d-%6d (sensors %4d): scored by the global model %5.1f%%; spikes found among them %d/%d, among warm keys' %d/%d",
				lo, lo+phase, min(sensors, (lo+phase)/joinEvery), 100*ratio(t.warming, t.n), t.coldFound, t.coldSpikes, t.warmFound, t.warmSpikes)
		}
		all := count(0, rows)
		scores, flags := make([]float64, rows), make([]bool, rows)
		for i, s := range sc {
			scores[i], flags[i] = s.Score, s.Outlier
		}
		c := quality.Count(flags, label)
		b.ReportMetric(100*ratio(all.warming, all.n), "%global")
		b.ReportMetric(ratio(all.coldFound, all.coldSpikes), "recall-cold")
		b.ReportMetric(ratio(all.warmFound, all.warmSpikes), "recall-warm")
		b.ReportMetric(c.Precision(), "precision")
		b.ReportMetric(quality.AveragePrecision(scores, label), "AP")
		b.ReportMetric(float64(rows)/elapsed.Seconds(), "records/s")
	}
}
