package detect

import (
	"context"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// The detect stage's host and device work overlapped (Deps.Overlap; issue 22 item 1). On the
// GPU a 1000-record batch costs the stage's goroutine its host work (the normalisation, the
// distance space of the ranking sample, the tail score, the combined score's calibration, the
// decision) and one synchronous device call; one after the other, the device idles while the
// host works and the host waits while the device scores, and a model build's SolvingSet
// iteration (about 1.3 ms of the device at W = 1M) holds every batch's call behind it.
//
// Overlapped, Process(b) begins b's scoring (begin: the normalisation and the distance space on
// the stage's goroutine, the tail score on the cores, and on a goroutine of b's own the device
// call, then the detectors' fields that need no state of
// the stage: the density verdicts, the solving set's weights, the calibrated scores), and
// finishes the oldest batch in flight once more than Deps.Overlap are (finish: the followers'
// fields, the decision, the keys' models, the alarm cap, the alert groups), and returns it.
// Several batches in flight mean several calls queued for the device: they are served together
// between a build's iterations instead of one per iteration. With the keys' models on a device,
// a batch's keys' pass (their windows, device call, decisions and builds) runs on its own
// goroutine from the moment the batch before it finished (startChained) and finish waits for
// it: the keys' state goes from batch to batch in stream order, and the stage's methods that
// read it between Process calls wait first (keysQuiet; KeyStats, the metrics' read after every
// Process call, reads the figures the running pass started from). Which of a batch's records
// have a key with a model, and so are their key's model's alone, is known only then too: the
// global model's scoring of the others starts there, beside the keys' pass, as begin starts it
// without overlap (deferred; none at all when every key is warm); while the stream is mostly
// cold it starts in begin on every record instead (speculate), its fields then cleared on the
// records their key scored (mergeKeyed): the same outputs either way.
//
// Verdicts are the synchronous stage's: a batch is scored by the model serving when it began,
// and everything that carries state from batch to batch runs in stream order, as the
// synchronous Process orders it: a batch joins the window (pushBatch: the followers, the
// significance bits' slots, the rebuild counters) only after the batch before it finished, and
// finishes after it joined. The one difference is when a build that a batch triggers starts:
// once that batch finished, so up to Deps.Overlap batches later than without overlap (a build's
// result is picked up whenever it is ready anyway). Batches in flight are finished by the
// next Process calls, by LandScored once their scoring ended (the pipeline waits for Landing or
// the next batch, whichever comes first, so overlap adds no latency to a stream that keeps
// up), by Drain (before a live reconfiguration), by Flush and by any call that changes the
// stage's configuration or window (settle).

// scoring is one batch's scoring between begin and finish.
type scoring struct {
	b    *batch.Batch
	lane int
	q    Query
	cfg  Config      // the configuration the batch began under (q.Cfg points here)
	raw  [][]float32 // the batch's raw means (columns of b)
	sds  [][]float32 // and uncertainties (nil without)
	// warm marks the records whose key had a model when the batch began (keyedScorer.warmRows;
	// nil: none, or not read); rows are those the global model scores (globalRows: nil for
	// all), out their scores (b.Scores itself for all rows).
	warm   []bool
	rows   []int
	out    []batch.Score
	pushed bool // b joined the window (pushBatch)
	// done is closed when the device call and the detectors' fields computed beside it
	// (scoreAsync) are done, with err.
	done chan struct{}
	err  error
	// keyed are the keys' models' scores of the batch, written by the keys' pass running beside
	// the global scoring (keyedBeside; nil when it runs in finish), done when keyedDone closes.
	keyed     []batch.Score
	keyedDone chan struct{}
	// chained: batches overlapped with the keys' models on a device, the keys' pass runs on its
	// own goroutine from the moment the batch before finished (startChained) to finish's wait
	// (keyedDone), beside the stage's other batches' work, instead of inside finish; landed is
	// closed once both its scoring (done) and that pass ended (Landing).
	chained bool
	landed  chan struct{}
	// deferred: chained, and the global model's scoring starts with the keys' pass (startChained),
	// on the rows of keys without a model then, instead of in begin on every row (speculate).
	deferred bool
}

// startChained starts the keys' pass of the oldest batch in flight when it is chained and not
// started yet: every batch before it finished (land), or none was in flight (processOverlapped),
// so the keys' state is as the synchronous stage leaves it for this batch.
func (s *Stage) startChained() {
	if len(s.flight) == 0 {
		return
	}
	if sc := s.flight[0]; sc.chained && sc.keyedDone == nil {
		s.keysAtPass = s.keyed.counts() // (KeyStats's while the pass runs; finish made the builds)
		// The keys' state is now the synchronous stage's when it begins this batch: the records
		// whose key has a model now are their key's model's alone (warmRows, as begin reads it
		// without overlap; its lookups serve the keys' pass too).
		sc.warm = s.keyed.warmRows(sc.b)
		s.noteGlobalShare(sc.warm)
		s.scoreKeyedBeside(sc, sc.raw)
		if sc.deferred {
			s.startGlobal(sc, sc.q.Model, true) // (beside the keys' pass, as begin without overlap)
		}
		sc.landed = make(chan struct{})
		go func() {
			<-sc.done // (set: begin or startGlobal ran async, or nothing to score)
			<-sc.keyedDone
			close(sc.landed)
		}()
	}
}

// speculate says whether a chained batch's global scoring starts in begin on every record
// rather than with its keys' pass on the rows of keys without a model (deferred): when at least
// speculateShare of the records of the last batch whose keys' pass started were such rows. A
// deferred call starts only once the batch before finished, and runs beside the batch's keys'
// pass (as without overlap); one started in begin overlaps the batches in flight but scores the
// records of warm keys for nothing. Mostly cold (a fleet warming up), the global scoring is most
// of a batch's work and overlapping it is what Deps.Overlap is for; mostly warm, the rows left
// to it are few and deferring them costs little: nothing at all once every key is warm. (On an
// H100, deferring cost 5-9 % of records/s with every and with 40 % of the records cold:
// docs/BENCHMARKS.md §13.1.14; on two CPU cores nothing, §13.1.12.)
func (s *Stage) speculate() bool {
	return s.globalShare >= speculateShare
}

// speculateShare is the share of records left to the global model at or above which a chained
// batch's global scoring starts in begin on every record (speculate; a variable: the tests run
// both ways).
var speculateShare = 0.5

// noteGlobalShare keeps the share of a batch's records whose key had no model when its keys'
// pass started (warm: warmRows's, nil when no key has one), for speculate.
func (s *Stage) noteGlobalShare(warm []bool) {
	cold := len(warm)
	for _, w := range warm {
		if w {
			cold--
		}
	}
	s.globalShare = 1
	if len(warm) > 0 {
		s.globalShare = float64(cold) / float64(len(warm))
	}
}

// keysQuiet waits for a chained keys' pass still running and the builds it left (every Stage
// method that reads or changes the keys' state between Process calls calls it first, but
// KeyStats, which reads the figures the pass started from): the keys' state of a batch in flight
// whose keys' pass ended, with its builds made its keys' models.
func (s *Stage) keysQuiet() {
	if s.keyed == nil {
		return
	}
	for _, sc := range s.flight {
		sc.waitKeyed()
	}
	s.keyed.finishBuilds()
}

// waitKeyed waits for the keys' pass begin started beside the global scoring, if any.
func (sc *scoring) waitKeyed() {
	if sc.keyedDone != nil {
		<-sc.keyedDone
	}
}

// lanes is one more set of the model's detectors and their scratch (the first is the Stage's
// own), made at the first batch that needs it.
type lanes struct {
	detectors []Detector
	scratch   scoreScratch
}

// lane returns the detectors and the scratch of lane i (0 .. Deps.Overlap).
func (s *Stage) lane(i int) ([]Detector, *scoreScratch) {
	if i == 0 {
		return s.detectors, &s.scratch
	}
	for len(s.alt) < i {
		s.alt = append(s.alt, &lanes{})
	}
	l := s.alt[i-1]
	if l.detectors == nil {
		// The model's detectors keep per-batch buffers: a set of their own. The followers (the
		// hypercube) score only in finish, one batch at a time: shared.
		l.detectors = append(modelDetectors(s.deps.Accelerator, s.features), s.followerDetectors()...)
	}
	return l.detectors, &l.scratch
}

// followerDetectors are the detectors at the end of Stage.detectors that follow the window
// (NewStage puts them last): they score in finish, in stream order.
func (s *Stage) followerDetectors() []Detector {
	return s.detectors[len(s.detectors)-len(s.followers):]
}

// overlapping says whether Process overlaps batches: asked for, with an accelerator, in a
// stage that builds and scores (a scorer's models arrive between batches: it stays synchronous).
func (s *Stage) overlapping() bool {
	return s.deps.Overlap > 0 && s.deps.Accelerator != nil && (s.deps.Role == RoleAll || s.deps.Role == "")
}

// scoreAsync starts, on a goroutine of sc's own, the device call and then the fields of the
// detectors that are not followers. The calls of the batches in flight go to the accelerator
// at once (it takes concurrent calls: internal/accel), so that a device busy with a build's
// SolvingSet iteration serves all of them when it ends rather than one per iteration.
func (s *Stage) scoreAsync(sc *scoring, dets []Detector, plan *devicePlan) {
	a, own := s.deps.Accelerator, dets[:len(dets)-len(s.followers)]
	sc.done = make(chan struct{})
	go func() {
		defer close(sc.done)
		if plan != nil {
			if sc.err = runPlan(a, plan); sc.err != nil {
				return
			}
		}
		for _, d := range own {
			if sc.err = d.Score(&sc.q, sc.out); sc.err != nil {
				return
			}
		}
	}()
}

// wait waits for everything begin started (the device call, the detectors' fields beside it,
// the tail score): nothing writes into the lane afterwards.
func (sc *scoring) wait(dets []Detector) {
	if sc.done != nil {
		<-sc.done
	}
	for _, d := range dets {
		if r, ok := d.(*rankDetector); ok {
			r.settle()
		}
	}
}

// freeLane is a lane no batch in flight uses.
func (s *Stage) freeLane() int {
	for i := 0; ; i++ {
		used := false
		for _, sc := range s.flight {
			used = used || sc.lane == i
		}
		if !used {
			return i
		}
	}
}

// land finishes the oldest batch in flight (joining it to the window first if it has not yet),
// with what the synchronous Process does after scoring (the next build's trigger), then joins
// the next one to the window, and returns the finished batch. On an error every batch in
// flight is dropped (see drop).
func (s *Stage) land(current *batch.Batch) ([]*batch.Batch, error) {
	if len(s.flight) == 0 {
		return nil, nil
	}
	sc := s.flight[0]
	if !sc.pushed {
		if err := s.pushBatch(context.Background(), sc.b); err != nil {
			s.drop(current)
			return nil, err
		}
		sc.pushed = true
	}
	if err := s.finish(sc); err != nil {
		s.drop(current)
		return nil, err
	}
	s.flight[0], s.flight = nil, s.flight[1:] // (nil: the slice's room would hold the landed batch until append moves it)
	s.maybeRebuild()
	if len(s.flight) > 0 && !s.flight[0].pushed {
		// The next batch joins the window now: after the batch before it finished, as
		// without overlap.
		if err := s.pushBatch(context.Background(), s.flight[0].b); err != nil {
			s.flight = append([]*scoring{sc}, s.flight...) // (released with the others)
			s.drop(current)
			return nil, err
		}
		s.flight[0].pushed = true
	}
	s.saveDue() // (a save put off while this batch's keys' pass was ahead: before the next starts)
	s.startChained()
	return []*batch.Batch{sc.b}, nil
}

// drop waits for the work of every batch in flight and releases them, except current (the
// batch of the failing Process call, which its caller releases): the stage fails, nothing in
// flight was passed on, so nothing is acknowledged and all of it is read again after a restart.
func (s *Stage) drop(current *batch.Batch) {
	for _, sc := range s.flight {
		dets, _ := s.lane(sc.lane)
		sc.wait(dets)
		sc.waitKeyed()
		if sc.keyedDone != nil { // (saveKeys: not saved again)
			s.ext.stateAhead.Store(true)
		}
		delete(s.pending, sc.b)
		if sc.b != current {
			sc.b.Release()
		}
	}
	s.flight = nil
	if s.keyed != nil {
		s.keyed.finishBuilds() // (a chained pass's builds: finish would have made them its keys')
	}
}

// settle finishes every batch in flight before a call that changes what finish reads (the
// configuration, the window, the model): they wait in s.ready for the next Process, Drain or
// Flush to return them.
func (s *Stage) settle() error {
	for len(s.flight) > 0 {
		out, err := s.land(nil)
		if err != nil {
			return err
		}
		s.ready = append(s.ready, out...)
	}
	return nil
}

// Drain finishes the batches in flight and returns the batches ready to go on (none without
// overlap): the pipeline calls it before a live reconfiguration (the batches in flight finish
// under the configuration they began with).
func (s *Stage) Drain() ([]*batch.Batch, error) {
	if err := s.settle(); err != nil {
		return nil, err
	}
	return s.takeReady(nil), nil
}

// Landing is closed once the oldest batch in flight is scored (its device call and the
// detectors' fields beside it, and its keys' pass when it runs chained: finish waits for it), or
// at once when batches settled earlier wait to be returned; nil when nothing is in flight. The
// pipeline waits for it or for the next batch, whichever comes first, and then calls
// LandScored: a batch goes on as soon as it is scored, and the intake never waits for the
// device while a batch may arrive (docs/BENCHMARKS.md §4.9).
func (s *Stage) Landing() <-chan struct{} {
	switch {
	case len(s.ready) > 0:
		return closedChan
	case len(s.flight) == 0:
		return nil
	case s.flight[0].done == nil: // (scored synchronously)
		return closedChan
	case s.flight[0].landed != nil: // (its keys' pass chained: started with the batch first in flight)
		return s.flight[0].landed
	}
	return s.flight[0].done
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// LandScored finishes the batches in flight whose scoring ended, oldest first, up to the first
// still being scored, and returns them after any settled earlier. It waits for nothing but the
// tail score's last rows (begin's work on the cores, short beside the device call).
func (s *Stage) LandScored() ([]*batch.Batch, error) {
	return s.landWhile(nil, func() bool { return len(s.flight) > 0 && s.flight[0].scored() })
}

// landWhile lands the oldest batch in flight while more reports true, and returns the batches
// settled earlier and those landed. current is the batch of the Process call, if any (land's).
func (s *Stage) landWhile(current *batch.Batch, more func() bool) ([]*batch.Batch, error) {
	var out []*batch.Batch
	for more() {
		done, err := s.land(current)
		if err != nil {
			for _, o := range out { // finished, but the stage fails: never passed on
				o.Release()
			}
			return nil, err
		}
		out = append(out, done...)
	}
	return s.takeReady(out), nil
}

// scored says whether the batch's scoring (scoreAsync's goroutine) has ended, and its keys' pass
// when it runs chained (landed; finish would wait for it).
func (sc *scoring) scored() bool {
	if sc.done == nil {
		return true
	}
	done := sc.done
	if sc.landed != nil {
		done = sc.landed
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
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

// processOverlapped is Process with overlap, once a model serves: b begins, and while more than
// Deps.Overlap batches are in flight the oldest finishes and is returned.
func (s *Stage) processOverlapped(b *batch.Batch) ([]*batch.Batch, error) {
	next, err := s.begin(b, s.freeLane(), true)
	if err != nil {
		return nil, err
	}
	s.flight = append(s.flight, next)
	if len(s.flight) == 1 { // nothing before it in flight: it joins the window at once
		// (With a model serving, as overlap has, pushBatch waits for no build: no context.)
		if err := s.pushBatch(context.Background(), b); err != nil {
			s.drop(b)
			return nil, err
		}
		next.pushed = true
	}
	s.startChained()
	return s.landWhile(b, func() bool { return len(s.flight) > s.deps.Overlap })
}

// abandonFlight waits for the batches in flight and releases them unfinished.
func (s *Stage) abandonFlight() { s.drop(nil) }
