package accel

import (
	"context"
	"sync"
)

// Closing the device while work the stop abandoned still runs (docs/OPERATIONS.md, Shutdown).
//
// A model build still running at the stop's deadline is left to end on its goroutine (the detect
// stage's awaitBuild), and the pipeline then closes the device. gpukern serialises a GPU's calls
// and its Close: the Close waited for the build's GPU call in flight, past the stop's deadline,
// and the build's next call failed on the closed device, ran on the CPU and was logged as a
// device failure at every such shutdown. So Close stops new GPU calls first (a call after it runs
// on the CPU, as the policy's fallback, but counted and logged as nothing), waits for the calls
// begun until its context ends, and frees the GPUs only then: a call still running at the
// deadline keeps them, left to the process's exit (which frees them with the driver's context).

// gpuCalls counts the GPU calls under way; once closed, no new one begins.
type gpuCalls struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // closed when n falls to 0 after close (nil: none waits)
}

// begin starts a GPU call, unless the device is closed (false).
func (c *gpuCalls) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.n++
	return true
}

// end ends a call begin started.
func (c *gpuCalls) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.n == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

// close stops new calls and returns the calls under way and a channel closed once they ended
// (nil: none).
func (c *gpuCalls) close() (int, chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.n > 0 && c.idle == nil {
		c.idle = make(chan struct{})
	}
	return c.n, c.idle
}

// Close is CloseContext waiting for the GPU calls under way as long as they take.
func (d *Device) Close() error { return d.CloseContext(context.Background()) }

// CloseContext releases the GPUs (and with them every resident model) once the GPU calls under
// way ended, waiting until ctx ends at most (a stop's deadline): past it the GPUs are left to the
// process's exit, logged, and nil is returned. From its call on, every step runs on the CPU
// (not a device failure). A second call releases nothing more.
func (d *Device) CloseContext(ctx context.Context) error {
	if d.gpu == nil && d.release == nil {
		return nil
	}
	n, idle := d.calls.close()
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			d.log.Warn().Str("device", d.name).Int("gpu_calls", n).
				Msg("closing the device: GPU calls of work the stop abandoned (a model build past run.shutdown_timeout) still running; the GPUs are left to the process's exit, not released here")
			return nil
		}
	}
	d.closeOnce.Do(func() { d.closeErr = d.releaseGPUs() })
	return d.closeErr
}
