// density.cu: eta-probability by sampling (Matsumoto, Hung, Yiu, algorithms 1, 3; ALGORITHMS.md
// §2), record granularity, mode independent: the GPU twin of density.Model.DetectRecords with
// Params{Mode: Independent, Exact: false}.
//
// One thread per record i. Its random stream is density's: xorshift64* seeded with
// SplitMix64(seed ^ SplitMix64(firstIndex + i)) (0 replaced by 0x9E3779B97F4A7C15), consumed in
// density.DrawOrder: the Fisher-Yates permutation of the dimensions (k = r-1..1, Bounded(k+1) =
// high word of next * (k+1)), then per tested dimension s uniforms ((next >> 11) + 0.5) * 2^-53.
// Sample points X = x + psi * PhiInv(u) (Acklam, three branches, no refinement), densities
// f_j(X) = sum_c coef * exp(-(X - mu)^2 * inv2) over the non-empty clusters (terms with exponent
// >= 745 skipped), all in float64 with each op rounded as the Go code rounds it (no FMA). exp and
// log are CUDA's (<= 1 ulp, as Go's are), so a density may differ from the CPU's in its last bit;
// a verdict can differ only if a sample's density lies within ~1e-16 of eta.
//
// Layout: means/sds n x r column-major float32 (sds may be null: certain records, psi = 0); model
// mu/coef/inv2 are r x k row-major float64 ([j*k + c]). Outputs: prob[i] (lowest eta-probability
// seen), dim[i] (where), flag[i] (1 = outlier). r <= DENS_MAXR.
#define DENS_MAXR 64

typedef unsigned long long u64;
typedef long long ll;

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

extern "C" __global__ void density_independent(const float* __restrict__ means,
                                               const float* __restrict__ sds, ll n, ll r,
                                               const double* __restrict__ mu,
                                               const double* __restrict__ coef,
                                               const double* __restrict__ inv2, ll k, double eta,
                                               double delta, ll samples, u64 seed, u64 firstIndex,
                                               double* __restrict__ prob, int* __restrict__ dim,
                                               int* __restrict__ flag) {
    const ll i = (ll)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u64 s = splitmix64(seed ^ splitmix64(firstIndex + (u64)i));
    if (s == 0) s = 0x9E3779B97F4A7C15ULL;
    int perm[DENS_MAXR];
    for (int j = 0; j < r; j++) perm[j] = j;
    for (int t = (int)r - 1; t >= 1; t--) {
        const int u = (int)__umul64hi(xs_next(&s), (u64)(t + 1));
        const int tmp = perm[t];
        perm[t] = perm[u];
        perm[u] = tmp;
    }
    double best = __longlong_as_double(0x7ff0000000000000LL);  // +inf
    int bestDim = -1, flagged = 0;
    for (int pi = 0; pi < r; pi++) {
        const int j = perm[pi];
        const double x = (double)means[j * n + i];
        const double psi = sds ? (double)sds[j * n + i] : 0.0;
        const double* mj = mu + (ll)j * k;
        const double* cj = coef + (ll)j * k;
        const double* ij = inv2 + (ll)j * k;
        ll success = 0;
        for (ll t = 0; t < samples; t++) {
            const double xs = __dadd_rn(x, __dmul_rn(psi, phi_inv(xs_uniform(&s))));
            double f = 0.0;
            for (ll c = 0; c < k; c++) {
                const double d = __dsub_rn(xs, mj[c]);
                const double e = __dmul_rn(__dmul_rn(d, d), ij[c]);
                if (e < 745.0) f = __dadd_rn(f, __dmul_rn(cj[c], exp(-e)));
            }
            if (f > eta) success++;  // dens / a with a = 1 is dens exactly
        }
        const double pr = __ddiv_rn((double)success, (double)samples);
        if (pr < best) {
            best = pr;
            bestDim = j;
        }
        if (pr < delta) {
            flagged = 1;
            break;
        }
    }
    prob[i] = best;
    dim[i] = bestDim;
    flag[i] = flagged;
}
