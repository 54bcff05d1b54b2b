/* The fused mega-MoE kernel (`--modes fused`): ONE persistent launch per call, from this rank's
 * BF16 tokens to its BF16 output, with no CPU sync and no other launch (docs/fused.md).
 *
 * Grid: every CTA resident at once (mm_fused_prepare gives the bound), 384 threads: warpgroup 0
 * is the producer, warpgroups 1 and 2 the math (gemm_tile.cuh); in phases 1, 2, 4-6 all 384
 * threads work alike. Every CTA goes through the same phases; the hand-offs between them are
 * counters, not grid barriers, so a CTA starts a phase's work as soon as what that work needs is
 * there:
 *   1 dispatch      CTAs stride over tokens in rounds of up to 8, pipelined over two buffers in
 *                   the stage ring and staging area (the next round's BF16 rows come in by bulk
 *                   copies on an `xfull` mbarrier while this one is sent): claim a slot per
 *                   valid k (local atomics per expert, a round ahead), quantize the rows
 *                   (recipe step 2, token_io.cuh's quantizer, as ll does) from shared memory
 *                   into wire rows, then send FP8 row + scales ONCE per destination rank (one
 *                   bulk copy from shared memory) to its
 *                   dispatch_recv[me][t] and a 16-byte meta {src rank, token, k, weight} per
 *                   valid k to dispatch_meta[le][me][slot] (NVLink). Each CTA waits for its bulk
 *                   copies' writes; the last CTA out publishes (epoch << 32) | count to each
 *                   expert's owner with st.release.sys and clears the send counters. A rank
 *                   with at most 32 tokens publishes its counts first instead (from its ids,
 *                   at the start; COUNT_FIRST in the word), takes each pair's slot from its
 *                   rank in (t, k) order, and signals each pair's meta and row with an
 *                   epoch-tagged ready word (dispatch_ready) once they are written.
 *   2 counts        each CTA waits (bounded, acquire) for the El x R counts of this rank's
 *                   experts (and for a counts-first sender, for the ready word of every slot
 *                   it counted) and builds the row-tile schedule in shared memory
 *                   (tile_start; its first warp, a slice of the experts per lane and a warp
 *                   scan).
 *   3 GEMM items    in one global order: all GEMM1 items (row tile of 128, 128-block of I: gate
 *                   and up), then all GEMM2 items (row tile, 128-block of H, or two adjacent
 *                   blocks when the tiles are large).
 *                   Producer warpgroup: claims items from a local atomic (the next one once
 *                   the current one's loads are issued), describes each in a slot of the
 *                   two-slot item ring (row table, row metas,
 *                   rows, tile, dual), and streams its K blocks into the stage ring (TMA for the
 *                   weight blocks; A by TMA for GEMM2, gathered by cp.async for GEMM1; cp.async
 *                   for the scales; full/empty mbarriers), running ahead across passes and items.
 *                   A dual item loads two weight blocks per A block (two stages per K block).
 *                   GEMM1 rows are read in place from dispatch_recv (the row table points at the
 *                   row of each of the tile's metas, sender by sender); a GEMM2 item's rows (act)
 *                   are loaded only after gemm1_done[row tile] == I/128 (bounded acquire wait by
 *                   producer thread 0), or in the hand-off form (decode calls whose GEMM1 items
 *                   fit one wave: mm_fused_handoff_kernel) K block kb once I block kb's bit is
 *                   set (handoff_arm, gemm_tile.cuh mm_handoff_wait).
 *                   Math warpgroups: take the items in the same order. Dual items (mm_fused_dual
 *                   says which): > 64 rows, both halves per warpgroup in two accumulators; <= 64
 *                   rows, split (half g on warpgroup g). Other GEMM1 items run the gate pass then
 *                   the up pass. The GEMM1 epilogue applies SwiGLU with the limit and the row's
 *                   top-k weight and quantizes per 128 (recipe steps 4-5) into act (large tiles
 *                   from the registers, 8-byte stores after a quad transpose; tiles of <= 64 rows
 *                   from gate and up parked row-major, the valid rows spread over all 8 math
 *                   warps), then one thread adds 1 to (hand-off form: ORs its I block's bit
 *                   into) gemm1_done[row tile] with release
 *                   semantics after a CTA barrier. GEMM2 stages the tile as BF16 (one 128 x 128
 *                   out tile at a time behind a barrier) and stores each row straight into its
 *                   token's rank at combine_recv[token][k] (NVLink). The producer ends with an
 *                   END (or ABORT) slot.
 *                   Extra rows (the form FOLD, launched when an expert's expected rows lie near
 *                   128: mm_fused_fold_kernel): in a large call an expert whose rows
 *                   end 1..8 past a full tile folds them into its last tile instead of a tile of
 *                   their own (whose weight stream through the SM would cost nearly a full tile).
 *                   The producer gathers them into each K block's first stage (its tiny area,
 *                   their scales after the weight scales); the math computes them after both
 *                   halves of the dual pass as swapped MMAs (the weight block's rows as the
 *                   64-row side, m64n8k32: the core's bits), accumulating in shared memory after
 *                   the staging area; the epilogues park them (GEMM1: the small tiles' SwiGLU,
 *                   into act's extra rows) or stage them (GEMM2) after the tile's rows.
 *   4 combine flag  the last CTA out of phase 3 publishes the epoch into every rank's
 *                   combine_flags[me] after a system fence.
 *   5 combine       waits (bounded) for every rank's flag, then y = BF16 of the FP32 sum over
 *                   valid k in k order (recipe step 7): staged (combine_staged, calls with
 *                   enough tokens: each warpgroup streams its units' valid rows into a byte ring
 *                   in the span by bulk copies and sums them from there), or flat (every CTA
 *                   with (token, column) items, token_io.cuh mm_combine_flat).
 *   6 exit          the last CTA out clears the counters it owns and stores the epoch, so the
 *                   next call starts clean without a clean-up launch.
 * Buffers (layout.h mm_layout_fused_sym/local): state (epoch, counters, send slots,
 * gemm1_done[]), counts [El][R], combine_flags [R], dispatch_recv [R][T] rows, combine_recv
 * [T][K][H] BF16, dispatch_meta [El][R][T], dispatch_ready [El][R][T] (symmetric); act [El * 8 +
 * row tiles * 128][I] FP8 + scales, expert e's extra rows at 8 e, row tile t at El * 8 + 128 t
 * (local).
 * Why it cannot deadlock: all CTAs are resident; a GEMM2 item only waits for GEMM1 items, and
 * those were claimed before it (claims are in increasing order) by CTAs whose producers had
 * already streamed every block of them before claiming anything later, and whose math waits
 * only on its own producer; counts and flags are written unconditionally by every rank (also
 * with 0 tokens), and a counts-first rank's ready words by the CTAs that hold its tokens, which
 * wait for nothing but their own copies. Inside a CTA the two roles wait only on each other's
 * ring barriers, and the producer never waits across CTAs in the middle of an item. Every cross-CTA wait is bounded and records
 * its phase on expiry; a CTA whose wait fails returns, and the others' waits see the abort flag.
 * The only waits without a clock are the barriers, which every thread of a role reaches on the
 * same path, and setmaxnreg.inc: the producer takes its registers back only after a barrier of
 * all 384 threads that each math warp reaches after its own increase (docs/fused.md).
 * The ring waits inside a CTA are bounded too (10 s; the math's item wait by the timeout + 1 s):
 * the 256 math threads agree on an item wait's outcome before acting on it (a named barrier
 * with an AND), and a CTA in which any ring wait expired records `fused-pipeline` with the wait
 * that did and leaves at the end of phase 3 instead of combining garbage.
 * Reuse across calls: counts, flags and ready words are epoch-tagged; a peer writes our
 * dispatch_recv, dispatch_meta and dispatch_ready for call c+1 only after our combine flag of
 * call c, which we publish after every
 * GEMM item (their only readers) is done; it writes our combine_recv for c+1 only after we sent
 * it our counts of c+1, i.e. after our call c ended.
 * Numerics: the same tile mainloop, recipe functions and k-order sum as ll, so the two modes'
 * outputs are bit-identical. */
#include <cub/warp/warp_scan.cuh>
#ifdef MM_STEPS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#endif
#include <cuda_bf16.h>
#include <stdint.h>

#define MM_TILE_HANDOFF /* gemm_tile.cuh's per-I-block wait, for the hand-off form (handoff_arm) */
#include "comm.cuh"
#include "gemm_fp4.cuh"
#include "gemm_tile.cuh"
#include "layout.h"
#include "api.h"
#include "normal_layout.h"
#include "recipe.h"
#include "token_io.cuh"

static_assert(MM_FUSED_TILE_ROWS == MM_GEMM_BM, "the layout's row tiles are the GEMM core's");
static_assert(MM_FUSED_ACT_EXTRA_ROWS == MM_FUSED_EXTRA_ROWS && MM_FUSED_EXTRA_ROWS == MM_TILE_TINY_ROWS,
              "a tile's extra rows fit the layout's and the stage's tiny area");

/* Small tiles (rows <= 64, decode) park gate and up row-major with a padded row, so all eight
 * math warps can share the SwiGLU of the few valid rows (row stride 132 floats: a quad's float2
 * stores of 8 rows hit different banks). */
#define SMALL_ROWS MM_FUSED_SMALL_ROWS
#define SMALL_STRIDE (MM_GEMM_BN + 4)
/* The staging area is sized for a fifth stage in the ring (33 KB, not 67.6: Pro at EP1 then takes
 * 220 KB of shared memory): a park holds PARK_ROWS rows of one block, gate and up side by side
 * fill it, and so does a non-dual tile's whole gate block; GEMM2 stages one 128 x 128 BF16 out
 * tile at a time (a dual item's two H blocks one after the other), or a split item's 64 x 256. */
#define PARK_ROWS 32
#define PARK_FLOATS (PARK_ROWS * SMALL_STRIDE)
#define STAGING_BYTES (2 * PARK_FLOATS * 4)
static_assert(SMALL_ROWS * SMALL_STRIDE <= 2 * PARK_FLOATS, "a non-dual tile's gate block fits the staging area");
static_assert(MM_GEMM_BM * MM_GEMM_BN * 2 <= STAGING_BYTES, "GEMM2's out tile fits the staging area");
static_assert(SMALL_ROWS * 2 * MM_GEMM_BN * 2 <= STAGING_BYTES, "a split GEMM2 item's tile fits the staging area");
static_assert(MM_FUSED_EXTRA_ROWS <= PARK_ROWS, "a tile's extra rows fit a park");

typedef mm_wire_meta wire_meta;

enum { DONE_DISPATCH, DONE_GEMM2, DONE_EXIT, WORK_CLAIM };

__device__ __forceinline__ uint32_t *gemm1_done(const mm_fused_args &a)
{
    return mm_xchg_send_slots(a.comm, a.x) + a.m.experts;
}

/* Bounded wait until a 32-bit word reaches `target`: a local counter written by other CTAs of
 * this launch (GPU-scope acquire), or a word another rank writes (system scope; `peer` names it
 * on expiry, -1 for none). */
__device__ __forceinline__ bool wait_word(const mm_comm &c, const uint32_t *p, uint32_t target, uint32_t phase,
                                          int peer, bool system)
{
    uint64_t start = mm_globaltimer();
    for (uint32_t spin = 0;; spin++) {
        const uint32_t seen = system ? mm_ld_acquire_sys_u32(p) : mm_ld_acquire_gpu_u32(p);
        if (seen >= target) return true;
        if ((spin & 31u) == 31u) {
            if (mm_aborted(c)) return false;
            if (mm_globaltimer() - start > c.timeout_ns) {
                mm_record_failure(c, phase, peer, target, seen);
                return false;
            }
        }
    }
}

/* MM_STEPS builds: this thread has left the kernel. */
__device__ __forceinline__ void steps_gone(void)
{
    MM_STEP(0xffffu);
}

/* A ring wait of this CTA expired (mm_stage_wait_expired names it): the first failure of the
 * rank wins, as for every bounded wait. */
__device__ __forceinline__ void record_pipeline_failure(const mm_comm &c)
{
    const uint32_t what = *(volatile uint32_t *)&mm_stage_wait_expired;
    mm_record_failure(c, MM_PHASE_FUSED_PIPELINE, -1, what ? what : MM_PIPE_WAIT_ITEM_READY, blockIdx.x);
}

/* --breakdown's stamps per CTA: the phase ends, and in a diagnostic build (-DMM_FUSED_TRACE)
 * the counts hand-off's steps after them; the host sizes its buffer by what was built. */
#ifdef MM_FUSED_TRACE
#define MM_FUSED_STAMPS MM_FUSED_TRACE_STAMPS
#else
#define MM_FUSED_STAMPS MM_FUSED_PHASE_STAMPS
#endif

extern "C" int mm_fused_stamps_per_cta(void)
{
    return MM_FUSED_STAMPS;
}

/* --breakdown: this CTA's time at the end of a phase (or a traced step). */
__device__ __forceinline__ void stamp(const mm_fused_args &a, int i)
{
    /* stamps past MM_FUSED_PHASE_STAMPS exist in MM_FUSED_TRACE builds only */
    if (i < MM_FUSED_STAMPS && a.stamps && threadIdx.x == 0) a.stamps[blockIdx.x * MM_FUSED_STAMPS + i] = mm_globaltimer();
}

/* MM_FUSED_TRACE builds: field f of this CTA's n-th item (api.h); nothing (not even
 * the clock read) in other builds. */
