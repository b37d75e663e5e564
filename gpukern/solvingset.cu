// solvingset.cu: the SolvingSet algorithm on the GPU (ALGORITHMS.md §1, "GPU structure"), with
// the papers' best structure: CToC (thread per candidate), DToC (thread per point, candidates in
// shared memory, writes the distance matrix), CandNN (blocks per slice of a candidate's distM row, warp
// register queues over strided parts of it (select.cuh), a merge in warp 0, the S-MS early exit,
// then a warp per candidate merging its slices) and a top-m selection of the next
// candidates in levels (ss_select: a radix selection per slice of points; ss_select_merge the
// same over the slices' lists; ss_select_tail the last two levels and the order of the last list,
// which stays on the device as the next iteration's candidates; ss_select_sort orders it where
// there is one slice).
//
// Layout: X is N x dims column-major float32. LNN heaps are slot-major (heap[s*N + p]) so that
// reading every point's root is coalesced. Candidates: cand[j] = point index, candX[j*dims + d],
// candHeap[j*k + s]. distM[j*N + p] holds squared distances (float32) of candidate j.
//
// Arithmetic is solvingset's: squared differences accumulated in dimension order in float32 with
// every op rounded (no FMA), correctly rounded sqrtf, upper bounds as float64 sums in heap storage
// order, weights as float64 sums in ascending order, pruning `ub * margin < minOUT`. The heap of a
// point sees the candidates in the same order as on the CPU, so its UB is bit-identical and the
// same candidates are chosen.
// Parameters: each kernel (or pair of queue sizes) takes one struct by value (gpukern's
// launchStruct; Go mirrors in kernel_abi.go, held to the static_asserts by TestKernelABI) and
// hands its members to an inlined body. Through the struct nvcc drops the read-only path of the
// bodies' __restrict__ parameters, so the read-only loads go through __ldg (61 ld.global.nc, as
// before).

#include "select.cuh"

#define KMAX 256
#define INF __int_as_float(0x7f800000)

typedef long long ll;

__device__ __forceinline__ float sqdist_cols(const float* __restrict__ X, ll N, ll dims, ll p,
                                             const float* c, ll cstride) {
    float s = 0.0f;
    for (ll d = 0; d < dims; d++) {
        const float t = __fsub_rn(X[d * N + p], c[d * cstride]);
        s = __fadd_rn(s, __fmul_rn(t, t));
    }
    return s;
}

__device__ __forceinline__ bool pruned(double ub, double margin, double minOUT) {
    return __dmul_rn(ub, margin) < minOUT;
}

// ss_init: every LNN heap +inf, UB +inf, every point in D \ S.
static __device__ __forceinline__ void ss_init_body(float* heap, double* ub, int* state, ll N, ll k) {
    const ll p = (ll)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= N) return;
    for (ll s = 0; s < k; s++) heap[s * N + p] = INF;
    ub[p] = __longlong_as_double(0x7ff0000000000000LL);
    state[p] = 0;
}

// SsInitParams is ss_init's parameter, passed by value (Go mirror: ssInitParams).
struct SsInitParams {
    float* heap;
    double* ub;
    int* state;
    ll N;
    ll k;
};
static_assert(sizeof(SsInitParams) == 40, "SsInitParams size");
static_assert(offsetof(SsInitParams, heap) == 0, "SsInitParams.heap");
static_assert(offsetof(SsInitParams, ub) == 8, "SsInitParams.ub");
static_assert(offsetof(SsInitParams, state) == 16, "SsInitParams.state");
static_assert(offsetof(SsInitParams, N) == 24, "SsInitParams.N");
static_assert(offsetof(SsInitParams, k) == 32, "SsInitParams.k");
extern "C" __global__ void ss_init(const SsInitParams P) {
    ss_init_body(P.heap, P.ub, P.state, P.N, P.k);
}

// ss_gather: step a, a warp per candidate (SS_GATHER_WARPS per block): move it into S (unless
// state is null: a distributed node's proposal, copied out without moving), copy its
// coordinates and LNN, a lane per value. An index outside the rows (a selection's padding for
// an inactive pair) is skipped. (A thread per candidate waited for its k + dims loads one after
// another: 17-24 us for 100 candidates, BENCHMARKS §4.3.4.)
#define SS_GATHER_WARPS 4
static __device__ __forceinline__ void ss_gather_body(const float* __restrict__ X, ll N, ll dims,
                                     const float* __restrict__ heap, ll k, const int* __restrict__ cand,
                                     ll nc, int* state, float* candX, float* candHeap) {
    const ll j = (ll)blockIdx.x * SS_GATHER_WARPS + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (j >= nc) return;
    const ll p = cand[j];
    if (p < 0 || p >= N) return;
    if (state && lane == 0) state[p] = 1;
    for (ll d = lane; d < dims; d += 32) candX[j * dims + d] = X[d * N + p];
    for (ll s = lane; s < k; s += 32) candHeap[j * k + s] = heap[s * N + p];
}

// SsGatherParams is ss_gather's parameter, passed by value (Go mirror: ssGatherParams).
struct SsGatherParams {
    const float* X;
    ll N;
    ll dims;
    const float* heap;
    ll k;
    const int* cand;
    ll nc;
    int* state;
    float* candX;
    float* candHeap;
};
static_assert(sizeof(SsGatherParams) == 80, "SsGatherParams size");
static_assert(offsetof(SsGatherParams, X) == 0, "SsGatherParams.X");
static_assert(offsetof(SsGatherParams, N) == 8, "SsGatherParams.N");
static_assert(offsetof(SsGatherParams, dims) == 16, "SsGatherParams.dims");
static_assert(offsetof(SsGatherParams, heap) == 24, "SsGatherParams.heap");
static_assert(offsetof(SsGatherParams, k) == 32, "SsGatherParams.k");
static_assert(offsetof(SsGatherParams, cand) == 40, "SsGatherParams.cand");
static_assert(offsetof(SsGatherParams, nc) == 48, "SsGatherParams.nc");
static_assert(offsetof(SsGatherParams, state) == 56, "SsGatherParams.state");
static_assert(offsetof(SsGatherParams, candX) == 64, "SsGatherParams.candX");
static_assert(offsetof(SsGatherParams, candHeap) == 72, "SsGatherParams.candHeap");
extern "C" __global__ void ss_gather(const SsGatherParams P) {
    ss_gather_body(P.X, P.N, P.dims, P.heap, P.k, P.cand, P.nc, P.state, P.candX, P.candHeap);
}

