package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/internal/core/kafkasec"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/pipeline/metrics"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
)

// runLint validates a pipeline config without running anything.
func runLint(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lint", stdout, stderr)
	path := fs.String("config", "", "pipeline YAML file (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usageError{fmt.Errorf("--config is required")}
	}
	cfg, err := pipeline.LoadConfig(*path)
	if err != nil {
		var ce *config.Error
		var ve *config.ValidationError
		if errors.As(err, &ce) || errors.As(err, &ve) {
			// The problems alone, one "file:line:column: key: message" a line, as the help says:
			// no command prefix on the first (a CI step greps them).
			fmt.Fprintln(stderr, err)
			return reportedError{err}
		}
		return err
	}
	if w := eventZoneWarning(*path, cfg.Ingest, "", "a record's time is its Kafka message timestamp, an instant"); w != "" {
		fmt.Fprintln(stderr, w) // a warning: the file is valid, and the exit status says so
	}
	if w := sessionTimeoutWarning(*path, cfg.Ingest.SessionTimeout); w != "" {
		fmt.Fprintln(stderr, w)
	}
	for _, w := range unusedKeysWarnings(*path, cfg.Detect) {
		fmt.Fprintln(stderr, w)
	}
	for _, w := range roleKeysWarnings(*path, cfg) {
		fmt.Fprintln(stderr, w)
	}
	for _, w := range plainPasswordWarnings(*path, cfg) {
		fmt.Fprintln(stderr, w)
	}
	for _, w := range warmingKeyModelWarnings(*path, cfg) {
		fmt.Fprintln(stderr, w)
	}
	fmt.Fprintf(stdout, "%s: ok\n", *path)
	return nil
}

// eventZoneWarning is lint's and replay's warning for an ingest.event_time_zone that no record
// is read in, at the key's file:line:column: the zone applies only to the times of
// ingest.event_time_field (or replay's --timestamp-column, timeCol, which stands for it), and
// without one it is ignored silently. UTC is the default (the reference config writes it):
// no warning. instead is where a record's time comes from then; "" when there is nothing to say.
func eventZoneWarning(path string, ic ingest.Config, timeCol, instead string) string {
	if ic.EventTimeField != "" || timeCol != "" || ic.EventTimeZone == "" || ic.EventTimeZone == "UTC" {
		return ""
	}
	return config.Locate(path, config.Fieldf("ingest.event_time_zone",
		"warning: %q applies to no record: without ingest.event_time_field %s (the zone of derive's time_of_day and day_of_week is ingest.derive.timezone)",
		ic.EventTimeZone, instead)).Error()
}

// plainPasswordWarnings are lint's warnings, at each section's tls.insecure_skip_verify, for
// SASL/PLAIN to a broker whose certificate is not checked: PLAIN sends the password itself, and
// an unverified TLS peer may be anyone on the path, so a man in the middle reads it (SCRAM never
// sends it). Valid for a throw-away test broker, which is what the key is for: a warning.
func plainPasswordWarnings(path string, cfg pipeline.Config) []string {
	var out []string
	for _, s := range []struct {
		key string
		sec kafkasec.Config
	}{{"ingest.security.", cfg.Ingest.Security}, {"sink.security.", cfg.Sink.Security}} {
		if s.key == "sink.security." && reflect.DeepEqual(s.sec, cfg.Ingest.Security) {
			continue // (the sink's section left out takes the input's: warned there once)
		}
		if s.sec.TLS.Enabled && s.sec.TLS.InsecureSkipVerify && strings.EqualFold(s.sec.SASL.Mechanism, kafkasec.MechanismPlain) {
			out = append(out, config.Locate(path, config.Fieldf(s.key+"tls.insecure_skip_verify",
				"warning: true with sasl.mechanism plain: the password goes to whichever server answers, its certificate unchecked, so a man in the middle reads it (use scram-sha-256/512, or verify the broker: tls.ca_file, tls.server_name)")).Error())
		}
	}
	return out
}

