package detect

import (
	"github.com/outlierd/outlierd/internal/core/batch"
)

// The detect stage's host and device work overlapped (Deps.Overlap; issue 22 item 1). On the
// GPU a 1000-record batch costs the stage's goroutine its host work (the normalisation, the
// distance space of the ranking sample, the tail score on the cores, the decision) and one
// synchronous device call; one after the other the device idles while the host works and the
// host waits while the device scores. Overlapped, Process(b) begins b's scoring (begin: the host
// work before the device, the device call on its way on a goroutine of its own, the tail score
// on the cores), then finishes the batch begun by the previous call (finish: its device results,
// the detectors' fields, the decision, the alarm cap) and returns that one: the host work of
// batch i+1 runs while the device scores batch i. Two lanes (each its own detectors' buffers and
// scratch) hold the two batches.
//
// Verdicts are the synchronous stage's: a batch is scored by the model serving when it began,
// and everything that carries state from batch to batch (the alarm cap and the significance
// marks, the alert groups, the keys' models, the rebuild triggers and the window's pushes) runs
// in finish or after it, in stream order, exactly as the synchronous Process orders it. The one
// difference is when a build that a batch triggers starts: after that batch finishes, so one
// batch later than without overlap (a build's result is picked up whenever it is ready anyway).
// A batch in flight is finished by the next Process, by Drain (the pipeline calls it whenever
// no batch waits, so overlap adds no latency to a stream that keeps up), by Flush and by any
// call that changes the stage's configuration or model (settle).

// scoring is one batch's scoring between begin and finish.
type scoring struct {
	b    *batch.Batch
	lane int
	q    Query
	raw  [][]float32 // the batch's raw means (columns of b)
	// devDone is closed when the asynchronous device call has returned with devErr (nil: the
	// call, if any, was made inline by begin).
	devDone chan struct{}
	devErr  error
}

// lanes is the second set of the detectors and their scratch (the first is the Stage's own),
// made at the first overlapped batch.
type lanes struct {
	detectors []Detector
	scratch   scoreScratch
}

// lane returns the detectors and the scratch of lane i (0 or 1).
func (s *Stage) lane(i int) ([]Detector, *scoreScratch) {
	if i == 0 {
		return s.detectors, &s.scratch
	}
	if s.alt.detectors == nil {
		// The model's detectors keep per-batch buffers: a set of their own. The followers (the
		// hypercube) score only in finish, one batch at a time: shared.
		s.alt.detectors = append(modelDetectors(s.deps.Accelerator, s.features), s.detectors[len(s.detectors)-len(s.followers):]...)
	}
	return s.alt.detectors, &s.alt.scratch
}

// overlapping says whether Process overlaps batches: asked for, with an accelerator, in a
// stage that builds and scores (a scorer's models arrive between batches: it stays synchronous).
func (s *Stage) overlapping() bool {
	return s.deps.Overlap && s.deps.Accelerator != nil && (s.deps.Role == RoleAll || s.deps.Role == "")
}

// wait waits for the batch's device call and returns its error (the tail score is waited for
// by the rank detector's Score).
func (sc *scoring) wait() error {
	if sc.devDone != nil {
		<-sc.devDone
	}
	return sc.devErr
}

// abandon waits for everything begin started (the device call, the tail score): nothing
// writes into the lane afterwards.
func (sc *scoring) abandon(dets []Detector) {
	_ = sc.wait()
	for _, d := range dets {
		if r, ok := d.(*rankDetector); ok {
			r.settle()
		}
	}
}

// land finishes the batch in flight, if any, with what the synchronous Process does after
// scoring (the next build's trigger), and returns it. On an error the batch is released (the
// caller no longer holds it: never acknowledged, read again after a restart).
func (s *Stage) land() ([]*batch.Batch, error) {
	sc := s.flight
	if sc == nil {
		return nil, nil
	}
	s.flight = nil
	if err := s.finish(sc); err != nil {
		dets, _ := s.lane(sc.lane)
		sc.abandon(dets)
		delete(s.pending, sc.b)
		sc.b.Release()
		return nil, err
	}
	s.maybeRebuild()
	return []*batch.Batch{sc.b}, nil
}

// settle finishes the batch in flight before a call that changes what finish reads (the
// configuration, the window, the model): it waits in s.ready for the next Process, Drain or
// Flush to return it.
func (s *Stage) settle() error {
	out, err := s.land()
	s.ready = append(s.ready, out...)
	return err
}

// Drain finishes the batch in flight and returns the batches ready to go on (none without
// overlap): the pipeline calls it whenever no batch waits for the stage.
func (s *Stage) Drain() ([]*batch.Batch, error) {
	out, err := s.land()
	if err != nil {
		return nil, err
	}
	return s.takeReady(out), nil
}

// takeReady returns the batches settled earlier, then out.
func (s *Stage) takeReady(out []*batch.Batch) []*batch.Batch {
	if len(s.ready) == 0 {
		return out
	}
	r := append(s.ready, out...)
	s.ready = nil
	return r
}

// processOverlapped is Process with overlap, once a model serves: b begins, the batch in
// flight finishes (with its build trigger), b joins the window, and the finished batch is
// returned while b's device call runs.
func (s *Stage) processOverlapped(b *batch.Batch) ([]*batch.Batch, error) {
	lane := 0
	if s.flight != nil && s.flight.lane == 0 {
		lane = 1
	}
	next, err := s.begin(b, lane, true)
	if err != nil {
		return nil, err
	}
	fail := func(err error) ([]*batch.Batch, error) {
		dets, _ := s.lane(lane)
		next.abandon(dets)
		return nil, err
	}
	out, err := s.land()
	if err != nil {
		return fail(err)
	}
	out = s.takeReady(out)
	if err := s.pushBatch(b); err != nil {
		for _, o := range out { // finished, but the stage fails: never passed on
			o.Release()
		}
		return fail(err)
	}
	s.flight = next
	return out, nil
}

// abandonFlight waits for the batch in flight's work and releases it unfinished.
func (s *Stage) abandonFlight() {
	sc := s.flight
	if sc == nil {
		return
	}
	s.flight = nil
	dets, _ := s.lane(sc.lane)
	sc.abandon(dets)
	delete(s.pending, sc.b)
	sc.b.Release()
}