enum { TRACE_ITEM, TRACE_CLAIMED, TRACE_ROWS_READY, TRACE_ISSUED, TRACE_MATH_TOOK, TRACE_EPILOGUE_DONE };
#ifdef MM_FUSED_TRACE
#define TRACE_ITEM_AT(a, n, field, v)                                                                         \
    do {                                                                                                      \
        if ((a).stamps && (n) < MM_FUSED_TRACE_ITEMS)                                                         \
            (a).stamps[blockIdx.x * MM_FUSED_STAMPS + MM_FUSED_COUNT_STAMPS + (n) * MM_FUSED_ITEM_FIELDS + (field)] = (v); \
    } while (0)
#else
#define TRACE_ITEM_AT(a, n, field, v) ((void)0)
#endif

/* --breakdown, from the first math thread (the GEMM1 -> GEMM2 boundary is the math's). */
__device__ __forceinline__ void stamp_math(const mm_fused_args &a, int i)
{
    if (a.stamps && threadIdx.x == MM_PRODUCER_THREADS) a.stamps[blockIdx.x * MM_FUSED_STAMPS + i] = mm_globaltimer();
}

/* Counts first (a sender with few tokens, at most one per CTA): its counts go out at the start
 * of the call, computed from its ids, and each (token, k) signals its meta and row with its own
 * ready word (dispatch_ready: the call's epoch, which only grows) once they are there; the
 * owners wait for those words instead of an election and a publish that follow the last row.
 * A sender with more tokens claims slots by atomics and publishes its counts after the last
 * CTA's election, which orders all its rows before them. A count word's COUNT_FIRST bit says
 * which. */
#define COUNT_FIRST (1ull << 31)

__device__ __forceinline__ bool counts_first(const mm_fused_args &a)
{
    return mm_fused_counts_first(a.io.tokens, (int)gridDim.x);
}

/* owner's ready word for sender s's slot of local expert le */
__device__ __forceinline__ uint32_t *ready_word(const mm_fused_args &a, int owner, int le, int s, int slot)
{
    return (uint32_t *)mm_xchg_at(a.comm, a.x, owner, a.x.off_ready) +
           ((size_t)le * a.comm.peers.ranks + s) * a.m.max_tokens + slot;
}

/* Warp 0 of the last CTA, first thing in a counts-first call: every expert's count of this
 * rank's (token, k) pairs, to its owner (`counts`: shared [E] ints, free until phase 2). Waits
 * for nothing, so the words arrive whatever the other ranks do. */
__device__ void publish_counts_first(const mm_fused_args &a, uint64_t epoch, int *counts)
{
    const int ranks = a.comm.peers.ranks, el = a.m.experts / ranks, lane = threadIdx.x % 32;
    for (int e = lane; e < a.m.experts; e += 32) counts[e] = 0;
    __syncwarp();
    for (int i = lane; i < a.io.tokens * a.m.topk; i += 32) {
        const int e = a.io.ids[i];
        if (e >= 0) atomicAdd(&counts[e], 1);
    }
    __syncwarp();
    for (int e = lane; e < a.m.experts; e += 32) {
        uint64_t *slot = (uint64_t *)mm_xchg_at(a.comm, a.x, e / el, a.x.off_counts) + (size_t)(e % el) * ranks +
                         a.comm.peers.rank;
        mm_st_relaxed_sys(slot, (epoch << 32) | COUNT_FIRST | (uint32_t)counts[e]);
    }
    __syncwarp();
}

/* A warp's U blocks blk, blk + warps, ... of a round: BF16 from the round's x buffer `xs` (rows of
 * x_bytes), FP8 and scales into its wire rows `ws` (rows of row_bytes: hidden FP8 bytes, then the
 * scales), the U chains interleaved (mm_quantize_held128). */
template <int U>
__device__ __forceinline__ void quantize_blocks(const uint8_t *xs, uint8_t *ws, int blk, int warps, int hb,
                                                size_t x_bytes, size_t row_bytes, int hidden, int ue8m0)
{
    const int lane = mm_tid() % 32;
    uint2 raw[U];
    uint32_t q[U];
    float sc[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int g = (blk + u * warps) / hb, i = blk + u * warps - g * hb;
        raw[u] = *(const uint2 *)(xs + (size_t)g * x_bytes + (size_t)i * 256 + lane * 8);
    }
    mm_quantize_held128<U>(raw, ue8m0, q, sc);
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int g = (blk + u * warps) / hb, i = blk + u * warps - g * hb;
        uint8_t *row = ws + (size_t)g * row_bytes;
        *(uint32_t *)(row + (size_t)i * 128 + lane * 4) = q[u];
        if (lane == 0) ((float *)(row + hidden))[i] = sc[u];
    }
}

/* Thread 0: round j's n BF16 rows of this CTA into the x buffer `dst`, one bulk copy each, all
 * completing on `bar` (armed here with their bytes). */
__device__ __forceinline__ void load_round_rows(const mm_fused_args &a, uint8_t *dst, uint64_t *bar, int group, int j,
                                                int n)
{
    const unsigned row = (unsigned)a.m.hidden * 2, b = (unsigned)__cvta_generic_to_shared(bar);
    mm_mbar_expect_tx(b, n * row);
    for (int g = 0; g < n; g++) {
        const int t = mm_fused_round_token((int)blockIdx.x, (int)gridDim.x, group, j, g);
        mm_bulk_load((unsigned)__cvta_generic_to_shared(dst + (size_t)g * row), a.io.x + (size_t)t * a.m.hidden, row, b);
    }
}

/* the round buffers' span from the stage ring on: the ring, its slack and the staging area after
 * it (the ring starts within the slack's first 1 KB, so at least this much) */
#define DISPATCH_SPAN_BYTES (unsigned)(MM_TILE_STAGES * MM_TILE_STAGE_BYTES + STAGING_BYTES)
#define DISPATCH_GROUP 8 /* most tokens a round */
#define MM_BAR_COMBINE 3 /* + warpgroup 0..2: the staged combine's barriers, after phase 3 */
#define QUANT_ILP 4

/* Phase 1: this CTA's tokens, a round of `group` (mm_fused_dispatch_group) at a time, rounds
 * pipelined over two buffers in shared memory: while round j is quantized and sent, round j + 1's
 * BF16 rows are already on their way in (one bulk copy per row, issued by thread 0 on the
 * `xfull` barrier of their buffer), and its expert slots are claimed (the atomics issued a round
 * ahead from ids loaded two rounds ahead, so no warp waits for a claim). Each token's row is
 * quantized from shared memory (recipe step 2, ll's quantizer, a warp per 128-block) into the
 * round's wire buffer, then goes once to each rank that owns one of its experts, by one bulk copy
 * (TMA) from shared memory, to dispatch_recv[me][t] there (up to topk times fewer NVLink bytes
 * than a row per expert), and each valid k's 16-byte meta {me, t, k, weight} to
 * dispatch_meta[le][me][slot] at the expert's owner. A wire buffer is refilled two rounds after
 * its copies were issued: every copy thread commits one bulk group a round (empty or not), so
 * `wait_group.read 1` means "round j - 2's rows were read". Returns false (after the CTA agreed)
 * when a row load never came (its wait expired: mm_stage_wait_expired says so). */
