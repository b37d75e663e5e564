//go:build cuda

package gpukern

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"gorgonia.org/cu"

	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/testsupport/testcols"
)

// Device-side benchmarks: data resident on the device, each kernel sequence timed with CUDA
// events around b.N repetitions (module load and JIT stay in the warm-up). They report ms per
// operation and the achieved FP32 rate or memory bandwidth; the host entry points (transfers
// included) have their own benchmarks in the external test package.

func benchCols(rows, dims int, seed uint64) [][]float32 {
	return testcols.Uniform(rand.New(rand.NewPCG(seed, 7)), rows, dims)
}

func benchDevice(b *testing.B) *Device {
	d, err := Open(0)
	if errors.Is(err, ErrNoDevice) {
		b.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

// timeOnDevice runs fn once as warm-up, then b.N times between two events, and returns the
// milliseconds per run. Inside d.do only.
func timeOnDevice(b *testing.B, fn func() error) (float64, error) {
	if err := fn(); err != nil {
		return 0, err
	}
	if err := cu.Synchronize(); err != nil {
		return 0, err
	}
	start, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, err
	}
	defer cu.DestroyEvent(&start)
	end, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, err
	}
	defer cu.DestroyEvent(&end)
	b.ResetTimer()
	if err := start.Record(cu.Stream{}); err != nil {
		return 0, err
	}
	for range b.N {
		if err := fn(); err != nil {
			return 0, err
		}
	}
	if err := end.Record(cu.Stream{}); err != nil {
		return 0, err
	}
	if err := end.Synchronize(); err != nil {
		return 0, err
	}
	b.StopTimer()
	ms, err := start.Elapsed(end)
	return ms / float64(b.N), err
}

// BenchmarkKNNWeightsKernel: 1,000,000 queries against |S| = 2000 in 10 dimensions, k = 50.
func BenchmarkKNNWeightsKernel(b *testing.B) {
	const ns, nq, dims, k = 2000, 1_000_000, 10, 50
	d := benchDevice(b)
	S, Q := benchCols(ns, dims, 1), benchCols(nq, dims, 2)
	var ms float64
	err := d.do(func() (err error) {
		var sp, qp, op cu.DevicePtr
		defer func() { err = errors.Join(err, frees(sp, qp, op)) }()
		if sp, err = uploadCols(d, "S", S, ns); err != nil {
			return err
		}
		if qp, err = uploadCols(d, "Q", Q, nq); err != nil {
			return err
		}
		if op, err = alloc("out", nq*8); err != nil {
			return err
		}
		ms, err = timeOnDevice(b, func() error { return d.launchKNN(sp, ns, qp, nq, dims, k, false, op) })
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	flops := float64(nq) * ns * (3*dims + 1) // sub, mul, add per dimension, one sqrt
	b.ReportMetric(ms, "kernel-ms/op")
	b.ReportMetric(flops/(ms*1e-3)/1e12, "TFLOP/s")
}

// BenchmarkCluster: 6,000,000 x 10, q = 200, 4 passes of assign + reduce + new centroids, data
// resident on the device; also the single kernels of one pass, and the reduction with 128 and 512
// chunks instead of microcluster's 64 (the chunking fixes the float64 sums, so CPU and GPU must
// share it: these say what a finer one would give the GPU).
func BenchmarkCluster(b *testing.B) {
	const n, dims, q, iterations = 6_000_000, 10, 200, 4
	d := benchDevice(b)
	X, E := benchCols(n, dims, 3), benchCols(n, dims, 4)
	init := make([]float32, dims*q)
	for j := range dims {
		for c := range q {
			init[j*q+c] = X[j][c*29989]
		}
	}
	xs, err := d.Upload(X)
	if err != nil {
		b.Fatal(err)
	}
	defer xs.Free()
	es, err := d.Upload(E)
	if err != nil {
		b.Fatal(err)
	}
	defer es.Free()
	for _, mode := range []string{"passes", "assign", "reduce", "reduce-chunks=128", "reduce-chunks=512"} {
		chunk := microcluster.ReduceChunkRows(n)
		if _, err := fmt.Sscanf(mode, "reduce-chunks=%d", &chunk); err == nil {
			chunk = (n + chunk - 1) / chunk
		}
		b.Run(mode, func(b *testing.B) {
			var ms float64
			err := d.do(func() (err error) {
				var cp, ap cu.DevicePtr
				var buf *cfBuffers
				defer func() {
					err = errors.Join(err, frees(cp, ap))
					if buf != nil {
						err = errors.Join(err, buf.free())
					}
				}()
				if cp, err = upload(d, "centroids", init); err != nil {
					return err
				}
				if ap, err = alloc("assign", n*4); err != nil {
					return err
				}
				if buf, err = newCFBuffers(n, dims, q, chunk); err != nil {
					return err
				}
				// A first assignment so that reduce alone sums real clusters.
				if err = d.launchAssign(cu.DevicePtr(xs.ptr), n, cp, q, dims, ap); err != nil {
					return err
				}
				ms, err = timeOnDevice(b, func() error {
					switch mode {
					case "passes":
						if err := cu.MemcpyHtoD(cp, unsafePtr(init), int64(len(init))*4); err != nil {
							return err
						}
						return d.clusterPasses(xs, es, cp, ap, buf, iterations)
					case "assign":
						return d.launchAssign(cu.DevicePtr(xs.ptr), n, cp, q, dims, ap)
					default:
						return d.launchReduce(cu.DevicePtr(xs.ptr), cu.DevicePtr(es.ptr), ap, buf, 0)
					}
				})
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(ms, "kernel-ms/op")
			switch mode {
			case "assign":
				flops := float64(n) * q * 3 * dims
				b.ReportMetric(flops/(ms*1e-3)/1e12, "TFLOP/s")
			case "reduce", "reduce-chunks=128", "reduce-chunks=512":
				// The traffic the three kernels need: cf_sort reads the assignment and writes the
				// sorted row numbers (uint16) once; cf_reduce_chunk reads means, sds and the
				// sorted row numbers per dimension (the starts and partial sums are < 1 %).
				bytes := float64(n) * (4 + 2 + dims*(4+4+2))
				b.ReportMetric(bytes/(ms*1e-3)/1e9, "GB/s")
			}
		})
	}
}
