package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A test that signals `outlierd run` (SIGHUP, SIGTERM) runs it in a child process, since the
// signal would reach the test binary itself: the test binary run again with only that test,
// which runChild makes run the arguments of childRunEnv (or childMainEnv) and exit with their
// status.

// childRunEnv holds the child's arguments to run, one a line (a path may hold spaces);
// childMainEnv the same, run through mainWith, as the process's main does (run's signals
// caught from its start, then the CUDA companion's hand-over).
const (
	childRunEnv  = "OUTLIERD_TEST_RUN_ARGS"
	childMainEnv = "OUTLIERD_TEST_MAIN_ARGS"
)

// runChild, first in a test that calls childCommand or childMainCommand: in the child, runs its
// arguments and exits with their status; in the test itself, does nothing.
func runChild() {
	if args := os.Getenv(childRunEnv); args != "" {
		os.Exit(run(strings.Split(args, "\n"), os.Stdout, os.Stderr))
	}
	if args := os.Getenv(childMainEnv); args != "" {
		os.Exit(mainWith(strings.Split(args, "\n")))
	}
}

// childCommand is the command (not started) that runs `outlierd args` in a child process: this
// test binary with only t's test (a top-level one, which calls runChild first).
func childCommand(t *testing.T, args ...string) *exec.Cmd { return childWith(t, childRunEnv, args) }

// childMainCommand is childCommand through mainWith.
func childMainCommand(t *testing.T, args ...string) *exec.Cmd {
	return childWith(t, childMainEnv, args)
}

func childWith(t *testing.T, env string, args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$")
	cmd.Env = append(os.Environ(), env+"="+strings.Join(args, "\n"))
	return cmd
}