__device__ bool dispatch_tokens(const mm_fused_args &a, uint8_t *span, uint64_t epoch)
{
    const bool first = counts_first(a); /* the same in every CTA */
    const int ranks = a.comm.peers.ranks, el = a.m.experts / ranks, me = a.comm.peers.rank, topk = a.m.topk;
    const int hb = a.m.hidden / 128, warp = mm_tid() / 32, warps = MM_TILE_THREADS / 32;
    const size_t x_bytes = (size_t)a.m.hidden * 2;
    const int group = mm_fused_dispatch_group((unsigned)a.m.hidden, (unsigned)a.x.row_bytes, DISPATCH_SPAN_BYTES,
                                              DISPATCH_GROUP); /* >= 1: mm_fused_prepare checked */
    __shared__ __align__(8) uint64_t xfull[2];
    __shared__ uint32_t owners[2][DISPATCH_GROUP]; /* per buffer and token: the ranks it goes to */
    uint8_t *xbuf = span, *wire = span + 2 * (size_t)group * x_bytes;
    /* the claim threads: one per (token of the round, k) */
    const bool claimer = mm_tid() < group * topk;
    const int cg = claimer ? mm_tid() / topk : 0, ck = claimer ? mm_tid() % topk : 0;
    const bool copier = mm_tid() < group * MM_MAX_PEERS;
    /* the round's tokens: t = blockIdx.x + (j * group + g) * gridDim.x */
#define ROUND_TOKEN(j, g) mm_fused_round_token((int)blockIdx.x, (int)gridDim.x, group, (j), (g))
    int e_cur = -1, e_next = -1, e_later = -1, slot_cur = -1, slot_next = -1;
    float w_cur = 0.0f, w_next = 0.0f, w_later = 0.0f; /* the (token, k)'s top-k weight, loaded with its id */
    if (claimer) {
        const int t0 = ROUND_TOKEN(0, cg), t1 = ROUND_TOKEN(1, cg);
        if (t0 < a.io.tokens) {
            e_cur = a.io.ids[(size_t)t0 * topk + ck];
            w_cur = a.io.topk_w[(size_t)t0 * topk + ck];
        }
        if (t1 < a.io.tokens) {
            e_next = a.io.ids[(size_t)t1 * topk + ck];
            w_next = a.io.topk_w[(size_t)t1 * topk + ck];
        }
        if (e_cur >= 0)
            slot_cur = first ? mm_fused_first_slot(a.io.ids, t0, ck, topk)
                             : (int)atomicAdd(&mm_xchg_send_slots(a.comm, a.x)[e_cur], 1u);
    }
    if (mm_tid() < 2 * DISPATCH_GROUP) owners[mm_tid() / DISPATCH_GROUP][mm_tid() % DISPATCH_GROUP] = 0u;
    if (mm_tid() == 0) {
        mm_mbar_init(&xfull[0], 1);
        mm_mbar_init(&xfull[1], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    /* also publishes the kernel's own barrier inits (the caller's comment) */
    __syncthreads();
    bool good = true;
    /* n: this round's tokens, carried over from the previous round's n_next */
    for (int j = 0, n = mm_fused_round_tokens(a.io.tokens, (int)blockIdx.x, (int)gridDim.x, group, 0), n_next; n > 0;
         j++, n = n_next) {
        const int b = j & 1;
        /* round 0's loads here, every later round's one round early (below) */
        if (mm_tid() == 0 && j == 0)
            load_round_rows(a, xbuf, &xfull[0], group, 0, n);
        /* wire buffer b was last read by round j - 2's copies */
        MM_STEP(0x1001);
        if (copier) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
        if (claimer && e_cur >= 0) atomicOr(&owners[b][cg], 1u << (e_cur / el));
        MM_STEP(0x1002);
        __syncthreads();
        /* round j - 1 is done with xbuf[b ^ 1] (quantized before the last barrier) and with
         * owners[b ^ 1] (read by its copiers): round j + 1 may have them */
        n_next = mm_fused_round_tokens(a.io.tokens, (int)blockIdx.x, (int)gridDim.x, group, j + 1);
        if (mm_tid() == 0 && n_next)
            load_round_rows(a, xbuf + (size_t)(b ^ 1) * group * x_bytes, &xfull[b ^ 1], group, j + 1, n_next);
        if (mm_tid() >= 32 && mm_tid() < 32 + group) owners[b ^ 1][mm_tid() - 32] = 0u;
        if (claimer) {
            /* round j + 1's slots from ids loaded a round ago, round j + 2's ids now: the claim's
             * round trip and the loads' latency hide behind this round's work */
            slot_next = -1;
            if (e_next >= 0)
                slot_next = first ? mm_fused_first_slot(a.io.ids, ROUND_TOKEN(j + 1, cg), ck, topk)
                                  : (int)atomicAdd(&mm_xchg_send_slots(a.comm, a.x)[e_next], 1u);
            const int t2 = ROUND_TOKEN(j + 2, cg);
            e_later = -1;
            w_later = 0.0f;
            if (t2 < a.io.tokens) {
                e_later = a.io.ids[(size_t)t2 * topk + ck];
                w_later = a.io.topk_w[(size_t)t2 * topk + ck];
            }
        }
        /* this round's BF16 rows in, then quantized into its wire rows, a warp per 128-block */
        const bool loaded = mm_mbar_wait(&xfull[b], (uint32_t)(j >> 1) & 1u, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_TOKEN_ROWS);
        if (loaded) {
            const uint8_t *xs = xbuf + (size_t)b * group * x_bytes;
            uint8_t *ws = wire + (size_t)b * group * a.x.row_bytes;
            /* QUANT_ILP blocks a warp at once while it has that many left (their chains
             * interleave), then one at a time: a warp with a few blocks (decode) keeps the short
             * single chains */
            int blk = warp;
            for (; blk + (QUANT_ILP - 1) * warps < n * hb; blk += QUANT_ILP * warps)
                quantize_blocks<QUANT_ILP>(xs, ws, blk, warps, hb, x_bytes, a.x.row_bytes, a.m.hidden, a.m.ue8m0);
            for (; blk < n * hb; blk += warps)
                quantize_blocks<1>(xs, ws, blk, warps, hb, x_bytes, a.x.row_bytes, a.m.hidden, a.m.ue8m0);
        }
        /* the wire rows (generic writes) before the bulk copies (async proxy) read them, and the
         * BF16 rows' reads before the async proxy refills their buffer */
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        MM_STEP(0x1003);
        if (!__syncthreads_and(loaded)) {
            good = false;
            break;
        }
        /* each (token, destination rank) row by one bulk copy from shared memory (TMA; NVLink for
         * a peer): one instruction per row instead of a 16-byte store per thread and piece */
        if (copier) {
            const int copier_g = mm_tid() / MM_MAX_PEERS, copier_d = mm_tid() % MM_MAX_PEERS;
            const int t = ROUND_TOKEN(j, copier_g);
            uint32_t mask = t < a.io.tokens ? owners[b][copier_g] : 0u;
            for (int d = 0; d < copier_d && mask; d++) mask &= mask - 1; /* drop the first copier_d owners */
            if (mask) {
                const int dest = __ffs(mask) - 1;
                const size_t at = ((size_t)me * a.m.max_tokens + t) * a.x.row_bytes;
                asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                             ::"l"(mm_xchg_at(a.comm, a.x, dest, a.x.off_recv) + at),
                             "r"((unsigned)__cvta_generic_to_shared(wire + ((size_t)b * group + copier_g) * a.x.row_bytes)),
                             "r"((unsigned)a.x.row_bytes)
                             : "memory");
            }
            asm volatile("cp.async.bulk.commit_group;" ::: "memory"); /* one group a round, even empty */
        }
        if (claimer && slot_cur >= 0) {
            const int t = ROUND_TOKEN(j, cg), le = e_cur % el;
            const wire_meta m = {me, t, ck, w_cur};
            wire_meta *dst = (wire_meta *)mm_xchg_at(a.comm, a.x, e_cur / el, a.x.off_meta);
            dst[((size_t)le * ranks + me) * a.m.max_tokens + slot_cur] = m;
        }
        e_cur = e_next;
        w_cur = w_next;
        slot_cur = slot_next;
        e_next = e_later;
        w_next = w_later;
    }
#undef ROUND_TOKEN
    /* this thread's bulk copies written (not only read), and ordered before the generic
     * fence and release that publish the counts */
    MM_STEP(0x1004);
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");
    if (!good) return false;
    stamp(a, MM_FUSED_PHASE_STAMPS + 0); /* diagnostic builds only (MM_FUSED_TRACE) */
    if (first) {
        /* every thread's rows written before any ready word (a release after a CTA barrier
         * covers the CTA's earlier writes); one token per CTA, so round 0's token 0 is it */
        __syncthreads();
        const int t = blockIdx.x;
        const int k = mm_tid();
        if (t < a.io.tokens && k < topk) {
            const int e = a.io.ids[(size_t)t * topk + k];
            if (e >= 0)
                mm_st_release_sys_u32(ready_word(a, e / el, e % el, me, mm_fused_first_slot(a.io.ids, t, k, topk)),
                                      (uint32_t)epoch);
        }
        return true; /* the counts went out at the start: no election, no publish */
    }
    MM_STEP(0x1005);
    const bool last = mm_last_cta(&mm_xchg_counters(a.comm, a.x)[DONE_DISPATCH]);
    stamp(a, MM_FUSED_PHASE_STAMPS + 1);
    if (last) {
        uint64_t epoch = *mm_xchg_epoch(a.comm, a.x) + 1;
        for (int e = mm_tid(); e < a.m.experts; e += blockDim.x) {
            uint32_t n = mm_ld_volatile_u32(&mm_xchg_send_slots(a.comm, a.x)[e]);
            uint64_t *slot_p = (uint64_t *)mm_xchg_at(a.comm, a.x, e / el, a.x.off_counts) + (size_t)(e % el) * a.comm.peers.ranks + me;
            mm_st_release_sys(slot_p, (epoch << 32) | n);
            mm_xchg_send_slots(a.comm, a.x)[e] = 0;
        }
        if (mm_tid() == 0) mm_xchg_counters(a.comm, a.x)[DONE_DISPATCH] = 0;
        stamp(a, MM_FUSED_PHASE_STAMPS + 2);
    }
    return true;
}

/* A GEMM item as the producer hands it to the math warpgroups (one slot of the item ring). */
typedef struct {
    mm_tile_rows tab;            /* where the A rows are (producer only) */
    wire_meta meta[MM_GEMM_BM + MM_FUSED_EXTRA_ROWS]; /* each row's {src rank, token, k, weight}, then the extra rows' */
    int item;                    /* ITEM_END / ITEM_ABORT, or the item */
    int rows, tile, block, is_gemm1;
    int dual;                    /* two weight blocks over one pass of A (mm_fused_dual) */
    int compact;                 /* dual, both blocks in one stage (a tiny tile: mm_fused_compact) */
    int extra;                   /* the expert's extra rows folded into this tile (mm_fused_extra_rows) */
    size_t act_row0, extra_row0; /* act's rows of the tile, and of its extra rows */
} fused_item;

enum { ITEM_END = -1, ITEM_ABORT = -2 };

/* The schedule both roles read: counts, row tiles, item split. */
typedef struct {
    const int *cnt, *tile_start;
    int tiles, ib_count, hb_count, gemm1_items, items;
    int large;            /* the tiles average more than MM_FUSED_DUAL_MIN_AVG_ROWS rows: every item dual */
    int tiny;             /* decode: no expert has more than MM_FUSED_TINY_ROWS rows, and pairs save rounds */
    int h_width, h_items; /* 128-blocks of H per GEMM2 item (2 when large or tiny), GEMM2 items per row tile */
} fused_schedule;

/* Producer side of one item (all 128 threads of warpgroup 0): the row table and each row's meta.
 * Logical row r of expert le is the (r - prefix)-th meta that source rank s sent, s the first with
 * prefix + cnt[s] > r; the meta names the token, whose row GEMM1 reads in place at
 * dispatch_recv[s][token]; GEMM2 reads act. The meta comes back in a register. */
template <bool FOLD, bool FP4, bool SWAP>
__device__ __forceinline__ void describe_item(const mm_fused_args &a, const fused_schedule &sc, int item,
                                              fused_item *it, mm_tile_a_map *am, mm_tile_b *b, int *k, int4 *meta)
{
    /* the folding form's producer keeps more: threadIdx.x read again where used (mm_tid) */
    const int ranks = a.comm.peers.ranks, el = a.m.experts / ranks, pt = FOLD ? mm_tid() : (int)threadIdx.x;
    const bool is_gemm1 = item < sc.gemm1_items;
    const int tile = is_gemm1 ? item / sc.ib_count : mm_fused_gemm2_tile(item - sc.gemm1_items, sc.h_items);
    const int block = is_gemm1 ? item % sc.ib_count : mm_fused_gemm2_block(item - sc.gemm1_items, sc.h_items, sc.h_width);
    mm_tile t = mm_tile_locate(sc.tile_start, el, 1, tile);
    const int le = t.expert;
    int expert_rows = 0;
    for (int q = 0; q < ranks; q++) expert_rows += sc.cnt[le * ranks + q];
    const int left = expert_rows - t.row_tile * MM_GEMM_BM;
    const int rows = left < MM_GEMM_BM ? left : MM_GEMM_BM;
    /* a folded expert's last tile holds 128 rows and its 1..8 extra rows (mm_fused_extra_rows) */
    const int extra = FOLD && mm_fused_folds(sc.large, sc.hb_count) && left > MM_GEMM_BM &&
                              left <= MM_GEMM_BM + MM_FUSED_EXTRA_ROWS
                          ? left - MM_GEMM_BM : 0;
    /* act is compact: row tile `tile` (flat over the experts) after the experts' extra rows */
    const size_t act_row0 = mm_fused_act_tile_row(el, tile);

    int r;
    const int s = mm_sender_row(sc.cnt + le * ranks, ranks, t.row_tile * MM_GEMM_BM + (pt < rows ? pt : 0), &r);
    const wire_meta *metas = (const wire_meta *)mm_xchg_at(a.comm, a.x, a.comm.peers.rank, a.x.off_meta);
    /* written by other ranks and CTAs: read at L2, after the counts' acquire */
    *meta = __ldcg((const int4 *)(metas + ((size_t)le * ranks + s) * a.m.max_tokens + r));
    if (is_gemm1) {
        const uint8_t *row = (const uint8_t *)mm_xchg_at(a.comm, a.x, a.comm.peers.rank, a.x.off_recv) +
                             ((size_t)s * a.m.max_tokens + meta->y) * a.x.row_bytes;
        *am = mm_tile_a_map{NULL, 0, 0}; /* gathered: a token's row serves all its experts here */
        it->tab.row[pt] = row;
        it->tab.scale[pt] = (const float *)(row + a.m.hidden);
        b->map = a.w.w1_map;
        b->row0 = le * 2 * a.m.inter + block * 128; /* the gate rows; up is a.m.inter further */
        b->scale = a.w.s1 + ((size_t)le * 2 * sc.ib_count + block) * (a.m.hidden / 128); /* FP4: the words */
        b->exps = FP4 ? a.w.e1 : NULL; /* FP4: the codes' rows' exponents (gemm_tile.cuh mm_tile_b) */
        b->exp_row_bytes = a.m.hidden / 32;
        *k = a.m.hidden;
    } else {
        *am = mm_tile_a_map{a.act_map, (int)act_row0, 0};
        size_t ar = act_row0 + (pt < rows ? pt : 0);
        it->tab.row[pt] = a.act + ar * a.m.inter;
        it->tab.scale[pt] = a.act_scales + ar * sc.ib_count;
        b->map = a.w.w2_map;
        b->row0 = le * a.m.hidden + block * 128;
        b->scale = a.w.s2 + ((size_t)le * sc.hb_count + block) * sc.ib_count;
        b->exps = FP4 ? a.w.e2 : NULL;
        b->exp_row_bytes = a.m.inter / 32;
        *k = a.m.inter;
    }
    if (FOLD && pt < extra) { /* the extra rows: their metas now (rare: a folded tile), their rows' places */
        int rx;
        const int sx = mm_sender_row(sc.cnt + le * ranks, ranks, t.row_tile * MM_GEMM_BM + MM_GEMM_BM + pt, &rx);
        const int4 mx = __ldcg((const int4 *)(metas + ((size_t)le * ranks + sx) * a.m.max_tokens + rx));
        it->meta[MM_GEMM_BM + pt] = *(const wire_meta *)&mx;
        if (is_gemm1) {
            const uint8_t *row = (const uint8_t *)mm_xchg_at(a.comm, a.x, a.comm.peers.rank, a.x.off_recv) +
                                 ((size_t)sx * a.m.max_tokens + mx.y) * a.x.row_bytes;
            it->tab.row[MM_GEMM_BM + pt] = row;
            it->tab.scale[MM_GEMM_BM + pt] = (const float *)(row + a.m.hidden);
        } else {
            const size_t ar = mm_fused_act_extra_row(le, pt);
            it->tab.row[MM_GEMM_BM + pt] = a.act + ar * a.m.inter;
            it->tab.scale[MM_GEMM_BM + pt] = a.act_scales + ar * sc.ib_count;
        }
    }
    if (pt == 0) {
        it->extra = extra;
        it->extra_row0 = mm_fused_act_extra_row(le, 0);
        it->item = item;
        it->rows = rows;
        it->tile = tile;
        it->block = block;
        it->is_gemm1 = is_gemm1;
        /* the swapped form: every item one-pass, 64 rows at a time (consume_items), GEMM2 one H
         * block an item */
        it->dual = !SWAP && mm_fused_dual(is_gemm1, rows, sc.large, sc.h_width);
        it->compact = !SWAP && mm_fused_compact(is_gemm1, rows, sc.h_width);
        it->act_row0 = act_row0;
    }
}

/* The stage ring's depth per form, a compile-time constant (gemm_tile.cuh MM_RING_START). The
 * hand-off form runs three of the five stages: its calls' GEMM1 items fit one wave (Flash at 1
 * token: 96 compact items on 132 CTAs, one a CTA, then GEMM2 on every CTA), and each phase ends
 * with its last CTA; with fewer weight bytes in flight per SM the last one ends sooner (Flash 1
 * token, one GPU: 5 -> 4 stages -1.4 us, 4 -> 3 -1.6 us, the GEMM2 phase -2 us; V3 within 0.6 us).
 * At 4096 tokens the fifth stage gains 8-10%. */
#define MM_FUSED_HANDOFF_STAGES 3
static_assert(MM_FUSED_HANDOFF_STAGES >= 2 && MM_FUSED_HANDOFF_STAGES <= MM_TILE_STAGES, "a depth the ring has");
#define FUSED_RING_DEPTH(handoff) ((handoff) ? MM_FUSED_HANDOFF_STAGES : MM_TILE_STAGES)

/* The next item in the one global order (all GEMM1 items, then all GEMM2 items), or past the
 * end when the call is aborting. */
__device__ __forceinline__ int claim_item(const mm_fused_args &a, const fused_schedule &sc)
{
    return mm_aborted(a.comm) ? sc.items : (int)atomicAdd(&mm_xchg_counters(a.comm, a.x)[WORK_CLAIM], 1u);
}

/* The same test build (-DMM_FUSED_INJECT_LATE_MATH_US=2000) holds the first warp of each math
 * warpgroup that long before its register increase, so a CTA's producer with no item reaches
 * the end of phase 3 first: the registers must still go back only after the barrier there. */
__device__ __forceinline__ void inject_late_math(void)
{
#ifdef MM_FUSED_INJECT_LATE_MATH_US
    if (threadIdx.x % 128 < 32) mm_sleep_ns(MM_FUSED_INJECT_LATE_MATH_US * 1000ull, 10000);
#endif
}

/* gemm1_done[tile] in the hand-off form: a bit per I block, set by each GEMM1 item of the tile
 * (mm_fused_handoff_kernel picks the form only when I / 128 <= 32); its value once they are all
 * done. The other forms count the items (gemm1_item_done). */
__device__ __forceinline__ uint32_t gemm1_tile_bits(const fused_schedule &sc)
{
    return sc.ib_count == 32 ? 0xffffffffu : (1u << sc.ib_count) - 1u;
}

/* The hand-off form (HANDOFF; mm_fused_handoff_kernel picks it per call: decode calls whose GEMM1
 * items are expected to fit one wave of CTAs, Flash and V3 at 1 token): a GEMM2 item whose row tile is
 * not complete when it is claimed loads K block kb of its rows as soon as I block kb of the tile
 * is done, the K order unchanged (so the same bits), instead of waiting for all of them
 * (gemm_tile.cuh mm_handoff_wait): the CTAs with no GEMM1 item start GEMM2 on the first I blocks
 * done. Not with a second wave of GEMM1 items: there the early GEMM2 items' weights take HBM from
 * the stragglers on the critical path (Pro at 1 token +1 us, 4096 tokens +1%). Producer thread 0, once the item is known to every producer thread
 * (the barrier before describe_item; the word is read after the one after it): arms the wait for
 * a GEMM2 item whose tile is incomplete, else disarms it. */
__device__ __forceinline__ void handoff_arm(const mm_fused_args &a, const fused_schedule &sc, int item)
{
    const uint32_t *word = NULL;
    if (item >= sc.gemm1_items) {
        const uint32_t *w = &gemm1_done(a)[mm_fused_gemm2_tile(item - sc.gemm1_items, sc.h_items)];
        if (mm_ld_acquire_gpu_u32(w) != gemm1_tile_bits(sc)) word = w;
        asm volatile("fence.proxy.async.global;" ::: "memory");
    }
    *(const uint32_t *volatile *)&mm_handoff_word_s = word;
}

/* Warpgroup 0: claims items in increasing order, describes each in the item ring and streams its
 * K blocks (GEMM1: the gate pass then the up pass; GEMM2: one pass) into the stage ring, running
 * ahead of the math across passes and items. A GEMM2 item's rows are loaded only once its row
 * tile's GEMM1 items are all done (gemm1_done). Ends with an ITEM_END (or ITEM_ABORT) slot.
 * FP4: the codes and exponents of each weight block (gemm_fp4.cuh; the math expands them). */
template <bool FOLD, bool HANDOFF, bool FP4, bool SWAP>
__device__ void produce_items(const mm_fused_args &a, const fused_schedule &sc, uint8_t *stages,
                              mm_tile_pipe *pipe, mm_item_ring *ring_items, fused_item *slots, int *claim_s)
{
    mm_ring ring = MM_RING_START(FUSED_RING_DEPTH(HANDOFF));
    /* thread 0 claims the next item once the current one's loads are all issued (below): the
     * ring's stages still hold several K blocks of math, which hide the atomic's round trip, and
     * a CTA takes an item only when it is about to be free. (Claiming one item ahead at the top
     * bound every item to a CTA at the start of a decode call: CTAs ran two GEMM2 items one
     * after the other while others, their GEMM1 item done, had nothing left.) */
    int next = 0;
    if (threadIdx.x == 0) next = claim_item(a, sc);
    for (uint32_t n = 0;; n++) {
        fused_item *it = &slots[n & 1];
        mm_item_wait_free(ring_items, n);
        if (threadIdx.x == 0) {
            int item = next;
            TRACE_ITEM_AT(a, n, TRACE_CLAIMED, mm_globaltimer());
            TRACE_ITEM_AT(a, n, TRACE_ITEM, (unsigned long long)(unsigned)item);
            if (!HANDOFF && item >= sc.gemm1_items && item < sc.items) { /* the hand-off form: handoff_arm */
                int tile = mm_fused_gemm2_tile(item - sc.gemm1_items, sc.h_items);
                if (!wait_word(a.comm, &gemm1_done(a)[tile], (uint32_t)sc.ib_count, MM_PHASE_FUSED_GEMM1, -1, false))
                    item = ITEM_ABORT;
                /* this thread issues the item's A TMA: order it after the act stores it waited for */
                asm volatile("fence.proxy.async.global;" ::: "memory");
            }
            TRACE_ITEM_AT(a, n, TRACE_ROWS_READY, mm_globaltimer());
            *claim_s = item;
        }
        mm_named_barrier(MM_BAR_PRODUCER, MM_PRODUCER_THREADS);
        const int item = *claim_s;
        if (item >= sc.items || item == ITEM_ABORT) {
            if (threadIdx.x == 0) it->item = item == ITEM_ABORT ? ITEM_ABORT : ITEM_END;
            mm_item_publish(ring_items, n);
            return;
        }
        if (HANDOFF && threadIdx.x == 0) handoff_arm(a, sc, item);
        mm_tile_a_map am;
        mm_tile_b b;
        int k;
        int4 meta;
        describe_item<FOLD, FP4, SWAP>(a, sc, item, it, &am, &b, &k, &meta);
        mm_named_barrier(MM_BAR_PRODUCER, MM_PRODUCER_THREADS); /* the table, for every loader; claim_s read */
        const int rows = it->rows, kblocks = k / MM_GEMM_BK;
        const bool is_gemm1 = item < sc.gemm1_items;
        if (!SWAP && it->dual) {
            /* two weight blocks over one pass of A (two stages per K block, or one for a compact
             * tiny tile): a GEMM1 tile's gate and up rows, or a GEMM2 item's two adjacent H blocks */
            const int b1_rows = is_gemm1 ? a.m.inter : MM_GEMM_BN, b1_scales = is_gemm1 ? sc.ib_count * sc.hb_count : sc.ib_count;
            const bool compact = it->compact;
            const int extra = FOLD ? it->extra : 0;
            mm_tile_produce_dual<FP4>(stages, pipe, ring, &it->tab, rows, am, b, b1_rows, b1_scales, 0, 1, compact, extra,
                                      FOLD, HANDOFF);
            it->meta[threadIdx.x] = *(const wire_meta *)&meta;
            mm_item_publish(ring_items, n);
            mm_inject_stall(item);
            mm_tile_produce_dual<FP4>(stages, pipe, ring, &it->tab, rows, am, b, b1_rows, b1_scales, 1, kblocks, compact,
                                      extra, FOLD, HANDOFF);
        } else if (SWAP) {
            /* the swapped form (gemm_fp4.cuh): per 64-row half of the tile, GEMM1's gate pass then
             * its up pass, GEMM2's one pass; the first block goes out before the item is published */
            for (int h = 0; h < rows; h += MM_FP4_SWAP_ROWS) {
                const int hr = min(rows - h, MM_FP4_SWAP_ROWS);
                mm_tile_b pass = b;
                for (int up = 0; up <= (is_gemm1 ? 1 : 0); up++) {
                    const int kb0 = h == 0 && up == 0 ? 1 : 0;
                    if (kb0) {
                        mm_fp4_produce_swapped(stages, pipe, ring, &it->tab, hr, am, pass, 0, 1, true, false, h);
                        it->meta[threadIdx.x] = *(const wire_meta *)&meta;
                        mm_item_publish(ring_items, n);
                        mm_inject_stall(item);
                    }
                    mm_fp4_produce_swapped(stages, pipe, ring, &it->tab, hr, am, pass, kb0, kblocks, true, false, h);
                    pass.row0 += a.m.inter; /* the up rows, and their blocks' words */
                    pass.scale += (size_t)sc.ib_count * sc.hb_count;
                }
            }
        } else {
            /* the first block goes out before the item is published (a GEMM2 item's loads do not
             * wait for the meta; the math is still busy with the previous item) */
            mm_tile_produce<FP4>(stages, pipe, ring, &it->tab, rows, am, b, 0, 1, 0, 0, false, 0, FOLD, HANDOFF);
            it->meta[threadIdx.x] = *(const wire_meta *)&meta;
            mm_item_publish(ring_items, n);
            mm_inject_stall(item);
            mm_tile_produce<FP4>(stages, pipe, ring, &it->tab, rows, am, b, 1, kblocks, 0, 0, false, 0, FOLD, HANDOFF);
            if (is_gemm1) { /* a small tile's up pass, over A again (A is a few rows; B is the bulk) */
                b.row0 += a.m.inter;
                b.scale += (size_t)sc.ib_count * sc.hb_count;
                mm_tile_produce<FP4>(stages, pipe, ring, &it->tab, rows, am, b, 0, kblocks, 0, 0, false, 0, FOLD);
            }
        }
        if (threadIdx.x == 0) {
            TRACE_ITEM_AT(a, n, TRACE_ISSUED, mm_globaltimer());
            next = claim_item(a, sc);
        }
    }
}

/* Stores one row's 128 FP8 values from a quad, whose lane q holds bytes 2q, 2q + 1 of each 8-byte
 * chunk j (p[j], the wgmma fragment's column pairs): a 4 x 4 transpose of 2-byte pieces across
 * the quad in two exchanges leaves lane q with whole chunks q, q + 4, q + 8, q + 12, stored as 8
 * bytes each, so a warp's store writes 32 contiguous bytes of each of its 8 rows (not 8 bytes of
 * each in a 2-byte store per column pair). `valid` is the same on the quad's 4 lanes. */
__device__ __forceinline__ void store_row_fp8(uint8_t *row, const uint32_t p[16], bool valid)
{
    const int q = threadIdx.x % 4;
    const bool odd2 = (q & 2) != 0, odd1 = (q & 1) != 0;
#pragma unroll
    for (int m = 0; m < 4; m++) {
        const uint32_t w0 = p[4 * m] | p[4 * m + 1] << 16, w1 = p[4 * m + 2] | p[4 * m + 3] << 16;
        /* lanes q and q ^ 2: the lower keeps chunks 4m, 4m + 1 of both, the upper 4m + 2, 4m + 3 */
        const uint32_t got = __shfl_xor_sync(0xffffffffu, odd2 ? w0 : w1, 2);
        const uint32_t lo = odd2 ? got : w0, hi = odd2 ? w1 : got; /* pieces of lanes q & 1 and (q & 1) + 2 */
        /* lanes q and q ^ 1: the even one keeps its chunk's pieces, the odd one the other chunk's */
        const uint32_t got1 = __shfl_xor_sync(0xffffffffu, odd1 ? __byte_perm(lo, hi, 0x5410) : __byte_perm(lo, hi, 0x7632), 1);
        uint2 chunk;
        chunk.x = odd1 ? __byte_perm(got1, lo, 0x7610) : __byte_perm(lo, got1, 0x5410);
        chunk.y = odd1 ? __byte_perm(got1, hi, 0x7632) : __byte_perm(hi, got1, 0x7610);
        if (valid) *(uint2 *)(row + 8 * (4 * m + q)) = chunk;
    }
}

__device__ __forceinline__ void swiglu_quant_rows(const mm_fused_args &a, const fused_schedule &sc, int block,
                                                  const float *gate, const float *up, int rows,
                                                  const wire_meta *meta, size_t act_row0);

/* The math threads' extra-row accumulators (gemm_tile.cuh MM_XACC_BYTES) follow the staging area:
 * derived from it where used, so no pointer of its own stays live through the mainloops. */
__device__ __forceinline__ float *extra_accumulators(float *staging)
{
    return (float *)((uint8_t *)staging + STAGING_BYTES);
}

/* The launch's form is the hand-off one (the kernel's HANDOFF, stored at its start): read by
 * gemm1_item_done, which the epilogues of every form share. */
static __shared__ int fused_handoff_s;

/* The end of every GEMM1 epilogue: a barrier of the 256 math threads (their act stores are done,
 * and the park is free again), then one thread makes the stores visible to GEMM2's TMA (the async
 * proxy reads these generic-proxy stores) and releases gemm1_done[tile]. */
__device__ __forceinline__ void gemm1_item_done(const mm_fused_args &a, const fused_item *it)
{
    mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS);
    if (mm_math_thread() == 0) {
        asm volatile("fence.proxy.async.global;" ::: "memory");
        if (*(volatile int *)&fused_handoff_s) /* a bit per I block (gemm1_tile_bits) */
            asm volatile("red.release.gpu.global.or.b32 [%0], %1;" ::"l"(&gemm1_done(a)[it->tile]), "r"(1u << it->block)
                         : "memory");
        else
            mm_red_add_release_gpu(&gemm1_done(a)[it->tile], 1u);
    }
}

