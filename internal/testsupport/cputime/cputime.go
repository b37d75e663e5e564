// Package cputime measures the process's CPU time for benchmarks on a shared machine, where the
// wall time depends on the other tenants and the CPU time much less.
package cputime

import (
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"runtime/trace"
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
// variable is set (the device benchmarks' profiles), and an execution trace written to
// "<$OUTLIERD_BENCH_TRACE>-<name>.trace" when that one is (which goroutine waits for which:
// `go tool trace -pprof=sync`), and returns the function that stops them; without the variables
// it does nothing.
func Profile(tb testing.TB, name string) (stop func()) {
	var stops []func()
	if prefix := os.Getenv("OUTLIERD_BENCH_CPUPROFILE"); prefix != "" {
		f := create(tb, fmt.Sprintf("%s-%s.prof", prefix, name))
		if err := pprof.StartCPUProfile(f); err != nil {
			tb.Fatal(err)
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if prefix := os.Getenv("OUTLIERD_BENCH_TRACE"); prefix != "" {
		f := create(tb, fmt.Sprintf("%s-%s.trace", prefix, name))
		if err := trace.Start(f); err != nil {
			tb.Fatal(err)
		}
		stops = append(stops, func() { trace.Stop(); f.Close() })
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

func create(tb testing.TB, path string) *os.File {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}
