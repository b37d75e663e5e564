package detect

import "github.com/outlierd/outlierd/stages/microcluster"

// The followers' plumbing (Follower: the hypercube's counts): the stage's window pushes and
// recounts as the followers see them.

// evictedSink is where Push reports the evicted records: the stage's scratch while a follower
// follows the window, else nowhere (nil).
func (s *Stage) evictedSink() *microcluster.Evicted {
	for _, f := range s.followers {
		if f.Following() {
			s.evicted.Reset()
			return &s.evicted
		}
	}
	return nil
}

// follow applies one push (the batch's records added, s.evicted removed) to the followers, less
// the records that addedOut and evictedOut mark (nil: none; hypercube_warm.go).
func (s *Stage) follow(added [][]float32, addedOut, evictedOut []bool) error {
	var evicted [][]float32
	if s.evicted.Len() > 0 {
		evicted = s.evicted.Cols
	}
	added, evicted = rowsKept(added, addedOut), rowsKept(evicted, evictedOut)
	for _, f := range s.followers {
		if f.Following() {
			if err := f.Follow(s.model, added, evicted); err != nil {
				return err
			}
		}
	}
	return nil
}

// followAfresh is resetFollowers where the stage goes on whatever comes of it: at a model's
// install and a reconfiguration (of the window, of the detector), a follower that cannot count
// (a scorer's model published without counts) is off until the next model.
func (s *Stage) followAfresh() {
	if err := s.resetFollowers(); err != nil {
		s.deps.Log.Error().Err(err).Msg("hypercube detector off until the next model")
	}
}

// resetFollowers recounts the followers' state from the window under the serving model and
// the configuration in force.
func (s *Stage) resetFollowers() error {
	out := s.countsLeaveOut()
	for _, f := range s.followers {
		if err := f.Reset(s.model, &s.cfg, s.win, out); err != nil {
			return err
		}
	}
	return nil
}
