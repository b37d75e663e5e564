// knn.cu: batch k-NN weights w_k(q, S) = sum of the distances from q to its k nearest points of S
// (ALGORITHMS.md §1), the prediction step of the solving-set detector, and the all-rows pass of
// exact weights (self: S == Q, each query skips the point of its own index, solvingset.Weights).
//
// Shapes and layout: S is ns x d, Q is nq x d, both column-major float32 (S[j*ns + s]); out is nq
// float64. k in [1, 32*R]: the kernels are instantiated for register queues of 64 and 256 slots
// per warp (R = 2, 8; the host picks the smaller that holds k, and checks k <= KNN_KMAX); k > ns
// gives +inf. Each is instantiated for D = 2, 3, 4, 6, 8, 10, 12, 16 compile-time dimensions
// (data of fewer dimensions is zero-padded to the next D; see tile_lane_dist2_pair for why the
// bits do not change) and D = 0, any d (knn_weights_q*_dany).
//
// Structure: one warp per two queries. The block walks S in tiles kept in shared memory ([d][tile]
// floats; for D > 0 the tile is KNN_TILE(D) points, the largest multiple of 32 up to 2048 within
// 48 KiB, so that addresses are immediates); with a single tile it is loaded once and the block's
// warps then run over many queries (grid-stride). Each lane computes the distances from the
// warp's two queries (coordinates in registers) to one tile point, and the warp keeps each
// query's k smallest in a register queue (select.cuh): a ballot against the current k-th distance
// admits the few candidates (about k(1 + ln(ns/k)) of ns per query), the rest cost one compare.
//
// Arithmetic matches the CPU twin bit for bit: the squared distance of tile.cuh, then a correctly
// rounded sqrtf (nvcc's default -prec-sqrt=true); the weight is the float64 sum of the k distances
// in ascending order (solvingset's canonicalWeight). Selection is exact (the k smallest values as a
// multiset), so the weights are bit-identical to the CPU's.
#include "select.cuh"
#include "tile.cuh"

#define KNN_KMAX 256
#define KNN_TILE(D) ((12288 / (D)) / 32 * 32 < 2048 ? (12288 / (D)) / 32 * 32 : 2048)

// knn_consider offers a squared distance d2 of tile point t (a real point when ok) to a query's
// queue and keeps its threshold tau (the k-th smallest distance offered) and tau2 = fl(tau^2).
// sqrtf(d2) < tau needs d2 < tau^2 in the reals, hence d2 <= fl(tau^2) (rounding is monotone;
// solvingset.sq32): the prefilter drops no candidate and saves the root of every distance that is
// not one. Warp-uniform call.
template <int R>
__device__ __forceinline__ void knn_consider(WarpQueue<R>& wq, float d2, bool ok, int lane, int k, float& tau,
                                             float& tau2) {
    const bool pre = ok && d2 <= tau2;
    const float dist = pre ? sqrtf(d2) : tau;
    const float nt = wq.offer(pre && dist < tau, dist, lane, k, tau);
    if (nt != tau) {
        tau = nt;
        tau2 = __fmul_rn(tau, tau);
    }
}

