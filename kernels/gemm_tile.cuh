/* The tile machinery of the grouped FP8 GEMM core, as device functions any kernel can drive with
 * its own schedule: the standalone grouped GEMM (gemm.cu) and the fused mega-MoE kernel
 * (fused.cu) both call mm_tile_mainloop() and differ only in where a tile's rows come from and
 * what the epilogue does with the accumulators.
 *
 * Version 1: tensor cores through mma.sync (m16n8k32, e4m3 x e4m3 -> f32) fed by a 5-stage
 * cp.async pipeline (4 K blocks in flight: decode sizes are bound by the bytes in flight per SM,
 * not by the tensor cores). A tile is BM (64) rows x BN (128) columns; 8 warps as 2 (rows) x 4 (columns)
 * warp tiles of 32 x 32. A 16-row slice of a warp tile with no valid row issues no MMA at all, so
 * a decode tile of 1-16 rows costs a quarter of a full one in tensor-core issue slots.
 *
 * Numerics (recipe.md step 3): per 128-wide K block the MMA sums into fresh FP32 registers, then
 * the block sum is promoted into the accumulator with one FMA by (a_scale * w_scale), K blocks in
 * order. Every path that uses this function therefore produces the same FP32 bits per element. */
#ifndef MEGAMOE_GEMM_TILE_CUH
#define MEGAMOE_GEMM_TILE_CUH

#include <stdint.h>

#include "gemm_schedule.h"

#define MM_TILE_THREADS 256
#define MM_TILE_STAGES 5
#define MM_TILE_ROW_BYTES (MM_GEMM_BK + 16) /* +16 B: rows 4 banks apart, fragment loads conflict-free */
#define MM_TILE_A_STAGE (MM_GEMM_BM * MM_TILE_ROW_BYTES)
#define MM_TILE_B_STAGE (MM_GEMM_BN * MM_TILE_ROW_BYTES)
#define MM_TILE_STAGE_BYTES (MM_TILE_A_STAGE + MM_TILE_B_STAGE)
#define MM_TILE_SMEM_BYTES (MM_TILE_STAGES * MM_TILE_STAGE_BYTES)

/* Where a tile's A rows live: one FP8 row pointer and one scale pointer (K/128 floats) per row
 * of the tile, in shared memory. Rows past `rows` must still point at a readable row (the loader
 * clamps to row 0); their results are never stored. */
typedef struct {
    const uint8_t *row[MM_GEMM_BM];
    const float *scale[MM_GEMM_BM];
} mm_tile_rows;

/* This thread's place in the tile: accumulator (i, j, v) holds row tile_row(i, v >> 1) and
 * columns tile_col(j) + (v & 1). */
__device__ __forceinline__ int mm_tile_row(int i, int half)
{
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    return (warp % 2) * 32 + i * 16 + lane / 4 + half * 8;
}

__device__ __forceinline__ int mm_tile_col(int j)
{
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    return (warp / 2) * 32 + j * 8 + (lane % 4) * 2;
}

__device__ __forceinline__ void mm_cp_async16(void *smem, const void *gmem)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}

__device__ __forceinline__ void mm_cp_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N> __device__ __forceinline__ void mm_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void mm_mma_e4m3(float *d, const uint32_t *a, const uint32_t *b)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* One K block (128 columns) of the tile's A rows and of BN weight rows into a stage. */
__device__ __forceinline__ void mm_tile_load_stage(uint8_t *stage, const mm_tile_rows *a, int rows,
                                                   const uint8_t *w, int k, int kb)
{
    uint8_t *sa = stage, *sb = stage + MM_TILE_A_STAGE;
    int a_chunks = ((rows + 15) / 16) * 16 * 8; /* only the 16-row slices the MMAs read */
    for (int c = threadIdx.x; c < a_chunks; c += MM_TILE_THREADS) {
        int r = c / 8, part = c % 8;
        const uint8_t *src = a->row[r < rows ? r : 0];
        mm_cp_async16(sa + r * MM_TILE_ROW_BYTES + part * 16, src + (size_t)kb * MM_GEMM_BK + part * 16);
    }
    for (int c = threadIdx.x; c < MM_GEMM_BN * 8; c += MM_TILE_THREADS) {
        int r = c / 8, part = c % 8;
        mm_cp_async16(sb + r * MM_TILE_ROW_BYTES + part * 16,
                      w + (size_t)r * k + (size_t)kb * MM_GEMM_BK + part * 16);
    }
}

