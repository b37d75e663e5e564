// keyed.cu: models per key (detect.key_by: key; issue 21 item 2). Every warm key's ranking model
// lives in a slot of one device store; a batch's records, grouped by key, are scored against their
// own key's model in one launch: the per-feature tail score (rank.Tail.Score) and the k-NN weight
// w_k(q, R) to the key's window sample R in its standardised space (solvingset.KNNWeights). The
// calibrations stay on the host, which combines the two raw scores (detect's Ranker.combine).
//
// Slot layout (KeyedShape in keyed.go; slot_bytes a multiple of 16): double spread[d], center[d],
// unit[d]; int n (values per feature of the sorted tails), m (points of R), k, pad; float
// sorted[d][w] (each feature ascending, n used), points[d][w] (R column-major, m used).
//
// keyed_score_q32 / _q64: one warp per chunk (up to 32 records of one slot, chunks[c] = slot,
// first record, count), the records in chunk order, record-major x[n][d]. Per record:
//   - tail: lane j takes features j, j+32, ...: the counts #{v <= x} and #{v < x} by the CPU's
//     branchless double binary search (rank's counts), then rank's surprisal with the host's
//     logarithms (logs[c] = math.Log(c), c = 0..w: the same bits), correctly rounded double ops
//     (no FMA contraction); beyond the window's range the tail adds u = (s[0] - x) / spread (or
//     the mirror) while u <= ln n; past that rank adds ln n + log1p(u - ln n), and the record is
//     marked for the host (host[r] = 1), which scores its tail on the CPU. The features' surprisals
//     are summed in feature order from 0.0, as Tail.Score sums them.
//   - distance: the record in the key's space, x' = clamp((x - center) / unit, +-1e6) in double,
//     rounded to float (detect's distanceSpace; NaN never reaches here: the host keeps non-finite
//     records); each lane the squared distances to points lane, lane+32, ... (float32, dimensions
//     in order, u = x' - p, acc = acc + u*u: solvingset's sqDistColGo), the warp's register queue
//     (select.cuh) keeps the k smallest, their correctly rounded sqrtf summed ascending in double
//     (WarpQueue::sum: canonicalWeight's bits); +inf when k > m.
// keyed_install: block b copies staged model b (slot_bytes) into slot slot[b] of the store.
// keyed_self_q32 / _q64 (a key's model build, its k-NN calibration; many keys in one launch): one
// block per point set (a key's window sample R in its space, d columns of n points), its warps
// taking the set's points in turn; point i's weight is the sum of the distances to its k nearest
// other points of the set (solvingset.KNNWeightsSelf: the same float32 squared distances, the
// point itself left out by its index, the k smallest kept by the warp's register queue, their
// correctly rounded sqrtf summed ascending in double; +inf when k > n - 1).
#include <cstddef>

#include "select.cuh"

// KEYED_MAXD: the most features the kernels take (the record's distance-space coordinates sit in
// shared memory, KEYED_MAXD floats per warp); keyed.go mirrors it (KeyedMaxDims).
#define KEYED_MAXD 64
// KEYED_BLOCK: threads per block of keyed_score (keyedBlock in keyed_cuda.go).
#define KEYED_BLOCK 256
#define KEYED_LIMIT 1e6

struct KeyedScoreParams {
    const unsigned char* slots;  // the store: slot s at slots + s * slot_bytes
    long long slot_bytes;
    long long d;
    long long w;           // capacity per feature of sorted and points
    const double* logs;    // logs[c] = ln c, c = 0..w
    const int* chunks;     // [nchunk][3]: slot, first record, count (1..32)
    long long nchunk;
    const float* x;        // [n][d] the records in chunk order
    long long n;
    double* tail;          // n: the tail score (nats)
    double* dist;          // n: w_k(q, R)
    int* host;             // n: 1 where the host must score the tail (see above)
};
static_assert(sizeof(KeyedScoreParams) == 96, "KeyedScoreParams size");
static_assert(offsetof(KeyedScoreParams, slots) == 0, "KeyedScoreParams.slots");
static_assert(offsetof(KeyedScoreParams, slot_bytes) == 8, "KeyedScoreParams.slot_bytes");
static_assert(offsetof(KeyedScoreParams, d) == 16, "KeyedScoreParams.d");
static_assert(offsetof(KeyedScoreParams, w) == 24, "KeyedScoreParams.w");
static_assert(offsetof(KeyedScoreParams, logs) == 32, "KeyedScoreParams.logs");
static_assert(offsetof(KeyedScoreParams, chunks) == 40, "KeyedScoreParams.chunks");
static_assert(offsetof(KeyedScoreParams, nchunk) == 48, "KeyedScoreParams.nchunk");
static_assert(offsetof(KeyedScoreParams, x) == 56, "KeyedScoreParams.x");
static_assert(offsetof(KeyedScoreParams, n) == 64, "KeyedScoreParams.n");
static_assert(offsetof(KeyedScoreParams, tail) == 72, "KeyedScoreParams.tail");
static_assert(offsetof(KeyedScoreParams, dist) == 80, "KeyedScoreParams.dist");
static_assert(offsetof(KeyedScoreParams, host) == 88, "KeyedScoreParams.host");

