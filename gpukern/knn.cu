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
// Structure: one warp per two queries (KNN_QPW). The block walks S in tiles kept in shared memory
// ([d][tile] floats; for D > 0 the tile is KNN_TILE(D) points, up to 2048 within 80 KiB, so that
// addresses are immediates); with a single tile it is loaded once and the block's warps then run
// over many queries (grid-stride). Each lane computes the distances from the warp's queries
// (coordinates in registers) to one tile point at a time, and the warp keeps each query's k
// smallest squared distances in a register queue (select.cuh). For k <= 64 a bounding pass and a
// collecting pass in FMA arithmetic narrow each query's candidates to about 2k points, listed in
// shared memory, whose exact distances are then merged into the queue (knn_weights_body); for
// k > 64 a ballot against the queue's current k-th admits the candidates of each batch (about
// k(1 + ln(ns/k)) of ns per query).
//
// Arithmetic matches the CPU twin bit for bit: the squared distance of tile.cuh (the FMA values
// only ever decide which points are looked at exactly, with proven margins), then a correctly
// rounded sqrtf (nvcc's default -prec-sqrt=true) of each of the k kept values; the weight is the
// float64 sum of the k distances in ascending order (solvingset's canonicalWeight; WarpQueue::sum
// gives those bits). Selection is exact (the k smallest values as a multiset), so the weights are
// bit-identical to the CPU's.
#include "select.cuh"
#include "tile.cuh"

#define KNN_KMAX 256
// KNN_TILE(D): the points per shared-memory tile for D compile-time dimensions, the largest
// multiple of 32 up to 2048 within 80 KiB (with the lists, two blocks per SM; the host raises
// the kernel's dynamic shared-memory limit past the default 48 KiB). 2048 points of 10-D are one
// tile.
#define KNN_TILE(D) ((20480 / (D)) / 32 * 32 < 2048 ? (20480 / (D)) / 32 * 32 : 2048)
// KNN_QPW: queries per warp (each tile point read from shared memory once for all of them), and
// KNN_LIST: the candidate list entries per query of the 64-slot kernels, 2 bytes each, in shared
// memory after the tile. knn_cuda.go mirrors both (knnQueriesPerWarp, knnList; TestKNNConstants),
// and each block checks that it was given the shared memory they need.
#define KNN_QPW 2
#define KNN_LIST 256
// KNN_PREFIX: the batches of 32 points of the first tile that the bounding pass reads. Measured
// (BENCH.md): 16 leaves the bound loose enough that lists overflow, the whole tile costs more
// than the tighter bound saves.
#define KNN_PREFIX 32

#define KNN_INF __int_as_float(0x7f800000)

// knn_lane_dist2 writes to a[i] the squared distance from query i (coordinates in registers, D
// compile-time dimensions) to tile point t of a tile with the compile-time stride TILE: each
// coordinate of the point is read from shared memory once for all NQ queries (immediate offsets).
// Exact (FMA == false): per dimension u = x_j - p_j, acc = acc + u*u, each op rounded to float32,
// dimensions in index order, the CPU twin's sequence (tile.cuh); dimensions past the data's (zero
// in the queries and the tile) add (0-0)^2 = +0, which leaves a non-negative sum unchanged. With
// FMA, acc = fma(u, u, acc): a different rounding, only ever used for the bound (see below).
template <int D, int TILE, int NQ, bool FMA>
__device__ __forceinline__ void knn_lane_dist2(const float (&q)[NQ][D], const float* s, int t, float (&a)[NQ]) {
#pragma unroll
    for (int i = 0; i < NQ; i++) a[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < D; j++) {
        const float p = s[j * TILE + t];
#pragma unroll
        for (int i = 0; i < NQ; i++) {
            const float u = __fsub_rn(q[i][j], p);
            a[i] = FMA ? __fmaf_rn(u, u, a[i]) : __fadd_rn(a[i], __fmul_rn(u, u));
        }
    }
}

