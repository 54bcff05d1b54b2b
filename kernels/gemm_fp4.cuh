/* FP4 weights in the GEMM core's stage ring (MXFP4, docs/recipe.md "FP4 weights"; kernels/fp4.h):
 * the weight block of a K step streamed as codes and exponents and expanded to FP8 by the math
 * warps, two ways:
 *   - into the stage's FP8 block (below), from there on the FP8 path (its MMAs, its promotion by
 *     a_scale * w_scale, w_scale = 2^(R - 127) of the block's reference exponent R);
 *   - straight into wgmma's A registers, the tile's rows as the MMA's N = 8-128 (the swapped
 *     form, further down).
 * Used by gemm.cu's grouped_gemm_fp4_kernel (single CTAs, 128-row tiles, every tile swapped) and
 * by fused.cu's two FP4 forms: the swapped one (calls of <= 56 rows an expert, passes of <= 64
 * rows) and the FP4 form of the FP8 items (the FP8 block: its dual items read a tile's gathered
 * rows once for gate and up, which the swapped form's one-pass items read twice).
 *
 * Per weight block (128 rows x 128 of K) a stage receives 8 KB of codes and 512 B of exponents
 * (against 16 KB of FP8 and a scale), both in the block's 16 KB B area, at its end:
 *   producer  thread 0: one TMA of the codes (64 B x 128 rows, 64-byte swizzle) to MM_FP4_CODES_AT, its bytes
 *             expected on `full` with A's; every thread: its row's 4 exponents (cp.async, 4 B) to
 *             MM_FP4_EXPS_AT, beside A's gather and scales, all on `full` (one arrival each, as
 *             for FP8); the last thread the block's word (fp4.h mm_fp4_block_word: R and the
 *             fast table's range, made with the experts) where FP8's weight scale goes.
 *   math      once `full` completed, the NT threads that read the block (mm_fp4_expand: 256, one
 *             half row each, or 128, one row each): codes, the row's exponents and the word into
 *             registers; a barrier of the NT (the FP8 rows overwrite codes and exponents, the
 *             scale the word); the FP8 bytes in the 128-byte swizzle the wgmma descriptor names
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

static_assert(MM_FP4_CODES_AT % 512 == 0, "the codes' TMA lands on its 64-byte swizzle's 512-byte period");
static_assert(MM_GEMM_BN == MM_FP4_BLOCK_ROWS, "a tile's weight block is the recipe's block");

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
 * into FP8 in place, and its scale 2^(R - 127) into *w_scale, which holds the block's word on
 * entry (fp4.h mm_fp4_block_word: R and the fast table's range, made with the experts); by NT
 * threads (t = 0 .. NT - 1 in whole warps) meeting at named barrier `bar` of bar_threads (NT, or
 * 256 when each warpgroup expands its own block) */
