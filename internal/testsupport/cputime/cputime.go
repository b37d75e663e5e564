// Package cputime measures the process's CPU time for benchmarks on a shared machine, where the
// wall time depends on the other tenants and the CPU time much less.
package cputime

import (
	"math"
	"syscall"
)

// Seconds is the process's user+system CPU time so far (NaN if the system does not say).
func Seconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
