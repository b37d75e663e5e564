//go:build !cuda

package gpukern

import "fmt"

// UploadProclus fails with ErrNoDevice in this build.
func (d *Device) UploadProclus(cols [][]float32) (*ProclusData, error) {
	return nil, fmt.Errorf("gpukern.UploadProclus: %w", errNoCUDA)
}

// Free does nothing in this build (no ProclusData can exist).
func (pd *ProclusData) Free() error { return nil }

// The engine's passes: unreachable in this build (UploadProclus fails), present so that both
// builds have the same API.

func (pd *ProclusData) Begin([]float64, int) error { return errNoCUDA }

func (pd *ProclusData) Locality([]ProclusQuery, []int64, []int64) error { return errNoCUDA }

func (pd *ProclusData) Assign([][]float32, []int, []int, []float64, []int64, []int64) error {
	return errNoCUDA
}

func (pd *ProclusData) Spread([]float64, []int, []int, []int64) error { return errNoCUDA }

func (pd *ProclusData) KeepBest() error { return errNoCUDA }

func (pd *ProclusData) UseBest() error { return errNoCUDA }

func (pd *ProclusData) Assignment([]int32) error { return errNoCUDA }