template <int NT>
__device__ __forceinline__ void mm_fp4_expand(uint8_t *blk, float *w_scale, int t, int bar, int bar_threads = NT)
{
    static_assert(NT == 2 * MM_GEMM_BN || NT == MM_GEMM_BN, "a half row or a row a thread");
    constexpr int PARTS = NT / MM_GEMM_BN, GROUPS = MM_FP4_GROUPS / PARTS; /* groups a thread */
    const int row = t / PARTS, part = t % PARTS;
    /* in[j][q]: word (part * GROUPS + j, q) of the row (fp4.h's storage order: word j of chunk q),
     * chunk q at chunk q ^ ((row >> 1) & 3) (the codes box's 64-byte swizzle); a thread's words
     * of a chunk are adjacent (one load a chunk) */
    const uint8_t *cw = blk + MM_FP4_CODES_AT + row * MM_FP4_CODE_BYTES;
    uint32_t in[GROUPS][4];
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const uint8_t *chunk = cw + ((q ^ ((row >> 1) & 3)) << 4);
        if constexpr (GROUPS == 4) {
            const uint4 c = *(const uint4 *)chunk;
            in[0][q] = c.x, in[1][q] = c.y, in[2][q] = c.z, in[3][q] = c.w;
        } else {
            const uint2 c = *(const uint2 *)(chunk + 8 * part);
            in[0][q] = c.x, in[1][q] = c.y;
        }
    }
    /* the row's 4 exponents, group g in byte g (read by shifts: an index that depends on `part`
     * would put an array in local memory) */
    const uint32_t ex = *(const uint32_t *)(blk + MM_FP4_EXPS_AT + 4 * row);
    const uint32_t word = *(const uint32_t *)w_scale; /* thread 0 writes the scale there after the barrier */
    mm_named_barrier(bar, bar_threads); /* every code, exponent and the word read */
    const int ref = (int)(word & 255u) - MM_FP4_D_MAX;
    const uint32_t mine = ex >> (8 * part * GROUPS); /* this thread's groups from byte 0 on */
    /* chunk c of this row at chunk c ^ (row % 8): the row's address with its swizzle, XORed by the
     * chunk (rows are 128-byte aligned) */
    const unsigned row_sw = (unsigned)__cvta_generic_to_shared(blk + row * MM_GEMM_BK) | (unsigned)((row & 7) << 4);
    if (word & MM_FP4_WORD_FAST) {
#pragma unroll
        for (int j = 0; j < GROUPS; j++) {
            uint32_t t0, t1, out[8];
            mm_fp4_table((int)((mine >> (8 * j)) & 255u) - ref, &t0, &t1);
#pragma unroll
            for (int q = 0; q < 4; q++) mm_fp4_expand_word(in[j][q], t0, t1, &out[q], &out[4 + q]);
            mm_fp4_store_group(row_sw, (unsigned)(part * GROUPS + j), out);
        }
    } else { /* a block with a group below the arithmetic table (spreads past 11 steps, rare in
              * checkpoints): the tables code by code, one group at a time (the same bytes for
              * the groups the arithmetic table covers) */
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
    mm_fp4_expand<MM_CONSUMER_THREADS>(sb, sc + MM_GEMM_BM, mm_math_thread(), MM_BAR_CONSUMER);
}

/* Math (warpgroup g of a compact stage, both at one barrier): weight block g, block 0 in the B
 * area and block 1 in the A area (the rows are in the tiny area), its word, then its scale, at
 * [BM + g]. */
__device__ __forceinline__ void mm_fp4_expand_compact(uint8_t *stages, int s, int g)
{
    uint8_t *stage = stages + s * MM_TILE_STAGE_BYTES;
    float *sc = (float *)(stage + MM_TILE_A_STAGE + MM_TILE_B_STAGE);
    mm_fp4_expand<MM_GEMM_BN>(g ? stage : stage + MM_TILE_A_STAGE, sc + MM_GEMM_BM + g, mm_math_thread() - MM_GEMM_BN * g,
                              MM_BAR_CONSUMER, MM_CONSUMER_THREADS);
}

/* ---- the swapped form: a tile's rows as wgmma's N, the weights as A from registers ----
 *
 * The expansion above puts a chain into every block (codes to registers, a barrier, FP8 rows to
 * shared memory, a proxy fence and a second barrier, then the MMAs), one block at a time. Here
 * the math threads expand straight into wgmma's A registers and the tile's rows are B
 * (m64nNk32, N = 8, 16, 32, 64 or 128 by the rows): no FP8 block in shared memory, no barrier, no
 * fence. Each math warpgroup g takes the block's weight rows 64 g .. 64 g + 63; thread (warp w,
 * lane l) expands rows c = 64 g + 16 w + l / 4 and c + 8, K 4 (l % 4) .. + 3 and 16 + 4 (l % 4)
 * .. + 3 of every k32 step (the 8-bit A register layout, ptx.cuh), 64 weights a block. Block
 * kb + 1 is expanded while block kb's MMAs run (two A fragments), then kb is promoted and its
 * stage freed (its rows are the MMAs' B). The block's reference exponent, and whether every group of it takes the
 * arithmetic table, come with the block as its word (fp4.h mm_fp4_block_word, made with the
 * experts; the producer puts it in the weight scale's place): no warp reduces the block's 512
 * exponents nor checks its rows' range (together ~70 of a math warp's ~265 instructions a block,
 * SASS), none waits for another, and a block takes one path in every warp.
 * Numerics: the same block sums as the FP8 path's (the swapped MMA gives the core's FP32 bits,
 * lab/probes/swap_probe.cu) promoted by the same fmaf(a_scale * w_scale, sum, acc) in K order:
 * the same bits as mm_tile_consume's. The accumulators come out transposed: d[i] is weight row
 * c (+ 8 where bit 1 of i is set) of token row 8 (i / 4) + 2 (l % 4) + (i & 1). */