// knn_dist2 is knn_lane_dist2 for compile-time dimensions (D > 0) and tile_lane_dist2 per query
// (always exact) for any d (D == 0).
template <int D, int NQ, bool FMA>
__device__ __forceinline__ void knn_dist2(const float (&q)[NQ][D > 0 ? D : TILE_QREG], const float* sS,
                                          long long tile, int t, int d, const float* __restrict__ Q,
                                          long long nq, const long long (&qi)[NQ], float (&a)[NQ]) {
    if (D > 0) {
        constexpr int DT = D > 0 ? D : 1;
        knn_lane_dist2<DT, KNN_TILE(DT), NQ, FMA>(reinterpret_cast<const float(&)[NQ][DT]>(q), sS, t, a);
    } else {
#pragma unroll
        for (int i = 0; i < NQ; i++)
            a[i] = tile_lane_dist2(reinterpret_cast<const float(&)[TILE_QREG]>(q[i]), sS, tile, t, d, Q, nq,
                                   qi[i] < nq ? qi[i] : 0);
    }
}

// knn_bound returns fma_ru(x, 1 + 2^-10, 2^-120): for D <= 16, an upper bound of the exact
// (FMA-free) squared distance of a point whose FMA squared distance is x, and the other way round
// (see knn_weights_body).
__device__ __forceinline__ float knn_bound(float x) {
    return __fmaf_ru(x, 1.0009765625f, __int_as_float(0x03800000));
}