/* GEMM1 epilogue of a large tile (math threads, from the registers of the dual pass): h =
 * swiglu(gate, up) * w per row, quantized per 128 (recipe steps 4-5) into act. `silu` is this
 * thread's gate block, already turned into mm_swiglu_gate; `acc` the up block. */
__device__ __forceinline__ void gemm1_epilogue(const mm_fused_args &a, const fused_schedule &sc, const fused_item *it,
                                               const float silu[MM_TILE_ACC], float acc[MM_TILE_ACC], float *staging,
                                               int extra, const float *xacc)
{
    const int rows = it->rows, block = it->block;
    const size_t act_row0 = it->act_row0;
    float amax[2] = {0.0f, 0.0f};
    const int r_lo = mm_acc_row(0), r_hi = mm_acc_row(2);
    const bool ok_lo = r_lo < rows, ok_hi = r_hi < rows;
    const float w_lo = ok_lo ? it->meta[r_lo].weight : 0.0f, w_hi = ok_hi ? it->meta[r_hi].weight : 0.0f;
    /* the rest of SwiGLU only on valid rows */
    if (ok_lo || ok_hi) {
#pragma unroll
        for (int i = 0; i < MM_TILE_ACC; i++) {
            int hi = (i >> 1) & 1;
            if (!(hi ? ok_hi : ok_lo)) continue;
            float hv = mm_swiglu_apply(silu[i], acc[i], hi ? w_hi : w_lo, a.m.has_limit, a.m.limit);
            acc[i] = hv;
            amax[hi] = fmaxf(amax[hi], mm_fabs(hv));
        }
    }
    /* a quad holds all 128 columns of its two rows: the row amax is 2 shuffles away */
    float scale[2];
#pragma unroll
    for (int hi = 0; hi < 2; hi++) {
        amax[hi] = fmaxf(amax[hi], __shfl_xor_sync(0xffffffffu, amax[hi], 1));
        amax[hi] = fmaxf(amax[hi], __shfl_xor_sync(0xffffffffu, amax[hi], 2));
        scale[hi] = mm_block_scale(amax[hi], a.m.ue8m0);
    }
    uint32_t pairs[2][16]; /* [row][chunk j]: this thread's 2 bytes of 8-byte chunk j */
    /* mm_quantize's multiply-or-divide decided once for both rows, not per element (as
     * mm_quantize4 does for a block's 4 values): the same bytes; UE8M0 scales always multiply */
    const float inv[2] = {mm_scale_inverse(scale[0]), mm_scale_inverse(scale[1])};
    if (inv[0] != 0.0f && inv[1] != 0.0f) {
#pragma unroll
        for (int i = 0; i < MM_TILE_ACC; i += 2) {
            const int hi = (i >> 1) & 1;
            pairs[hi][i >> 2] = (uint32_t)mm_fp8_encode(MM_MUL(acc[i], inv[hi])) |
                                (uint32_t)mm_fp8_encode(MM_MUL(acc[i + 1], inv[hi])) << 8;
        }
    } else {
#pragma unroll
        for (int i = 0; i < MM_TILE_ACC; i += 2) {
            const int hi = (i >> 1) & 1;
            pairs[hi][i >> 2] = (uint32_t)mm_quantize(acc[i], scale[hi]) | (uint32_t)mm_quantize(acc[i + 1], scale[hi]) << 8;
        }
    }
    store_row_fp8(a.act + (act_row0 + r_lo) * a.m.inter + block * 128, pairs[0], ok_lo);
    store_row_fp8(a.act + (act_row0 + r_hi) * a.m.inter + block * 128, pairs[1], ok_hi);
    if (threadIdx.x % 4 == 0) {
        if (ok_lo) a.act_scales[(act_row0 + r_lo) * sc.ib_count + block] = scale[0];
        if (ok_hi) a.act_scales[(act_row0 + r_hi) * sc.ib_count + block] = scale[1];
    }
    if (extra > 0) { /* the extra rows' gate and up (swapped fragments) parked row-major */
        const int g = mm_warpgroup() - 1, w = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int col = 64 * g + mm_frag_row(w, lane, i), r = mm_frag_col(lane, i) + (i & 1);
            if (r < extra) {
                staging[r * SMALL_STRIDE + col] = xacc[i * MM_CONSUMER_THREADS + mm_math_thread()];
                staging[PARK_FLOATS + r * SMALL_STRIDE + col] = xacc[(4 + i) * MM_CONSUMER_THREADS + mm_math_thread()];
            }
        }
        mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS);
        swiglu_quant_rows(a, sc, block, staging, staging + PARK_FLOATS, extra, it->meta + MM_GEMM_BM,
                          it->extra_row0);
    }
    gemm1_item_done(a, it); /* also frees the extra rows' park */
}

