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
// eighth of a load per distance term. The tile rows are 16-byte aligned: tile is a multiple of 32,
// batches start at multiples of 8, and the shared array is declared float4. The centroids past
// the last whole batch of 32 go in batches of 8 (q = 200: 6 x 32 + 8 instead of 7 x 32).
#define ASSIGN_ROWS 2
template <int NB>
static __device__ __forceinline__ void assign_batch(const float* sC, long long tile, int t0, int lim, long long d,
                                                    const float* x0p, const float* x1p, long long n, int c0,
                                                    float& best0, int& bestC0, float& best1, int& bestC1) {
    float a0[NB], a1[NB];
#pragma unroll
    for (int c = 0; c < NB; c++) {
        a0[c] = 0.0f;
        a1[c] = 0.0f;
    }
    // Pointers stepped per dimension: index arithmetic in 64 bits cost a fifth of the loop.
    const float* p0 = x0p;
    const float* p1 = x1p;
    const float* srow = sC + t0;
    const int D = (int)d;  // <= MaxDims
    for (int j = 0; j < D; j++, p0 += n, p1 += n, srow += tile) {
        const float x0 = *p0, x1 = *p1;
        const float4* row = reinterpret_cast<const float4*>(srow);
#pragma unroll
        for (int c4 = 0; c4 < NB / 4; c4++) {
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
#pragma unroll
    for (int c = 0; c < NB; c++) {
        if (c < lim) {
            if (a0[c] < best0) {
                best0 = a0[c];
                bestC0 = c0 + c;
            }
            if (a1[c] < best1) {
                best1 = a1[c];
                bestC1 = c0 + c;
            }
        }
    }
}

static __device__ __forceinline__ void assign_nearest_body(const float* __restrict__ X, long long n,
                                          const float* __restrict__ C, long long q, long long d,
                                          long long tile, int* __restrict__ assign) {
    extern __shared__ float4 sC4[];  // [d][tile] floats
    float* sC = reinterpret_cast<float*>(sC4);
    const long long i0 = (long long)blockIdx.x * blockDim.x * ASSIGN_ROWS + threadIdx.x;
    const long long i1 = i0 + blockDim.x;
    // A thread past the end computes on row n-1 (n >= 1) and stores nothing.
    const float* x0p = X + min(i0, n - 1);
    const float* x1p = X + min(i1, n - 1);
    float best0 = __int_as_float(0x7f800000), best1 = best0;  // +inf
    int bestC0 = 0, bestC1 = 0;
    for (long long base = 0; base < q; base += tile) {
        const int m = (int)min(tile, q - base);
        const int mp = (m + BATCH - 1) / BATCH * BATCH;
        __syncthreads();
        tile_load(sC, C, q, d, tile, base, m, mp);
        __syncthreads();
        int t0 = 0;
        for (; t0 + BATCH <= m; t0 += BATCH)
            assign_batch<BATCH>(sC, tile, t0, BATCH, d, x0p, x1p, n, (int)base + t0, best0, bestC0, best1, bestC1);
        for (; t0 < m; t0 += 8)
            assign_batch<8>(sC, tile, t0, m - t0, d, x0p, x1p, n, (int)base + t0, best0, bestC0, best1, bestC1);
    }
    if (i0 < n) assign[i0] = bestC0;
    if (i1 < n) assign[i1] = bestC1;
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

// The reduction of a pass (microcluster.Reduce's sums) is cf_sort, cf_reduce_chunk_o* and
// cf_finalize. Its float64 sums must be
// microcluster.reduceChunk's: per chunk, per cluster, the members' means, squared means and
// squared uncertainties added in row order (float32 -> float64 is exact, and so is its square, so
// FMA contraction cannot change a result), the chunk sums then added in chunk order (cf_finalize).
// Adding each cluster's members in row order needs the rows grouped by cluster, stably: cf_sort
// does that once per pass for tiles of RED_TILE rows, and cf_reduce_chunk_o* then visits each row
// once per dimension. (The first version had every thread of a block scan every row of its chunk
// for its own cluster: 4.5 ms per reduction at 6M x 10, q = 200; sorting inside each (chunk,
// dimension) block cut that to 1.65 ms but repeated the sort per dimension.)
#define RED_TILE 2048
#define RED_THREADS 256
#define RED_WARPS (RED_THREADS / 32)
#define RED_SEG (RED_TILE / RED_WARPS)  // rows per warp in cf_sort
#define RED_OWN 4                       // ReduceMaxQ (1024) / RED_THREADS

// cf_sort: one block per tile of RED_TILE rows (the last one short). It writes the tile's rows
// that belong to a cluster (assignment in [0, q)) grouped by cluster and in row order within a
// cluster, as tile-local row numbers: idx[tile*RED_TILE + p], p < starts[tile*(q+1) + q]; cluster
// c's rows are positions [starts[tile*(q+1) + c], starts[tile*(q+1) + c + 1]).
// Stable counting sort: warp w takes rows [w*RED_SEG, (w+1)*RED_SEG) of the tile in groups of 32;
// __match_any_sync finds a group's lanes of one cluster, which count and place the group at once
// (rank = lanes of the same cluster below); the per-warp counts are scanned in warp order, then
// per cluster (block-wide), so warp w's rows of a cluster follow warp w-1's.
// Shared memory: the keys (8 KiB) static; RED_WARPS*q unsigned short per-warp counts, later
// cursors (positions < RED_TILE fit in 16 bits), dynamic: at most 16 KiB for q = 1024.
static __device__ __forceinline__ void cf_sort_body(const int* __restrict__ assign, long long n, long long q,
                                                    unsigned short* __restrict__ idx, int* __restrict__ starts) {
    __shared__ int sKey[RED_TILE];
    __shared__ int sWarp[RED_WARPS];
    extern __shared__ unsigned short sCnt[];  // [RED_WARPS][q]
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int Q = (int)q;
    const long long b = (long long)blockIdx.x * RED_TILE;
    unsigned short* out = idx + b;
    int* st = starts + (long long)blockIdx.x * (q + 1);
    for (int e = tid; e < RED_WARPS * Q; e += RED_THREADS) sCnt[e] = 0;
    for (int t = tid; t < RED_TILE; t += RED_THREADS) {
        const int a = b + t < n ? assign[b + t] : -1;
        sKey[t] = (a >= 0 && a < Q) ? a : Q;  // Q: no cluster (or past the end)
    }
    __syncthreads();
    unsigned short* myCnt = sCnt + w * Q;
    for (int g = 0; g < RED_SEG; g += 32) {
        const int key = sKey[w * RED_SEG + g + lane];
        const unsigned peers = __match_any_sync(0xffffffffu, key);
        if (key < Q && lane == 31 - __clz(peers)) myCnt[key] += (unsigned short)__popc(peers);
        __syncwarp();
    }
    __syncthreads();
    // Thread tid takes clusters RED_OWN*tid .. RED_OWN*tid + RED_OWN-1: the warp counts become
    // offsets within the cluster, then the cluster totals are scanned across the block.
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
            st[c] = before;
            for (int v = 0; v < RED_WARPS; v++) sCnt[v * Q + c] += (unsigned short)before;
        }
        before += tot[k];
    }
    if (tid == RED_THREADS - 1) st[Q] = before;  // rows of the tile in some cluster
    __syncthreads();
    const unsigned lt = (1u << lane) - 1u;  // lanes below this one
    for (int g = 0; g < RED_SEG; g += 32) {
        const int t = w * RED_SEG + g + lane;
        const int key = sKey[t];
        const unsigned peers = __match_any_sync(0xffffffffu, key);
        if (key < Q) out[myCnt[key] + __popc(peers & lt)] = (unsigned short)t;
        __syncwarp();
        if (key < Q && lane == 31 - __clz(peers)) myCnt[key] += (unsigned short)__popc(peers);
        __syncwarp();
    }
}

// McSortParams is cf_sort's parameter, passed by value (Go mirror: mcSortParams).
struct McSortParams {
    const int* assign;
    long long n;
    long long q;
    unsigned short* idx;
    int* starts;
};
static_assert(sizeof(McSortParams) == 40, "McSortParams size");
static_assert(offsetof(McSortParams, assign) == 0, "McSortParams.assign");
static_assert(offsetof(McSortParams, n) == 8, "McSortParams.n");
static_assert(offsetof(McSortParams, q) == 16, "McSortParams.q");
static_assert(offsetof(McSortParams, idx) == 24, "McSortParams.idx");
static_assert(offsetof(McSortParams, starts) == 32, "McSortParams.starts");
extern "C" __global__ void __launch_bounds__(RED_THREADS) cf_sort(const McSortParams P) {
    cf_sort_body(P.assign, P.n, P.q, P.idx, P.starts);
}

// cf_reduce_chunk_o<OWN>: one block of RED_THREADS per (chunk, dimension): blockIdx.x = chunk of
// `chunk` rows, blockIdx.y = dimension j. Thread tid owns clusters tid + k*RED_THREADS, k < OWN
// (OWN = 1 for q <= 256, else 4), and keeps their sums in registers. The block walks the sort
// tiles that meet its chunk in order; per tile, each owner adds the tile's rows of its cluster in
// the sorted order (row order), skipping rows outside the chunk, so every cluster's sum is over
// the chunk's members in row order. Blocks of dimension 0 also count members. The next tile
// (means, sds, sorted rows, starts) is loaded into registers while the current one is summed.
// Shared memory: the tile (means, sds, sorted rows: 20 KiB) static, the q+1 starts dynamic.
// Outputs: part[((chunk*d + j)*3 + s)*q + c] for s = CF1, CF2, EF2, and pcount[chunk*q + c].
#define RED_ROWS (RED_TILE / RED_THREADS)                   // means and sds per thread per tile
#define RED_PAIRS (RED_TILE / 2 / RED_THREADS)              // sorted-row pairs per thread per tile
#define RED_STARTS ((1024 + 1 + RED_THREADS - 1) / RED_THREADS)  // starts per thread, q <= ReduceMaxQ
template <int OWN>
static __device__ __forceinline__ void cf_reduce_chunk_body(const float* __restrict__ X, const float* __restrict__ E,
                                           const unsigned short* __restrict__ idx,
                                           const int* __restrict__ starts, long long n, long long d,
                                           long long q, long long chunk, double* __restrict__ part,
                                           long long* __restrict__ pcount) {
    __shared__ float sX[RED_TILE];
    __shared__ float sE[RED_TILE];
    __shared__ unsigned sIdx[RED_TILE / 2];  // pairs of unsigned short
    extern __shared__ int sStart[];          // [q+1]
    const int tid = threadIdx.x;
    const int Q = (int)q;
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = min(lo + chunk, n);
    const long long j = blockIdx.y;
    const float* Xj = X + j * n;
    const float* Ej = E ? E + j * n : nullptr;
    double cf1[OWN], cf2[OWN], ef2[OWN];
    long long cnt[OWN];
#pragma unroll
    for (int k = 0; k < OWN; k++) {
        cf1[k] = 0.0;
        cf2[k] = 0.0;
        ef2[k] = 0.0;
        cnt[k] = 0;
    }
    float rx[RED_ROWS], re[RED_ROWS];
    unsigned ri[RED_PAIRS];
    int rs[RED_STARTS];
    const long long tFirst = lo / RED_TILE, tLast = (hi - 1) / RED_TILE;
    auto fetch = [&](long long tile) {
        const long long b = tile * RED_TILE;
#pragma unroll
        for (int k = 0; k < RED_ROWS; k++) {
            const long long i = b + tid + k * RED_THREADS;
            rx[k] = i < n ? Xj[i] : 0.0f;
            re[k] = (Ej && i < n) ? Ej[i] : 0.0f;
        }
        const unsigned* ip = reinterpret_cast<const unsigned*>(idx + b);
#pragma unroll
        for (int k = 0; k < RED_PAIRS; k++) ri[k] = ip[tid + k * RED_THREADS];
        const int* sp = starts + tile * (q + 1);
#pragma unroll
        for (int k = 0; k < RED_STARTS; k++) {
            const int c = tid + k * RED_THREADS;
            rs[k] = c <= Q ? sp[c] : 0;
        }
    };
    fetch(tFirst);
    for (long long tile = tFirst; tile <= tLast; tile++) {
#pragma unroll
        for (int k = 0; k < RED_ROWS; k++) {
            sX[tid + k * RED_THREADS] = rx[k];
            sE[tid + k * RED_THREADS] = re[k];
        }
#pragma unroll
        for (int k = 0; k < RED_PAIRS; k++) sIdx[tid + k * RED_THREADS] = ri[k];
#pragma unroll
        for (int k = 0; k < RED_STARTS; k++) {
            const int c = tid + k * RED_THREADS;
            if (c <= Q) sStart[c] = rs[k];
        }
        __syncthreads();  // the tile is in shared memory
        if (tile < tLast) fetch(tile + 1);
        const long long b = tile * RED_TILE;
        const int rlo = (int)max(lo - b, 0LL), rhi = (int)min(hi - b, (long long)RED_TILE);
        const unsigned short* si = reinterpret_cast<const unsigned short*>(sIdx);
#pragma unroll
        for (int k = 0; k < OWN; k++) {
            const int c = tid + k * RED_THREADS;
            if (c < Q) {
                const int p1 = sStart[c + 1];
                for (int p = sStart[c]; p < p1; p++) {
                    const int t = si[p];
                    if (t < rlo || t >= rhi) continue;  // a tile shared with the next or previous chunk
                    const double v = (double)sX[t];
                    cf1[k] = __dadd_rn(cf1[k], v);
                    cf2[k] = __dadd_rn(cf2[k], __dmul_rn(v, v));
                    const double e = (double)sE[t];
                    ef2[k] = __dadd_rn(ef2[k], __dmul_rn(e, e));
                    cnt[k]++;
                }
            }
        }
        __syncthreads();  // the tile arrays are free for the next tile
    }
#pragma unroll
    for (int k = 0; k < OWN; k++) {
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

// McReduceParams is cf_reduce_chunk_o*'s parameter, passed by value (Go mirror: mcReduceParams).
struct McReduceParams {
    const float* X;
    const float* E;
    const unsigned short* idx;
    const int* starts;
    long long n;
    long long d;
    long long q;
    long long chunk;
    double* part;
    long long* pcount;
};
static_assert(sizeof(McReduceParams) == 80, "McReduceParams size");
static_assert(offsetof(McReduceParams, X) == 0, "McReduceParams.X");
static_assert(offsetof(McReduceParams, E) == 8, "McReduceParams.E");
static_assert(offsetof(McReduceParams, idx) == 16, "McReduceParams.idx");
static_assert(offsetof(McReduceParams, starts) == 24, "McReduceParams.starts");
static_assert(offsetof(McReduceParams, n) == 32, "McReduceParams.n");
static_assert(offsetof(McReduceParams, d) == 40, "McReduceParams.d");
static_assert(offsetof(McReduceParams, q) == 48, "McReduceParams.q");
static_assert(offsetof(McReduceParams, chunk) == 56, "McReduceParams.chunk");
static_assert(offsetof(McReduceParams, part) == 64, "McReduceParams.part");
static_assert(offsetof(McReduceParams, pcount) == 72, "McReduceParams.pcount");
extern "C" __global__ void __launch_bounds__(RED_THREADS, 5) cf_reduce_chunk_o1(const McReduceParams P) {
    cf_reduce_chunk_body<1>(P.X, P.E, P.idx, P.starts, P.n, P.d, P.q, P.chunk, P.part, P.pcount);
}
extern "C" __global__ void __launch_bounds__(RED_THREADS, 3) cf_reduce_chunk_o4(const McReduceParams P) {
    cf_reduce_chunk_body<4>(P.X, P.E, P.idx, P.starts, P.n, P.d, P.q, P.chunk, P.part, P.pcount);
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
