// Package detect is the scoring stage of the pipeline. It keeps the window of recent
// records, rebuilds the model from it off the hot path (normalisation, micro-clusters,
// density, solving set) and gives every record of a batch two verdicts and a combined one:
//
//   - density (Matsumoto, Hung, Yiu): the record, with its own uncertainty, has an
//     eta-probability below delta in some subspace of the micro-cluster density;
//   - distance (Angiulli et al.): w_k(q, S) >= w*, the solving-set prediction of the window's
//     top-n distance-based outliers (no false negatives with respect to the exact rule).
package detect

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/proclus"
	"github.com/outlierd/outlierd/internal/core/config"
)

// Config configures the detect stage (YAML section `detect`).
type Config struct {
	// Window is W, the number of most recent records the model is built from. Larger windows
	// give steadier models at the cost of memory (W x features x 8 bytes) and rebuild time.
	// Default 50000.
	Window int `yaml:"window"`
	// MinRecords is how many records the window must hold before the first model is built.
	// Default 5000, or the window when the window is smaller and min_records is left out
	// (Derive; density.clusters, distance.k and n then follow it down).
	// Default 5000.
	MinRecords int `yaml:"min_records"`
	// RefreshRecords rebuilds the whole model after this many new records. Default 200000
	// (four default windows): a full build (the solving set, the micro-clusters) costs about a
	// second of one core at W = 50000, so a count trigger near W would spend the CPU on
	// rebuilds at high rates; RefreshInterval keeps the model fresh at low rates, and
	// recalibrate_records keeps the scores following the stream in between.
	RefreshRecords int `yaml:"refresh_records"`
	// RecalibrateRecords rebuilds the model's ranking part alone (each feature's tail, the
	// distance sample, the calibrations: what flag_by significance and rate decide by) after
	// this many new records, as a new model version. Default 0: a quarter of the records the
	// window holds, at most a tenth of the window (5,000 at W = 50,000; Recalibrate). Significant
	// records stay out of the next builds, so the reference's edge moves only through records
	// scoring under min_score, about one margin a recalibration: a level moving faster than that
	// runs away from the model and is flagged build after build (GECCO 2018's cooling water: 31%
	// of its rows at a quarter window, docs/BENCHMARKS.md §12.42-§12.43). A recalibration costs
	// about a twentieth of a full build.
	RecalibrateRecords int `yaml:"recalibrate_records"`
	// RefreshInterval rebuilds the model after this long, if any record arrived. Default 30s;
	// at least MinRefreshInterval (1ns rebuilt the model back to back, and with key_by and
	// state_dir saved the keys' state, 1.27 GB at 100,000 keys, with each model).
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// BeforeModel is `hold` (default) or `pass`: what happens to records that arrive before the
	// first model exists. A scorer (run.role) holds at most Window records, then stops fetching
	// until the builder publishes a model (docs/OPERATIONS.md "Builder and scorers").
	BeforeModel BeforeModel `yaml:"before_model"`
	// Combine is `any` (default), `all`, `density` or `distance`: the rule on the paper's
	// verdicts that flags a record when flag_by is `verdicts`.
	Combine Combine `yaml:"combine"`
	// FlagBy is what raises a flag: `significance` (default) flags a record whose combined
	// score (batch.Score.Score: -log10 of how rare its scores are among the window's records,
	// calibrate.go) reaches min_score, with alarm_rate as a cap on the alarms' starts; `rate`
	// flags the window's top alarm_rate by the same score (a quota: a healthy stream gets
	// alarm_rate of its records flagged); `verdicts` flags by the paper's thresholds (eta/delta,
	// w*) and the combine rule. Either way every score and verdict is computed and carried in
	// the output.
	FlagBy FlagBy `yaml:"flag_by"`
	// MinScore is the combined score at which flag_by: significance flags: 5 means a record
	// whose scores the window's normal records reach about once in 100,000 (-log10 of the tail
	// probability; beyond the calibration's top percentile the tail is extrapolated
	// exponentially, which is conservative for light-tailed noise). Default 5: on generated
	// sensor streams (docs/BENCHMARKS.md §9) it keeps a clean stream under 0.1% flagged and
	// flags every spike of 20 robust sd.
	MinScore float64 `yaml:"min_score"`
	// FlagClear is the alarm's deadband under flag_by: significance (ISA-18.2's hysteresis), as a
	// share of min_score: a record whose series' previous record was flagged stays flagged while
	// its combined score is at least flag_clear x min_score, so a fault whose scores hover about
	// min_score is one run of flags, not a chatter of alarms and clears; a spike followed by
	// ordinary records is not extended. A record's series is its key (_key: ingest.key_field or
	// the message key), under key_by: none too, so a fleet interleaved on one topic is held per
	// sensor; the records without a key (or with an empty one) are one series; a series' flag
	// more than `window` records of the stream back no longer holds. Under key_by: key a warming
	// key's records are held on the global model's path and a warm key's by its own cap
	// (keys.window), and a key's alarm carries across the two: its first records by its own
	// model continue its last warming record's, an evicted key's next record its last flag
	// (keyed_handover.go). Held records go past alarm_rate's cap (it limits alarm starts; a
	// key's cap counts them, the stage's does not), are not
	// significant (a model's reference keeps them) and say "held" in their explanation. In
	// [0, 1); 0: off. Default 0.7
	// (3.5 at min_score 5; chosen on the Tennessee Eastman process, SMAP/MSL and the generated
	// streams: docs/BENCHMARKS.md §12.25).
	FlagClear float64 `yaml:"flag_clear"`
	// AlarmRate under flag_by: significance is a cap on the starts of alarms: a record that would
	// start one (its series' previous record not flagged) is flagged only while fewer than this
	// share of the last `window` records started one (else it is marked suppressed and explained,
	// not flagged), so a flood of separate alarms (noise the model has not caught up with, a
	// chattering sensor) cannot page without bound; a record that continues its series' alarm
	// (significant, or held by flag_clear) is flagged past it and not counted (an alarm counts
	// once), until the model learns the fault (about a window: outcasts), so a plant's fault of
	// hours is flagged through it and a second fault after it starts its own (docs/BENCHMARKS.md
	// §12.30.1, §12.30.2; alarm.go's admitStart). A key's cap (key_by: key) is this share of
	// keys.window and counts every flag, continuing ones too (admitRun: a key whose long fault
	// was learnt does not page its return to normal at once). Under flag_by: rate it is the
	// quota: the share of a window's records flagged whatever they are. In (0, 0.5]. Default 0.02.
	AlarmRate float64 `yaml:"alarm_rate"`
	// AlertCooldown groups continuing alerts: after a key's alert (a flagged record), its
	// flagged records within this long (by the records' timestamps) are folded into it, marked
	// grouped and not emitted under sink.emit: outliers (every record is still scored, and
	// emitted under emit: all); the key's next alert says how many were folded. Records without
	// a key share one group. Default 0: every flagged record is an alert of its own.
	AlertCooldown time.Duration `yaml:"alert_cooldown"`
	// RecentScores is how many of a series' last combined scores (its key's under key_by: key,
	// else the stream's) rank each record's score into batch.Score.Recent (recent.go): its tail
	// probability among them, rising beyond their largest by the excess; a score to rank or
	// threshold many series by, since a series the model does not fit falls back to its own
	// recent past. An episode ranks once: a record whose rank does not rise above the largest
	// rank of its series' current and previous block of recent_scores records ranks by how far
	// below that peak it is (<= 0; docs/BENCHMARKS.md §12.14). It does not change the flag.
	// Cost: each scored record is ranked among its series' held scores (a binary search), and
	// each series holds 16 bytes a score (a key's counted in keys.max_bytes); not kept across
	// restarts. Default 50 (chosen on SKAB's even experiments with recent_horizon,
	// docs/BENCHMARKS.md §12.12; 100 before, §12.10); 0: off (Recent is NaN).
	RecentScores int `yaml:"recent_scores"`
	// RecentHorizon is how many of a series' last records a record beyond its last
	// recent_scores must stand out from to rank as new in Recent (recent.go): the series keeps
	// the largest combined score of each block of recent_scores records over the horizon, and
	// a record that five of them reached ranks by their count (a burst that returns every day
	// is ordinary from its sixth day), one fewer reached rises by its excess over the
	// fifth-largest. Cost: 8 bytes a block a series (60 blocks, 480 bytes, at the defaults), and
	// a scan of the blocks for a record beyond its series' ring. Default 3000 (chosen with
	// recent_scores on NAB's held-in half and SKAB's even experiments, docs/BENCHMARKS.md
	// §12.12); 0: off (a record beyond the ring rises by its excess over the ring's largest, as
	// before).
	RecentHorizon int `yaml:"recent_horizon"`
	// RecentPast is how many of the stream's last records Recent also measures a record
	// against (recent_past.go): the record's largest per-feature robust z against them (median
	// and MAD / 0.6745), as log10(1 + z) decades, is added to its combined score before the
	// rank, so a record ranks high when it is rare under the model and new against the recent
	// past alike (a model that has not followed its stream yet, a file's first at replay's
	// cadence, makes ordinary jitter of a drifted plant rare; docs/BENCHMARKS.md §12.19).
	// The stream's series only: refused with key_by: key. It does not change the flag. Cost:
	// recent_past x features x 12 bytes for the stream (the ring and its sorted values), and
	// about 0.12 µs per feature per record at 100 (§12.21). 0: off (default; Recent ranks the
	// combined score).
	RecentPast int `yaml:"recent_past"`
	// RecentPastWeight is how much of those decades is added: `stale` (default) weighs them by
	// the share of the stream's last recent_past scored records whose combined score is 2
	// decades or more (a tail probability of 1% or less under the model: about 0.01 while the
	// model fits its series, near 1 when it has gone stale, so the recent past speaks where the
	// model does not follow the series and stays out of a series the model fits; chosen on
	// SKAB's even half and NAB's in half, docs/BENCHMARKS.md §12.21); `one` adds them all (§12.19).
	RecentPastWeight RecentPastWeight `yaml:"recent_past_weight"`
	// RecentFarSide is `linear` (default) or `log`: with log, beyond the distance calibration's
	// largest score the combined score Recent ranks grows as a Pareto tail of index 1, not
	// linearly (Ranker.combineFar), by the weight recent_past_weight gives the recent past (all
	// of it without recent_past); flags unchanged. The stream's series only (recent.go; §12.23).
	RecentFarSide RecentFarSide `yaml:"recent_far_side"`
	// DistanceSpace is the global model's distance score's space: `standardised` (default: each
	// feature by its median and winsorised sd) or `whitened` (those coordinates decorrelated by
	// the window's covariance, shrunk towards its diagonal: a record that breaks a correlation
	// between sensors is far in proportion, as a Mahalanobis distance reads it; whiten.go,
	// docs/BENCHMARKS.md §12.54). A key's model is standardised under either. Changing it
	// rebuilds the model.
	DistanceSpace DistanceSpace `yaml:"distance_space"`
	// KeyBy is `none` (default: one model for the whole stream) or `key`: a model per record
	// key (the Kafka key, or ingest.key_field's value) besides the global one (keyed.go; docs/DESIGN.md,
	// "Models per key"). Needs flag_by: significance.
	KeyBy KeyBy `yaml:"key_by"`
	// Keys configures the models per key (key_by: key).
	Keys KeysConfig `yaml:"keys"`
	// Score configures the ranking detectors and the combined score.
	Score ScoreConfig `yaml:"score"`
	// Density configures micro-clustering and density sampling.
	Density DensityConfig `yaml:"density"`
	// Distance configures the solving set.
	Distance DistanceConfig `yaml:"distance"`
	// Seed makes model builds reproducible (micro-cluster centroids, first candidates, sampling).
	Seed uint64 `yaml:"seed"`
	// StateDir, when set, is where every new model is snapshotted (atomically, checksummed);
	// at start the newest valid snapshot built with this configuration serves at once, so
	// scoring resumes without waiting for min_records. Beside the models it keeps the keys'
	// state (key_by: key) and the alarm state (alarm_state.go: the caps, the deadband's series,
	// the alert groups), so a fault flagged before a stop goes on after it. Default empty: no
	// snapshots.
	StateDir string `yaml:"state_dir"`
	// Hypercube configures the hypercube density detector (GDBOD), off by default.
	Hypercube HypercubeConfig `yaml:"hypercube"`
	// Proclus configures PROCLUS subspaces for the density test, off by default.
	Proclus ProclusConfig `yaml:"proclus"`
	// Snapshots is how many snapshots StateDir keeps (the newest). More survive more corrupt
	// files at the cost of disk (one model each). Default 3.
	Snapshots int `yaml:"snapshots"`
}