// warmingKeyModelWarnings are lint's warnings, at each rolling derived column's `last` (mean,
// std), when under detect.key_by: key that window is at least detect.keys.min_records. A key's
// records whose rolling column is still warming stay out of its builds, and its first model waits
// for min_records records that are not (keywarm27; before, every key's first model was built from
// its partial windows alone): so that first model, and every key's again after a restart, a
// rebalance or an eviction, holds min_records consecutive full windows, about min_records / last
// independent values of the column (at most one here), and its model of the column is that
// value's (docs/BENCHMARKS.md §12.62: a clean generated fleet with a std over 32 flagged 316-618
// of 40,000 at min_records 30, 183-247 at 64). robust_z warms too (derive28) but is not one: its z
// is each new value's against the previous ones, which move slowly, so a key's consecutive zs
// are about as independent as its values (a generated clean fleet with a robust_z over 32 at
// min_records 30 flagged 13-35 of 40,000, 9-22 without it: §12.71); it counts for the
// derive.max_keys warning (its evicted series warm again).
func warmingKeyModelWarnings(path string, cfg pipeline.Config) []string {
	if cfg.Detect.KeyBy == detect.KeyByNone || cfg.Ingest.Derive == nil {
		return nil
	}
	var out []string
	minRecords := cfg.Detect.Keys.MinRecords
	hasRolling := false
	for i, f := range cfg.Ingest.Derive.Features {
		rolling := f.Kind == ingest.DeriveMean || f.Kind == ingest.DeriveStd
		hasRolling = hasRolling || rolling || f.Kind == ingest.DeriveRobustZ // (warms: evicted, it warms again)
		if rolling && f.Last >= minRecords {
			out = append(out, config.Locate(path, config.Fieldf(fmt.Sprintf("ingest.derive.features[%d].last", i),
				"warning: %d values fill this window, at least detect.keys.min_records (%d): each key's first model (after a restart, a rebalance or an eviction too) is built from %d records of full windows, which share their values: about one independent value of this column, read as the key's normal; set detect.keys.min_records above %d (twice it cut a clean fleet's flags by 30-60 %%: docs/OPERATIONS.md, the derive section's warm-up)",
				f.Last, minRecords, minRecords, f.Last)).Error())
		}
	}
	if d := cfg.Ingest.Derive; hasRolling && d.MaxKeys < cfg.Detect.Keys.MaxKeys {
		out = append(out, config.Locate(path, config.Fieldf("ingest.derive.max_keys",
			"warning: %d series, fewer than detect.keys.max_keys (%d): past it the least recently seen key's rolling windows are dropped and fill again, warming, and a key's model is built only from records not warming, so with more keys active than this some keys never get a model (outlierd_keys_warming counts them); set it at least detect.keys.max_keys",
			d.MaxKeys, cfg.Detect.Keys.MaxKeys)).Error())
	}
	return out
}

// unusedKeysWarnings are lint's warnings, one per key at its file:line:column, for the
// detect.keys.* values other than their defaults under key_by: none, where no key has a model
// and they apply to nothing (a section left from an experiment, or key_by: key forgotten). Their
// values are still validated, as those of a disabled hypercube or proclus section are: an error
// there is one under key_by: key too. The defaults, as the reference config writes them, are no
// warning.
func unusedKeysWarnings(path string, d detect.Config) []string {
	if d.KeyBy != detect.KeyByNone {
		return nil
	}
	var out []string
	got, def := reflect.ValueOf(d.Keys), reflect.ValueOf(detect.Default().Keys)
	for i := range got.NumField() {
		name, _, _ := strings.Cut(got.Type().Field(i).Tag.Get("yaml"), ",")
		if name == "" || got.Field(i).Equal(def.Field(i)) {
			continue
		}
		out = append(out, config.Locate(path, config.Fieldf("detect.keys."+name,
			"warning: %v applies to no key: detect.key_by is none (set key_by: key for models per key, or remove it)", got.Field(i).Interface())).Error())
	}
	return out
}