// ss_ctoc: step b, a warp per candidate j (SS_CTOC_WARPS per block): LNNC(j) meets every other
// candidate in index order, then UB_C and the done flag. The lanes compute the distances to 32
// candidates at a time; those below LNNC's root (the largest kept distance) at the batch's start
// are then tested again in index order against the current root and inserted by lane 0 with
// replace_top, the CPU heap's operation, into a copy of LNNC in shared memory: the same inserts
// in the same order as one thread visiting every candidate (the kernel before: a thread per
// candidate, 100 threads in one block, 0.1 ms per iteration, latency-bound).
#define SS_CTOC_WARPS 4
static __device__ __forceinline__ void ss_ctoc_body(const float* __restrict__ candX, ll nc, ll dims, ll kl,
                                   float* candHeap, double* candUB, int* candDone, double margin,
                                   double minOUT) {
    __shared__ float sH[SS_CTOC_WARPS][KMAX];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, k = (int)kl;
    const ll j = (ll)blockIdx.x * SS_CTOC_WARPS + warp;
    if (j >= nc) return;  // warp-uniform
    float* h = sH[warp];
    for (int s = lane; s < k; s += 32) h[s] = candHeap[j * k + s];
    __syncwarp();
    float top = h[0];
    const float* cj = candX + j * dims;
    for (ll i0 = 0; i0 < nc; i0 += 32) {
        const ll i = i0 + lane;
        float dist = INF;
        if (i < nc && i != j) {
            const float* ci = candX + i * dims;
            float s = 0.0f;
            for (ll d = 0; d < dims; d++) {
                const float t = __fsub_rn(__ldg(cj + d), __ldg(ci + d));
                s = __fadd_rn(s, __fmul_rn(t, t));
            }
            dist = sqrtf(s);
        }
        unsigned mask = __ballot_sync(WARP_FULL, dist < top);
        while (mask) {  // warp-uniform
            const int src = __ffs(mask) - 1;
            mask &= mask - 1;
            const float v = __shfl_sync(WARP_FULL, dist, src);
            if (v < top) {
                if (lane == 0) replace_top(h, 1, k, v);
                __syncwarp();
                top = h[0];
                __syncwarp();  // every lane has read the root before lane 0 sifts again
            }
        }
    }
    for (int s = lane; s < k; s += 32) candHeap[j * k + s] = h[s];
    if (lane == 0) {
        const double u = plain_sum(h, 1, k);
        candUB[j] = u;
        candDone[j] = pruned(u, margin, minOUT) ? 1 : 0;
    }
}

// SsCtocParams is ss_ctoc's parameter, passed by value (Go mirror: ssCtocParams).
struct SsCtocParams {
    const float* candX;
    ll nc;
    ll dims;
    ll k;
    float* candHeap;
    double* candUB;
    int* candDone;
    double margin;
    double minOUT;
};
static_assert(sizeof(SsCtocParams) == 72, "SsCtocParams size");
static_assert(offsetof(SsCtocParams, candX) == 0, "SsCtocParams.candX");
static_assert(offsetof(SsCtocParams, nc) == 8, "SsCtocParams.nc");
static_assert(offsetof(SsCtocParams, dims) == 16, "SsCtocParams.dims");
static_assert(offsetof(SsCtocParams, k) == 24, "SsCtocParams.k");
static_assert(offsetof(SsCtocParams, candHeap) == 32, "SsCtocParams.candHeap");
static_assert(offsetof(SsCtocParams, candUB) == 40, "SsCtocParams.candUB");
static_assert(offsetof(SsCtocParams, candDone) == 48, "SsCtocParams.candDone");
static_assert(offsetof(SsCtocParams, margin) == 56, "SsCtocParams.margin");
static_assert(offsetof(SsCtocParams, minOUT) == 64, "SsCtocParams.minOUT");
extern "C" __global__ void ss_ctoc(const SsCtocParams P) {
    ss_ctoc_body(P.candX, P.nc, P.dims, P.k, P.candHeap, P.candUB, P.candDone, P.margin, P.minOUT);
}

// ss_dtoc: step c, points' side, thread per point p, the candidates in shared memory
// (sC[d*nc + j], then nc done flags), then the LNN heaps of the block's T points (slot s of
// thread t at sH[s*T + t]: T*k floats). A point in S only blanks its distM entries; every point
// writes its squared distance to each not-done candidate; an active point's LNN meets every
// candidate in index order with the CPU heap's operations (replace_top_sh: the same storage
// order as replace_top in global memory, hence the same plain-sum UB bits as the kernel before).
// At the first candidate nearer than the heap's root (the largest kept distance, the only slot
// read until then) the heap is copied into shared memory; it goes back once at the end. A
// candidate at or beyond the root never enters (the root only shrinks). Before, the heaps stayed
// in global memory, a dependent global round trip per sift step. The kernel is bound by the
// instructions of the inserts (ncu: SM throughput 84 %, DRAM 6 %), so the sift works in 32-bit
// shared-memory indices with T a compile-time block size, and sqrtf is prefiltered: sqrtf(d2) <
// top implies d2 <= fl(top^2) (sqrtf is correctly rounded and monotone: sqrt(d2) < top, so
// d2 < top^2 and d2 = fl(d2) <= fl(top^2)). For dims <= SS_DTOC_REGDIMS the point's
// coordinates sit in registers.
#define SS_DTOC_REGDIMS 16

