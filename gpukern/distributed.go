package gpukern

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// DistributedNode is a node of the distributed solving set (solvingset.DistributedSolvingSet) on
// one device: its partition, LNN heaps, UB and state stay resident, and each step is the single
// device's kernel on the partition (ss_gather, ss_dtoc, ss_candpart and ss_candmerge in list
// form, ss_select and its levels), an iteration one upload and one download. With one node
// per GPU, DistributedSolvingSet spreads a SolvingSet over every GPU of a host; its top-n and w*
// equal SolvingSet's on one device and on the CPU (the same arithmetic, canonical weights).
// Device memory per node: about rows*(4*dims + 4*K + 4*M + 16) bytes of its partition. Its
// Steps' results are views into page-locked host memory that its device keeps (Node's
// lifetimes): close the node before its device.
type DistributedNode struct {
	d    *Device
	rows int
	impl *distNode
}

// NewDistributedNode uploads the partition cols (column-major, finite) to d for k neighbours
// and at most m candidates per iteration (from every node: m may exceed the partition's rows), pruning with SolvingSetParams.Margin's margin. Close
// frees it. internal/accel.SolvingSetNodes makes it a solvingset.Node.
func NewDistributedNode(d *Device, cols [][]float32, k, m int, margin float64) (*DistributedNode, error) {
	rows, err := columnsShape("cols", cols)
	if err != nil {
		return nil, fmt.Errorf("gpukern.NewDistributedNode: %w", err)
	}
	if k < 1 || k > KNNMaxK || m < 1 || len(cols) > MaxDims || !(margin >= 1) || math.IsInf(margin, 0) {
		return nil, fmt.Errorf("gpukern.NewDistributedNode: k=%d (1..%d), m=%d (>= 1), %d dimensions (<= %d), margin %v (finite, >= 1)", k, KNNMaxK, m, len(cols), MaxDims, margin)
	}
	if i, j, bad := firstNonFinite(cols); bad {
		return nil, fmt.Errorf("gpukern.NewDistributedNode: row %d dimension %d is %v: data must be finite", i, j, cols[j][i])
	}
	impl, err := d.newDistNode(cols, rows, k, m, margin)
	if err != nil {
		return nil, fmt.Errorf("gpukern.NewDistributedNode: %w", err)
	}
	return &DistributedNode{d: d, rows: rows, impl: impl}, nil
}

// NewDistributedNodes makes one DistributedNode per device over consecutive, nearly equal
// partitions of cols (device i holds rows rows*i/J .. rows*(i+1)/J-1), uploading them
// concurrently: what the pipeline pays before a distributed build. On an error it closes the
// nodes it made.
func NewDistributedNodes(devs []*Device, cols [][]float32, k, m int, margin float64) ([]*DistributedNode, error) {
	rows, err := columnsShape("cols", cols)
	if err != nil {
		return nil, fmt.Errorf("gpukern.NewDistributedNodes: %w", err)
	}
	m = min(m, rows) // (no iteration has more candidates than the rows)
	nodes := make([]*DistributedNode, len(devs))
	errs := make([]error, len(devs))
	var wg sync.WaitGroup
	for i, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lo, hi := rows*i/len(devs), rows*(i+1)/len(devs)
			part := make([][]float32, len(cols))
			for j := range cols {
				part[j] = cols[j][lo:hi]
			}
			nodes[i], errs[i] = NewDistributedNode(d, part, k, m, margin)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, CloseDistributedNodes(nodes))
	}
	for _, n := range nodes {
		n.setTotal(rows)
	}
	return nodes, nil
}

// setTotal tells the node the rows of every node of its run (its candidates' side splits its
// rows into its share of one device's slices).
func (n *DistributedNode) setTotal(rows int) { n.d.distSetTotal(n.impl, rows) }

// Rows implements solvingset.Node.
func (n *DistributedNode) Rows() int { return n.rows }

// Take implements solvingset.Node.
func (n *DistributedNode) Take(rows []int) (coords, lnn []float32, err error) {
	for _, r := range rows {
		if r < 0 || r >= n.rows {
			return nil, nil, fmt.Errorf("gpukern.DistributedNode.Take: row %d of %d", r, n.rows)
		}
	}
	return n.d.distTake(n.impl, rows)
}

// Step is solvingset.Node's Step (internal/accel.SolvingSetNodes adapts the Proposal's type).
func (n *DistributedNode) Step(taken []int, coords, lnn []float32, minOUT float64, m int) (lnnc []float32, done []bool, next Proposal, err error) {
	return n.d.distStep(n.impl, taken, coords, lnn, minOUT, m)
}

// Neighbours implements solvingset.Node.
func (n *DistributedNode) Neighbours(from, count []int) ([][]float32, error) {
	return n.d.distNeighbours(n.impl, from, count)
}

// Proposal is solvingset.Proposal (gpukern does not import the algorithms): a node's best
// active rows after a Step, best first, with their UB, coordinates and LNN.
type Proposal struct {
	Rows   []int
	UB     []float64
	Coords []float32
	LNN    []float32
}

// Close frees the node's device memory.
func (n *DistributedNode) Close() error { return n.d.distFree(n.impl) }

// CloseDistributedNodes closes the nodes (nil ones skipped) concurrently, one goroutine per
// node: each frees a partition's buffers on its own device (10M x 10 over 4 GPUs: 6.3 ms one
// after another, 5.3-5.9 concurrently: the devices' frees barely overlap, BENCHMARKS §4.3.3).
func CloseDistributedNodes(nodes []*DistributedNode) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if n == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.Close()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// HostTimes is where the node's Steps so far spent their wall time on the host (zero without
// CUDA).
func (n *DistributedNode) HostTimes() DistHostTimes { return n.d.distHostTimes(n.impl) }

// DistHostTimes is where a node's Steps spent their wall time on the host, summed: what the
// device's kernels do not explain of a Step (DistributedNode.HostTimes).
type DistHostTimes struct {
	Pre    time.Duration // checks and the hand-in's copy into ioHost
	Enter  time.Duration // waiting for the device (another closure of it running) and making its context current
	Upload time.Duration // the hand-in's copy to the device
	Launch time.Duration // the launches (until the hand-out's download starts)
	Wait   time.Duration // the download: the kernels' tail, then the copy
	Leave  time.Duration // settle (the events read) and the context popped
	Post   time.Duration // the lists, done flags and the proposal out of the hand-out
}
