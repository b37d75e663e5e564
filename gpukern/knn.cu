// knn.cu: batch k-NN weights w_k(q, S) = sum of the distances from q to its k nearest points of S
// (ALGORITHMS.md §1), the prediction step of the solving-set detector, and the all-rows pass of
// exact weights (self: S == Q, each query skips the point of its own index, solvingset.Weights).
//
// Shapes and layout: S is ns x d, Q is nq x d, both column-major float32 (S[j*ns + s]); out is nq
// float64. k in [1, 32*R] (the kernel is instantiated for R = 1, 2, 4, 8; the host picks the
// smallest that holds k, and checks k <= KNN_KMAX); k > ns gives +inf.
//
// Structure: one warp per query. The block walks S in tiles of `tile` points kept in shared memory
// (dynamic, d*tile floats, tile a multiple of 32; tile.cuh); with a single tile it is loaded once
// and the block's warps then run over many queries (grid-stride). Each lane computes the distance
// from the warp's query (coordinates in registers) to one tile point, and the warp keeps the k
// smallest in a register queue (select.cuh): a ballot against the current k-th distance admits
// the few candidates (about k(1 + ln(ns/k)) of ns per query), the rest cost one compare.
//
// Arithmetic matches the CPU twin bit for bit: the squared distance of tile.cuh, then a correctly
// rounded sqrtf (nvcc's default -prec-sqrt=true); the weight is the float64 sum of the k distances
// in ascending order (solvingset's canonicalWeight). Selection is exact (the k smallest values as a
// multiset), so the weights are bit-identical to the CPU's.
#include "select.cuh"
#include "tile.cuh"

#define KNN_KMAX 256

template <int R>
__device__ __forceinline__ void knn_weights_body(const float* __restrict__ S, long long ns,
                                                 const float* __restrict__ Q, long long nq, long long dl,
                                                 long long kl, long long tile, long long self,
                                                 double* __restrict__ out) {
    extern __shared__ float sS[];  // [d][tile]
    const int lane = threadIdx.x & 31;
    const int nwarps = blockDim.x >> 5;
    const int d = (int)dl, k = (int)kl;
    const long long ntiles = (ns + tile - 1) / tile;
    bool loaded = false;  // block-uniform
    // The loop bounds are block-uniform, so every thread reaches every __syncthreads.
    for (long long qb = (long long)blockIdx.x * nwarps; qb < nq; qb += (long long)gridDim.x * nwarps) {
        const long long i = qb + (threadIdx.x >> 5);
        const bool live = i < nq;  // warp-uniform
        float qr[TILE_QREG];
#pragma unroll
        for (int j = 0; j < TILE_QREG; j++) qr[j] = (live && j < d) ? Q[j * nq + i] : 0.0f;
        WarpQueue<R> wq;
        wq.init();
        float tau = __int_as_float(0x7f800000);  // the k-th smallest distance offered so far
        float tau2 = tau;                          // fl(tau * tau)
        for (long long tb = 0; tb < ntiles; tb++) {
            const long long base = tb * tile;
            const int m = (int)min(tile, ns - base);         // points in this tile
            const int mp = (m + 31) / 32 * 32;                // padded to whole warps
            if (ntiles > 1 || !loaded) {
                __syncthreads();  // the previous tile is no longer read
                tile_load(sS, S, ns, dl, tile, base, m, mp);
                __syncthreads();
                loaded = true;
            }
            if (!live) continue;
            for (int t0 = 0; t0 < m; t0 += 32) {
                const int t = t0 + lane;
                const float d2 = tile_lane_dist2(qr, sS, tile, t, d, Q, nq, i);
                // sqrtf(d2) < tau needs d2 < tau^2 in the reals, hence d2 <= fl(tau^2) (rounding
                // is monotone; solvingset.sq32): the prefilter drops no candidate and saves the
                // root of every distance that is not one.
                const bool pre = t < m && d2 <= tau2 && !(self && base + t == i);
                const float dist = pre ? sqrtf(d2) : tau;
                const float nt = wq.offer(pre && dist < tau, dist, lane, k, tau);
                if (nt != tau) {
                    tau = nt;
                    tau2 = __fmul_rn(tau, tau);
                }
            }
        }
        if (live) {
            const double w = wq.ascending_sum(k);
            if (lane == 0) out[i] = w;
        }
    }
}

#define KNN_KERNEL(R)                                                                                 \
    extern "C" __global__ void knn_weights_q##R(const float* __restrict__ S, long long ns,            \
                                                const float* __restrict__ Q, long long nq, long long d, \
                                                long long k, long long tile, long long self,          \
                                                double* __restrict__ out) {                           \
        knn_weights_body<R / 32>(S, ns, Q, nq, d, k, tile, self, out);                                \
    }

KNN_KERNEL(32)
KNN_KERNEL(64)
KNN_KERNEL(128)
KNN_KERNEL(256)
