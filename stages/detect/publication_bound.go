package detect

import (
	"math/bits"

	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/core/sealed"
)

// maxTopicName is the longest Kafka topic name (a model's Members name the input topic).
const maxTopicName = 249

// PublicationBound is the most bytes a builder's publication of its model under cfg takes on
// the model topic (pipeline/modeltopic.go): WriteSnapshot's bytes for a model of a stream of
// features plus PublishedHypercube's, counted whether or not cfg has the hypercube detector on
// (it is the builder's own switch) and PROCLUS's subspaces likewise. Every part that grows with
// the data is bounded by the window (cfg.Window records): the solving set, the top weights, the
// ranker's tails, sample and calibrations, the members' ranges (each holds a record at least) and
// the hypercube's occupied cells; the micro-clusters by density.clusters, the subspaces by
// proclus.k. A scorer refuses a publication larger than its own configuration's bound: no build
// of it writes one, so such a publication is a hostile writer's or another configuration's.
func PublicationBound(features []string, cfg *Config) int {
	d, w, q, k := len(features), max(cfg.Window, 0), max(cfg.Density.Clusters, 0), max(cfg.Proclus.K, 0)
	names := 0
	for _, f := range features {
		names += 4 + len(f)
	}
	envelope := sealed.HeaderSize + sealed.SumSize
	// version, built at, build time, window records, window, 5 parameters, seed; dims, q, flags
	head := 4*8 + 8 + 5*4 + 8 + 3*4 + names
	norm := 2 * 4 * d               // offsets, scales
	clusters := 4*8*d*q + 8*q + 8*d // CF1, CF2, EF2, anchors; N; bandwidths
	top := 4 + 8*w
	solving := 8 + envelope + 4 + 8 + 4 + 8 + 4 + names + norm + 4*d*w
	members := 4 + maxTopicName + 4 + 20*w
	subspaces := 4 + k*(8+8+4+4*d+4*d)
	text := 4 + 64                             // (decodeRanker reads each word of at most 64 bytes)
	sample := min(max(cfg.Score.Sample, 0), w) // (the ranker's sample R: buildRankerOn)
	ranker := 2*text + 8 + d*(8+4*w) + 3*8*d + 8 + 4 + 4*d*sample + 3*(8+8*w+8) + text + 16
	whiten := 8 + 8*d*d
	return envelope + head + norm + clusters + top + solving + members + subspaces + ranker + whiten + hypercubeBound(d, w, cfg.Hypercube.Bins)
}

// hypercubeBound is the most bytes hypercube.AppendCells takes for a window of w records in d
// dimensions of bins bins each: at most min(w, bins^d) occupied cells, each a key of the words
// hypercube.NewGrid packs it in and a count.
func hypercubeBound(d, w, bins int) int {
	bins = min(max(bins, 2), hypercube.MaxBins)
	b := bits.Len(uint(bins - 1))
	perWord := 62 / b
	words := (d + perWord - 1) / perWord
	cells := 1
	for range d {
		if cells *= bins; cells >= w {
			break
		}
	}
	return 8 + 16*d + 8 + min(cells, w)*(8*words+4)
}
