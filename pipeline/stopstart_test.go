package pipeline

import (
	"context"
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
			p, err := New(cfg, zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger())
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