#define MM_FP4_SWAP_ROWS 64 /* rows a pass of fused's swapped form takes (N <= 64): a larger tile runs in halves */

/* This math thread's first weight row in the swapped form, c = 64 g + 16 w + lane / 4, from the
 * hardware's thread index at each use (a value the compiler would keep live from the item loop's
 * start, where the 128 x 128 form needs every register, and spill). */
__device__ __forceinline__ int mm_fp4_swap_row()
{
    const int t = mm_tid() - MM_PRODUCER_THREADS;
    return 64 * (t / 128) + mm_frag_row((t / 32) % 4, t % 32, 0);
}

/* Accumulator i of a swapped fragment: the wgmma D layout (gemm_schedule.h mm_frag_row /
 * mm_frag_col) with its rows the weight rows (the output's columns) and its columns the tile's
 * rows. Its tile row, and its weight row from the thread's first, c = mm_fp4_swap_row(). */
__device__ __forceinline__ int mm_fp4_swap_acc_row(int lane, int i)
{
    return mm_frag_col(lane, i) + (i & 1);
}

__device__ __forceinline__ int mm_fp4_swap_acc_col(int c, int i)
{
    return c + mm_frag_row(0, 0, i);
}

/* Weight rows c and c + 8 of the block at `blk` into a thread's A registers a[j] (k32 step j),
 * relative to the block's reference `ref`; fast: every group of the block lies in the
 * arithmetic table's range (its word's MM_FP4_WORD_FAST). */
__device__ __forceinline__ void mm_fp4_swap_expand(const uint8_t *blk, int c, int q, int ref, bool fast,
                                                   uint32_t a[4][4])
{
    /* w[h][j]: word (j, q) of row c + 8 h, the four of a row in chunk q (fp4.h's storage order),
     * at chunk q ^ ((row >> 1) & 3) (the codes box's 64-byte swizzle; the same for row c + 8):
     * one 16-byte load a row, a warp's 8 rows x 4 chunks 512 contiguous bytes */
    const uint8_t *row = blk + MM_FP4_CODES_AT + c * MM_FP4_CODE_BYTES + ((q ^ ((c >> 1) & 3)) << 4);
    const uint4 r0 = *(const uint4 *)row, r1 = *(const uint4 *)(row + 8 * MM_FP4_CODE_BYTES);
    const uint32_t w[2][4] = {{r0.x, r0.y, r0.z, r0.w}, {r1.x, r1.y, r1.z, r1.w}};
    const uint32_t ex[2] = {*(const uint32_t *)(blk + MM_FP4_EXPS_AT + 4 * c),
                            *(const uint32_t *)(blk + MM_FP4_EXPS_AT + 4 * (c + 8))};
    if (fast) {
#pragma unroll
        for (int j = 0; j < MM_FP4_GROUPS; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint32_t t0, t1;
                mm_fp4_table((int)((ex[h] >> (8 * j)) & 255u) - ref, &t0, &t1);
                mm_fp4_expand_word(w[h][j], t0, t1, &a[j][h], &a[j][2 + h]);
            }
    } else { /* a block with a group below the arithmetic table (rare): the tables code by code,
              * one group at a time, the words picked by selects (a dynamic index would put them in
              * local memory); the same bytes for the groups the arithmetic table covers */
#pragma unroll 1
        for (int i = 0; i < 2 * MM_FP4_GROUPS; i++) {
            const int j = i >> 1, h = i & 1;
            uint32_t word = w[0][0];
#pragma unroll
            for (int ii = 1; ii < 2 * MM_FP4_GROUPS; ii++) word = i == ii ? w[ii & 1][ii >> 1] : word;
            uint32_t t0, t1, lo, hi;
            mm_fp4_table_any((int)(((h ? ex[1] : ex[0]) >> (8 * j)) & 255u) - ref, &t0, &t1);
            mm_fp4_expand_word(word, t0, t1, &lo, &hi);
#pragma unroll
            for (int ii = 0; ii < 2 * MM_FP4_GROUPS; ii++) {
                a[ii >> 1][ii & 1] = i == ii ? lo : a[ii >> 1][ii & 1];
                a[ii >> 1][2 + (ii & 1)] = i == ii ? hi : a[ii >> 1][2 + (ii & 1)];
            }
        }
    }
}