/* Parks this thread's rows r0 .. r0 + rows - 1 of a small tile's block row-major at `park` (row
 * r0 first); row_off: 0 when only math warpgroup 0 holds the tile's rows (a pass), 64 g when
 * warpgroup g computed half g of rows 0..63 (a split dual pass). */
__device__ __forceinline__ void park_small(float *park, const float acc[MM_TILE_ACC], int r0, int rows, int row_off)
{
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i += 2) {
        const int r = mm_acc_row(i) - row_off - r0;
        if ((unsigned)r < (unsigned)rows)
            *(float2 *)(park + r * SMALL_STRIDE + mm_acc_col(i)) = make_float2(acc[i], acc[i + 1]);
    }
}

/* One row's h (lane's 4 channels) into act: the row's amax over the warp, its scale, 4 FP8
 * bytes a lane (recipe step 5). */
__device__ __forceinline__ void quant_store_row(const mm_fused_args &a, const fused_schedule &sc, int block,
                                                const float h[4], size_t row, int lane)
{
    const float amax = mm_warp_amax(fmaxf(fmaxf(mm_fabs(h[0]), mm_fabs(h[1])), fmaxf(mm_fabs(h[2]), mm_fabs(h[3]))));
    const float scale = mm_block_scale(amax, a.m.ue8m0);
    *(uint32_t *)(a.act + row * a.m.inter + block * 128 + 4 * lane) = mm_quantize4(h, scale);
    if (lane == 0) a.act_scales[row * sc.ib_count + block] = scale;
}

/* The rows of a parked gate and up (row-major, SMALL_STRIDE): warp w takes rows w, w + 8, ...:
 * each lane 4 channels of SwiGLU, the row's amax over the warp, the scale, 4 FP8 bytes (a row's
 * 128 bytes in one coalesced store); meta[r] is row r's, act row act_row0 + r its output (block
 * `block` of I). Same functions per element as the per-thread epilogue, so the bits are the
 * same; the exp and division of the few valid rows are spread over all 256 math threads instead
 * of the 2-8 that hold them. */
__device__ __forceinline__ void swiglu_quant_rows(const mm_fused_args &a, const fused_schedule &sc, int block,
                                                  const float *gate, const float *up, int rows,
                                                  const wire_meta *meta, size_t act_row0)
{
    const int lane = threadIdx.x % 32;
    for (int r = mm_math_warp(); r < rows; r += MM_CONSUMER_WARPS) {
        const float w = meta[r].weight;
        float4 g = *(const float4 *)(gate + r * SMALL_STRIDE + 4 * lane);
        float4 u = *(const float4 *)(up + r * SMALL_STRIDE + 4 * lane);
        float h[4] = {mm_swiglu(g.x, u.x, w, a.m.has_limit, a.m.limit), mm_swiglu(g.y, u.y, w, a.m.has_limit, a.m.limit),
                      mm_swiglu(g.z, u.z, w, a.m.has_limit, a.m.limit), mm_swiglu(g.w, u.w, w, a.m.has_limit, a.m.limit)};
        quant_store_row(a, sc, block, h, act_row0 + r, lane);
    }
}

/* GEMM1 epilogue of a small tile (rows <= 64): gate and up are parked row-major. */
__device__ __forceinline__ void gemm1_epilogue_small(const mm_fused_args &a, const fused_schedule &sc,
                                                     const fused_item *it, const float *gate, const float *up)
{
    mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS); /* gate and up parked */
    swiglu_quant_rows(a, sc, it->block, gate, up, it->rows, it->meta, it->act_row0);
    gemm1_item_done(a, it);
}

/* GEMM1 epilogue of a split dual tile (rows <= SMALL_ROWS; warpgroup g holds half g, gate or
 * up, of rows 0..63): gate and up parked side by side PARK_ROWS rows at a time, each pass's rows
 * through swiglu_quant_rows (one pass for up to PARK_ROWS rows, as gemm1_epilogue_small). */
__device__ __forceinline__ void gemm1_epilogue_split(const mm_fused_args &a, const fused_schedule &sc,
                                                     const fused_item *it, const float acc[MM_TILE_ACC], float *staging)
{
    const int g = mm_warpgroup() - 1, rows = it->rows;
    for (int r0 = 0; r0 < rows; r0 += PARK_ROWS) {
        const int n = rows - r0 < PARK_ROWS ? rows - r0 : PARK_ROWS;
        if (r0 > 0) mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS); /* the last pass's rows read */
        park_small(staging + g * PARK_FLOATS, acc, r0, n, 64 * g);
        mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS); /* gate and up parked */
        swiglu_quant_rows(a, sc, it->block, staging, staging + PARK_FLOATS, n, it->meta + r0, it->act_row0 + r0);
    }
    gemm1_item_done(a, it);
}

/* GEMM1 epilogue of a non-dual tile of more than PARK_ROWS rows: its gate block parked whole
 * (park_small after the gate pass), its up block in math warpgroup 0's registers (warpgroup 1
 * holds no rows). Each thread reads back the gate values it parked itself (no barrier needed)
 * and runs the register epilogue, the same functions per element as every other path. */
__device__ __forceinline__ void gemm1_epilogue_parked(const mm_fused_args &a, const fused_schedule &sc,
                                                      const fused_item *it, float acc[MM_TILE_ACC], float *staging)
{
    float silu[MM_TILE_ACC];
    const bool holds = mm_warpgroup() == 1; /* rows 0..63 */
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i += 2) {
        const float2 v = holds ? *(const float2 *)(staging + mm_acc_row(i) * SMALL_STRIDE + mm_acc_col(i))
                               : make_float2(0.0f, 0.0f);
        silu[i] = mm_swiglu_gate(v.x, a.m.has_limit, a.m.limit);
        silu[i + 1] = mm_swiglu_gate(v.y, a.m.has_limit, a.m.limit);
    }
    gemm1_epilogue(a, sc, it, silu, acc, staging, 0, NULL);
}

/* After a barrier (the BF16 out tile, `width` columns, is written), each row's width * 2 bytes
 * go home as 16-byte stores of one warp (combine_recv[token][k], NVLink for a remote token);
 * row r's meta is meta[r]. */
__device__ __forceinline__ void store_out_rows(const mm_fused_args &a, int block, const wire_meta *meta, int rows,
                                               const __nv_bfloat16 *out_tile, int width)
{
    mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS);
    /* 16-byte pieces a row: 16 at 128 columns (two rows a warp, 16 lanes each), 32 at 256; the
     * thread's place read again here (mm_tid): held across the item loop it costs registers */
    const int lane = mm_tid() % 32, per_row = width * 2 / 16, piece = lane % per_row;
    const int rows_a_warp = 32 / per_row;
    for (int r = mm_math_warp() * rows_a_warp + lane / per_row; r < rows; r += MM_CONSUMER_WARPS * rows_a_warp) {
        wire_meta m = meta[r];
        uint4 *dst = (uint4 *)(mm_xchg_at(a.comm, a.x, m.src_rank, a.x.off_combine) +
                               (((size_t)m.token * a.m.topk + m.k) * a.m.hidden + block * 128) * 2u);
        dst[piece] = ((const uint4 *)(out_tile + r * width))[piece ^ (r & 7)]; /* mm_out_tile_at's swizzle */
    }
}

/* Writes this math thread's accumulators as BF16 into an out tile of `width` columns (swizzled:
 * mm_out_tile_at), at rows mm_acc_row(i) - row_off and columns col_off + mm_acc_col(i). The
 * thread's place is read again here (mm_tid): with one out tile at a fixed address ptxas hoisted
 * the 32 store offsets out of the item loop, and spilled. */
__device__ __forceinline__ void stage_out_tile(__nv_bfloat16 *out_tile, const float acc[MM_TILE_ACC], int row_off,
                                               int col_off, int width)
{
    const int t = mm_tid() - MM_PRODUCER_THREADS, lane = t % 32;
    const int row0 = 64 * (t / 128) - row_off;
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i += 2)
        *(__nv_bfloat162 *)(out_tile + mm_out_tile_at(row0 + mm_frag_row((t / 32) % 4, lane, i),
                                                      col_off + mm_frag_col(lane, i), width)) =
            __floats2bfloat162_rn(acc[i], acc[i + 1]);
}

/* GEMM2 epilogue (math threads): stage the BF16 tile, then each row's 256 bytes go home to its
 * token's rank in 16-byte stores (combine_recv[token][k], NVLink for a remote token). One out
 * tile, so a barrier first: every warp has read the previous item's tile. */
__device__ __forceinline__ void gemm2_epilogue(const mm_fused_args &a, const fused_item *it, __nv_bfloat16 *out_tile,
                                               const float acc[MM_TILE_ACC])
{
    mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS);
    stage_out_tile(out_tile, acc, 0, 0, MM_GEMM_BN);
    store_out_rows(a, it->block, it->meta, it->rows, out_tile, MM_GEMM_BN);
}

/* The GEMM2 epilogue of an item of two H blocks: the out tile holds one 128 x 128 block, so the
 * two go one after the other, each behind a barrier (the previous tile read). */
__device__ __forceinline__ void gemm2_epilogue_dual(const mm_fused_args &a, const fused_item *it, __nv_bfloat16 *out_tile,
                                                    const float acc0[MM_TILE_ACC], const float acc1[MM_TILE_ACC],
                                                    int extra, const float *xacc)
{
    mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS);
    stage_out_tile(out_tile, acc0, 0, 0, MM_GEMM_BN);
    store_out_rows(a, it->block, it->meta, it->rows, out_tile, MM_GEMM_BN);
    mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS);
    stage_out_tile(out_tile, acc1, 0, 0, MM_GEMM_BN);
    store_out_rows(a, it->block + 1, it->meta, it->rows, out_tile, MM_GEMM_BN);
    if (extra > 0) { /* the extra rows (swapped fragments, both H blocks as 256-column rows), once every warp read the tile */
        const int width = 2 * MM_GEMM_BN;
        const int g = mm_warpgroup() - 1, w = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
        mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS);
