package main

import (
	"flag"
	"fmt"
	"strings"
)

// help is what `outlierd CMD -h` (and `outlierd help CMD`) prints above the flags: the usage
// line's arguments and what the command does. Every command prints the same layout:
//
//	Usage: outlierd CMD ARGS
//
//	ABOUT
//
//	Flags:
//	  -flag ...
type help struct{ args, about string }

// helps is keyed by command name; TestEveryCommandHelp holds every command of the table to it.
var helps = map[string]help{
	"gen": {"--kind KIND --rows N [flags] > FILE.csv",
		`Writes a synthetic data set as CSV (header row) to stdout: g2d (N(0, I), any --dims), g3d
(three 3-D Gaussians), one and three (uncertain data of the density-sampling paper: features,
their "<feature>_sd" uncertainty columns and a label column), machines (temp, pressure,
humidity, vibration of machines in three operating modes, with injected spikes in the label
column: the README's sample data/sensors.csv) and sensors (a labelled sensor stream in time
order: correlated sensors, spikes, level shifts, stuck values, drift, daily seasonality, a
fleet of keys with their own baselines; docs/bench/README.md).`},
	"topn": {"--input FILE.csv [flags]",
		`Exact top-n distance-based outliers of a CSV file: the n rows with the largest weight (the
sum of the distances to their k nearest neighbours), by SolvingSet or the nested-loop oracle,
and optionally the prediction model (--model-out). With --label-column, precision@n and ROC
AUC against the labels (ROC AUC needs every row's exact weight: a second pass, O(rows^2)).`},
	"predict": {"--model FILE --input FILE.csv [flags]",
		`Scores a CSV file against a saved solving-set model (topn --model-out): w_k(q, S) per row,
flagged when >= w* (never misses an exact top-n outlier).`},
	"density": {"--input FILE.csv [flags]",
		`Outliers in uncertain data (Matsumoto, Hung, Yiu): micro-clusters and the eta-probability
in four modes, at record or cluster granularity. Columns named <feature>_sd are that
feature's uncertainty.`},
	"hypercube": {"--input FILE.csv [flags]",
		`Hypercube (grid) neighbourhood density scores (GDBOD): score = 1 - w/w_max per row, with
ROC AUC and average precision against --label-column.`},
	"proclus": {"--input FILE.csv --k K --l L [flags]",
		`Projected clustering (PROCLUS): k clusters, each in its own subspace of about l features,
and the rows off every cluster (outliers, cluster -1). PROCLUS is a randomised local search:
the best (lowest full cost) of --restarts runs is kept, each from a seed derived from --seed.`},
	"replay": {"--input FILE [--format csv|json|logfmt] [--config FILE] [flags]",
		`Feeds a file through the ingest decoding and the detect stage exactly as the pipeline does
(the same decoders, derived features, window, hold before the first model, rebuild cadence,
thresholds and combine rule), in file order, without Kafka. Each line is one message: CSV (a
header line first), JSON lines or logfmt, read with the config's ingest section (features,
uncertainty, key_field, event_time_field, event_time_zone, derive); without ingest.features a CSV file's columns
are the features. Rows go in batches of ingest.batch_size (the config's, default 1000) built
with the ingest stage's Arrow schema; with --pace event-time as a live pipeline forms them from
rows arriving at their times (closed at batch_size rows or ingest.max_wait after the first: a
slow sensor's rows one a batch, its model recalibrating between them). Differences from a live pipeline, so that a replay is
reproducible: models are rebuilt by record count only (detect.refresh_interval, a wall-clock
trigger, is not used), a model whose build a batch started serves from the next batch on (live,
it serves once the build finishes), and a malformed line stops the replay with its file:line
(live, a dead letter). Where the window (--window, or the config's) holds every row of the
file, one model of the whole file scores every row: the batch case (min_records is then the
file's rows). But a detect.min_records the config writes is kept, as live: the first model is
built of that many rows and the rest replay as a stream (stderr says so; --min-records ROWS
gives the batch case); --window below it caps it. --window and --min-records act as if the
config wrote them: the density.clusters, distance.k and n and proclus.k it leaves out follow
them as in a config of that window; those it writes are capped by min_records (stderr names a
value it lowers); under before_model: hold a file of one
row, or of fewer rows than min_records, is refused with its count; under pass its rows go out
unscored. With a key column (--key-column, or ingest.key_field under detect.key_by: key) every
key gets a model of its own, and the output counts the keys and the rows each kind of model
scored: a key's first detect.keys.min_records rows (30) are scored by the global model (its
cold start), and none before the global model's first (detect.min_records rows; under
before_model: pass the rows before it go out unscored and do not count toward a key's model).
docs/OPERATIONS.md explains every field of --json ("Choosing the flag on your own history";
its keys part: "Models per key", Backtest).`},
	"lint": {"--config FILE",
		`Validates a pipeline config without running anything: the YAML strictly (an unknown or
misspelt key is an error), every value, and what the stages need of each other (e.g.
detect.density.mode: rollup accepts at most 20 features). Every problem is printed, one per
line, as file:line:column: key: message (an unknown key: "file:line:column: unknown key
` + "`windw`" + ` in detect.keys; did you mean ` + "`window`" + `?"; a key left out of a section the file does
not have: "file: sink.topic: required"); the exit status is 0 when the file is valid, 1 when
not. outlierd run refuses the same files at start, and a reload refuses them while running. A
key that has no effect, or that a broker of the default settings refuses, is a warning in the
same form, "key: warning: ...", the status still 0 (ingest.event_time_zone other than UTC
without ingest.event_time_field; ingest.session_timeout outside 6s to 30m; a detect.keys.*
value other than its default under key_by: none; run.model_topic under run.role all,
run.stale_model_after but on a scorer, run.key_publish_interval but on a builder).`},
	"run": {"--config FILE [--log-level LEVEL]",
		`Runs the streaming pipeline: reads ingest.topic through the consumer group, scores each record
against the model of the recent window, writes to sink.topic (and malformed records to
sink.dead_letter_topic), and commits offsets once every record below them is written.
SIGINT/SIGTERM stop gracefully (drain, flush, commit; a builder then publishes the models it
still holds) within run.shutdown_timeout; during the start they end its waits, exit status 0.
A second SIGINT/SIGTERM during the stop exits at once (status 130/143), logging what it leaves
undone (uncommitted batches are read again at the next start).
SIGHUP, or a change of the file's content, reloads the config live (a SIGHUP received during
the start, once the pipeline runs); a reload the running pipeline cannot apply is refused and logged, and the running
config keeps going. Logs are JSON lines on stderr (readable lines on a terminal).`},
	"demo": {"[--duration D] [flags]",
		`The main job on an embedded default: an in-process Kafka-protocol broker, a sensor stream
with injected anomalies, the pipeline (configs/demo.yaml) and a live summary with precision
and recall against the injected ground truth.`},
	"devices": {"",
		`Says where the GPU commands (topn, predict, density, hypercube, proclus, replay, run, demo) would run: the
GPU this binary opens, or why none (a CPU build hands those commands to its CUDA companion,
outlierd-cuda, when that one starts here). Exit status 1 when no GPU is usable.`},
	"topics": {"create --config FILE [--partitions N]",
		`Creates the topics a pipeline config names on its brokers: ingest.topic (--partitions, default
3), sink.topic and sink.dead_letter_topic (sink.create_partitions, 0: as many as the input
topic), and run.model_topic when set (cleanup.policy=compact; 1 partition, under
detect.key_by: key the input topic's partitions + 1), each with sink.create_replication_factor (0: the broker's default). A topic that exists is reported
("exists", with its partitions) and left as it is, so running it twice is harmless. The flags
may also stand before create (outlierd topics --partitions 6 create --config FILE).`},
	"produce": {"--config FILE --input FILE [--format csv|json|logfmt] [--key-column C] [--rate N/s]",
		`Sends a file's records to the config's ingest.topic (brokers and security from ingest), one
message per record, in the config's ingest.format: a CSV file (header row) becomes JSON objects
or logfmt lines named by its header (a column named by a dotted path the config reads,
sensor.temp, nested as the path reaches it: {"sensor": {"temp": ...}}), or CSV lines (without
the header) when ingest.format is csv; JSON lines (one object per line) and logfmt lines go as they are to a topic of their own
format. --key-column makes a column (field, key) the message key. A CSV header without a field
every record needs (a feature without an ingest.fill value, its uncertainty field without a
default, key_field, event_time_field) is warned of on stderr, naming them: the pipeline would
dead-letter every record; so is such a field that none of the first 100 JSON or logfmt records
has (a JSON key with a dot in it is no path's). A progress bar
shows on a terminal; the summary line says how many records went, and how fast. A line that
cannot be read stops it, exit status 1: the records before it went, none after it (the error
says how many); so does Ctrl-C (SIGINT, SIGTERM): "interrupted", with the records that went.`},
	"tail": {"--config FILE [--all] [--json] [--from-beginning] [--idle-exit D] [--max N]",
		`Prints the outliers the pipeline writes to the config's sink.topic (sink.format json), one line
each: id, key, score and the explanation, each id once (a producer retry or a restart can
write a record twice; the copies carry the same id). Scores written as "Infinity",
"-Infinity" or "NaN" (not finite) are understood. --all prints every output (sink.emit: all
writes inliers too), --json the output objects themselves, one per line. After the score, in
parentheses, what the record came to when not a plain alert: "inlier", "suppressed: alarm
cap" (over the threshold, held back by detect.alarm_rate; with --all), "folded into the alert
of T" (under sink.emit: all the flagged records that detect.alert_cooldown folds into its
key's open alert, of time T, are written too, and printed as outliers; "folded into the key's
open alert" when that alert had no time), "+N folded into the previous alert" (the key's
next alert). It reads new outputs until Ctrl-C, from the
beginning of the topic with --from-beginning, and stops after --idle-exit without a new output
(counted from its readers' first fetch: readers that have not connected within 30 s end it with
an error naming the topic; their failures are logged) or --max outputs; however it stops, stderr
says how many it printed and how many copies it skipped. A second Ctrl-C exits at once (130).`},
	"version": {"[--json]",
		`Prints the version (set at build time with -ldflags "-X main.version=v1.2.3", else the module
version or VCS revision Go recorded), the Go version, the build (cpu, or cuda for the binary
built with -tags cuda) and the platform. --json prints one object.`},
}

// printHelp writes name's help and fs's flags to fs's output.
func printHelp(fs *flag.FlagSet, name string) {
	w := fs.Output()
	h := helps[name]
	fmt.Fprintln(w, strings.TrimRight("Usage: outlierd "+name+" "+h.args, " "))
	if h.about != "" {
		fmt.Fprintln(w, "\n"+h.about)
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		fmt.Fprintln(w, "\nFlags: none")
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.PrintDefaults()
}
