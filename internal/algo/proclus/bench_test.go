package proclus

import "testing"

// BenchmarkRun: PROCLUS with 8 restarts on a planted 20,000 x 15 set (5 clusters in 4
// dimensions each), on one CPU engine of all cores, as proclus.Run does.
func BenchmarkRun(b *testing.B) {
	pl, dt := preparedPlanted(b, 20_000, 15, 5, 4, 3)
	p := Default()
	p.K, p.L, p.Seed, p.Restarts = 5, 4, 1, 8
	eng := NewCPUEngine(pl.Cols, 0)
	for b.Loop() {
		if _, err := dt.Run(p, eng); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/run")
}
