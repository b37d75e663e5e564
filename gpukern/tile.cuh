// tile.cuh: the distance-tile primitives shared by knn_weights (knn.cu) and assign_nearest
// (microcluster.cu): a block walks a point set in tiles kept in shared memory. In tile_dist2 each
// thread computes TILE_BATCH squared distances at a time with the dimensions in the outer loop (its
// own coordinate is read once per dimension per batch; the tile values are shared-memory
// broadcasts); in tile_lane_dist2 the lanes of a warp take one tile point each against a query
// held in registers (the layout of the warp selection, select.cuh).
//
// Arithmetic matches the CPU twins bit for bit: per dimension t = x_j - p_j, acc = acc + t*t, each
// op rounded to float32 (__fsub_rn/__fmul_rn/__fadd_rn forbid FMA contraction), dimensions in
// index order (solvingset's and microcluster.SquaredDistance's sequence).
#pragma once

// The global loads go through __ldg: the points are read-only in every kernel that includes this
// header, and the kernels take one parameter struct, through which nvcc does not carry the
// __restrict__ (read-only path) of the inlined bodies' parameters.

#define TILE_BATCH 32

// tile_load copies points [base, base + m) of the column-major point set P (np points, d
// dimensions: P[j*np + p]) into shared memory s[j*tile + t], zero-padded to mp (m rounded up to
// whole batches; the padding is never used as a point). All threads of the block take part; the
// caller synchronises before (the previous tile is no longer read) and after.
__device__ __forceinline__ void tile_load(float* s, const float* __restrict__ P, long long np, long long d,
                                          long long tile, long long base, int m, int mp) {
    for (long long e = threadIdx.x; e < d * mp; e += blockDim.x) {
        const int j = (int)(e / mp), t = (int)(e % mp);
        s[j * tile + t] = t < m ? __ldg(P + j * np + base + t) : 0.0f;
    }
}

// tile_dist2 writes to acc the squared distances from point i of the column-major set X (nx
// points: X[j*nx + i]; coordinates 0 when !live, a thread past the end) to the TILE_BATCH tile
// points from t0.
__device__ __forceinline__ void tile_dist2(float (&acc)[TILE_BATCH], const float* s, long long tile, int t0,
                                           long long d, const float* __restrict__ X, long long nx,
                                           long long i, bool live) {
#pragma unroll
    for (int c = 0; c < TILE_BATCH; c++) acc[c] = 0.0f;
    for (int j = 0; j < d; j++) {
        const float xj = live ? X[j * nx + i] : 0.0f;
        const float* row = s + j * tile + t0;
#pragma unroll
        for (int c = 0; c < TILE_BATCH; c++) {
            const float t = __fsub_rn(xj, row[c]);
            acc[c] = __fadd_rn(acc[c], __fmul_rn(t, t));
        }
    }
}

// TILE_QREG is the number of query coordinates tile_lane_dist2 keeps in registers; dimensions
// past it are read from global memory (one warp-uniform address, an L1 broadcast).
#define TILE_QREG 16

// tile_lane_dist2 returns the squared distance from query i of the column-major set X (nx points)
// to tile point t (t < mp: a padding slot gives a finite value that the caller ignores). qr holds
// the query's first TILE_QREG coordinates. Same operations, operand order and dimension order as
// tile_dist2, hence the same bits.
__device__ __forceinline__ float tile_lane_dist2(const float (&qr)[TILE_QREG], const float* s, long long tile,
                                                 int t, int d, const float* __restrict__ X, long long nx,
                                                 long long i) {
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < TILE_QREG; j++) {
        if (j < d) {
            const float u = __fsub_rn(qr[j], s[j * tile + t]);
            acc = __fadd_rn(acc, __fmul_rn(u, u));
        }
    }
    for (int j = TILE_QREG; j < d; j++) {
        const float u = __fsub_rn(__ldg(X + j * nx + i), s[j * tile + t]);
        acc = __fadd_rn(acc, __fmul_rn(u, u));
    }
    return acc;
}

// tile_lane_dist2_pair returns in a0, a1 the squared distances from two queries (coordinates in
// registers, D compile-time dimensions) to tile point t of a tile with the compile-time stride
// TILE: each coordinate of the point is read from shared memory once for both queries (immediate
// offsets, no address arithmetic). Dimensions past the data's (zero in the queries and in the
// tile) add (0-0)^2 = +0, which leaves a non-negative float32 sum unchanged: the bits are those of
// tile_dist2 on the unpadded data.
template <int D, int TILE>
__device__ __forceinline__ void tile_lane_dist2_pair(const float (&q0)[D], const float (&q1)[D], const float* s,
                                                     int t, float& a0, float& a1) {
    a0 = 0.0f;
    a1 = 0.0f;
#pragma unroll
    for (int j = 0; j < D; j++) {
        const float p = s[j * TILE + t];
        const float u0 = __fsub_rn(q0[j], p), u1 = __fsub_rn(q1[j], p);
        a0 = __fadd_rn(a0, __fmul_rn(u0, u0));
        a1 = __fadd_rn(a1, __fmul_rn(u1, u1));
    }
}
