// knnsplit.cu: k-NN weights of a small batch of queries (a stream's 1000 records) against a large
// point set, with S split into slices: knn_split writes each (query, slice) pair's k smallest
// distances, knn_merge selects each query's k smallest of those and sums them. knn.cu's kernel
// gives each query one warp for the whole of S; with 1000 queries that is 500 warps, four per SM,
// each walking S alone: latency-bound (issue 12 item 5: 493 us per batch against a solving set of
// a 1M window on an H100). Split into P slices the same work runs on P times as many warps.
//
// Exactness: the k smallest distances of S are among the union of each slice's k smallest (a
// value outside its slice's k smallest has k smaller ones in that slice alone), so knn_merge's
// selection is the same multiset as knn.cu's, and the float64 sum in ascending order the same
// bits. The distances are tile.cuh's (float32, no FMA) and sqrtf's, as in knn.cu; the selection
// is select.cuh's warp queue. A slice with fewer than k points fills its list with +inf, which
// knn_merge never takes unless S has fewer than k points (then the weight is +inf, as in knn.cu).
//
// Shapes: S is ns x d and Q nq x d column-major float32; partial is nq x slices x k float32
// (query-major); out is nq float64. d <= D (compile-time, zero-padded as in knn.cu).
#include <cstddef>

#include "select.cuh"
#include "tile.cuh"

// kns_consider offers sqrtf(d2) when d2 <= fl(tau^2) and keeps the threshold tau, the k-th
// smallest offered, and tau2 = fl(tau^2). The prefilter drops no candidate: sqrtf(d2) < tau needs
// d2 < tau^2 in the reals, hence d2 <= fl(tau^2) (rounding is monotone; solvingset.sq32), and it
// saves the root of every distance that is not one.
template <int R>
__device__ __forceinline__ void kns_consider(WarpQueue<R>& wq, float d2, bool ok, int lane, int k, float& tau,
                                             float& tau2) {
    const bool pre = ok && d2 <= tau2;
    const float dist = pre ? sqrtf(d2) : tau;
    const float nt = wq.offer(pre && dist < tau, dist, lane, k, tau);
    if (nt != tau) {
        tau = nt;
        tau2 = __fmul_rn(tau, tau);
    }
}

#define KNS_TILE(D) ((12288 / (D)) / 32 * 32 < 2048 ? (12288 / (D)) / 32 * 32 : 2048)

// knn_split_body: a block of 8 warps takes 16 queries (two per warp) against slice blockIdx.y of
// S, loaded tile by tile into shared memory; each warp keeps both queries' k smallest in warp
// queues, then writes them (positions 0..k-1, ascending) to partial.
template <int R, int D>
__device__ __forceinline__ void knn_split_body(const float* __restrict__ S, long long ns,
                                               const float* __restrict__ Q, long long nq, long long dl,
                                               long long kl, long long slices, long long slice,
                                               float* __restrict__ partial) {
    extern __shared__ float sS[];  // [D][TL]
    constexpr int TL = KNS_TILE(D);
    const int lane = threadIdx.x & 31;
    const int d = (int)dl, k = (int)kl;
    for (int e = threadIdx.x; e < (D - d) * TL; e += blockDim.x) sS[d * TL + e] = 0.0f;  // padding rows
    const long long s0 = blockIdx.y * slice, s1 = min(ns, s0 + slice);
    const long long i0 = (long long)blockIdx.x * (blockDim.x >> 4) + 2 * (threadIdx.x >> 5), i1 = i0 + 1;
    const bool live0 = i0 < nq, live1 = i1 < nq;  // warp-uniform
    float q0[D], q1[D];
#pragma unroll
    for (int j = 0; j < D; j++) {
        q0[j] = (live0 && j < d) ? __ldg(Q + j * nq + i0) : 0.0f;
        q1[j] = (live1 && j < d) ? __ldg(Q + j * nq + i1) : 0.0f;
    }
    WarpQueue<R> wq0, wq1;
    wq0.init();
    wq1.init();
    float tau0 = __int_as_float(0x7f800000), tau1 = tau0;  // +inf
    float tau20 = tau0, tau21 = tau0;
    // The loop bounds are block-uniform, so every thread reaches every __syncthreads.
    for (long long base = s0; base < s1; base += TL) {
        const int m = (int)min((long long)TL, s1 - base);
        const int mp = (m + 31) / 32 * 32;
        __syncthreads();
        tile_load(sS, S, ns, dl, TL, base, m, mp);
        __syncthreads();
        if (!live0) continue;
        for (int t0 = 0; t0 < m; t0 += 32) {
            const int t = t0 + lane;
            float a0, a1;
            tile_lane_dist2_pair<D, TL>(q0, q1, sS, t, a0, a1);
            kns_consider(wq0, a0, t < m, lane, k, tau0, tau20);
            if (live1) kns_consider(wq1, a1, t < m, lane, k, tau1, tau21);
        }
    }
    if (!live0) return;
    float* p0 = partial + (i0 * slices + blockIdx.y) * k;
    float* p1 = partial + (i1 * slices + blockIdx.y) * k;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int pos = lane * R + r;
        if (pos < k) {
            p0[pos] = wq0.q[r];
            if (live1) p1[pos] = wq1.q[r];
        }
    }
}