// roleKeysWarnings are lint's warnings for the run.* keys of roles the file does not run, set
// other than their defaults: run.model_topic under role all (one process builds and scores:
// nothing is published or read; topics create still makes it), stale_model_after but on a
// scorer, key_publish_interval but on a builder. A file that all the roles share, its role from
// the environment, is linted in the role the environment gives.
func roleKeysWarnings(path string, cfg pipeline.Config) []string {
	def, r := pipeline.Default().Run, cfg.Run
	var out []string
	warn := func(key string, v any, roles string) {
		out = append(out, config.Locate(path, config.Fieldf("run."+key,
			"warning: %v applies to nothing: run.role is %s (it is read by %s)", v, r.Role, roles)).Error())
	}
	if r.ModelTopic != "" && r.Role == detect.RoleAll {
		warn("model_topic", strconv.Quote(r.ModelTopic), "a builder and its scorers")
	}
	if r.StaleModelAfter != def.StaleModelAfter && r.Role != detect.RoleScorer {
		warn("stale_model_after", r.StaleModelAfter, "a scorer")
	}
	if r.KeyPublishInterval != def.KeyPublishInterval && r.Role != detect.RoleBuilder {
		warn("key_publish_interval", r.KeyPublishInterval, "a builder, under detect.key_by: key")
	}
	return out
}

// A broker's default bounds of a group member's session timeout (group.min.session.timeout.ms,
// group.max.session.timeout.ms): outside them the join fails with "Invalid Session Timeout".
const (
	brokerMinSession = 6 * time.Second
	brokerMaxSession = 30 * time.Minute
)

// sessionTimeoutWarning is lint's warning for an ingest.session_timeout a broker of the default
// settings refuses (the pipeline then stops about 3 s after its start); a broker configured
// otherwise may take it, so it is not an error. "" inside the default range.
func sessionTimeoutWarning(path string, d time.Duration) string {
	var why string
	switch {
	case d < brokerMinSession:
		why = fmt.Sprintf("%s is below %s", d, brokerMinSession)
	case d > brokerMaxSession:
		why = fmt.Sprintf("%s is above %s", d, brokerMaxSession)
	default:
		return ""
	}
	return config.Locate(path, config.Fieldf("ingest.session_timeout",
		"warning: %s, a Kafka broker's default group.min/max.session.timeout.ms: such a broker refuses the group's join (\"Invalid Session Timeout\") and the pipeline stops at its start", why)).Error()
}

// runRun runs the pipeline until SIGINT/SIGTERM, then stops gracefully (drain, flush, commit).
// SIGHUP, or a change of the file's content (checked every second), reloads the config live
// (pipeline/reload.go says what applies at once, what rebuilds and what needs a restart).
func runRun(args []string, stdout, stderr io.Writer, opt accel.Options) error {
	// The signals are caught from run's first instruction, or before it, from the process's
	// start (mainWith: across the CUDA companion's probe): one that came while the config loads
	// or the listener opens took Go's default action (a SIGTERM killed the process, exit status
	// none; a SIGHUP, a reload, ended it). A stop ends the waits of the start below and exits 0,
	// as a stop during Run's start does; a SIGHUP received before the reloader runs reloads once
	// it does. (The start may take 30 s: the topic check.)
	sig := runSignals
	runSignals = nil // (this run's alone: released below, a later run in the process catches its own)
	if sig == nil {
		sig = catchRunSignals(stderr)
	}
	defer sig.release()
	ctx, hup := sig.ctx, sig.hup
	fs := newFlagSet("run", stdout, stderr)
	path := fs.String("config", "", "pipeline YAML file (required)")
	level := fs.String("log-level", "", "least severe level logged: debug, info, warn or error (default: the config's run.log_level, itself info by default); debug adds the Kafka client's own messages")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usageError{fmt.Errorf("--config is required")}
	}
	if *level != "" {
		if _, err := pipeline.ParseLogLevel(*level); err != nil {
			return usageError{fmt.Errorf("--log-level: %w", err)}
		}
	}
	cfg, err := pipeline.LoadConfig(*path)
	if err != nil {
		return err
	}
	log, err := runLogger(stderr, *level, cfg)
	if err != nil {
		return err
	}
	sig.stop.setLog(log)
	noteCompanion(log, string(cfg.Device), opt)
	stopped := func(err error) bool {
		if ctx.Err() != nil {
			log.Info().Err(err).Msg("stopped during the start")
			return true
		}
		return false
	}
	if stopped(context.Cause(ctx)) { // (a stop during the load: nothing opened yet)
		return nil
	}
	// The HTTP listener serves before the pipeline starts: while New checks the topics (up to
	// 30 s for brokers that cannot be reached) /healthz answers (a liveness probe must not
	// restart a process that waits for a broker) and /readyz says what the check waits for. A
	// taken port fails here, before anything else.
	m := metrics.New()
	if cfg.HTTP.Enabled() {
		srv, err := metrics.Listen(cfg.HTTP.Listen, m, log)
		if err != nil {
			return err
		}
		log.Info().Str("addr", srv.Addr()).Str("live_view", "http://"+srv.Addr()+"/").Msg("serving the live view at /, /metrics, /healthz and /readyz")
		defer shutdownHTTP(srv, log)
	}
	p, err := pipeline.NewWithMetrics(ctx, cfg, log, m) // (a stop ends its waits: the topic check, up to 30 s)
	if err != nil {
		if stopped(err) {
			return nil
		}
		return err
	}
	go pipeline.NewReloader(p, *path, log).WatchSignals(ctx, time.Second, hup)
	err = p.Run(ctx)
	st := p.Stats()
	log.Info().Int64("records", st.RecordsOut.Load()).Int64("flagged", st.Flagged.Load()).
		Int64("dead_letters", st.DeadLetters.Load()).Msg("pipeline stopped")
	return err
}