/* acc = A[rows][K] x W[BN][K]^T with the recipe's per-block promotion. `w` is the tile's first
 * weight row ([BN][K], row stride K), `w_scale` its K/128 block scales. Called by all 256 threads
 * after they wrote `a`; begins with a __syncthreads (publishes `a`; the stages may still hold the
 * previous tile) and ends with one (the stages are free again). */
__device__ __forceinline__ void mm_tile_mainloop(uint8_t *smem, const mm_tile_rows *a, int rows,
                                                 const uint8_t *w, const float *w_scale, int k,
                                                 float acc[2][4][4])
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_m = warp % 2, warp_n = warp / 2;
    const int group = lane / 4, quad = lane % 4;
    const int kblocks = k / MM_GEMM_BK;
    /* 16-row slices of this warp that hold a valid row (warp-uniform) */
    const bool live0 = warp_m * 32 < rows, live1 = warp_m * 32 + 16 < rows;

#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int v = 0; v < 4; v++) acc[i][j][v] = 0.0f;

    __syncthreads(); /* the caller's row table is written; the previous tile is done with the stages */
    const float *my_scale[2][2];
    bool my_valid[2][2];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int r = mm_tile_row(i, h);
            my_valid[i][h] = r < rows;
            my_scale[i][h] = a->scale[r < rows ? r : 0];
        }

#pragma unroll
    for (int s = 0; s < MM_TILE_STAGES - 1; s++) {
        if (s < kblocks) mm_tile_load_stage(smem + s * MM_TILE_STAGE_BYTES, a, rows, w, k, s);
        mm_cp_async_commit();
    }
    for (int kb = 0; kb < kblocks; kb++) {
        int next = kb + MM_TILE_STAGES - 1;
        if (next < kblocks)
            mm_tile_load_stage(smem + (next % MM_TILE_STAGES) * MM_TILE_STAGE_BYTES, a, rows, w, k, next);
        mm_cp_async_commit();
        mm_cp_async_wait<MM_TILE_STAGES - 1>();
        __syncthreads();
        const uint8_t *sa = smem + (kb % MM_TILE_STAGES) * MM_TILE_STAGE_BYTES, *sb = sa + MM_TILE_A_STAGE;
        float blk[2][4][4];
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int v = 0; v < 4; v++) blk[i][j][v] = 0.0f;
        if (live0) {
#pragma unroll
            for (int ks = 0; ks < MM_GEMM_BK / 32; ks++) {
                uint32_t af[2][4], bf[4][2];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const uint8_t *c0 = sb + (warp_n * 32 + j * 8 + group) * MM_TILE_ROW_BYTES + ks * 32 + quad * 4;
                    bf[j][0] = *(const uint32_t *)c0;
                    bf[j][1] = *(const uint32_t *)(c0 + 16);
                }
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    if (i == 1 && !live1) continue;
                    const uint8_t *r0 = sa + (warp_m * 32 + i * 16 + group) * MM_TILE_ROW_BYTES + ks * 32 + quad * 4;
                    af[i][0] = *(const uint32_t *)r0;
                    af[i][1] = *(const uint32_t *)(r0 + 8 * MM_TILE_ROW_BYTES);
                    af[i][2] = *(const uint32_t *)(r0 + 16);
                    af[i][3] = *(const uint32_t *)(r0 + 8 * MM_TILE_ROW_BYTES + 16);
#pragma unroll
                    for (int j = 0; j < 4; j++) mm_mma_e4m3(blk[i][j], af[i], bf[j]);
                }
            }
        }
        /* promotion: (sa * sw) * block sum, in K order; invalid rows get 0. A's scales through L2
         * only (__ldcg): in the fused kernel other CTAs and peers write them during the launch. */
        float sw = __ldg(w_scale + kb);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float s_lo = my_valid[i][0] ? __ldcg(my_scale[i][0] + kb) * sw : 0.0f;
            float s_hi = my_valid[i][1] ? __ldcg(my_scale[i][1] + kb) * sw : 0.0f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                acc[i][j][0] = fmaf(s_lo, blk[i][j][0], acc[i][j][0]);
                acc[i][j][1] = fmaf(s_lo, blk[i][j][1], acc[i][j][1]);
                acc[i][j][2] = fmaf(s_hi, blk[i][j][2], acc[i][j][2]);
                acc[i][j][3] = fmaf(s_hi, blk[i][j][3], acc[i][j][3]);
            }
        }
        __syncthreads(); /* this stage may be refilled by the next iteration's load */
    }
}

#endif
