package hypercube

import (
	"testing"

	"github.com/outlierd/outlierd/internal/testsupport/testcols"
)

// BenchmarkDetect: uniform data in the paper's SuSy shape, scaled down for the dev machine (the
// full 5,000,000 x 18 and 10,000,000 x 28 runs are gpukern's BenchmarkHypercube, CPU and GPU).
func BenchmarkDetect(b *testing.B) {
	for _, c := range []struct {
		name string
		n, d int
	}{{"500k x 18", 500_000, 18}, {"200k x 28", 200_000, 28}} {
		b.Run(c.name, func(b *testing.B) {
			cols := testcols.Uniform(newRand(b, 1), c.n, c.d)
			b.ResetTimer()
			for range b.N {
				res, err := Detect(cols, Params{Bins: DefaultBins})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(res.Cells.Len()), "cells")
			}
		})
	}
}

// BenchmarkCountsBatch: one step of the pipeline's cycle over a sliding window of 100,000 rows
// (10 batches of 10,000, 10-D clustered data, b = 7): add the new batch, score it (the index is
// rebuilt once: the counts changed), evict the oldest batch.
func BenchmarkCountsBatch(b *testing.B) {
	const batch, win, d = 10_000, 10, 10
	data := testcols.Blobs(newRand(b, 3), batch*(win+20), d, 8)
	g, err := FitGrid(data, DefaultBins)
	if err != nil {
		b.Fatal(err)
	}
	c := NewCounts(g)
	for k := range win {
		if err := c.Add(sub(data, k*batch, (k+1)*batch)); err != nil {
			b.Fatal(err)
		}
	}
	w, o := make([]int64, batch), make([]float64, batch)
	b.ResetTimer()
	for i := range b.N {
		k := win + i%20
		add, old := sub(data, k*batch, (k+1)*batch), sub(data, (k-win)*batch, (k-win+1)*batch)
		if i%20 == 0 && i > 0 { // wrap around: rebuild the window from scratch outside the timing
			b.StopTimer()
			c = NewCounts(g)
			for j := range win {
				c.Add(sub(data, (k-win+j)*batch, (k-win+j+1)*batch))
			}
			b.StartTimer()
		}
		if err := c.Add(add); err != nil {
			b.Fatal(err)
		}
		if err := c.Score(add, w, o); err != nil {
			b.Fatal(err)
		}
		if err := c.Remove(old); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(c.Len()), "cells")
}