// replace_top_sh is select.cuh's replace_top (the CPU twin's heapReplaceTop) for a heap in
// shared memory with slot stride T, each child read once.
template <int T>
__device__ __forceinline__ void replace_top_sh(float* h, int k, float v) {
    int i = 0;
    for (int c = 1; c < k; c = 2 * i + 1) {
        float cv = h[c * T];
        if (c + 1 < k) {
            const float rv = h[(c + 1) * T];
            if (rv > cv) {
                cv = rv;
                c++;
            }
        }
        if (cv <= v) break;
        h[i * T] = cv;
        i = c;
    }
    h[i * T] = v;
}

template <int T>
__device__ __forceinline__ double plain_sum_sh(const float* h, int k) {
    double s = 0.0;
    for (int i = 0; i < k; i++) s = __dadd_rn(s, (double)h[i * T]);
    return s;
}

template <bool REG, int T>
__device__ __forceinline__ void ss_dtoc_body(const float* __restrict__ X, ll N, ll dims,
                                   const float* __restrict__ candX, const int* __restrict__ candDone,
                                   ll nc, ll kl, const int* __restrict__ state, float* heap, double* ub,
                                   float* distM, double margin, double minOUT) {
    extern __shared__ float sC[];
    int* sDone = (int*)(sC + nc * dims);
    float* sH = (float*)(sDone + nc);
    const int k = (int)kl;
    for (ll e = threadIdx.x; e < nc * dims; e += T) {
        const ll j = e / dims, d = e % dims;
        sC[d * nc + j] = candX[e];
    }
    for (ll j = threadIdx.x; j < nc; j += T) sDone[j] = candDone[j];
    __syncthreads();
    const ll p = (ll)blockIdx.x * T + threadIdx.x;
    if (p >= N) return;
    float* dm = distM + p;
    if (state[p] != 0) {
        for (ll j = 0; j < nc; j++, dm += N)
            if (!sDone[j]) *dm = INF;
        return;
    }
    float xp[REG ? SS_DTOC_REGDIMS : 1];
    if (REG) {
#pragma unroll
        for (int d = 0; d < SS_DTOC_REGDIMS; d++) {
            xp[d] = 0.0f;
            if (d < dims) xp[d] = __ldg(X + d * N + p);
        }
    }
    float* h = sH + threadIdx.x;
    const bool live = !pruned(ub[p], margin, minOUT);
    float top = heap[p];
    float top2 = __fmul_rn(top, top);
    bool loaded = false;
    for (ll j = 0; j < nc; j++, dm += N) {
        const bool done = sDone[j] != 0;
        if (!live && done) continue;
        float d2;
        if (REG) {
            d2 = 0.0f;
#pragma unroll
            for (int d = 0; d < SS_DTOC_REGDIMS; d++) {
                if (d < dims) {
                    const float t = __fsub_rn(xp[d], sC[d * nc + j]);
                    d2 = __fadd_rn(d2, __fmul_rn(t, t));
                }
            }
        } else {
            d2 = sqdist_cols(X, N, dims, p, sC + j, nc);
        }
        if (!done) *dm = d2;
        if (live && d2 <= top2) {
            const float dist = sqrtf(d2);
            if (dist < top) {
                if (!loaded) {
#pragma unroll 10
                    for (int s = 0; s < k; s++) h[s * T] = heap[s * N + p];
                    loaded = true;
                }
                replace_top_sh<T>(h, k, dist);
                top = h[0];
                top2 = __fmul_rn(top, top);
            }
        }
    }
    if (loaded) {
#pragma unroll 10
        for (int s = 0; s < k; s++) heap[s * N + p] = h[s * T];
        ub[p] = plain_sum_sh<T>(h, k);
    }
}

// SsDtocParams is ss_dtoc's parameter, passed by value (Go mirror: ssDtocParams).
struct SsDtocParams {
    const float* X;
    ll N;
    ll dims;
    const float* candX;
    const int* candDone;
    ll nc;
    ll k;
    const int* state;
    float* heap;
    double* ub;
    float* distM;
    double margin;
    double minOUT;
};
static_assert(sizeof(SsDtocParams) == 104, "SsDtocParams size");
static_assert(offsetof(SsDtocParams, X) == 0, "SsDtocParams.X");
static_assert(offsetof(SsDtocParams, N) == 8, "SsDtocParams.N");
static_assert(offsetof(SsDtocParams, dims) == 16, "SsDtocParams.dims");
static_assert(offsetof(SsDtocParams, candX) == 24, "SsDtocParams.candX");
static_assert(offsetof(SsDtocParams, candDone) == 32, "SsDtocParams.candDone");
static_assert(offsetof(SsDtocParams, nc) == 40, "SsDtocParams.nc");
static_assert(offsetof(SsDtocParams, k) == 48, "SsDtocParams.k");
static_assert(offsetof(SsDtocParams, state) == 56, "SsDtocParams.state");
static_assert(offsetof(SsDtocParams, heap) == 64, "SsDtocParams.heap");
static_assert(offsetof(SsDtocParams, ub) == 72, "SsDtocParams.ub");
static_assert(offsetof(SsDtocParams, distM) == 80, "SsDtocParams.distM");
static_assert(offsetof(SsDtocParams, margin) == 88, "SsDtocParams.margin");
static_assert(offsetof(SsDtocParams, minOUT) == 96, "SsDtocParams.minOUT");
// ss_dtoc's block size (the host's ssHeapThreads(k)) selects the instantiation.
template <int T>
__device__ __forceinline__ void ss_dtoc_t(const SsDtocParams& P) {
    if (P.dims <= SS_DTOC_REGDIMS)
        ss_dtoc_body<true, T>(P.X, P.N, P.dims, P.candX, P.candDone, P.nc, P.k, P.state, P.heap, P.ub, P.distM, P.margin, P.minOUT);
    else
        ss_dtoc_body<false, T>(P.X, P.N, P.dims, P.candX, P.candDone, P.nc, P.k, P.state, P.heap, P.ub, P.distM, P.margin, P.minOUT);
}
extern "C" __global__ void ss_dtoc(const SsDtocParams P) {
    switch (blockDim.x) {
        case 128: ss_dtoc_t<128>(P); break;
        case 64: ss_dtoc_t<64>(P); break;
        default: ss_dtoc_t<32>(P); break;
    }
}

