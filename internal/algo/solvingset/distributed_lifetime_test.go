package solvingset

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// lifetimeNode holds the supervisor to Node's buffer contract at its limits, as gpukern's device
// node does (its results are views into two hand-outs that alternate Step by Step): a Step's
// lnnc and the lists Neighbours serves after it live in one of two buffers, which the Step after
// next overwrites; done and the proposal live in buffers the next Step overwrites; Neighbours'
// outer slice is overwritten by its next call, and its lists are views with capacity up to the
// buffer's end (an append in place would write into the node's other lists). Where a buffer
// expires it is first checked unchanged since it was returned (the supervisor never writes into
// a node's results), then poisoned: NaN values, rows -1, done flags all set, so that a read after
// expiry changes the result or fails. The answers themselves are the wrapped node's.
type lifetimeNode struct {
	Node
	k     int
	steps int
	// by the parity of the Step that made them: lnnc, the whole local lists (k slots a
	// candidate, +Inf padded) and their lengths, and copies to check them against at expiry
	lnnc, lists, lnncWas, listsWas [2][]float32
	listLen                        []int
	done, doneWas                  []bool
	next, nextWas                  Proposal
	nb                             [][]float32 // Neighbours' outer slice
	nbWas                          [][]float32
}

func newLifetimeNode(inner Node, k int) *lifetimeNode { return &lifetimeNode{Node: inner, k: k} }

func (n *lifetimeNode) Step(taken []int, coords, lnn []float32, minOUT float64, m int) ([]float32, []bool, Proposal, error) {
	// The last Step's done flags and proposal expire now, the lnnc and lists of the one before.
	par := n.steps % 2
	if err := n.expire(par); err != nil {
		return nil, nil, Proposal{}, fmt.Errorf("Step %d: %w", n.steps, err)
	}
	n.steps++
	lnnc, done, next, err := n.Node.Step(taken, coords, lnn, minOUT, m)
	if err != nil {
		return nil, nil, Proposal{}, err
	}
	nc := len(done)
	count := make([]int, nc)
	for t := range count {
		count[t] = n.k
	}
	whole, err := n.Node.Neighbours(make([]int, nc), count)
	if err != nil {
		return nil, nil, Proposal{}, err
	}
	n.lists[par] = slices.Grow(n.lists[par][:0], nc*n.k)[:nc*n.k]
	n.listLen = n.listLen[:0]
	for t, l := range whole {
		c := copy(n.lists[par][t*n.k:(t+1)*n.k], l)
		for i := c; i < n.k; i++ {
			n.lists[par][t*n.k+i] = float32(math.Inf(1))
		}
		n.listLen = append(n.listLen, c)
	}
	n.lnnc[par] = append(n.lnnc[par][:0], lnnc...)
	n.done = append(n.done[:0], done...)
	n.next = Proposal{Rows: append(n.next.Rows[:0], next.Rows...), UB: append(n.next.UB[:0], next.UB...),
		Coords: append(n.next.Coords[:0], next.Coords...), LNN: append(n.next.LNN[:0], next.LNN...)}
	n.lnncWas[par] = append(n.lnncWas[par][:0], n.lnnc[par]...)
	n.listsWas[par] = append(n.listsWas[par][:0], n.lists[par]...)
	n.doneWas = append(n.doneWas[:0], n.done...)
	n.nextWas = Proposal{Rows: slices.Clone(n.next.Rows), UB: slices.Clone(n.next.UB), Coords: slices.Clone(n.next.Coords), LNN: slices.Clone(n.next.LNN)}
	return n.lnnc[par], n.done, n.next, nil
}

