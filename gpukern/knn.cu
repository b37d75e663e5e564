// knn.cu: batch k-NN weights w_k(q, S) = sum of the distances from q to its k nearest points of S
// (ALGORITHMS.md §1), the prediction step of the solving-set detector.
//
// Shapes and layout: S is ns x d, Q is nq x d, both column-major float32 (S[j*ns + s]); out is nq
// float64. k in [1, KNN_KMAX] (checked on the host); k > ns gives +inf. One thread per query.
//
// Structure: the block walks S in tiles of `tile` points kept in shared memory (dynamic, d*tile
// floats, tile a multiple of TILE_BATCH; tile.cuh); each thread computes TILE_BATCH squared
// distances at a time, then offers their roots to its private max-heap of the k smallest
// distances (local memory; the root is the current k-th distance, so most offers cost one compare).
//
// Arithmetic matches the CPU twin bit for bit: the squared distance of tile.cuh, then a correctly
// rounded sqrtf (nvcc's default -prec-sqrt=true); the weight is the float64 sum of the k distances in
// ascending order (solvingset's canonicalWeight). Weights are therefore bit-identical to the CPU's.
#include "tile.cuh"

#define KNN_KMAX 256
#define BATCH TILE_BATCH

// heap_replace_top replaces the maximum h[0] of the max-heap h[0..k) by v and sifts it down
// (solvingset.heapReplaceTop). Heaps start filled with +inf, so a query with fewer than k points
// gets weight +inf, the CPU twin's convention.
__device__ __forceinline__ void heap_replace_top(float* h, int k, float v) {
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= k) break;
        if (c + 1 < k && h[c + 1] > h[c]) c++;
        if (h[c] <= v) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

extern "C" __global__ void knn_weights(const float* __restrict__ S, long long ns,
                                       const float* __restrict__ Q, long long nq, long long d,
                                       long long k, long long tile, double* __restrict__ out) {
    extern __shared__ float sS[];  // [d][tile]
    float heap[KNN_KMAX];
    for (int c = 0; c < k; c++) heap[c] = __int_as_float(0x7f800000);  // +inf
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = i < nq;
    for (long long base = 0; base < ns; base += tile) {
        const int m = (int)min(tile, ns - base);         // points in this tile
        const int mp = (m + BATCH - 1) / BATCH * BATCH;  // padded to whole batches
        __syncthreads();  // the previous tile is no longer read
        tile_load(sS, S, ns, d, tile, base, m, mp);
        __syncthreads();
        for (int t0 = 0; t0 < m; t0 += BATCH) {
            float acc[BATCH];
            tile_dist2(acc, sS, tile, t0, d, Q, nq, i, live);
            const int lim = min(BATCH, m - t0);
#pragma unroll
            for (int c = 0; c < BATCH; c++) {
                if (c < lim) {
                    const float dist = sqrtf(acc[c]);
                    if (dist < heap[0]) heap_replace_top(heap, (int)k, dist);  // NaN never enters
                }
            }
        }
    }
    if (live) {
        // Heap sort to ascending order, then the float64 sum in that order: the CPU's
        // canonicalWeight, so the weights are bit-identical.
        for (int end = (int)k - 1; end > 0; end--) {
            const float top = heap[0];
            const float last = heap[end];
            heap[end] = top;
            int p = 0;  // sift `last` down from the root within [0, end)
            for (;;) {
                int c = 2 * p + 1;
                if (c >= end) break;
                if (c + 1 < end && heap[c + 1] > heap[c]) c++;
                if (heap[c] <= last) break;
                heap[p] = heap[c];
                p = c;
            }
            heap[p] = last;
        }
        double w = 0.0;
        for (int c = 0; c < k; c++) w = __dadd_rn(w, (double)heap[c]);
        out[i] = w;
    }
}
