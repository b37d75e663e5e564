// hypercube.cu: the hypercube density of GDBOD (Munugala and Gowanlock; ALGORITHMS.md §3), the
// GPU twin of internal/algo/hypercube (Grid.Encode and Tree.Density). The host fits the grid,
// sorts the keys, builds the LTR tree and computes the scores; these kernels do the per-row
// encoding and the per-cell neighbour search, with the CPU's arithmetic, so counts and scores are
// identical.
//
// hc_encode: one thread per row. X is n x d column-major float32; cell coordinate of dimension j
// = floor((x - lo[j]) * scale[j]) in float64 (two correctly rounded operations, __dsub_rn and
// __dmul_rn: no FMA contraction), clamped to [0, bins-1] (NaN to 0). Key of a row: W uint64
// words, dimension j in word j / per at bit (per - 1 - j % per) * bits; keys row-major [n][W].
//
// hc_density: one thread per distinct cell q (cells sorted, so a warp holds neighbouring cells
// and its threads walk similar paths). keys [ncell][W] ascending, count[ncell]. The tree is in
// depth-first pre-order, node i = nodes[i] = (meta = coord | depth << 16 | leaf << 24, brk, up,
// lo) and hi[i]: the stackless LTR walk (no backtracking): a node whose coordinate is below the
// query's - 1 is passed (brk: its next sibling or what follows), one above the query's + 1 ends
// its sibling group (up), an internal node within +-1 is entered (next node), and a leaf within
// +-1 has its cells [lo, hi) tested in the remaining dimensions with the word-parallel test of
// hypercube.Grid.near (masks: even then odd field positions, each field / bit 0 / bit k / 2^k - 3
// / bit k+1). loc[j] = word << 8 | shift of dimension j. w[q] = the summed counts (int64).
// Limits: d <= 128 (HC_MAXD), W <= 43, node count and cells < 2^31.
#define HC_MAXD 128

#include <cstddef>

typedef unsigned long long u64;
typedef long long ll;

__device__ __forceinline__ void hc_encode_body(const float* __restrict__ X, ll n, ll d,
                                               const double* __restrict__ lo, const double* __restrict__ scale,
                                               ll bins, ll bits, ll per, ll W, u64* __restrict__ keys) {
    ll i = (ll)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (ll w = 0; w < W; w++) {
        u64 k = 0;
        ll j0 = w * per, j1 = min(d, j0 + per);
        for (ll j = j0; j < j1; j++) {
            double v = floor(__dmul_rn(__dsub_rn((double)X[j * n + i], lo[j]), scale[j]));
            u64 c;
            if (!(v > 0.0)) c = 0;
            else if (v >= (double)(bins - 1)) c = (u64)(bins - 1);
            else c = (u64)v;
            k |= c << ((per - 1 - (j - j0)) * bits);
        }
        keys[i * W + w] = k;
    }
}

struct Swar { u64 field, one, highK, m3, highK1; };

__device__ __forceinline__ bool near_word(u64 x, u64 y, const Swar& e, const Swar& o) {
    if (x == y) return true;
    u64 z = ((x & e.field) | e.highK) + e.one - (y & e.field);
    if ((z & e.highK) != e.highK || ((z + e.m3) & e.highK1) != 0) return false;
    z = ((x & o.field) | o.highK) + o.one - (y & o.field);
    return (z & o.highK) == o.highK && ((z + o.m3) & o.highK1) == 0;
}

__device__ __forceinline__ void hc_density_body(const u64* __restrict__ keys, const int* __restrict__ count, ll ncell,
                                                const int4* __restrict__ nodes, const int* __restrict__ hi, ll nnodes,
                                                ll d, ll bits, const int* __restrict__ loc, ll W,
                                                const u64* __restrict__ masks, ll* __restrict__ w) {
    __shared__ int sLoc[HC_MAXD];
    for (int j = threadIdx.x; j < d; j += blockDim.x) sLoc[j] = __ldg(loc + j);
    __syncthreads();
    ll q = (ll)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= ncell) return;
    // __ldg: the read-only path that the __restrict__ kernel parameters gave before the
    // parameter struct (for these loads nvcc does not carry it through the inlined body).
    const Swar e = {__ldg(masks + 0), __ldg(masks + 1), __ldg(masks + 2), __ldg(masks + 3), __ldg(masks + 4)};
    const Swar o = {__ldg(masks + 5), __ldg(masks + 6), __ldg(masks + 7), __ldg(masks + 8), __ldg(masks + 9)};
    const unsigned fmask = (1u << bits) - 1;
    const u64* kq = keys + q * W;
    ll acc = 0;
    int n = 0;
    while (n < nnodes) {
        int4 nd = __ldg(&nodes[n]);
        unsigned coord = nd.x & 0xffff;
        int depth = (nd.x >> 16) & 0xff;
        int l = sLoc[depth];
        unsigned h = (unsigned)(__ldg(&kq[l >> 8]) >> (l & 0xff)) & fmask;
        if (coord + 1 < h) {
            n = nd.y;
        } else if (coord > h + 1) {
            n = nd.z;
        } else if (!(nd.x & (1 << 24))) {
            n++;
        } else {
            int from = depth + 1, lo = nd.w, hiv = __ldg(&hi[n]);
            if (bits == 1 || from >= d) {  // b = 2, or the path fixed every dimension
                for (int c = lo; c < hiv; c++) acc += __ldg(&count[c]);
            } else {
                int lf = sLoc[from];
                int w0 = lf >> 8;
                u64 keep = (((u64)1) << ((lf & 0xff) + bits)) - 1;
                for (int c = lo; c < hiv; c++) {
                    const u64* kc = keys + (ll)c * W;
                    bool ok = near_word(__ldg(&kq[w0]) & keep, __ldg(&kc[w0]) & keep, e, o);
                    for (int ww = w0 + 1; ok && ww < W; ww++) ok = near_word(__ldg(&kq[ww]), __ldg(&kc[ww]), e, o);
                    if (ok) acc += __ldg(&count[c]);
                }
            }
            n = nd.y;
        }
    }
    w[q] = acc;
}

