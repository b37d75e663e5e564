// density.cu: (delta, eta)-outlier detection by density sampling (Matsumoto, Hung, Yiu,
// algorithms 1, 3, 4; ALGORITHMS.md §2): the GPU twin of density.Model.DetectRecords (record
// granularity, kernel density_records) and density.Model.DetectClusters (cluster granularity,
// kernel density_clusters), all four modes, sampled or with the exact 1-D method.
//
// One thread per object i (a record, or a non-empty micro-cluster). Its random stream is
// density's: xorshift64* seeded with SplitMix64(seed ^ SplitMix64(index)) (0 replaced by
// 0x9E3779B97F4A7C15), index = firstIndex + i for records, the cluster's own index for clusters,
// consumed in density.DrawOrder: in mode independent the Fisher-Yates permutation of the
// dimensions (k = r-1..1, Bounded(k+1) = high word of next * (k+1)), then per tested subspace s
// samples, each one uniform ((next >> 11) + 0.5) * 2^-53 per subspace dimension in increasing
// position. A subspace computed exactly (exact != 0, one dimension) draws nothing.
//
// Subspaces (density.Mode): 0 independent (each dimension in the permuted order), 1 exhaustive
// roll-up (all 2^r-1 subspaces, size 1..r, lexicographic within a size), 2 restricted (prefixes
// {0}, {0,1}, ...), 3 averaging (the full space). The search stops at the first subspace whose
// eta-probability is below delta; the lowest eta-probability seen and its subspace (a bit mask)
// are reported, ties keeping the earlier subspace, as on the CPU.
//
// Sampled eta-probability: X_j = x_j + psi_j * PhiInv(u) (Acklam, three branches, no
// refinement), the subspace density (1/a) sum_j f_j(X_j) with f_j(u) = sum_c coef * exp(-(u -
// mu)^2 * inv2) over the non-empty clusters (terms with exponent >= 745 skipped), success if it
// exceeds eta; all float64 with each op rounded as the Go code rounds it (no FMA). exp and log
// are CUDA's (<= 1 ulp, as Go's are), so a density may differ from the CPU's in its last bit; a
// verdict can differ only if a sample's density lies within ~1e-16 of eta.
//
// Density bounds (density.Bounds, built on the host once per model): per dimension j, cells of a
// uniform grid with rigorous lower/upper bounds of the computed f_j (bLo/bHi[j*(cells+2) + c], c
// = 1 + floor((u - bOrigin[j]) * bInvStep[j]) clamped to [0, cells+1]). A sample whose summed
// lower bounds exceed a*eta*(1+2^-40) succeeds, one whose upper bounds stay below a*eta*(1-2^-40)
// fails, and only the rest compute the densities (cells = 0: no table, every sample in full); the verdict of every sample is the one the
// full computation gives (the proof is in density/bounds.go), so the kernel's results are those
// of the plain loop, at a lookup per dimension instead of k kernel terms for almost every sample.
//
// Exact eta-probability of a 1-D subspace {j}: the normal mass of the superlevel set {u : f_j(u) >
// eta}, uploaded as intervals (regLo/regHi[regOff[j] .. regOff[j+1]), computed on the host by
// density.Model.Regions): sum over the intervals of Phi differences (density's normalMass: upper
// tail masses where the interval lies above the mean), capped at 1; psi = 0 gives membership of
// x. Phi(z) = erfc(-z / sqrt 2) / 2 with CUDA's erfc (documented <= 5 ulp; Go's < 1 ulp), so the
// probability may differ from the CPU's by a few ulps (see the parity test's tolerance).
//
// Layout: object means/sds n x r column-major (float32 for records, float64 for clusters; sds may
// be null: certain records, psi = 0); model mu/coef/inv2 are r x k row-major float64 ([j*k + c]).
// Outputs: prob[i] (lowest eta-probability seen), mask[i] (its subspace, bit j = dimension j),
// flag[i] (1 = outlier). r <= DENS_MAXR.
#define DENS_MAXR 64

#include <cstddef>

typedef unsigned long long u64;
typedef long long ll;

enum { MODE_INDEPENDENT = 0, MODE_ROLLUP = 1, MODE_RESTRICTED = 2, MODE_AVERAGING = 3 };

