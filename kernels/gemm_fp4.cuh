/* FP4 weights in the GEMM core's stage ring (MXFP4, docs/recipe.md "FP4 weights"; kernels/fp4.h):
 * the weight side of a 128 x 128 tile streamed as codes and exponents and expanded to FP8 in
 * shared memory by the math warps, and the promotion by each weight row's reference scale.
 * Used by gemm.cu's grouped_gemm_fp4_kernel (single CTAs, 128-row tiles) and by fused.cu's FP4 form.
 *
 * Per stage (K block kb of a tile) the weight block arrives as 8 KB of codes and 512 B of
 * exponents, against 16 KB of FP8:
 *   producer  thread 0: one TMA of the block's codes (64 B x 128 rows) into the second half of the
 *             B area (the FP8 area of rows 64..127), its bytes expected on `full` with A's;
 *             every thread: its row's 4 exponents (cp.async, 4 B) into the stage's tiny area,
 *             beside A's gather and scales, all on `full` (one arrival each, as for FP8).
 *   math      all 256 math threads, once `full` completed (mm_fp4_expand_stage): thread t takes
 *             half t % 2 (groups 2h, 2h + 1) of weight row t / 2: its 32 code bytes and the row's
 *             4 exponents into registers; a barrier of the 256 (the FP8 rows overwrite the
 *             codes); the 64 FP8 bytes in the 128-byte swizzle the wgmma descriptor names (chunk
 *             c of row r at chunk c ^ (r % 8)), and from the half-0 thread the row's factor
 *             2^(R - 127) over its exponents; a proxy fence (generic writes, async-proxy reads)
 *             and a second barrier; then the MMAs, the promotion of column c by sa[row] *
 *             factor[c] (mm_tile_promote_cols) and the stage's release as for FP8.
 * Why on the math warps: on the producer (one warp a scheduler) the expansion ran as one
 * dependent instruction stream and bounded the core at ~2500 cycles a block and SM (ncu,
 * docs/performance.md); the eight math warps are two a scheduler and wait for `full` most of the
 * time at decode. Both math warpgroups expand every block, also one whose rows are all past the
 * tile's (it skips only the MMAs), so the barriers always count 256. */
#ifndef MEGAMOE_GEMM_FP4_CUH
#define MEGAMOE_GEMM_FP4_CUH

#include "fp4.h"
#include "gemm_tile.cuh"

#define MM_FP4_CODE_BYTES (MM_GEMM_BK / 2)                    /* a row's codes in a K block */
#define MM_FP4_BLOCK_CODE_BYTES (MM_GEMM_BN * MM_FP4_CODE_BYTES) /* a block's codes: 8 KB */
#define MM_FP4_CODES_AT (MM_TILE_B_STAGE - MM_FP4_BLOCK_CODE_BYTES) /* within the B area */
static_assert(MM_GEMM_BN * 4 <= MM_TILE_TINY_A, "the exponents (then factors) of a block fit the tiny area");
static_assert(2 * MM_GEMM_BN == MM_CONSUMER_THREADS, "two math threads a weight row");

/* Math (all 256 math threads): stage s's codes and exponents into its FP8 weight block and the
 * rows' factors (see the header). */
__device__ __forceinline__ void mm_fp4_expand_stage(uint8_t *stages, int s)
{
    const int t = mm_math_thread(), row = t / 2, half = t % 2;
    uint8_t *sb = stages + s * MM_TILE_STAGE_BYTES + MM_TILE_A_STAGE;
    uint8_t *tiny = mm_tile_stage_tiny(stages, s);
    const uint4 *cw = (const uint4 *)(sb + MM_FP4_CODES_AT + row * MM_FP4_CODE_BYTES + half * 32);
    const uint4 c0 = cw[0], c1 = cw[1];
    const uint32_t ex = *(const uint32_t *)(tiny + 4 * row);
    mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS); /* every code read before any FP8 row lands on them */
    uint8_t sg[MM_FP4_GROUPS];
