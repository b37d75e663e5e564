package accel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestNoDeviceFailureAfterClose: a model build the stop abandoned at its deadline goes on on its
// goroutine after the pipeline closed the device; its next GPU call failed on the closed device,
// ran on the CPU, and was counted and logged as a device failure ("the accelerator failed a
// step") at every shutdown past the deadline. A call after Close must run on the CPU without
// reaching the GPU, be counted as no failure and log no warning.
func TestNoDeviceFailureAfterClose(t *testing.T) {
	d, logged := policyDevice()
	d.Close()
	closed := errors.New("gpukern: device closed")
	ran := false
	err := d.step("SolvingSet", "", func() error { return closed }, func() error { ran = true; return nil })
	if err != nil || !ran {
		t.Fatalf("a step after Close: CPU ran %v, error %v; want the CPU's result", ran, err)
	}
	if d.Fallbacks() != 0 || strings.Contains(logged.String(), "failed a step") {
		t.Errorf("a step after Close counted %d device failures, logged:\n%s", d.Fallbacks(), logged)
	}
}

// TestCloseContextLeavesACallInFlight: the device's release waited for a GPU call in flight
// (gpukern serialises a GPU's calls, its Close too): a call of a build the stop abandoned held
// the process past run.shutdown_timeout. CloseContext must wait for the calls begun until its
// context ends, then return, leaving the GPUs to the process's exit (logged), and the call
// in flight must end as it would have (its result, no failure counted).
func TestCloseContextLeavesACallInFlight(t *testing.T) {
	d, logged := policyDevice()
	gate, begun, ended := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		ended <- d.step("SolvingSet", "", func() error { close(begun); <-gate; return nil }, func() error {
			t.Error("the CPU ran a call whose GPU call succeeded")
			return nil
		})
	}()
	<-begun
	// (The deadline is 100 ms; 5 s is room for a loaded machine, the call being held until the
	// test lets it go.)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	d.CloseContext(ctx)
	if took := time.Since(t0); took > 5*time.Second {
		t.Errorf("CloseContext took %v with a deadline of 100ms and a GPU call in flight", took)
	}
	if !strings.Contains(logged.String(), "left to the process's exit") {
		t.Errorf("the log does not say the GPUs were left unreleased:\n%s", logged)
	}
	close(gate)
	if err := <-ended; err != nil || d.Fallbacks() != 0 {
		t.Errorf("the call in flight ended with %v, %d failures counted; want its GPU result", err, d.Fallbacks())
	}

	// Without a call in flight, an ended context does not keep the GPUs from their release.
	idle, _ := policyDevice()
	released := false
	idle.release = func() error { released = true; return nil }
	cancel()
	idle.CloseContext(ctx)
	if !released {
		t.Error("an idle device was not released under an ended context")
	}
}
