//go:build cuda

package accel

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestCloseDuringAGPUCall (TestCloseContextLeavesACallInFlight on a GPU): gpukern's Close takes
// the device's lock, which a call in flight holds, so the device's release waited for a build's
// GPU call the stop had abandoned. With a long call in flight (exact weights of 1,000,000 rows:
// seconds), CloseContext under a deadline of 100 ms must return within a second, leave the GPU
// to the call (which ends with its GPU result, no failure counted), run a later call on the CPU
// (the CPU's bits, no failure), and Close after the call ended must release the GPU.
func TestCloseDuringAGPUCall(t *testing.T) {
	var logs testsupport.LogBuffer
	dev, err := Open("cuda", zerolog.New(&logs), Options{})
	if err != nil {
		t.Skipf("no GPU: %v", err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	// 1,000,000 rows: about 2 s on an H200 (300,000 took 174 ms there, too short for the
	// close's 100 ms deadline to end well before the call).
	const n = 1_000_000
	cols := make([][]float32, 8)
	for j := range cols {
		cols[j] = make([]float32, n)
		for i := range cols[j] {
			cols[j][i] = float32(r.NormFloat64())
		}
	}
	type result struct {
		w   []float64
		err error
	}
	done := make(chan result, 1)
	t0 := time.Now()
	go func() {
		w, err := dev.Weights(cols, 50)
		done <- result{w, err}
	}()
	for inFlight := false; !inFlight; time.Sleep(time.Millisecond) {
		dev.calls.mu.Lock()
		inFlight = dev.calls.n > 0
		dev.calls.mu.Unlock()
	}
	time.Sleep(50 * time.Millisecond) // (in the kernels by now)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c0 := time.Now()
	dev.CloseContext(ctx)
	closed := time.Since(c0)
	res := <-done
	call := time.Since(t0)
	t.Logf("the GPU call took %v; CloseContext returned after %v", call.Round(time.Millisecond), closed.Round(time.Millisecond))
	if res.err != nil || dev.Fallbacks() != 0 {
		t.Fatalf("the call in flight: %v, %d failures", res.err, dev.Fallbacks())
	}
	if closed > time.Second || call < closed+200*time.Millisecond {
		t.Errorf("CloseContext took %v of a %v call: want it back within a second, well before the call ends", closed, call)
	}
	if !strings.Contains(logs.String(), "left to the process's exit") {
		t.Errorf("the log does not say the GPU was left to the process's exit:\n%s", logs.String())
	}
	small := [][]float32{cols[0][:2000], cols[1][:2000]}
	got, err := dev.Weights(small, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := solvingset.Weights(small, 10, 0)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("a call after the close: row %d %v, the CPU's %v", i, got[i], want[i])
		}
	}
	if dev.Fallbacks() != 0 || strings.Contains(logs.String(), "failed a step") {
		t.Errorf("a call after the close counted %d failures; log:\n%s", dev.Fallbacks(), logs.String())
	}
	if err := dev.Close(); err != nil {
		t.Errorf("releasing the GPU after the call ended: %v", err)
	}
}
