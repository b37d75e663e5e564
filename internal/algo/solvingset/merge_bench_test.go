package solvingset

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// listNode serves fixed candidate lists (Neighbours only): startMerge's input without a partition.
type listNode struct {
	Node
	lists [][]float32
}

func (n listNode) Neighbours(from, count []int) ([][]float32, error) {
	out := make([][]float32, len(n.lists))
	for t, l := range n.lists {
		lo := min(from[t], len(l))
		hi := min(lo+count[t], len(l))
		out[t] = l[lo:hi:hi]
	}
	return out, nil
}

// BenchmarkMergeLists is step d (startMerge and its finish) on the supervisor for m = 100 candidates, k = 50, over J nodes
// whose lists are whole (a GPU node's): the supervisor's serial part per iteration.
func BenchmarkMergeLists(b *testing.B) {
	const nc, k = 100, 50
	for _, J := range []int{2, 4} {
		rng := rand.New(rand.NewPCG(1, 2))
		nodes := make([]Node, J)
		for j := range nodes {
			ls := make([][]float32, nc)
			for t := range ls {
				l := make([]float32, k)
				for i := range l {
					l[i] = 1 + rng.Float32()
				}
				slices.Sort(l)
				ls[t] = l
			}
			nodes[j] = listNode{lists: ls}
		}
		lnnc := make([]float32, nc*k)
		for i := range lnnc {
			lnnc[i] = 2
		}
		done := make([]bool, nc)
		b.Run(map[int]string{2: "J=2", 4: "J=4"}[J], func(b *testing.B) {
			for b.Loop() {
				finish, err := startMerge(nodes, lnnc, done, k, k)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, _, err := finish(2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