// knn_weights_body: D > 0 compile-time (padded) dimensions, D == 0 any d (runtime tile).
template <int R, int D>
__device__ __forceinline__ void knn_weights_body(const float* __restrict__ S, long long ns,
                                                 const float* __restrict__ Q, long long nq, long long dl,
                                                 long long kl, long long tile, long long self,
                                                 double* __restrict__ out) {
    extern __shared__ float sS[];  // [D or d][tile]
    constexpr int DR = D > 0 ? D : TILE_QREG;  // query coordinates in registers
    constexpr int DT = D > 0 ? D : 1;          // D for the compile-time-dimension code (unused when D == 0)
    constexpr int TL = KNN_TILE(DT);           // its tile
    const int lane = threadIdx.x & 31;
    const int nwarps = blockDim.x >> 5;
    const int d = (int)dl, k = (int)kl;
    if (D > 0) {
        if (tile != TL) __trap();  // the host's tile must be the kernel's compile-time one
        // Rows d..D-1 (padding dimensions) stay zero; tile_load writes rows 0..d-1 only.
        for (int e = threadIdx.x; e < (D - d) * TL; e += blockDim.x) sS[d * TL + e] = 0.0f;
    }
    const long long ntiles = (ns + tile - 1) / tile;
    bool loaded = false;  // block-uniform
    // The loop bounds are block-uniform, so every thread reaches every __syncthreads.
    for (long long qb = (long long)blockIdx.x * nwarps * 2; qb < nq; qb += (long long)gridDim.x * nwarps * 2) {
        const long long i0 = qb + 2 * (threadIdx.x >> 5), i1 = i0 + 1;
        const bool live0 = i0 < nq, live1 = i1 < nq;  // warp-uniform
        float q0[DR], q1[DR];
#pragma unroll
        for (int j = 0; j < DR; j++) {
            q0[j] = (live0 && j < d) ? __ldg(Q + j * nq + i0) : 0.0f;
            q1[j] = (live1 && j < d) ? __ldg(Q + j * nq + i1) : 0.0f;
        }
        WarpQueue<R> wq0, wq1;
        wq0.init();
        wq1.init();
        float tau0 = __int_as_float(0x7f800000), tau1 = tau0;  // +inf
        float tau20 = tau0, tau21 = tau0;
        for (long long tb = 0; tb < ntiles; tb++) {
            const long long base = tb * tile;
            const int m = (int)min(tile, ns - base);  // points in this tile
            const int mp = (m + 31) / 32 * 32;        // padded to whole warps
            if (ntiles > 1 || !loaded) {
                __syncthreads();  // the previous tile is no longer read
                tile_load(sS, S, ns, dl, tile, base, m, mp);
                __syncthreads();
                loaded = true;
            }
            if (!live0) continue;
            // With self, the tile position of each query's own point (-1 when not in this tile).
            const int own0 = (self && i0 >= base && i0 < base + m) ? (int)(i0 - base) : -1;
            const int own1 = (self && i1 >= base && i1 < base + m) ? (int)(i1 - base) : -1;
            for (int t0 = 0; t0 < m; t0 += 32) {
                const int t = t0 + lane;
                float a0, a1;
                if (D > 0) {
                    tile_lane_dist2_pair<DT, TL>(reinterpret_cast<const float(&)[DT]>(q0),
                                                 reinterpret_cast<const float(&)[DT]>(q1), sS, t, a0, a1);
                } else {
                    a0 = tile_lane_dist2(reinterpret_cast<const float(&)[TILE_QREG]>(q0), sS, tile, t, d, Q, nq, i0);
                    a1 = live1 ? tile_lane_dist2(reinterpret_cast<const float(&)[TILE_QREG]>(q1), sS, tile, t, d, Q,
                                                 nq, i1)
                               : 0.0f;
                }
                knn_consider(wq0, a0, t < m && t != own0, lane, k, tau0, tau20);
                if (live1) knn_consider(wq1, a1, t < m && t != own1, lane, k, tau1, tau21);
            }
        }
        if (live0) {
            const double w0 = wq0.ascending_sum(k);
            if (lane == 0) out[i0] = w0;
        }
        if (live1) {
            const double w1 = wq1.ascending_sum(k);
            if (lane == 0) out[i1] = w1;
        }
    }
}

// KnnParams is every knn_weights kernel's parameter, one struct passed by value (gpukern's
// launchStruct), every member 8 bytes; the Go mirror (knnParams, kernel_abi.go) is held to these
// offsets and to the PTX's parameter size by TestKernelABI. Through the struct nvcc drops the
// read-only path of the inlined body's __restrict__ parameters, so the loads (here and in
// tile.cuh) go through __ldg: all 354 are ld.global.nc, as before (registers -8 to +2 per kernel).
struct KnnParams {
    const float* S;  // ns x d, column-major
    long long ns;
    const float* Q;  // nq x d, column-major (S itself when self)
    long long nq, d, k, tile, self;
    double* out;  // nq weights
};
static_assert(sizeof(KnnParams) == 72, "KnnParams size");
static_assert(offsetof(KnnParams, S) == 0, "KnnParams.S");
static_assert(offsetof(KnnParams, ns) == 8, "KnnParams.ns");
static_assert(offsetof(KnnParams, Q) == 16, "KnnParams.Q");
static_assert(offsetof(KnnParams, nq) == 24, "KnnParams.nq");
static_assert(offsetof(KnnParams, d) == 32, "KnnParams.d");
static_assert(offsetof(KnnParams, k) == 40, "KnnParams.k");
static_assert(offsetof(KnnParams, tile) == 48, "KnnParams.tile");
static_assert(offsetof(KnnParams, self) == 56, "KnnParams.self");
static_assert(offsetof(KnnParams, out) == 64, "KnnParams.out");

#define KNN_KERNEL(KQ, D, NAME)                                                                   \
    extern "C" __global__ void __launch_bounds__(512) knn_weights_q##KQ##_##NAME(const KnnParams P) { \
        knn_weights_body<KQ / 32, D>(P.S, P.ns, P.Q, P.nq, P.d, P.k, P.tile, P.self, P.out);       \
    }
#define KNN_KERNELS(KQ)            \
    KNN_KERNEL(KQ, 2, d2)          \
    KNN_KERNEL(KQ, 3, d3)          \
    KNN_KERNEL(KQ, 4, d4)          \
    KNN_KERNEL(KQ, 6, d6)          \
    KNN_KERNEL(KQ, 8, d8)          \
    KNN_KERNEL(KQ, 10, d10)        \
    KNN_KERNEL(KQ, 12, d12)        \
    KNN_KERNEL(KQ, 16, d16)        \
    KNN_KERNEL(KQ, 0, dany)

KNN_KERNELS(64)
KNN_KERNELS(256)
