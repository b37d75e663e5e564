package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/pipeline/metrics"
)

// lintHelp and runHelp are what `outlierd lint -h` and `outlierd run -h` print above the flags.
const (
	lintHelp = `Usage: outlierd lint --config FILE

Validates a pipeline config without running anything: the YAML strictly (an unknown or
misspelt key is an error), every value, and what the stages need of each other (e.g.
detect.density.mode: rollup accepts at most 20 features). Every problem is printed, one per line, as
file:line:column: key: message; the exit status is 0 when the file is valid, 1 when not.
outlierd run refuses the same files at start, and a reload refuses them while running.`
	runHelp = `Usage: outlierd run --config FILE [--log-level LEVEL]

Runs the streaming pipeline: reads ingest.topic through the consumer group, scores each record
against the model of the recent window, writes to sink.topic (and malformed records to
sink.dead_letter_topic), and commits offsets once every record below them is written.
SIGINT/SIGTERM stop gracefully (drain, flush, commit) within run.shutdown_timeout. SIGHUP, or a
change of the file's content, reloads the config live; a reload the running pipeline cannot
apply is refused and logged, and the running config keeps going. Logs are JSON lines on stderr
(readable lines on a terminal).`
)

// describe makes fs print help (what the command does) and then every flag with its usage.
func describe(fs *flag.FlagSet, help string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, help)
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
}

// runLint validates a pipeline config without running anything.
func runLint(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lint", stderr)
	path := fs.String("config", "", "pipeline YAML file (required)")
	describe(fs, lintHelp)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usageError{fmt.Errorf("--config is required")}
	}
	if _, err := pipeline.LoadConfig(*path); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: ok\n", *path)
	return nil
}

// runRun runs the pipeline until SIGINT/SIGTERM, then stops gracefully (drain, flush, commit).
// SIGHUP, or a change of the file's content (checked every second), reloads the config live
// (pipeline/reload.go says what applies at once, what rebuilds and what needs a restart).
func runRun(args []string, stdout, stderr io.Writer, opt accel.Options) error {
	fs := newFlagSet("run", stderr)
	path := fs.String("config", "", "pipeline YAML file (required)")
	level := fs.String("log-level", "", "least severe level logged: debug, info, warn or error (default: the config's run.log_level, itself info by default); debug adds the Kafka client's own messages")
	describe(fs, runHelp)
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
	noteCompanion(log, string(cfg.Device), opt)
	p, err := pipeline.New(cfg, log)
	if err != nil {
		return err
	}
	if cfg.HTTP.Enabled() {
		// A taken port fails here, before anything runs (the process then exits, which closes
		// the pipeline's idle connections).
		srv, err := metrics.Listen(cfg.HTTP.Listen, p.Metrics(), log)
		if err != nil {
			return err
		}
		log.Info().Str("addr", srv.Addr()).Str("live_view", "http://"+srv.Addr()+"/").Msg("serving the live view at /, /metrics, /healthz and /readyz")
		defer shutdownHTTP(srv, log)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go pipeline.NewReloader(p, *path, log).Watch(ctx, time.Second)
	err = p.Run(ctx)
	st := p.Stats()
	log.Info().Int64("records", st.RecordsOut.Load()).Int64("flagged", st.Flagged.Load()).
		Int64("dead_letters", st.DeadLetters.Load()).Msg("pipeline stopped")
	return err
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
