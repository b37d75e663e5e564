package detect

import (
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// BenchmarkScoreRanking is the cost of one scored batch of 1000 records (8 features, with
// uncertainty, the default density and distance settings, a model of 20,000 records) with the
// ranking scores (the default: tail score, w_k(q, R) to 2048 records with k = 100, calibration)
// and without them (the paper's verdicts only: a model with no ranking part), on the CPU.
//
//	go test ./stages/detect -run '^$' -bench ScoreRanking -benchtime 20x -count 5
func BenchmarkScoreRanking(b *testing.B) {
	mem := memory.NewGoAllocator()
	cfg := Default()
	cfg.Window, cfg.MinRecords = 20000, 20000
	sp := synth.DefaultUncertainParams()
	sp.Rows, sp.Dims, sp.Seed = 21000, 8, 5
	d := synth.One(sp)
	s, err := NewStage(cfg, d.Features, true, Deps{Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	feed(b, s, mem, d, 0, 20000, 1000)
	m := s.Model()
	if m == nil || m.Ranker == nil {
		b.Fatal("no model")
	}
	for _, c := range []struct {
		name   string
		ranker *Ranker
	}{{"ranking", m.Ranker}, {"verdicts-only", nil}} {
		b.Run(c.name, func(b *testing.B) {
			m.Ranker = c.ranker
			bt := makeBatch(b, mem, d, 20000, 21000, true)
			defer bt.Record.Release()
			b.ResetTimer()
			for range b.N {
				if err := s.score(bt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/record")
		})
	}
}

// BenchmarkBuildRankerWeights is what score.weights: agreement adds to a build of the ranking
// part (the work of a recalibration, recalibrate_records): the ranking part of a 20,000-record
// window of 8 features at the defaults (4096 calibration records), with the weights by
// agreement and with equal weights (docs/BENCHMARKS.md §11.2.1).
//
//	go test ./stages/detect -run '^$' -bench BuildRankerWeights -count 5
func BenchmarkBuildRankerWeights(b *testing.B) {
	sp := synth.DefaultUncertainParams()
	sp.Rows, sp.Dims, sp.Seed = 20000, 8, 5
	d := synth.One(sp)
	sorted := sortedColumns(d.Cols)
	for _, w := range []ScoreWeights{WeightsAgreement, WeightsEqual} {
		b.Run(string(w), func(b *testing.B) {
			cfg := Default()
			cfg.Score.Weights = w
			for b.Loop() {
				if _, err := buildRanker(d.Cols, sorted, d.Features, cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecalibration is one recalibration's work on the build goroutine (the window's
// columns sorted, then the ranking part rebuilt) at the default window, W = 50,000 records of
// 3 and of 9 features (the default config's sensors; GECCO 2018's): what recalibrate_records'
// cadence multiplies (docs/bench/notes/cadence21.md).
//
//	go test ./stages/detect -run '^$' -bench Recalibration -count 5
func BenchmarkRecalibration(b *testing.B) {
	for _, dims := range []int{3, 9} {
		sp := synth.DefaultUncertainParams()
		sp.Rows, sp.Dims, sp.Seed = 50000, dims, 5
		d := synth.One(sp)
		cfg := Default()
		b.Run(map[int]string{3: "f3", 9: "f9"}[dims], func(b *testing.B) {
			for b.Loop() {
				if _, err := buildRanker(d.Cols, sortedColumns(d.Cols), d.Features, cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
