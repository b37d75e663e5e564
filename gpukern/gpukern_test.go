package gpukern_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
)

// openDevice opens device 0 or skips the test with the reason (no cuda tag, or no GPU).
func openDevice(t testing.TB) *gpukern.Device {
	t.Helper()
	d, err := gpukern.Open(0)
	if errors.Is(err, gpukern.ErrNoDevice) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatalf("Open(0): %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// newRand returns a seeded generator and logs the seed so that a failure can be replayed.
func newRand(t testing.TB, seed uint64) *rand.Rand {
	t.Helper()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0x6770756b65726e)) // "gpukern"
}

func TestAvailableMatchesOpen(t *testing.T) {
	ok, why := gpukern.Available()
	d, err := gpukern.Open(0)
	if err == nil {
		defer d.Close()
		if !ok {
			t.Errorf("Open(0) succeeded but Available() = false (%s)", why)
		}
		if d.Name() == "" {
			t.Error("an open device has an empty name")
		}
		return
	}
	if ok {
		t.Errorf("Available() = true (%s) but Open(0) failed: %v", why, err)
	}
	if !errors.Is(err, gpukern.ErrNoDevice) {
		t.Errorf("Open(0) error %v does not wrap ErrNoDevice", err)
	}
	if _, err := gpukern.Open(-1); !errors.Is(err, gpukern.ErrNoDevice) {
		t.Errorf("Open(-1) error %v does not wrap ErrNoDevice", err)
	}
}

// TestNilDevice: every entry given no device fails with ErrNoDevice in both builds, and bad shapes
// are reported as shape errors before the device is looked at.
func TestNilDevice(t *testing.T) {
	S := [][]float32{{0, 1, 2}, {0, 1, 2}}
	Q := [][]float32{{0.5}, {0.5}}
	cent := [][]float32{{0}, {1}}
	asg := []int32{0, 0, 0}
	if err := gpukern.KNNWeights(nil, S, Q, 2, make([]float64, 1)); !errors.Is(err, gpukern.ErrNoDevice) {
		t.Errorf("KNNWeights(nil device) = %v, want ErrNoDevice", err)
	}
	if err := gpukern.Assign(nil, S, cent, make([]int32, 3)); !errors.Is(err, gpukern.ErrNoDevice) {
		t.Errorf("Assign(nil device) = %v, want ErrNoDevice", err)
	}
	if _, err := gpukern.Reduce(nil, S, nil, asg, 1, 8192); !errors.Is(err, gpukern.ErrNoDevice) {
		t.Errorf("Reduce(nil device) = %v, want ErrNoDevice", err)
	}
}

func TestShapeErrors(t *testing.T) {
	S := [][]float32{{0, 1, 2}, {0, 1, 2}}
	Q := [][]float32{{0.5}, {0.5}}
	cent := [][]float32{{0}, {1}}
	cases := []struct {
		name string
		run  func() error
	}{
		{"knn k=0", func() error { return gpukern.KNNWeights(nil, S, Q, 0, make([]float64, 1)) }},
		{"knn k>max", func() error {
			return gpukern.KNNWeights(nil, S, Q, gpukern.KNNMaxK+1, make([]float64, 1))
		}},
		{"knn dims differ", func() error { return gpukern.KNNWeights(nil, S, Q[:1], 1, make([]float64, 1)) }},
		{"knn ragged S", func() error { return gpukern.KNNWeights(nil, [][]float32{{0, 1}, {0}}, Q, 1, make([]float64, 1)) }},
		{"knn out length", func() error { return gpukern.KNNWeights(nil, S, Q, 1, make([]float64, 2)) }},
		{"knn no dims", func() error { return gpukern.KNNWeights(nil, nil, nil, 1, nil) }},
		{"weights k=rows", func() error { return gpukern.Weights(nil, S, 3, make([]float64, 3)) }},
		{"weights k=0", func() error { return gpukern.Weights(nil, S, 0, make([]float64, 3)) }},
		{"weights out length", func() error { return gpukern.Weights(nil, S, 1, make([]float64, 2)) }},
		{"weights ragged", func() error { return gpukern.Weights(nil, [][]float32{{0, 1}, {0}}, 1, make([]float64, 2)) }},
		{"assign out length", func() error { return gpukern.Assign(nil, S, cent, make([]int32, 2)) }},
		{"assign no centroids", func() error { return gpukern.Assign(nil, S, [][]float32{{}, {}}, make([]int32, 3)) }},
		{"assign dims differ", func() error { return gpukern.Assign(nil, S, cent[:1], make([]int32, 3)) }},
		{"reduce q=0", func() error { _, err := gpukern.Reduce(nil, S, nil, make([]int32, 3), 0, 8192); return err }},
		{"reduce q too big", func() error {
			_, err := gpukern.Reduce(nil, S, nil, make([]int32, 3), gpukern.ReduceMaxQ+1, 8192)
			return err
		}},
		{"reduce assign length", func() error { _, err := gpukern.Reduce(nil, S, nil, make([]int32, 2), 1, 8192); return err }},
		{"reduce sds shape", func() error { _, err := gpukern.Reduce(nil, S, S[:1], make([]int32, 3), 1, 8192); return err }},
		{"cluster nil means", func() error { _, err := gpukern.Cluster(nil, nil, cent, 1, 8192, nil); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.run()
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, gpukern.ErrNoDevice) {
				t.Fatalf("bad input reported as a missing device: %v", err)
			}
		})
	}
}