// knn_merge_body: one warp per query: the k smallest of its slices' lists (slices*k values), then
// their float64 sum in ascending order (knn.cu's weight).
template <int R>
__device__ __forceinline__ void knn_merge_body(const float* __restrict__ partial, long long nq, long long kl,
                                               long long slices, double* __restrict__ out) {
    const int lane = threadIdx.x & 31;
    const long long i = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (i >= nq) return;  // warp-uniform
    const int k = (int)kl;
    const long long n = slices * kl;
    const float* p = partial + i * n;
    WarpQueue<R> wq;
    wq.init();
    float tau = __int_as_float(0x7f800000);
    for (long long c0 = 0; c0 < n; c0 += 32) {
        const float v = c0 + lane < n ? __ldg(p + c0 + lane) : tau;
        tau = wq.offer(v < tau, v, lane, k, tau);
    }
    const double w = wq.ascending_sum(k);
    if (lane == 0) out[i] = w;
}

// KnnSplitParams / KnnMergeParams are the kernels' one parameter each, passed by value (Go
// mirrors knnSplitParams, knnMergeParams: kernel_abi.go; TestKernelABI holds them to these).
struct KnnSplitParams {
    const float* S;
    long long ns;
    const float* Q;
    long long nq, d, k, slices, slice;
    float* partial;
};
static_assert(sizeof(KnnSplitParams) == 72, "KnnSplitParams size");
static_assert(offsetof(KnnSplitParams, S) == 0, "KnnSplitParams.S");
static_assert(offsetof(KnnSplitParams, ns) == 8, "KnnSplitParams.ns");
static_assert(offsetof(KnnSplitParams, Q) == 16, "KnnSplitParams.Q");
static_assert(offsetof(KnnSplitParams, nq) == 24, "KnnSplitParams.nq");
static_assert(offsetof(KnnSplitParams, d) == 32, "KnnSplitParams.d");
static_assert(offsetof(KnnSplitParams, k) == 40, "KnnSplitParams.k");
static_assert(offsetof(KnnSplitParams, slices) == 48, "KnnSplitParams.slices");
static_assert(offsetof(KnnSplitParams, slice) == 56, "KnnSplitParams.slice");
static_assert(offsetof(KnnSplitParams, partial) == 64, "KnnSplitParams.partial");

struct KnnMergeParams {
    const float* partial;
    long long nq, k, slices;
    double* out;
};
static_assert(sizeof(KnnMergeParams) == 40, "KnnMergeParams size");
static_assert(offsetof(KnnMergeParams, partial) == 0, "KnnMergeParams.partial");
static_assert(offsetof(KnnMergeParams, nq) == 8, "KnnMergeParams.nq");
static_assert(offsetof(KnnMergeParams, k) == 16, "KnnMergeParams.k");
static_assert(offsetof(KnnMergeParams, slices) == 24, "KnnMergeParams.slices");
static_assert(offsetof(KnnMergeParams, out) == 32, "KnnMergeParams.out");

#define KNS_KERNEL(KQ, D)                                                                                    \
    extern "C" __global__ void __launch_bounds__(256) knn_split_q##KQ##_d##D(const KnnSplitParams P) {     \
        knn_split_body<KQ / 32, D>(P.S, P.ns, P.Q, P.nq, P.d, P.k, P.slices, P.slice, P.partial);         \
    }
#define KNS_KERNELS(KQ)                                                                                       \
    KNS_KERNEL(KQ, 2)                                                                                         \
    KNS_KERNEL(KQ, 3)                                                                                         \
    KNS_KERNEL(KQ, 4)                                                                                         \
    KNS_KERNEL(KQ, 6)                                                                                         \
    KNS_KERNEL(KQ, 8)                                                                                         \
    KNS_KERNEL(KQ, 10)                                                                                        \
    KNS_KERNEL(KQ, 12)                                                                                        \
    KNS_KERNEL(KQ, 16)                                                                                        \
    extern "C" __global__ void __launch_bounds__(256) knn_merge_q##KQ(const KnnMergeParams P) {           \
        knn_merge_body<KQ / 32>(P.partial, P.nq, P.k, P.slices, P.out);                                  \
    }

KNS_KERNELS(64)
KNS_KERNELS(256)
