package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// stopSignals catches SIGINT and SIGTERM for a long-running command (run, demo, produce, tail).
// The first ends ctx: the command's graceful stop. A second one, while that stop runs, exits the
// process at once, with status 128 + the signal's number (130 for SIGINT, 143 for SIGTERM, what
// a shell reports for a death by that signal; not 0, so systemd's Restart=on-failure and a
// script see a stop that did not finish), after one log line saying what the unfinished stop
// leaves undone (lost). It is the convention of Ctrl-C twice; a supervisor that sends one
// SIGTERM and then SIGKILL (systemd, Kubernetes) never meets it. The first signal is logged
// too when first is set (run: the stop may take run.shutdown_timeout, the log says how to cut it).
type stopSignals struct {
	ctx     context.Context
	release func() // stops the catching (and ends ctx): the signals' default action again
	log     atomic.Pointer[zerolog.Logger]
}

// exitNow is the second signal's exit (os.Exit).
var exitNow = os.Exit

// sameDelivery is how soon after the first a repeat of the same signal is taken as the same
// delivery, not a second request: timeout(1) (without --foreground) sends its signal to the
// command and then to its own process group, which holds the command, so `timeout 60 outlierd
// run` got SIGTERM twice, microseconds apart, and took the hard stop in 10 of 16 runs, 8 at
// a time on 2 cores (operator29: "second signal during the stop", batches unwritten, status
// 143). A person's second Ctrl-C, and a key held down (its repeat starts after about 250 ms),
// come later. A var for the test, which widens it: the shared machine can delay a signal's
// goroutine.
var sameDelivery = 100 * time.Millisecond

// catchStop catches SIGINT and SIGTERM from now on (stopSignals). log is where the lines go until
// setLog names the command's own logger; first is the first signal's message ("": none); lost is
// what a second one leaves undone, for its message.
func catchStop(log zerolog.Logger, first, lost string) *stopSignals {
	ctx, cancel := context.WithCancel(context.Background())
	c := make(chan os.Signal, 2)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	s := &stopSignals{ctx: ctx}
	s.setLog(log)
	go func() {
		stopping := false
		var firstSig os.Signal
		var firstAt time.Time
		for {
			select {
			case <-done:
				return
			case sig := <-c:
				l := s.log.Load()
				if !stopping {
					stopping, firstSig, firstAt = true, sig, time.Now()
					if first != "" {
						l.Info().Str("signal", sig.String()).Msg(first)
					}
					cancel()
					continue
				}
				if sig == firstSig && time.Since(firstAt) < sameDelivery {
					if first == "" { // (produce, tail: their first signal says nothing either)
						continue
					}
					l.Info().Str("signal", sig.String()).Msg("the same signal again at once (a process group's copy, as timeout(1) sends): taken as the first; the stop goes on")
					continue
				}
				code := 128
				if n, ok := sig.(syscall.Signal); ok {
					code += int(n)
				}
				l.Error().Str("signal", sig.String()).Int("exit_status", code).
					Msg("second signal during the stop: exiting at once, the stop unfinished: " + lost)
				exitNow(code)
			}
		}
	}()
	s.release = sync.OnceFunc(func() {
		signal.Stop(c)
		close(done)
		cancel()
	})
	return s
}

// setLog sends the signals' log lines to log from now on.
func (s *stopSignals) setLog(log zerolog.Logger) { s.log.Store(&log) }

// plainLog is a logger for a command whose stderr is plain text (produce, tail): its lines
// read "outlierd CMD: message (field=value ...)".
func plainLog(stderr io.Writer, cmd string) zerolog.Logger {
	return zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true, PartsOrder: []string{zerolog.MessageFieldName},
		FormatMessage: func(i any) string { s, _ := i.(string); return "outlierd " + cmd + ": " + s }})
}