// KeysConfig configures the models per key (detect.key_by: key).
type KeysConfig struct {
	// Window is each key's window: its last this many records make its model. Default 200: about
	// 15.8 KB a key with 3 features (docs/BENCHMARKS.md §13.1.16), and a +8 sd spike is far beyond the
	// range of 200 records of noise.
	Window int `yaml:"window"`
	// MinRecords is how many records a key needs before it gets a model of its own; until then
	// the global model scores its records (and their explanation says so). Default 30: a key's
	// first 30 records give a tail that sees +8 sd; the warm-up, scored by the global model (blind
	// to a key's own +8 sd), costs recall: 30 against 40 raised the fleet's AP on 16 of 20 streams
	// and on all 18 held out (docs/BENCHMARKS.md §13.0.4); at 20 first models were too narrow.
	MinRecords int `yaml:"min_records"`
	// RebuildRecords is how many of a key's records come between the rebuilds of its model after
	// the first; 0: a quarter of Window (the default; the model follows drift as the global one
	// does with recalibrate_records). The rebuilds are the largest share of a fleet's CPU
	// (docs/BENCHMARKS.md §13.1.17: about a third at a million keys): twice the records between
	// them, about half the rebuilds, and a model that follows a drifting key more slowly. Live:
	// each key's records since its last rebuild are carried over in proportion
	// (keyedScorer.rephase).
	RebuildRecords int `yaml:"rebuild_records"`
	// K is the distance score's neighbours in the key's window. Default 10.
	K int `yaml:"k"`
	// MaxKeys bounds the keys held: past it the key seen least recently is evicted (and starts
	// cold again). Default 100000.
	MaxKeys int `yaml:"max_keys"`
	// MaxBytes bounds the keys' windows and models together (as KeyStats.Bytes accounts them);
	// 0: no bound but max_keys. Default 0.
	MaxBytes int64 `yaml:"max_bytes"`
	// HugePages asks the kernel for transparent huge pages (2 MB) on the process's heap
	// (internal/core/hugepage) where its setting leaves them to the program (madvise). The keys'
	// states are gigabytes read at random, a key a TLB miss each with 4 KB pages: at a million
	// keys on the H100 host of docs/BENCHMARKS.md §13.1.14 the stage ran 11-19 % faster on
	// huge pages. A hint: no result changes; where the host's setting is never nothing is asked;
	// false leaves the heap to the host's setting. Default true.
	HugePages bool `yaml:"huge_pages"`
	// Tail is `fleet` (default) or `own`: with fleet, a key's record's score is raised to the
	// significance of its largest deviation from its key's median (in the key's robust sd)
	// against a tail fitted on the pooled deviations of the whole fleet's records, thousands
	// rather than the key's 200 (keyed_fleet.go; docs/BENCHMARKS.md §13.4.2). Each key keeps its
	// own location and scale; the pool is the fleet's (about 130 KB, saved with the keys' state:
	// keyed_fleet_state.go), a key's bytes unchanged. A scorer fits its own from its partitions'
	// keys' records (docs/OPERATIONS.md). Live. Default fleet: on §12.27's fleet it lifted mean F1
	// 0.619 -> 0.717 (held-out seeds 0.595 -> 0.728) with every guard passing, no per-key memory
	// and no cost the 1M-key H100 row shows (docs/BENCHMARKS.md §13.4.2); own keeps a warm key's
	// verdicts independent of the other keys (TestWarmKeyScoresAsAlone).
	Tail KeysTail `yaml:"tail"`
}