// knn_weights_body: D > 0 compile-time (padded) dimensions, D == 0 any d (runtime tile). NQ
// queries per warp. The queues hold squared distances: fl(sqrt) is monotone, so the k smallest
// squared distances, rooted, are the k smallest distances as a multiset, and the roots are taken
// once per kept value at the end instead of once per candidate.
//
// For k <= 64 (R == 2) a bounding pass first bounds each query's k-th squared distance, so that
// only about 2k candidates reach the queue instead of k(1 + ln(ns/k)) (234 for k = 50 of 2000,
// each a warp-wide insertion or a share of a merge): over the first KNN_PREFIX batches of the
// first tile every lane keeps the two smallest values of its own points (no warp traffic), the
// warp sorts those 64 values, and their k-th, B, has k points at or below it, so the k-th
// smallest of all is <= B. The pass uses FMA distances (2 instead of 3 ops per dimension); the
// exact value e and the FMA value f of one point satisfy e <= f (1+u)^(2D)/(1-u)^D + (underflow)
// < f (1 + 2^-10) + 2^-120 for D <= 16, and f < e (1 + 2^-10) + 2^-120 likewise (u = 2^-24;
// both sums add non-negative terms: relative error per op at most u, absolute at most 2^-150
// below the normal range), so E = knn_bound(B) bounds the exact k-th from above and F =
// knn_bound(E) bounds the FMA value of every point whose exact value is <= E (knn_bound rounds
// upwards; an overflow gives +inf, which admits everything; for D == 0 every pass is exact). Then per tile a collecting pass
// (FMA) lists the points with f <= F (a superset of those with e <= E) in shared memory, and the
// warp computes the exact distances of the listed points only, adding those <= E to the queue
// (mostly whole-warp merges). The queue keeps the 32*R smallest values added, and all of the k
// smallest are among them. A list that overflows (heavy ties) falls back to the exact distances
// of the whole tile for that query. With several tiles, the queue's k-th after each tile (the
// largest of k exact values) tightens E and F for the next, so that a large S (the all-rows
// pass) collects about k ln(tiles) more candidates, not a first tile's share per tile.
template <int R, int D, int NQ>
__device__ __forceinline__ void knn_weights_body(const float* __restrict__ S, long long ns,
                                                 const float* __restrict__ Q, long long nq, long long dl,
                                                 long long kl, long long tile, long long self,
                                                 double* __restrict__ out) {
    extern __shared__ float sS[];  // [D or d][tile], then the lists (k <= 64)
    constexpr int DR = D > 0 ? D : TILE_QREG;  // query coordinates in registers
    constexpr int DT = D > 0 ? D : 1;          // D for the compile-time-dimension code (unused when D == 0)
    constexpr int TL = KNN_TILE(DT);           // its tile
    constexpr bool LISTS = R == 2;  // the bounding, collecting and exact passes (k <= 64)
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    const int d = (int)dl, k = (int)kl;
    const int rows = D > 0 ? D : d;
    unsigned short* lists = reinterpret_cast<unsigned short*>(sS + rows * tile) + warp * NQ * KNN_LIST;
    const unsigned ltmask = (1u << lane) - 1u;
    if (LISTS) {  // the host's shared memory must hold the tile and every warp's lists
        unsigned smem;
        asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(smem));
        if ((long long)smem < rows * tile * 4 + (long long)nwarps * NQ * KNN_LIST * 2) __trap();
    }
    if (D > 0) {
        if (tile != TL) __trap();  // the host's tile must be the kernel's compile-time one
        // Rows d..D-1 (padding dimensions) stay zero; tile_load writes rows 0..d-1 only.
        for (int e = threadIdx.x; e < (D - d) * TL; e += blockDim.x) sS[d * TL + e] = 0.0f;
    }
    const long long ntiles = (ns + tile - 1) / tile;
    bool loaded = false;  // block-uniform
    // The loop bounds are block-uniform, so every thread reaches every __syncthreads.
    for (long long qb = (long long)blockIdx.x * nwarps * NQ; qb < nq; qb += (long long)gridDim.x * nwarps * NQ) {
        long long qi[NQ];
        float q[NQ][DR];
#pragma unroll
        for (int i = 0; i < NQ; i++) {
            qi[i] = qb + NQ * warp + i;
#pragma unroll
            for (int j = 0; j < DR; j++) q[i][j] = (qi[i] < nq && j < d) ? __ldg(Q + j * nq + qi[i]) : 0.0f;
        }
        const bool live = qi[0] < nq;  // warp-uniform: the warp has queries
        float E[NQ], F[NQ];            // the bounds (LISTS); otherwise E is the queue's k-th
        WarpQueue<R> wq[NQ];
#pragma unroll
        for (int i = 0; i < NQ; i++) {
            E[i] = F[i] = KNN_INF;
            wq[i].init();
        }
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
            if (!live) continue;
            // With self, the tile position of each query's own point (-1 when not in this tile).
            int own[NQ];
#pragma unroll
            for (int i = 0; i < NQ; i++)
                own[i] = (self && qi[i] >= base && qi[i] < base + m) ? (int)(qi[i] - base) : -1;
            if (LISTS && tb == 0) {  // the bounding pass
                float m1[NQ], m2[NQ];  // each lane's two smallest
#pragma unroll
                for (int i = 0; i < NQ; i++) m1[i] = m2[i] = KNN_INF;
                const int pm = min(m, KNN_PREFIX * 32);
#pragma unroll 1  // (as the collecting pass)
                for (int t0 = 0; t0 < pm; t0 += 32) {
                    const int t = t0 + lane;
                    float a[NQ];
                    knn_dist2<D, NQ, true>(q, sS, tile, t, d, Q, nq, qi, a);
#pragma unroll
                    for (int i = 0; i < NQ; i++) {
                        // (a NaN, never a candidate, counts as +inf: not as a copy of m1)
                        const float v = (t < pm && t != own[i] && a[i] <= KNN_INF) ? a[i] : KNN_INF;
                        m2[i] = fminf(m2[i], fmaxf(m1[i], v));
                        m1[i] = fminf(m1[i], v);
                    }
                }
#pragma unroll
                for (int i = 0; i < NQ; i++) {
                    WarpQueue<2> b;  // the 64 lane minima
                    b.q[0] = m1[i];
                    b.q[1] = m2[i];
                    b.sort(lane);
                    E[i] = knn_bound(b.get(k - 1));
                    F[i] = knn_bound(E[i]);
                }
            }
            if (LISTS) {
                int count[NQ];
#pragma unroll
                for (int i = 0; i < NQ; i++) count[i] = 0;
#pragma unroll 1  // (unrolled by 2, at 64 registers: 7 % slower, BENCH.md)
                for (int t0 = 0; t0 < m; t0 += 32) {  // the collecting pass
                    const int t = t0 + lane;
                    float a[NQ];
                    knn_dist2<D, NQ, true>(q, sS, tile, t, d, Q, nq, qi, a);
#pragma unroll
                    for (int i = 0; i < NQ; i++) {
                        const bool c = t < m && t != own[i] && a[i] <= F[i];
                        const unsigned mask = __ballot_sync(WARP_FULL, c);
                        if (mask) {  // (most batches of a later tile have no candidate)
                            const int pos = count[i] + __popc(mask & ltmask);
                            if (c && pos < KNN_LIST) lists[i * KNN_LIST + pos] = (unsigned short)t;
                            count[i] += __popc(mask);
                        }
                    }
                }
                __syncwarp();  // the lists are written
#pragma unroll
                for (int i = 0; i < NQ; i++) {
                    const float(&qv)[1][DR] = reinterpret_cast<const float(&)[1][DR]>(q[i]);
                    const long long qq[1] = {qi[i] < nq ? qi[i] : 0};
                    if (count[i] <= KNN_LIST) {
                        for (int c0 = 0; c0 < count[i]; c0 += 32) {
                            const bool ok = c0 + lane < count[i];
                            const int t = ok ? lists[i * KNN_LIST + c0 + lane] : 0;
                            float a[1];
                            knn_dist2<D, 1, false>(qv, sS, tile, t, d, Q, nq, qq, a);
                            wq[i].add(ok && a[0] <= E[i], a[0], lane);
                        }
                    } else {  // overflow: every point of the tile
                        for (int t0 = 0; t0 < m; t0 += 32) {
                            const int t = t0 + lane;
                            float a[1];
                            knn_dist2<D, 1, false>(qv, sS, tile, t, d, Q, nq, qq, a);
                            wq[i].add(t < m && t != own[i] && a[0] <= E[i], a[0], lane);
                        }
                    }
                    if (tb + 1 < ntiles) {  // the queue's k-th (k exact values) bounds the next tiles tighter
                        const float kth = wq[i].get(k - 1);
                        if (kth < E[i]) {
                            E[i] = kth;
                            F[i] = knn_bound(kth);
                        }
                    }
                }
                __syncwarp();  // the lists are read before the next tile's are written
            } else {
                for (int t0 = 0; t0 < m; t0 += 32) {
                    const int t = t0 + lane;
                    float a[NQ];
                    knn_dist2<D, NQ, false>(q, sS, tile, t, d, Q, nq, qi, a);
#pragma unroll
                    for (int i = 0; i < NQ; i++) {
                        const bool ok = t < m && t != own[i];
                        E[i] = wq[i].offer(ok && a[i] < E[i], a[i], lane, k, E[i]);
                    }
                }
            }
        }
        if (!live) continue;
#pragma unroll
        for (int i = 0; i < NQ; i++) {
#pragma unroll
            for (int r = 0; r < R; r++) wq[i].q[r] = sqrtf(wq[i].q[r]);  // ascending still
            const double w = wq[i].sum(k, lane);
            if (lane == 0 && qi[i] < nq) out[qi[i]] = w;
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
        knn_weights_body<KQ / 32, D, KNN_QPW>(P.S, P.ns, P.Q, P.nq, P.d, P.k, P.tile, P.self, P.out);       \
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
