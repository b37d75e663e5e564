package density

import "math"

// Coefficients of Acklam's rational approximation of the inverse normal CDF (P. J. Acklam, "An
// algorithm for computing the inverse normal cumulative distribution function", 2003). Relative
// error below 1.15e-9 over (0, 1).
var (
	acklamA = [6]float64{-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
		1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00}
	acklamB = [5]float64{-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
		6.680131188771972e+01, -1.328068155288572e+01}
	acklamC = [6]float64{-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
		-2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00}
	acklamD = [4]float64{7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
		3.754408661907416e+00}
)

// acklamLow is the break point between Acklam's central and tail regions.
const acklamLow = 0.02425

// PhiInv is the inverse standard normal CDF by Acklam's algorithm, in float64, without the
// optional Halley refinement step (the GPU twin computes the same three branches; the 1.15e-9
// relative error is far below what s <= 10^4 samples can resolve). p must be in (0, 1); Uniform
// guarantees it. PhiInv(0) = -Inf and PhiInv(1) = +Inf, other values outside give NaN.
func PhiInv(p float64) float64 {
	switch {
	case p <= 0 || p >= 1:
		if p == 0 {
			return math.Inf(-1)
		}
		if p == 1 {
			return math.Inf(1)
		}
		return math.NaN()
	case p < acklamLow:
		q := math.Sqrt(-2 * math.Log(p))
		return horner6(&acklamC, q) / (float64(horner4(&acklamD, q)*q) + 1)
	case p <= 1-acklamLow:
		q := p - 0.5
		r := q * q
		return horner6(&acklamA, r) * q / (float64(horner5(&acklamB, r)*r) + 1)
	default:
		q := math.Sqrt(-2 * math.Log(1-p))
		return -horner6(&acklamC, q) / (float64(horner4(&acklamD, q)*q) + 1)
	}
}

// horner6, horner5 and horner4 are the polynomial c[0] x^(n-1) + ... + c[n-1] by Horner's rule,
// (((c[0] x + c[1]) x + c[2]) ...), each product rounded before its add: the conversion keeps
// the Go compiler from fusing them (it fuses x*y+z on arm64, and on amd64 at GOAMD64=v3), so
// every platform gets amd64's default bits (.ci/nofma.sh). Written out, not as a loop over a
// slice: the loop made PhiInv a quarter slower and DetectRecords' sampled path 7% slower.
func horner6(c *[6]float64, x float64) float64 {
	acc := float64(c[0]*x) + c[1]
	acc = float64(acc*x) + c[2]
	acc = float64(acc*x) + c[3]
	acc = float64(acc*x) + c[4]
	return float64(acc*x) + c[5]
}

func horner5(c *[5]float64, x float64) float64 {
	acc := float64(c[0]*x) + c[1]
	acc = float64(acc*x) + c[2]
	acc = float64(acc*x) + c[3]
	return float64(acc*x) + c[4]
}

func horner4(c *[4]float64, x float64) float64 {
	acc := float64(c[0]*x) + c[1]
	acc = float64(acc*x) + c[2]
	return float64(acc*x) + c[3]
}

// Phi is the standard normal CDF, computed as erfc(-z/sqrt 2)/2 so that the lower tail keeps
// its relative accuracy.
func Phi(z float64) float64 {
	return 0.5 * math.Erfc(-z/math.Sqrt2)
}

// normalMass is P(a < X < b) for X ~ N(mu, sd^2), sd > 0. In the upper tail the difference is
// taken between upper-tail masses so that nothing cancels.
func normalMass(a, b, mu, sd float64) float64 {
	za, zb := (a-mu)/sd, (b-mu)/sd
	if za > 0 {
		return float64(Phi(-za)) - float64(Phi(-zb))
	}
	return float64(Phi(zb)) - float64(Phi(za))
}
