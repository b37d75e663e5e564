//go:build cuda

package gpukern_test

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
)

// TestSelectTopMatchesSort: the device's top-m selection (ss_select's radix selection per slice
// of 2048 points, the ss_select_merge levels and ss_select_tail) returns exactly the m active
// points with the largest upper bounds, ties broken by the lower index, as a full sort of the
// active points does. The cases reach every branch of the selection: slices with fewer active
// points than m (no selection), heavy ties (few distinct keys, equal keys across slices: the
// passes over the index bits), keys 0 and +inf, pruned and in-S points, one slice (ss_select_sort
// alone), one level (ss_select_tail's levels = 1: 10k, 50k, 20k, m = 1), two (its levels = 2:
// 300k, 200k, 100k m = 50 and 100), six (m = 1024: four ss_select_merge launches before the
// tail), m above 1024 (no level: every slice's list comes back). TestSelectPlan holds the plan's
// sizes on the CPU.
func TestSelectTopMatchesSort(t *testing.T) {
	d := openDevice(t)
	const margin = 1.0
	cases := []struct {
		name         string
		rows, m      int
		distinct     int     // distinct key values; 0: continuous
		pIn, pPruned float64 // shares of points in S and pruned
		minOUT       float64 // as a share of the key range; 0: none
		stale        bool    // select with minOUT 0, cut with minOUT (the one-device run's order)
	}{
		{"continuous 10k m=100", 10_000, 100, 0, 0.1, 0, 0, false},
		{"continuous 300k m=100 (2 levels)", 300_000, 100, 0, 0.05, 0, 0, false},
		{"3 keys 300k m=100 (ties across slices)", 300_000, 100, 3, 0.05, 0, 0, false},
		{"one key 50k m=37", 50_000, 37, 1, 0, 0, 0, false},
		{"mostly pruned 200k m=100", 200_000, 100, 0, 0.01, 0.99, 0, false},
		{"keys 0 and +inf 20k m=60", 20_000, 60, 2, 0, 0, 0, false},
		{"one slice 1500 m=10", 1500, 10, 40, 0.2, 0, 0, false},
		{"m=1 100k", 100_000, 1, 7, 0, 0, 0, false},
		{"m=1500 100k (no merge level)", 100_000, 1500, 0, 0.3, 0, 0, false},
		{"m=1024 70k many ties (6 levels)", 70_000, 1024, 5, 0, 0, 0, false},
		{"few active 100k m=100", 100_000, 100, 0, 0.9995, 0, 0, false},
		{"pruned by minOUT 100k m=50", 100_000, 50, 0, 0, 0, 0.5, false},
		{"pruned by minOUT after the selection 100k m=50", 100_000, 50, 0, 0, 0, 0.5, true},
		{"pruned by minOUT after the selection, few left 100k m=100", 100_000, 100, 0, 0, 0, 0.9995, true},
		{"pruned after the selection, m=1500 (host sort) 100k", 100_000, 1500, 0, 0, 0, 0.99, true},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(ci), 22))
			ub := make([]float64, c.rows)
			state := make([]int32, c.rows)
			for i := range ub {
				switch {
				case c.name == "keys 0 and +inf 20k m=60":
					ub[i] = [2]float64{0, math.Inf(1)}[r.IntN(2)]
				case c.distinct > 0:
					ub[i] = 1 + float64(r.IntN(c.distinct))/8
				default:
					ub[i] = r.Float64() * 10
				}
				if r.Float64() < c.pIn {
					state[i] = 1
				}
				if r.Float64() < c.pPruned {
					ub[i] = -2 // pruned: ub * margin < minOUT (0)
				}
			}
			minOUT := c.minOUT * 10
			if c.minOUT == 0 {
				minOUT = -1 // prunes exactly the points set to -2
			}
			type pair struct {
				key float64
				row int
			}
			var want []pair
			for i, u := range ub {
				if state[i] == 0 && !(u*margin < minOUT) {
					want = append(want, pair{u, i})
				}
			}
			slices.SortFunc(want, func(a, b pair) int {
				if c := cmp.Compare(b.key, a.key); c != 0 {
					return c
				}
				return cmp.Compare(a.row, b.row)
			})
			want = want[:min(c.m, len(want))]
			selOUT := minOUT
			if c.stale {
				selOUT = -1
			}
			rows, keys, err := gpukern.SelectTopForTest(d, ub, state, c.m, margin, selOUT, minOUT)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != len(want) {
				t.Fatalf("%d rows, want %d", len(rows), len(want))
			}
			for i, w := range want {
				if rows[i] != w.row || math.Float64bits(keys[i]) != math.Float64bits(w.key) {
					t.Fatalf("position %d: row %d key %v, want row %d key %v", i, rows[i], keys[i], w.row, w.key)
				}
			}
		})
	}
}
