//go:build cuda

package gpukern

import (
	"fmt"

	"gorgonia.org/cu"
)

// spanStart starts timing the launches that follow on the default stream as one, named at
// spanEnd: a step of many short kernels records two events instead of two a launch (each
// cuEventRecord is a driver call on the critical path, and settle reads each pair). Not with
// perLaunch or syncEach (ok false: launches keep their own pairs and synchronisation). Inside do
// only; every spanStart that returns ok is ended by spanEnd or spanAbort.
func (d *Device) spanStart() (ev [2]cu.Event, ok bool, err error) {
	if d.syncEach || d.perLaunch {
		return ev, false, nil
	}
	if ev, err = d.eventPair(); err != nil {
		return ev, false, err
	}
	if err := ev[0].Record(cu.Stream{}); err != nil {
		d.spare = append(d.spare, ev)
		return ev, false, fmt.Errorf("cuEventRecord: %w", err)
	}
	d.span = true
	return ev, true, nil
}

// spanEnd ends the span started with ev and adds its time to kernel name's total.
func (d *Device) spanEnd(name string, ev [2]cu.Event) error {
	d.span = false
	if err := ev[1].Record(cu.Stream{}); err != nil {
		d.spare = append(d.spare, ev)
		return fmt.Errorf("cuEventRecord: %w", err)
	}
	d.pending = append(d.pending, launchEvents{kernel: name, ev: ev})
	return nil
}

// spanAbort ends a span whose launches failed.
func (d *Device) spanAbort(ev [2]cu.Event) {
	d.span = false
	d.spare = append(d.spare, ev)
}

// spanned runs launches (kernel launches only: no copy that waits for them) timed as one span
// named name (each with its own event pair with perLaunch). Inside do only.
func (d *Device) spanned(name string, launches func() error) error {
	ev, ok, err := d.spanStart()
	if err != nil {
		return err
	}
	if !ok {
		return launches()
	}
	if err := launches(); err != nil {
		d.spanAbort(ev)
		return err
	}
	return d.spanEnd(name, ev)
}
