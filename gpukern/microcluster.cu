// microcluster.cu: the micro-clustering passes of Matsumoto, Hung, Yiu (ALGORITHMS.md §2),
// bit-identical to the CPU twins in internal/algo/microcluster.
//
// Layout: means, sds are n x d column-major float32 (x[j*n + i]); centroids are q x d column-major
// float32 (c[j*q + c]); assign is n int32 (-1 or out of range = no cluster); the cluster features
// are column-major float64 [d][q] and counts int64 [q].

// Parameters: each kernel takes one struct by value (gpukern's launchStruct; Go mirrors in
// kernel_abi.go, held to the static_asserts by TestKernelABI) and hands its members to an inlined
// body with __restrict__ parameters, which keeps the loads on the read-only path (ld.global.nc)
// except the query reload in tile_dist2: there __ldg costs assign_nearest 8 registers (56 -> 64),
// and a plain ld.global is L1-cached on sm_70 and later alike.

#include "tile.cuh"

#define BATCH TILE_BATCH

// assign_nearest ("IN-A"): one thread per object; the centroids are walked in shared-memory tiles
// of `tile` (a multiple of BATCH; d*tile floats of dynamic shared memory) with tile.cuh's squared
// Euclidean distance (float32, each op rounded, dimensions in index order: the sequence of
// microcluster.SquaredDistance). Strictly-smaller comparisons in increasing centroid order give
// ties to the lowest index; all-NaN distances leave cluster 0, as on the CPU.
static __device__ __forceinline__ void assign_nearest_body(const float* __restrict__ X, long long n,
                                          const float* __restrict__ C, long long q, long long d,
                                          long long tile, int* __restrict__ assign) {
    extern __shared__ float sC[];  // [d][tile]
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = i < n;
    float best = __int_as_float(0x7f800000);  // +inf
    int bestC = 0;
    for (long long base = 0; base < q; base += tile) {
        const int m = (int)min(tile, q - base);
        const int mp = (m + BATCH - 1) / BATCH * BATCH;
        __syncthreads();
        tile_load(sC, C, q, d, tile, base, m, mp);
        __syncthreads();
        for (int t0 = 0; t0 < m; t0 += BATCH) {
            float acc[BATCH];
            tile_dist2(acc, sC, tile, t0, d, X, n, i, live);
            const int lim = min(BATCH, m - t0);
#pragma unroll
            for (int c = 0; c < BATCH; c++) {
                if (c < lim && acc[c] < best) {
                    best = acc[c];
                    bestC = (int)(base + t0 + c);
                }
            }
        }
    }
    if (live) assign[i] = bestC;
}

// McAssignParams is assign_nearest's parameter, passed by value (Go mirror: mcAssignParams).
struct McAssignParams {
    const float* X;
    long long n;
    const float* C;
    long long q;
    long long d;
    long long tile;
    int* assign;
};
static_assert(sizeof(McAssignParams) == 56, "McAssignParams size");
static_assert(offsetof(McAssignParams, X) == 0, "McAssignParams.X");
static_assert(offsetof(McAssignParams, n) == 8, "McAssignParams.n");
static_assert(offsetof(McAssignParams, C) == 16, "McAssignParams.C");
static_assert(offsetof(McAssignParams, q) == 24, "McAssignParams.q");
static_assert(offsetof(McAssignParams, d) == 32, "McAssignParams.d");
static_assert(offsetof(McAssignParams, tile) == 40, "McAssignParams.tile");
static_assert(offsetof(McAssignParams, assign) == 48, "McAssignParams.assign");
extern "C" __global__ void assign_nearest(const McAssignParams P) {
    assign_nearest_body(P.X, P.n, P.C, P.q, P.d, P.tile, P.assign);
}

#define RED_TILE 1024

// cf_reduce_chunk: one block per (chunk, dimension): blockIdx.x = chunk of `chunk` rows,
// blockIdx.y = dimension j. Thread c (c < q, blockDim.x >= q) owns cluster c and adds, in row
// order, the means, squared means and squared uncertainties of its members: the exact float64
// sequence of microcluster.reduceChunk (float32 -> float64 is exact, and so is its square, so FMA
// contraction cannot change a result). Blocks of dimension 0 also count members. Rows are staged
// through shared memory so each warp reads them as broadcasts.
// Outputs: part[((chunk*d + j)*3 + s)*q + c] for s = CF1, CF2, EF2, and pcount[chunk*q + c].
static __device__ __forceinline__ void cf_reduce_chunk_body(const float* __restrict__ X, const float* __restrict__ E,
                                           const int* __restrict__ assign, long long n, long long d,
                                           long long q, long long chunk, double* __restrict__ part,
                                           long long* __restrict__ pcount) {
    __shared__ int sA[RED_TILE];
    __shared__ float sX[RED_TILE];
    __shared__ float sE[RED_TILE];
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = min(lo + chunk, n);
    const long long j = blockIdx.y;
    const int c = threadIdx.x;
    double cf1 = 0.0, cf2 = 0.0, ef2 = 0.0;
    long long cnt = 0;
    for (long long b = lo; b < hi; b += RED_TILE) {
        const int m = (int)min((long long)RED_TILE, hi - b);
        __syncthreads();
        for (int t = threadIdx.x; t < m; t += blockDim.x) {
            sA[t] = assign[b + t];
            sX[t] = X[j * n + b + t];
            sE[t] = E ? E[j * n + b + t] : 0.0f;
        }
        __syncthreads();
        if (c < q) {
            for (int t = 0; t < m; t++) {
                if (sA[t] == c) {
                    const double v = (double)sX[t];
                    cf1 = __dadd_rn(cf1, v);
                    cf2 = __dadd_rn(cf2, __dmul_rn(v, v));
                    const double e = (double)sE[t];
                    ef2 = __dadd_rn(ef2, __dmul_rn(e, e));
                    cnt++;
                }
            }
        }
    }
    if (c < q) {
        const long long o = ((long long)blockIdx.x * d + j) * 3 * q + c;
        part[o] = cf1;
        part[o + q] = cf2;
        part[o + 2 * q] = ef2;
        if (j == 0) pcount[(long long)blockIdx.x * q + c] = cnt;
    }
}

