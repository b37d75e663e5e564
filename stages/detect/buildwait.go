package detect

import (
	"context"
	"sync"
	"time"
)

// The stop's waits, each bounded by its hard deadline (run.shutdown_timeout): a model build in
// progress (awaitBuild), the batches in flight and the keys' passes and builds they left
// (quietWithin: AbandonContext, CloseContext).

// AwaitBuild installs the model of a build in progress once it ends (announced to Deps.OnModel,
// saved to state_dir), waiting until ctx ends at most, when the model is lost (awaitBuild). A
// builder's graceful stop calls it after its final commit, so that the model goes out with the
// last publications; Close waits too.
func (s *Stage) AwaitBuild(ctx context.Context) { s.awaitBuild(ctx) }

// awaitBuild installs the running build's model once the build ends, waiting until ctx ends at
// most: at a stop, ctx is its hard deadline (run.shutdown_timeout), after which the supervisor's
// kill comes (a full build at a window of millions takes seconds to minutes on a CPU). A build
// still running then is left to end on its own goroutine, into a channel nobody reads any more
// (the stage takes a new one), and its model is lost: not served, not saved to state_dir, not
// published; the next start builds one again. The log says so.
func (s *Stage) awaitBuild(ctx context.Context) {
	if !s.builds.running {
		return
	}
	select {
	case r := <-s.builds.done:
		s.finishBuild(r)
		return
	case <-ctx.Done():
	}
	select { // (both ready: the model is taken)
	case r := <-s.builds.done:
		s.finishBuild(r)
		return
	default:
	}
	s.loseBuild()
}

// loseBuild leaves the running build to end alone, its model lost (awaitBuild).
func (s *Stage) loseBuild() {
	s.builds.running, s.builds.done = false, make(chan buildResult, 1)
	s.deps.Log.Warn().Uint64("model_version", s.builds.version+1).
		Dur("building_for", time.Since(s.builds.started).Round(time.Millisecond)).
		Msg("model build still running at the stop's deadline: its model is lost (not served, saved to state_dir or published); the next start builds again")
}

// quietWithin waits, until ctx ends at most (a stop's hard deadline), for the batches in flight
// (abandonFlight) and the keys' passes and builds they left (keysQuiet), then runs then (nil:
// nothing): the keys' state is then the stop's, and the caller goes on. Past ctx the wait is
// left to a goroutine of its own, which ends it, runs then and, after it, left (nil: nothing),
// and quietWithin returns false: the dropped batches are released when their work ends, the
// keys' and alarm state are not saved (the last complete save stands, the next start loads
// it), the running model build, if any, is lost; the log says so. A wait left so is waited for
// first by the next quietWithin (Abandon's by Close's), which is cut by its own ctx alike.
// Before, a keys' pass held in a device call that did not return held the stop past
// run.shutdown_timeout until the supervisor's kill.
func (s *Stage) quietWithin(ctx context.Context, then, left func()) bool {
	before := s.ext.quieting
	if before == nil && len(s.flight) == 0 && (s.keyed == nil || s.keyed.building == nil) { // (nothing to wait for)
		if then != nil {
			then()
		}
		return true
	}
	var mu sync.Mutex
	var ended, gone bool
	done := make(chan struct{})
	inFlight := 0 // (read only without a wait left running: the flight is then its, and its goroutine sets s.flight)
	if before == nil {
		inFlight = len(s.flight)
	}
	go func() {
		if before != nil {
			<-before
		}
		s.abandonFlight()
		s.keysQuiet()
		if then != nil {
			then()
		}
		mu.Lock()
		ended = true
		isGone := gone
		mu.Unlock()
		if isGone && left != nil {
			left()
		}
		if isGone {
			s.ext.leftover.Done()
		}
		close(done)
	}()
	select {
	case <-done:
		s.ext.quieting = nil
		return true
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	if ended { // (the goroutine's writes happened before ended was set)
		s.ext.quieting = nil
		return true
	}
	gone = true
	s.ext.leftover.Add(1)
	s.ext.quieting = done
	s.ext.stateAhead.Store(true)
	if before == nil { // (a wait left by an earlier cut, Abandon's, was logged by it: one warning a stop)
		s.deps.Log.Warn().Int("batches_in_flight", inFlight).Msg("the keys' pass or builds of the batches in flight were still running at the stop's deadline (run.shutdown_timeout): left to end alone; keys' and alarm state not saved, the last complete save stands and the next start loads it")
	}
	if s.builds.running {
		s.loseBuild()
	}
	return false
}

// closeKeyed releases the keys' device models and hold on huge pages.
func (s *Stage) closeKeyed() {
	if s.keyed != nil {
		if err := s.keyed.close(); err != nil {
			s.deps.Log.Warn().Err(err).Msg("releasing the keys' models on the device")
		}
	}
}

// Abandon is AbandonContext waiting for the batches in flight as long as they take.
func (s *Stage) Abandon() { s.AbandonContext(context.Background()) }

// AbandonContext releases the batches still held for a first model when the run is abandoned
// (a failure or the hard stop, so Flush is not reached): they were never passed on, so never
// acknowledged, and are read again after a restart; and drops the batches in flight once their
// scoring and keys' pass end, waiting until ctx ends at most (the stop's hard deadline): past it
// the rest is left to end alone (quietWithin), and Close saves no state. After Flush it has
// nothing to do.
func (s *Stage) AbandonContext(ctx context.Context) { s.quietWithin(ctx, s.releaseHeld, nil) }

// releaseHeld releases the batches ready or held for a first model (AbandonContext).
func (s *Stage) releaseHeld() {
	for _, b := range s.ready {
		delete(s.pending, b)
		b.Release()
	}
	s.ready = nil
	for _, b := range s.held {
		delete(s.pending, b)
		b.Release()
	}
	s.held, s.heldRecords = nil, 0
}