// expire checks and poisons the last Step's done flags and proposal, and the lnnc and lists
// of parity par (the Step before the last one's).
func (n *lifetimeNode) expire(par int) error {
	if !slices.Equal(n.done, n.doneWas) || !reflect.DeepEqual(n.next, n.nextWas) {
		return fmt.Errorf("the supervisor wrote into the last Step's done flags or proposal")
	}
	if !bitsEqual(n.lnnc[par], n.lnncWas[par]) || !bitsEqual(n.lists[par], n.listsWas[par]) {
		return fmt.Errorf("the supervisor wrote into the lnnc or lists of the Step before the last")
	}
	for i := range n.done {
		n.done[i] = true
	}
	for i := range n.next.Rows {
		n.next.Rows[i], n.next.UB[i] = -1, math.NaN()
	}
	poison(n.next.Coords, n.next.LNN, n.lnnc[par], n.lists[par])
	return nil
}

func (n *lifetimeNode) Neighbours(from, count []int) ([][]float32, error) {
	if n.steps == 0 || len(from) != len(n.listLen) || len(count) != len(n.listLen) {
		return nil, fmt.Errorf("lifetimeNode: %d/%d requests for %d candidates", len(from), len(count), len(n.listLen))
	}
	for t := range n.nb { // the last answer's outer slice expires now
		if n.nbWas[t] != nil && !bitsEqual(n.nb[t], n.nbWas[t]) {
			return nil, fmt.Errorf("the supervisor wrote into Neighbours' lists")
		}
		n.nb[t] = []float32{float32(math.NaN())}
	}
	lists := n.lists[(n.steps-1)%2]
	n.nb = slices.Grow(n.nb[:0], len(n.listLen))[:len(n.listLen)]
	n.nbWas = slices.Grow(n.nbWas[:0], len(n.listLen))[:len(n.listLen)]
	for t, l := range n.listLen {
		lo := min(from[t], l)
		hi := min(lo+count[t], l)
		n.nb[t] = lists[t*n.k+lo : t*n.k+hi] // capacity to the buffer's end
		n.nbWas[t] = slices.Clone(n.nb[t])
	}
	return n.nb, nil
}

func poison(bufs ...[]float32) {
	for _, b := range bufs {
		for i := range b {
			b[i] = float32(math.NaN())
		}
	}
}

func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// TestDistributedBufferLifetimes: the supervisor reads a node's results only while Node's
// contract keeps them valid and never writes into them (lifetimeNode, a GPU node's lifetimes at
// their shortest), pipelined or lazy (its refetches included): the result is the one over the
// same nodes that hand out fresh buffers, field for field (timings aside).
func TestDistributedBufferLifetimes(t *testing.T) {
	t.Parallel()
	cols := gaussCols(rand.New(rand.NewPCG(9, 9)), 3000, 3, 1)
	p := Params{K: 12, N: 8, M: 40, Seed: 2, Workers: 2}
	for _, nodes := range []int{1, 2, 3} {
		for _, lazy := range []bool{false, true} {
			sizes := partitionSizes(len(cols[0]), nodes)
			want, err := DistributedSolvingSet(splitNodes(cols, sizes, p.K), len(cols), p, lazy)
			if err != nil {
				t.Fatal(err)
			}
			wrapped := splitNodes(cols, sizes, p.K)
			for j, nd := range wrapped {
				wrapped[j] = newLifetimeNode(nd, p.K)
			}
			got, err := DistributedSolvingSet(wrapped, len(cols), p, lazy)
			if err != nil {
				t.Fatalf("nodes=%d lazy=%v: %v", nodes, lazy, err)
			}
			got.Phases, want.Phases = DistributedPhases{}, DistributedPhases{}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("nodes=%d lazy=%v: w* %v, %d outliers, |S| %d, %d iterations, %d values, %d refetches; fresh buffers: %v, %d, %d, %d, %d, %d",
					nodes, lazy, got.WStar, len(got.Outliers), len(got.SolvingSet), got.Iterations, got.ListValues, got.Refetches,
					want.WStar, len(want.Outliers), len(want.SolvingSet), want.Iterations, want.ListValues, want.Refetches)
			}
			if lazy && nodes > 1 && got.Refetches == 0 {
				t.Errorf("nodes=%d lazy: no refetch: the refetches' reads through Neighbours were not exercised", nodes)
			}
		}
	}
}
