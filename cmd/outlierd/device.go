package main

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/stages/detect/solvingset"
)

// device runs the detectors on the CPU or, when this binary was built with CUDA and a GPU
// is present, on the GPU. The CPU path is the tuned multi-core implementation.
type device struct {
	name string // "cpu" or "cuda:<gpu name>"
}

// resolveDevice maps --device to a device: auto picks the GPU when there is one and says
// which it chose; cuda without a usable GPU is an error.
func resolveDevice(flagValue string, log zerolog.Logger) (*device, error) {
	if err := oneOf("device", flagValue, "auto", "cpu", "cuda"); err != nil {
		return nil, err
	}
	switch flagValue {
	case "cpu":
		return &device{name: "cpu"}, nil
	case "cuda":
		return nil, fmt.Errorf("--device cuda: this build has no CUDA support (build with `make cuda`)")
	}
	log.Debug().Msg("device auto: no CUDA support in this build, using the CPU")
	return &device{name: "cpu"}, nil
}

func (d *device) solvingSet(cols [][]float32, p solvingset.Params, progress func(iter, active int)) (solvingset.Result, error) {
	return solvingset.SolvingSet(cols, p, progress)
}

func (d *device) bruteForce(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	return solvingset.BruteForce(cols, p)
}

func (d *device) scoreBatch(m *solvingset.Model, cols [][]float32, out []float64) error {
	m.ScoreBatch(cols, out, 0)
	return nil
}
