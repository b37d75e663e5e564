package pipeline

import (
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/stages/detect"
)

// Device is where the distance-based and density steps run: internal/accel decides CPU or GPU
// and falls back to the CPU after a device failure (its one policy).
type Device struct{ *accel.Device }

var (
	_ detect.Accelerator      = (*accel.Device)(nil)
	_ detect.KeyedAccelerator = (*accel.Device)(nil)     // (the keys' models resident on the GPU)
	_ detect.KeyedSelfWeigher = (*accel.KeyedStore)(nil) // (the key builds' calibrations there: an optional interface, checked here)
)

// OpenDevice resolves `device: auto|cpu|cuda` (accel.Open).
func OpenDevice(choice string, log zerolog.Logger) (*Device, error) {
	d, err := accel.Open(choice, log, accel.Options{})
	if err != nil {
		return nil, err
	}
	return &Device{d}, nil
}

// Accelerator is the device as the detect stage uses it: nil on the CPU, where the stage runs
// the CPU code itself.
func (d *Device) Accelerator() detect.Accelerator {
	if !d.IsGPU() {
		return nil
	}
	return d.Device
}
