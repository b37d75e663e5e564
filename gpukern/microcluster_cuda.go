//go:build cuda

package gpukern

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"
)

// assignBlock is the number of threads per block of assign_nearest (its __launch_bounds__), and
// assignRows the objects each thread takes (ASSIGN_ROWS in microcluster.cu).
const (
	assignBlock = 256
	assignRows  = 2
)

// assignTile is assign_nearest's centroid tile for dims dimensions and q centroids: a multiple of
// 32 (the kernel reads the tile rows as float4 and batches 32 centroids), at most 1024 and at
// most 48 KiB of shared memory.
func assignTile(dims, q int) int {
	return max(32, min(1024, (48*1024/4/dims)/32*32, (q+31)/32*32))
}

// launchAssign runs assign_nearest on device buffers; inside do only.
func (d *Device) launchAssign(xp cu.DevicePtr, n int, cp cu.DevicePtr, q, dims int, ap cu.DevicePtr) error {
	tile := assignTile(dims, q)
	grid := (n + assignBlock*assignRows - 1) / (assignBlock * assignRows)
	return launchParams(d, "assign_nearest", [3]int{grid, 1, 1}, [3]int{assignBlock, 1, 1}, dims*tile*4,
		&mcAssignParams{X: uint64(xp), N: int64(n), C: uint64(cp), Q: int64(q), D: int64(dims), Tile: int64(tile),
			Assign: uint64(ap)})
}

// reduceBlock is the block size of cf_sort and cf_reduce_chunk_o* (RED_THREADS in
// microcluster.cu), reduceTile the rows of a sort tile (RED_TILE).
const (
	reduceBlock = 256
	reduceTile  = 2048
)

// sortShared is cf_sort's dynamic shared memory for q clusters: 8 warps x q uint16 counts (16 KiB
// at ReduceMaxQ, beside its 8 KiB of keys).
func sortShared(q int) int { return reduceBlock / 32 * q * 2 }

// cfBuffers are the scratch and result buffers of one Reduce on the device: the sorted rows of
// each tile (uint16, tiles x reduceTile) and their cluster starts (int32, tiles x (q+1)), the
// per-chunk partial sums and counts, the features and counts.
type cfBuffers struct {
	n, dims, q, chunk, chunks, tiles     int
	idx, starts, part, pcount, cf, count cu.DevicePtr
}

func newCFBuffers(n, dims, q, chunk int) (b *cfBuffers, err error) {
	b = &cfBuffers{n: n, dims: dims, q: q, chunk: chunk}
	b.chunks = (n + b.chunk - 1) / b.chunk
	b.tiles = (n + reduceTile - 1) / reduceTile
	if b.idx, err = alloc("sorted rows", int64(b.tiles)*reduceTile*2); err != nil {
		return nil, err
	}
	if b.starts, err = alloc("cluster starts", int64(b.tiles)*int64(q+1)*4); err != nil {
		return nil, errors.Join(err, b.free())
	}
	if b.part, err = alloc("chunk sums", int64(b.chunks)*int64(dims)*3*int64(q)*8); err != nil {
		return nil, errors.Join(err, b.free())
	}
	if b.pcount, err = alloc("chunk counts", int64(b.chunks)*int64(q)*8); err != nil {
		return nil, errors.Join(err, b.free())
	}
	if b.cf, err = alloc("cluster features", 3*int64(dims)*int64(q)*8); err != nil {
		return nil, errors.Join(err, b.free())
	}
	if b.count, err = alloc("cluster counts", int64(q)*8); err != nil {
		return nil, errors.Join(err, b.free())
	}
	return b, nil
}

func (b *cfBuffers) free() error { return frees(b.idx, b.starts, b.part, b.pcount, b.cf, b.count) }