template <int N, bool ACC>
__device__ __forceinline__ void mm_wgmma_rs(float d[N / 2], const uint32_t a[4], uint64_t b)
{
    static_assert(N == 8 || N == 16 || N == 32 || N == 64 || N == 128, "the swapped form's widths");
    if constexpr (N == 8) mm_wgmma_64x8x32_rs<ACC>(d, a, b);
    else if constexpr (N == 16) mm_wgmma_64x16x32_rs<ACC>(d, a, b);
    else if constexpr (N == 32) mm_wgmma_64x32x32_rs<ACC>(d, a, b);
    else if constexpr (N == 64) mm_wgmma_64x64x32_rs<ACC>(d, a, b);
    else mm_wgmma_64x128x32_rs<ACC>(d, a, b);
}

/* One swapped block: the stage's rows (B, from db0: stage 0's A area) times a's weights into a
 * fresh sum, committed as one group. */
template <int N>
__device__ __forceinline__ void mm_fp4_swap_issue(uint64_t db0, int stage, const uint32_t a[4][4], float blk[N / 2])
{
    const uint64_t db = db0 + (uint64_t)stage * (MM_TILE_STAGE_BYTES >> 4);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    mm_wgmma_rs<N, false>(blk, a[0], db);
#pragma unroll
    for (int ks = 1; ks < MM_GEMM_BK / 32; ks++) mm_wgmma_rs<N, true>(blk, a[ks], db + 2 * ks);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* The next block in the ring for the swapped form: waits for it, expands this thread's weights
 * into a, moves the ring on; returns its stage, and its weight scale 2^(R - 127) in *sw. */
__device__ __forceinline__ int mm_fp4_swap_take(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring, int c, int lane,
                                                uint32_t a[4][4], float *sw)
{
    const int stage = ring.stage;
    mm_mbar_wait(&p->full[stage], ring.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
    const uint8_t *blk = stages + stage * MM_TILE_STAGE_BYTES + MM_TILE_A_STAGE;
    /* the block's word, in the weight scale's place (mm_tile_load_w_scale) */
    const uint32_t word = *(const uint32_t *)(mm_tile_stage_scales(stages, stage) + MM_GEMM_BM);
    const int ref = (int)(word & 255u) - MM_FP4_D_MAX;
    mm_fp4_swap_expand(blk, c, lane % 4, ref, (word & MM_FP4_WORD_FAST) != 0, a);
    *sw = mm_fp4_ref_scale(ref);
    mm_ring_advance(ring);
    return stage;
}

/* A block's promotion factors for this thread's token rows 8 m + 2 (lane % 4) + {0, 1}: the
 * rows' activation scales (the stage's, read while it is held) times the block's weight scale.
 * Rows past the tile's take whatever the stage holds there: their sums are never stored (every
 * epilogue of the swapped form stores or parks rows < rows only, and no reduction crosses rows),
 * and the selects that zeroed them were ~60 of a math warp's ~380 instructions a block at N = 128
 * (Nsight Compute). */
__device__ __forceinline__ float2 mm_fp4_swap_factors(const float *sc, float sw, int lane, int m)
{
    const float2 sa = *(const float2 *)(sc + 8 * m + 2 * (lane % 4));
    return make_float2(sa.x * sw, sa.y * sw);
}

/* Block sum into acc once its MMAs are done: free its stage, promote (the FP8 path's fmaf by
 * a_scale * w_scale, in K order); accumulator i takes factor m = i / 4, row + (i & 1). */
template <int N>
__device__ __forceinline__ void mm_fp4_swap_retire(uint8_t *stages, mm_tile_pipe *p, int stage, float sw, int lane,
                                                   const float blk[N / 2], float acc[N / 2])
{
    const float *sc = mm_tile_stage_scales(stages, stage);
    if constexpr (N == 128) { /* the factors' 32 registers do not fit beside two 64-register sums
                               * and two A fragments: read after the wait, the stage freed after */
        MM_WGMMA_WAIT(0, 1);
#pragma unroll
        for (int m = 0; m < N / 8; m++) {
            const float2 s = mm_fp4_swap_factors(sc, sw, lane, m);
#pragma unroll
            for (int i = 4 * m; i < 4 * m + 4; i++) acc[i] = fmaf(i & 1 ? s.y : s.x, blk[i], acc[i]);
        }
        mm_tile_release(p, stage, false);
    } else { /* the factors read before the wait (the stage is held) */
        float s[N / 4];
#pragma unroll
        for (int m = 0; m < N / 8; m++) {
            const float2 f = mm_fp4_swap_factors(sc, sw, lane, m);
            s[2 * m] = f.x;
            s[2 * m + 1] = f.y;
        }
        MM_WGMMA_WAIT(0, 1);
        mm_tile_release(p, stage, false);
#pragma unroll
        for (int i = 0; i < N / 2; i++) acc[i] = fmaf(s[2 * (i / 4) + (i & 1)], blk[i], acc[i]);
    }
}

/* Producer of a swapped pass over `rows` (<= 128) rows: mm_tile_produce with only the gather's
 * passes of 16 rows those rows need, so a decode tile of <= 16 rows issues one pass a block, not
 * eight of which seven load nothing (~40 of a producer warp's ~110 instructions a block, beside
 * math warps whose issue slots bound the form). The other arguments as mm_tile_produce's. */
__device__ __forceinline__ void mm_fp4_produce_swapped(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring,
                                                       const mm_tile_rows *a, int rows, const mm_tile_a_map &am,
                                                       const mm_tile_b &b, int kb_begin, int kb_end, bool tight,
                                                       bool give_up, int row_off)
{
    if (rows <= 16)
        mm_tile_produce<true, 1>(stages, p, ring, a, rows, am, b, kb_begin, kb_end, 0, 0, false, 0, tight, false, give_up,
                                 row_off);
    else if (rows <= 32)
        mm_tile_produce<true, 2>(stages, p, ring, a, rows, am, b, kb_begin, kb_end, 0, 0, false, 0, tight, false, give_up,
                                 row_off);
    else if (rows <= 64)
        mm_tile_produce<true, 4>(stages, p, ring, a, rows, am, b, kb_begin, kb_end, 0, 0, false, 0, tight, false, give_up,
                                 row_off);
    else
        mm_tile_produce<true>(stages, p, ring, a, rows, am, b, kb_begin, kb_end, 0, 0, false, 0, tight, false, give_up,
                              row_off);
}

/* Math (both warpgroups, single CTAs): acc = this thread's part of the tile's rows (<= N) x the
 * weight block rows' K, transposed as above, from the blocks the producer put in the ring (rows
 * past the tile's hold garbage: mm_fp4_swap_factors). */
template <int N>
__device__ __forceinline__ void mm_fp4_swap_consume(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring, int k, float acc[N / 2])
{
    const int lane = mm_tid() % 32, kblocks = k / MM_GEMM_BK, c = mm_fp4_swap_row();
    const uint64_t db0 = mm_wgmma_desc(stages);
#pragma unroll
    for (int i = 0; i < N / 2; i++) acc[i] = 0.0f;
    uint32_t a0[4][4], a1[4][4];
    float sw0, sw1, blk[N / 2];
    int st0 = mm_fp4_swap_take(stages, p, ring, c, lane, a0, &sw0), st1 = 0;
    mm_fp4_swap_issue<N>(db0, st0, a0, blk);
    /* two blocks a pass, so that each A fragment has a fixed name (the wgmma reads it until its
     * wait): block kb + 1 expanded while block kb's MMAs run */
#pragma unroll 1
    for (int kb = 1;; kb += 2) {
        if (kb >= kblocks) {
            mm_fp4_swap_retire<N>(stages, p, st0, sw0, lane, blk, acc);
            return;
        }
        st1 = mm_fp4_swap_take(stages, p, ring, c, lane, a1, &sw1);
        mm_fp4_swap_retire<N>(stages, p, st0, sw0, lane, blk, acc);
        mm_fp4_swap_issue<N>(db0, st1, a1, blk);
        if (kb + 1 >= kblocks) {
            mm_fp4_swap_retire<N>(stages, p, st1, sw1, lane, blk, acc);
            return;
        }
        st0 = mm_fp4_swap_take(stages, p, ring, c, lane, a0, &sw0);
        mm_fp4_swap_retire<N>(stages, p, st1, sw1, lane, blk, acc);
        mm_fp4_swap_issue<N>(db0, st0, a0, blk);
    }
}

#endif