// A block of 1024 threads keeps 4x the loads of 256 in flight: a slice read whole (a candidate
// not pruned) is latency-bound on its one block (10M x 10 on an H200: 187 -> 125 us a step on one
// device, 143 -> 97 at 4 GPUs; 512 threads 138 / 110; 32 loads a lane instead of 16: slower,
// BENCHMARKS §4.3.3). The early-exit checks stay every CANDNN_CHECK entries of the block. The
// 256-slot queue (k > 64) keeps 256 threads: at 1024 its 64 registers a thread spilled.
#define CANDNN_THREADS_Q64 1024
#define CANDNN_THREADS_Q256 256
#define CANDNN_CHECK 65536  // entries of a block between early-exit checks (4x: 1-2 % slower, BENCHMARKS §4.3.1)
#define CANDNN_LOADS 16     // row entries each lane loads before offering them (loads in flight; 4: BENCH.md)

// ss_candpart_q*: step c, candidates' side, block (j, s) (T threads) for slice s of
// gridDim.y of candidate j's distM row (before: one block per candidate, 100 blocks on 132 SMs,
// latency-bound at 5 % of HBM). Each warp keeps the k smallest distances of its strided part of
// the slice that are below the candidate's current k-th distance in a register queue (select.cuh;
// 64 or 256 slots, k <= slots). Every CANDNN_CHECK entries of the block a warp whose queue holds k
// finite distances tests their sum as an upper bound of w_k(c, D) (any k points bound it;
// PruneMargin covers any summation order), and so does the block with k of its warps' smallest
// (about k/W from each of its W warps); a block that prunes the candidate sets its done flag
// (S-MS early exit), and every block of the candidate stops at its next check once the flag is
// set. Otherwise warp 0 merges the other warps' queues and writes its first k values (the
// slice's k smallest distances below LNNC's largest, T0, ascending, +inf padded) to
// part[(j*S + s)*k ...]; ss_candmerge_q* merges the slices. Row values equal to T0 are not
// needed: LNNC holds enough copies of T0.
template <int R, int T>
__device__ __forceinline__ void candpart_body(const float* __restrict__ distM, ll N, ll kl,
                                              const float* __restrict__ candHeap, int* candDone,
                                              double margin, double minOUT, float* part) {
    constexpr int W = T / 32;  // warps
    static_assert(CANDNN_CHECK % (T * CANDNN_LOADS) == 0, "a check's entries: whole rounds of the block's loads");
    __shared__ float sQ[W][32 * R];
    __shared__ double sPart[W];  // the warps' shares of the block-wide bound
    const ll j = blockIdx.x, S = gridDim.y, sl = blockIdx.y;
    const int k = (int)kl;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    // done by step b or another slice (the flags are block-wide ORs, __syncthreads_or: a shared
    // flag set with atomicOr gave wrong results under racecheck's instrumentation, issue 22)
    if (__syncthreads_or(tid == 0 && *(volatile int*)(candDone + j))) return;
    const float* row = distM + j * N;
    const ll lo = N * sl / S, hi = N * (sl + 1) / S;
    const float T0 = __ldg(candHeap + j * k);  // LNNC's root, its largest
    WarpQueue<R> wq;
    wq.init();
    float tau = T0, tau2 = __fmul_rn(T0, T0);  // min(T0, the queue's k-th); fl(tau^2)
    for (ll base = lo; base < hi; base += (ll)CANDNN_CHECK) {
        const ll end = min(hi, base + (ll)CANDNN_CHECK);
        for (ll e0 = base + warp * 32; e0 < end; e0 += (ll)T * CANDNN_LOADS) {  // warp-uniform
            float d2[CANDNN_LOADS];
#pragma unroll
            for (int u = 0; u < CANDNN_LOADS; u++) {
                const ll e = e0 + (ll)u * T + lane;
                d2[u] = e < end ? __ldg(row + e) : INF;  // +inf never qualifies
            }
#pragma unroll
            for (int u = 0; u < CANDNN_LOADS; u++) {
                // prefilter: sqrtf(d2) < tau implies d2 <= fl(tau^2)
                const bool pre = d2[u] <= tau2;
                const float dist = pre ? sqrtf(d2[u]) : tau;
                const float kth = wq.offer(pre && dist < tau, dist, lane, k, tau);
                if (kth < tau) {
                    tau = kth;
                    tau2 = __fmul_rn(tau, tau);
                }
            }
        }
        bool prunedHere = false;
        if (wq.get(k - 1) < INF) {  // the queue holds k distances of the row: their sum bounds w_k
            // (sum: ascending_sum's bits from a warp tree where that is exact, 5 shuffles instead of
            // k dependent ones on every warp at every check, BENCHMARKS §4.3.4)
            const double ub = wq.sum(k, lane);
            prunedHere = lane == 0 && pruned(ub, margin, minOUT);
        }
        // Block-wide: warp w's cw smallest (cw = k/W, one more for the first k%W warps) are k
        // distances of distinct rows too, found long before one warp holds k (a node's slices
        // were read nearly whole waiting for that: 488 µs a step at 2 GPUs against one device's
        // 590, BENCHMARKS §4.3.1).
        const int cw = k / W + (warp < k % W ? 1 : 0);
        const double part = cw == 0 ? 0.0 : wq.get(cw - 1) < INF ? wq.ascending_sum(cw) : (double)INF;
        if (lane == 0) sPart[warp] = part;
        __syncthreads();
        if (tid == 0) {
            double ub = 0.0;
            for (int w = 0; w < W; w++) ub = __dadd_rn(ub, sPart[w]);
            prunedHere = prunedHere || pruned(ub, margin, minOUT);
        }
        if (__syncthreads_or(prunedHere)) {
            if (tid == 0) atomicOr(candDone + j, 1);
            return;
        }
        if (__syncthreads_or(tid == 0 && *(volatile int*)(candDone + j))) return;
    }
#pragma unroll
    for (int r = 0; r < R; r++) sQ[warp][lane * R + r] = wq.q[r];
    __syncthreads();
    if (warp != 0) return;
    for (int w = 1; w < W; w++) {
        for (int b = 0; b < 32 * R; b += 32) {
            const float v = sQ[w][b + lane];  // < T0 or +inf
            const float kth = wq.offer(v < tau, v, lane, k, tau);
            tau = fminf(tau, kth);
        }
    }
    float* out = part + (j * S + sl) * k;
#pragma unroll
    for (int r = 0; r < R; r++)
        if (lane * R + r < k) out[lane * R + r] = wq.q[r];
}

