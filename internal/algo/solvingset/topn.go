package solvingset

// TopN is OUT: a min-heap of the n largest weights offered. The GPU twin (gpukern) keeps its
// OUT in one too.
type TopN struct {
	n int
	w []float64
}

// NewTopN returns an empty OUT for the n largest weights (n >= 1).
func NewTopN(n int) *TopN { return &TopN{n: n} }

// Len is how many weights OUT holds: min(n, weights offered).
func (o *TopN) Len() int { return len(o.w) }

// Min is minOUT: the smallest of the n largest weights, 0 until n weights have been offered.
func (o *TopN) Min() float64 {
	if len(o.w) < o.n {
		return 0
	}
	return o.w[0]
}

// Offer adds x to OUT; once OUT holds n weights, x replaces the smallest only if larger.
func (o *TopN) Offer(x float64) {
	h := o.w
	if len(h) < o.n {
		h = append(h, x)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if h[p] <= h[i] {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
		o.w = h
		return
	}
	if x <= h[0] {
		return
	}
	h[0] = x
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h[r] < h[c] {
			c = r
		}
		if h[i] <= h[c] {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
