package main

import (
	"strings"
	"testing"
)

// TestLintWarnsOfRoleKeysThatApplyToNothing: run.model_topic under run.role: all (one process
// builds and scores: nothing is published or read), run.stale_model_after on a role other than
// scorer and run.key_publish_interval on one other than builder passed lint without a word and
// did nothing (a user who set a model topic on role all expected models on it; topics create
// even made it). Each is now a warning at its position, as detect.keys.* under key_by: none is;
// the status stays 0.
func TestLintWarnsOfRoleKeysThatApplyToNothing(t *testing.T) {
	const base = "ingest:\n  brokers: [\"127.0.0.1:1\"]\n  topic: in\n  features: [a]\nsink:\n  topic: out\n  dead_letter_topic: dlq\n"
	path := writeFile(t, "all.yaml", base+"run:\n  model_topic: models\n  stale_model_after: 5m\n  key_publish_interval: 30s\n")
	out, errs, code := outlierd(t, "lint", "--config", path)
	for _, want := range []string{
		`all.yaml:9:3: run.model_topic: warning: "models" applies to nothing: run.role is all`,
		`all.yaml:10:3: run.stale_model_after: warning: 5m0s applies to nothing: run.role is all`,
		`all.yaml:11:3: run.key_publish_interval: warning: 30s applies to nothing: run.role is all`,
	} {
		if code != 0 || !strings.Contains(errs, want) || !strings.Contains(out, "ok") {
			t.Errorf("exit %d, stdout %q, stderr %q: want exit 0 and %q", code, out, errs, want)
		}
	}
	// In their roles, and at their defaults, nothing is said.
	for _, body := range []string{
		"run:\n  role: scorer\n  model_topic: models\n  stale_model_after: 5m\n",
		"run:\n  role: builder\n  model_topic: models\n  key_publish_interval: 30s\n",
		"run:\n  model_topic: \"\"\n  stale_model_after: 0s\n  key_publish_interval: 10s\n",
	} {
		path := writeFile(t, "ok.yaml", base+body)
		if _, errs, code := outlierd(t, "lint", "--config", path); code != 0 || strings.Contains(errs, "warning") {
			t.Errorf("%q: exit %d, stderr %q: want no warning", body, code, errs)
		}
	}
}
