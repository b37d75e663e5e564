package gpukern

import (
	"fmt"
	"time"
)

// KNNWeights writes to out[i] the weight w_k(q_i, S), the sum of the Euclidean distances from
// query i to its k nearest points of S (ALGORITHMS.md §1; a query is never a member of S, so no
// point is skipped). S and Q are column-major float32 with the same dimensions; len(out) must be
// the query count and 1 <= k <= KNNMaxK; when S has fewer than k points the weight is +Inf (the
// CPU twin's convention). Bit-identical to solvingset.KNNWeights: the same float32 distances and
// the float64 sum of the k nearest in ascending order. Host slices; the transfers are included.
func KNNWeights(d *Device, S, Q [][]float32, k int, out []float64) error {
	ns, err := columnsShape("S", S)
	if err != nil {
		return fmt.Errorf("gpukern.KNNWeights: %w", err)
	}
	nq, err := columnsShape("Q", Q)
	if err != nil {
		return fmt.Errorf("gpukern.KNNWeights: %w", err)
	}
	if len(Q) != len(S) {
		return fmt.Errorf("gpukern.KNNWeights: %w: S has %d dimensions, Q has %d", errShape, len(S), len(Q))
	}
	if len(S) > MaxDims {
		return fmt.Errorf("gpukern.KNNWeights: %d dimensions, at most %d supported", len(S), MaxDims)
	}
	if len(out) != nq {
		return fmt.Errorf("gpukern.KNNWeights: %w: %d queries but len(out) = %d", errShape, nq, len(out))
	}
	if k < 1 || k > KNNMaxK {
		return fmt.Errorf("gpukern.KNNWeights: need 1 <= k <= %d, got k=%d", KNNMaxK, k)
	}
	if nq == 0 {
		return nil
	}
	return d.knnWeights(S, Q, ns, nq, k, out)
}

// KNNWeightsOn is KNNWeights against points already on the device (S from Device.Upload, which
// the caller keeps while it scores against them: a model's solving set, resident while the
// model serves), so that a stream of query batches uploads only its queries. The device keeps
// the buffers for the queries and the weights between calls. Bit-identical to KNNWeights.
func KNNWeightsOn(S *Columns, Q [][]float32, k int, out []float64) error {
	if err := knnOnShape(S, Q, k, len(out)); err != nil {
		return fmt.Errorf("gpukern.KNNWeightsOn: %w", err)
	}
	if _, err := S.dev.run(nil, []KNNStep{{S: S, Q: Q, K: k, Out: out}}); err != nil {
		return fmt.Errorf("gpukern.KNNWeightsOn: %w", err)
	}
	return nil
}

// knnOnShape checks KNNWeightsOn's arguments (nOut weights).
func knnOnShape(S *Columns, Q [][]float32, k, nOut int) error {
	if S == nil || S.ptr == 0 {
		return fmt.Errorf("%w: S is not on a device (nil or freed)", errShape)
	}
	nq, err := columnsShape("Q", Q)
	if err != nil {
		return err
	}
	if len(Q) != S.dims {
		return fmt.Errorf("%w: S has %d dimensions, Q has %d", errShape, S.dims, len(Q))
	}
	if S.dims > MaxDims {
		return fmt.Errorf("%d dimensions, at most %d supported", S.dims, MaxDims)
	}
	if nOut != nq {
		return fmt.Errorf("%w: %d queries but len(out) = %d", errShape, nq, nOut)
	}
	if k < 1 || k > KNNMaxK {
		return fmt.Errorf("need 1 <= k <= %d, got k=%d", KNNMaxK, k)
	}
	return nil
}

// Weights writes to out[i] the exact weight w_k(p_i, D \ {p_i}) of every row of cols (a row is
// not its own neighbour; a duplicate of it at another index is), the all-rows pass that ROC AUC
// needs: each row against all rows on the GPU (rows^2 distances). 1 <= k <= min(KNNMaxK, rows-1)
// and len(out) == rows. Bit-identical to solvingset.Weights (same float32 distances, the same k
// nearest summed in ascending order in float64). Host slices; the transfers are included.
func Weights(d *Device, cols [][]float32, k int, out []float64) error {
	n, err := columnsShape("cols", cols)
	if err != nil {
		return fmt.Errorf("gpukern.Weights: %w", err)
	}
	if len(cols) > MaxDims {
		return fmt.Errorf("gpukern.Weights: %d dimensions, at most %d supported", len(cols), MaxDims)
	}
	if len(out) != n {
		return fmt.Errorf("gpukern.Weights: %w: %d rows but len(out) = %d", errShape, n, len(out))
	}
	if k < 1 || k > KNNMaxK || k >= n {
		return fmt.Errorf("gpukern.Weights: need 1 <= k <= min(%d, rows-1), got k=%d for %d rows", KNNMaxK, k, n)
	}
	return d.weights(cols, n, k, out)
}

// Assign writes to out[i] the index of the centroid nearest to row i of means (squared Euclidean
// distance in float32, ties to the lowest index), bit-identical to microcluster.Assign. centroids
// is column-major [dim][cluster] with q >= 1 clusters; len(out) must be the row count. Host slices;
// the transfers are included (see Cluster for data resident on the device).
func Assign(d *Device, means, centroids [][]float32, out []int32) error {
	n, q, err := assignShape(means, centroids, len(out))
	if err != nil {
		return fmt.Errorf("gpukern.Assign: %w", err)
	}
	if n == 0 {
		return nil
	}
	return d.assign(means, centroids, n, q, out)
}

