package accel

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// policyDevice is a Device that takes the GPU branch of every step (the GPU functions are the
// test's own; no kernel runs), logging into a buffer.
func policyDevice() (*Device, *bytes.Buffer) {
	var logged bytes.Buffer
	return &Device{gpu: &gpukern.Device{}, name: "cuda:test", log: zerolog.New(&logged)}, &logged
}

// TestFailureFallsBackAndRetries: a device failure gives the CPU's result, is counted, logged
// once per step (then every 1000th), and the next call tries the GPU again.
func TestFailureFallsBackAndRetries(t *testing.T) {
	d, logged := policyDevice()
	gpuCalls, cpuCalls := 0, 0
	lost := errors.New("device lost")
	for range 1000 {
		err := d.step("density", "", func() error { gpuCalls++; return lost }, func() error { cpuCalls++; return nil })
		if err != nil {
			t.Fatalf("the CPU's result (nil error) was not returned: %v", err)
		}
	}
	if gpuCalls != 1000 || cpuCalls != 1000 {
		t.Errorf("GPU tried %d times, CPU ran %d times; want the GPU retried at every call and the CPU after each failure", gpuCalls, cpuCalls)
	}
	if d.Fallbacks() != 1000 {
		t.Errorf("Fallbacks = %d, want 1000", d.Fallbacks())
	}
	lines := strings.Count(logged.String(), "\n")
	if lines != 2 || !strings.Contains(logged.String(), `"step":"density"`) || !strings.Contains(logged.String(), "device lost") ||
		!strings.Contains(logged.String(), `"failures":1000`) {
		t.Errorf("want the 1st and the 1000th failure logged, got %d lines: %s", lines, logged)
	}
	// The CPU's own error is the caller's.
	refused := errors.New("refused by the CPU")
	if err := d.step("density", "", func() error { return lost }, func() error { return refused }); err != refused {
		t.Errorf("got %v, want the CPU's error", err)
	}
}

