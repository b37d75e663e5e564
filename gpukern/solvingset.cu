// solvingset.cu: the SolvingSet algorithm on the GPU (ALGORITHMS.md §1, "GPU structure"), with
// the papers' best structure: CToC (thread per candidate), DToC (thread per point, candidates in
// shared memory, writes the distance matrix), CandNN (block per candidate, per-thread heaps over
// strided slices of its distM row, a tree merge, and the S-MS early exit) and a two-level top-m
// selection of the next candidates (per-block bitonic sort here, a k-way merge on the host).
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

// replace_top on a heap whose slot s lives at h[s*stride] (stride 1: contiguous).
__device__ __forceinline__ void replace_top(float* h, ll stride, int k, float v) {
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= k) break;
        if (c + 1 < k && h[(c + 1) * stride] > h[c * stride]) c++;
        if (h[c * stride] <= v) break;
        h[i * stride] = h[c * stride];
        i = c;
    }
    h[i * stride] = v;
}

__device__ __forceinline__ double plain_sum(const float* h, ll stride, int k) {
    double s = 0.0;
    for (int i = 0; i < k; i++) s = __dadd_rn(s, (double)h[i * stride]);
    return s;
}

__device__ __forceinline__ bool pruned(double ub, double margin, double minOUT) {
    return __dmul_rn(ub, margin) < minOUT;
}

// ss_init: every LNN heap +inf, UB +inf, every point in D \ S.
extern "C" __global__ void ss_init(float* heap, double* ub, int* state, ll N, ll k) {
    const ll p = (ll)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= N) return;
    for (ll s = 0; s < k; s++) heap[s * N + p] = INF;
    ub[p] = __longlong_as_double(0x7ff0000000000000LL);
    state[p] = 0;
}

// ss_gather: step a, thread per candidate: move it into S, copy its coordinates and LNN.
extern "C" __global__ void ss_gather(const float* __restrict__ X, ll N, ll dims,
                                     const float* __restrict__ heap, ll k, const int* __restrict__ cand,
                                     ll nc, int* state, float* candX, float* candHeap) {
    const ll j = (ll)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nc) return;
    const ll p = cand[j];
    state[p] = 1;
    for (ll d = 0; d < dims; d++) candX[j * dims + d] = X[d * N + p];
    for (ll s = 0; s < k; s++) candHeap[j * k + s] = heap[s * N + p];
}

// ss_ctoc: step b, thread per candidate j: LNNC(j) meets every other candidate (in index order),
// then UB_C and the done flag.
extern "C" __global__ void ss_ctoc(const float* __restrict__ candX, ll nc, ll dims, ll k,
                                   float* candHeap, double* candUB, int* candDone, double margin,
                                   double minOUT) {
    const ll j = (ll)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nc) return;
    float* h = candHeap + j * k;
    const float* cj = candX + j * dims;
    for (ll i = 0; i < nc; i++) {
        if (i == j) continue;
        const float* ci = candX + i * dims;
        float s = 0.0f;
        for (ll d = 0; d < dims; d++) {
            const float t = __fsub_rn(cj[d], ci[d]);
            s = __fadd_rn(s, __fmul_rn(t, t));
        }
        const float dist = sqrtf(s);
        if (dist < h[0]) replace_top(h, 1, (int)k, dist);
    }
    const double u = plain_sum(h, 1, (int)k);
    candUB[j] = u;
    candDone[j] = pruned(u, margin, minOUT) ? 1 : 0;
}

// ss_dtoc: step c, points' side, thread per point p, the candidates in shared memory
// (sC[d*nc + j], then nc done flags). A point in S only blanks its distM entries; an active
// point updates its LNN (global heap, root cached) against every candidate in index order; every
// point writes its squared distance to each not-done candidate.
extern "C" __global__ void ss_dtoc(const float* __restrict__ X, ll N, ll dims,
                                   const float* __restrict__ candX, const int* __restrict__ candDone,
                                   ll nc, ll k, const int* __restrict__ state, float* heap, double* ub,
                                   float* distM, double margin, double minOUT) {
    extern __shared__ float sC[];
    int* sDone = (int*)(sC + nc * dims);
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
    const bool live = !pruned(ub[p], margin, minOUT);
    float top = heap[p];
    bool changed = false;
    for (ll j = 0; j < nc; j++) {
        const bool done = sDone[j] != 0;
        if (!live && done) continue;
        const float d2 = sqdist_cols(X, N, dims, p, sC + j, nc);
        if (!done) distM[j * N + p] = d2;
        if (live) {
            const float dist = sqrtf(d2);
            if (dist < top) {
                replace_top(heap + p, N, (int)k, dist);
                top = heap[p];
                changed = true;
            }
        }
    }
    if (changed) ub[p] = plain_sum(heap + p, N, (int)k);
}

#define CANDNN_STEP 1024  // entries per thread between early-exit checks

