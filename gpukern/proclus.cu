// proclus.cu: the O(rows) passes of GPU-FAST-PROCLUS (ALGORITHMS.md §4; the paper's algorithms 3,
// 5 and 6 with the FAST caching of section 3): localities by their change only over cached
// medoid distances, Manhattan segmental assignment (with the refinement's outliers), and the
// per-cluster spreads of the cost. The host (internal/algo/proclus.RunEngine) keeps the control
// flow; gpukern/proclus_cuda.go launches these.
//
// Layout: X is rows x d column-major float32 (X[j*n + p]). dist is the FAST distance cache, one row
// of n float32 per candidate medoid (dist[slot*n + p]). Per-pair lists: cluster i owns the
// (cluster, dimension) pairs t in [off[i], off[i+1]) with dimension dims[t].
//
// Exactness (parity with the CPU engine, internal/algo/proclus/engine.go): every per-row term is
// rounded once to a 64-bit integer, (long long)(|x - c| * scale_j) or (long long)(x * scale_j)
// with scale_j a power of two, and the terms are added as integers (warp shuffles, shared-memory
// atomics, one global atomic per block and counter): integer addition is associative, so the
// sums are the CPU's bit for bit whatever the order, and the incremental localities (theorem 3.2)
// stay exact. Squared distances are float32 with __fsub_rn/__fmul_rn/__fadd_rn in dimension
// order and segmental distances float64 with __dsub_rn/__dadd_rn/__ddiv_rn (no FMA contraction),
// the CPU's sequences.
//
// Structure: a grid-stride loop over rows in which every thread of a warp takes part in every
// step (rows past the end contribute 0), so a warp can reduce with __shfl_down_sync; a warp skips
// a counter when its ballot says no row of it contributes. Each block keeps its counters in
// shared memory (dynamic: the counter count times 8 bytes, at most 48 KiB) and adds them to the
// global ones at the end. The host zeroes the global counters before each launch.

// Parameters: each kernel takes one struct by value (gpukern's launchStruct; Go mirrors in
// kernel_abi.go, held to the static_asserts by TestKernelABI) and hands its members to an inlined
// body. Through the struct nvcc drops the read-only path (ld.global.nc) of the bodies' __restrict__
// parameters, so proclus_locality and proclus_spread read through __ldg; proclus_assign keeps plain
// loads, because __ldg there stops the 4x unrolling of its pair loop (and adds 4 registers), while
// plain loads are L1-cached on sm_70 and later alike.

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ long long warp_sum(long long v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL_MASK, v, o);
    return v;
}

// fixed_abs is Fixed(|x - c|, s) of the CPU twin.
__device__ __forceinline__ long long fixed_abs(float x, double c, double s) {
    return (long long)__dmul_rn(fabs(__dsub_rn((double)x, c)), s);
}

__device__ __forceinline__ void zero_shared(unsigned long long* sh, int cnt) {
    for (int e = threadIdx.x; e < cnt; e += blockDim.x) sh[e] = 0ull;
    __syncthreads();
}

__device__ __forceinline__ void flush_shared(const unsigned long long* sh, int cnt, unsigned long long* out) {
    __syncthreads();
    for (int e = threadIdx.x; e < cnt; e += blockDim.x) {
        if (sh[e] != 0ull) atomicAdd(&out[e], sh[e]);
    }
}

// proclus_locality: for each query q (a medoid whose locality radius changed), over the rows p
// with band[2q] < dist(p, m_q) <= band[2q+1] (squared distances): out[q*d + j] += Σ fixed_abs(x_pj,
// m_qj) for every j, and out[nq*d + q] += their count. A fresh query (first use of its candidate
// slot) computes the squared distances and stores them in its cache row; the others read it.
static __device__ __forceinline__ void proclus_locality_body(const float* __restrict__ X, long long n, long long d, long long nq,
                                           const long long* __restrict__ slot, const long long* __restrict__ fresh,
                                           const float* __restrict__ med, const float* __restrict__ band,
                                           float* __restrict__ dist, const double* __restrict__ scale,
                                           unsigned long long* __restrict__ out) {
    extern __shared__ unsigned long long sh[];
    const int cnt = (int)(nq * d + nq);
    zero_shared(sh, cnt);
    const int lane = threadIdx.x & 31;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += stride) {
        const long long p = base + threadIdx.x;
        const bool live = p < n;
        const long long pc = live ? p : 0;  // a valid row to read for rows past the end
        for (int q = 0; q < nq; q++) {
            const float* m = med + q * d;
            float* row = dist + __ldg(&slot[q]) * n;
            float dd = 0.0f;
            if (__ldg(&fresh[q])) {
                for (int j = 0; j < d; j++) {
                    const float t = __fsub_rn(__ldg(&X[j * n + pc]), __ldg(&m[j]));
                    dd = __fadd_rn(dd, __fmul_rn(t, t));
                }
                if (live) row[p] = dd;
            } else {
                dd = row[pc];
            }
            const bool in = live && __ldg(&band[2 * q]) < dd && dd <= __ldg(&band[2 * q + 1]);
            const unsigned mask = __ballot_sync(FULL_MASK, in);
            if (mask == 0u) continue;  // warp-uniform
            if (lane == 0) atomicAdd(&sh[nq * d + q], (unsigned long long)__popc(mask));
            for (int j = 0; j < d; j++) {
                long long v = in ? fixed_abs(__ldg(&X[j * n + pc]), (double)__ldg(&m[j]), __ldg(&scale[j])) : 0ll;
                v = warp_sum(v);
                if (lane == 0 && v != 0ll) atomicAdd(&sh[q * d + j], (unsigned long long)v);
            }
        }
    }
    flush_shared(sh, cnt, out);
}