#pragma unroll
        for (int half = 0; half < 2; half++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int col = half * MM_GEMM_BN + 64 * g + mm_frag_row(w, lane, i), r = mm_frag_col(lane, i) + (i & 1);
                if (r < extra)
                    out_tile[mm_out_tile_at(r, col, width)] =
                        __float2bfloat16_rn(xacc[(4 * half + i) * MM_CONSUMER_THREADS + mm_math_thread()]);
            }
        store_out_rows(a, it->block, it->meta + MM_GEMM_BM, extra, out_tile, width);
    }
}

/* The same for a split item (rows <= 64): warpgroup g holds H block `block + g` of rows 0..63. */
__device__ __forceinline__ void gemm2_epilogue_split(const mm_fused_args &a, const fused_item *it, __nv_bfloat16 *out_tile,
                                                     const float acc[MM_TILE_ACC])
{
    const int g = mm_warpgroup() - 1, width = 2 * MM_GEMM_BN;
    mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS);
    stage_out_tile(out_tile, acc, 64 * g, g * MM_GEMM_BN, width);
    store_out_rows(a, it->block, it->meta, it->rows, out_tile, width);
}

/* ---- the swapped form (FP4 experts at decode; gemm_fp4.cuh mm_fp4_swap_consume): one-pass
 * items, 64 rows at a time, the accumulators transposed (gemm_fp4.cuh mm_fp4_swap_acc_row /
 * mm_fp4_swap_acc_col; both math warpgroups holding 64 columns each). ---- */

/* Parks rows 0 .. rows - 1 of a swapped block row-major at `park` (as park_small). */
template <int N>
__device__ __forceinline__ void park_swapped(float *park, const float acc[N / 2], int rows)
{
    const int lane = mm_tid() % 32, c = mm_fp4_swap_row();
#pragma unroll
    for (int i = 0; i < N / 2; i++) {
        const int r = mm_fp4_swap_acc_row(lane, i);
        if ((unsigned)r < (unsigned)rows) park[r * SMALL_STRIDE + mm_fp4_swap_acc_col(c, i)] = acc[i];
    }
}

/* Rows h .. h + rows - 1 (rows <= N, the narrowest width that holds them) of a swapped item.
 * GEMM1: the gate pass parked whole (the previous epilogue ended with a barrier after its reads;
 * 64 rows fill the staging area), the up pass in the registers; each thread turns the elements
 * it holds into h = swiglu(gate, up) x weight over the gate values it parked itself, in place,
 * and after a barrier a warp a row quantizes them (the same functions per element as every other
 * path; keeping gate in registers through the up pass spilled); a barrier after the reads.
 * GEMM2: the BF16 out tile staged (mm_out_tile_at's swizzle) behind a barrier (the previous
 * tile read), each row sent home as gemm2_epilogue does. */
template <int N>
__device__ __forceinline__ void fused_swapped_rows(const mm_fused_args &a, const fused_schedule &sc, const fused_item *it,
                                                   int h, int rows, uint8_t *stages, mm_tile_pipe *pipe, mm_ring &ring,
                                                   float *staging)
{
    static_assert(N <= SMALL_ROWS, "a swapped GEMM1 pass's gate block fits the staging area");
    const bool is_gemm1 = it->is_gemm1;
    const int k = is_gemm1 ? a.m.hidden : a.m.inter;
    float acc[N / 2];
#pragma unroll 1
    for (int pass = 0; pass < (is_gemm1 ? 2 : 1); pass++) {
        mm_fp4_swap_consume<N>(stages, pipe, ring, k, acc);
        if (is_gemm1 && pass == 0) park_swapped<N>(staging, acc, rows);
    }
    const int lane = mm_tid() % 32, c = mm_fp4_swap_row();
    if (is_gemm1) {
#pragma unroll
        for (int i = 0; i < N / 2; i++) {
            const int r = mm_fp4_swap_acc_row(lane, i);
            float *at = staging + r * SMALL_STRIDE + mm_fp4_swap_acc_col(c, i);
            if (r < rows) *at = mm_swiglu(*at, acc[i], it->meta[h + r].weight, a.m.has_limit, a.m.limit);
        }
        mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS); /* every row's h written */
        for (int r = mm_math_warp(); r < rows; r += MM_CONSUMER_WARPS) {
            const float4 h4 = *(const float4 *)(staging + r * SMALL_STRIDE + 4 * lane);
            const float hv[4] = {h4.x, h4.y, h4.z, h4.w};
            quant_store_row(a, sc, it->block, hv, it->act_row0 + h + r, lane);
        }
        mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS); /* the park read */
        return;
    }
    __nv_bfloat16 *out_tile = (__nv_bfloat16 *)staging;
    mm_named_barrier(MM_BAR_CONSUMER, MM_CONSUMER_THREADS); /* every warp read the previous out tile */
#pragma unroll
    for (int i = 0; i < N / 2; i++) {
        const int r = mm_fp4_swap_acc_row(lane, i);
        if (r < rows) out_tile[mm_out_tile_at(r, mm_fp4_swap_acc_col(c, i), MM_GEMM_BN)] = __float2bfloat16_rn(acc[i]);
    }
    store_out_rows(a, it->block, it->meta + h, rows, out_tile, MM_GEMM_BN);
}

/* Warpgroups 1 and 2: the items in the producer's order. A dual item (two weight blocks over one
 * pass of A: GEMM1's gate and up, or GEMM2's two H blocks) of more than 64 rows computes both
 * halves in two accumulators (GEMM1: SwiGLU from the registers); of <= 64 rows it is split, half
 * g on warpgroup g. A GEMM1 item that is not dual runs the gate pass then the up pass; small
 * GEMM1 tiles park gate and up row-major in `staging` for the shared epilogue. Returns false when
 * the producer aborted. */
template <bool FOLD, bool HANDOFF, bool FP4, bool SWAP>
__device__ bool consume_items(const mm_fused_args &a, const fused_schedule &sc, uint8_t *stages, mm_tile_pipe *pipe,
                              mm_item_ring *ring_items, const fused_item *slots, float *staging)
{
    mm_ring ring = MM_RING_START(FUSED_RING_DEPTH(HANDOFF));
    const uint64_t limit = a.comm.timeout_ns + 1000000000ull; /* the producer's waits are bounded by timeout_ns */
    stamp_math(a, 3); /* then the end of each GEMM1 item: the last one's stays */
    for (uint32_t n = 0;; n++) {
        const fused_item *it = &slots[n & 1];
        /* the 256 math threads agree: one that gave up alone would leave the others at the
         * epilogue's named barrier for ever */
        if (!mm_named_barrier_and(MM_BAR_CONSUMER, MM_CONSUMER_THREADS, mm_item_wait_ready(ring_items, n, limit))) {
            /* at once: the abort flag stops the claims and the other CTAs' waits on this one */
            if (mm_math_thread() == 0) record_pipeline_failure(a.comm);
            return false;
        }
        const int item = it->item;
        if (item < 0) return item == ITEM_END;
        if (mm_math_thread() == 0) TRACE_ITEM_AT(a, n, TRACE_MATH_TOOK, mm_globaltimer());
        float acc[MM_TILE_ACC];
        const bool is_gemm1 = it->is_gemm1;
        const int k = is_gemm1 ? a.m.hidden : a.m.inter, rows = it->rows;
        const bool dual = it->dual;
        /* as produce_item chose: GEMM1 gathers its rows, GEMM2 takes act's row tiles by TMA */
        const bool gathered = is_gemm1 || !mm_tile_a_by_tma(a.act_map, rows);
        /* one call site of each mainloop, so the kernel holds one copy of each (FP4: each weight
         * block expanded by the math as it arrives, gemm_fp4.cuh; one block sum in flight) */
        if (!SWAP && dual && rows <= SMALL_ROWS) {
            /* split: warpgroup g computes half g (gate / up, or H block `block + g`); a compact
             * item has both halves of a K block in one stage */
            if (it->compact) mm_tile_consume_compact<FP4>(stages, pipe, ring, rows, k, acc);
            else mm_tile_consume_split<FP4>(stages, pipe, ring, rows, k, false, acc);
            if (is_gemm1) {
                gemm1_epilogue_split(a, sc, it, acc, staging);
                stamp_math(a, 3);
            } else {
                gemm2_epilogue_split(a, it, (__nv_bfloat16 *)staging, acc);
            }
        } else if (!SWAP && dual) {
            float acc1[MM_TILE_ACC];
            const int extra = FOLD ? it->extra : 0; /* the other form has no extra rows */
            mm_tile_consume_dual<FP4>(stages, pipe, ring, rows, k, false, gathered, acc, acc1, extra,
                                      extra_accumulators(staging));
            if (is_gemm1) {
#pragma unroll
                for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = mm_swiglu_gate(acc[i], a.m.has_limit, a.m.limit);
                gemm1_epilogue(a, sc, it, acc, acc1, staging, extra, extra_accumulators(staging));
                stamp_math(a, 3);
            } else {
                gemm2_epilogue_dual(a, it, (__nv_bfloat16 *)staging, acc, acc1, extra, extra_accumulators(staging));
            }
        } else if (SWAP) { /* the swapped form, 64 rows at a time */
            for (int h = 0; h < rows; h += MM_FP4_SWAP_ROWS) {
                const int hr = min(rows - h, MM_FP4_SWAP_ROWS);
                if (hr <= 8) fused_swapped_rows<8>(a, sc, it, h, hr, stages, pipe, ring, staging);
                else if (hr <= 16) fused_swapped_rows<16>(a, sc, it, h, hr, stages, pipe, ring, staging);
                else if (hr <= 32) fused_swapped_rows<32>(a, sc, it, h, hr, stages, pipe, ring, staging);
                else fused_swapped_rows<64>(a, sc, it, h, hr, stages, pipe, ring, staging);
            }
            if (is_gemm1) {
                gemm1_item_done(a, it);
                stamp_math(a, 3);
            }
        } else {
            mm_tile_consume<FP4, FP4>(stages, pipe, ring, rows, k, false, gathered, acc);
            if (is_gemm1) {
                /* the gate pass parked (the previous epilogue ended with a barrier after its
                 * reads), then the up pass: parked beside it when both fit, else kept in the
                 * registers (gemm1_epilogue_parked) */
                park_small(staging, acc, 0, rows, 0);
                mm_tile_consume<FP4, FP4>(stages, pipe, ring, rows, k, false, gathered, acc);
                if (rows <= PARK_ROWS) {
                    park_small(staging + PARK_FLOATS, acc, 0, rows, 0);
                    gemm1_epilogue_small(a, sc, it, staging, staging + PARK_FLOATS);
                } else {
                    gemm1_epilogue_parked(a, sc, it, acc, staging);
                }
                stamp_math(a, 3);
            } else {
                gemm2_epilogue(a, it, (__nv_bfloat16 *)staging, acc);
            }
        }
        if (mm_math_thread() == 0) TRACE_ITEM_AT(a, n, TRACE_EPILOGUE_DONE, mm_globaltimer());
        mm_item_release(ring_items, n);
    }
}

/* Phase 5 through shared memory (mm_combine_staged_call says when): CTA `cta` takes units cta,
 * cta + ctas, ... of the flat space unit = token * parts + part (a part: `chunk` columns,
 * mm_combine_chunk), and its warpgroup g every groups-th of those. Per warpgroup a ring in the
 * span (the stage ring's and staging area's bytes, free after phase 3) cut into regions of a
 * full unit's bytes or more, a barrier each (mm_combine_regions). The units go in batches
 * (mm_combine_batch_end: the consecutive units whose valid rows fit a region). Warp 0 issues a
 * batch, a lane a unit: the unit's valid rows (k order, packed; a warp scan places them) by one
 * bulk copy each into the batch's region, on the region's barrier, which lane 0 arms with the
 * batch's bytes; regions - 1 batches are in flight while one is summed. Every thread sums its
 * 16-byte column of each unit's rows in k order (mm_add_bf16x8, the flat combine's arithmetic,
 * so the bits are the same) and stores y. After each batch a proxy fence (the reads were generic,
 * the next copies into the region are the async proxy's) and the warpgroup's barrier free its
 * region. Masks: MM_COMBINE_AHEAD units at a time into two buffers, a unit a thread; buffer c & 1
 * takes batch c at the top of a round once the units before batch c - 1 are summed (the barrier
 * that ended the last round makes it visible before the issue reaches it: fused_schedule.h).
 * Returns false when a copy never landed (its bounded wait expired; the warpgroup agreed). */
