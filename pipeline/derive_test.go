package pipeline

import (
	"slices"
	"strings"
	"testing"
)

// TestDerivedDefaults: a file that sets only detect.window loads (min_records, and the keys it
// bounds, follow the window down), ingest.group_id has its default, and sink.brokers and
// sink.security are ingest's when the sink leaves them out; keys the file sets are kept.
func TestDerivedDefaults(t *testing.T) {
	const in = "ingest:\n  brokers: [\"k1:9092\", \"k2:9092\"]\n  topic: in\n  features: [a, b]\n  security:\n    sasl:\n      mechanism: scram-sha-256\n      username: u\n      password: p\n"
	const out = "sink:\n  topic: out\n  dead_letter_topic: dl\n"
	cfg, err := LoadConfigBytes("c.yaml", []byte(in+"detect:\n  window: 1000\n"+out))
	if err != nil {
		t.Fatalf("window alone refused: %v", err)
	}
	if cfg.Detect.MinRecords != 1000 || cfg.Ingest.GroupID != "outlierd" {
		t.Errorf("min_records %d (want 1000), group_id %q (want outlierd)", cfg.Detect.MinRecords, cfg.Ingest.GroupID)
	}
	if !slices.Equal(cfg.Sink.Brokers, cfg.Ingest.Brokers) || cfg.Sink.Security.SASL.Username != "u" {
		t.Errorf("sink brokers %v security %v, want ingest's %v %v", cfg.Sink.Brokers, cfg.Sink.Security, cfg.Ingest.Brokers, cfg.Ingest.Security)
	}

	cfg, err = LoadConfigBytes("c.yaml", []byte(in+"detect:\n  window: 100\n"+out))
	if err != nil {
		t.Fatalf("window 100 alone refused: %v", err)
	}
	if d := cfg.Detect; d.MinRecords != 100 || d.Density.Clusters != 100 || d.Distance.K != 50 || d.Distance.N != 50 {
		t.Errorf("window 100: min_records %d clusters %d k %d n %d, want 100 100 50 50", d.MinRecords, d.Density.Clusters, d.Distance.K, d.Distance.N)
	}
	cfg, err = LoadConfigBytes("c.yaml", []byte(in+"detect:\n  window: 60\n"+out))
	if err != nil {
		t.Fatalf("window 60 alone refused: %v", err)
	}
	if d := cfg.Detect; d.MinRecords != 60 || d.Density.Clusters != 60 || d.Distance.K != 50 || d.Distance.N != 50 {
		t.Errorf("window 60: min_records %d clusters %d k %d n %d", d.MinRecords, d.Density.Clusters, d.Distance.K, d.Distance.N)
	}

	// What the file sets is the file's: a written sink.brokers stays, and so does a
	// min_records the window cannot hold (an error, not a silent change).
	cfg, err = LoadConfigBytes("c.yaml", []byte(in+strings.Replace(out, "sink:\n", "sink:\n  brokers: [\"other:9092\"]\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Sink.Brokers, []string{"other:9092"}) || cfg.Sink.Security.Enabled() || cfg.Detect.MinRecords != 5000 {
		t.Errorf("sink brokers %v security %v min_records %d", cfg.Sink.Brokers, cfg.Sink.Security, cfg.Detect.MinRecords)
	}
	_, err = LoadConfigBytes("c.yaml", []byte(in+"detect:\n  window: 1000\n  min_records: 2000\n"+out))
	if err == nil || !strings.Contains(err.Error(), "c.yaml:12:3: detect.min_records: must be in [2, window=1000], got 2000") {
		t.Errorf("min_records above a written window: got %v", err)
	}
}

// TestYAMLMistakesInUserTerms: the mistakes of issue 23, each a line naming file:line:column,
// the key and what to write (the messages were yaml.v3's Go types before).
func TestYAMLMistakesInUserTerms(t *testing.T) {
	const in = "ingest:\n  topic: in\n  features: [a, b]\n" // lines 1-3
	const out = "sink:\n  topic: out\n  dead_letter_topic: dl\n"
	for _, tc := range []struct{ yaml, want string }{
		{in + "  batch_size: 50k\n" + out, "c.yaml:4:15: ingest.batch_size: expected a whole number, got `50k`: write 50000 (no unit suffixes)"},
		{in + "  batch_size: lots\n" + out, "c.yaml:4:15: ingest.batch_size: expected a whole number (such as 1000), got `lots`"},
		{in + "  max_wait: 100\n" + out, "c.yaml:4:13: ingest.max_wait: expected a duration, got `100`: write a duration such as 100ms, 30s or 5m"},
		{in + "  max_wait: soon\n" + out, "c.yaml:4:13: ingest.max_wait: expected a duration, got `soon`: write a duration such as 100ms, 30s or 5m"},
		{"ingest:\n  topic: in\n  features: temp\n" + out, "c.yaml:3:13: ingest.features: expected a list, got `temp`: write a list such as [temp]"},
		{in + "detect:\n  windw: 1000\n" + out, "c.yaml:5:3: unknown key `windw` in detect; did you mean `window`?"},
		{in + "detect:\n  density:\n    etta: 0.3\n" + out, "c.yaml:6:5: unknown key `etta` in detect.density; did you mean `eta`?"},
		{in + "detect:\n  alarm_rate: high\n" + out, "c.yaml:5:15: detect.alarm_rate: expected a number (such as 0.2 or 1e-3), got `high`"},
		{in + "detect:\n  hypercube:\n    enabled: sometimes\n" + out, "c.yaml:6:14: detect.hypercube.enabled: expected true or false, got `sometimes`"},
		{in + "detect:\n  seed: -1\n" + out, "c.yaml:5:9: detect.seed: expected a whole number >= 0, got `-1`"},
		{in + "  fill: 3\n" + out, "c.yaml:4:9: ingest.fill: expected a section of `name: value` lines indented below the key, got `3`"},
	} {
		_, err := LoadConfigBytes("c.yaml", []byte(tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("got  %v\nwant %s", err, tc.want)
		}
	}
}