// The kernels' parameters: one struct passed by value per kernel (gpukern's launchStruct), every
// member 8 bytes; the Go mirrors (hypercube_abi.go) are held to these offsets by TestHypercubeABI.
// The bodies above keep __restrict__ parameters (inlined, so the loads stay on the read-only path).
struct HcEncodeParams {
    const float* X;  // n x d column-major
    ll n, d;
    const double *lo, *scale;  // the grid, per dimension
    ll bins, bits, per, W;
    u64* keys;  // [n][W]
};
struct HcDensityParams {
    const u64* keys;  // [ncell][W] ascending
    const int* count;
    ll ncell;
    const int4* nodes;  // the tree, depth-first pre-order
    const int* hi;
    ll nnodes, d, bits;
    const int* loc;
    ll W;
    const u64* masks;  // 10: even then odd field positions
    ll* w;
};
static_assert(sizeof(HcEncodeParams) == 80, "HcEncodeParams size");
static_assert(offsetof(HcEncodeParams, X) == 0, "HcEncodeParams.X");
static_assert(offsetof(HcEncodeParams, n) == 8, "HcEncodeParams.n");
static_assert(offsetof(HcEncodeParams, d) == 16, "HcEncodeParams.d");
static_assert(offsetof(HcEncodeParams, lo) == 24, "HcEncodeParams.lo");
static_assert(offsetof(HcEncodeParams, scale) == 32, "HcEncodeParams.scale");
static_assert(offsetof(HcEncodeParams, bins) == 40, "HcEncodeParams.bins");
static_assert(offsetof(HcEncodeParams, bits) == 48, "HcEncodeParams.bits");
static_assert(offsetof(HcEncodeParams, per) == 56, "HcEncodeParams.per");
static_assert(offsetof(HcEncodeParams, W) == 64, "HcEncodeParams.W");
static_assert(offsetof(HcEncodeParams, keys) == 72, "HcEncodeParams.keys");
static_assert(sizeof(HcDensityParams) == 96, "HcDensityParams size");
static_assert(offsetof(HcDensityParams, keys) == 0, "HcDensityParams.keys");
static_assert(offsetof(HcDensityParams, count) == 8, "HcDensityParams.count");
static_assert(offsetof(HcDensityParams, ncell) == 16, "HcDensityParams.ncell");
static_assert(offsetof(HcDensityParams, nodes) == 24, "HcDensityParams.nodes");
static_assert(offsetof(HcDensityParams, hi) == 32, "HcDensityParams.hi");
static_assert(offsetof(HcDensityParams, nnodes) == 40, "HcDensityParams.nnodes");
static_assert(offsetof(HcDensityParams, d) == 48, "HcDensityParams.d");
static_assert(offsetof(HcDensityParams, bits) == 56, "HcDensityParams.bits");
static_assert(offsetof(HcDensityParams, loc) == 64, "HcDensityParams.loc");
static_assert(offsetof(HcDensityParams, W) == 72, "HcDensityParams.W");
static_assert(offsetof(HcDensityParams, masks) == 80, "HcDensityParams.masks");
static_assert(offsetof(HcDensityParams, w) == 88, "HcDensityParams.w");

extern "C" __global__ void hc_encode(const HcEncodeParams P) {
    hc_encode_body(P.X, P.n, P.d, P.lo, P.scale, P.bins, P.bits, P.per, P.W, P.keys);
}

extern "C" __global__ void hc_density(const HcDensityParams P) {
    hc_density_body(P.keys, P.count, P.ncell, P.nodes, P.hi, P.nnodes, P.d, P.bits, P.loc, P.W, P.masks, P.w);
}
