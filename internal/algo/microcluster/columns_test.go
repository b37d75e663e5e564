package microcluster

import (
	"errors"
	"testing"
)

// TestCheckColumns: the shapes CheckColumns refuses, each error wrapping the caller's sentinel
// and only it (density's errors stay density.ErrShape), and the row counts it returns.
func TestCheckColumns(t *testing.T) {
	t.Parallel()
	mine := errors.New("caller: inconsistent shapes")
	col := func(n int) []float32 { return make([]float32, n) }
	for _, c := range []struct {
		name       string
		means, sds [][]float32
		rows       int
		msg        string // "" when accepted
	}{
		{"no dimensions", nil, nil, 0, "caller: inconsistent shapes: no dimensions"},
		{"ragged means", [][]float32{col(3), col(2)}, nil, 0, "caller: inconsistent shapes: dimension 1 has 2 rows, dimension 0 has 3"},
		{"sds for fewer dimensions", [][]float32{col(3), col(3)}, [][]float32{col(3)}, 0, "caller: inconsistent shapes: 1 uncertainty columns for 2 dimensions"},
		{"ragged sds", [][]float32{col(3), col(3)}, [][]float32{col(3), col(4)}, 0, "caller: inconsistent shapes: uncertainty column 1 has 4 rows, want 3"},
		{"empty sds for some dimensions", [][]float32{col(3)}, [][]float32{}, 0, "caller: inconsistent shapes: 0 uncertainty columns for 1 dimensions"},
		{"certain", [][]float32{col(3), col(3)}, nil, 3, ""},
		{"uncertain", [][]float32{col(3), col(3)}, [][]float32{col(3), col(3)}, 3, ""},
		{"no rows", [][]float32{col(0)}, [][]float32{col(0)}, 0, ""},
	} {
		n, err := CheckColumns(c.means, c.sds, mine)
		switch {
		case c.msg == "" && (err != nil || n != c.rows):
			t.Errorf("%s: %d rows, %v; want %d rows", c.name, n, err, c.rows)
		case c.msg != "" && (err == nil || err.Error() != c.msg || !errors.Is(err, mine) || errors.Is(err, errShape)):
			t.Errorf("%s: %v; want %q wrapping only the caller's sentinel", c.name, err, c.msg)
		}
	}
}
