// select.cuh: the kernels' one selection header. First, warp-cooperative k-smallest selection in
// registers (the WarpSelect idea of FAISS, Johnson et al., "Billion-scale similarity search with
// GPUs", 2017, reduced to its core): a warp owns one sorted queue of 32*R values spread over its
// lanes' registers, lane l holding the positions l*R .. l*R+R-1 in ascending order. No local
// memory, no divergence: every lane runs every step, so the cost of a selection is the number of
// insertions, not the slowest lane's heap sifts. Then (at the end) the max-heap that SolvingSet's
// per-point neighbour lists keep in global memory between launches.
//
// Use: every lane computes one candidate distance; a ballot of `dist < threshold` names the lanes
// with a candidate, and the warp inserts them one at a time (shuffled to all lanes), or merges
// the whole batch when there are many (FAISS's "merge of candidate tiles"), then reads the new
// threshold, the k-th smallest so far (k <= 32*R) (offer; add when the caller filters by a bound
// of its own). The threshold may be stale within one ballot: an inserted value larger than the
// k-th one lands behind position k-1 (or falls off the end) and never changes positions 0..k-1,
// so the first k positions are exactly the k smallest values offered (as a multiset; ties are
// interchangeable). NaN is never offered (`NaN < x` is false), and +inf offers are rejected by
// the initial +inf threshold, as by the CPU heap. sort orders a queue filled lane by lane, and
// sum gives the ascending float64 sum's bits with a warp tree where that is exact.
#pragma once

#define WARP_FULL 0xffffffffu

// SELECT_MERGE_MIN is the number of offers in one ballot from which WarpQueue::offer merges the
// whole batch (about 120 instructions for R = 2) instead of inserting one value at a time (about
// 12 each).
#define SELECT_MERGE_MIN 8

template <int R>
struct WarpQueue {
    float q[R];  // positions lane*R + r, ascending over the warp

    __device__ __forceinline__ void init() {
#pragma unroll
        for (int r = 0; r < R; r++) q[r] = __int_as_float(0x7f800000);  // +inf
    }

    // insert adds v (the same value in every lane) and drops the largest value: new[p] = old[p]
    // when old[p] <= v, else max(old[p-1], v) (old[-1] = -inf), i.e. min(old[p], max(old[p-1], v))
    // (old[p-1] <= old[p]): two min/max per slot, no compare. The whole warp must call it.
    __device__ __forceinline__ void insert(float v, int lane) {
        float prev = __shfl_up_sync(WARP_FULL, q[R - 1], 1);
        if (lane == 0) prev = __int_as_float(0xff800000);  // -inf
#pragma unroll
        for (int r = R - 1; r > 0; r--) q[r] = fminf(q[r], fmaxf(q[r - 1], v));
        q[0] = fminf(q[0], fmaxf(prev, v));
    }

    // get returns position p (warp-uniform, 0 <= p < 32*R) in every lane. The whole warp must call it.
    __device__ __forceinline__ float get(int p) const {
        const int rr = p % R;
        float x = q[0];
#pragma unroll
        for (int r = 1; r < R; r++)
            if (rr == r) x = q[r];
        return __shfl_sync(WARP_FULL, x, p / R);
    }

    // merge32 adds the 32 lane values v (+inf for none) and keeps the 32*R smallest: a bitonic
    // sort of v across the lanes (ascending by lane), then the merge step of a bitonic merger
    // (position i takes min(q[i], v[32R-1-i]), which leaves the 32R smallest as a bitonic
    // sequence) and its clean-up stages. The whole warp must call it.
    __device__ __forceinline__ void merge32(float v, int lane) {
#pragma unroll
        for (int size = 2; size <= 32; size <<= 1) {
#pragma unroll
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                const float o = __shfl_xor_sync(WARP_FULL, v, stride);
                v = (((lane & stride) == 0) == ((lane & size) == 0)) ? fminf(v, o) : fmaxf(v, o);
            }
        }
        constexpr int KQ = 32 * R;
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int j = KQ - 1 - (lane * R + r);  // the sorted value facing position lane*R + r
            const float b = __shfl_sync(WARP_FULL, v, j & 31);
            q[r] = fminf(q[r], j < 32 ? b : __int_as_float(0x7f800000));
        }
#pragma unroll
        for (int stride = KQ / 2; stride >= R; stride >>= 1) {  // partners in other lanes
            const int ls = stride / R;
            const bool lower = (lane & ls) == 0;
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float o = __shfl_xor_sync(WARP_FULL, q[r], ls);
                q[r] = lower ? fminf(q[r], o) : fmaxf(q[r], o);
            }
        }
