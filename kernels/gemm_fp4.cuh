/* FP4 weights in the GEMM core's stage ring (MXFP4, docs/recipe.md "FP4 weights"; kernels/fp4.h):
 * the weight side of a 128 x 128 tile streamed as codes and exponents, expanded to FP8 in shared
 * memory by the producer warpgroup, and the promotion by each weight row's reference scale.
 * Used by gemm.cu's grouped_gemm_fp4_kernel (single CTAs, 128-row tiles) and by fused.cu's FP4 form.
 *
 * Per stage (K block kb of a tile) the weight block arrives as 8 KB of codes and 512 B of
 * exponents, against 16 KB of FP8: each producer warp w owns weight rows 32w .. 32w + 31.
 *   issue   lane 0 of warp w: one TMA of its rows' codes (box 64 B x 32 rows) into the second
 *           half of the B area its rows will fill (B + 4096 w + 2048), expected bytes on
 *           wfull[stage][w]; every thread: its row's 4 exponents (cp.async, 4 B) into the
 *           stage's tiny area, arriving on wfull (noinc) with its A copies' arrival on `full`.
 *   expand  once wfull completed: each thread reads its row's 64 code bytes and 4 exponents,
 *           the warp syncs (its FP8 rows overwrite its codes, nobody else's), then writes the
 *           128 FP8 bytes in the 128-byte swizzle the wgmma descriptor names (chunk c of row r at
 *           chunk c ^ (r % 8)) and the row's factor 2^(R - 127) as a float over its exponents,
 *           then one arrival per warp on `full` (the math's proxy fence after `full` orders
 *           these generic writes before its wgmmas' async-proxy reads, as for gathered rows).
 * `full` thus expects 128 cp.async arrivals + thread 0's (the A TMA's bytes) + 4 warps'.
 * The expansion trails the issue: a warp expands each of its stages as soon as the codes landed,
 * while it polls for the next stage to come free (mm_fp4_wait_empty) and for the next item slot,
 * so up to the ring's depth of weight blocks stays in flight and no wait of the producer stands
 * between the math and a stage it needs. Why it cannot deadlock: a warp's stages not yet
 * expanded (its `pending`) are always the newest it issued (at most the ring's depth, since a
 * stage is refilled only after the math consumed its last use), so every stage a wait of the
 * producer depends on is older and expanded; before the item slot's barrier (all 128 threads) a
 * warp expands any pending stage of an item before the current one (mm_fp4_drain_to).
 * The math (mm_tile_consume<true>) reads A's scales from the stage as before and promotes each
 * column c by sa[row] * factor[c] (mm_tile_promote_cols) before it frees the stage. */
#ifndef MEGAMOE_GEMM_FP4_CUH
#define MEGAMOE_GEMM_FP4_CUH

#include "fp4.h"
#include "gemm_tile.cuh"

#define MM_FP4_WARPS (MM_PRODUCER_THREADS / 32)
#define MM_FP4_ROWS_PER_WARP (MM_GEMM_BN / MM_FP4_WARPS)
#define MM_FP4_CODE_BYTES (MM_GEMM_BK / 2)                            /* a row's codes in a K block */
#define MM_FP4_WARP_B_BYTES (MM_FP4_ROWS_PER_WARP * MM_GEMM_BK)      /* a warp's FP8 rows */
#define MM_FP4_WARP_CODE_BYTES (MM_FP4_ROWS_PER_WARP * MM_FP4_CODE_BYTES)
/* `full`'s arrivals in FP4: the producer's cp.asyncs, thread 0's expected bytes, each warp's expansion */
#define MM_FP4_FULL_ARRIVALS (MM_PRODUCER_THREADS + 1 + MM_FP4_WARPS)
static_assert(MM_FP4_WARP_CODE_BYTES * 2 == MM_FP4_WARP_B_BYTES, "a warp's codes fill the second half of its FP8 rows");
static_assert(MM_GEMM_BN * 4 <= MM_TILE_TINY_A, "the exponents (then factors) of a block fit the tiny area");

