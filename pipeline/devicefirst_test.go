package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestNewRefusesTheDeviceBeforeTheTopicCheck: `device: cuda` where no GPU can be used is refused
// at once, before the topic check. It was refused after it: with brokers that cannot be reached
// the start waited topicCheckWait (30 s) and then failed on the topics, never naming the device.
func TestNewRefusesTheDeviceBeforeTheTopicCheck(t *testing.T) {
	if ok, _ := gpukern.Available(); ok {
		t.Skip("a GPU is usable here: device cuda opens")
	}
	cfg := sensorConfig(testsupport.Broker{Addrs: []string{"127.0.0.1:1"}}, "in", "out", "dlq", "g-devicefirst", sink.EmitOutliers)
	cfg.Device = "cuda"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	p, err := New(ctx, cfg, zerolog.New(zerolog.NewTestWriter(t)))
	if p != nil || err == nil || !strings.Contains(err.Error(), "device cuda: no usable GPU") {
		t.Fatalf("New: %v, %v; want the device refused", p, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refused after %s: the unreachable brokers were waited for first", d)
	}
}
