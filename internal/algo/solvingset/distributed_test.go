package solvingset

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// splitNodes makes CPU nodes over consecutive partitions of cols of the given sizes.
func splitNodes(cols [][]float32, sizes []int, k int) []Node {
	var nodes []Node
	lo := 0
	for _, s := range sizes {
		nodes = append(nodes, heapCheckNode{NewCPUNode(partCols(cols, lo, lo+s), k, 2), k})
		lo += s
	}
	return nodes
}

// heapCheckNode fails a Take or Step whose LNN are not max-heaps: the supervisor hands them on
// as they are (Node's contract).
type heapCheckNode struct {
	Node
	k int
}

func (n heapCheckNode) Take(rows []int) ([]float32, []float32, error) {
	x, lnn, err := n.Node.Take(rows)
	if err == nil {
		err = heapsCheck(lnn, n.k)
	}
	return x, lnn, err
}

func (n heapCheckNode) Step(taken []int, coords, lnn []float32, minOUT float64, m int) ([]float32, []bool, Proposal, error) {
	lnnc, done, next, err := n.Node.Step(taken, coords, lnn, minOUT, m)
	if err == nil {
		err = heapsCheck(next.LNN, n.k)
	}
	return lnnc, done, next, err
}

// heapsCheck says where lists of k values are not max-heaps.
func heapsCheck(lists []float32, k int) error {
	for at := 0; at+k <= len(lists); at += k {
		h := lists[at : at+k]
		for i := 1; i < k; i++ {
			if h[i] > h[(i-1)/2] {
				return fmt.Errorf("list %d is not a max-heap: [%d] %v above its parent %v", at/k, i, h[i], h[(i-1)/2])
			}
		}
	}
	return nil
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

// TestMergeProposals: the merge of the nodes' proposals is the best m of their union sorted by
// UB descending, global row ascending (what the supervisor sorted before), ties across nodes
// and short or empty proposals included.
func TestMergeProposals(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		J := 1 + r.IntN(4)
		offset := make([]int, J+1)
		props := make([]Proposal, J)
		var all []pick
		for j := range J {
			rows := r.IntN(40)
			offset[j+1] = offset[j] + 1000
			n := r.IntN(min(rows, 12) + 1)
			local := r.Perm(1000)[:n]
			for _, lr := range local {
				ub := float64(r.IntN(5)) // few values: ties within and across nodes
				props[j].Rows = append(props[j].Rows, lr)
				props[j].UB = append(props[j].UB, ub)
			}
			// a node's proposal is best first: UB descending, lower row first
			idx := make([]int, n)
			for i := range idx {
				idx[i] = i
			}
			slices.SortFunc(idx, func(a, b int) int {
				if c := cmp.Compare(props[j].UB[b], props[j].UB[a]); c != 0 {
					return c
				}
				return cmp.Compare(props[j].Rows[a], props[j].Rows[b])
			})
			var rs []int
			var us []float64
			for _, i := range idx {
				rs, us = append(rs, props[j].Rows[i]), append(us, props[j].UB[i])
			}
			props[j].Rows, props[j].UB = rs, us
			for i := range rs {
				all = append(all, pick{offset[j] + rs[i], us[i], j, i})
			}
		}
		slices.SortFunc(all, func(a, b pick) int {
			if c := cmp.Compare(b.ub, a.ub); c != 0 {
				return c
			}
			return cmp.Compare(a.row, b.row)
		})
		m := 1 + r.IntN(20)
		want := all[:min(m, len(all))]
		if got := mergeProposals(nil, props, offset, m); !slices.Equal(got, want) {
			t.Fatalf("trial %d (m=%d): %v, want %v", trial, m, got, want)
		}
	}
}

// swappedNode is a CPU node whose proposals are out of order (its first two rows swapped): it
// breaks Node's contract (best first), which mergeProposals relies on.
type swappedNode struct{ *CPUNode }

func (n swappedNode) Step(taken []int, coords, lnn []float32, minOUT float64, m int) ([]float32, []bool, Proposal, error) {
	lnnc, done, p, err := n.CPUNode.Step(taken, coords, lnn, minOUT, m)
	if len(p.Rows) >= 2 && (p.UB[0] != p.UB[1] || p.Rows[0] != p.Rows[1]) {
		p.Rows[0], p.Rows[1] = p.Rows[1], p.Rows[0]
		p.UB[0], p.UB[1] = p.UB[1], p.UB[0]
	}
	return lnnc, done, p, err
}

// TestDistributedRejectsUnorderedProposal: a node whose proposal is not best first (UB
// descending, lower row first) is an error naming it, not a silently different candidate
// choice (the supervisor merges the proposals as sorted lists; it sorted their union before).
func TestDistributedRejectsUnorderedProposal(t *testing.T) {
	cols := dataSets[0].gen(rand.New(rand.NewPCG(1, 7)))
	rows := len(cols[0])
	nodes := splitNodes(cols, []int{rows / 2, rows - rows/2}, 5)
	nodes[1] = swappedNode{nodes[1].(heapCheckNode).Node.(*CPUNode)}
	_, err := DistributedSolvingSet(nodes, len(cols), Params{K: 5, N: 10, M: 20, Seed: 1}, false)
	if err == nil || !strings.Contains(err.Error(), "node 1: proposal not best first") {
		t.Fatalf("err %v, want node 1's proposal out of order", err)
	}
}
