package detect

// The detectors' sections of the detect stage's configuration (Config's Density, Hypercube,
// Proclus, Distance and Score), each option documented where it is declared.

// DensityConfig configures the density test (ALGORITHMS.md §2).
type DensityConfig struct {
	// Mode is independent (default, the paper's proposal), rollup, restricted or averaging.
	Mode DensityMode `yaml:"mode"`
	// Eta is the density a record's surroundings must reach, on data normalised to [0,1]
	// (where the average density is 1). Default 0.2 (the paper's 0.5 flags most
	// tail records of a multi-dimensional stream; docs/BENCHMARKS.md §3).
	Eta float64 `yaml:"eta"`
	// Delta: a record is an outlier when its eta-probability is below Delta in some tested
	// subspace. Default 0.2 (kept equal to Eta, as in the paper).
	Delta float64 `yaml:"delta"`
	// Samples is s, Monte Carlo samples per subspace for the modes that need sampling.
	// Default 800.
	Samples int `yaml:"samples"`
	// Clusters is q, the number of micro-clusters summarising the window. Default 200.
	Clusters int `yaml:"clusters"`
	// Iterations of re-assignment when the window is re-clustered. Default 4.
	Iterations int `yaml:"iterations"`
}

// HypercubeConfig configures the hypercube density detector (GDBOD, ALGORITHMS.md §3): the
// window's records counted per cell of a grid over the normalised space, kept incrementally
// (each batch added, the evicted records removed; rebuilt only when a new model changes the
// normalisation). A record's w is the count in its cell and every cell within ±1 of it in every
// dimension: it sees a record that is ordinary in every feature alone but sits in an empty
// region of the joint space, which the one-feature-at-a-time density test cannot.
type HypercubeConfig struct {
	// Enabled adds the detector: every record gets scores.hypercube (O = 1 - w/w_max) and, under
	// flag_by: verdicts, its verdict joins the combine rule (any: it flags too; all: it must flag
	// too); under flag_by: rate it is reported, not part of the flag. Default false:
	// on the labelled sets its ranking is coarse (ROC AUC 0.52-0.98, docs/BENCHMARKS.md §7).
	Enabled bool `yaml:"enabled"`
	// Bins is b per dimension, over [0,1] of the normalised space (the window's 0.5%-99.5%
	// range; the tails fall in the edge cells). More bins: finer cells, sparser counts.
	// Default 7 (the paper's).
	Bins int `yaml:"bins"`
	// MaxNeighbours flags a record whose w is at most this (the record itself counts). Default
	// 1: no other record of the window within one cell in every dimension.
	MaxNeighbours int `yaml:"max_neighbours"`
}

// ProclusConfig makes PROCLUS (GPU-FAST-PROCLUS's algorithm, ALGORITHMS.md §4) a source of
// subspaces for the density test: each model clusters its normalised window into K projected
// clusters, each with its own subspace of about L features, and every record is also tested in
// the subspace of its nearest cluster (sampled, s = density.samples) and checked against the
// cluster's sphere. A low eta-probability there, or a record outside every sphere, sets the
// density verdict (a flag under flag_by: verdicts) and names the cluster and its features in
// the explanation ("low density in subspace temp+vibration (PROCLUS cluster 3)"). The clusters travel with the model
// (snapshots, the model topic).
type ProclusConfig struct {
	// Enabled adds the test. Default false (it costs about a sampled subspace per record).
	Enabled bool `yaml:"enabled"`
	// K is the number of clusters (1..window). Default 10 (the paper's).
	K int `yaml:"k"`
	// L is the average features per cluster subspace (1..features; at least 2 per cluster when
	// the stream has 2 or more). Default 3.
	L int `yaml:"l"`
	// Restarts is the number of PROCLUS runs per model, restart r from a seed derived from
	// detect.seed (proclus.RestartSeed), of which the one of lowest cost (every record in its
	// nearest cluster) is kept: one run often ends with two medoids in one cluster and another
	// cluster missed (1..1000). Default proclus.DefaultRestarts (docs/BENCHMARKS.md §6.1).
	Restarts int `yaml:"restarts"`
}

// DistanceConfig configures the solving set (ALGORITHMS.md §1).
type DistanceConfig struct {
	// K is the number of neighbours in a record's weight. Default 50.
	K int `yaml:"k"`
	// N is the number of top outliers of the window that define the threshold w*. Default 50
	// (0.1% of the default window).
	N int `yaml:"n"`
	// M is SolvingSet's candidates per iteration. Default 100.
	M int `yaml:"m"`
}

// ScoreConfig configures the ranking scores (calibrate.go).
type ScoreConfig struct {
	// Detectors is which calibrated scores the combined score averages: `both` (default),
	// `density` (the per-feature tail score) or `distance` (k-NN to the window sample).
	Detectors ScoreDetectors `yaml:"detectors"`
	// Sample is |R|, the window records the distance score measures against. Larger is closer
	// to the k-NN weight against the whole window at a cost of features x Sample operations
	// per record. Default 2048.
	Sample int `yaml:"sample"`
	// K is the distance score's neighbours in R (capped at Sample-1). Default 100 (5% of the
	// sample): larger k ranks better on the labelled sets, whose outliers come in small groups
	// (docs/BENCHMARKS.md §8); a stream of isolated anomalies prefers a small k (the demo: 5).
	K int `yaml:"k"`
	// Combine is how the calibrated scores of both detectors make the combined score: `mean`
	// (default) or `max` of their surprisals.
	Combine ScoreCombine `yaml:"combine"`
	// Weights is how combine: mean weights the two detectors: `agreement` (default), per model
	// from its window alone (rank.AgreementWeights: a detector whose top records the other does
	// not confirm weighs less, where the two rank the window alike; each weight in [0.2, 0.8];
	// equal for one feature and for windows of at most 200 calibration records), or `equal`
	// (the plain mean, as before issue 20's follow-up, docs/BENCHMARKS.md §11.2.1).
	Weights ScoreWeights `yaml:"weights"`
}
