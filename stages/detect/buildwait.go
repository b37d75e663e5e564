package detect

import (
	"context"
	"time"
)

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
	s.builds.running, s.builds.done = false, make(chan buildResult, 1)
	s.deps.Log.Warn().Uint64("model_version", s.builds.version+1).
		Dur("building_for", time.Since(s.builds.started).Round(time.Millisecond)).
		Msg("model build still running at the stop's deadline: its model is lost (not served, saved to state_dir or published); the next start builds again")
}
