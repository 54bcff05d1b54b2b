/* FP4 weights in the GEMM core's stage ring (MXFP4, docs/recipe.md "FP4 weights"; kernels/fp4.h):
 * the weight block of a K step streamed as codes and exponents and expanded to FP8 in shared
 * memory by the math warps; from there on the FP8 path (its MMAs, its promotion by a_scale *
 * w_scale, w_scale = 2^(R - 127) of the block's reference exponent R).
 * Used by gemm.cu's grouped_gemm_fp4_kernel (single CTAs, 128-row tiles) and by fused.cu's FP4 form.
 *
 * Per weight block (128 rows x 128 of K) a stage receives 8 KB of codes and 512 B of exponents
 * (against 16 KB of FP8 and a scale), both in the block's 16 KB B area, at its end:
 *   producer  thread 0: one TMA of the codes (64 B x 128 rows) to MM_FP4_CODES_AT, its bytes
 *             expected on `full` with A's; every thread: its row's 4 exponents (cp.async, 4 B) to
 *             MM_FP4_EXPS_AT, beside A's gather and scales, all on `full` (one arrival each, as
 *             for FP8). No weight scale: the math computes it.
 *   math      once `full` completed, the NT threads that read the block (mm_fp4_expand: 256, one
 *             half row each, or 128, one row each): codes and the row's exponents into
 *             registers; the row's largest exponent, a warp's by one reduction, into a scratch
 *             slot; a barrier of the NT (the FP8 rows overwrite codes and exponents); R from
 *             the warps' slots; the FP8 bytes in the 128-byte swizzle the wgmma descriptor names
 *             (chunk c of row r at chunk c ^ (r % 8)), from one thread 2^(R - 127) into the
 *             stage's weight scale; a proxy fence (generic writes, async-proxy reads) and a
 *             second barrier; then the FP8 path.
 * Why on the math warps: on the producer (one warp a scheduler) the expansion ran as one
 * dependent instruction stream and bounded the core at ~2500 cycles a block and SM (ncu,
 * docs/performance.md); the eight math warps are two a scheduler and wait for `full` most of the
 * time at decode, and at large tiles the expansion of block kb + 1 runs while block kb's MMAs do.
 * Every math thread named in NT expands every block it waits for, also one whose rows are all
 * past the tile's (it skips only the MMAs), so the barriers always count NT. */
#ifndef MEGAMOE_GEMM_FP4_CUH
#define MEGAMOE_GEMM_FP4_CUH

#include "fp4.h"
#include "gemm_tile.cuh"

#define MM_FP4_SCRATCH 160 /* the reduction's slots: stage scale floats [160, 168), one a math warp */
static_assert(MM_FP4_CODES_AT % 128 == 0, "the codes' TMA lands 128-byte aligned");
static_assert(MM_GEMM_BN == MM_FP4_BLOCK_ROWS, "a tile's weight block is the recipe's block");
static_assert(MM_TILE_EXTRA_SCALES + MM_TILE_TINY_ROWS <= MM_FP4_SCRATCH &&
                  (MM_FP4_SCRATCH + MM_CONSUMER_WARPS) * 4 <= MM_TILE_SCALE_BYTES,
              "the reduction's slots lie past every scale in the stage's scale area");

/* Group g's 32 FP8 bytes (out) into chunks 2g and 2g + 1 of a row (row_sw: the row's address
 * with its swizzle) */
__device__ __forceinline__ void mm_fp4_store_group(unsigned row_sw, unsigned g, const uint32_t out[8])
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(row_sw ^ ((2 * g) << 4)), "r"(out[0]), "r"(out[1]),
                 "r"(out[2]), "r"(out[3]) : "memory");
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(row_sw ^ ((2 * g + 1) << 4)), "r"(out[4]), "r"(out[5]),
                 "r"(out[6]), "r"(out[7]) : "memory");
}

/* Math: the weight block at `blk` (its B area: codes and exponents as the producer left them)
 * into FP8 in place, and its scale 2^(R - 127) into *w_scale; by NT threads (t = 0 .. NT - 1 in
 * whole warps, warp w of them at scratch[w]) meeting at named barrier `bar` of bar_threads (NT,
 * or 256 when each warpgroup expands its own block) */