// runSignals are run's signals when mainWith caught them before the companion's hand-over (nil:
// runRun catches them itself, first thing). runRun takes them (nil again): it releases them
// at its end.
var runSignals *caughtSignals

// caughtSignals are run's stop signals (ctx ends at SIGINT or SIGTERM; a second one exits at
// once, stopSignals) and its reload signal (hup: SIGHUP, pipeline.ReloadSignals), caught from
// catchRunSignals on.
type caughtSignals struct {
	ctx     context.Context
	hup     <-chan os.Signal
	stop    *stopSignals
	release func()
}

// catchRunSignals catches run's signals, logging to stderr until runRun names its logger.
func catchRunSignals(stderr io.Writer) *caughtSignals {
	st := catchStop(newLogger(stderr), runStopping, runUnfinished)
	hup, stopHup := pipeline.ReloadSignals()
	return &caughtSignals{ctx: st.ctx, hup: hup, stop: st, release: func() { stopHup(); st.release() }}
}

// run's messages at a first and a second stop signal (stopSignals).
const (
	runStopping = "stopping: draining, committing, publishing and saving, within run.shutdown_timeout; " +
		"a second SIGINT or SIGTERM exits at once without finishing"
	runUnfinished = "the batches in flight are not written and their offsets not committed (read and written again " +
		"at the next start), a builder's models not yet published are lost, the keys' and alarm state are not saved " +
		"(the last complete save stands)"
)

// stopped is the context a stop ends (never ending without caught signals: a command other than
// run).
func (c *caughtSignals) stopped() context.Context {
	if c == nil {
		return context.Background()
	}
	return c.ctx
}

// runLogger is the pipeline's logger at the level of --log-level (override, when given) or else of
// run.log_level. Below info it passes the Kafka client's debug messages (stages/ingest routes
// kafka-go's Logger to debug and its ErrorLogger to warn), which are most of a debug log.
func runLogger(stderr io.Writer, override string, cfg pipeline.Config) (zerolog.Logger, error) {
	name := string(cfg.Run.LogLevel)
	if override != "" {
		name = override
	}
	lv, err := pipeline.ParseLogLevel(name)
	if err != nil {
		if override != "" {
			return zerolog.Nop(), usageError{fmt.Errorf("--log-level: %w", err)}
		}
		return zerolog.Nop(), fmt.Errorf("run.log_level: %w", err)
	}
	return newLogger(stderr).Level(lv), nil
}

// shutdownHTTP stops the metrics listener, giving scrapes in flight a few seconds.
func shutdownHTTP(srv *metrics.Server, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("metrics listener shutdown")
	}
}
