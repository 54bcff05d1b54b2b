/* Grouped FP8 GEMM core, version 1: tensor cores through mma.sync (m16n8k32, e4m3 x e4m3 -> f32)
 * fed by a 3-stage cp.async pipeline. The wgmma + TMA version (issue 5's target) replaces the
 * stage loader and the MMA step; the schedule, the promotion and the epilogues stay.
 *
 * out[r][n] = sum over 128-wide K blocks kb of (sa[r][kb] * sw[e][n/128][kb]) * (FP32 sum of
 * qa[r][k] * qw[e][n][k] over the block): recipe.md step 3, the block sum in the MMA's FP32
 * accumulators, promoted with one FMA per block in K order.
 *
 * Roles: every warp of the CTA loads (cp.async) and computes; 8 warps tile a 64 x 128 output as
 * 2 (rows) x 4 (columns) warp tiles of 32 x 32. Persistent CTAs walk the flat tile list of
 * gemm_schedule.h; a tile's rows never straddle experts. Rows past an expert's count read a valid
 * row (clamped) and are never stored.
 * Buffers: A [rows][K] FP8 + [rows][K/128] FP32 scales; W [E][N][K] FP8 + [E][N/128][K/128];
 * row_offset/row_count [E] and tile_start [E+1] in device memory (no host sync); out [rows][N]
 * BF16 or FP32.
 * Synchronization: cp.async groups + __syncthreads per stage; nothing across CTAs. */
#include <cuda_bf16.h>
#include <stdint.h>

#include "gemm_schedule.h"
#include "megamoe_kernels.h"

#define STAGES 3
#define THREADS 256
#define ROW_BYTES (MM_GEMM_BK + 16) /* +16 B: rows start 4 banks apart, fragment loads conflict-free */
#define A_STAGE_BYTES (MM_GEMM_BM * ROW_BYTES)
#define B_STAGE_BYTES (MM_GEMM_BN * ROW_BYTES)
#define STAGE_BYTES (A_STAGE_BYTES + B_STAGE_BYTES)
#define SMEM_BYTES (STAGES * STAGE_BYTES)

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void mma_e4m3(float *d, const uint32_t *a, const uint32_t *b)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* One K block (128 columns) of the A and B tiles into a stage. */
__device__ __forceinline__ void load_stage(uint8_t *stage, const uint8_t *a, int a_row0, int a_rows,
                                           const uint8_t *w, int k, int kb)
{
    uint8_t *sa = stage, *sb = stage + A_STAGE_BYTES;
    /* A: 64 rows x 8 chunks of 16 B = 512 chunks; B: 128 rows x 8 = 1024 chunks */
    for (int c = threadIdx.x; c < MM_GEMM_BM * 8; c += THREADS) {
        int r = c / 8, part = c % 8;
        int src = r < a_rows ? r : 0;
        cp_async16(sa + r * ROW_BYTES + part * 16,
                   a + (size_t)(a_row0 + src) * k + (size_t)kb * MM_GEMM_BK + part * 16);
    }
    for (int c = threadIdx.x; c < MM_GEMM_BN * 8; c += THREADS) {
        int r = c / 8, part = c % 8;
        cp_async16(sb + r * ROW_BYTES + part * 16, w + (size_t)r * k + (size_t)kb * MM_GEMM_BK + part * 16);
    }
}

