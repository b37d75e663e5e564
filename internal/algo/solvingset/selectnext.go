package solvingset

import "slices"

// Steps e and f of SolvingSet: the next candidates.

// selItem is a point considered for the next candidates.
type selItem struct {
	ub  float64
	row int32
	pos int32
}

// better orders by UB descending, ties by row ascending (deterministic for any worker count).
func (a selItem) better(b selItem) bool {
	return a.ub > b.ub || (a.ub == b.ub && a.row < b.row)
}

// selectNext returns the positions of the next candidates (the m active points with the
// largest UB, best first) and the number of active points. Each worker keeps the m best of its
// blocks in a min-heap (worst on top); the union is sorted.
func (s *solver) selectNext() ([]int, int) {
	m := s.m
	for _, sc := range s.scratch {
		sc.topm = sc.topm[:0]
	}
	actives := make([]counter, s.workers)
	parallelFor(s.workers, s.live, 1<<14, func(w, lo, hi int) {
		sc := s.scratch[w]
		h := sc.topm
		var active int64
		for q := lo; q < hi; q++ {
			ub := s.ub[q]
			if s.pruned(ub) {
				continue
			}
			active++
			it := selItem{ub: ub, row: s.row[q], pos: int32(q)}
			if len(h) < m {
				h = append(h, it)
				siftUpWorst(h, len(h)-1)
			} else if it.better(h[0]) {
				h[0] = it
				siftDownWorst(h, 0)
			}
		}
		sc.topm = h
		actives[w].n += active
	})
	var all []selItem
	for _, sc := range s.scratch {
		all = append(all, sc.topm...)
	}
	slices.SortFunc(all, func(a, b selItem) int {
		if a.better(b) {
			return -1
		}
		if b.better(a) {
			return 1
		}
		return 0
	})
	all = all[:min(len(all), m)]
	pos := make([]int, len(all))
	for i, it := range all {
		pos[i] = int(it.pos)
	}
	return pos, int(sumCounters(actives))
}

// siftUpWorst and siftDownWorst maintain a heap whose root is the worst item.
func siftUpWorst(h []selItem, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[p].better(h[i]) {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func siftDownWorst(h []selItem, i int) {
	n := len(h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && h[c].better(h[r]) {
			c = r
		}
		if !h[i].better(h[c]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
