package main

import (
	"fmt"
	"io"

	"github.com/schollz/progressbar/v3"
)

// progress shows a long run's state on stderr when it is a terminal, and nothing otherwise
// (so that logs and pipes stay clean).
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

// update reports an iteration of SolvingSet and the points still active.
func (p *progress) update(iter, active int) {
	if p.bar == nil {
		return
	}
	p.bar.Describe(fmt.Sprintf("SolvingSet: iteration %d, %d points active", iter, active))
	_ = p.bar.Add(1)
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