// Default is the configuration with every default filled in.
func Default() Config {
	return Config{
		Window: 50000, MinRecords: 5000, RefreshRecords: 200000, RefreshInterval: 30 * time.Second,
		BeforeModel: BeforeModelHold, Combine: CombineAny, Seed: 1, Snapshots: 3,
		// flag by significance at 5 with a cap of 0.02 (docs/BENCHMARKS.md §9); the combined
		// score the mean of the tail score's and the k-NN distance's calibrated scores, k = 100
		// of a 2048-record sample: the best mean ROC AUC + AP over eight labelled sets in the
		// batch case and the best mean stream F1; chosen again by most sets left out
		// (docs/BENCHMARKS.md §8).
		FlagBy: FlagBySignificance, MinScore: 5, FlagClear: 0.7, AlarmRate: 0.02, RecentScores: 50, RecentHorizon: 3000, RecentPastWeight: PastWeightStale, RecentFarSide: FarSideLinear, DistanceSpace: SpaceStandardised, Score: ScoreConfig{Detectors: DetectorsBoth, Sample: 2048, K: 100, Combine: CombineMean, Weights: WeightsAgreement},
		// combine any, eta = delta = 0.2, n = 0.1% of the window: the setting with the best mean
		// F1 over nine labelled streams and the best worst case relative to each set's own best;
		// leaving one set out, the others choose it again 8 times of 9 (docs/BENCHMARKS.md §3).
		Density:   DensityConfig{Mode: DensityIndependent, Eta: 0.2, Delta: 0.2, Samples: 800, Clusters: 200, Iterations: 4},
		Distance:  DistanceConfig{K: 50, N: 50, M: 100},
		Hypercube: HypercubeConfig{Bins: hypercube.DefaultBins, MaxNeighbours: 1},
		KeyBy:     KeyByNone, Keys: KeysConfig{Window: 200, MinRecords: 30, K: 10, MaxKeys: 100000, HugePages: true, Tail: TailFleet},
		Proclus: ProclusConfig{K: 10, L: 3, Restarts: proclus.DefaultRestarts},
	}
}