// ss_candmerge_q*: one warp per candidate j not done: the k smallest of its S slices' values
// (ss_candpart_q*) in a register queue. Weight form (list null): with LNNC, the exact weight
// (ascending float64 sum: the k smallest of the row and LNNC as a multiset, as the CPU's),
// weight[j]. List form (a node of the distributed solving set): the candidate's local distances
// below T0, ascending (+inf padded), candidate-major: list[j*k + s] (the host serves each list
// as it lies; a slot-major layout cost a transposition on the host, 30 µs a step).
template <int R>
__device__ __forceinline__ void candmerge_body(const float* __restrict__ part, ll S, ll kl,
                                               const float* __restrict__ candHeap, const int* __restrict__ candDone,
                                               double* weight, float* list) {
    const ll j = blockIdx.x;
    if (candDone[j]) return;  // warp-uniform: ss_candpart_q* has finished
    const int k = (int)kl, lane = threadIdx.x & 31;
    const float* lnnc = candHeap + j * k;
    WarpQueue<R> wq;
    wq.init();
    float tau = __ldg(lnnc);  // T0: every part value is below it or +inf
    for (ll sl = 0; sl < S; sl++) {
        const float* in = part + (j * S + sl) * k;
        for (int b = 0; b < k; b += 32) {
            const float v = b + lane < k ? __ldg(in + b + lane) : INF;
            const float kth = wq.offer(v < tau, v, lane, k, tau);
            tau = fminf(tau, kth);
        }
    }
    if (list) {  // lane l holds positions l*R .. l*R+R-1
#pragma unroll
        for (int r = 0; r < R; r++)
            if (lane * R + r < k) list[j * kl + lane * R + r] = wq.q[r];
        return;
    }
    float kth = wq.get(k - 1);  // LNNC's values are <= T0: filter them by the queue's own k-th
    for (int b = 0; b < k; b += 32) {
        const float v = b + lane < k ? __ldg(lnnc + b + lane) : INF;
        kth = wq.offer(v < kth, v, lane, k, kth);
    }
    const double w = wq.ascending_sum(k);
    if (lane == 0) weight[j] = w;
}

// SsCandPartParams is ss_candpart_q*'s parameter and SsCandMergeParams ss_candmerge_q*'s, passed
// by value (Go mirrors: ssCandPartParams, ssCandMergeParams).
struct SsCandPartParams {
    const float* distM;
    ll N, k;
    const float* candHeap;
    int* candDone;
    double margin, minOUT;
    float* part;
};
static_assert(sizeof(SsCandPartParams) == 64, "SsCandPartParams size");
static_assert(offsetof(SsCandPartParams, distM) == 0, "SsCandPartParams.distM");
static_assert(offsetof(SsCandPartParams, N) == 8, "SsCandPartParams.N");
static_assert(offsetof(SsCandPartParams, k) == 16, "SsCandPartParams.k");
static_assert(offsetof(SsCandPartParams, candHeap) == 24, "SsCandPartParams.candHeap");
static_assert(offsetof(SsCandPartParams, candDone) == 32, "SsCandPartParams.candDone");
static_assert(offsetof(SsCandPartParams, margin) == 40, "SsCandPartParams.margin");
static_assert(offsetof(SsCandPartParams, minOUT) == 48, "SsCandPartParams.minOUT");
static_assert(offsetof(SsCandPartParams, part) == 56, "SsCandPartParams.part");
struct SsCandMergeParams {
    const float* part;
    ll S, k;
    const float* candHeap;
    const int* candDone;
    double* weight;
    float* list;
};
static_assert(sizeof(SsCandMergeParams) == 56, "SsCandMergeParams size");
static_assert(offsetof(SsCandMergeParams, part) == 0, "SsCandMergeParams.part");
static_assert(offsetof(SsCandMergeParams, S) == 8, "SsCandMergeParams.S");
static_assert(offsetof(SsCandMergeParams, k) == 16, "SsCandMergeParams.k");
static_assert(offsetof(SsCandMergeParams, candHeap) == 24, "SsCandMergeParams.candHeap");
static_assert(offsetof(SsCandMergeParams, candDone) == 32, "SsCandMergeParams.candDone");
static_assert(offsetof(SsCandMergeParams, weight) == 40, "SsCandMergeParams.weight");
static_assert(offsetof(SsCandMergeParams, list) == 48, "SsCandMergeParams.list");

extern "C" __global__ void __launch_bounds__(CANDNN_THREADS_Q64) ss_candpart_q64(const SsCandPartParams P) {
    candpart_body<2, CANDNN_THREADS_Q64>(P.distM, P.N, P.k, P.candHeap, P.candDone, P.margin, P.minOUT, P.part);
}

extern "C" __global__ void __launch_bounds__(CANDNN_THREADS_Q256) ss_candpart_q256(const SsCandPartParams P) {
    candpart_body<8, CANDNN_THREADS_Q256>(P.distM, P.N, P.k, P.candHeap, P.candDone, P.margin, P.minOUT, P.part);
}

