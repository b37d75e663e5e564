package solvingset

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// splitNodes makes CPU nodes over consecutive partitions of cols of the given sizes.
func splitNodes(cols [][]float32, sizes []int, k int) []Node {
	var nodes []Node
	lo := 0
	for _, s := range sizes {
		part := make([][]float32, len(cols))
		for j := range cols {
			part[j] = cols[j][lo : lo+s]
		}
		nodes = append(nodes, NewCPUNode(part, k, 2))
		lo += s
	}
	return nodes
}

// partitionSizes splits rows into j parts, uneven on purpose (the last part takes the rest,
// and a part may hold a single row).
func partitionSizes(rows, j int) []int {
	sizes := make([]int, j)
	left := rows
	for i := range j - 1 {
		sizes[i] = max(1, rows/(j+i))
		left -= sizes[i]
	}
	sizes[j-1] = left
	return sizes
}

// TestDistributedMatchesBruteForce: the distributed solving set over 1 to 4 CPU nodes, lazy or
// not, returns BruteForce's top-n and w* bit for bit, and a solving set (checkResult), on every
// test data set (duplicates, ties at w*, one dimension, all points equal).
func TestDistributedMatchesBruteForce(t *testing.T) {
	t.Parallel()
	for si, ds := range dataSets {
		cols := ds.gen(rand.New(rand.NewPCG(uint64(si), 7)))
		rows := len(cols[0])
		for _, c := range []struct{ k, n, m int }{{1, 1, 7}, {5, 10, 20}, {50, 10, 100}, {7, rows - 1, 30}, {3, 5, rows + 5}} {
			if c.k >= rows {
				continue
			}
			want, err := BruteForce(cols, Params{K: c.k, N: c.n, M: 1, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, nodes := range []int{1, 2, 4} {
				for _, lazy := range []bool{false, true} {
					p := Params{K: c.k, N: c.n, M: c.m, Seed: uint64(nodes)}
					label := fmt.Sprintf("%s rows=%d k=%d n=%d m=%d nodes=%d lazy=%v", ds.name, rows, c.k, c.n, c.m, nodes, lazy)
					got, err := DistributedSolvingSet(splitNodes(cols, partitionSizes(rows, nodes), c.k), len(cols), p, lazy)
					if err != nil {
						t.Fatalf("%s: %v", label, err)
					}
					checkResult(t, label, cols, p, got.Result, want)
				}
			}
		}
	}
}

// TestDistributedLazySendsLess: on a larger set the lazy merge sends fewer list values than
// the full lists and still finds SolvingSet's top-n; it has to ask again sometimes (the second
// round is exercised), and the same first candidates give the same first iteration.
func TestDistributedLazySendsLess(t *testing.T) {
	t.Parallel()
	cols := gaussCols(rand.New(rand.NewPCG(5, 5)), 6000, 3, 1)
	p := Params{K: 20, N: 10, M: 50, Seed: 3, Workers: 2}
	want, err := SolvingSet(cols, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	var full, lazy DistributedResult
	for _, l := range []bool{false, true} {
		got, err := DistributedSolvingSet(splitNodes(cols, []int{1500, 1500, 1500, 1500}, p.K), 3, p, l)
		if err != nil {
			t.Fatal(err)
		}
		if got.WStar != want.WStar || fmt.Sprint(got.Outliers) != fmt.Sprint(want.Outliers) {
			t.Fatalf("lazy=%v: w* %v outliers %v; SolvingSet %v %v", l, got.WStar, got.Outliers, want.WStar, want.Outliers)
		}
		if l {
			lazy = got
		} else {
			full = got
		}
	}
	t.Logf("list values sent: full %d, lazy %d (%d refetches); iterations %d, |S| %d (one node: %d, %d)",
		full.ListValues, lazy.ListValues, lazy.Refetches, lazy.Iterations, len(lazy.SolvingSet), want.Iterations, len(want.SolvingSet))
	if lazy.ListValues >= full.ListValues || lazy.Refetches == 0 {
		t.Errorf("lazy sent %d values with %d refetches, full %d: want fewer, with some refetches", lazy.ListValues, lazy.Refetches, full.ListValues)
	}
}
