/* Grouped FP8 GEMM core as a standalone launch: the tile mainloop of gemm_tile.cuh (wgmma fed by
 * a multi-stage cp.async pipeline) driven over the grouped tile schedule of gemm_schedule.h.
 *
 * out[r][n] = sum over 128-wide K blocks kb of (sa[r][kb] * sw[e][n/128][kb]) * (FP32 sum of
 * qa[r][k] * qw[e][n][k] over the block): recipe.md step 3, the block sum in the MMA's FP32
 * accumulators, promoted with one FMA per block in K order.
 *
 * Roles: every warp of the CTA loads (cp.async); each of the two warpgroups computes 64 of the
 * tile's 128 columns for all 64 rows. Persistent CTAs walk the flat tile list of
 * gemm_schedule.h; a tile's rows never straddle experts. Rows past an expert's count read a valid
 * row (clamped) and are never stored.
 * Buffers: A [rows][K] FP8 + [rows][K/128] FP32 scales; W [E][N][K] FP8 + [E][N/128][K/128];
 * row_offset/row_count [E] and tile_start [E+1] in device memory (no host sync); out [rows][N]
 * BF16 or FP32.
 * Synchronization: cp.async groups + __syncthreads per stage; nothing across CTAs. */
#include <cuda_bf16.h>
#include <stdint.h>

#include "gemm_schedule.h"
#include "gemm_tile.cuh"
#include "megamoe_kernels.h"

__global__ void __launch_bounds__(MM_TILE_THREADS) grouped_gemm_kernel(mm_grouped_gemm_args g)
{
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ mm_tile_rows a_rows;
    uint8_t *stages = mm_tile_stages(smem);
    const int col_tiles = g.n / MM_GEMM_BN, kblocks = g.k / MM_GEMM_BK;
    const int total = g.tile_start[g.experts] * col_tiles;

    for (int item = blockIdx.x; item < total; item += gridDim.x) {
        mm_tile t = mm_tile_locate(g.tile_start, g.experts, col_tiles, item);
        int count = g.row_count[t.expert];
        int a_row0 = g.row_offset[t.expert] + t.row_tile * MM_GEMM_BM;
        int rows = count - t.row_tile * MM_GEMM_BM;
        rows = rows < MM_GEMM_BM ? rows : MM_GEMM_BM;
        int n0 = t.col_tile * MM_GEMM_BN;
        __syncthreads(); /* the previous tile's epilogue is done with a_rows */
        if (threadIdx.x < MM_GEMM_BM) {
            int r = a_row0 + (threadIdx.x < rows ? threadIdx.x : 0);
            a_rows.row[threadIdx.x] = g.a + (size_t)r * g.k;
            a_rows.scale[threadIdx.x] = g.a_scale + (size_t)r * kblocks;
        }
        float acc[MM_TILE_ACC];
        mm_tile_mainloop(stages, &a_rows, rows, g.w + ((size_t)t.expert * g.n + n0) * g.k,
                         g.w_scale + ((size_t)t.expert * col_tiles + t.col_tile) * kblocks, g.k, acc);

        /* epilogue: valid rows only, two adjacent columns at a time */
#pragma unroll
        for (int i = 0; i < MM_TILE_ACC; i += 2) {
            int r = mm_acc_row(i);
            if (r >= rows) continue;
            size_t at = (size_t)(a_row0 + r) * g.n + n0 + mm_acc_col(i);
            if (g.out_fp32) {
                *(float2 *)((float *)g.out + at) = make_float2(acc[i], acc[i + 1]);
            } else {
                *(__nv_bfloat162 *)((__nv_bfloat16 *)g.out + at) = __floats2bfloat162_rn(acc[i], acc[i + 1]);
            }
        }
    }
}

/* One thread block computes the tile prefix on the device: no host sync between the count and
 * the GEMM. */
__global__ void tile_prefix_kernel(const int32_t *row_count, int experts, int32_t *tile_start)
{
    if (threadIdx.x == 0) mm_tile_prefix(row_count, experts, tile_start);
}

extern "C" int mm_grouped_gemm_smem_bytes(void)
{
    return MM_TILE_SMEM_BYTES;
}

/* Raises the kernel's shared-memory limit; call once before the first launch (and before any
 * graph capture). */
extern "C" cudaError_t mm_grouped_gemm_prepare(void)
{
    return cudaFuncSetAttribute(grouped_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                MM_TILE_SMEM_BYTES);
}

extern "C" cudaError_t mm_launch_grouped_gemm(mm_grouped_gemm_args g, int ctas, cudaStream_t stream)
{
    if (g.n % MM_GEMM_BN || g.k % MM_GEMM_BK) return cudaErrorInvalidValue;
    tile_prefix_kernel<<<1, 32, 0, stream>>>(g.row_count, g.experts, g.tile_start);
    grouped_gemm_kernel<<<ctas, MM_TILE_THREADS, MM_TILE_SMEM_BYTES, stream>>>(g);
    return cudaGetLastError();
}