// candnn: step c, candidates' side, block per candidate j. Each thread keeps a max-heap
// (local memory) of the k smallest distances of its strided slice of distM row j that are below
// the candidate's current k-th distance; every CANDNN_STEP entries a thread whose heap is full
// tests its sum as an upper bound of w_k(c, D) (any k points bound it) and the block stops when
// the candidate is pruned (S-MS early exit). Otherwise the heaps are merged pairwise (tree, through
// scratch[block][slot][thread]) and sorted ascending. ss_candnn merges them with LNNC and thread 0
// writes the exact weight (ascending float64 sum), only for candidates that stay not done;
// ss_candlist (a node of the distributed solving set) writes the sorted local list itself,
// slot-major (list[s*nc + j], +inf padded), so that the first slots of every candidate are one
// contiguous download (the lazy merge).
__device__ __forceinline__ void candnn(const float* __restrict__ distM, ll N, ll k,
                                       const float* __restrict__ candHeap, int* candDone,
                                       double* weight, float* scratch, double margin, double minOUT,
                                       float* list, ll nc) {
    __shared__ int sStop;
    const ll j = blockIdx.x;
    if (candDone[j]) return;  // block-uniform
    const int tid = threadIdx.x, nt = blockDim.x;
    const float* row = distM + j * N;
    const float* lnnc = candHeap + j * k;
    const float T0 = lnnc[0];
    float h[KMAX];
    for (int s = 0; s < k; s++) h[s] = INF;
    if (tid == 0) sStop = 0;
    __syncthreads();
    for (ll base = 0; base < N; base += (ll)nt * CANDNN_STEP) {
        const ll end = min(N, base + (ll)nt * CANDNN_STEP);
        for (ll e = base + tid; e < end; e += nt) {
            const float d2 = row[e];
            const float t = fminf(T0, h[0]);
            if (d2 <= __fmul_rn(t, t)) {  // prefilter: sqrtf(d2) < t implies d2 <= float32(t*t)
                const float dist = sqrtf(d2);
                if (dist < t) replace_top(h, 1, (int)k, dist);
            }
        }
        if (h[0] < INF && pruned(plain_sum(h, 1, (int)k), margin, minOUT)) atomicOr(&sStop, 1);
        __syncthreads();
        if (sStop) break;
        __syncthreads();  // sStop is read by all before anyone could set it in the next step
    }
    if (sStop) {
        if (tid == 0) candDone[j] = 1;
        return;
    }
    float* mine = scratch + (ll)blockIdx.x * k * nt + tid;
    for (int s = 0; s < k; s++) mine[(ll)s * nt] = h[s];
    for (int half = nt / 2; half > 0; half >>= 1) {
        __syncthreads();
        if (tid < half) {
            const float* other = mine + half;
            for (int s = 0; s < k; s++) {
                const float v = other[(ll)s * nt];
                if (v < h[0]) replace_top(h, 1, (int)k, v);
            }
            for (int s = 0; s < k; s++) mine[(ll)s * nt] = h[s];
        }
    }
    if (tid != 0) return;
    if (!list)
        for (int s = 0; s < k; s++)
            if (lnnc[s] < h[0]) replace_top(h, 1, (int)k, lnnc[s]);
    // Heap sort ascending.
    for (int end = (int)k - 1; end > 0; end--) {
        const float last = h[end];
        h[end] = h[0];
        int p = 0;
        for (;;) {
            int c = 2 * p + 1;
            if (c >= end) break;
            if (c + 1 < end && h[c + 1] > h[c]) c++;
            if (h[c] <= last) break;
            h[p] = h[c];
            p = c;
        }
        h[p] = last;
    }
    if (list) {
        for (int s = 0; s < k; s++) list[(ll)s * nc + j] = h[s];
        return;
    }
    double w = 0.0;  // the canonical float64 sum
    for (int s = 0; s < k; s++) w = __dadd_rn(w, (double)h[s]);
    weight[j] = w;
}

extern "C" __global__ void ss_candnn(const float* __restrict__ distM, ll N, ll k,
                                     const float* __restrict__ candHeap, int* candDone,
                                     double* weight, float* scratch, double margin, double minOUT) {
    candnn(distM, N, k, candHeap, candDone, weight, scratch, margin, minOUT, nullptr, 0);
}

extern "C" __global__ void ss_candlist(const float* __restrict__ distM, ll N, ll k,
                                       const float* __restrict__ candHeap, int* candDone,
                                       float* scratch, double margin, double minOUT, float* list,
                                       ll nc) {
    candnn(distM, N, k, candHeap, candDone, nullptr, scratch, margin, minOUT, list, nc);
}

#define SEL_SLICE 2048
#define SEL_THREADS 1024

// ss_select: first level of the top-m selection. Block b sorts its slice of SEL_SLICE points by
// (UB descending, index ascending) with a bitonic sort in shared memory, inactive points (in S or
// pruned) keyed -1 so they sink, and writes its best min(m, SEL_SLICE) (key, index) pairs to
// outKey/outIdx[b*m ...]. active[0] accumulates the number of active points.
extern "C" __global__ void ss_select(const double* __restrict__ ub, const int* __restrict__ state,
                                     ll N, ll m, double margin, double minOUT, double* outKey,
                                     int* outIdx, unsigned long long* active) {
    __shared__ double sK[SEL_SLICE];
    __shared__ int sI[SEL_SLICE];
    __shared__ unsigned int sAct;
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
    // Bitonic sort; "a before b" iff a.key > b.key || (a.key == b.key && a.idx < b.idx).
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
    const ll take = min(m, (ll)SEL_SLICE);
    for (ll t = threadIdx.x; t < take; t += blockDim.x) {
        outKey[blockIdx.x * take + t] = sK[t];
        outIdx[blockIdx.x * take + t] = sI[t];
    }
    if (threadIdx.x == 0) atomicAdd(active, (unsigned long long)sAct);
}