// TestNotCoveredRunsOnTheCPU: a call beyond the kernels' limits never reaches the GPU, is not a
// failure, and is logged once per step.
func TestNotCoveredRunsOnTheCPU(t *testing.T) {
	d, logged := policyDevice()
	for range 3 {
		err := d.step("SolvingSet", "k=300 is above the GPU kernel's 256", func() error {
			t.Fatal("the GPU was tried for a call it does not cover")
			return nil
		}, func() error { return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	if d.Fallbacks() != 0 {
		t.Errorf("Fallbacks = %d, want 0 (not a device failure)", d.Fallbacks())
	}
	if n := strings.Count(logged.String(), "\n"); n != 1 || !strings.Contains(logged.String(), "k=300") {
		t.Errorf("want one info line, got %d: %s", n, logged)
	}
}

// TestSuccessAndCPU: a GPU success is the result (the CPU does not run); without a GPU the CPU
// runs, silently.
func TestSuccessAndCPU(t *testing.T) {
	d, logged := policyDevice()
	if err := d.step("x", "", func() error { return nil }, func() error { t.Fatal("CPU ran after a GPU success"); return nil }); err != nil {
		t.Fatal(err)
	}
	cpu := &Device{name: "cpu", log: zerolog.New(logged)}
	ran := false
	if err := cpu.step("x", "never covered", func() error { t.Fatal("GPU path on the CPU device"); return nil }, func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("CPU device: ran %v, err %v", ran, err)
	}
	if logged.Len() != 0 {
		t.Errorf("unexpected log: %s", logged)
	}
}

// TestOpen: the choices, and (in a build without a GPU) the companion's reason in cuda's error.
func TestOpen(t *testing.T) {
	if _, err := Open("gpu", zerolog.Nop(), Options{}); err == nil || !strings.Contains(err.Error(), `got "gpu"`) {
		t.Errorf("bad choice: %v", err)
	}
	d, err := Open("cpu", zerolog.Nop(), Options{})
	if err != nil || d.Name() != "cpu" || d.IsGPU() {
		t.Fatalf("cpu: %v, %v", d, err)
	}
	if ok, _ := gpukern.Available(); ok {
		t.Skip("a GPU is usable here")
	}
	_, err = Open("cuda", zerolog.Nop(), Options{NoCompanion: "no CUDA companion (x: not found)"})
	if err == nil || !strings.Contains(err.Error(), "built without CUDA; no CUDA companion (x: not found)") {
		t.Errorf("cuda without a GPU: %v", err)
	}
	var logged bytes.Buffer
	d, err = Open("auto", zerolog.New(&logged), Options{})
	if err != nil || d.IsGPU() || !strings.Contains(logged.String(), "built without CUDA") {
		t.Errorf("auto without a GPU: %v, %v, log %s", d, err, logged.String())
	}
}

// TestSolvingSetMultiGPUFallsBackToOneGPU: a failing distributed build (several GPUs) is counted
// and logged, and GPU 0 alone serves it, before the CPU; only when one GPU fails too does the CPU
// take it. Windows below multiGPURows, and hosts with one GPU, never try the distributed path.
func TestSolvingSetMultiGPUFallsBackToOneGPU(t *testing.T) {
	large := [][]float32{make([]float32, multiGPURows)}
	small := [][]float32{make([]float32, multiGPURows-1)}
	p := solvingset.Params{K: 5, N: 1, M: 10}
	lost := errors.New("GPU 3 lost")
	oneResult := solvingset.Result{WStar: 42, Iterations: 7}
	cpuResult := solvingset.Result{WStar: 42, Iterations: 9}
	type calls struct{ multi, one, cpu int }
	run := func(d *Device, cols [][]float32, gpus int, multiErr, oneErr error) (solvingset.Result, calls, error) {
		var c calls
		var res solvingset.Result
		err := d.step("SolvingSet", "", func() (err error) {
			res, err = d.solvingSetOnGPUs(cols, p, gpus,
				func([][]float32, solvingset.Params) (solvingset.Result, error) {
					c.multi++
					return solvingset.Result{}, multiErr
				},
				func([][]float32, solvingset.Params) (solvingset.Result, error) {
					c.one++
					return oneResult, oneErr
				})
			return err
		}, func() error {
			c.cpu++
			res = cpuResult
			return nil
		})
		return res, c, err
	}

	d, logged := policyDevice()
	res, c, err := run(d, large, 4, lost, nil)
	if err != nil || c != (calls{1, 1, 0}) || res.Iterations != oneResult.Iterations {
		t.Errorf("distributed fails: got %+v calls, result %+v, err %v; want one try each of the distributed and the one-GPU path, the one-GPU result", c, res, err)
	}
	if d.Fallbacks() != 1 || !strings.Contains(logged.String(), "SolvingSet on every GPU") || !strings.Contains(logged.String(), "GPU 3 lost") {
		t.Errorf("the distributed failure was not counted (%d) and logged: %s", d.Fallbacks(), logged)
	}

	d, _ = policyDevice()
	res, c, err = run(d, large, 2, lost, errors.New("GPU 0 lost"))
	if err != nil || c != (calls{1, 1, 1}) || res.Iterations != cpuResult.Iterations || d.Fallbacks() != 2 {
		t.Errorf("both GPU paths fail: got %+v calls, result %+v, err %v, %d fallbacks; want the CPU's result after two counted failures", c, res, err, d.Fallbacks())
	}

	for _, tc := range []struct {
		name string
		cols [][]float32
		gpus int
	}{{"window below multiGPURows", small, 4}, {"one GPU", large, 1}} {
		d, _ = policyDevice()
		_, c, err = run(d, tc.cols, tc.gpus, lost, nil)
		if err != nil || c != (calls{0, 1, 0}) || d.Fallbacks() != 0 {
			t.Errorf("%s: got %+v calls, err %v, %d fallbacks; want the one-GPU path only", tc.name, c, err, d.Fallbacks())
		}
	}
}
