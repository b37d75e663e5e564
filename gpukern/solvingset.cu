// solvingset.cu: the SolvingSet algorithm on the GPU (ALGORITHMS.md §1, "GPU structure"), with
// the papers' best structure: CToC (thread per candidate), DToC (thread per point, candidates in
// shared memory, writes the distance matrix), CandNN (block per candidate, warp register queues over
// strided slices of its distM row (select.cuh), a merge in warp 0, and the S-MS early exit) and a top-m selection of the next
// candidates in levels (ss_select per slice of points, ss_select_merge over the slices' lists;
// the host sorts the last short list).
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
// before); ptxas gives ss_candnn_q256 and ss_candlist_q64 8 registers more (48, 40), without it
// they lose the read-only path and ss_candnn_q256 spills.

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

// ss_gather: step a, thread per candidate: move it into S, copy its coordinates and LNN.
static __device__ __forceinline__ void ss_gather_body(const float* __restrict__ X, ll N, ll dims,
                                     const float* __restrict__ heap, ll k, const int* __restrict__ cand,
                                     ll nc, int* state, float* candX, float* candHeap) {
    const ll j = (ll)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nc) return;
    const ll p = cand[j];
    state[p] = 1;
    for (ll d = 0; d < dims; d++) candX[j * dims + d] = X[d * N + p];
    for (ll s = 0; s < k; s++) candHeap[j * k + s] = heap[s * N + p];
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

// ss_ctoc: step b, thread per candidate j: LNNC(j) meets every other candidate (in index order),
// then UB_C and the done flag. LNNC is worked on in shared memory (slot s of thread t at
// sH[s*blockDim + t], blockDim*k floats of dynamic shared memory): the same heap operations as
// in global memory, hence the same storage order and plain sum, without a global round trip per
// sift step.
static __device__ __forceinline__ void ss_ctoc_body(const float* __restrict__ candX, ll nc, ll dims, ll k,
                                   float* candHeap, double* candUB, int* candDone, double margin,
                                   double minOUT) {
    extern __shared__ float sH[];
    const ll j = (ll)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nc) return;
    const ll T = blockDim.x;
    float* h = sH + threadIdx.x;
    for (ll s = 0; s < k; s++) h[s * T] = candHeap[j * k + s];
    const float* cj = candX + j * dims;
    for (ll i = 0; i < nc; i++) {
        if (i == j) continue;
        const float* ci = candX + i * dims;
        float s = 0.0f;
        for (ll d = 0; d < dims; d++) {
            const float t = __fsub_rn(__ldg(cj + d), __ldg(ci + d));
            s = __fadd_rn(s, __fmul_rn(t, t));
        }
        const float dist = sqrtf(s);
        if (dist < h[0]) replace_top(h, T, (int)k, dist);
    }
    for (ll s = 0; s < k; s++) candHeap[j * k + s] = h[s * T];
    const double u = plain_sum(h, T, (int)k);
    candUB[j] = u;
    candDone[j] = pruned(u, margin, minOUT) ? 1 : 0;
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
// (sC[d*nc + j], then nc done flags), then the LNN heaps of the block's points (slot s of thread
// t at sH[s*blockDim + t]: blockDim*k floats). A point in S only blanks its distM entries; every
// point writes its squared distance to each not-done candidate. An active point's LNN meets every
// candidate in index order with the CPU heap's operations (replace_top: the same storage order,
// hence the same plain-sum UB bit for bit), bound first: the first pass (the distances, distM)
// also notes whether any candidate is nearer than the heap's root, the largest kept distance
// (the only slot it reads); a candidate at or beyond the root never enters, since the root only
// shrinks. Only then is the heap copied into shared memory, by the warp's lanes that need it
// together (one coalesced load per slot), and a second pass recomputes the same distances (same
// bits) and makes the inserts there; the heap goes back once. Before, the heaps stayed in global
// memory, a dependent global round trip per sift step: 2/3 of SolvingSet's time at 1M rows
// (gpukern/BENCH.md). For dims <= SS_DTOC_REGDIMS the point's coordinates sit in registers.
// Prefilter: sqrtf(d2) < top implies d2 <= fl(top^2) (sqrtf is correctly rounded and monotone,
// so sqrtf(d2) < top gives sqrt(d2) < top, d2 < top^2 and d2 = fl(d2) <= fl(top^2)).
#define SS_DTOC_REGDIMS 16
template <bool REG>
__device__ __forceinline__ float dtoc_dist(const float* __restrict__ X, ll N, ll dims, ll p, const float* xp,
                                           const float* sC, ll nc, ll j) {
    if (!REG) return sqdist_cols(X, N, dims, p, sC + j, nc);
    float d2 = 0.0f;
#pragma unroll
    for (int d = 0; d < SS_DTOC_REGDIMS; d++) {
        if (d < dims) {
            const float t = __fsub_rn(xp[d], sC[d * nc + j]);
            d2 = __fadd_rn(d2, __fmul_rn(t, t));
        }
    }
    return d2;
}