typedef struct {
    uint64_t wfull[MM_TILE_STAGES][MM_FP4_WARPS]; /* lane 0's expected bytes + 32 cp.async arrivals */
} mm_fp4_pipe;

/* A producer warp's stages issued and not yet expanded: the oldest at `xr`, `pending` of them. */
typedef struct {
    mm_ring xr;
    int pending;
} mm_fp4_lag;

__device__ __forceinline__ void mm_fp4_pipe_init(mm_fp4_pipe *f)
{
    for (int s = 0; s < MM_TILE_STAGES; s++)
        for (int w = 0; w < MM_FP4_WARPS; w++) mm_mbar_init(&f->wfull[s][w], 1 + 32);
}

/* Whether the barrier's phase of this parity completed, as lane 0 of the warp saw it (a phase
 * stays complete until this warp's next use, so the warp may act on lane 0's view; each lane
 * then waits itself, which returns at once, for its own acquire). */
__device__ __forceinline__ bool mm_fp4_warp_test(unsigned bar, uint32_t parity)
{
    uint32_t done = 0;
    if (threadIdx.x % 32 == 0)
        asm volatile("{\n.reg .pred q;\nmbarrier.test_wait.parity.shared::cta.b64 q, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, q;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return __shfl_sync(0xffffffffu, done, 0) != 0;
}

/* Warp w expands its 32 rows of stage s (its codes landed: wfull waited here) and arrives on `full`. */
__device__ __forceinline__ void mm_fp4_expand(uint8_t *stages, mm_tile_pipe *p, mm_fp4_pipe *f, const mm_ring &xr)
{
    const int pt = threadIdx.x, warp = pt / 32, lane = pt % 32;
    mm_mbar_wait(&f->wfull[xr.stage][warp], xr.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
    uint8_t *sb = stages + xr.stage * MM_TILE_STAGE_BYTES + MM_TILE_A_STAGE;
    uint8_t *tiny = mm_tile_stage_tiny(stages, xr.stage);
    const uint4 *cw = (const uint4 *)(sb + warp * MM_FP4_WARP_B_BYTES + MM_FP4_WARP_CODE_BYTES + lane * MM_FP4_CODE_BYTES);
    uint4 c[MM_FP4_GROUPS];
#pragma unroll
    for (int g = 0; g < MM_FP4_GROUPS; g++) c[g] = cw[g];
    const uint32_t ex = *(const uint32_t *)(tiny + 4 * pt);
    __syncwarp(); /* every lane holds its codes before any lane's FP8 row overwrites them */
    uint8_t s[MM_FP4_GROUPS];
#pragma unroll
    for (int g = 0; g < MM_FP4_GROUPS; g++) s[g] = (uint8_t)(ex >> (8 * g));
    const int ref = mm_fp4_block_ref(s);
    uint8_t *row = sb + pt * MM_GEMM_BK;
    /* chunk c of this row sits at chunk c ^ (row % 8): the row's address with its swizzle, XORed
     * by the chunk (rows are 128-byte aligned) */
    const unsigned row_sw = (unsigned)__cvta_generic_to_shared(row) | (unsigned)((pt & 7) << 4);
    int lowest = s[0];
#pragma unroll
    for (int g = 1; g < MM_FP4_GROUPS; g++) lowest = min(lowest, (int)s[g]);
    if (lowest - ref >= MM_FP4_D_FAST) {
#pragma unroll
        for (int g = 0; g < MM_FP4_GROUPS; g++) {
            const uint32_t in[4] = {c[g].x, c[g].y, c[g].z, c[g].w};
            uint32_t out[8];
            mm_fp4_expand_group_fast(in, (int)s[g] - ref, out);
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(row_sw ^ (unsigned)((2 * g) << 4)),
                         "r"(out[0]), "r"(out[1]), "r"(out[2]), "r"(out[3]) : "memory");
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(row_sw ^ (unsigned)((2 * g + 1) << 4)),
                         "r"(out[4]), "r"(out[5]), "r"(out[6]), "r"(out[7]) : "memory");
        }
    } else { /* a group below the fast form (spreads past 11 steps, rare in checkpoints): code by
              * code, in a loop that keeps the producer's registers for the rest */
#pragma unroll 1
        for (int k = 0; k < MM_GEMM_BK; k++) {
            const int g = k / MM_FP4_GROUP, j = k % MM_FP4_GROUP;
            const uint4 cg = c[0];
            uint32_t w = j < 8 ? cg.x : j < 16 ? cg.y : j < 24 ? cg.z : cg.w;
            /* c[g] by a branch-free walk (a runtime index would put c in local memory) */
#pragma unroll
            for (int q = 1; q < MM_FP4_GROUPS; q++)
                if (g == q) w = j < 8 ? c[q].x : j < 16 ? c[q].y : j < 24 ? c[q].z : c[q].w;
            const int d = (g == 0 ? s[0] : g == 1 ? s[1] : g == 2 ? s[2] : s[3]) - ref;
            row[(((k >> 4) ^ (pt & 7)) << 4) + (k & 15)] = mm_fp4_to_fp8((uint8_t)((w >> (4 * (j & 7))) & 15u), d);
        }
    }
    *(float *)(tiny + 4 * pt) = mm_fp4_ref_scale(ref);
    /* no proxy fence here: the math fences after `full` (as for gathered rows); here it was a
     * MEMBAR behind this warp's cp.asyncs of the newer stages, an HBM latency every block */
    __syncwarp();
    if (lane == 0) mm_mbar_arrive(&p->full[xr.stage]);
}

