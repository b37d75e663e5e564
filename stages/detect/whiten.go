package detect

import (
	"math"
)

// The whitened distance space (detect.distance_space: whitened; docs/bench/notes/whiten25_rule.md).
//
// The distance score's standardised space (standardisationOn) scales each feature alone, so two
// sensors that always move together and now disagree by 3 sd each are ordinary in both
// marginals and only moderately far in it. Under whitened, the global model maps a record's
// standardised coordinates z (clamped to ±distanceLimit, as before) through
//
//	x' = W z,  W = S_a^{-1/2} = P diag(1/sqrt(lambda)) P^T,  S_a = (1 - a) S + a diag(S)
//
// where S is the covariance of the standardised values winsorised at each feature's own
// [0.5 %, 99.5 %] quantiles (standardisationOn's clamp) over whitenSample records chosen by
// record identity, and a = whitenShrink. W is the symmetric root, unique whatever the
// eigen-solver's order and signs of P. A feature without spread in those winsorised values
// (constant, or a rare binary value below its 0.5 % quantile) is left out: its row and column of
// W are the identity's, so it keeps its standardised coordinate. Euclidean distances in x' are
// Mahalanobis distances under S_a. A key's model is never whitened (keyed_build.go).

// whitenShrink is a, the shrinkage of the covariance towards its diagonal: every eigenvalue of
// S_a is at least a times the smallest variance, so a disagreement along a collinear direction
// counts at most 1/sqrt(a) (3.2) times what it counts in the standardised space. Fixed a priori,
// on no data (the usual order of a Ledoit-Wolf intensity; whiten25_rule.md).
const whitenShrink = 0.1

// whitenSample is how many records (chosen by identity) estimate the covariance.
const whitenSample = 16384

// saltWhiten salts the record keys of the covariance's sample ("whit").
const saltWhiten = 0x77686974

// whitenFloor bounds S_a's eigenvalues below, relative to the largest (numerically zero ones).
const whitenFloor = 1e-12

// jacobiSweeps bounds the eigen-solver's sweeps (it converges in well under 20 for any size here).
const jacobiSweeps = 64

// whitening returns W (row-major, d x d) for the window cols, whose sorted columns are sorted,
// standardised by center and unit; keys are the window's record keys (recordKeys). One feature
// gives [1] (the identity: distanceSpace takes no product). A function of the window's records
// whatever their order: the sample is in key order and every sum runs in it.
func whitening(cols, sorted [][]float32, keys []keyedRow, center, unit []float64) []float64 {
	d := len(cols)
	if d == 1 {
		return []float64{1}
	}
	w := make([]float64, d*d)
	for j := range d {
		w[j*d+j] = 1
	}
	// Each feature's winsorising bounds in its standardised units (standardisationOn's).
	lo, hi := make([]float64, d), make([]float64, d)
	for j, buf := range sorted {
		n := len(buf)
		lo[j] = (float64(buf[int(0.005*float64(n-1))]) - center[j]) / unit[j]
		hi[j] = (float64(buf[int(math.Ceil(0.995*float64(n-1)))]) - center[j]) / unit[j]
	}
	var act []int // the features with spread
	for j := range d {
		if hi[j] > lo[j] {
			act = append(act, j)
		}
	}
	a := len(act)
	if a < 2 {
		return w
	}
	idx := smallestKeys(keys, whitenSample, saltWhiten)
	n := float64(len(idx))
	z := make([][]float64, a)
	for t, j := range act {
		z[t] = make([]float64, len(idx))
		var sum float64
		for i, row := range idx {
			v := min(max((float64(cols[j][row])-center[j])/unit[j], lo[j]), hi[j])
			z[t][i] = v
			sum += v
		}
		mean := sum / n
		for i := range z[t] {
			z[t][i] -= mean
		}
	}
	s := make([]float64, a*a)
	for p := range a {
		for q := p; q < a; q++ {
			var c float64
			for i, v := range z[p] {
				c += float64(v * z[q][i])
			}
			c /= n
			if p != q {
				c = float64((1 - whitenShrink) * c)
			}
			s[p*a+q], s[q*a+p] = c, c
		}
	}
	vals, vecs := jacobiEigen(s, a)
	top := 0.0
	for _, l := range vals {
		top = max(top, l)
	}
	inv := make([]float64, a)
	for t, l := range vals {
		inv[t] = 1 / math.Sqrt(max(l, float64(whitenFloor*top)))
	}
	// W's block of the active features: P diag(inv) P^T (vecs: column t is eigenvector t).
	for p := range a {
		for q := range a {
			var c float64
			for t := range a {
				c += float64(float64(vecs[p*a+t]*inv[t]) * vecs[q*a+t])
			}
			w[act[p]*d+act[q]] = c
		}
	}
	return w
}