__global__ void __launch_bounds__(THREADS) grouped_gemm_kernel(mm_grouped_gemm_args g)
{
    extern __shared__ __align__(128) uint8_t smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_m = warp % 2, warp_n = warp / 2;
    const int group = lane / 4, quad = lane % 4;
    const int col_tiles = g.n / MM_GEMM_BN, kblocks = g.k / MM_GEMM_BK;
    const int total = g.tile_start[g.experts] * col_tiles;

    for (int item = blockIdx.x; item < total; item += gridDim.x) {
        mm_tile t = mm_tile_locate(g.tile_start, g.experts, col_tiles, item);
        int count = g.row_count[t.expert];
        int a_row0 = g.row_offset[t.expert] + t.row_tile * MM_GEMM_BM;
        int rows = count - t.row_tile * MM_GEMM_BM;
        rows = rows < MM_GEMM_BM ? rows : MM_GEMM_BM;
        int n0 = t.col_tile * MM_GEMM_BN;
        const uint8_t *w = g.w + ((size_t)t.expert * g.n + n0) * g.k;
        const float *wscale = g.w_scale + ((size_t)t.expert * col_tiles + t.col_tile) * kblocks;

        float acc[2][4][4], blk[2][4][4];
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int v = 0; v < 4; v++) acc[i][j][v] = 0.0f;

        /* rows of this thread's accumulators, for the activation scales */
        int my_rows[2][2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            my_rows[i][0] = warp_m * 32 + i * 16 + group;
            my_rows[i][1] = my_rows[i][0] + 8;
        }

        __syncthreads(); /* the previous tile's readers are done with every stage */
#pragma unroll
        for (int s = 0; s < STAGES - 1; s++) {
            if (s < kblocks) load_stage(smem + s * STAGE_BYTES, g.a, a_row0, rows, w, g.k, s);
            cp_async_commit();
        }
        for (int kb = 0; kb < kblocks; kb++) {
            int next = kb + STAGES - 1;
            if (next < kblocks) load_stage(smem + (next % STAGES) * STAGE_BYTES, g.a, a_row0, rows, w, g.k, next);
            cp_async_commit();
            cp_async_wait<STAGES - 1>();
            __syncthreads();
            const uint8_t *sa = smem + (kb % STAGES) * STAGE_BYTES, *sb = sa + A_STAGE_BYTES;
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int v = 0; v < 4; v++) blk[i][j][v] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < MM_GEMM_BK / 32; ks++) {
                uint32_t af[2][4], bf[4][2];
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const uint8_t *r0 = sa + (warp_m * 32 + i * 16 + group) * ROW_BYTES + ks * 32 + quad * 4;
                    af[i][0] = *(const uint32_t *)r0;
                    af[i][1] = *(const uint32_t *)(r0 + 8 * ROW_BYTES);
                    af[i][2] = *(const uint32_t *)(r0 + 16);
                    af[i][3] = *(const uint32_t *)(r0 + 8 * ROW_BYTES + 16);
                }
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const uint8_t *c0 = sb + (warp_n * 32 + j * 8 + group) * ROW_BYTES + ks * 32 + quad * 4;
                    bf[j][0] = *(const uint32_t *)c0;
                    bf[j][1] = *(const uint32_t *)(c0 + 16);
                }
#pragma unroll
                for (int i = 0; i < 2; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) mma_e4m3(blk[i][j], af[i], bf[j]);
            }
            /* promotion: (sa * sw) * block sum, in K order */
            float sw = __ldg(wscale + kb);
#pragma unroll
            for (int i = 0; i < 2; i++) {
                float s_lo = 0.0f, s_hi = 0.0f;
                if (my_rows[i][0] < rows) s_lo = __ldg(g.a_scale + (size_t)(a_row0 + my_rows[i][0]) * kblocks + kb) * sw;
                if (my_rows[i][1] < rows) s_hi = __ldg(g.a_scale + (size_t)(a_row0 + my_rows[i][1]) * kblocks + kb) * sw;
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

        /* epilogue: rows < rows only */
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int r = my_rows[i][h];
                if (r >= rows) continue;
                size_t orow = (size_t)(a_row0 + r) * g.n;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int col = n0 + warp_n * 32 + j * 8 + quad * 2;
                    float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                    if (g.out_fp32) {
                        *(float2 *)((float *)g.out + orow + col) = make_float2(v0, v1);
                    } else {
                        __nv_bfloat162 b = __floats2bfloat162_rn(v0, v1);
                        *(__nv_bfloat162 *)((__nv_bfloat16 *)g.out + orow + col) = b;
                    }
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
    return SMEM_BYTES;
}

/* Raises the kernel's shared-memory limit; call once before the first launch (and before any
 * graph capture). */
extern "C" cudaError_t mm_grouped_gemm_prepare(void)
{
    return cudaFuncSetAttribute(grouped_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                SMEM_BYTES);
}

extern "C" cudaError_t mm_launch_grouped_gemm(mm_grouped_gemm_args g, int ctas, cudaStream_t stream)
{
    if (g.n % MM_GEMM_BN || g.k % MM_GEMM_BK) return cudaErrorInvalidValue;
    tile_prefix_kernel<<<1, 32, 0, stream>>>(g.row_count, g.experts, g.tile_start);
    grouped_gemm_kernel<<<ctas, THREADS, SMEM_BYTES, stream>>>(g);
    return cudaGetLastError();
}