/* The oldest pending stage of this warp, expanded (waiting for its codes) */
__device__ __forceinline__ void mm_fp4_expand_oldest(uint8_t *stages, mm_tile_pipe *p, mm_fp4_pipe *f, mm_fp4_lag &lag)
{
    mm_fp4_expand(stages, p, f, lag.xr);
    mm_ring_advance(lag.xr);
    lag.pending--;
}

/* Expands this warp's pending stages (waiting for their codes) until at most `keep` are left. */
__device__ __forceinline__ void mm_fp4_drain_to(uint8_t *stages, mm_tile_pipe *p, mm_fp4_pipe *f, mm_fp4_lag &lag,
                                                int keep)
{
    while (lag.pending > keep) mm_fp4_expand_oldest(stages, p, f, lag);
}

/* Waits for the barrier `bar`'s phase `parity`, expanding this warp's pending stages as their
 * codes land meanwhile (bounded as mm_mbar_wait: false once it gave up). */
__device__ __forceinline__ bool mm_fp4_wait_expanding(uint8_t *stages, mm_tile_pipe *p, mm_fp4_pipe *f, mm_fp4_lag &lag,
                                                      uint64_t *bar, uint32_t parity, uint32_t what)
{
    const unsigned a = (unsigned)__cvta_generic_to_shared(bar);
    const uint32_t limit = (uint32_t)(MM_STAGE_WAIT_NS >> 10);
    uint32_t start = 0;
    for (uint32_t spin = 0;; spin++) {
        /* a landed block first: expanded now, it overlaps the math of the one before it (with
         * the free stage first, each block's expansion waited for the math's release of the
         * block before it, and both ran in series: FP4 at decode took 2.2x FP8's time) */
        if (lag.pending > 0 &&
            mm_fp4_warp_test((unsigned)__cvta_generic_to_shared(&f->wfull[lag.xr.stage][threadIdx.x / 32]), lag.xr.phase)) {
            mm_fp4_expand_oldest(stages, p, f, lag);
            continue;
        }
        if (mm_fp4_warp_test(a, parity)) return mm_mbar_wait_at(a, parity, MM_STAGE_WAIT_NS, what);
        if ((spin & 255u) == 0 && mm_wait_gives_up(start, limit, what)) return false;
    }
}