__device__ bool combine_staged(const __nv_bfloat16 *in, const int32_t *ids, int tokens, int topk, int hidden,
                               __nv_bfloat16 *y, uint8_t *span, unsigned span_bytes)
{
    const int chunk = mm_combine_chunk(hidden), parts = hidden / chunk;
    const int groups = (int)blockDim.x / MM_COMBINE_GROUP_THREADS, g = (int)threadIdx.x / MM_COMBINE_GROUP_THREADS;
    const int lane = (int)threadIdx.x % MM_COMBINE_GROUP_THREADS, bar_id = MM_BAR_COMBINE + g;
    const bool issuer = lane < 32; /* warp 0 of the warpgroup */
    const unsigned ring_bytes = mm_combine_ring_bytes(span_bytes, groups), row_bytes = (unsigned)chunk * 2u;
    const int regions = mm_combine_regions(ring_bytes, (unsigned)topk * row_bytes);
    const unsigned region_bytes = mm_combine_region_bytes(ring_bytes, regions);
    mm_combine_head *head = (mm_combine_head *)span + g;
    const uint8_t *masks = &head->mask[0][0];
    uint8_t *ring = span + mm_combine_heads_bytes(groups) + (size_t)g * ring_bytes;
    const long long units = (long long)tokens * parts, stride = (long long)gridDim.x * groups;
    const long long first = (long long)blockIdx.x + (long long)gridDim.x * g;
    const long long n = first < units ? (units - first + stride - 1) / stride : 0;
    /* unit j's valid k (bit k), 0 past the last */
    auto unit_mask = [&](long long j) -> unsigned {
        unsigned m = 0;
        if (j < n) {
            const int32_t *id = ids + (first + j * stride) / parts * topk;
            for (int k = 0; k < topk; k++) m |= (id[k] >= 0 ? 1u : 0u) << k;
        }
        return m;
    };
    if (issuer) /* the rows were written by generic stores (GEMM2's epilogues, any rank) and
                 * published by the combine flags this CTA acquired; the copies read them through
                 * the async proxy */
        asm volatile("fence.proxy.async.global;" ::: "memory");
    if (lane == 0) {
        for (int r = 0; r < regions; r++) mm_mbar_init(&head->full[r], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    head->mask[0][lane] = (uint8_t)unit_mask(lane);
    head->mask[1][lane] = (uint8_t)unit_mask(MM_COMBINE_AHEAD + lane);
    mm_named_barrier(bar_id, MM_COMBINE_GROUP_THREADS);
    /* a unit's token and part, stepped by `stride` units (no 64-bit division a unit) */
    const long long step_t = stride / parts;
    const int step_c = (int)(stride % parts);
    /* warp 0: the next batch to issue, its first unit and that unit's token and part */
    long long issue_j = 0, issue_b = 0, issue_t = first / parts;
    int issue_c = (int)(first % parts);
    auto issue_batch = [&]() {
        if (issue_j >= n) return;
        /* the batch's cut (mm_combine_in_batch) and each unit's place in the region: lane i takes
         * unit issue_j + i, its rows' bytes summed over the lanes before it */
        const unsigned m = lane < MM_COMBINE_BATCH_MOST && issue_j + lane < n ? mm_combine_mask_at(masks, issue_j + lane) : 0u;
        const unsigned bytes = (unsigned)mm_combine_rows(m) * row_bytes;
        unsigned upto = bytes;
        for (int d = 1; d < MM_COMBINE_BATCH_MOST; d <<= 1) {
            const unsigned v = __shfl_up_sync(0xffffffffu, upto, d);
            if (lane >= d) upto += v;
        }
        const bool mine = mm_combine_in_batch(lane, upto, n - issue_j, region_bytes);
        const int count = __popc(__ballot_sync(0xffffffffu, mine));
        const unsigned total = __shfl_sync(0xffffffffu, upto, count - 1);
        const int r = (int)(issue_b % regions);
        const unsigned bar = (unsigned)__cvta_generic_to_shared(&head->full[r]);
        if (lane == 0) {
            head->count[r] = (uint32_t)count; /* read by the sum after the barrier's wait */
            mm_mbar_expect_tx(bar, total);
        }
        __syncwarp();
        if (mine && m) {
            const int c = issue_c + lane * step_c;
            const long long t = issue_t + (long long)lane * step_t + c / parts;
            const __nv_bfloat16 *src = in + ((size_t)t * topk) * hidden + (size_t)(c % parts) * chunk;
            const unsigned dst = (unsigned)__cvta_generic_to_shared(ring + (size_t)r * region_bytes + (upto - bytes));
            unsigned k_off = 0;
            for (unsigned mm = m; mm; mm &= mm - 1, k_off += row_bytes)
                mm_bulk_load(dst + k_off, src + (size_t)(__ffs(mm) - 1) * hidden, row_bytes, bar);
        }
        issue_c += count * step_c;
        issue_t += (long long)count * step_t + issue_c / parts;
        issue_c %= parts;
        issue_j += count;
        issue_b++;
    };
    if (issuer)
        for (int q = 0; q < regions - 1; q++) issue_batch();
    long long sum_j = 0, sum_b = 0, sum_t = first / parts;
    int sum_c = (int)(first % parts);
    long long next_masks = 2; /* the next batch of masks to read */
    bool ok = true;
    while (sum_j < n && ok) {
        if ((next_masks - 1) * MM_COMBINE_AHEAD <= sum_j) { /* batch next_masks - 2 is summed */
            head->mask[next_masks & 1][lane] = (uint8_t)unit_mask(next_masks * MM_COMBINE_AHEAD + lane);
            next_masks++;
        }
        if (issuer) issue_batch(); /* into the region the last round freed */
        const int r = (int)(sum_b % regions);
        const bool landed = mm_mbar_wait(&head->full[r], (uint32_t)(sum_b / regions) & 1u, MM_STAGE_WAIT_NS,
                                         MM_PIPE_WAIT_COMBINE_ROWS);
        /* the batch's units (lane 0 of warp 0 wrote the count before arming the barrier); an
         * expired wait still steps over a batch of one, and the warpgroup then stops */
        const long long end = sum_j + (landed ? (long long)head->count[r] : 1);
        const uint8_t *rows = ring + (size_t)r * region_bytes + (size_t)lane * 16;
        for (long long j = sum_j; j < end; j++) {
            const unsigned m = mm_combine_mask_at(masks, j);
            if (landed && lane * 8 < chunk) {
                float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
                for (unsigned mm = m; mm; mm &= mm - 1, rows += row_bytes) mm_add_bf16x8(acc, *(const uint4 *)rows);
                *(uint4 *)(y + (size_t)sum_t * hidden + (size_t)sum_c * chunk + (size_t)lane * 8) = mm_round_bf16x8(acc);
            }
            sum_t += step_t;
            if ((sum_c += step_c) >= parts) {
                sum_c -= parts;
                sum_t++;
            }
        }
        sum_j = end;
        sum_b++;
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* the reads before the next copies */
        ok = mm_named_barrier_and(bar_id, MM_COMBINE_GROUP_THREADS, landed);
    }
    return ok;
}

/* FOLD: the form that folds extra rows into a tile (mm_fused_fold_kernel picks it per call);
 * HANDOFF: the form whose GEMM2 items take their tile's I blocks one by one (handoff_arm;
 * mm_fused_handoff_kernel picks it). Never both. FP4: FP4 experts (MXFP4, gemm_fp4.cuh), in the
 * form with neither: its items' weight blocks come as codes and exponents and the math expands
 * each one as it arrives, into the stage's FP8 block; with SWAP (mm_fused_fp4_swapped picks it:
 * decode calls) into wgmma's A registers, every item one-pass and 64 rows at a time
 * (fused_swapped_rows). */
template <bool FOLD, bool HANDOFF, bool FP4 = false, bool SWAP = false>
__global__ void __launch_bounds__(MM_TILE_THREADS, 1) fused_moe_kernel(mm_fused_args a)
{
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ fused_item slots[2];
    __shared__ __align__(8) mm_tile_pipe pipe;
    __shared__ __align__(8) mm_item_ring ring_items;
    __shared__ int claim_s;
    __shared__ cub::WarpScan<int>::TempStorage warp_scan;
    uint8_t *stages = mm_tile_stages(smem);
    float *staging = (float *)(smem + MM_TILE_SMEM_BYTES); /* after the stages and their slack */
    const int ranks = a.comm.peers.ranks, me = a.comm.peers.rank, el = a.m.experts / ranks;
    /* after the staging area the math's extra-row accumulators (extra_accumulators), then the counts */
    int *cnt = (int *)(smem + MM_TILE_SMEM_BYTES + STAGING_BYTES + MM_XACC_BYTES); /* [El][R] */
    int *tile_start = cnt + a.m.experts; /* [El + 1], then all rows and the decode pairs flag */
    const uint64_t epoch0 = *mm_xchg_epoch(a.comm, a.x) + 1; /* this call's; read again after phase 3 */
    if (threadIdx.x == 0) {
        mm_tile_pipe_init(&pipe, 1);
        mm_item_ring_init(&ring_items);
        fused_handoff_s = HANDOFF;
    }
    stamp(a, 0);
    if (counts_first(a) && blockIdx.x == gridDim.x - 1 && threadIdx.x < 32) publish_counts_first(a, epoch0, cnt);

    /* 1: dispatch (the stages hold the row being sent; the first __syncthreads in it also
     * publishes the barrier inits) */
    if (!dispatch_tokens(a, stages, epoch0)) {
        record_pipeline_failure(a.comm);
        return steps_gone();
    }
    /* the row buffers' generic accesses are ordered before the TMA (async proxy) refills them */
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    stamp(a, 1);

    /* 2: counts of this rank's experts, then the row-tile schedule */
    {
        const uint64_t *slot_words = (const uint64_t *)mm_xchg_at(a.comm, a.x, me, a.x.off_counts);
        int good = 1;
        /* one thread waits (on the last expert's slot of each sender) while the rest of the CTA
         * sleeps in the barrier: all CTAs' threads spinning on the same few L2 lines that the
         * senders are writing would slow those writes (measured: -2% at 1 token, neutral above);
         * each slot is still checked below */
        /* senders that publish their counts first (COUNT_FIRST) signal their rows one by one */
        uint32_t *first_senders = (uint32_t *)&tile_start[el + 3];
        if (threadIdx.x == 0) {
            *first_senders = 0;
            for (int s = 0; s < ranks && good; s++)
                good = mm_wait_geq(a.comm, slot_words + (size_t)(el - 1) * ranks + s, epoch0 << 32, MM_PHASE_FUSED_DISPATCH, s);
        }
        stamp(a, MM_FUSED_PHASE_STAMPS + 3);
        MM_STEP(0x1006);
        if (!__syncthreads_and(good)) return steps_gone();
        for (int i = threadIdx.x; i < el * ranks; i += blockDim.x) {
            if (!mm_wait_geq(a.comm, slot_words + i, epoch0 << 32, MM_PHASE_FUSED_DISPATCH, i % ranks)) {
                good = 0;
                break;
            }
            const uint64_t word = mm_ld_acquire_sys(slot_words + i);
            cnt[i] = (int)(word & 0x7fffffffu);
            if (word & COUNT_FIRST) atomicOr(first_senders, 1u << (i % ranks));
        }
        MM_STEP(0x1007);
        if (!__syncthreads_and(good)) return steps_gone();
        stamp(a, MM_FUSED_PHASE_STAMPS + 4);
        /* a counts-first sender's rows: every slot it counted, once its ready word carries the
         * call's epoch (phase 3 then reads any row without waiting) */
        const uint32_t firsts = *first_senders;
        if (firsts)
            for (int i = threadIdx.x; i < el * ranks && good; i += blockDim.x)
                if ((firsts >> (i % ranks)) & 1u)
                    for (int slot = 0; slot < cnt[i] && good; slot++)
                        good = wait_word(a.comm, ready_word(a, me, i / ranks, i % ranks, slot), (uint32_t)epoch0,
                                         MM_PHASE_FUSED_DISPATCH, i % ranks, true);
        /* the schedule by the first warp, each lane a slice of the experts (gemm_schedule.h) */
        if (threadIdx.x < 32) {
            const int lane = threadIdx.x;
            const mm_fused_lane_sums own = mm_fused_schedule_sums(cnt, el, ranks, lane, 32);
            const int all_rows = (int)__reduce_add_sync(0xffffffffu, (unsigned)own.rows);
            /* a large call folds extra rows into the last tile (sc.large below agrees: folding
             * only lowers the tiles) */
            const int large = mm_fused_large(all_rows, (int)__reduce_add_sync(0xffffffffu, (unsigned)own.tiles));
            const int fold = FOLD && mm_fused_folds(large, a.m.hidden / 128);
            int before, total;
            cub::WarpScan<int>(warp_scan).ExclusiveSum(own.tiles - (fold ? own.folds : 0), before, total);
            mm_fused_schedule_write(cnt, el, ranks, lane, 32, before, fold, tile_start);
            const int most = (int)__reduce_max_sync(0xffffffffu, (unsigned)own.most);
            if (lane == 0) {
                tile_start[el] = total;
                tile_start[el + 1] = all_rows;
                /* decode: GEMM2 as compact pairs of H blocks (1), or single items (0) */
                tile_start[el + 2] = most <= MM_FUSED_TINY_ROWS && mm_fused_tiny_pairs(a.m.hidden / 128, total, (int)gridDim.x);
            }
        }
        MM_STEP(0x1008);
        if (!__syncthreads_and(good)) return steps_gone();
    }
    stamp(a, 2);
    fused_schedule sc;
    sc.cnt = cnt;
    sc.tile_start = tile_start;
    sc.tiles = tile_start[el];
    sc.ib_count = a.m.inter / 128;
    sc.hb_count = a.m.hidden / 128;
    sc.gemm1_items = sc.tiles * sc.ib_count;
    sc.large = mm_fused_large(tile_start[el + 1], sc.tiles);
    sc.tiny = tile_start[el + 2] != 0;
    /* the swapped form: GEMM2 one H block an item (describe_item) */
    sc.h_width = SWAP ? 1 : mm_fused_h_width(sc.hb_count, sc.large, sc.tiny);
    sc.h_items = sc.hb_count / sc.h_width;
    sc.items = sc.gemm1_items + sc.tiles * sc.h_items;

    /* 3: GEMM items: warpgroup 0 produces, warpgroups 1 and 2 compute */
    bool ok = true;
    if (mm_warpgroup() == 0) {
        mm_regs_producer<FP4 ? MM_FP4_PRODUCER_REGS : MM_PRODUCER_REGS>();
        produce_items<FOLD, HANDOFF, FP4, SWAP>(a, sc, stages, &pipe, &ring_items, slots, &claim_s);
    } else {
        inject_late_math();
        mm_regs_math();
        ok = consume_items<FOLD, HANDOFF, FP4, SWAP>(a, sc, stages, &pipe, &ring_items, slots, staging);
    }
    /* every thread meets before the registers go back: a producer with no item left once reached
     * its increase (back to the launch split) before two math warps had made theirs, took the
     * registers those waited for, and the rest of the math waited for them at its barriers: a
     * deadlock without a clock (seen under racecheck, found by `make steps`) */
    MM_STEP(0x1009);
    ok = __syncthreads_and(ok) != 0;
    mm_regs_restore(mm_warpgroup() == 0); /* recomputed: a flag kept across phase 3 spilled */
    /* read again, not kept in registers across phase 3 (where the producer has 64): the state's
     * epoch changes only in phase 6, after every CTA has left phase 5 */
    const uint64_t epoch = *(volatile const uint64_t *)mm_xchg_epoch(a.comm, a.x) + 1;
    /* a pipeline wait that expired left garbage in this CTA's tiles: report it (the abort flag
     * also ends the other CTAs' cross-CTA waits) rather than combine it */
    const uint32_t expired = mm_stage_wait_expired; /* read after the barrier: the same for all */
    if (!ok || expired) {
        if (threadIdx.x == 0 && expired) record_pipeline_failure(a.comm); /* else recorded already */
        return steps_gone();
    }

    stamp(a, 4);
    /* 4: the last CTA out of the GEMMs tells every rank its combine rows are there */
    MM_STEP(0x100a);
    if (mm_last_cta(&mm_xchg_counters(a.comm, a.x)[DONE_GEMM2])) {
        for (int r = threadIdx.x; r < ranks; r += blockDim.x)
            mm_st_release_sys((uint64_t *)mm_xchg_at(a.comm, a.x, r, a.x.off_flags) + me, epoch);
        if (threadIdx.x == 0) mm_xchg_counters(a.comm, a.x)[DONE_GEMM2] = 0;
    }

    /* 5: combine: staged through shared memory when every warpgroup gets enough units
     * (combine_staged), else the (token, 16-byte column) items over every CTA that has some (at 1
     * token the 512 columns of Flash on two CTAs, one round each), or a token per CTA past top-k 8 */
    const bool staged = mm_combine_staged_call(a.io.tokens, a.m.hidden, a.m.topk, (int)gridDim.x,
                                               MM_TILE_THREADS / MM_COMBINE_GROUP_THREADS, DISPATCH_SPAN_BYTES);
    const bool flat = a.m.topk <= MM_COMBINE_ROWS;
    if (staged || (flat ? (long long)blockIdx.x * blockDim.x < (long long)a.io.tokens * (a.m.hidden / 8)
                        : blockIdx.x < a.io.tokens)) {
        int good = 1;
        if (threadIdx.x == 0) {
            const uint64_t *flags = (const uint64_t *)mm_xchg_at(a.comm, a.x, me, a.x.off_flags);
            for (int r = 0; r < ranks && good; r++)
                good = mm_wait_geq(a.comm, flags + r, epoch, MM_PHASE_FUSED_COMBINE, r);
        }
        MM_STEP(0x100b);
        /* phase 3's generic accesses to the span before the staged combine's copies into it */
        if (staged) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        if (!__syncthreads_and(good)) return steps_gone();
        const __nv_bfloat16 *home = (const __nv_bfloat16 *)mm_xchg_at(a.comm, a.x, me, a.x.off_combine);
        if (staged) {
            if (!__syncthreads_and(combine_staged(home, a.io.ids, a.io.tokens, a.m.topk, a.m.hidden,
                                                  (__nv_bfloat16 *)a.io.y, stages, DISPATCH_SPAN_BYTES))) {
                if (threadIdx.x == 0) record_pipeline_failure(a.comm);
                return steps_gone();
            }
        } else if (flat)
            mm_combine_flat(home, a.io.ids, a.io.tokens, a.m.topk, a.m.hidden, (__nv_bfloat16 *)a.io.y,
                            blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
        else
            for (int t = blockIdx.x; t < a.io.tokens; t += gridDim.x)
                mm_combine_token(home + (size_t)t * a.m.topk * a.m.hidden, a.io.ids + (size_t)t * a.m.topk, a.m.topk,
                                 a.m.hidden, (__nv_bfloat16 *)a.io.y + (size_t)t * a.m.hidden);
    }

    stamp(a, 5);
    /* 6: the last CTA out leaves the state clean for the next call */
    MM_STEP(0x100c);
    if (mm_last_cta(&mm_xchg_counters(a.comm, a.x)[DONE_EXIT])) {
        /* the tile count re-read from shared memory, not kept in a register across phase 3 */
        const int tiles = ((volatile int *)cnt)[a.m.experts + a.m.experts / a.comm.peers.ranks];
        for (int i = threadIdx.x; i < tiles; i += blockDim.x) gemm1_done(a)[i] = 0;
        if (threadIdx.x == 0) {
            mm_xchg_counters(a.comm, a.x)[WORK_CLAIM] = 0;
            *mm_xchg_epoch(a.comm, a.x) = epoch;
            __threadfence();
            mm_xchg_counters(a.comm, a.x)[DONE_EXIT] = 0;
        }
    }
    steps_gone();
}

extern "C" size_t mm_fused_smem_bytes(int hidden, int experts, int ranks)
{
    (void)hidden; /* the dispatch's round buffers live in the stages and the staging area: checked below */
    return (size_t)MM_TILE_SMEM_BYTES + STAGING_BYTES + MM_XACC_BYTES + mm_fused_smem_counts_bytes(experts, ranks);
}

/* The kernel's forms: plain, folding, hand-off (mm_launch_fused picks one per call), and FP4
 * experts' two (a.w.fp4; the swapped one at decode). */
#define FUSED_FORMS 5
static const void *const fused_forms[FUSED_FORMS] = {(const void *)fused_moe_kernel<false, false>,
                                                      (const void *)fused_moe_kernel<true, false>,
                                                      (const void *)fused_moe_kernel<false, true>,
                                                      (const void *)fused_moe_kernel<false, false, true>,
                                                      (const void *)fused_moe_kernel<false, false, true, true>};

/* What dynamic shared memory a launch may take on this GPU: the per-block opt-in limit less the
 * largest static share of the forms (barriers, item slots, flags). A shape whose
 * mm_fused_smem_bytes exceeds it cannot launch at all: too many experts (4 bytes each, beside the
 * ring and staging area). */
extern "C" cudaError_t mm_fused_smem_room(size_t *room)
{
    *room = 0;
    int dev = 0, optin = 0;
    cudaError_t e;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
    if ((e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) != cudaSuccess) return e;
    size_t static_max = 0;
    for (int f = 0; f < FUSED_FORMS; f++) {
        cudaFuncAttributes fa;
        if ((e = cudaFuncGetAttributes(&fa, fused_forms[f])) != cudaSuccess) return e;
        if (fa.sharedSizeBytes > static_max) static_max = fa.sharedSizeBytes;
    }
    *room = (size_t)optin > static_max ? (size_t)optin - static_max : 0;
    return cudaSuccess;
}

extern "C" cudaError_t mm_fused_prepare(int hidden, int experts, int ranks, int *max_ctas)
{
    *max_ctas = 0;
    size_t wire = (size_t)hidden + ((size_t)hidden / 128 * 4 + 15) / 16 * 16; /* mm_fused_row_bytes */
    /* the dispatch's two round buffers: the stage ring and the staging area (at least; the ring
     * starts within the first 1 KB of shared memory) */
    if (hidden < 1 || hidden > (1 << 20) ||
        mm_fused_dispatch_group((unsigned)hidden, (unsigned)wire, DISPATCH_SPAN_BYTES, 1) < 1 ||
        ranks < 1 || experts % ranks)
        return cudaErrorInvalidValue;
    size_t smem = mm_fused_smem_bytes(hidden, experts, ranks);
    cudaError_t e = cudaSuccess;
    int per_sm = 0, dev = 0, sms = 0;
    for (int f = 0; f < FUSED_FORMS; f++) {
        if ((e = mm_regs_split_ok(fused_forms[f])) != cudaSuccess) return e;
        if ((e = cudaFuncSetAttribute(fused_forms[f], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) != cudaSuccess)
            return e;
        int fits = 0;
        if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, fused_forms[f], MM_TILE_THREADS, smem)) != cudaSuccess)
            return e;
        per_sm = f == 0 || fits < per_sm ? fits : per_sm;
    }
    if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) return e;
    *max_ctas = per_sm * sms;
    return cudaSuccess;
}