// jacobiEigen returns the eigenvalues of the symmetric a x a matrix s (row-major; overwritten)
// and its eigenvectors as the columns of a row-major matrix, by cyclic Jacobi rotations in a
// fixed order (deterministic; every product rounded before its add).
func jacobiEigen(s []float64, a int) (vals, vecs []float64) {
	vecs = make([]float64, a*a)
	for i := range a {
		vecs[i*a+i] = 1
	}
	for range jacobiSweeps {
		var off, diag float64
		for p := range a {
			diag += float64(s[p*a+p] * s[p*a+p])
			for q := p + 1; q < a; q++ {
				off += float64(s[p*a+q] * s[p*a+q])
			}
		}
		if !(off > float64(1e-30*diag)) {
			break
		}
		for p := range a {
			for q := p + 1; q < a; q++ {
				apq := s[p*a+q]
				if apq == 0 {
					continue
				}
				app, aqq := s[p*a+p], s[q*a+q]
				theta := (aqq - app) / float64(2*apq)
				t := 1 / (math.Abs(theta) + math.Sqrt(float64(theta*theta)+1))
				if theta < 0 {
					t = -t
				}
				c := 1 / math.Sqrt(float64(t*t)+1)
				sn := float64(t * c)
				for k := range a { // columns p and q
					kp, kq := s[k*a+p], s[k*a+q]
					s[k*a+p] = float64(c*kp) - float64(sn*kq)
					s[k*a+q] = float64(sn*kp) + float64(c*kq)
				}
				for k := range a { // rows p and q
					pk, qk := s[p*a+k], s[q*a+k]
					s[p*a+k] = float64(c*pk) - float64(sn*qk)
					s[q*a+k] = float64(sn*pk) + float64(c*qk)
				}
				s[p*a+q], s[q*a+p] = 0, 0
				for k := range a {
					kp, kq := vecs[k*a+p], vecs[k*a+q]
					vecs[k*a+p] = float64(c*kp) - float64(sn*kq)
					vecs[k*a+q] = float64(sn*kp) + float64(c*kq)
				}
			}
		}
	}
	vals = make([]float64, a)
	for i := range a {
		vals[i] = s[i*a+i]
	}
	return vals, vecs
}

// whitenedSpace is distanceSpace under a whitening w (d x d, d > 1): each row's standardised
// coordinates (clamped as the standardised space's), then W times them, clamped again.
func (r *Ranker) whitenedSpace(cols, dst [][]float32) {
	d, w := len(cols), r.Whiten
	onRows(len(cols[0]), func(lo, hi int) {
		z := make([]float64, d)
		for i := lo; i < hi; i++ {
			for j, c := range cols {
				z[j] = max(-distanceLimit, min(distanceLimit, (float64(c[i])-r.Center[j])/r.Unit[j]))
			}
			for p := range d {
				row := w[p*d : (p+1)*d]
				var x float64
				for q, v := range row {
					if v != 0 {
						x += float64(v * z[q])
					}
				}
				dst[p][i] = float32(max(-distanceLimit, min(distanceLimit, x)))
			}
		}
	})
}