extern "C" __global__ void __launch_bounds__(32) ss_candmerge_q64(const SsCandMergeParams P) {
    candmerge_body<2>(P.part, P.S, P.k, P.candHeap, P.candDone, P.weight, P.list);
}

extern "C" __global__ void __launch_bounds__(32) ss_candmerge_q256(const SsCandMergeParams P) {
    candmerge_body<8>(P.part, P.S, P.k, P.candHeap, P.candDone, P.weight, P.list);
}

#define SEL_SLICE 2048
#define SEL_THREADS 1024
#define SEL_PER_THREAD (SEL_SLICE / SEL_THREADS)

// sel_take is one level of the top-m selection for a block: of the SEL_SLICE (key, index) pairs
// that its threads hold (SEL_PER_THREAD each, pair e of thread t at slot e*SEL_THREADS + t; key
// < 0: inactive), it writes the best take by (key descending, index ascending) to
// outKey/outIdx[slot*take ...] (slot: the block's run, blockIdx.x but in ss_select_tail's
// last block) in no particular order (the next level or the host sorts them) and pads the rest of the take slots with (-1, 0x7fffffff). act is the number of active
// pairs. With more than take active it finds the take-th best by radix selection on the 96-bit
// composite (the key's bits, then the inverted index: the keys are >= 0, whose bits order as
// unsigned integers, and no index occurs twice, so every composite is distinct): a pass histograms
// the next 8 bits of the pairs still undecided, and the bin that holds the take-th best decides
// every pair above it (in) and below it (out); it ends when that bin holds exactly the pairs still
// needed (at the latest after the 12th pass, whose bins hold one pair each). Typically 4-5
// passes of 3 barriers each, where the bitonic sort it replaces took 66 barriers and 2048 * 66 / 2
// compare-exchanges per block (issue 22: ss_select and its merge levels, 0.19 ms per iteration
// on g2d 1M, were latency-bound on those sorts). Block-uniform call; SEL_THREADS threads.
__device__ __forceinline__ void sel_take(const double (&key)[SEL_PER_THREAD], const int (&idx)[SEL_PER_THREAD],
                                         unsigned act, ll take, double* outKey, int* outIdx, ll slot) {
    __shared__ unsigned sHist[256];
    __shared__ unsigned sPos, sDigit, sAbove;
    __shared__ int sDone;
    // st: 0 undecided, 1 in, 2 out
    int st[SEL_PER_THREAD];
#pragma unroll
    for (int e = 0; e < SEL_PER_THREAD; e++) st[e] = key[e] >= 0.0 ? (act <= take ? 1 : 0) : 2;
    if (threadIdx.x == 0) {
        sPos = 0;
        sDone = act <= take;
    }
    unsigned need = (unsigned)min((ll)act, take);  // pairs still to take (uniform)
    __syncthreads();
    for (int pass = 0; !sDone; pass++) {  // block-uniform: sDone changes only between barriers
        if (threadIdx.x < 256) sHist[threadIdx.x] = 0;
        __syncthreads();
        const int sh = pass < 8 ? 56 - 8 * pass : 24 - 8 * (pass - 8);
        unsigned dig[SEL_PER_THREAD];
#pragma unroll
        for (int e = 0; e < SEL_PER_THREAD; e++) {
            // the composite's bits: the key's (+0 for -0, which a sum of distances never is), then ~index
            const unsigned long long hi = key[e] == 0.0 ? 0ull : (unsigned long long)__double_as_longlong(key[e]);
            dig[e] = pass < 8 ? (unsigned)(hi >> sh) & 255u : (~(unsigned)idx[e] >> sh) & 255u;
            if (st[e] == 0) atomicAdd(&sHist[dig[e]], 1u);
        }
        __syncthreads();
        if (threadIdx.x < 32) {
            // lane l sums bins 255-8l .. 248-8l (from the top); a suffix scan over the lanes
            const int lane = threadIdx.x;
            unsigned sum = 0;
#pragma unroll
            for (int i = 0; i < 8; i++) sum += sHist[255 - 8 * lane - i];
            unsigned incl = sum;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const unsigned v = __shfl_up_sync(WARP_FULL, incl, o);
                if (lane >= o) incl += v;
            }
            const unsigned excl = incl - sum;  // pairs in the bins above this lane's
            if (excl < need && need <= incl) {  // exactly one lane
                unsigned above = excl, b = 255 - 8 * lane;
                while (above + sHist[b] < need) above += sHist[b--];
                sDigit = b;
                sAbove = above;
                // pass 11's bins hold one composite each, so the condition holds by then; the
                // pass bound only guards the shift against a repeated index (a caller's bug)
                sDone = sHist[b] == need - above || pass == 11;
            }
        }
        __syncthreads();
        const unsigned d = sDigit;
        const bool all = sDone;
#pragma unroll
        for (int e = 0; e < SEL_PER_THREAD; e++)
            if (st[e] == 0) st[e] = dig[e] > d ? 1 : dig[e] < d ? 2 : (all ? 1 : 0);
        need -= sAbove;
    }
#pragma unroll
    for (int e = 0; e < SEL_PER_THREAD; e++) {
        if (st[e] == 1) {
            const unsigned at = atomicAdd(&sPos, 1u);
            if (at < take) {  // always, but for a repeated index
                outKey[slot * take + at] = key[e];
                outIdx[slot * take + at] = idx[e];
            }
        }
    }
    for (ll t = min((ll)act, take) + threadIdx.x; t < take; t += blockDim.x) {
        outKey[slot * take + t] = -1.0;
        outIdx[slot * take + t] = 0x7fffffff;
    }
}

