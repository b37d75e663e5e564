//go:build !cuda

package gpukern

import "fmt"

// UploadProclus fails with ErrNoDevice in this build.
func (d *Device) UploadProclus(cols [][]float32) (*ProclusData, error) {
	return nil, fmt.Errorf("gpukern.UploadProclus: %w", errNoCUDA)
}

// NewRun fails with ErrNoDevice in this build.
func (pd *ProclusData) NewRun() (*ProclusRun, error) { return nil, errNoCUDA }

// RunStates fails with ErrNoDevice in this build.
func (pd *ProclusData) RunStates(int, int) ([]*ProclusRun, error) { return nil, errNoCUDA }

// Free does nothing in this build (no ProclusData can exist).
func (pd *ProclusData) Free() error { return nil }

// Free does nothing in this build (no ProclusRun can exist).
func (pr *ProclusRun) Free() error { return nil }

// The engine's passes: unreachable in this build (UploadProclus fails), present so that both
// builds have the same API.

func (pr *ProclusRun) Begin([]float64, int) error { return errNoCUDA }

func (pr *ProclusRun) Locality([]ProclusQuery, []int64, []int64) error { return errNoCUDA }

func (pr *ProclusRun) Assign([][]float32, []int, []int, []float64, []int64, []int64) error {
	return errNoCUDA
}

func (pr *ProclusRun) Spread([]float64, []int, []int, []int64) error { return errNoCUDA }

func (pr *ProclusRun) KeepBest() error { return errNoCUDA }

func (pr *ProclusRun) UseBest() error { return errNoCUDA }

func (pr *ProclusRun) Assignment([]int32) error { return errNoCUDA }