// McReduceParams is cf_reduce_chunk's parameter, passed by value (Go mirror: mcReduceParams).
struct McReduceParams {
    const float* X;
    const float* E;
    const int* assign;
    long long n;
    long long d;
    long long q;
    long long chunk;
    double* part;
    long long* pcount;
};
static_assert(sizeof(McReduceParams) == 72, "McReduceParams size");
static_assert(offsetof(McReduceParams, X) == 0, "McReduceParams.X");
static_assert(offsetof(McReduceParams, E) == 8, "McReduceParams.E");
static_assert(offsetof(McReduceParams, assign) == 16, "McReduceParams.assign");
static_assert(offsetof(McReduceParams, n) == 24, "McReduceParams.n");
static_assert(offsetof(McReduceParams, d) == 32, "McReduceParams.d");
static_assert(offsetof(McReduceParams, q) == 40, "McReduceParams.q");
static_assert(offsetof(McReduceParams, chunk) == 48, "McReduceParams.chunk");
static_assert(offsetof(McReduceParams, part) == 56, "McReduceParams.part");
static_assert(offsetof(McReduceParams, pcount) == 64, "McReduceParams.pcount");
extern "C" __global__ void cf_reduce_chunk(const McReduceParams P) {
    cf_reduce_chunk_body(P.X, P.E, P.assign, P.n, P.d, P.q, P.chunk, P.part, P.pcount);
}

// cf_finalize: one thread per (dimension, cluster), plus the counts: adds the chunk partials in
// chunk order (microcluster.Reduce's merge order, so the totals are bit-identical), writes
// cf[(s*d + j)*q + c] and count[c], and, when cent is not null, the new centroid
// float32(CF1/n) or, for an empty cluster, leaves the previous centroid (microcluster.Cluster's
// anchor rule).
static __device__ __forceinline__ void cf_finalize_body(const double* __restrict__ part,
                                       const long long* __restrict__ pcount, long long chunks,
                                       long long d, long long q, double* __restrict__ cf,
                                       long long* __restrict__ count, float* __restrict__ cent) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= d * q) return;
    const long long j = t / q, c = t % q;
    double s1 = 0.0, s2 = 0.0, s3 = 0.0;
    long long nc = 0;
    for (long long k = 0; k < chunks; k++) {
        const long long o = (k * d + j) * 3 * q + c;
        s1 = __dadd_rn(s1, part[o]);
        s2 = __dadd_rn(s2, part[o + q]);
        s3 = __dadd_rn(s3, part[o + 2 * q]);
        nc += pcount[k * q + c];
    }
    cf[(0 * d + j) * q + c] = s1;
    cf[(1 * d + j) * q + c] = s2;
    cf[(2 * d + j) * q + c] = s3;
    if (j == 0) count[c] = nc;
    if (cent && nc > 0) cent[j * q + c] = (float)__ddiv_rn(s1, (double)nc);
}

// McFinalizeParams is cf_finalize's parameter, passed by value (Go mirror: mcFinalizeParams).
struct McFinalizeParams {
    const double* part;
    const long long* pcount;
    long long chunks;
    long long d;
    long long q;
    double* cf;
    long long* count;
    float* cent;
};
static_assert(sizeof(McFinalizeParams) == 64, "McFinalizeParams size");
static_assert(offsetof(McFinalizeParams, part) == 0, "McFinalizeParams.part");
static_assert(offsetof(McFinalizeParams, pcount) == 8, "McFinalizeParams.pcount");
static_assert(offsetof(McFinalizeParams, chunks) == 16, "McFinalizeParams.chunks");
static_assert(offsetof(McFinalizeParams, d) == 24, "McFinalizeParams.d");
static_assert(offsetof(McFinalizeParams, q) == 32, "McFinalizeParams.q");
static_assert(offsetof(McFinalizeParams, cf) == 40, "McFinalizeParams.cf");
static_assert(offsetof(McFinalizeParams, count) == 48, "McFinalizeParams.count");
static_assert(offsetof(McFinalizeParams, cent) == 56, "McFinalizeParams.cent");
extern "C" __global__ void cf_finalize(const McFinalizeParams P) {
    cf_finalize_body(P.part, P.pcount, P.chunks, P.d, P.q, P.cf, P.count, P.cent);
}
