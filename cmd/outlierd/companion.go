package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/accel"
)

// The CUDA companion. A release has two binaries: outlierd, the CPU build, which starts
// anywhere, and outlierd-cuda, built with -tags cuda, which cannot start at all without the
// NVIDIA driver (gorgonia.org/cu loads libcuda.so.1 and initialises it before main runs, and
// exits if that fails). So that `--device auto` takes the GPU whichever binary is run, the CPU
// build hands a command that can use a GPU over to the companion (execve, same arguments and
// environment) when the companion starts on this machine; otherwise it runs the command on the
// CPU and the device log line says why the GPU was not used.
//
// The companion is $OUTLIERD_CUDA_BINARY, or outlierd-cuda next to this executable. Whether it
// starts is probed by running `outlierd-cuda devices` (a fraction of a second: the driver's
// initialisation); its first error line becomes the reason. Nothing is handed over for
// `--device cpu`, for commands that use no device, or twice (OUTLIERD_HANDED_OFF).

const (
	companionEnv  = "OUTLIERD_CUDA_BINARY"
	handedOffEnv  = "OUTLIERD_HANDED_OFF"
	companionName = "outlierd-cuda"
	probeTimeout  = 60 * time.Second
)

// deviceCommands are the commands that can run on a GPU (each with a --device flag, and devices).
var deviceCommands = map[string]bool{"topn": true, "predict": true, "density": true, "hypercube": true, "proclus": true,
	"replay": true, "run": true, "demo": true, "devices": true}

// handOff execs the CUDA companion for args when this is the CPU build, the command can use a
// GPU, the device is not forced to cpu and the companion starts here. It returns only when it
// does not hand over (execve replaces the process), with the reason it did not when a GPU might
// have been wanted ("" otherwise), for the device log line (accel.Options.NoCompanion).
//
// A stop that comes during the probe (stopped: run's signals, caught from the process's start)
// ends it, and nothing is handed over: run then stops during its start (exit 0). (A signal in
// the microseconds between the last look and the execve is lost with the handlers; one during
// the companion's own start, before its mainWith catches them, takes the default action.)
func handOff(args []string, stopped context.Context) string {
	if cudaBuild || len(args) == 0 || !deviceCommands[args[0]] || os.Getenv(handedOffEnv) != "" {
		return ""
	}
	if deviceFlag(args[1:]) == "cpu" {
		return ""
	}
	path, err := companionPath()
	if err != nil {
		return err.Error()
	}
	err = probeCompanion(stopped, path)
	if stopped.Err() != nil {
		return "a stop came during the CUDA companion's probe: not handed over"
	}
	if err != nil {
		return err.Error()
	}
	env := append(os.Environ(), handedOffEnv+"=1")
	err = syscall.Exec(path, append([]string{path}, args...), env)
	return fmt.Sprintf("could not start %s: %v", path, err)
}

// deviceFlag is the value of --device (or -device) in a command's arguments, "" if absent.
func deviceFlag(args []string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "device" {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// companionPath finds the companion binary.
func companionPath() (string, error) {
	if p := os.Getenv(companionEnv); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", companionEnv, p, err)
		}
		return p, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("no CUDA companion: cannot locate this executable: %w", err)
	}
	p := filepath.Join(filepath.Dir(self), companionName)
	if err := executable(p); err != nil {
		return "", fmt.Errorf("no CUDA companion (%s: %w)", p, err)
	}
	return p, nil
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errors.New("not found")
		}
		return err
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}

// probeCompanion runs `companion devices`; an error carries the companion's first error line
// (for example the dynamic loader's "libcuda.so.1: cannot open shared object file").
func probeCompanion(stopped context.Context, path string) error {
	ctx, cancel := context.WithTimeout(stopped, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "devices")
	cmd.Env = append(os.Environ(), handedOffEnv+"=1")
	cmd.WaitDelay = time.Second // (a stop kills it: a child of its own keeping the output open is not waited for)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	line := firstLine(string(out))
	if line == "" {
		line = err.Error()
	}
	return fmt.Errorf("the CUDA companion %s cannot start here: %s", path, line)
}

func firstLine(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			return l
		}
	}
	return ""
}

// runDevices reports where the device-capable commands can run: the GPUs this binary opens, or
// why none. Exit status 0 when a GPU opens, 1 when none does (the CPU build, after a companion
// could not take over, reports why and exits 1).
func runDevices(args []string, stdout, stderr io.Writer, opt accel.Options) error {
	fs := newFlagSet("devices", stdout, stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ok, why := gpukern.Available()
	if !ok && opt.NoCompanion != "" {
		why = "built without CUDA; " + opt.NoCompanion
	}
	if !ok {
		fmt.Fprintf(stdout, "cpu: %s (no GPU: %s)\n", plural(runtime.NumCPU(), "core", "cores"), why)
		return errors.New("no usable GPU")
	}
	d, err := gpukern.Open(0)
	if err != nil {
		fmt.Fprintf(stdout, "cpu: %s (no GPU: %v)\n", plural(runtime.NumCPU(), "core", "cores"), err)
		return err
	}
	defer d.Close()
	fmt.Fprintf(stdout, "cuda: %s (%s)\n", d.Name(), why)
	return nil
}
