// microcluster.cu: the micro-clustering passes of Matsumoto, Hung, Yiu (ALGORITHMS.md §2),
// bit-identical to the CPU twins in internal/algo/microcluster.
//
// Layout: means, sds are n x d column-major float32 (x[j*n + i]); centroids are q x d column-major
// float32 (c[j*q + c]); assign is n int32 (-1 or out of range = no cluster); the cluster features
// are column-major float64 [d][q] and counts int64 [q].

// Parameters: each kernel takes one struct by value (gpukern's launchStruct; Go mirrors in
// kernel_abi.go, held to the static_asserts by TestKernelABI) and hands its members to an inlined
// body with __restrict__ parameters, which keeps the loads on the read-only path (ld.global.nc);
// where nvcc still emits a plain ld.global (assign_nearest's per-batch row reloads), it is
// L1-cached on sm_70 and later alike.

#include "tile.cuh"

#define BATCH TILE_BATCH

// assign_nearest ("IN-A"): each thread takes ASSIGN_ROWS objects (i and i + blockDim.x, so the
// loads stay coalesced); the centroids are walked in shared-memory tiles of `tile` (a multiple of
// BATCH; d*tile floats of dynamic shared memory, loaded by tile.cuh's tile_load). Per pair the
// squared Euclidean distance is microcluster.SquaredDistance's sequence (float32, each op rounded,
// dimensions in index order); strictly-smaller comparisons in increasing centroid order give ties
// to the lowest index; all-NaN distances leave cluster 0, as on the CPU.
//
// Why two rows and float4 reads: with one row per thread, every (dimension, centroid) cost one
// shared-memory load beside its three FP32 operations, and the loads, not the arithmetic, bounded
// the kernel (46 % of the no-FMA ceiling). Here one 16-byte load serves 4 centroids x 2 rows, an
// eighth of a load per distance term. The tile rows are 16-byte aligned: tile and t0 are
// multiples of 32 and the shared array is declared float4.
#define ASSIGN_ROWS 2
static __device__ __forceinline__ void assign_nearest_body(const float* __restrict__ X, long long n,
                                          const float* __restrict__ C, long long q, long long d,
                                          long long tile, int* __restrict__ assign) {
    extern __shared__ float4 sC4[];  // [d][tile] floats
    float* sC = reinterpret_cast<float*>(sC4);
    const long long i0 = (long long)blockIdx.x * blockDim.x * ASSIGN_ROWS + threadIdx.x;
    const long long i1 = i0 + blockDim.x;
    const bool live0 = i0 < n, live1 = i1 < n;
    float best0 = __int_as_float(0x7f800000), best1 = best0;  // +inf
    int bestC0 = 0, bestC1 = 0;
    for (long long base = 0; base < q; base += tile) {
        const int m = (int)min(tile, q - base);
        const int mp = (m + BATCH - 1) / BATCH * BATCH;
        __syncthreads();
        tile_load(sC, C, q, d, tile, base, m, mp);
        __syncthreads();
        for (int t0 = 0; t0 < m; t0 += BATCH) {
            float a0[BATCH], a1[BATCH];
#pragma unroll
            for (int c = 0; c < BATCH; c++) {
                a0[c] = 0.0f;
                a1[c] = 0.0f;
            }
            for (int j = 0; j < d; j++) {
                const float x0 = live0 ? X[j * n + i0] : 0.0f;
                const float x1 = live1 ? X[j * n + i1] : 0.0f;
                const float4* row = reinterpret_cast<const float4*>(sC + j * tile + t0);
#pragma unroll
                for (int c4 = 0; c4 < BATCH / 4; c4++) {
                    const float4 p = row[c4];
                    const float pc[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        const float u0 = __fsub_rn(x0, pc[k]), u1 = __fsub_rn(x1, pc[k]);
                        a0[4 * c4 + k] = __fadd_rn(a0[4 * c4 + k], __fmul_rn(u0, u0));
                        a1[4 * c4 + k] = __fadd_rn(a1[4 * c4 + k], __fmul_rn(u1, u1));
                    }
                }
            }
            const int lim = min(BATCH, m - t0);
#pragma unroll
            for (int c = 0; c < BATCH; c++) {
                if (c < lim) {
                    if (a0[c] < best0) {
                        best0 = a0[c];
                        bestC0 = (int)(base + t0 + c);
                    }
                    if (a1[c] < best1) {
                        best1 = a1[c];
                        bestC1 = (int)(base + t0 + c);
                    }
                }
            }
        }
    }
    if (live0) assign[i0] = bestC0;
    if (live1) assign[i1] = bestC1;
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
extern "C" __global__ void __launch_bounds__(256, 2) assign_nearest(const McAssignParams P) {
    assign_nearest_body(P.X, P.n, P.C, P.q, P.d, P.tile, P.assign);
}

// cf_reduce_chunk: one block of RED_THREADS per (chunk, dimension): blockIdx.x = chunk of `chunk`
// rows, blockIdx.y = dimension j. The block owns the float64 sums of every cluster c (thread
// c % RED_THREADS, in registers, up to RED_OWN clusters each) and must add, per cluster, the
// means, squared means and squared uncertainties of its members in row order: the exact float64
// sequence of microcluster.reduceChunk (float32 -> float64 is exact, and so is its square, so FMA
// contraction cannot change a result). Blocks of dimension 0 also count members.
//
// The chunk is streamed in tiles of RED_TILE rows; per tile the rows are counting-sorted by
// cluster, stably (warp w ranks its segment of RED_TILE/RED_WARPS rows with __match_any_sync, and
// the per-warp counts are scanned in warp order), and each owner then adds its cluster's rows of
// the tile in row order. Tile after tile in row order, this is every member of the chunk in row
// order. Each row is thus visited once per dimension; the previous kernel had every thread test
// every row of the chunk (q/32 warps x chunk rows per block: latency-bound at 4.8 % of HBM). The
// next tile's loads are issued before the sort of the current one so that they overlap it.
//
// Shared memory: the tile (assignments as sort keys, means, sds, sorted row indices: 14 KiB)
// static, and dynamically (q+1) int start offsets then RED_WARPS*q unsigned short per-warp
// counts/cursors (positions < RED_TILE fit in 16 bits): at most 20.5 KiB for q = 1024.
// Outputs: part[((chunk*d + j)*3 + s)*q + c] for s = CF1, CF2, EF2, and pcount[chunk*q + c].
#define RED_TILE 1024
#define RED_THREADS 256
#define RED_WARPS (RED_THREADS / 32)
#define RED_SEG (RED_TILE / RED_WARPS)
#define RED_PER (RED_TILE / RED_THREADS)
#define RED_OWN 4  // ReduceMaxQ (1024) / RED_THREADS
static __device__ __forceinline__ void cf_reduce_chunk_body(const float* __restrict__ X, const float* __restrict__ E,
                                           const int* __restrict__ assign, long long n, long long d,
                                           long long q, long long chunk, double* __restrict__ part,
                                           long long* __restrict__ pcount) {
    __shared__ int sKey[RED_TILE];
    __shared__ float sX[RED_TILE];
    __shared__ float sE[RED_TILE];
    __shared__ unsigned short sIdx[RED_TILE];
    __shared__ int sWarp[RED_WARPS];
    extern __shared__ int sDyn[];
    int* sStart = sDyn;                                                     // [q+1]
    unsigned short* sCnt = reinterpret_cast<unsigned short*>(sDyn + q + 1);  // [RED_WARPS][q]
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int Q = (int)q;
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = min(lo + chunk, n);
    const long long j = blockIdx.y;
    const float* Xj = X + j * n;
    const float* Ej = E ? E + j * n : nullptr;
    double cf1[RED_OWN], cf2[RED_OWN], ef2[RED_OWN];
    long long cnt[RED_OWN];
#pragma unroll
    for (int k = 0; k < RED_OWN; k++) {
        cf1[k] = 0.0;
        cf2[k] = 0.0;
        ef2[k] = 0.0;
        cnt[k] = 0;
    }
    for (int e = tid; e < RED_WARPS * Q; e += RED_THREADS) sCnt[e] = 0;
    // The tile in flight: row b + tid + k*RED_THREADS (coalesced); key Q = no cluster or past hi.
    int rk[RED_PER];
    float rx[RED_PER], re[RED_PER];
    auto fetch = [&](long long b) {
#pragma unroll
        for (int k = 0; k < RED_PER; k++) {
            const long long i = b + tid + k * RED_THREADS;
            rk[k] = Q;
            rx[k] = 0.0f;
            re[k] = 0.0f;
            if (i < hi) {
                const int a = assign[i];
                rk[k] = (a >= 0 && a < Q) ? a : Q;
                rx[k] = Xj[i];
                re[k] = Ej ? Ej[i] : 0.0f;
            }
        }
    };
    fetch(lo);
    const unsigned lt = (1u << lane) - 1u;  // lanes below this one
    for (long long b = lo; b < hi; b += RED_TILE) {
#pragma unroll
        for (int k = 0; k < RED_PER; k++) {
            sKey[tid + k * RED_THREADS] = rk[k];
            sX[tid + k * RED_THREADS] = rx[k];
            sE[tid + k * RED_THREADS] = re[k];
        }
        __syncthreads();  // the tile is in shared memory; sCnt is zero
        if (b + RED_TILE < hi) fetch(b + RED_TILE);
        // Count: warp w, its segment in groups of 32; one lane per distinct key adds the group's count.
        unsigned short* myCnt = sCnt + w * Q;
        for (int g = 0; g < RED_SEG; g += 32) {
            const int key = sKey[w * RED_SEG + g + lane];
            const unsigned peers = __match_any_sync(0xffffffffu, key);
            if (key < Q && lane == 31 - __clz(peers)) myCnt[key] += (unsigned short)__popc(peers);
            __syncwarp();
        }
        __syncthreads();
        // Scan: thread tid takes clusters 4*tid .. 4*tid+3; per cluster the warp counts become
        // offsets within the cluster (warp order), then the cluster totals are scanned block-wide.
        int tot[RED_OWN], own = 0;
#pragma unroll
        for (int k = 0; k < RED_OWN; k++) {
            const int c = RED_OWN * tid + k;
            int run = 0;
            if (c < Q) {
                for (int v = 0; v < RED_WARPS; v++) {
                    const int x = sCnt[v * Q + c];
                    sCnt[v * Q + c] = (unsigned short)run;
                    run += x;
                }
            }
            tot[k] = run;
            own += run;
        }
        int incl = own;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += y;
        }
        if (lane == 31) sWarp[w] = incl;
        __syncthreads();
        int before = incl - own;
        for (int v = 0; v < w; v++) before += sWarp[v];
#pragma unroll
        for (int k = 0; k < RED_OWN; k++) {
            const int c = RED_OWN * tid + k;
            if (c < Q) {
                sStart[c] = before;
                for (int v = 0; v < RED_WARPS; v++) sCnt[v * Q + c] += (unsigned short)before;
            }
            before += tot[k];
        }
        if (tid == RED_THREADS - 1) sStart[Q] = before;  // rows of the tile in some cluster
        __syncthreads();
        // Scatter: the same groups in the same order; a row's place is its warp's cursor for its
        // cluster plus its rank among the group's lanes of that cluster.
        for (int g = 0; g < RED_SEG; g += 32) {
            const int t = w * RED_SEG + g + lane;
            const int key = sKey[t];
            const unsigned peers = __match_any_sync(0xffffffffu, key);
            if (key < Q) sIdx[myCnt[key] + __popc(peers & lt)] = (unsigned short)t;
            __syncwarp();
            if (key < Q && lane == 31 - __clz(peers)) myCnt[key] += (unsigned short)__popc(peers);
            __syncwarp();
        }
        __syncthreads();
        // Sum: each owner adds its clusters' rows of the tile in row order; the counts are zeroed
        // for the next tile meanwhile.
#pragma unroll
        for (int k = 0; k < RED_OWN; k++) {
            const int c = tid + k * RED_THREADS;
            if (c < Q) {
                const int p1 = sStart[c + 1];
                int p = sStart[c];
                cnt[k] += p1 - p;
                for (; p < p1; p++) {
                    const int t = sIdx[p];
                    const double v = (double)sX[t];
                    cf1[k] = __dadd_rn(cf1[k], v);
                    cf2[k] = __dadd_rn(cf2[k], __dmul_rn(v, v));
                    const double e = (double)sE[t];
                    ef2[k] = __dadd_rn(ef2[k], __dmul_rn(e, e));
                }
            }
        }
        for (int e = tid; e < RED_WARPS * Q; e += RED_THREADS) sCnt[e] = 0;
        __syncthreads();  // the tile arrays and counts are free for the next tile
    }
#pragma unroll
    for (int k = 0; k < RED_OWN; k++) {
        const int c = tid + k * RED_THREADS;
        if (c < Q) {
            const long long o = ((long long)blockIdx.x * d + j) * 3 * q + c;
            part[o] = cf1[k];
            part[o + q] = cf2[k];
            part[o + 2 * q] = ef2[k];
            if (j == 0) pcount[(long long)blockIdx.x * q + c] = cnt[k];
        }
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
extern "C" __global__ void __launch_bounds__(RED_THREADS, 4) cf_reduce_chunk(const McReduceParams P) {
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