struct KeyedSelfParams {
    const float* points;  // the sets one after another: set s's d columns of n_s points at d * start[s]
    const int* start;     // nset + 1: set s holds points start[s] .. start[s+1]-1
    const int* k;         // nset: each set's k
    long long nset;
    long long d;
    double* out;  // start[nset]: each point's weight, in the points' order
};
static_assert(sizeof(KeyedSelfParams) == 48, "KeyedSelfParams size");
static_assert(offsetof(KeyedSelfParams, points) == 0, "KeyedSelfParams.points");
static_assert(offsetof(KeyedSelfParams, start) == 8, "KeyedSelfParams.start");
static_assert(offsetof(KeyedSelfParams, k) == 16, "KeyedSelfParams.k");
static_assert(offsetof(KeyedSelfParams, nset) == 24, "KeyedSelfParams.nset");
static_assert(offsetof(KeyedSelfParams, d) == 32, "KeyedSelfParams.d");
static_assert(offsetof(KeyedSelfParams, out) == 40, "KeyedSelfParams.out");

struct KeyedInstallParams {
    const unsigned char* staged;  // [count][slot_bytes]
    const int* slot;              // count target slots
    long long count;
    long long slot_bytes;
    unsigned char* slots;
};
static_assert(sizeof(KeyedInstallParams) == 40, "KeyedInstallParams size");
static_assert(offsetof(KeyedInstallParams, staged) == 0, "KeyedInstallParams.staged");
static_assert(offsetof(KeyedInstallParams, slot) == 8, "KeyedInstallParams.slot");
static_assert(offsetof(KeyedInstallParams, count) == 16, "KeyedInstallParams.count");
static_assert(offsetof(KeyedInstallParams, slot_bytes) == 24, "KeyedInstallParams.slot_bytes");
static_assert(offsetof(KeyedInstallParams, slots) == 32, "KeyedInstallParams.slots");

// keyed_surprisal is rank's Tail.surprisal of x in one feature's n sorted values s.
__device__ __forceinline__ double keyed_surprisal(const float* __restrict__ s, int n, float x, double spread,
                                                  double base, const double* __restrict__ logs, int& host) {
    int a = 0, b = 0;
    if (n > 0) {
        int len = n;
        while (len > 1) {
            const int half = len >> 1;
            if (s[a + half - 1] <= x) a += half;
            if (s[b + half - 1] < x) b += half;
            len -= half;
        }
        if (s[a] <= x) a++;
        if (s[b] < x) b++;
    }
    const int le = a, ge = n - b;
    if (n > 0 && x < s[0]) {
        const double u = __ddiv_rn(__dsub_rn((double)s[0], (double)x), spread);
        if (!(u <= base)) host = 1;
        return __dadd_rn(__dsub_rn(base, logs[max(le, 1)]), u);
    }
    if (n > 0 && x > s[n - 1]) {
        const double u = __ddiv_rn(__dsub_rn((double)x, (double)s[n - 1]), spread);
        if (!(u <= base)) host = 1;
        return __dadd_rn(__dsub_rn(base, logs[max(ge, 1)]), u);
    }
    return __dsub_rn(base, logs[max(min(le, ge), 1)]);
}

// keyed_knn_weight is the sum of the distances from q (d floats, the warp's shared row) to its k
// nearest of the m points (d columns, stride floats apart), point skip left out (-1: none): the
// float32 squared distances summed over the features in order, the k smallest kept by the warp's
// register queue, their correctly rounded sqrtf summed ascending in double (WarpQueue::sum);
// +inf when fewer than k points are left. keyed_score's w_k(x, R) and keyed_self's calibration.
// Warp-uniform call.
template <int R>
__device__ __forceinline__ double keyed_knn_weight(const float* q, const float* points, long long stride, int m, int d,
                                                   int skip, int k, int lane) {
    WarpQueue<R> wq;
    wq.init();
    float thr = __int_as_float(0x7f800000);
    for (int p0 = 0; p0 < m; p0 += 32) {
        const int pi = p0 + lane;
        float a = __int_as_float(0x7f800000);
        if (pi < m) {
            for (int j = 0; j < d; j++) {
                const float u = __fsub_rn(q[j], points[(long long)j * stride + pi]);
                const float uu = __fmul_rn(u, u);
                a = j == 0 ? uu : __fadd_rn(a, uu);
            }
        }
        thr = wq.offer(pi < m && pi != skip && a < thr, a, lane, k, thr);
    }
#pragma unroll
    for (int t = 0; t < R; t++) wq.q[t] = sqrtf(wq.q[t]);  // ascending still
    const int others = skip >= 0 && skip < m ? m - 1 : m;
    return k > others ? (double)__int_as_float(0x7f800000) : wq.sum(k, lane);
}