// Derive fills the defaults that follow the window when the file leaves them out (written
// reports whether a key under detect. is set: "min_records"): min_records is the default 5000,
// or the window when that is smaller (a window of 1000 alone is valid: its first model comes
// once it is full); then density.clusters, distance.k, distance.n and proclus.k, each bounded by
// min_records, come down with it (clusters and n to min_records, k below it). A value the file
// sets is never changed: Validate judges it.
func (c *Config) Derive(written func(key string) bool) {
	if !written("min_records") && c.Window >= 2 { // (a bad window: Validate names it alone)
		c.MinRecords = min(c.MinRecords, c.Window)
	}
	if c.MinRecords < 2 {
		return // Validate says why
	}
	if !written("density.clusters") {
		c.Density.Clusters = min(c.Density.Clusters, c.MinRecords)
	}
	if !written("distance.k") {
		c.Distance.K = min(c.Distance.K, c.MinRecords-1)
	}
	if !written("distance.n") {
		c.Distance.N = min(c.Distance.N, c.MinRecords)
	}
	if !written("proclus.k") {
		c.Proclus.K = min(c.Proclus.K, c.MinRecords)
	}
}

// maxWindow is the most records detect.window and detect.keys.window may hold: the alarm cap
// and a key's significance marks count a window's flags in rings of 32-bit length (flagring.go).
const maxWindow = 1<<31 - 1

