package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/pipeline/metrics"
)

// runLint validates a pipeline config without running anything.
func runLint(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lint", stderr)
	path := fs.String("config", "", "pipeline YAML file (required)")
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
func runRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", stderr)
	path := fs.String("config", "", "pipeline YAML file (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usageError{fmt.Errorf("--config is required")}
	}
	cfg, err := pipeline.LoadConfig(*path)
	if err != nil {
		return err
	}
	log := newLogger(stderr)
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
		log.Info().Str("addr", srv.Addr()).Msg("serving /metrics, /healthz and /readyz")
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

// shutdownHTTP stops the metrics listener, giving scrapes in flight a few seconds.
func shutdownHTTP(srv *metrics.Server, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("metrics listener shutdown")
	}
}