// ss_select: first level of the top-m selection. Block b writes the best take = min(m, SEL_SLICE)
// (key, index) pairs of its slice of SEL_SLICE points to outKey/outIdx[b*take ...] (sel_take):
// the key is the point's UB, or -1 for an inactive point (in S or pruned). active[0] (when not
// null: the distributed node's count) accumulates the number of active points.
static __device__ __forceinline__ void ss_select_body(const double* __restrict__ ub, const int* __restrict__ state,
                                     ll N, ll m, double margin, double minOUT, double* outKey,
                                     int* outIdx, unsigned long long* active) {
    const ll base = (ll)blockIdx.x * SEL_SLICE;
    double key[SEL_PER_THREAD];
    int idx[SEL_PER_THREAD];
    unsigned act = 0;
#pragma unroll
    for (int e = 0; e < SEL_PER_THREAD; e++) {
        const ll p = base + e * SEL_THREADS + threadIdx.x;
        key[e] = -1.0;
        if (p < N && state[p] == 0) {
            const double u = ub[p];
            if (!pruned(u, margin, minOUT)) key[e] = u;
        }
        idx[e] = (int)min(p, (ll)0x7fffffff);
        act += __syncthreads_count(key[e] >= 0.0);
    }
    if (active && threadIdx.x == 0) atomicAdd(active, (unsigned long long)act);
    sel_take(key, idx, act, min(m, (ll)SEL_SLICE), outKey, outIdx, blockIdx.x);
}

// SsSelectParams is ss_select's parameter, passed by value (Go mirror: ssSelectParams).
struct SsSelectParams {
    const double* ub;
    const int* state;
    ll N;
    ll m;
    double margin;
    double minOUT;
    double* outKey;
    int* outIdx;
    unsigned long long* active;
};
static_assert(sizeof(SsSelectParams) == 72, "SsSelectParams size");
static_assert(offsetof(SsSelectParams, ub) == 0, "SsSelectParams.ub");
static_assert(offsetof(SsSelectParams, state) == 8, "SsSelectParams.state");
static_assert(offsetof(SsSelectParams, N) == 16, "SsSelectParams.N");
static_assert(offsetof(SsSelectParams, m) == 24, "SsSelectParams.m");
static_assert(offsetof(SsSelectParams, margin) == 32, "SsSelectParams.margin");
static_assert(offsetof(SsSelectParams, minOUT) == 40, "SsSelectParams.minOUT");
static_assert(offsetof(SsSelectParams, outKey) == 48, "SsSelectParams.outKey");
static_assert(offsetof(SsSelectParams, outIdx) == 56, "SsSelectParams.outIdx");
static_assert(offsetof(SsSelectParams, active) == 64, "SsSelectParams.active");
// 2 blocks of SEL_THREADS per SM: 32 registers a thread at most (46 unbounded: one block per SM).
extern "C" __global__ void __launch_bounds__(SEL_THREADS, 2) ss_select(const SsSelectParams P) {
    ss_select_body(P.ub, P.state, P.N, P.m, P.margin, P.minOUT, P.outKey, P.outIdx, P.active);
}

// ss_select_merge: a further level of the top-m selection, on the device. The previous level
// left L (key, index) pairs in runs of take; a block takes the best take (sel_take) of pairs
// slot*SEL_SLICE .. (padded with key -1: inactive) into run slot (its block, or ss_select_tail's
// slices). The m best overall are among the best take of every slice, so each level keeps them
// and shrinks the list about SEL_SLICE/take-fold; the host launches levels, the last two in
// ss_select_tail, until one run is left and downloads m pairs instead of every block's (5.9 MB
// per iteration at 10M rows).
static __device__ __forceinline__ void ss_select_merge_body(const double* inKey, const int* inIdx,
                                                          ll L, ll take, double* outKey, int* outIdx, ll slot) {
    const ll base = slot * SEL_SLICE;
    double key[SEL_PER_THREAD];
    int idx[SEL_PER_THREAD];
    unsigned act = 0;
#pragma unroll
    for (int e = 0; e < SEL_PER_THREAD; e++) {
        const ll i = base + e * SEL_THREADS + threadIdx.x;
        key[e] = i < L ? __ldcg(inKey + i) : -1.0;  // (L2: other blocks of ss_select_tail wrote them)
        idx[e] = i < L ? __ldcg(inIdx + i) : 0x7fffffff;
        act += __syncthreads_count(key[e] >= 0.0);
    }
    sel_take(key, idx, act, take, outKey, outIdx, slot);
}


// SsSelectMergeParams is ss_select_merge's parameter, passed by value (Go mirror: ssSelectMergeParams).
struct SsSelectMergeParams {
    const double* inKey;
    const int* inIdx;
    ll L;
    ll take;
    double* outKey;
    int* outIdx;
};
static_assert(sizeof(SsSelectMergeParams) == 48, "SsSelectMergeParams size");
static_assert(offsetof(SsSelectMergeParams, inKey) == 0, "SsSelectMergeParams.inKey");
static_assert(offsetof(SsSelectMergeParams, inIdx) == 8, "SsSelectMergeParams.inIdx");
static_assert(offsetof(SsSelectMergeParams, L) == 16, "SsSelectMergeParams.L");
static_assert(offsetof(SsSelectMergeParams, take) == 24, "SsSelectMergeParams.take");
static_assert(offsetof(SsSelectMergeParams, outKey) == 32, "SsSelectMergeParams.outKey");
static_assert(offsetof(SsSelectMergeParams, outIdx) == 40, "SsSelectMergeParams.outIdx");
extern "C" __global__ void __launch_bounds__(SEL_THREADS, 2) ss_select_merge(const SsSelectMergeParams P) {
    ss_select_merge_body(P.inKey, P.inIdx, P.L, P.take, P.outKey, P.outIdx, blockIdx.x);
}