// MinRefreshInterval is detect.refresh_interval's floor: a full build of the default window
// takes up to a second on a CPU, and with key_by and state_dir each model comes with a save of
// the keys' state.
const MinRefreshInterval = time.Second

// Validate reports every problem at once (errors.Join), each a config.FieldError naming its
// key, so that a config file points at the line to fix. The checks that need the stream's
// features are ValidateFeatures.
func (c *Config) Validate() error {
	var errs []error
	add := func(key, format string, a ...any) { errs = append(errs, config.Fieldf("detect."+key, format, a...)) }
	windowOK := c.Window >= 2 && c.Window <= maxWindow
	if !windowOK {
		add("window", "must be in [2, %d], got %d", maxWindow, c.Window)
	}
	if c.MinRecords < 2 || windowOK && c.MinRecords > c.Window {
		add("min_records", "must be in [2, window=%d], got %d", c.Window, c.MinRecords)
	}
	// The keys bounded by min_records are checked against it only where it is valid: a bad
	// window or min_records is named once, not again at each key that follows it.
	boundOK := windowOK && c.MinRecords >= 2 && c.MinRecords <= c.Window
	if c.RefreshRecords < 1 {
		add("refresh_records", "must be >= 1, got %d", c.RefreshRecords)
	}
	if c.RecalibrateRecords < 0 {
		add("recalibrate_records", "must be >= 0 (0: a quarter of the window), got %d", c.RecalibrateRecords)
	}
	if c.RefreshInterval < MinRefreshInterval {
		add("refresh_interval", "must be >= %s (shorter rebuilds the model back to back while records arrive, and with key_by and state_dir saves the keys' state with each model), got %s", MinRefreshInterval, c.RefreshInterval)
	}
	if c.BeforeModel != BeforeModelHold && c.BeforeModel != BeforeModelPass {
		add("before_model", "must be hold or pass, got %q", c.BeforeModel)
	}
	switch c.Combine {
	case CombineAny, CombineAll, CombineDensity, CombineDistance:
	default:
		add("combine", "must be any, all, density or distance, got %q", c.Combine)
	}
	if c.FlagBy != FlagBySignificance && c.FlagBy != FlagByRate && c.FlagBy != FlagByVerdicts {
		add("flag_by", "must be significance, rate or verdicts, got %q", c.FlagBy)
	}
	switch c.KeyBy {
	case KeyByNone:
	case KeyByKey:
		if c.FlagBy != FlagBySignificance {
			add("key_by", "key needs flag_by: significance (a key's model flags by its own significance), but flag_by is %q: set flag_by: significance, or key_by: none", c.FlagBy)
		}
		if c.RecentPast > 0 { // (recent_past.go: a key's past would be N x features x 4 bytes of its budget)
			add("recent_past", "measures the stream's series only, not a key's: set it to 0 with key_by: key (got %d)", c.RecentPast)
		}
		if c.RecentFarSide == FarSideLog {
			add("recent_far_side", "measures the stream's series only, not a key's: set it to linear with key_by: key")
		}
	default:
		add("key_by", "must be none or key, got %q", c.KeyBy)
	}
	if kc := c.Keys; c.KeyBy == KeyByKey || kc != (KeysConfig{}) {
		if kc.Window < 8 || kc.Window > maxWindow {
			add("keys.window", "must be in [8, %d], got %d", maxWindow, kc.Window)
		}
		if kc.K < 1 {
			add("keys.k", "must be >= 1, got %d", kc.K)
		}
		if kc.MinRecords <= kc.K || kc.MinRecords > kc.Window {
			add("keys.min_records", "must be in (keys.k=%d, keys.window=%d], got %d", kc.K, kc.Window, kc.MinRecords)
		}
		if kc.RebuildRecords < 0 || kc.RebuildRecords > maxWindow {
			add("keys.rebuild_records", "must be in [0, %d] (0: a quarter of keys.window), got %d", maxWindow, kc.RebuildRecords)
		}
		if kc.MaxKeys < 1 {
			add("keys.max_keys", "must be >= 1, got %d", kc.MaxKeys)
		}
		if kc.MaxBytes < 0 {
			add("keys.max_bytes", "must be >= 0 (0: no bound), got %d", kc.MaxBytes)
		}
		if kc.Tail != TailOwn && kc.Tail != TailFleet {
			add("keys.tail", "must be own or fleet, got %q", kc.Tail)
		}
	}
	if c.RecentScores < 0 || c.RecentScores > 1<<20 {
		add("recent_scores", "must be in [0, %d] (0: off), got %d", 1<<20, c.RecentScores)
	}
	if c.RecentHorizon < 0 || c.RecentHorizon > 1<<24 {
		add("recent_horizon", "must be in [0, %d] (0: off), got %d", 1<<24, c.RecentHorizon)
	} else if c.RecentScores > 0 && c.RecentBlocks() > 1<<16 {
		add("recent_horizon", "is %d blocks of recent_scores=%d records: at most %d", c.RecentBlocks(), c.RecentScores, 1<<16)
	}
	if c.RecentPast < 0 || c.RecentPast > 1<<16 {
		add("recent_past", "must be in [0, %d] (0: off), got %d", 1<<16, c.RecentPast)
	}
	if c.RecentPastWeight != PastWeightStale && c.RecentPastWeight != PastWeightOne {
		add("recent_past_weight", "must be stale or one, got %q", c.RecentPastWeight)
	}
	if c.DistanceSpace != SpaceStandardised && c.DistanceSpace != SpaceWhitened {
		add("distance_space", "must be standardised or whitened, got %q", c.DistanceSpace)
	}
	if c.RecentFarSide != FarSideLinear && c.RecentFarSide != FarSideLog {
		add("recent_far_side", "must be linear or log, got %q", c.RecentFarSide)
	}
	if c.AlertCooldown < 0 {
		add("alert_cooldown", "must be >= 0 (0: off), got %s", c.AlertCooldown)
	}
	if !(c.MinScore > 0) || math.IsInf(c.MinScore, 0) {
		add("min_score", "must be a number > 0, got %g", c.MinScore)
	}
	if !(c.FlagClear >= 0 && c.FlagClear < 1) {
		add("flag_clear", "must be in [0, 1) (a share of min_score; 0: off), got %g", c.FlagClear)
	}
	if !(c.AlarmRate > 0 && c.AlarmRate <= 0.5) {
		add("alarm_rate", "must be in (0, 0.5], got %g", c.AlarmRate)
	}
	switch c.Score.Detectors {
	case DetectorsBoth, DetectorsDensity, DetectorsDistance:
	default:
		add("score.detectors", "must be both, density or distance, got %q", c.Score.Detectors)
	}
	if c.Score.Combine != CombineMean && c.Score.Combine != CombineMax {
		add("score.combine", "must be mean or max, got %q", c.Score.Combine)
	}
	if c.Score.Weights != WeightsAgreement && c.Score.Weights != WeightsEqual {
		add("score.weights", "must be agreement or equal, got %q", c.Score.Weights)
	}
	if c.Score.Sample < 2 {
		add("score.sample", "must be >= 2, got %d", c.Score.Sample)
	}
	if c.Score.K < 1 {
		add("score.k", "must be >= 1, got %d", c.Score.K)
	}
	d := c.Density
	if !d.Mode.valid() {
		add("density.mode", "must be independent, rollup, restricted or averaging, got %q", d.Mode)
	}
	if !(d.Eta > 0 && d.Eta <= 1) {
		add("density.eta", "must be in (0, 1], got %g", d.Eta)
	}
	if !(d.Delta > 0 && d.Delta <= 1) {
		add("density.delta", "must be in (0, 1], got %g", d.Delta)
	}
	if d.Samples < 1 || d.Samples > density.MaxSamples {
		add("density.samples", "must be in [1, %d], got %d", density.MaxSamples, d.Samples)
	}
	if d.Clusters < 1 || boundOK && d.Clusters > c.MinRecords {
		add("density.clusters", "must be in [1, min_records=%d], got %d", c.MinRecords, d.Clusters)
	}
	if d.Iterations < 1 || d.Iterations > microcluster.MaxIterations {
		add("density.iterations", "must be in [1, %d], got %d", microcluster.MaxIterations, d.Iterations)
	}
	k := c.Distance
	if k.K < 1 || boundOK && k.K >= c.MinRecords {
		add("distance.k", "must be in [1, min_records=%d), got %d", c.MinRecords, k.K)
	}
	if k.N < 1 || boundOK && k.N > c.MinRecords {
		add("distance.n", "must be in [1, min_records=%d], got %d", c.MinRecords, k.N)
	}
	if k.M < 1 {
		add("distance.m", "must be >= 1, got %d", k.M)
	}
	if c.Snapshots < 1 {
		add("snapshots", "must be >= 1, got %d", c.Snapshots)
	}
	if p := c.Proclus; p.Enabled || p.K != 0 || p.L != 0 || p.Restarts != 0 {
		if p.K < 1 || boundOK && p.K > c.MinRecords {
			add("proclus.k", "must be in [1, min_records=%d], got %d", c.MinRecords, p.K)
		}
		if p.L < 1 {
			add("proclus.l", "must be >= 1, got %d", p.L)
		}
		if p.Restarts < 1 || p.Restarts > proclus.MaxRestarts {
			add("proclus.restarts", "must be in [1, %d], got %d", proclus.MaxRestarts, p.Restarts)
		}
	}
	if h := c.Hypercube; h.Enabled || h.Bins != 0 || h.MaxNeighbours != 0 {
		if h.Bins < 2 || h.Bins > hypercube.MaxBins {
			add("hypercube.bins", "must be in [2, %d], got %d", hypercube.MaxBins, h.Bins)
		}
		if h.MaxNeighbours < 1 {
			add("hypercube.max_neighbours", "must be >= 1 (the record itself is counted), got %d", h.MaxNeighbours)
		}
	}
	if c.StateDir != "" {
		if err := checkStateDir(c.StateDir); err != nil {
			add("state_dir", "%w", err)
		}
	}
	return errors.Join(errs...)
}

