package pipeline

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/pipeline/metrics"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/sink"
)

type closeCountedSource struct {
	Source
	n *atomic.Int32
}

func (c closeCountedSource) Close() error { c.n.Add(1); return c.Source.Close() }

type closeCountedSink struct {
	Sink
	n *atomic.Int32
}

func (c closeCountedSink) Close() error { c.n.Add(1); return c.Sink.Close() }

type closeCountedStage struct {
	Stage
	n *atomic.Int32
}

func (c closeCountedStage) CloseContext(ctx context.Context) { c.n.Add(1); c.Stage.CloseContext(ctx) }

// TestNewClosesWhatItOpenedWhenTheLagPollerFails (kfake): when New fails at its last step (the
// lag poller), everything it opened before is closed once: the source, the sink, the detect
// stage (by a deadline: shutdown_timeout) and the role's clients (a builder's model publisher
// and model-topic reader). Before,
// that path closed only the source and the sink: the stage (on a GPU its keys' device slots),
// the device and the role's writers and reader were left open.
func TestNewClosesWhatItOpenedWhenTheLagPollerFails(t *testing.T) {
	br := testsupport.KfakeBroker(t, kfake.SeedTopics(3, "in", "out", "dlq"))
	createCompactedTopic(t, br, "models", 1)
	cfg := sensorConfig(br, "in", "out", "dlq", "g-newclose", sink.EmitOutliers)
	cfg.Run.Role, cfg.Run.ModelTopic = detect.RoleBuilder, "models"
	if !cfg.HTTP.Enabled() {
		t.Fatal("the default config has no HTTP listener: New makes no lag poller")
	}
	var src, snk, stage atomic.Int32
	var closedBy atomic.Int64
	var opened *Pipeline
	refused := errors.New("lag poller refused (test)")
	defer func(orig func(*Pipeline) (*metrics.LagPoller, error)) { openLagPoller = orig }(openLagPoller)
	openLagPoller = func(p *Pipeline) (*metrics.LagPoller, error) {
		opened = p
		p.src = closeCountedSource{p.src, &src}
		p.snk = closeCountedSink{p.snk, &snk}
		p.stage = deadlineStage{closeCountedStage{p.stage, &stage}, &closedBy}
		return nil, refused
	}
	p, err := New(context.Background(), cfg, zerolog.New(zerolog.NewTestWriter(t)))
	if !errors.Is(err, refused) || p != nil {
		t.Fatalf("New: %v, %v; want the lag poller's error", p, err)
	}
	if opened == nil || opened.pub == nil || opened.follow == nil {
		t.Fatal("New failed before the lag poller, or opened no role clients")
	}
	if src.Load() != 1 || snk.Load() != 1 || stage.Load() != 1 {
		t.Errorf("closed the source %d, the sink %d, the stage %d times; want each once", src.Load(), snk.Load(), stage.Load())
	}
	if closedBy.Load() <= 0 { // (its state's save ends by it)
		t.Error("the stage was closed without a deadline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := opened.pub.w.WriteMessages(ctx); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("the model publisher's writer after New failed: %v, want it closed (io.ErrClosedPipe)", err)
	}
	if err := opened.pub.tw.WriteMessages(ctx); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("the model publisher's second writer after New failed: %v, want it closed (io.ErrClosedPipe)", err)
	}
	if _, err := opened.follow.r.ReadMessage(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("the model topic's reader after New failed: %v, want it closed (io.EOF)", err)
	}
	if !strings.Contains(err.Error(), "pipeline: metrics: ") {
		t.Errorf("New: %v, want it to say where", err)
	}
}

// deadlineStage records the deadline its CloseContext was given (zero: none).
type deadlineStage struct {
	Stage
	at *atomic.Int64 // UnixNano; -1: no deadline
}

func (d deadlineStage) CloseContext(ctx context.Context) {
	if t, ok := ctx.Deadline(); ok {
		d.at.Store(t.UnixNano())
	} else {
		d.at.Store(-1)
	}
	d.Stage.CloseContext(ctx)
}

// TestStopDuringRoleStartClosesByTheDeadline (kfake): a stop during a role's start closed the
// stage without a deadline (context.Background()): its save of the keys' and alarm state, which
// ends with CloseContext's context (about 1.3 GB at 100,000 keys), had none. It is given the
// stop's, as at Run's end: shutdown_timeout after the soft stop.
func TestStopDuringRoleStartClosesByTheDeadline(t *testing.T) {
	br := testsupport.KfakeBroker(t, kfake.SeedTopics(3, "in", "out", "dlq"))
	createCompactedTopic(t, br, "models", 1)
	cfg := sensorConfig(br, "in", "out", "dlq", "g-stopstartclose", sink.EmitOutliers)
	cfg.Run.Role, cfg.Run.ModelTopic = detect.RoleBuilder, "models"
	p, err := New(context.Background(), cfg, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	var at atomic.Int64
	p.stage = deadlineStage{p.stage, &at}
	ctx, stop := context.WithCancel(context.Background())
	stopped := time.Now()
	stop() // the stop before the role's start is done
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run after a stop during the start: %v, want nil", err)
	}
	switch a := at.Load(); {
	case a == 0:
		t.Fatal("the stage was not closed")
	case a < 0:
		t.Fatal("the stage was closed without a deadline")
	case time.Unix(0, a).After(stopped.Add(cfg.Run.ShutdownTimeout + time.Second)):
		t.Errorf("the stage's close had until %v, %v after the stop; want shutdown_timeout (%v) at most",
			time.Unix(0, a).Format(time.RFC3339Nano), time.Unix(0, a).Sub(stopped), cfg.Run.ShutdownTimeout)
	}
}
