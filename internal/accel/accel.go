// Package accel is the one place that decides where the distance-based and density steps run:
// the CPU, or NVIDIA GPUs through gpukern. It opens the devices (Open), runs each step on the GPU
// when the kernels cover it, and falls back to the CPU twin, which gives the same result (the
// kernels' parity tests), after a device failure. The CLI commands (cmd/outlierd) and the
// pipeline (pipeline.OpenDevice, the detect stage's detect.Accelerator) use it alike.
//
// The policy, the same for every step and every caller:
//   - a call the kernels do not cover (a parameter beyond a kernel's limit, a step without a
//     kernel) runs on the CPU; the first such call of each step is logged at info level;
//   - a device failure (any error from the GPU path for input the CPU accepts) runs the call on
//     the CPU, is counted (Fallbacks, for the metrics) and logged as a warning, the first of each
//     step and then every 1000th, so a lost device shows without flooding the log;
//   - the next call tries the GPU again. The failures seen in practice are per call (out of
//     memory for one large window, a launch refused for one shape): keeping the CPU for the rest
//     of a long-running pipeline after one of them would cost days of GPU time, while a device
//     that is really gone fails in microseconds per call and shows in the counter.
//
// The glue from the algorithms' types (solvingset, microcluster, density, hypercube, proclus) to
// gpukern's launches lives here too, so the callers see the algorithms' own types only.
package accel

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/density"
)

// Options are what the caller knows about the devices beyond the `device` choice.
type Options struct {
	// NoCompanion is why the CUDA companion binary did not take over (cmd/outlierd's CPU build,
	// companion.go), added to the reason logged when auto falls back to the CPU; "" when no
	// companion was tried.
	NoCompanion string
}

// Device is where the steps run: the CPU (no GPU), or GPU 0 with the host's other GPUs for the
// distributed solving set. Its methods are safe for concurrent use (gpukern serialises the calls
// of one GPU).
type Device struct {
	gpu  *gpukern.Device
	name string
	// more are the host's other GPUs (ordinals 1, 2, ...): SolvingSet spreads over every GPU
	// for windows of at least multiGPURows (the distributed solving set, one node per device).
	more []*gpukern.Device
	log  zerolog.Logger

	// fallbacks counts the calls the CPU took after a device failure.
	fallbacks atomic.Int64
	mu        sync.Mutex
	fails     map[string]int  // device failures per step
	uncovered map[string]bool // steps logged as not covered by the kernels

	// The density model kept resident on the GPU: the serving model's, replaced (and the old
	// one freed) when a call comes with another model.
	densMu    sync.Mutex
	densModel *density.Model
	densGPU   *gpukern.DensityModel
	// points are the models' point sets kept resident for k-NN scoring (points.go).
	points residentPoints

	// calls tracks the GPU calls under way (step) for Close (close.go); release frees the GPUs
	// (nil: Open's, gpu and more; the tests set their own).
	calls     gpuCalls
	release   func() error
	closeOnce sync.Once
	closeErr  error
}

// Open resolves `device: auto|cpu|cuda`: auto takes the GPU when this binary was built with CUDA
// and one opens, else the CPU; cuda without a usable GPU is an error. It logs which.
func Open(choice string, log zerolog.Logger, opt Options) (*Device, error) {
	switch choice {
	case "cpu":
		log.Info().Str("device", "cpu").Msg("device: CPU (configured)")
		return &Device{name: "cpu", log: log}, nil
	case "auto", "cuda":
	default:
		return nil, fmt.Errorf("device must be auto, cpu or cuda, got %q", choice)
	}
	ok, why := gpukern.Available()
	if ok {
		g, err := gpukern.Open(0)
		if err == nil {
			d := &Device{gpu: g, name: "cuda:" + g.Name(), log: log}
			for i := 1; ; i++ { // every other GPU of the host, for the builds of large windows
				o, err := gpukern.Open(i)
				if err != nil {
					break
				}
				d.more = append(d.more, o)
			}
			log.Info().Str("device", "cuda").Str("gpu", g.Name()).Int("gpus", 1+len(d.more)).Msg("device: GPU")
			return d, nil
		}
		why = err.Error()
	} else if opt.NoCompanion != "" {
		why = "built without CUDA; " + opt.NoCompanion
	}
	if choice == "cuda" {
		return nil, fmt.Errorf("device cuda: no usable GPU: %s", why)
	}
	log.Info().Str("device", "cpu").Str("reason", why).Msg("device auto: using the CPU")
	return &Device{name: "cpu", log: log}, nil
}

// Name is "cpu" or "cuda:<GPU name>".
func (d *Device) Name() string { return d.name }

// IsGPU reports whether the steps may run on a GPU.
func (d *Device) IsGPU() bool { return d.gpu != nil }

// Fallbacks is the number of calls the CPU took after a device failure, since Open.
func (d *Device) Fallbacks() int64 { return d.fallbacks.Load() }

// releaseGPUs frees the GPUs (and with them every resident model).
func (d *Device) releaseGPUs() error {
	if d.release != nil {
		return d.release()
	}
	if d.gpu == nil {
		return nil
	}
	errs := []error{d.gpu.Close()}
	for _, o := range d.more {
		errs = append(errs, o.Close())
	}
	return errors.Join(errs...)
}

// step is the policy (package doc): gpu when there is a GPU and uncovered is "", else (or after
// gpu fails) cpu; after Close, cpu (close.go).
func (d *Device) step(name, uncovered string, gpu, cpu func() error) error {
	if d.gpu == nil {
		return cpu()
	}
	if uncovered != "" {
		d.notCovered(name, uncovered)
		return cpu()
	}
	if !d.calls.begin() { // (closed: a build the stop abandoned goes on; not a device failure)
		return cpu()
	}
	err := gpu()
	d.calls.end()
	if err == nil {
		return nil
	}
	d.failed(name, err)
	return cpu()
}

// notCovered logs, once per step, that a step runs on the CPU because the kernels do not cover it.
func (d *Device) notCovered(step, why string) {
	d.mu.Lock()
	if d.uncovered == nil {
		d.uncovered = map[string]bool{}
	}
	first := !d.uncovered[step]
	d.uncovered[step] = true
	d.mu.Unlock()
	if first {
		d.log.Info().Str("step", step).Str("reason", why).Msg("running on the CPU")
	}
}

// failed counts a device failure and logs the first of each step, then every 1000th.
func (d *Device) failed(step string, err error) {
	d.fallbacks.Add(1)
	d.mu.Lock()
	if d.fails == nil {
		d.fails = map[string]int{}
	}
	d.fails[step]++
	n := d.fails[step]
	d.mu.Unlock()
	if n == 1 || n%1000 == 0 {
		d.log.Warn().Str("device", d.name).Str("step", step).Int("failures", n).Err(err).
			Msg("the accelerator failed a step; the CPU took it (same results)")
	}
}

// GPU is the first GPU (for its Counters, the pipeline's metrics), nil on the CPU.
func (d *Device) GPU() *gpukern.Device { return d.gpu }
