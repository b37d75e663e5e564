package detect

// RestoredNewest is, for each partition of the window restored from detect.state_dir, the
// offset of its newest record there, and the window's topic: where a partition without a
// committed offset resumes (ingest.WithResume: the offset after it). nil when no window was
// restored (none saved, a scorer's, a first start). Read it before the first batch: pipeline.New
// does, once the stage is made.
func (s *Stage) RestoredNewest() (topic string, newest map[int32]int64) {
	r := s.recs
	if r == nil || r.held() == 0 {
		return "", nil
	}
	newest = map[int32]int64{}
	c := uint64(len(r.parts))
	for i := r.pushed - uint64(r.held()); i < r.pushed; i++ {
		p, o := r.parts[i%c], r.offs[i%c]
		if hi, ok := newest[p]; !ok || o > hi {
			newest[p] = o
		}
	}
	return r.topic, newest
}
