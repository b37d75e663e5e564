package configs_test

import (
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/configs"
	"github.com/outlierd/outlierd/pipeline"
)

// TestShippedConfigsLint: every config shipped in configs/ must pass `outlierd lint`.
func TestShippedConfigsLint(t *testing.T) {
	names, err := fs.Glob(configs.FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 2 {
		t.Fatalf("expected pipeline.yaml and demo.yaml, found %v", names)
	}
	for _, n := range names {
		data, err := configs.FS.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pipeline.LoadConfigBytes("configs/"+n, data); err != nil {
			t.Errorf("%s does not lint: %v", n, err)
		}
	}
}

// TestReferenceListsEveryDefault: pipeline.yaml is the documented reference, so a default that
// changes in code must change there too (the reference and the defaults must decode equal).
func TestReferenceListsEveryDefault(t *testing.T) {
	data, err := configs.FS.ReadFile("pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pipeline.LoadConfigBytes("configs/pipeline.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	def := pipeline.Default()
	if cfg.Detect != def.Detect {
		t.Errorf("configs/pipeline.yaml detect section differs from detect.Default():\n yaml %+v\n code %+v", cfg.Detect, def.Detect)
	}
	if cfg.Run != def.Run {
		t.Errorf("configs/pipeline.yaml run section differs from the defaults:\n yaml %+v\n code %+v", cfg.Run, def.Run)
	}
	// The sink's too, less what the reference names (brokers, topics): its batch_timeout read
	// 2ms, the code's default 1ms.
	snk := cfg.Sink
	snk.Brokers, snk.Topic, snk.DeadLetterTopic = def.Sink.Brokers, def.Sink.Topic, def.Sink.DeadLetterTopic
	if !reflect.DeepEqual(snk, def.Sink) {
		t.Errorf("configs/pipeline.yaml sink section differs from sink.Default():\n yaml %+v\n code %+v", snk, def.Sink)
	}
	if !strings.Contains(string(data), "device: auto") {
		t.Error("pipeline.yaml does not show the device default")
	}
}