// ss_select_sort: the last level's list on the device, in the order the CPU twin takes its next
// candidates: one block sorts the n <= SEL_SLICE pairs of key/idx in place by (key descending,
// index ascending; key -1, inactive, last) with a bitonic sort over the next power of two, P,
// its threads striding over the P/2 compare-exchanges (ss_select_sort is launched with P/2, the
// host's ssSortThreads; ss_select_tail sorts with its SEL_THREADS). The one-device run then hands the sorted indices
// to the next iteration's ss_gather as its candidates (after the host has cut the prefix that
// its new minOUT keeps) instead of uploading them, and downloads this list together with the
// weights in one copy.
static __device__ __forceinline__ void ss_select_sort_body(double* key, int* idx, ll n) {
    __shared__ double sK[SEL_SLICE];
    __shared__ int sI[SEL_SLICE];
    int P = 2;
    while (P < n) P <<= 1;
    for (int t = threadIdx.x; t < P; t += blockDim.x) {
        sK[t] = t < n ? key[t] : -1.0;
        sI[t] = t < n ? idx[t] : 0x7fffffff;
    }
    for (int size = 2; size <= P; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (int t = threadIdx.x; t < P / 2; t += blockDim.x) {
                const int lo = 2 * t - (t & (stride - 1));
                const int hi = lo + stride;
                const bool desc = (lo & size) == 0;  // this run sorts best-first
                const double ka = sK[lo], kb = sK[hi];
                const int ia = sI[lo], ib = sI[hi];
                const bool bFirst = kb > ka || (kb == ka && ib < ia);
                if (bFirst == desc) {
                    sK[lo] = kb; sK[hi] = ka;
                    sI[lo] = ib; sI[hi] = ia;
                }
            }
        }
    }
    __syncthreads();
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        key[t] = sK[t];
        idx[t] = sI[t];
    }
}

// SsSelectSortParams is ss_select_sort's parameter, passed by value (Go mirror: ssSelectSortParams).
struct SsSelectSortParams {
    double* key;
    int* idx;
    ll n;
};
static_assert(sizeof(SsSelectSortParams) == 24, "SsSelectSortParams size");
static_assert(offsetof(SsSelectSortParams, key) == 0, "SsSelectSortParams.key");
static_assert(offsetof(SsSelectSortParams, idx) == 8, "SsSelectSortParams.idx");
static_assert(offsetof(SsSelectSortParams, n) == 16, "SsSelectSortParams.n");
extern "C" __global__ void __launch_bounds__(SEL_THREADS) ss_select_sort(const SsSelectSortParams P) {
    ss_select_sort_body(P.key, P.idx, P.n);
}

// ss_select_tail: the last two levels of the selection (or the one there is) and ss_select_sort
// in one launch (a launch each was 8.5-9.5 us a step at 4 GPUs and on one device, mostly the
// launches' latency; the tail of every level was 72 us on one device, its levels one slice
// after another in one block: BENCHMARKS §4.3.4). The grid is the first level's blocks; each
// takes its slice, and the last block to finish (a counter, *count, zero before the launch and
// set back to zero after) runs the further levels alone, one slice after another, then sorts the last level's
// take pairs (ss_select_sort's order). Each level keeps the pairs of the launch it replaces,
// and the sort's order is total, so the result is theirs bit for bit. Levels ping-pong between
// key0/idx0 (ss_select's output, the first level's input) and key1/idx1; the last level writes
// finKey/finIdx.
struct SsSelectTailParams {
    double* key0;
    int* idx0;
    double* key1;
    int* idx1;
    double* finKey;
    int* finIdx;
    ll L;
    ll take;
    ll levels;
    unsigned* count;
};
static_assert(sizeof(SsSelectTailParams) == 80, "SsSelectTailParams size");
static_assert(offsetof(SsSelectTailParams, key0) == 0, "SsSelectTailParams.key0");
static_assert(offsetof(SsSelectTailParams, idx0) == 8, "SsSelectTailParams.idx0");
static_assert(offsetof(SsSelectTailParams, key1) == 16, "SsSelectTailParams.key1");
static_assert(offsetof(SsSelectTailParams, idx1) == 24, "SsSelectTailParams.idx1");
static_assert(offsetof(SsSelectTailParams, finKey) == 32, "SsSelectTailParams.finKey");
static_assert(offsetof(SsSelectTailParams, finIdx) == 40, "SsSelectTailParams.finIdx");
static_assert(offsetof(SsSelectTailParams, L) == 48, "SsSelectTailParams.L");
static_assert(offsetof(SsSelectTailParams, take) == 56, "SsSelectTailParams.take");
static_assert(offsetof(SsSelectTailParams, levels) == 64, "SsSelectTailParams.levels");
static_assert(offsetof(SsSelectTailParams, count) == 72, "SsSelectTailParams.count");
extern "C" __global__ void __launch_bounds__(SEL_THREADS) ss_select_tail(const SsSelectTailParams P) {
    __shared__ int sLast;
    double* inK = P.key0;
    int* inI = P.idx0;
    double* outK = P.levels == 1 ? P.finKey : P.key1;
    int* outI = P.levels == 1 ? P.finIdx : P.idx1;
    ss_select_merge_body(inK, inI, P.L, P.take, outK, outI, blockIdx.x);
    // The block's pairs are out before the count says so: the last block reads them.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) sLast = atomicAdd(P.count, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!sLast) return;  // block-uniform
    __threadfence();
    ll L = (ll)gridDim.x * P.take;
    for (ll level = 1; level < P.levels; level++) {
        double* freeK = inK;  // the level before's input: this level's output
        int* freeI = inI;
        inK = outK;
        inI = outI;
        outK = level == P.levels - 1 ? P.finKey : freeK;
        outI = level == P.levels - 1 ? P.finIdx : freeI;
        const ll nb = (L + SEL_SLICE - 1) / SEL_SLICE;
        for (ll b = 0; b < nb; b++) {
            __syncthreads();  // sel_take's shared state free again
            ss_select_merge_body(inK, inI, L, P.take, outK, outI, b);
        }
        L = nb * P.take;
        __syncthreads();  // the level's pairs written before the next level reads them
    }
    ss_select_sort_body(P.finKey, P.finIdx, P.take);
    if (threadIdx.x == 0) *P.count = 0u;
}