template <int R>
__device__ __forceinline__ void keyed_score_body(const KeyedScoreParams& p) {
    __shared__ float space[KEYED_BLOCK / 32][KEYED_MAXD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long c = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (c >= p.nchunk) return;  // warp-uniform
    const int d = (int)p.d, w = (int)p.w;
    const int slot = p.chunks[3 * c], first = p.chunks[3 * c + 1], count = p.chunks[3 * c + 2];
    const unsigned char* base = p.slots + (long long)slot * p.slot_bytes;
    const double* spread = (const double*)base;
    const double* center = spread + d;
    const double* unit = center + d;
    const int* hdr = (const int*)(base + 24 * d);
    const int n = hdr[0], m = hdr[1], k = hdr[2];
    const float* sorted = (const float*)(base + 24 * d + 16);
    const float* points = sorted + (long long)d * w;
    const double ln_n = p.logs[n];
    float* q = space[warp];
    for (int r = first; r < first + count; r++) {
        const float* xr = p.x + (long long)r * d;
        double sum = 0.0;
        int host = 0;
        for (int j0 = 0; j0 < d; j0 += 32) {
            const int j = j0 + lane;
            double s = 0.0;
            if (j < d) {
                const float v = xr[j];
                s = keyed_surprisal(sorted + (long long)j * w, n, v, spread[j], ln_n, p.logs, host);
                double t = __ddiv_rn(__dsub_rn((double)v, center[j]), unit[j]);
                t = t > KEYED_LIMIT ? KEYED_LIMIT : (t < -KEYED_LIMIT ? -KEYED_LIMIT : t);
                q[j] = __double2float_rn(t);
            }
            const int cnt = min(32, d - j0);
            for (int t = 0; t < cnt; t++) sum = __dadd_rn(sum, __shfl_sync(WARP_FULL, s, t));
        }
        host = __any_sync(WARP_FULL, host);
        __syncwarp();
        const double wk = keyed_knn_weight<R>(q, points, w, m, d, -1, k, lane);
        if (lane == 0) {
            p.tail[r] = sum;
            p.dist[r] = wk;
            p.host[r] = host;
        }
        __syncwarp();
    }
}

extern "C" __global__ void __launch_bounds__(KEYED_BLOCK) keyed_score_q32(const KeyedScoreParams p) {
    keyed_score_body<1>(p);
}

extern "C" __global__ void __launch_bounds__(KEYED_BLOCK) keyed_score_q64(const KeyedScoreParams p) {
    keyed_score_body<2>(p);
}

template <int R>
__device__ __forceinline__ void keyed_self_body(const KeyedSelfParams& p) {
    __shared__ float space[KEYED_BLOCK / 32][KEYED_MAXD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long s = blockIdx.x;
    if (s >= p.nset) return;  // block-uniform
    const int d = (int)p.d;
    const int first = p.start[s], n = p.start[s + 1] - first, k = p.k[s];
    const float* pts = p.points + (long long)d * first;
    float* q = space[warp];
    for (int i = warp; i < n; i += KEYED_BLOCK / 32) {
        for (int j = lane; j < d; j += 32) q[j] = pts[(long long)j * n + i];
        __syncwarp();
        const double wk = keyed_knn_weight<R>(q, pts, n, n, d, i, k, lane);
        if (lane == 0) p.out[first + i] = wk;
        __syncwarp();  // (q is rewritten for the next point)
    }
}

extern "C" __global__ void __launch_bounds__(KEYED_BLOCK) keyed_self_q32(const KeyedSelfParams p) {
    keyed_self_body<1>(p);
}

extern "C" __global__ void __launch_bounds__(KEYED_BLOCK) keyed_self_q64(const KeyedSelfParams p) {
    keyed_self_body<2>(p);
}

extern "C" __global__ void keyed_install(const KeyedInstallParams p) {
    const long long b = blockIdx.x;
    if (b >= p.count) return;
    const uint4* src = (const uint4*)(p.staged + b * p.slot_bytes);
    uint4* dst = (uint4*)(p.slots + (long long)p.slot[b] * p.slot_bytes);
    for (long long i = threadIdx.x; i < p.slot_bytes / 16; i += blockDim.x) dst[i] = src[i];
}
