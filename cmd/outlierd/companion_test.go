package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/accel"
)

// TestCUDACompanionHandOff builds the CPU binary and puts a fake CUDA companion beside it (a
// shell script standing in for outlierd-cuda), then checks the hand-over rules of companion.go:
// a companion that starts takes device commands with the same arguments; one that cannot start
// (the dynamic loader's error for a missing driver) leaves the command on the CPU with the reason
// in the log, and makes --device cuda fail with it; --device cpu and commands without a device
// never start the companion.
func TestCUDACompanionHandOff(t *testing.T) {
	if cudaBuild {
		t.Skip("the CUDA build never hands over")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "outlierd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data.csv")
	genOut, err := exec.Command(bin, "gen", "--kind", "g2d", "--rows", "300", "--seed", "2").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, genOut, 0o644); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "companion-started")
	// companion writes a fake companion: every start leaves a marker; `devices` exits with
	// devicesExit after printing devicesMsg to stderr; any other command prints its arguments
	// and the hand-over variable.
	companion := func(path, devicesMsg string, devicesExit int) {
		script := "#!/bin/sh\necho started >> " + marker + "\n" +
			"if [ \"$1\" = devices ]; then echo '" + devicesMsg + "' >&2; exit " + strconv.Itoa(devicesExit) + "; fi\n" +
			"echo \"companion ran: $* handed_off=$OUTLIERD_HANDED_OFF\"\n"
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runBin := func(env []string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	started := func() bool {
		_, err := os.Stat(marker)
		os.Remove(marker)
		return err == nil
	}
	topn := []string{"topn", "--input", data, "--n", "3", "--k", "5", "--json"}

	// No companion: the CPU runs it, and the log says why there is no GPU.
	out, errs, code := runBin(nil, topn...)
	if code != 0 || !strings.Contains(out, `"device":"cpu"`) || !strings.Contains(errs, "no CUDA companion") {
		t.Fatalf("no companion: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}

	// A companion that starts takes the command, arguments unchanged.
	next := filepath.Join(dir, "outlierd-cuda")
	companion(next, "cuda: Fake GPU", 0)
	out, errs, code = runBin(nil, topn...)
	if code != 0 || out != "companion ran: "+strings.Join(topn, " ")+" handed_off=1\n" {
		t.Fatalf("working companion: exit %d\nstdout %q\nstderr %s", code, out, errs)
	}
	started()
	// ... but not with --device cpu, nor for a command without a device.
	for _, args := range [][]string{append(append([]string{}, topn...), "--device", "cpu"), append(append([]string{}, topn...), "--device=cpu"), {"gen", "--kind", "g2d", "--rows", "5"}} {
		out, errs, code = runBin(nil, args...)
		if code != 0 || strings.Contains(out, "companion ran") || started() {
			t.Fatalf("%v: the companion was started (exit %d, stdout %q, stderr %s)", args, code, out, errs)
		}
	}

	// A companion that cannot start (no driver on this machine): the CPU runs the command and
	// the log carries the loader's line; --device cuda fails with it.
	const loaderErr = "outlierd-cuda: error while loading shared libraries: libcuda.so.1: cannot open shared object file: No such file or directory"
	companion(next, loaderErr, 127) // the loader's exit status
	out, errs, code = runBin(nil, topn...)
	if code != 0 || !strings.Contains(out, `"device":"cpu"`) || !strings.Contains(errs, "libcuda.so.1") || !started() {
		t.Fatalf("failing companion, auto: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	out, errs, code = runBin(nil, append(append([]string{}, topn...), "--device", "cuda")...)
	if code == 0 || !strings.Contains(errs, "libcuda.so.1") || !strings.Contains(errs, "no usable GPU") {
		t.Fatalf("failing companion, cuda: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}

	started()

	// OUTLIERD_CUDA_BINARY names the companion explicitly; a wrong path is the reason given.
	other := filepath.Join(t.TempDir(), "my-cuda-build")
	companion(other, "cuda: Fake GPU", 0)
	// `devices` is itself handed over: the fake answers the probe, then the command (2 starts).
	out, errs, code = runBin([]string{companionEnv + "=" + other}, "devices")
	starts, _ := os.ReadFile(marker)
	if code != 0 || errs != "cuda: Fake GPU\n" || strings.Count(string(starts), "started") != 2 {
		t.Fatalf("devices via %s: exit %d, %d starts\nstdout %q\nstderr %s", companionEnv, code, strings.Count(string(starts), "started"), out, errs)
	}
	started()
	out, errs, code = runBin([]string{companionEnv + "=" + filepath.Join(dir, "missing")}, "devices")
	if code != 1 || !strings.Contains(out, "missing: not found") {
		t.Fatalf("missing %s: exit %d\nstdout %s\nstderr %s", companionEnv, code, out, errs)
	}
}

// TestEveryDeviceCommandIsHandedOff: every command with a --device flag can use a GPU, so the
// CPU build hands it over to the CUDA companion (README: "hands every command that can use a
// GPU over"); proclus (dev.Proclus) and replay (the detect stage's accelerator) were left out,
// so on a GPU host `proclus --device cuda` failed "built without CUDA" beside a working
// outlierd-cuda. The devices help lists them all too.
func TestEveryDeviceCommandIsHandedOff(t *testing.T) {
	devicesHelp, _, _ := outlierd(t, "help", "devices")
	for name := range commands(accel.Options{}) {
		help, _, _ := outlierd(t, "help", name)
		if !strings.Contains(help, "\n  -device ") {
			continue
		}
		if !deviceCommands[name] {
			t.Errorf("%s has --device but is not among deviceCommands (never handed to the companion)", name)
		}
		if !strings.Contains(devicesHelp, name) {
			t.Errorf("outlierd help devices does not name %s among the GPU commands", name)
		}
	}
}
