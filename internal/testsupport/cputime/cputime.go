// Package cputime measures the process's CPU time for benchmarks on a shared machine, where the
// wall time depends on the other tenants and the CPU time much less.
package cputime

import (
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"syscall"
	"testing"
)

// Seconds is the process's user+system CPU time so far (NaN if the system does not say).
func Seconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// Profile starts a CPU profile written to "<$OUTLIERD_BENCH_CPUPROFILE>-<name>.prof" when that
// variable is set (the device benchmarks' profiles), and returns the function that stops it;
// without the variable it does nothing.
func Profile(tb testing.TB, name string) (stop func()) {
	prefix := os.Getenv("OUTLIERD_BENCH_CPUPROFILE")
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s-%s.prof", prefix, name))
	if err != nil {
		tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		tb.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
