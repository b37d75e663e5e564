package detect

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// TestPublicationBoundHoldsEveryShape (reread26): a builder's publication fits PublicationBound
// of its own configuration across the shapes a configuration gives it, each part that grows at
// its largest: every score.detectors and combine, the hypercube off and at bins 2, 7 and
// hypercube.MaxBins (each record a cell of its own), PROCLUS off and at proclus.k = min_records,
// distance_space whitened (its d x d matrix), 1, 3, 24 and hypercube.MaxDims features of long
// names, windows from 8 records up, density.clusters, distance.n and proclus.k at min_records,
// score.sample past the window and at its least, distance.k at its largest, the members'
// ranges at their most (every record of a partition of its own, on a topic of Kafka's longest
// name), and a window that wrapped (more records read than it holds). A scorer refuses what
// passes the bound (pipeline/modelassemble.go) silently but for a metric: a shape the bound
// misses would stop model delivery. TestPublicationBoundHoldsBuilds checks the bound is close;
// this one that it holds.
func TestPublicationBoundHoldsEveryShape(t *testing.T) {
	type shape struct {
		name     string
		features int
		window   int
		read     int // records pushed (past the window: it wrapped)
		set      func(*Config)
	}
	maxed := func(c *Config) { // what min_records allows of each
		c.Density.Clusters, c.Distance.N, c.Distance.K = c.MinRecords, c.MinRecords, c.MinRecords-1
	}
	proclusAt := func(k, l int) func(*Config) {
		return func(c *Config) { c.Proclus = ProclusConfig{Enabled: true, K: k, L: l, Restarts: 1} }
	}
	cube := func(bins int) func(*Config) {
		return func(c *Config) { c.Hypercube.Enabled, c.Hypercube.Bins, c.Hypercube.MaxNeighbours = true, bins, 1 }
	}
	all := func(fs ...func(*Config)) func(*Config) {
		return func(c *Config) {
			for _, f := range fs {
				f(c)
			}
		}
	}
	shapes := []shape{
		{"defaults", 3, 2000, 2000, func(*Config) {}},
		{"tiny window, everything at min_records", 1, 8, 8, all(maxed, cube(hypercube.MaxBins), proclusAt(8, 1))},
		{"tiny window wrapped", 3, 8, 50, all(maxed, cube(2), proclusAt(8, 2), func(c *Config) { c.DistanceSpace = SpaceWhitened })},
		{"one feature whitened", 1, 500, 700, all(cube(7), func(c *Config) { c.DistanceSpace = SpaceWhitened })},
		{"density alone, max combine", 3, 1000, 1000, all(cube(7), func(c *Config) {
			c.Score.Detectors, c.Score.Combine, c.Score.Weights = DetectorsDensity, CombineMax, WeightsEqual
		})},
		{"distance alone, sample past the window", 3, 600, 900, all(proclusAt(20, 2), func(c *Config) {
			c.Score.Detectors, c.Score.Sample, c.Score.K = DetectorsDistance, 1<<20, 599
		})},
		{"sample at its least", 3, 600, 600, func(c *Config) { c.Score.Sample, c.Score.K = 2, 1 }},
		{"24 features, bins at the most, whitened, PROCLUS", 24, 1500, 2500, all(cube(hypercube.MaxBins), proclusAt(30, 24), func(c *Config) {
			c.DistanceSpace = SpaceWhitened
		})},
		{"24 features, clusters at min_records", 24, 400, 400, all(maxed, cube(2), proclusAt(400, 3))},
		{"hypercube.MaxDims features, whitened", hypercube.MaxDims, 300, 300, all(maxed, cube(hypercube.MaxBins), proclusAt(50, 4), func(c *Config) {
			c.DistanceSpace = SpaceWhitened
		})},
		{"anchored density modes", 6, 800, 1200, all(cube(7), func(c *Config) { c.Density.Mode = DensityAveraging })},
	}
	topic := strings.Repeat("t", maxTopicName)
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			cfg := Default()
			cfg.Window, cfg.MinRecords, cfg.RefreshRecords, cfg.RecalibrateRecords = sh.window, min(sh.window, 5000), 1<<30, 1<<30
			cfg.Derive(func(string) bool { return false })
			cfg.Density.Samples = 100
			sh.set(&cfg)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the shape's configuration: %v", err)
			}
			features := make([]string, sh.features)
			for j := range features {
				features[j] = fmt.Sprintf("%s_%03d", strings.Repeat("f", 200), j)
			}
			if err := cfg.ValidateFeatures(len(features)); err != nil {
				t.Fatalf("the shape's features: %v", err)
			}
			s, err := NewStage(cfg, features, false, Deps{Log: zerolog.Nop(), Role: RoleBuilder})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			rng := rand.New(rand.NewPCG(uint64(sh.window), uint64(sh.features)))
			for at := 0; at < sh.read; at += 250 {
				rows := make([]testbatch.Row, min(250, sh.read-at))
				for i := range rows {
					// Every record on a partition of its own (the most member ranges), values
					// uniform (the most hypercube cells).
					rows[i] = testbatch.Row{Partition: int32(at + i), Offset: int64(at + i), Features: make([]float32, len(features))}
					for j := range features {
						rows[i].Features[j] = rng.Float32()
					}
				}
				out, err := s.Process(context.Background(), testbatch.New(t, mem, topic, features, false, false, rows))
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range out {
					b.Release()
				}
				s.collect(true)
			}
			s.ext.rebuildDue = true // a build of the window as it is now (full, wrapped)
			s.maybeRebuild()
			s.collect(true)
			m := s.Model()
			if m == nil || m.Ranker == nil || cfg.Proclus.Enabled != (m.Subspaces != nil) {
				t.Fatalf("model %v: want one with a ranker, and subspaces with PROCLUS on", m)
			}
			var buf bytes.Buffer
			if err := WriteSnapshot(&buf, m); err != nil {
				t.Fatal(err)
			}
			cells := s.PublishedHypercube()
			if cfg.Hypercube.Enabled != (cells != nil) {
				t.Fatalf("hypercube counts of %d bytes with the detector enabled %v", len(cells), cfg.Hypercube.Enabled)
			}
			got, bound := buf.Len()+len(cells), PublicationBound(features, &cfg)
			if got > bound {
				t.Errorf("a publication of %d bytes (snapshot %d, hypercube %d; %d member ranges, %d micro-clusters, %d top weights) past PublicationBound's %d",
					got, buf.Len(), len(cells), len(m.Members.Ranges), m.MicroClusters.Q(), len(m.TopWeights), bound)
			}
			t.Logf("%d features, window %d: publication %d bytes, bound %d (%.2fx)", len(features), cfg.Window, got, bound, float64(bound)/float64(got))
		})
	}
}
