package main

import (
	"path/filepath"
	"strings"
	"testing"
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