// Refresh is the number of new records after which the whole model is rebuilt.
func (c *Config) Refresh() int { return c.RefreshRecords }

// clearScore is the combined score a flagged series' next record must reach to stay flagged
// (flag_clear x min_score), +Inf when flag_clear is off or flags are not by significance.
func (c *Config) clearScore() float64 {
	if c.FlagClear <= 0 || c.FlagBy != FlagBySignificance {
		return math.Inf(1)
	}
	return float64(c.FlagClear * c.MinScore)
}

// RecentBlocks is how many block maxima of recent_scores records cover recent_horizon (rounded
// up; 0 when either is 0: no horizon).
func (c *Config) RecentBlocks() int {
	if c.RecentScores <= 0 || c.RecentHorizon <= 0 {
		return 0
	}
	return (c.RecentHorizon + c.RecentScores - 1) / c.RecentScores
}

// Recalibrate is the number of new records after which the model's ranking part is rebuilt,
// for a window now holding held records: recalibrate_records, or when it is 0 a quarter of the
// records the window holds, at most a tenth of the window. A quarter of what it holds: while
// the window fills, a model built from its first min_records records would otherwise score a
// stream many times longer than itself before the first recalibration (a series of a few
// thousand records at the default W = 50,000: never). At most a tenth of the window: the
// fastest level the model follows is about one margin (past the reference's edge, under
// min_score) per recalibration, and a quarter of a full window was too slow for real sensors
// (docs/bench/notes/cadence21.md); faster still (a twentieth, or a tenth while the window
// fills) added false flags on the generated spike streams (§12.43).
func (c *Config) Recalibrate(held int) int {
	if c.RecalibrateRecords > 0 {
		return c.RecalibrateRecords
	}
	return max(1, min(min(c.Window, held)/4, c.Window/10))
}