template <int NT>
__device__ __forceinline__ void mm_fp4_expand(uint8_t *blk, float *w_scale, int *scratch, int t, int bar,
                                              int bar_threads = NT)
{
    static_assert(NT == 2 * MM_GEMM_BN || NT == MM_GEMM_BN, "a half row or a row a thread");
    constexpr int PARTS = NT / MM_GEMM_BN, GROUPS = MM_FP4_GROUPS / PARTS; /* groups a thread */
    const int row = t / PARTS, part = t % PARTS;
    const uint4 *cw = (const uint4 *)(blk + MM_FP4_CODES_AT + row * MM_FP4_CODE_BYTES + part * 16 * GROUPS);
    uint32_t in[GROUPS][4];
#pragma unroll
    for (int j = 0; j < GROUPS; j++) {
        const uint4 c = cw[j];
        in[j][0] = c.x, in[j][1] = c.y, in[j][2] = c.z, in[j][3] = c.w;
    }
    /* the row's 4 exponents, group g in byte g (read by shifts: an index that depends on `part`
     * would put an array in local memory) */
    const uint32_t ex = *(const uint32_t *)(blk + MM_FP4_EXPS_AT + 4 * row);
    const unsigned row_top = max(max(ex & 255u, (ex >> 8) & 255u), max((ex >> 16) & 255u, ex >> 24));
    const unsigned top_w = __reduce_max_sync(0xffffffffu, row_top);
    if (t % 32 == 0) scratch[t / 32] = (int)top_w;
    mm_named_barrier(bar, bar_threads); /* every code and exponent read, every warp's top written */
    int top = scratch[0];
#pragma unroll
    for (int w = 1; w < NT / 32; w++) top = max(top, scratch[w]);
    const int ref = top - MM_FP4_D_MAX;
    const uint32_t mine = ex >> (8 * part * GROUPS); /* this thread's groups from byte 0 on */
    /* chunk c of this row at chunk c ^ (row % 8): the row's address with its swizzle, XORed by the
     * chunk (rows are 128-byte aligned) */
    const unsigned row_sw = (unsigned)__cvta_generic_to_shared(blk + row * MM_GEMM_BK) | (unsigned)((row & 7) << 4);
    int lowest = (int)(mine & 255u);
#pragma unroll
    for (int j = 1; j < GROUPS; j++) lowest = min(lowest, (int)((mine >> (8 * j)) & 255u));
    if (lowest - ref >= MM_FP4_D_FAST) {
#pragma unroll
        for (int j = 0; j < GROUPS; j++) {
            uint32_t t0, t1, out[8];
            mm_fp4_table((int)((mine >> (8 * j)) & 255u) - ref, &t0, &t1);
#pragma unroll
            for (int i = 0; i < 4; i++) mm_fp4_expand_word(in[j][i], t0, t1, &out[2 * i], &out[2 * i + 1]);
            mm_fp4_store_group(row_sw, (unsigned)(part * GROUPS + j), out);
        }
    } else { /* a group below the arithmetic table (spreads past 11 steps, rare in checkpoints):
              * the tables code by code, one group at a time */
#pragma unroll 1
        for (int j = 0; j < GROUPS; j++) {
            uint32_t c[4], out[8];
#pragma unroll
            for (int i = 0; i < 4; i++) { /* in[j] by selects: a dynamic index would put `in` in local memory */
                c[i] = in[0][i];
#pragma unroll
                for (int jj = 1; jj < GROUPS; jj++) c[i] = j == jj ? in[jj][i] : c[i];
            }
            mm_fp4_expand_group(c, (int)((mine >> (8 * j)) & 255u) - ref, out);
            mm_fp4_store_group(row_sw, (unsigned)(part * GROUPS + j), out);
        }
    }
    if (t == 0) *w_scale = mm_fp4_ref_scale(ref);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* for the wgmmas' async-proxy reads */
    mm_named_barrier(bar, bar_threads);
}

/* Math (all 256 math threads): stage s's weight block (the B area) and its scale, as every
 * consume loop that reads one weight block a stage with both warpgroups needs it. */
__device__ __forceinline__ void mm_fp4_expand_stage(uint8_t *stages, int s)
{
    uint8_t *sb = stages + s * MM_TILE_STAGE_BYTES + MM_TILE_A_STAGE;
    float *sc = (float *)(sb + MM_TILE_B_STAGE);
    mm_fp4_expand<MM_CONSUMER_THREADS>(sb, sc + MM_GEMM_BM, (int *)sc + MM_FP4_SCRATCH, mm_math_thread(), MM_BAR_CONSUMER);
}

/* Math (warpgroup g of a compact stage, both at one barrier): weight block g, block 0 in the B
 * area and block 1 in the A area (the rows are in the tiny area), its scale at [BM + g]. */