template <bool REG>
__device__ __forceinline__ void ss_dtoc_body(const float* __restrict__ X, ll N, ll dims,
                                   const float* __restrict__ candX, const int* __restrict__ candDone,
                                   ll nc, ll k, const int* __restrict__ state, float* heap, double* ub,
                                   float* distM, double margin, double minOUT) {
    extern __shared__ float sC[];
    int* sDone = (int*)(sC + nc * dims);
    float* sH = (float*)(sDone + nc);
    for (ll e = threadIdx.x; e < nc * dims; e += blockDim.x) {
        const ll j = e / dims, d = e % dims;
        sC[d * nc + j] = candX[e];
    }
    for (ll j = threadIdx.x; j < nc; j += blockDim.x) sDone[j] = candDone[j];
    __syncthreads();
    const ll p = (ll)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= N) return;
    if (state[p] != 0) {
        for (ll j = 0; j < nc; j++)
            if (!sDone[j]) distM[j * N + p] = INF;
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
    const bool live = !pruned(ub[p], margin, minOUT);
    float top = live ? heap[p] : 0.0f;
    float top2 = __fmul_rn(top, top);
    bool need = false;
    for (ll j = 0; j < nc; j++) {
        const bool done = sDone[j] != 0;
        if (!live && done) continue;
        const float d2 = dtoc_dist<REG>(X, N, dims, p, xp, sC, nc, j);
        if (!done) distM[j * N + p] = d2;
        need = need || (live && d2 <= top2 && sqrtf(d2) < top);
    }
    if (!need) return;
    const ll T = blockDim.x;
    float* h = sH + threadIdx.x;
#pragma unroll 10
    for (ll s = 0; s < k; s++) h[s * T] = heap[s * N + p];
    for (ll j = 0; j < nc; j++) {
        const float d2 = dtoc_dist<REG>(X, N, dims, p, xp, sC, nc, j);
        if (d2 <= top2) {
            const float dist = sqrtf(d2);
            if (dist < top) {
                replace_top(h, T, (int)k, dist);
                top = h[0];
                top2 = __fmul_rn(top, top);
            }
        }
    }
#pragma unroll 10
    for (ll s = 0; s < k; s++) heap[s * N + p] = h[s * T];
    ub[p] = plain_sum(h, T, (int)k);
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
extern "C" __global__ void ss_dtoc(const SsDtocParams P) {
    if (P.dims <= SS_DTOC_REGDIMS)
        ss_dtoc_body<true>(P.X, P.N, P.dims, P.candX, P.candDone, P.nc, P.k, P.state, P.heap, P.ub, P.distM, P.margin, P.minOUT);
    else
        ss_dtoc_body<false>(P.X, P.N, P.dims, P.candX, P.candDone, P.nc, P.k, P.state, P.heap, P.ub, P.distM, P.margin, P.minOUT);
}

#define CANDNN_STEP 1024  // entries per thread between early-exit checks
#define CANDNN_THREADS 256
#define CANDNN_WARPS (CANDNN_THREADS / 32)
#define CANDNN_LOADS 16  // row entries each lane loads before offering them (loads in flight; 4: BENCH.md)

// ss_candnn_q*: step c, candidates' side, block per candidate j (CANDNN_THREADS threads). Each
// warp keeps the k smallest distances of its strided slice of distM row j that are below the
// candidate's current k-th distance in a register queue (select.cuh; 64 or 256 slots, k <= slots).
// Every CANDNN_STEP entries per thread a warp whose queue holds k finite distances tests their sum
// as an upper bound of w_k(c, D) (any k points bound it; PruneMargin covers any summation order),
// and the block stops when the candidate is pruned (S-MS early exit). Otherwise warp 0 merges the
// other warps' queues, then LNNC (the candidate's heap), and writes the exact weight (ascending
// float64 sum: the k smallest of the row and LNNC as a multiset, as the CPU's). Row values equal
// to LNNC's largest, T0, are not needed: LNNC holds enough copies of T0. weight[j] is written only
// for candidates that stay not done. With list set (ss_candlist_q*: a node of the distributed
// solving set) warp 0 skips LNNC and writes the queue's first k values, the candidate's local
// distances below T0 ascending (+inf padded), slot-major: list[s*nc + j], so that the first
// slots of every candidate are one contiguous download (the lazy merge).
template <int R>
__device__ __forceinline__ void candnn_body(const float* __restrict__ distM, ll N, ll kl,
                                            const float* __restrict__ candHeap, int* candDone, double* weight,
                                            double margin, double minOUT, float* list, ll nc) {
    __shared__ int sStop;
    __shared__ float sQ[CANDNN_WARPS][32 * R];
    const ll j = blockIdx.x;
    if (candDone[j]) return;  // block-uniform
    const int k = (int)kl;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float* row = distM + j * N;
    const float* lnnc = candHeap + j * k;
    const float T0 = __ldg(lnnc);  // LNNC's root, its largest
    WarpQueue<R> wq;
    wq.init();
    float tau = T0, tau2 = __fmul_rn(T0, T0);  // min(T0, the queue's k-th); fl(tau^2)
    if (tid == 0) sStop = 0;
    __syncthreads();
    for (ll base = 0; base < N; base += (ll)CANDNN_THREADS * CANDNN_STEP) {
        const ll end = min(N, base + (ll)CANDNN_THREADS * CANDNN_STEP);
        for (ll e0 = base + warp * 32; e0 < end; e0 += (ll)CANDNN_THREADS * CANDNN_LOADS) {  // warp-uniform
            float d2[CANDNN_LOADS];
#pragma unroll
            for (int u = 0; u < CANDNN_LOADS; u++) {
                const ll e = e0 + (ll)u * CANDNN_THREADS + lane;
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
        if (wq.get(k - 1) < INF) {  // the queue holds k distances of the row: their sum bounds w_k
            const double ub = wq.ascending_sum(k);
            if (lane == 0 && pruned(ub, margin, minOUT)) atomicOr(&sStop, 1);
        }
        __syncthreads();
        if (sStop) break;
        __syncthreads();  // sStop is read by all before anyone could set it in the next step
    }
    if (sStop) {
        if (tid == 0) candDone[j] = 1;
        return;
    }
#pragma unroll
    for (int r = 0; r < R; r++) sQ[warp][lane * R + r] = wq.q[r];
    __syncthreads();
    if (warp != 0) return;
    for (int w = 1; w < CANDNN_WARPS; w++) {
        for (int b = 0; b < 32 * R; b += 32) {
            const float v = sQ[w][b + lane];  // < T0 or +inf
            const float kth = wq.offer(v < tau, v, lane, k, tau);
            tau = fminf(tau, kth);
        }
    }
    if (list) {  // lane l holds positions l*R .. l*R+R-1
#pragma unroll
        for (int r = 0; r < R; r++)
            if (lane * R + r < k) list[(ll)(lane * R + r) * nc + j] = wq.q[r];
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

// SsCandNNParams is ss_candnn_q*'s parameter and SsCandListParams ss_candlist_q*'s (the
// distributed nodes' list form), passed by value (Go mirrors: ssCandNNParams, ssCandListParams).
// Each kernel hands the body the other form's members as compile-time nulls, as before.
struct SsCandNNParams {
    const float* distM;
    ll N, k;
    const float* candHeap;
    int* candDone;
    double* weight;
    double margin, minOUT;
};
static_assert(sizeof(SsCandNNParams) == 64, "SsCandNNParams size");
static_assert(offsetof(SsCandNNParams, distM) == 0, "SsCandNNParams.distM");
static_assert(offsetof(SsCandNNParams, N) == 8, "SsCandNNParams.N");
static_assert(offsetof(SsCandNNParams, k) == 16, "SsCandNNParams.k");
static_assert(offsetof(SsCandNNParams, candHeap) == 24, "SsCandNNParams.candHeap");
static_assert(offsetof(SsCandNNParams, candDone) == 32, "SsCandNNParams.candDone");
static_assert(offsetof(SsCandNNParams, weight) == 40, "SsCandNNParams.weight");
static_assert(offsetof(SsCandNNParams, margin) == 48, "SsCandNNParams.margin");
static_assert(offsetof(SsCandNNParams, minOUT) == 56, "SsCandNNParams.minOUT");
struct SsCandListParams {
    const float* distM;
    ll N, k;
    const float* candHeap;
    int* candDone;
    double margin, minOUT;
    float* list;
    ll nc;
};
static_assert(sizeof(SsCandListParams) == 72, "SsCandListParams size");
static_assert(offsetof(SsCandListParams, distM) == 0, "SsCandListParams.distM");
static_assert(offsetof(SsCandListParams, N) == 8, "SsCandListParams.N");
static_assert(offsetof(SsCandListParams, k) == 16, "SsCandListParams.k");
static_assert(offsetof(SsCandListParams, candHeap) == 24, "SsCandListParams.candHeap");
static_assert(offsetof(SsCandListParams, candDone) == 32, "SsCandListParams.candDone");
static_assert(offsetof(SsCandListParams, margin) == 40, "SsCandListParams.margin");
static_assert(offsetof(SsCandListParams, minOUT) == 48, "SsCandListParams.minOUT");
static_assert(offsetof(SsCandListParams, list) == 56, "SsCandListParams.list");
static_assert(offsetof(SsCandListParams, nc) == 64, "SsCandListParams.nc");

extern "C" __global__ void __launch_bounds__(CANDNN_THREADS) ss_candnn_q64(const SsCandNNParams P) {
    candnn_body<2>(P.distM, P.N, P.k, P.candHeap, P.candDone, P.weight, P.margin, P.minOUT, nullptr, 0);
}

extern "C" __global__ void __launch_bounds__(CANDNN_THREADS) ss_candnn_q256(const SsCandNNParams P) {
    candnn_body<8>(P.distM, P.N, P.k, P.candHeap, P.candDone, P.weight, P.margin, P.minOUT, nullptr, 0);
}

extern "C" __global__ void __launch_bounds__(CANDNN_THREADS) ss_candlist_q64(const SsCandListParams P) {
    candnn_body<2>(P.distM, P.N, P.k, P.candHeap, P.candDone, nullptr, P.margin, P.minOUT, P.list, P.nc);
}

extern "C" __global__ void __launch_bounds__(CANDNN_THREADS) ss_candlist_q256(const SsCandListParams P) {
    candnn_body<8>(P.distM, P.N, P.k, P.candHeap, P.candDone, nullptr, P.margin, P.minOUT, P.list, P.nc);
}

#define SEL_SLICE 2048
#define SEL_THREADS 1024

// sel_sort sorts a block's SEL_SLICE (key, index) pairs in shared memory best first with a
// bitonic sort: "a before b" iff a.key > b.key || (a.key == b.key && a.idx < b.idx). It begins
// with a barrier (the caller's stores) and ends with one.
__device__ __forceinline__ void sel_sort(double* sK, int* sI) {
    for (int size = 2; size <= SEL_SLICE; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (int t = threadIdx.x; t < SEL_SLICE / 2; t += blockDim.x) {
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
}

// ss_select: first level of the top-m selection. Block b writes the best take = min(m, SEL_SLICE)
// (key, index) pairs of its slice of SEL_SLICE points to outKey/outIdx[b*take ...]: inactive
// points (in S or pruned) are keyed -1; a slice with more than take active points is sorted by
// (UB descending, index ascending) with a bitonic sort in shared memory, one with at most take
// hands them on unsorted. active[0] accumulates the number of active points.
static __device__ __forceinline__ void ss_select_body(const double* __restrict__ ub, const int* __restrict__ state,
                                     ll N, ll m, double margin, double minOUT, double* outKey,
                                     int* outIdx, unsigned long long* active) {
    __shared__ double sK[SEL_SLICE];
    __shared__ int sI[SEL_SLICE];
    __shared__ unsigned int sAct, sPos;
    const ll base = (ll)blockIdx.x * SEL_SLICE;
    if (threadIdx.x == 0) sAct = 0;
    __syncthreads();
    for (int t = threadIdx.x; t < SEL_SLICE; t += blockDim.x) {
        const ll p = base + t;
        double key = -1.0;
        if (p < N && state[p] == 0 && !pruned(ub[p], margin, minOUT)) {
            key = ub[p];
            atomicAdd(&sAct, 1u);
        }
        sK[t] = key;
        sI[t] = (int)min(p, (ll)0x7fffffff);
    }
    __syncthreads();
    const ll take = min(m, (ll)SEL_SLICE);
    const unsigned act = sAct;
    if (threadIdx.x == 0) atomicAdd(active, (unsigned long long)act);
    if (act <= take) {
        // Every active point goes on: no sort, the active pairs in the first act slots in any
        // order (the next level, ss_select_merge, or the host sorts them), the rest key -1.
        // After the first iterations most slices are here (pruned points are inactive).
        if (threadIdx.x == 0) sPos = 0;
        __syncthreads();
        for (int t = threadIdx.x; t < SEL_SLICE; t += blockDim.x) {
            if (sK[t] >= 0.0) {
                const unsigned at = atomicAdd(&sPos, 1u);
                outKey[blockIdx.x * take + at] = sK[t];
                outIdx[blockIdx.x * take + at] = sI[t];
            }
        }
        for (ll t = act + threadIdx.x; t < take; t += blockDim.x) {
            outKey[blockIdx.x * take + t] = -1.0;
            outIdx[blockIdx.x * take + t] = 0x7fffffff;
        }
        return;
    }
    sel_sort(sK, sI);
    for (ll t = threadIdx.x; t < take; t += blockDim.x) {
        outKey[blockIdx.x * take + t] = sK[t];
        outIdx[blockIdx.x * take + t] = sI[t];
    }
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
extern "C" __global__ void ss_select(const SsSelectParams P) {
    ss_select_body(P.ub, P.state, P.N, P.m, P.margin, P.minOUT, P.outKey, P.outIdx, P.active);
}

// ss_select_merge: a further level of the top-m selection, on the device. The previous level
// left L (key, index) pairs in runs of take; block b sorts pairs
// b*SEL_SLICE .. of them (padded with key -1, which sinks: inactive) and writes its best take.
// The m best overall are among the best take of every slice, so each level keeps them and
// shrinks the list about SEL_SLICE/take-fold; the host launches levels until one block is left
// and downloads m pairs instead of every block's (5.9 MB per iteration at 10M rows).
static __device__ __forceinline__ void ss_select_merge_body(const double* __restrict__ inKey, const int* __restrict__ inIdx,
                                                          ll L, ll take, double* outKey, int* outIdx) {
    __shared__ double sK[SEL_SLICE];
    __shared__ int sI[SEL_SLICE];
    const ll base = (ll)blockIdx.x * SEL_SLICE;
    for (int t = threadIdx.x; t < SEL_SLICE; t += blockDim.x) {
        const ll e = base + t;
        sK[t] = e < L ? inKey[e] : -1.0;
        sI[t] = e < L ? inIdx[e] : 0x7fffffff;
    }
    sel_sort(sK, sI);
    for (ll t = threadIdx.x; t < take; t += blockDim.x) {
        outKey[blockIdx.x * take + t] = sK[t];
        outIdx[blockIdx.x * take + t] = sI[t];
    }
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
extern "C" __global__ void ss_select_merge(const SsSelectMergeParams P) {
    ss_select_merge_body(P.inKey, P.inIdx, P.L, P.take, P.outKey, P.outIdx);
}