#pragma unroll
        for (int stride = R / 2; stride >= 1; stride >>= 1) {  // partners in the same lane
#pragma unroll
            for (int r = 0; r < R; r++) {
                if ((r & stride) == 0) {
                    const float lo = fminf(q[r], q[r | stride]), hi = fmaxf(q[r], q[r | stride]);
                    q[r] = lo;
                    q[r | stride] = hi;
                }
            }
        }
    }

    // add adds the values of the lanes whose pred is set and says whether there were any. A few
    // are inserted one at a time (from the highest lane down: the order does not change the
    // multiset kept); from SELECT_MERGE_MIN on, one bitonic merge of the whole batch is cheaper
    // (the first batches of a query, when every distance is a candidate). Either way the queue
    // ends up holding the 32*R smallest values offered. Warp-uniform call.
    __device__ __forceinline__ bool add(bool pred, float v, int lane) {
        unsigned mask = __ballot_sync(WARP_FULL, pred);
        if (mask == 0) return false;
        if (__popc(mask) >= SELECT_MERGE_MIN) {
            merge32(pred ? v : __int_as_float(0x7f800000), lane);
        } else {
            do {
                const int src = 31 - __clz(mask);
                mask ^= 1u << src;
                insert(__shfl_sync(WARP_FULL, v, src), lane);
            } while (mask);
        }
        return true;
    }

    // offer is add that returns the new threshold, position k-1 (or `threshold` unchanged when no
    // lane offered). Warp-uniform call.
    __device__ __forceinline__ float offer(bool pred, float v, int lane, int k, float threshold) {
        return add(pred, v, lane) ? get(k - 1) : threshold;
    }

    // sort orders the queue's 32*R values ascending (a bitonic sort over the warp's positions
    // lane*R + r), for a queue filled directly rather than through add. Warp-uniform call.
    __device__ __forceinline__ void sort(int lane) {
        constexpr int N = 32 * R;
#pragma unroll
        for (int size = 2; size <= N; size <<= 1) {
#pragma unroll
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                if (stride >= R) {  // partners in other lanes
                    const int ls = stride / R;
                    const bool lower = (lane & ls) == 0;
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        const bool asc = ((lane * R + r) & size) == 0;
                        const float o = __shfl_xor_sync(WARP_FULL, q[r], ls);
                        q[r] = lower == asc ? fminf(q[r], o) : fmaxf(q[r], o);
                    }
                } else {  // partners in the same lane
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        if ((r & stride) == 0) {
                            const bool asc = ((lane * R + r) & size) == 0;
                            const float lo = fminf(q[r], q[r | stride]), hi = fmaxf(q[r], q[r | stride]);
                            q[r] = asc ? lo : hi;
                            q[r | stride] = asc ? hi : lo;
                        }
                    }
                }
            }
        }
    }

    // ascending_sum is the float64 sum of positions 0..k-1 in ascending order (solvingset's
    // canonicalWeight), in every lane. Warp-uniform call.
    __device__ __forceinline__ double ascending_sum(int k) const {
        double w = 0.0;
        for (int c = 0; c < k; c++) w = __dadd_rn(w, (double)get(c));
        return w;
    }

    // sum is ascending_sum for non-negative values (distances), computed as a warp tree when
    // that gives the same bits: when the nonzero values among positions 0..k-1 span at most
    // 29 - log2(32R) binades, every one is a multiple of the smallest one's ulp U and any sum of
    // them is below 2^53 U, so every partial sum, in any order, is exact in float64. Zeros add
    // nothing, +inf makes +inf in any order (no NaN or -inf is ever kept). Otherwise (rare: a
    // neighbour 2^23 times nearer than another) the ascending sum. Warp-uniform call.
    __device__ __forceinline__ double sum(int k, int lane) const {
        constexpr unsigned SPAN = R == 1 ? 24 : R == 2 ? 23 : R == 4 ? 22 : R == 8 ? 21 : 0;
        static_assert(SPAN > 0, "sum: R must be 1, 2, 4 or 8");
        double s = 0.0;
        unsigned emin = 0xffu, emax = 0u;  // exponent fields of the nonzero values (subnormals: 1)
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (lane * R + r < k) {
                s = __dadd_rn(s, (double)q[r]);
                const unsigned e = __float_as_uint(q[r]) >> 23;  // sign bit 0
                if (q[r] != 0.0f) {
                    emin = min(emin, max(e, 1u));
                    emax = max(emax, e);
                }
            }
        }
        emin = __reduce_min_sync(WARP_FULL, emin);
        emax = __reduce_max_sync(WARP_FULL, emax);
        if (emax > emin + SPAN) return ascending_sum(k);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) s = __dadd_rn(s, __shfl_xor_sync(WARP_FULL, s, off));
        return s;
    }
};

// The other selection of the kernels: a max-heap of the k smallest values kept in global memory
// between launches (SolvingSet's per-point LNN heaps, which outlive a warp's registers), the
// CPU twin's heap (solvingset's heapReplaceTop) operation for operation, so that its storage order,
// and the float64 sum in that order (the upper bound), are the CPU's bit for bit. Slot s lives
// at h[s*stride] (stride 1: contiguous; N: slot-major over N points).
__device__ __forceinline__ void replace_top(float* h, long long stride, int k, float v) {
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

// plain_sum is the float64 sum of a heap's k slots in storage order (solvingset's upper bound).
__device__ __forceinline__ double plain_sum(const float* h, long long stride, int k) {
    double s = 0.0;
    for (int i = 0; i < k; i++) s = __dadd_rn(s, (double)h[i * stride]);
    return s;
}