__device__ __forceinline__ void mm_fp4_expand_compact(uint8_t *stages, int s, int g)
{
    uint8_t *stage = stages + s * MM_TILE_STAGE_BYTES;
    float *sc = (float *)(stage + MM_TILE_A_STAGE + MM_TILE_B_STAGE);
    mm_fp4_expand<MM_GEMM_BN>(g ? stage : stage + MM_TILE_A_STAGE, sc + MM_GEMM_BM + g, (int *)sc + MM_FP4_SCRATCH + 4 * g,
                              mm_math_thread() - MM_GEMM_BN * g, MM_BAR_CONSUMER, MM_CONSUMER_THREADS);
}

/* What a producer loop over one tile with FP4 weights needs, read where it is used: A (a_map NULL:
 * gathered through the row table), the codes map and the exponents ([rows][K / 32] bytes) of the
 * weight rows from w_row0 on. */
typedef struct {
    const void *a_map, *codes_map;
    const uint8_t *exps;
    int k;
} mm_fp4_source;

/* Producer (all 128 threads): K blocks [0, K / 128) of one tile with FP4 weights into the ring:
 * A as mm_tile_produce loads it (one TMA for more than 64 contiguous rows, else gathered), its
 * scales, the weight block's codes (one TMA) and its exponents (no weight scale: the math's
 * expansion writes it). Once a wait of the CTA expired, no more loads are issued
 * (mm_tile_produce's give_up). */
__device__ __forceinline__ void mm_tile_produce_fp4(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring,
                                                    const mm_fp4_source &src, const mm_tile_rows *a,
                                                    const volatile int *rows_at, const volatile int *a_row0_at,
                                                    int w_row0)
{
    const int kblocks = src.k / MM_GEMM_BK;
    for (int kb = 0; kb < kblocks; kb++) {
        const int s = ring.stage;
        const bool expired = *(volatile uint32_t *)&mm_stage_wait_expired;
        const bool freed = mm_mbar_wait(&p->empty[s], ring.phase ^ 1u, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_EMPTY);
        if (expired || !freed) {
            mm_ring_advance(ring);
            continue;
        }
        const int pt = mm_tid(), rows = *rows_at;
        uint8_t *sa = stages + s * MM_TILE_STAGE_BYTES, *sb = sa + MM_TILE_A_STAGE;
        const bool a_tma = mm_tile_a_by_tma(src.a_map, rows);
        const unsigned full = (unsigned)__cvta_generic_to_shared(&p->full[s]);
        if (pt == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(full),
                         "r"((a_tma ? (unsigned)MM_TILE_A_STAGE : 0u) + (unsigned)MM_FP4_BLOCK_CODE_BYTES) : "memory");
            if (a_tma)
                asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                             "[%0], [%1, {%2, %3}], [%4];" ::"r"((unsigned)__cvta_generic_to_shared(sa)),
                             "l"(src.a_map), "r"(kb * MM_GEMM_BK), "r"(*a_row0_at), "r"(full)
                             : "memory");
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                         "[%0], [%1, {%2, %3}], [%4];" ::"r"((unsigned)__cvta_generic_to_shared(sb + MM_FP4_CODES_AT)),
                         "l"(src.codes_map), "r"(kb * MM_FP4_CODE_BYTES), "r"(w_row0), "r"(full)
                         : "memory");
        }
        if (!a_tma) { /* the gather, in whole 8-row groups (rows past `rows` repeat row 0); the
                       * loop ends at the last group (at decode one pass, not eight predicated ones) */
            const int r0 = pt / 8, part = pt % 8, a_rows = ((rows + 7) / 8) * 8;
#pragma unroll 1
            for (int r = r0; r < a_rows; r += 16)
                mm_cp_async16(sa + r * 128 + ((part ^ (r & 7)) * 16),
                              a->row[r < rows ? r : 0] + part * 16 + (size_t)kb * MM_GEMM_BK);
        }
        float *sc = (float *)(sb + MM_TILE_B_STAGE);
        if (pt < rows) mm_cp_async4(sc + pt, a->scale[pt] + kb);
        mm_cp_async4(sb + MM_FP4_EXPS_AT + 4 * pt, src.exps + (size_t)(w_row0 + pt) * (src.k / MM_FP4_GROUP) + kb * MM_FP4_GROUPS);
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(full) : "memory");
        mm_ring_advance(ring);
    }
}

#endif
