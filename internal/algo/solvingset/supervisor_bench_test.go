package solvingset

import (
	"fmt"
	"slices"
	"testing"

	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// stepRecord is one Step's results and the Neighbours answer that followed it.
type stepRecord struct {
	lnnc  []float32
	done  []bool
	next  Proposal
	lists [][]float32
}

// recordingNode runs a node and keeps a copy of everything its Steps and Neighbours returned.
type recordingNode struct {
	Node
	steps []stepRecord
}

func (n *recordingNode) Step(taken []int, coords, lnn []float32, minOUT float64, m int) ([]float32, []bool, Proposal, error) {
	lnnc, done, next, err := n.Node.Step(taken, coords, lnn, minOUT, m)
	n.steps = append(n.steps, stepRecord{lnnc: slices.Clone(lnnc), done: slices.Clone(done), next: Proposal{
		Rows: slices.Clone(next.Rows), UB: slices.Clone(next.UB), Coords: slices.Clone(next.Coords), LNN: slices.Clone(next.LNN)}})
	return lnnc, done, next, err
}

func (n *recordingNode) Neighbours(from, count []int) ([][]float32, error) {
	got, err := n.Node.Neighbours(from, count)
	c := make([][]float32, len(got))
	for i, l := range got {
		c[i] = slices.Clone(l)
	}
	n.steps[len(n.steps)-1].lists = c
	return got, err
}

// replayNode answers a recorded run's Steps and Neighbours from memory, in the same order: the
// supervisor's own work without the nodes'.
type replayNode struct {
	rec  *recordingNode
	at   int
	take func(rows []int) ([]float32, []float32, error)
}

func (n *replayNode) Rows() int                                     { return n.rec.Rows() }
func (n *replayNode) Take(rows []int) ([]float32, []float32, error) { return n.take(rows) }
func (n *replayNode) Neighbours(from, count []int) ([][]float32, error) {
	return n.rec.steps[n.at-1].lists, nil
}
func (n *replayNode) Step(taken []int, coords, lnn []float32, minOUT float64, m int) ([]float32, []bool, Proposal, error) {
	s := n.rec.steps[n.at]
	n.at++
	return s.lnnc, s.done, s.next, nil
}

// BenchmarkSupervisor is DistributedSolvingSet's own cost (the supervisor: the hand-over, step
// d's merge, the pick) per iteration, over J nodes whose Steps are answered from a recorded run
// (CPU nodes, Gaussian 40,000 x 10, k = 50, n = 10, m = 100): what a distributed run pays on its
// critical path beside the slowest node's Step (BENCHMARKS §4.3.4).
func BenchmarkSupervisor(b *testing.B) {
	const rows, dims = 40_000, 10
	p := Params{K: 50, N: 10, M: 100, Seed: 1}
	cols := synth.Gaussian(rows, dims, 21).Cols
	for _, J := range []int{2, 4} {
		recs := make([]*recordingNode, J)
		nodes := make([]Node, J)
		for j := range J {
			recs[j] = &recordingNode{Node: NewCPUNode(partCols(cols, rows*j/J, rows*(j+1)/J), p.K, 2)}
			nodes[j] = recs[j]
		}
		want, err := DistributedSolvingSet(nodes, dims, p, false)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("J=%d", J), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				replay := make([]Node, J)
				for j := range J {
					// Take is answered by a fresh CPU node (the first candidates only, once a run).
					cn := NewCPUNode(partCols(cols, rows*j/J, rows*(j+1)/J), p.K, 2)
					replay[j] = &replayNode{rec: recs[j], take: cn.Take}
				}
				b.StartTimer()
				got, err := DistributedSolvingSet(replay, dims, p, false)
				if err != nil {
					b.Fatal(err)
				}
				if got.WStar != want.WStar || got.Iterations != want.Iterations {
					b.Fatalf("replayed run: w* %v in %d iterations, recorded %v in %d", got.WStar, got.Iterations, want.WStar, want.Iterations)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(want.Iterations)/1e3, "µs/iteration")
			b.ReportMetric(float64(want.Iterations), "iterations")
		})
	}
}

// partCols is rows lo..hi-1 of the columns cols (shared, not copied).
func partCols(cols [][]float32, lo, hi int) [][]float32 {
	part := make([][]float32, len(cols))
	for d := range part {
		part[d] = cols[d][lo:hi]
	}
	return part
}