#ifdef MM_STEPS
/* The MM_STEPS build's watcher: a host thread per launch that waits for the launch's event and,
 * when it has not completed after MM_STEPS_AFTER_S seconds (default 20), prints where every CTA's
 * warps stand (gemm_tile.cuh lists the codes), twice, a period apart. */
static uint32_t *steps_host;
static int steps_words;

static void steps_print(int ctas, double waited)
{
    fprintf(stderr, "megamoe: steps: fused launch not done after %.0f s; CTAs not gone (warp: lane 0's code, "
                    "'*' if its lanes differ, @ms mod 65536):\n", waited);
    int shown = 0;
    for (int c = 0; c < ctas && shown < 40; c++) {
        const uint32_t *w = steps_host + (size_t)c * MM_TILE_THREADS;
        bool gone = true;
        for (int t = 0; t < MM_TILE_THREADS; t++) gone &= (w[t] & 0xffffu) == 0xffffu;
        if (gone) continue;
        char line[1024];
        int at = snprintf(line, sizeof line, "  CTA %3d:", c);
        for (int wp = 0; wp < MM_TILE_THREADS / 32 && at < (int)sizeof line - 32; wp++) {
            const uint32_t v = w[wp * 32];
            bool same = true;
            for (int l = 1; l < 32; l++) same &= (w[wp * 32 + l] & 0xffffu) == (v & 0xffffu);
            at += snprintf(line + at, sizeof line - at, " %04x%s@%u", v & 0xffffu, same ? "" : "*", v >> 16);
        }
        fprintf(stderr, "%s\n", line);
        shown++;
    }
}

static void steps_watch(cudaEvent_t done, int ctas)
{
    const char *env = getenv("MM_STEPS_AFTER_S");
    const double after = env ? atof(env) : 20.0;
    int dumps = 0;
    for (int tick = 0;; tick++) {
        if (cudaEventQuery(done) != cudaErrorNotReady) break;
        const double waited = tick * 0.2;
        if (dumps < 2 && waited >= after * (dumps + 1)) {
            steps_print(ctas, waited);
            dumps++;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    cudaEventDestroy(done);
}
#endif

extern "C" cudaError_t mm_launch_fused(mm_fused_args a, int ctas, cudaStream_t stream)
{
    size_t smem = mm_fused_smem_bytes(a.m.hidden, a.m.experts, a.comm.peers.ranks);
#ifdef MM_STEPS
    if (!steps_host || steps_words < ctas * MM_TILE_THREADS) {
        void *dev = NULL;
        if (steps_host) cudaFreeHost(steps_host);
        cudaError_t e = cudaHostAlloc((void **)&steps_host, (size_t)ctas * MM_TILE_THREADS * 4, cudaHostAllocMapped);
        if (e == cudaSuccess) e = cudaHostGetDevicePointer(&dev, steps_host, 0);
        if (e == cudaSuccess) e = cudaMemcpyToSymbol(mm_steps, &dev, sizeof dev);
        if (e != cudaSuccess) return e;
        steps_words = ctas * MM_TILE_THREADS;
    }
    memset(steps_host, 0, (size_t)steps_words * 4);
#endif
    if ((uintptr_t)a.io.x % 16) return cudaErrorMisalignedAddress; /* the dispatch loads x rows by bulk copies */
    const int form = mm_fused_call_form(a.io.tokens, a.io.slice_tokens, a.io.slice_ranks, a.m.topk, a.comm.peers.ranks,
                                        a.m.experts, a.m.inter, ctas, a.w.fp4);
    if (form == MM_FUSED_FORM_FP4_SWAPPED)
        fused_moe_kernel<false, false, true, true><<<ctas, MM_TILE_THREADS, smem, stream>>>(a);
    else if (form == MM_FUSED_FORM_FP4)
        fused_moe_kernel<false, false, true><<<ctas, MM_TILE_THREADS, smem, stream>>>(a);
    else if (form == MM_FUSED_FORM_FOLD)
        fused_moe_kernel<true, false><<<ctas, MM_TILE_THREADS, smem, stream>>>(a);
    else if (form == MM_FUSED_FORM_HANDOFF)
        fused_moe_kernel<false, true><<<ctas, MM_TILE_THREADS, smem, stream>>>(a);
    else
        fused_moe_kernel<false, false><<<ctas, MM_TILE_THREADS, smem, stream>>>(a);
#ifdef MM_STEPS
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(stream, &capturing);
    cudaEvent_t done;
    if (capturing == cudaStreamCaptureStatusNone && cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess) {
        if (cudaEventRecord(done, stream) == cudaSuccess) std::thread(steps_watch, done, ctas).detach();
        else cudaEventDestroy(done);
    }
#endif
    return cudaGetLastError();
}
