package density

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/outlierd/outlierd/internal/testsupport/cputime"
)

// BenchmarkDetectClustersIndependent: the paper's default detection, 'independent' with s = 800
// at cluster granularity, q = 200 micro-clusters of synth 'one' (100,000 x 10).
func BenchmarkDetectClustersIndependent(b *testing.B) {
	m, _, _ := buildModel(b, "one", 100_000, 10, 200)
	p := DefaultParams()
	b.ResetTimer()
	cpu0 := cputime.Seconds()
	for b.Loop() {
		if _, err := m.DetectClusters(p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/detect")
	b.ReportMetric((cputime.Seconds()-cpu0)/float64(b.N), "cpu-s/detect")
}

// BenchmarkRecordsExact: the fast record-granularity method (independent, exact 1-D) on
// 100,000 records x 10 of synth 'one' against q = 200 clusters, in records/s and records/s per
// core. The superlevel sets are computed once per model and eta (outside the loop, as in a stream).
func BenchmarkRecordsExact(b *testing.B) {
	m, d, _ := buildModel(b, "one", 100_000, 10, 200)
	p := DefaultParams()
	p.Exact = true
	out := make([]Verdict, d.Rows())
	if err := m.DetectRecords(d.Cols, d.SD, p, out); err != nil { // warms the region cache
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu0 := cputime.Seconds()
	for b.Loop() {
		if err := m.DetectRecords(d.Cols, d.SD, p, out); err != nil {
			b.Fatal(err)
		}
	}
	records := float64(d.Rows()) * float64(b.N)
	rate := records / b.Elapsed().Seconds()
	b.ReportMetric(rate, "records/s")
	b.ReportMetric(rate/float64(runtime.GOMAXPROCS(0)), "records/s/core")
	b.ReportMetric(records/(cputime.Seconds()-cpu0), "records/cpu-s")
}

// BenchmarkRecordsSampled: the sampled detection, independent at record granularity
// with s = 800, q = 200, r = 10 (synth 'one', model of 20,000 records), the first 2,000 records
// (the plain loop takes ~7 ms per record), with the density bounds and with the paper's plain
// loop (same verdicts), in records/s.
func BenchmarkRecordsSampled(b *testing.B) {
	m, d, _ := buildModel(b, "one", 20_000, 10, 200)
	p := DefaultParams()
	const rows = 2000
	means, sds := make([][]float32, len(d.Cols)), make([][]float32, len(d.Cols))
	for j := range d.Cols {
		means[j], sds[j] = d.Cols[j][:rows], d.SD[j][:rows]
	}
	out := make([]Verdict, rows)
	for _, plain := range []bool{false, true} {
		name := "bounds"
		if plain {
			name = "plain"
		}
		b.Run(name, func(b *testing.B) {
			m.noBounds = plain
			defer func() { m.noBounds = false }()
			m.Bounds() // built once per model, outside the loop, as in a stream
			cpu0 := cputime.Seconds()
			for b.Loop() {
				if err := m.DetectRecords(means, sds, p, out); err != nil {
					b.Fatal(err)
				}
			}
			records := float64(rows) * float64(b.N)
			b.ReportMetric(records/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(records/(cputime.Seconds()-cpu0), "records/cpu-s")
		})
	}
}

// BenchmarkBuildBounds: building the density bounds table of a q = 200, r = 10 model.
func BenchmarkBuildBounds(b *testing.B) {
	m, _, _ := buildModel(b, "one", 20_000, 10, 200)
	for b.Loop() {
		m.buildBounds()
	}
}

// BenchmarkModesByDims: time per cluster-granularity detection against the dimensionality r, for
// exhaustive roll-up (2^r - 1 subspaces: the time should about double per added dimension) and
// independent (r subspaces at most: linear). q = 50, s = 100, synth 'three' 3,000 rows.
func BenchmarkModesByDims(b *testing.B) {
	for _, r := range []int{2, 4, 6, 8} {
		m, _, _ := buildModel(b, "three", 3000, r, 50)
		for _, mode := range []Mode{Independent, Rollup} {
			b.Run(fmt.Sprintf("%v/r=%d", mode, r), func(b *testing.B) {
				p := DefaultParams()
				p.Mode, p.Samples = mode, 100
				for b.Loop() {
					if _, err := m.DetectClusters(p); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/detect")
			})
		}
	}
}
