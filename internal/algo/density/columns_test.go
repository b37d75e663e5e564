package density

import (
	"errors"
	"math"
	"testing"
)

// TestCheckColumnsErrors: density's input check is microcluster's shape check, its errors
// wrapping density's ErrShape, then its own refusal of non-finite means and of uncertainties that
// are negative or not finite.
func TestCheckColumnsErrors(t *testing.T) {
	t.Parallel()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		name       string
		means, sds [][]float32
		shape      bool   // an ErrShape
		msg        string // "" when accepted
	}{
		{"ragged means", [][]float32{{1, 2}, {1}}, nil, true, "density: inconsistent shapes: dimension 1 has 1 rows, dimension 0 has 2"},
		{"ragged sds", [][]float32{{1, 2}}, [][]float32{{1}}, true, "density: inconsistent shapes: uncertainty column 0 has 1 rows, want 2"},
		{"NaN mean", [][]float32{{1, 2}, {3, nan}}, nil, false, "density: row 1 dimension 1 is NaN"},
		{"infinite mean", [][]float32{{inf}}, [][]float32{{0}}, false, "density: row 0 dimension 0 is +Inf"},
		{"negative sd", [][]float32{{1, 2}}, [][]float32{{0, -1}}, false, "density: uncertainty of row 1 dimension 0 is -1, want finite >= 0"},
		{"NaN sd", [][]float32{{1}}, [][]float32{{nan}}, false, "density: uncertainty of row 0 dimension 0 is NaN, want finite >= 0"},
		{"infinite sd", [][]float32{{1}}, [][]float32{{inf}}, false, "density: uncertainty of row 0 dimension 0 is +Inf, want finite >= 0"},
		{"valid", [][]float32{{1, 2}, {3, 4}}, [][]float32{{0, 1}, {2, 0}}, false, ""},
	} {
		_, _, err := Scaling{Min: make([]float64, len(c.means)), Scale: []float64{1, 1}[:len(c.means)]}.Apply(c.means, c.sds)
		switch {
		case c.msg == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.msg != "" && (err == nil || err.Error() != c.msg || errors.Is(err, ErrShape) != c.shape):
			t.Errorf("%s: %v; want %q (an ErrShape: %v)", c.name, err, c.msg, c.shape)
		}
	}
}
