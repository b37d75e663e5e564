//go:build cuda

package gpukern

import (
	"fmt"

	"gorgonia.org/cu"
)

// spanned runs launches (kernel launches only: no copy that waits for them) timed as one span
// named name on the default stream: a step of many short kernels records two events instead of
// two a launch (each cuEventRecord is a driver call on the critical path, and settle reads each
// pair). With perLaunch or syncEach the launches keep their own pairs (and synchronisation).
// Inside do only.
func (d *Device) spanned(name string, launches func() error) error {
	if d.syncEach || d.perLaunch {
		return launches()
	}
	ev, err := d.eventPair()
	if err != nil {
		return err
	}
	if err := ev[0].Record(cu.Stream{}); err != nil {
		d.spare = append(d.spare, ev)
		return fmt.Errorf("cuEventRecord: %w", err)
	}
	d.span = true
	err = launches()
	d.span = false
	if err == nil {
		if err = ev[1].Record(cu.Stream{}); err != nil {
			err = fmt.Errorf("cuEventRecord: %w", err)
		}
	}
	if err != nil {
		d.spare = append(d.spare, ev)
		return err
	}
	d.pending = append(d.pending, launchEvents{kernel: name, ev: ev})
	return nil
}