// launchReduce runs cf_sort, cf_reduce_chunk_o1 (q <= 256 clusters, one per thread) or _o4, and
// cf_finalize; cent (or 0) receives the new centroids. Inside do only.
func (d *Device) launchReduce(xp, ep, ap cu.DevicePtr, b *cfBuffers, cent cu.DevicePtr) error {
	if b.chunks == 0 {
		// No rows: the features are all zero (and the centroids stay), as on the CPU.
		if err := cu.MemsetD8(b.cf, 0, 3*int64(b.dims)*int64(b.q)*8); err != nil {
			return fmt.Errorf("cuMemsetD8(cluster features): %w", err)
		}
		if err := cu.MemsetD8(b.count, 0, int64(b.q)*8); err != nil {
			return fmt.Errorf("cuMemsetD8(cluster counts): %w", err)
		}
		return nil
	}
	if err := launchParams(d, "cf_sort", [3]int{b.tiles, 1, 1}, [3]int{reduceBlock, 1, 1}, sortShared(b.q),
		&mcSortParams{Assign: uint64(ap), N: int64(b.n), Q: int64(b.q), Idx: uint64(b.idx), Starts: uint64(b.starts)}); err != nil {
		return err
	}
	kernel := "cf_reduce_chunk_o1"
	if b.q > reduceBlock {
		kernel = "cf_reduce_chunk_o4"
	}
	if err := launchParams(d, kernel, [3]int{b.chunks, b.dims, 1}, [3]int{reduceBlock, 1, 1}, (b.q+1)*4,
		&mcReduceParams{X: uint64(xp), E: uint64(ep), Idx: uint64(b.idx), Starts: uint64(b.starts), N: int64(b.n),
			D: int64(b.dims), Q: int64(b.q), Chunk: int64(b.chunk), Part: uint64(b.part), Pcount: uint64(b.pcount)}); err != nil {
		return err
	}
	t := b.dims * b.q
	return launchParams(d, "cf_finalize", [3]int{(t + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0,
		&mcFinalizeParams{Part: uint64(b.part), Pcount: uint64(b.pcount), Chunks: int64(b.chunks), D: int64(b.dims),
			Q: int64(b.q), Cf: uint64(b.cf), Count: uint64(b.count), Cent: uint64(cent)})
}

// features downloads the cluster features; inside do only.
func (b *cfBuffers) features(d *Device) (*ClusterFeatures, error) {
	flat := make([]float64, 3*b.dims*b.q)
	if err := download(d, "cluster features", flat, b.cf); err != nil {
		return nil, err
	}
	f := &ClusterFeatures{CF1: make([][]float64, b.dims), CF2: make([][]float64, b.dims),
		EF2: make([][]float64, b.dims), N: make([]int64, b.q)}
	for j := range b.dims {
		f.CF1[j] = flat[(0*b.dims+j)*b.q : (0*b.dims+j+1)*b.q]
		f.CF2[j] = flat[(1*b.dims+j)*b.q : (1*b.dims+j+1)*b.q]
		f.EF2[j] = flat[(2*b.dims+j)*b.q : (2*b.dims+j+1)*b.q]
	}
	if err := download(d, "cluster counts", f.N, b.count); err != nil {
		return nil, err
	}
	return f, nil
}

func (d *Device) assign(means, centroids [][]float32, n, q int, out []int32) error {
	err := d.do(func() (err error) {
		var xp, cp, ap cu.DevicePtr
		defer func() { err = errors.Join(err, frees(xp, cp, ap)) }()
		if xp, err = uploadCols(d, "means", means, n); err != nil {
			return err
		}
		if cp, err = upload(d, "centroids", flatten(centroids)); err != nil {
			return err
		}
		if ap, err = alloc("assign", int64(n)*4); err != nil {
			return err
		}
		if err = d.launchAssign(xp, n, cp, q, len(means), ap); err != nil {
			return err
		}
		return download(d, "assign", out, ap)
	})
	if err != nil {
		return fmt.Errorf("gpukern.Assign: %w", err)
	}
	return nil
}

func (d *Device) reduce(means, sds [][]float32, assign []int32, n, q, chunk int) (*ClusterFeatures, error) {
	var f *ClusterFeatures
	err := d.do(func() (err error) {
		var xp, ep, ap cu.DevicePtr
		var b *cfBuffers
		defer func() {
			err = errors.Join(err, frees(xp, ep, ap))
			if b != nil {
				err = errors.Join(err, b.free())
			}
		}()
		if xp, err = uploadCols(d, "means", means, n); err != nil {
			return err
		}
		if sds != nil {
			if ep, err = uploadCols(d, "sds", sds, n); err != nil {
				return err
			}
		}
		if ap, err = upload(d, "assign", assign); err != nil {
			return err
		}
		if b, err = newCFBuffers(n, len(means), q, chunk); err != nil {
			return err
		}
		if err = d.launchReduce(xp, ep, ap, b, 0); err != nil {
			return err
		}
		f, err = b.features(d)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gpukern.Reduce: %w", err)
	}
	return f, nil
}

func (d *Device) cluster(means, sds *Columns, centroids [][]float32, q, iterations, chunk int, assign []int32) (*ClusterFeatures, error) {
	if means.ptr == 0 || (sds != nil && sds.ptr == 0) {
		return nil, fmt.Errorf("gpukern.Cluster: columns already freed")
	}
	var f *ClusterFeatures
	err := d.do(func() (err error) {
		var cp, ap cu.DevicePtr
		var b *cfBuffers
		defer func() {
			err = errors.Join(err, frees(cp, ap))
			if b != nil {
				err = errors.Join(err, b.free())
			}
		}()
		if cp, err = upload(d, "centroids", flatten(centroids)); err != nil {
			return err
		}
		if ap, err = alloc("assign", int64(means.rows)*4); err != nil {
			return err
		}
		if b, err = newCFBuffers(means.rows, means.dims, q, chunk); err != nil {
			return err
		}
		if err = d.clusterPasses(means, sds, cp, ap, b, iterations); err != nil {
			return err
		}
		if err = download(d, "assign", assign, ap); err != nil {
			return err
		}
		f, err = b.features(d)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gpukern.Cluster: %w", err)
	}
	return f, nil
}

// clusterPasses runs the assign / reduce / new-centroid passes on device buffers; inside do only.
func (d *Device) clusterPasses(means, sds *Columns, cp, ap cu.DevicePtr, b *cfBuffers, iterations int) error {
	var ep cu.DevicePtr
	if sds != nil {
		ep = cu.DevicePtr(sds.ptr)
	}
	xp := cu.DevicePtr(means.ptr)
	for it := range iterations {
		if err := d.launchAssign(xp, means.rows, cp, b.q, means.dims, ap); err != nil {
			return fmt.Errorf("pass %d: %w", it, err)
		}
		if err := d.launchReduce(xp, ep, ap, b, cp); err != nil {
			return fmt.Errorf("pass %d: %w", it, err)
		}
	}
	return nil
}