/* What a producer loop over one tile with FP4 weights needs, read where it is used (the kernel's
 * parameters from the constant bank, the rest from the item's slot in shared memory) so the
 * producer's 64 registers hold the expansion's: A (a_map NULL: gathered through the row table),
 * its scales, the codes map and the exponents ([rows][K / 32] bytes) of the weight rows from
 * w_row0 on. */
typedef struct {
    const void *a_map, *codes_map;
    const uint8_t *exps;
    int k;
} mm_fp4_source;

/* Producer (all 128 threads): K blocks [0, K / 128) of one tile with FP4 weights into the ring:
 * A as mm_tile_produce loads it (one TMA for more than 64 contiguous rows, else gathered: rows
 * a_off .. a_off + rows - 1 of the table), its scales, and the weight block's codes and
 * exponents, expanded by mm_fp4_expand as they land.
 * Once a wait of the CTA expired, no more loads are issued (mm_tile_produce's give_up). */
__device__ __forceinline__ void mm_tile_produce_fp4(uint8_t *stages, mm_tile_pipe *p, mm_fp4_pipe *f, mm_ring &ring,
                                                    mm_fp4_lag &lag, const mm_fp4_source &src,
                                                    const mm_tile_rows *a, const volatile int *rows_at,
                                                    const volatile int *a_row0_at, int w_row0, int a_off = 0)
{
    const int kblocks = src.k / MM_GEMM_BK;
    for (int kb = 0; kb < kblocks; kb++) {
        const int s = ring.stage;
        const bool expired = *(volatile uint32_t *)&mm_stage_wait_expired;
        const bool freed = mm_fp4_wait_expanding(stages, p, f, lag, &p->empty[s], ring.phase ^ 1u, MM_PIPE_WAIT_STAGE_EMPTY);
        if (expired || !freed) {
            mm_ring_advance(ring);
            continue;
        }
        const int pt = mm_tid(), warp = pt / 32, rows = *rows_at;
        uint8_t *sa = stages + s * MM_TILE_STAGE_BYTES, *sb = sa + MM_TILE_A_STAGE;
        const bool a_tma = mm_tile_a_by_tma(src.a_map, rows);
        const unsigned full = (unsigned)__cvta_generic_to_shared(&p->full[s]);
        const unsigned wfull = (unsigned)__cvta_generic_to_shared(&f->wfull[s][warp]);
        if (pt == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(full),
                         "r"(a_tma ? (unsigned)MM_TILE_A_STAGE : 0u) : "memory");
            if (a_tma)
                asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                             "[%0], [%1, {%2, %3}], [%4];" ::"r"((unsigned)__cvta_generic_to_shared(sa)),
                             "l"(src.a_map), "r"(kb * MM_GEMM_BK), "r"(*a_row0_at), "r"(full)
                             : "memory");
        }
        if (pt % 32 == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(wfull),
                         "r"((unsigned)MM_FP4_WARP_CODE_BYTES) : "memory");
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                         "[%0], [%1, {%2, %3}], [%4];"
                         ::"r"((unsigned)__cvta_generic_to_shared(sb + warp * MM_FP4_WARP_B_BYTES + MM_FP4_WARP_CODE_BYTES)),
                         "l"(src.codes_map), "r"(kb * MM_FP4_CODE_BYTES), "r"(w_row0 + warp * MM_FP4_ROWS_PER_WARP),
                         "r"(wfull)
                         : "memory");
        }
        if (!a_tma) { /* the gather, in whole 8-row groups (rows past `rows` repeat row 0); the
                       * loop ends at the last group (at decode one pass, not eight predicated
                       * ones: their issue slots are the expansion's) */
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
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(wfull) : "memory");
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(full) : "memory");
        mm_ring_advance(ring);
        lag.pending++;
    }
}

#endif