// Rebuild is how many of a key's records come between its model's rebuilds
// (keys.rebuild_records, or a quarter of keys.window).
func (kc KeysConfig) Rebuild() int {
	if kc.RebuildRecords > 0 {
		return kc.RebuildRecords
	}
	return max(1, kc.Window/4)
}

// ValidateFeatures reports what this configuration cannot do with a stream of the given
// features (the pipeline's ingest.features): exhaustive roll-up tests all 2^r - 1 subspaces of
// r features, and density.Model refuses it above density.MaxRollupDims at the first batch
// scored; keys.max_bytes must hold one key (keysFit). Checked here, with the other keys, so
// that lint, the start and a reload refuse it.
func (c *Config) ValidateFeatures(features int) error {
	if c.Proclus.Enabled && c.Proclus.L > features {
		return config.Fieldf("detect.proclus.l", "must be <= the %d features, got %d", features, c.Proclus.L)
	}
	if c.Hypercube.Enabled && features > hypercube.MaxDims {
		return config.Fieldf("detect.hypercube.enabled", "the hypercube grid takes at most %d features, ingest.features has %d", hypercube.MaxDims, features)
	}
	if c.Density.Mode == DensityRollup && features > density.MaxRollupDims {
		return config.Fieldf("detect.density.mode", "rollup tests all 2^r - 1 subspaces of the r features and accepts at most r = %d, but ingest.features has %d (use independent, restricted or averaging)",
			density.MaxRollupDims, features)
	}
	return c.keysFit(features)
}

// checkStateDir makes sure snapshots can be written to dir: it is a directory (or can be
// created: its nearest existing ancestor is one) and a file can be created in it. Without this a
// directory that is not writable is found only when the first model is saved, and every later
// snapshot fails too. The probe file is removed at once.
func checkStateDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return fmt.Errorf("%q is not a directory", dir)
	case err == nil:
		f, err := os.CreateTemp(dir, ".outlierd-probe-*")
		if err != nil {
			return fmt.Errorf("%q is not writable: %w", dir, err)
		}
		name := f.Name()
		f.Close()
		return os.Remove(name)
	case !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		return err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if parent == dir {
		return fmt.Errorf("%q does not exist", dir)
	}
	if err := checkStateDir(parent); err != nil {
		return fmt.Errorf("%q cannot be created: %w", dir, err)
	}
	return nil
}
