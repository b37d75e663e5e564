package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/pipeline"
)

// TestTopicsFlagsEitherSide: create's flags may come before the subcommand as well as after it:
// `outlierd topics --partitions 3 create --config FILE` was refused as an unknown subcommand
// "--partitions". create is topics' one subcommand, so a flag means the same on either side.
func TestTopicsFlagsEitherSide(t *testing.T) {
	// --partitions 0 is refused by create's own check, before any broker is asked: a flag that
	// reaches it was read as create's, wherever it stood.
	for _, args := range [][]string{
		{"topics", "--partitions", "0", "create", "--config", "x.yaml"},
		{"topics", "--config", "x.yaml", "--partitions", "0", "create"},
		{"topics", "create", "--config", "x.yaml", "--partitions", "0"},
	} {
		_, errs, code := outlierd(t, args...)
		if code != 2 || !strings.Contains(errs, "--partitions must be in [1, ") {
			t.Errorf("%v: exit %d, stderr %q: want create's refusal of --partitions 0", args, code, errs)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	if _, errs, code := outlierd(t, "topics", "--config", missing, "create"); code != 1 || !strings.Contains(errs, missing) {
		t.Errorf("--config before create: exit %d, stderr %q: want the config file's error", code, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"topics", "--partitions", "3"}, "no subcommand: the one subcommand is create"},
		{[]string{"topics", "make", "--config", "x.yaml"}, `unknown subcommand "make": the one subcommand is create`},
		{[]string{"topics", "create", "create"}, `unexpected argument "create"`},
	} {
		if out, errs, code := outlierd(t, c.args...); code != 2 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q: want %q", c.args, code, out, errs, c.want)
		}
	}
}

// TestTopicsCreateKeyedModelTopic: under detect.key_by: key the model topic is created with the
// input's partitions + 1 (partition 0 the global model's, one for each input partition's keys'
// models: pipeline/keyfollow.go), as topics' help and the README say; without key_by, one.
func TestTopicsCreateKeyedModelTopic(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	for _, c := range []struct {
		keyBy string
		want  int
	}{{"key", 4}, {"none", 1}} {
		models := testsupport.UniqueName("models")
		cfg := writeFile(t, "p.yaml", fmt.Sprintf("ingest:\n  brokers: [%q]\n  topic: %s\n  features: [temp]\n"+
			"detect:\n  key_by: %s\nsink:\n  topic: %s\n  dead_letter_topic: %s\nrun:\n  role: builder\n  model_topic: %s\nhttp:\n  listen: \"\"\n",
			br.Addrs[0], testsupport.UniqueName("in"), c.keyBy, testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), models))
		out, errs, code := outlierd(t, "topics", "create", "--config", cfg, "--partitions", "3", "--json")
		if code != 0 {
			t.Fatalf("key_by %s: exit %d: %s", c.keyBy, code, errs)
		}
		var res topicsOutput
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("key_by %s: %v: %s", c.keyBy, err, out)
		}
		i := slices.IndexFunc(res.Topics, func(tp pipeline.TopicResult) bool { return tp.Topic == models })
		if i < 0 || res.Topics[i].Partitions != c.want {
			t.Errorf("key_by %s: %+v: want the model topic with %d partitions", c.keyBy, res.Topics, c.want)
		}
	}
}
