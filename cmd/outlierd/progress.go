package main

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows a long run's state on stderr when it is a terminal, and nothing otherwise
// (so that logs and pipes stay clean): a spinner (newProgress) or a bar over a known count
// (newCountProgress).
type progress struct{ bar *progressbar.ProgressBar }

func newProgress(stderr io.Writer, what string) *progress {
	if !isTerminal(stderr) {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions(-1,
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionClearOnFinish(),
	)}
}

// newCountProgress is a bar over total records (produce's).
func newCountProgress(stderr io.Writer, total int64, what string) *progress {
	if !isTerminal(stderr) {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("records"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
}

// add counts n more records done.
func (p *progress) add(n int) {
	if p.bar != nil {
		_ = p.bar.Add(n)
	}
}

// update reports an iteration of SolvingSet and the points still active.
func (p *progress) update(iter, active int) {
	if p.bar == nil {
		return
	}
	p.bar.Describe(fmt.Sprintf("SolvingSet: iteration %d, %s active", iter, plural(active, "point", "points")))
	_ = p.bar.Add(1)
}

// spin shows what while a step without iterations of its own runs (topn's exact-weight pass),
// the spinner turning until the returned stop is called.
func (p *progress) spin(what string) (stop func()) {
	if p.bar == nil {
		return func() {}
	}
	p.bar.Describe(what)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = p.bar.Add(1)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		p.finish()
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