__device__ __forceinline__ u64 splitmix64(u64 z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

__device__ __forceinline__ u64 xs_next(u64* s) {
    u64 x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

__device__ __forceinline__ double xs_uniform(u64* s) {
    return __dmul_rn(__dadd_rn((double)(xs_next(s) >> 11), 0.5), 0x1p-53);
}

// Horner steps written out so that no multiply-add is fused (Go rounds each op).
#define MA(acc, q, c) __dadd_rn(__dmul_rn((acc), (q)), (c))

__device__ double phi_inv(double p) {
    const double a0 = -3.969683028665376e+01, a1 = 2.209460984245205e+02, a2 = -2.759285104469687e+02,
                 a3 = 1.383577518672690e+02, a4 = -3.066479806614716e+01, a5 = 2.506628277459239e+00;
    const double b0 = -5.447609879822406e+01, b1 = 1.615858368580409e+02, b2 = -1.556989798598866e+02,
                 b3 = 6.680131188771972e+01, b4 = -1.328068155288572e+01;
    const double c0 = -7.784894002430293e-03, c1 = -3.223964580411365e-01, c2 = -2.400758277161838e+00,
                 c3 = -2.549732539343734e+00, c4 = 4.374664141464968e+00, c5 = 2.938163982698783e+00;
    const double d0 = 7.784695709041462e-03, d1 = 3.224671290700398e-01, d2 = 2.445134137142996e+00,
                 d3 = 3.754408661907416e+00;
    const double low = 0.02425;
    if (p < low) {
        const double q = sqrt(__dmul_rn(-2.0, log(p)));
        const double num = MA(MA(MA(MA(MA(c0, q, c1), q, c2), q, c3), q, c4), q, c5);
        const double den = MA(MA(MA(MA(d0, q, d1), q, d2), q, d3), q, 1.0);
        return __ddiv_rn(num, den);
    }
    if (p <= __dsub_rn(1.0, low)) {
        const double q = __dsub_rn(p, 0.5);
        const double r = __dmul_rn(q, q);
        const double num = __dmul_rn(MA(MA(MA(MA(MA(a0, r, a1), r, a2), r, a3), r, a4), r, a5), q);
        const double den = MA(MA(MA(MA(MA(b0, r, b1), r, b2), r, b3), r, b4), r, 1.0);
        return __ddiv_rn(num, den);
    }
    const double q = sqrt(__dmul_rn(-2.0, log(__dsub_rn(1.0, p))));
    const double num = MA(MA(MA(MA(MA(c0, q, c1), q, c2), q, c3), q, c4), q, c5);
    const double den = MA(MA(MA(MA(d0, q, d1), q, d2), q, d3), q, 1.0);
    return -__ddiv_rn(num, den);
}

// The model and parameters one thread reads.
// The pointers are read-only for the kernel's life: reads go through __ldg (the read-only path
// that __restrict__ kernel parameters used to select; struct members cannot carry it).
struct DensArgs {
    ll n, r, k;
    const double *mu, *coef, *inv2;
    double eta, delta;
    ll samples, mode;
    int exact;
    const double *regLo, *regHi;
    const ll* regOff;
    const double *bLo, *bHi, *bOrigin, *bInvStep;
    ll cells;
};

// density.Bounds.Cell: the table entry of u in dimension j.
__device__ __forceinline__ ll bounds_cell(const DensArgs& A, int j, double u) {
    const double t = __dmul_rn(__dsub_rn(u, __ldg(A.bOrigin + j)), __ldg(A.bInvStep + j));
    ll c = 0;
    if (!(t >= 0.0)) {
        c = 0;
    } else if (t >= (double)A.cells) {
        c = A.cells + 1;
    } else {
        c = 1 + (ll)t;
    }
    return (ll)j * (A.cells + 2) + c;
}

// f_j(u), density.Model.Density's loop.
__device__ __forceinline__ double density_at(const DensArgs& A, int j, double u) {
    const double* mj = A.mu + (ll)j * A.k;
    const double* cj = A.coef + (ll)j * A.k;
    const double* ij = A.inv2 + (ll)j * A.k;
    double f = 0.0;
    for (ll c = 0; c < A.k; c++) {
        const double d = __dsub_rn(u, __ldg(mj + c));
        const double e = __dmul_rn(__dmul_rn(d, d), __ldg(ij + c));
        if (e < 745.0) f = __dadd_rn(f, __dmul_rn(__ldg(cj + c), exp(-e)));
    }
    return f;
}

// Phi(z) = erfc(-z / sqrt 2) / 2, density.Phi (1.4142135623730951 is math.Sqrt2 as a float64).
__device__ __forceinline__ double phi_std(double z) {
    return __dmul_rn(0.5, erfc(__ddiv_rn(-z, 1.4142135623730951)));
}

// P(a < X < b), X ~ N(mu, sd^2), sd > 0: density.normalMass.
__device__ __forceinline__ double normal_mass(double a, double b, double mu, double sd) {
    const double za = __ddiv_rn(__dsub_rn(a, mu), sd);
    const double zb = __ddiv_rn(__dsub_rn(b, mu), sd);
    if (za > 0) return __dsub_rn(phi_std(-za), phi_std(-zb));
    return __dsub_rn(phi_std(zb), phi_std(za));
}

// The exact eta-probability of dimension j: density's region.mass.
__device__ double region_mass(const DensArgs& A, int j, double x, double psi) {
    const ll lo = __ldg(A.regOff + j), hi = __ldg(A.regOff + j + 1);
    if (psi == 0.0) {
        for (ll t = lo; t < hi; t++)
            if (x > __ldg(A.regLo + t) && x < __ldg(A.regHi + t)) return 1.0;
        return 0.0;
    }
    double p = 0.0;
    for (ll t = lo; t < hi; t++) p = __dadd_rn(p, normal_mass(__ldg(A.regLo + t), __ldg(A.regHi + t), x, psi));
    return p < 1.0 ? p : 1.0;
}

// The eta-probability of object i in the subspace sub[0..a): exact for one dimension when asked,
// else sampled (density.Model.EtaProbability), drawing s * a uniforms sample-major.
template <typename T>
__device__ double eta_probability(const DensArgs& A, const T* means, const T* sds, ll i,
                                  const int* sub, int a, u64* s) {
    if (a == 1 && A.exact) {
        const int j = sub[0];
        return region_mass(A, j, (double)__ldg(means + j * A.n + i), sds ? (double)__ldg(sds + j * A.n + i) : 0.0);
    }
    const double fa = (double)a;
    // density.Model.etaProbability's thresholds (boundsSlack = 2^-40).
    const double succeedAt = __dmul_rn(__dmul_rn(fa, A.eta), 1.0 + 0x1p-40);
    const double failAt = __dmul_rn(__dmul_rn(fa, A.eta), 1.0 - 0x1p-40);
    double xsv[DENS_MAXR];
    ll success = 0;
    for (ll t = 0; t < A.samples; t++) {
        double lo = 0.0, hi = 0.0;
        for (int q = 0; q < a; q++) {
            const int j = sub[q];
            const double x = (double)__ldg(means + j * A.n + i);
            const double psi = sds ? (double)__ldg(sds + j * A.n + i) : 0.0;
            const double xs = __dadd_rn(x, __dmul_rn(psi, phi_inv(xs_uniform(s))));
            xsv[q] = xs;
            if (A.cells > 0) {
                const ll c = bounds_cell(A, j, xs);
                lo = __dadd_rn(lo, __ldg(A.bLo + c));
                hi = __dadd_rn(hi, __ldg(A.bHi + c));
            }
        }
        if (A.cells == 0) {  // no table (the plain loop, for comparison): every sample in full
            lo = 0.0;
            hi = succeedAt;
        }
        if (lo > succeedAt) {
            success++;
        } else if (!(hi < failAt)) {  // left open by the bounds: the full densities
            double dens = 0.0;
            for (int q = 0; q < a; q++) dens = __dadd_rn(dens, density_at(A, sub[q], xsv[q]));
            if (__ddiv_rn(dens, fa) > A.eta) success++;
        }
    }
    return __ddiv_rn((double)success, (double)A.samples);
}

// Tests one subspace: keeps the lowest probability (strictly lower replaces, as on the CPU) and
// reports whether it flags the object.
template <typename T>
__device__ __forceinline__ bool test_subspace(const DensArgs& A, const T* means, const T* sds, ll i,
                                              const int* sub, int a, u64* s, double* best,
                                              u64* bestMask) {
    const double pr = eta_probability(A, means, sds, i, sub, a, s);
    if (pr < *best) {
        *best = pr;
        u64 m = 0;
        for (int q = 0; q < a; q++) m |= 1ULL << sub[q];
        *bestMask = m;
    }
    return pr < A.delta;
}

// density's nextCombination: the next a-subset of [0, r) in lexicographic order.
__device__ __forceinline__ bool next_combination(int* sub, int a, int r) {
    int i = a - 1;
    while (i >= 0 && sub[i] == r - a + i) i--;
    if (i < 0) return false;
    sub[i]++;
    for (int q = i + 1; q < a; q++) sub[q] = sub[q - 1] + 1;
    return true;
}

template <typename T>
__device__ void detect_object(const DensArgs& A, const T* means, const T* sds, ll i, u64 seed,
                              u64 index, double* prob, u64* mask, int* flag) {
    u64 s = splitmix64(seed ^ splitmix64(index));
    if (s == 0) s = 0x9E3779B97F4A7C15ULL;
    const int r = (int)A.r;
    int sub[DENS_MAXR];
    double best = __longlong_as_double(0x7ff0000000000000LL);  // +inf
    u64 bestMask = 0;
    int flagged = 0;
    switch ((int)A.mode) {
        case MODE_INDEPENDENT: {
            int perm[DENS_MAXR];
            for (int j = 0; j < r; j++) perm[j] = j;
            for (int t = r - 1; t >= 1; t--) {
                const int u = (int)__umul64hi(xs_next(&s), (u64)(t + 1));
                const int tmp = perm[t];
                perm[t] = perm[u];
                perm[u] = tmp;
            }
            for (int pi = 0; pi < r; pi++) {
                sub[0] = perm[pi];
                if (test_subspace(A, means, sds, i, sub, 1, &s, &best, &bestMask)) {
                    flagged = 1;
                    break;
                }
            }
            break;
        }
        case MODE_ROLLUP:
            for (int a = 1; a <= r && !flagged; a++) {
                for (int q = 0; q < a; q++) sub[q] = q;
                do {
                    if (test_subspace(A, means, sds, i, sub, a, &s, &best, &bestMask)) {
                        flagged = 1;
                        break;
                    }
                } while (next_combination(sub, a, r));
            }
            break;
        case MODE_RESTRICTED:
            for (int a = 1; a <= r; a++) {
                sub[a - 1] = a - 1;
                if (test_subspace(A, means, sds, i, sub, a, &s, &best, &bestMask)) {
                    flagged = 1;
                    break;
                }
            }
            break;
        default:  // MODE_AVERAGING
            for (int q = 0; q < r; q++) sub[q] = q;
            flagged = test_subspace(A, means, sds, i, sub, r, &s, &best, &bestMask) ? 1 : 0;
            break;
    }
    prob[i] = best;
    mask[i] = bestMask;
    flag[i] = flagged;
}

// The kernels' parameters: one struct passed by value per kernel (gpukern launches it with
// launchStruct). Every member is 8 bytes, so there is no padding; the Go mirrors (densCommon,
// densRecordsParams, densClustersParams in density_abi.go) are held to the offsets asserted here
// by TestDensityABI, which reads these lines, so a mismatch fails a test without a GPU.
struct DensCommon {
    ll n, r;                       // objects, dimensions
    const double *mu, *coef, *inv2;  // model, r x k row-major
    ll k;                          // non-empty clusters of the model
    double eta, delta;
    ll samples, mode;
    u64 seed;
    ll exact;                      // != 0: 1-D subspaces computed exactly
    const double *regLo, *regHi;   // exact regions
    const ll* regOff;
    const double *bLo, *bHi, *bOrigin, *bInvStep;  // density bounds table (cells = 0: none)
    ll cells;
    double* prob;                  // outputs, n each
    u64* mask;
    int* flag;
};
struct DensRecordsParams {
    const float *means, *sds;  // n x r column-major; sds null: certain records
    const u64* index;          // the records' streams, or null: firstIndex + i
    u64 firstIndex;
    DensCommon c;
};
struct DensClustersParams {
    const double *means, *sds;  // centroids and sqrt(Delta) of the non-empty clusters
    const ll* index;            // each object's cluster index among all q (its stream)
    DensCommon c;
};
static_assert(sizeof(DensCommon) == 184, "DensCommon size");
static_assert(offsetof(DensCommon, n) == 0, "DensCommon.n");
static_assert(offsetof(DensCommon, r) == 8, "DensCommon.r");
static_assert(offsetof(DensCommon, mu) == 16, "DensCommon.mu");
static_assert(offsetof(DensCommon, coef) == 24, "DensCommon.coef");
static_assert(offsetof(DensCommon, inv2) == 32, "DensCommon.inv2");
static_assert(offsetof(DensCommon, k) == 40, "DensCommon.k");
static_assert(offsetof(DensCommon, eta) == 48, "DensCommon.eta");
static_assert(offsetof(DensCommon, delta) == 56, "DensCommon.delta");
static_assert(offsetof(DensCommon, samples) == 64, "DensCommon.samples");
static_assert(offsetof(DensCommon, mode) == 72, "DensCommon.mode");
static_assert(offsetof(DensCommon, seed) == 80, "DensCommon.seed");
static_assert(offsetof(DensCommon, exact) == 88, "DensCommon.exact");
static_assert(offsetof(DensCommon, regLo) == 96, "DensCommon.regLo");
static_assert(offsetof(DensCommon, regHi) == 104, "DensCommon.regHi");
static_assert(offsetof(DensCommon, regOff) == 112, "DensCommon.regOff");
static_assert(offsetof(DensCommon, bLo) == 120, "DensCommon.bLo");
static_assert(offsetof(DensCommon, bHi) == 128, "DensCommon.bHi");
static_assert(offsetof(DensCommon, bOrigin) == 136, "DensCommon.bOrigin");
static_assert(offsetof(DensCommon, bInvStep) == 144, "DensCommon.bInvStep");
static_assert(offsetof(DensCommon, cells) == 152, "DensCommon.cells");
static_assert(offsetof(DensCommon, prob) == 160, "DensCommon.prob");
static_assert(offsetof(DensCommon, mask) == 168, "DensCommon.mask");
static_assert(offsetof(DensCommon, flag) == 176, "DensCommon.flag");
static_assert(sizeof(DensRecordsParams) == 216, "DensRecordsParams size");
static_assert(offsetof(DensRecordsParams, means) == 0, "DensRecordsParams.means");
static_assert(offsetof(DensRecordsParams, sds) == 8, "DensRecordsParams.sds");
static_assert(offsetof(DensRecordsParams, index) == 16, "DensRecordsParams.index");
static_assert(offsetof(DensRecordsParams, firstIndex) == 24, "DensRecordsParams.firstIndex");
static_assert(offsetof(DensRecordsParams, c) == 32, "DensRecordsParams.c");
static_assert(sizeof(DensClustersParams) == 208, "DensClustersParams size");
static_assert(offsetof(DensClustersParams, means) == 0, "DensClustersParams.means");
static_assert(offsetof(DensClustersParams, sds) == 8, "DensClustersParams.sds");
static_assert(offsetof(DensClustersParams, index) == 16, "DensClustersParams.index");
static_assert(offsetof(DensClustersParams, c) == 24, "DensClustersParams.c");

// dens_args is the per-thread view of the common parameters.
__device__ __forceinline__ DensArgs dens_args(const DensCommon& P) {
    DensArgs A;
    A.n = P.n;
    A.r = P.r;
    A.k = P.k;
    A.mu = P.mu;
    A.coef = P.coef;
    A.inv2 = P.inv2;
    A.eta = P.eta;
    A.delta = P.delta;
    A.samples = P.samples;
    A.mode = P.mode;
    A.exact = P.exact != 0;
    A.regLo = P.regLo;
    A.regHi = P.regHi;
    A.regOff = P.regOff;
    A.bLo = P.bLo;
    A.bHi = P.bHi;
    A.bOrigin = P.bOrigin;
    A.bInvStep = P.bInvStep;
    A.cells = P.cells;
    return A;
}

// Records: float32 columns, record i draws from stream index[i] (the record's identity,
// density.Params.Index) or, when index is null, firstIndex + i.
extern "C" __global__ void density_records(const DensRecordsParams P) {
    const ll i = (ll)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= P.c.n) return;
    const DensArgs A = dens_args(P.c);
    const u64 stream = P.index ? __ldg(P.index + i) : P.firstIndex + (u64)i;
    detect_object(A, P.means, P.sds, i, P.c.seed, stream, P.c.prob, P.c.mask, P.c.flag);
}

// Clusters: float64 centroids and sqrt(Delta) of the non-empty clusters; object i draws from
// stream index[i], its cluster's index among all q.
extern "C" __global__ void density_clusters(const DensClustersParams P) {
    const ll i = (ll)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= P.c.n) return;
    const DensArgs A = dens_args(P.c);
    detect_object(A, P.means, P.sds, i, P.c.seed, (u64)__ldg(P.index + i), P.c.prob, P.c.mask, P.c.flag);
}