#pragma unroll
    for (int g = 0; g < MM_FP4_GROUPS; g++) sg[g] = (uint8_t)(ex >> (8 * g));
    const int ref = mm_fp4_block_ref(sg);
    int lowest = sg[0];
#pragma unroll
    for (int g = 1; g < MM_FP4_GROUPS; g++) lowest = min(lowest, (int)sg[g]);
    /* chunk c of this row at chunk c ^ (row % 8): the row's address with its swizzle, XORed by the
     * chunk (rows are 128-byte aligned) */
    const unsigned row_sw = (unsigned)__cvta_generic_to_shared(sb + row * MM_GEMM_BK) | (unsigned)((row & 7) << 4);
    const uint32_t in[2][4] = {{c0.x, c0.y, c0.z, c0.w}, {c1.x, c1.y, c1.z, c1.w}};
    if (lowest - ref >= MM_FP4_D_FAST) {
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int g = 2 * half + j;
            uint32_t out[8];
            mm_fp4_expand_group_fast(in[j], (half ? (j ? sg[3] : sg[2]) : (j ? sg[1] : sg[0])) - ref, out);
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(row_sw ^ (unsigned)((2 * g) << 4)),
                         "r"(out[0]), "r"(out[1]), "r"(out[2]), "r"(out[3]) : "memory");
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(row_sw ^ (unsigned)((2 * g + 1) << 4)),
                         "r"(out[4]), "r"(out[5]), "r"(out[6]), "r"(out[7]) : "memory");
        }
    } else { /* a group below the fast form (spreads past 11 steps, rare in checkpoints): code by code */
        uint8_t *rp = sb + row * MM_GEMM_BK;
#pragma unroll 1
        for (int i = 0; i < 2 * MM_FP4_GROUP; i++) {
            const int j = i / MM_FP4_GROUP, g = 2 * half + j, q = (i % MM_FP4_GROUP) / 8, k = MM_FP4_GROUP * g + i % MM_FP4_GROUP;
            const uint32_t w = j ? (q == 0 ? c1.x : q == 1 ? c1.y : q == 2 ? c1.z : c1.w)
                                 : (q == 0 ? c0.x : q == 1 ? c0.y : q == 2 ? c0.z : c0.w);
            const int d = (g == 0 ? sg[0] : g == 1 ? sg[1] : g == 2 ? sg[2] : sg[3]) - ref;
            rp[(((k >> 4) ^ (row & 7)) << 4) + (k & 15)] = mm_fp4_to_fp8((uint8_t)((w >> (4 * (i & 7))) & 15u), d);
        }
    }
    if (half == 0) *(float *)(tiny + 4 * row) = mm_fp4_ref_scale(ref);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* for the wgmmas' async-proxy reads */
    mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS);
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
 * A as mm_tile_produce loads it (one TMA for more than 64 contiguous rows, else gathered: rows
 * a_off .. a_off + rows - 1 of the table), its scales, the weight block's codes (one TMA) and
 * its exponents. Once a wait of the CTA expired, no more loads are issued (mm_tile_produce's
 * give_up). */
__device__ __forceinline__ void mm_tile_produce_fp4(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring,
                                                    const mm_fp4_source &src, const mm_tile_rows *a,
                                                    const volatile int *rows_at, const volatile int *a_row0_at,
                                                    int w_row0, int a_off = 0)
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
                              a->row[a_off + (r < rows ? r : 0)] + part * 16 + (size_t)kb * MM_GEMM_BK);
        }
        float *sc = (float *)(sb + MM_TILE_B_STAGE);
        if (pt < rows) mm_cp_async4(sc + pt, a->scale[a_off + pt] + kb);
        mm_cp_async4(mm_tile_stage_tiny(stages, s) + 4 * pt,
                     src.exps + (size_t)(w_row0 + pt) * (src.k / MM_FP4_GROUP) + kb * MM_FP4_GROUPS);
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(full) : "memory");
        mm_ring_advance(ring);
    }
}

#endif