// Reduce computes the cluster features of q clusters from the rows and their assignment, summed
// in partial sums of chunkRows consecutive rows, then the partial sums in order: bit-identical to
// microcluster.Reduce when chunkRows is its chunking (microcluster.ReduceChunkRows(rows), which
// the caller passes: internal/accel). sds may be nil (certain data: EF2 = 0). Rows whose
// assignment is outside [0, q) belong to no cluster. 1 <= q <= ReduceMaxQ, chunkRows >= 1.
func Reduce(d *Device, means, sds [][]float32, assign []int32, q, chunkRows int) (*ClusterFeatures, error) {
	n, err := reduceShape(means, sds, len(assign), q)
	if err != nil {
		return nil, fmt.Errorf("gpukern.Reduce: %w", err)
	}
	if chunkRows < 1 {
		return nil, fmt.Errorf("gpukern.Reduce: need chunkRows >= 1, got %d", chunkRows)
	}
	return d.reduce(means, sds, assign, n, q, chunkRows)
}

// Cluster runs `iterations` passes of Assign and Reduce on data resident on the device, starting
// from the given centroids (column-major [dim][cluster]), with microcluster.Cluster's rule that an
// empty cluster keeps its previous centre. It returns the features of the last pass and writes
// that pass's assignment to assign (len = rows). sds may be nil. chunkRows is Reduce's. Bit-identical
// to running microcluster.Assign, Reduce and MicroClusters.Centroids in the same loop on the CPU.
func Cluster(means, sds *Columns, centroids [][]float32, iterations, chunkRows int, assign []int32) (*ClusterFeatures, error) {
	if means == nil {
		return nil, fmt.Errorf("gpukern.Cluster: %w: means is nil", errShape)
	}
	q, err := columnsShape("centroids", centroids)
	if err != nil {
		return nil, fmt.Errorf("gpukern.Cluster: %w", err)
	}
	if err := clusterShape(means, sds, len(centroids), q, iterations, len(assign)); err != nil {
		return nil, fmt.Errorf("gpukern.Cluster: %w", err)
	}
	if chunkRows < 1 {
		return nil, fmt.Errorf("gpukern.Cluster: need chunkRows >= 1, got %d", chunkRows)
	}
	return means.dev.cluster(means, sds, centroids, q, iterations, chunkRows, assign)
}

func assignShape(means, centroids [][]float32, nOut int) (n, q int, err error) {
	if n, err = columnsShape("means", means); err != nil {
		return 0, 0, err
	}
	if q, err = columnsShape("centroids", centroids); err != nil {
		return 0, 0, err
	}
	if len(centroids) != len(means) {
		return 0, 0, fmt.Errorf("%w: %d data dimensions, %d centroid dimensions", errShape, len(means), len(centroids))
	}
	if q == 0 {
		return 0, 0, fmt.Errorf("%w: no centroids", errShape)
	}
	if len(means) > MaxDims {
		return 0, 0, fmt.Errorf("%d dimensions, at most %d supported", len(means), MaxDims)
	}
	if nOut != n {
		return 0, 0, fmt.Errorf("%w: %d rows but len(out) = %d", errShape, n, nOut)
	}
	return n, q, nil
}

func reduceShape(means, sds [][]float32, nAssign, q int) (int, error) {
	n, err := columnsShape("means", means)
	if err != nil {
		return 0, err
	}
	if sds != nil {
		ns, err := columnsShape("sds", sds)
		if err != nil {
			return 0, err
		}
		if len(sds) != len(means) || ns != n {
			return 0, fmt.Errorf("%w: sds is %d x %d, means is %d x %d", errShape, ns, len(sds), n, len(means))
		}
	}
	if nAssign != n {
		return 0, fmt.Errorf("%w: %d rows but %d assignments", errShape, n, nAssign)
	}
	if q < 1 || q > ReduceMaxQ {
		return 0, fmt.Errorf("need 1 <= q <= %d, got q=%d", ReduceMaxQ, q)
	}
	return n, nil
}

func clusterShape(means, sds *Columns, dims, q, iterations, nAssign int) error {
	if dims != means.dims {
		return fmt.Errorf("%w: %d data dimensions, %d centroid dimensions", errShape, means.dims, dims)
	}
	if dims > MaxDims {
		return fmt.Errorf("%d dimensions, at most %d supported", dims, MaxDims)
	}
	if sds != nil && (sds.dims != means.dims || sds.rows != means.rows || sds.dev != means.dev) {
		return fmt.Errorf("%w: sds (%d x %d) does not match means (%d x %d) on the same device", errShape, sds.rows, sds.dims, means.rows, means.dims)
	}
	if q < 1 || q > ReduceMaxQ {
		return fmt.Errorf("need 1 <= q <= %d centroids, got %d", ReduceMaxQ, q)
	}
	if iterations < 1 {
		return fmt.Errorf("need iterations >= 1, got %d", iterations)
	}
	if nAssign != means.rows {
		return fmt.Errorf("%w: %d rows but len(assign) = %d", errShape, means.rows, nAssign)
	}
	return nil
}

// KernelTotal is one kernel's launches and GPU time (Device.KernelTimes).
type KernelTotal struct {
	Launches int64
	Time     time.Duration
}
