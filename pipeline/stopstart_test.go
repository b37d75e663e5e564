package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// TestStopDuringRoleStartRealBroker: a graceful stop that comes while a builder or a scorer
// still reads the model topic at its start (startRole, before Run's stages exist; here the
// stop came first) is a clean stop, as it is for role all: Run returns nil (exit status 0),
// promptly. The start's read ends with the soft stop, and Run returned that read's error
// (context canceled) as a failure.
func TestStopDuringRoleStartRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	for _, role := range []detect.Role{detect.RoleAll, detect.RoleScorer, detect.RoleBuilder} {
		t.Run(string(role), func(t *testing.T) {
			in, out, dlq, group, mt := roleTopics(t, br, 2)
			cfg := roleConfig(br, in, out, dlq, group, mt)
			cfg.Run.Role = role
			p, err := New(context.Background(), cfg, zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger())
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			stop() // the stop before the start's read is done
			t0 := time.Now()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run after a graceful stop during the start: %v, want nil (a clean stop)", err)
				}
			case <-time.After(cfg.Run.ShutdownTimeout + 10*time.Second):
				t.Fatal("Run did not return")
			}
			if d := time.Since(t0); d > 10*time.Second {
				t.Errorf("Run returned %v after the graceful stop", d.Round(time.Millisecond))
			}
		})
	}
}

// TestNewEndsWithContext: a stop during New (cmd/outlierd's SIGTERM context) ends its waits at
// once, and New says the start was stopped: for brokers that cannot be reached (the check
// waits up to topicCheckWait, 30 s) and for an input topic the brokers do not list (asked again
// for metadataSettle in case it was just created: cut, it must not be called missing). New
// waited on a context of its own.
func TestNewEndsWithContext(t *testing.T) {
	check := func(t *testing.T, cfg Config) {
		t.Helper()
		ctx, stop := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, stop)
		t0 := time.Now()
		p, err := New(ctx, cfg, zerolog.New(zerolog.NewTestWriter(t)))
		d := time.Since(t0)
		if p != nil {
			p.closeOpened(context.Background())
		}
		if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "the start was stopped") {
			t.Errorf("New stopped during its topic check: %v, want the start stopped (context canceled)", err)
		}
		if d > 1500*time.Millisecond {
			t.Errorf("New returned %v after its start, %v after the stop", d.Round(time.Millisecond), (d - 300*time.Millisecond).Round(time.Millisecond))
		}
	}
	t.Run("unreachable", func(t *testing.T) {
		br := testsupport.Broker{Addrs: []string{refusingAddr(t)}}
		cfg := roleConfig(br, "in", "out", "dlq", "g", "models")
		cfg.Run.Role = detect.RoleBuilder
		check(t, cfg)
	})
	t.Run("missing topic", func(t *testing.T) {
		br := testsupport.RealBroker(t)
		in, out, dlq, group, mt := roleTopics(t, br, 1)
		check(t, roleConfig(br, in+"-missing", out, dlq, group, mt))
	})
}

// TestLeaveDeadBuildersEndsWithContext: a builder's removal of a dead predecessor, stopped,
// returns at once and warns of nothing (the start is stopping, no join follows).
func TestLeaveDeadBuildersEndsWithContext(t *testing.T) {
	cfg := roleConfig(testsupport.Broker{Addrs: []string{refusingAddr(t)}}, "in", "out", "dlq", "g", "models")
	ctx, stop := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, stop)
	var logs testsupport.LogBuffer
	t0 := time.Now()
	leaveDeadBuilders(ctx, cfg, zerolog.New(&logs))
	if d := time.Since(t0); d > 1500*time.Millisecond {
		t.Errorf("leaveDeadBuilders returned %v after its start, stopped at 300 ms", d.Round(time.Millisecond))
	}
	if s := logs.String(); s != "" {
		t.Errorf("leaveDeadBuilders stopped logged %q, want nothing", s)
	}
}