// PcLocalityParams is proclus_locality's parameter, passed by value (Go mirror: pcLocalityParams).
struct PcLocalityParams {
    const float* X;
    long long n;
    long long d;
    long long nq;
    const long long* slot;
    const long long* fresh;
    const float* med;
    const float* band;
    float* dist;
    const double* scale;
    unsigned long long* out;
};
static_assert(sizeof(PcLocalityParams) == 88, "PcLocalityParams size");
static_assert(offsetof(PcLocalityParams, X) == 0, "PcLocalityParams.X");
static_assert(offsetof(PcLocalityParams, n) == 8, "PcLocalityParams.n");
static_assert(offsetof(PcLocalityParams, d) == 16, "PcLocalityParams.d");
static_assert(offsetof(PcLocalityParams, nq) == 24, "PcLocalityParams.nq");
static_assert(offsetof(PcLocalityParams, slot) == 32, "PcLocalityParams.slot");
static_assert(offsetof(PcLocalityParams, fresh) == 40, "PcLocalityParams.fresh");
static_assert(offsetof(PcLocalityParams, med) == 48, "PcLocalityParams.med");
static_assert(offsetof(PcLocalityParams, band) == 56, "PcLocalityParams.band");
static_assert(offsetof(PcLocalityParams, dist) == 64, "PcLocalityParams.dist");
static_assert(offsetof(PcLocalityParams, scale) == 72, "PcLocalityParams.scale");
static_assert(offsetof(PcLocalityParams, out) == 80, "PcLocalityParams.out");
extern "C" __global__ void proclus_locality(const PcLocalityParams P) {
    proclus_locality_body(P.X, P.n, P.d, P.nq, P.slot, P.fresh, P.med, P.band, P.dist, P.scale, P.out);
}

// proclus_assign: each row to the medoid with the smallest Manhattan segmental distance in its
// subspace (ties to the lowest medoid); with use_radius a row farther than radius[i] from every
// medoid i is an outlier (-1). out[i] += rows of cluster i; out[k + t] += Σ (long long)(x_pj *
// scale_j) over those rows for each pair t of cluster i (the centroid sums).
static __device__ __forceinline__ void proclus_assign_body(const float* __restrict__ X, long long n, long long d, long long k,
                                         const float* __restrict__ med, const long long* __restrict__ off,
                                         const long long* __restrict__ dims, const double* __restrict__ radius,
                                         long long use_radius, const double* __restrict__ scale,
                                         int* __restrict__ assign, unsigned long long* __restrict__ out) {
    extern __shared__ unsigned long long sh[];
    const int cnt = (int)(k + off[k]);
    zero_shared(sh, cnt);
    const int lane = threadIdx.x & 31;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += stride) {
        const long long p = base + threadIdx.x;
        const bool live = p < n;
        const long long pc = live ? p : 0;
        int c = -1;
        if (live) {
            int best = 0;
            double bestD = __longlong_as_double(0x7ff0000000000000ll);  // +inf
            bool inside = use_radius == 0;
            for (int i = 0; i < k; i++) {
                double s = 0.0;
                for (long long t = off[i]; t < off[i + 1]; t++) {
                    const long long j = dims[t];
                    s = __dadd_rn(s, fabs(__dsub_rn((double)X[j * n + p], (double)med[i * d + j])));
                }
                const double seg = __ddiv_rn(s, (double)(off[i + 1] - off[i]));
                if (seg < bestD) {
                    best = i;
                    bestD = seg;
                }
                if (use_radius != 0 && seg <= radius[i]) inside = true;
            }
            c = inside ? best : -1;
            assign[p] = c;
        }
        for (int i = 0; i < k; i++) {
            const bool mine = c == i;
            const unsigned mask = __ballot_sync(FULL_MASK, mine);
            if (mask == 0u) continue;
            if (lane == 0) atomicAdd(&sh[i], (unsigned long long)__popc(mask));
            for (long long t = off[i]; t < off[i + 1]; t++) {
                const long long j = dims[t];
                long long v = mine ? (long long)__dmul_rn((double)X[j * n + pc], scale[j]) : 0ll;
                v = warp_sum(v);
                if (lane == 0 && v != 0ll) atomicAdd(&sh[k + t], (unsigned long long)v);
            }
        }
    }
    flush_shared(sh, cnt, out);
}

// PcAssignParams is proclus_assign's parameter, passed by value (Go mirror: pcAssignParams).
struct PcAssignParams {
    const float* X;
    long long n;
    long long d;
    long long k;
    const float* med;
    const long long* off;
    const long long* dims;
    const double* radius;
    long long use_radius;
    const double* scale;
    int* assign;
    unsigned long long* out;
};
static_assert(sizeof(PcAssignParams) == 96, "PcAssignParams size");
static_assert(offsetof(PcAssignParams, X) == 0, "PcAssignParams.X");
static_assert(offsetof(PcAssignParams, n) == 8, "PcAssignParams.n");
static_assert(offsetof(PcAssignParams, d) == 16, "PcAssignParams.d");
static_assert(offsetof(PcAssignParams, k) == 24, "PcAssignParams.k");
static_assert(offsetof(PcAssignParams, med) == 32, "PcAssignParams.med");
static_assert(offsetof(PcAssignParams, off) == 40, "PcAssignParams.off");
static_assert(offsetof(PcAssignParams, dims) == 48, "PcAssignParams.dims");
static_assert(offsetof(PcAssignParams, radius) == 56, "PcAssignParams.radius");
static_assert(offsetof(PcAssignParams, use_radius) == 64, "PcAssignParams.use_radius");
static_assert(offsetof(PcAssignParams, scale) == 72, "PcAssignParams.scale");
static_assert(offsetof(PcAssignParams, assign) == 80, "PcAssignParams.assign");
static_assert(offsetof(PcAssignParams, out) == 88, "PcAssignParams.out");
extern "C" __global__ void proclus_assign(const PcAssignParams P) {
    proclus_assign_body(P.X, P.n, P.d, P.k, P.med, P.off, P.dims, P.radius, P.use_radius, P.scale, P.assign, P.out);
}

// proclus_spread: out[t] += Σ fixed_abs(x_pj, center[t]) over the rows p assigned to cluster i,
// for each pair t of cluster i (the cost's spreads, and in the refinement the average distances
// to the medoid with center = the medoid's coordinates).
static __device__ __forceinline__ void proclus_spread_body(const float* __restrict__ X, long long n, long long d, long long k,
                                         const int* __restrict__ assign, const double* __restrict__ center,
                                         const long long* __restrict__ off, const long long* __restrict__ dims,
                                         const double* __restrict__ scale, unsigned long long* __restrict__ out) {
    extern __shared__ unsigned long long sh[];
    const int cnt = (int)__ldg(&off[k]);
    zero_shared(sh, cnt);
    const int lane = threadIdx.x & 31;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += stride) {
        const long long p = base + threadIdx.x;
        const bool live = p < n;
        const long long pc = live ? p : 0;
        const int c = live ? __ldg(&assign[p]) : -1;
        for (int i = 0; i < k; i++) {
            const bool mine = c == i;
            if (__ballot_sync(FULL_MASK, mine) == 0u) continue;
            for (long long t = __ldg(&off[i]); t < __ldg(&off[i + 1]); t++) {
                const long long j = __ldg(&dims[t]);
                long long v = mine ? fixed_abs(__ldg(&X[j * n + pc]), __ldg(&center[t]), __ldg(&scale[j])) : 0ll;
                v = warp_sum(v);
                if (lane == 0 && v != 0ll) atomicAdd(&sh[t], (unsigned long long)v);
            }
        }
    }
    flush_shared(sh, cnt, out);
}

// PcSpreadParams is proclus_spread's parameter, passed by value (Go mirror: pcSpreadParams).
struct PcSpreadParams {
    const float* X;
    long long n;
    long long d;
    long long k;
    const int* assign;
    const double* center;
    const long long* off;
    const long long* dims;
    const double* scale;
    unsigned long long* out;
};
static_assert(sizeof(PcSpreadParams) == 80, "PcSpreadParams size");
static_assert(offsetof(PcSpreadParams, X) == 0, "PcSpreadParams.X");
static_assert(offsetof(PcSpreadParams, n) == 8, "PcSpreadParams.n");
static_assert(offsetof(PcSpreadParams, d) == 16, "PcSpreadParams.d");
static_assert(offsetof(PcSpreadParams, k) == 24, "PcSpreadParams.k");
static_assert(offsetof(PcSpreadParams, assign) == 32, "PcSpreadParams.assign");
static_assert(offsetof(PcSpreadParams, center) == 40, "PcSpreadParams.center");
static_assert(offsetof(PcSpreadParams, off) == 48, "PcSpreadParams.off");
static_assert(offsetof(PcSpreadParams, dims) == 56, "PcSpreadParams.dims");
static_assert(offsetof(PcSpreadParams, scale) == 64, "PcSpreadParams.scale");
static_assert(offsetof(PcSpreadParams, out) == 72, "PcSpreadParams.out");
extern "C" __global__ void proclus_spread(const PcSpreadParams P) {
    proclus_spread_body(P.X, P.n, P.d, P.k, P.assign, P.center, P.off, P.dims, P.scale, P.out);
}
