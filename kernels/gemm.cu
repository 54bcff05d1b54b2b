/* Grouped FP8 GEMM core as a standalone launch: the warp-specialized tile machinery of
 * gemm_tile.cuh driven over the grouped tile schedule of gemm_schedule.h, in two forms: the
 * 128 x 128 kernel described here, and the wide 192 x 128 one (grouped_gemm_wide_kernel, its own
 * gemm_wide.cuh) that the launch picks for many rows an expert (mm_gemm_tile_rows).
 *
 * out[r][n] = sum over 128-wide K blocks kb of (sa[r][kb] * sw[e][n/128][kb]) * (FP32 sum of
 * qa[r][k] * qw[e][n][k] over the block): recipe.md step 3, the block sum in the MMA's FP32
 * accumulators, promoted with one FMA per block in K order.
 *
 * Roles: warpgroup 0 walks this CTA's tiles (a pair: blockIdx.x, + 2 x the pairs kept busy, ...,
 * where a pair past those gemm_busy_pairs keeps takes no tile and goes straight to the final
 * cluster barrier; single CTAs claim them from a counter, in the plain order; pairs' items in the
 * banded order of mm_tile_locate_banded), writes each
 * tile's row table into a slot of the item ring and streams its K blocks into the stage ring; the two
 * math warpgroups take the tiles from the item ring in the same order, each computing 64 of the
 * tile's 128 rows for all 128 columns, and store their rows (a full BF16 half by tensor copies,
 * store_half_tma; the rest from the registers). A tile's rows never straddle experts; rows past
 * an expert's count are never stored.
 * Buffers: A [rows][K] FP8 + [rows][K/128] FP32 scales; W [E][N][K] FP8 + [E][N/128][K/128]
 * (grouped_gemm_fp4_kernel: W as MXFP4 codes [E][N][K/2] + exponents [E][N][K/32] + each weight
 * block's word [E][N/128][K/128] in the scales' place, expanded by the math warps into wgmma's A
 * registers, every tile in the swapped form: gemm_fp4.cuh);
 * row_offset/row_count [E] in device memory (no host sync); tile_start [E+1], the row-tile prefix:
 * each CTA's producer builds it in shared memory from the counts (up to GEMM_OWN_PREFIX_MAX
 * experts; CTA 0 also writes it to tile_start for the kernels after it), else tile_prefix_kernel
 * writes it before the launch; out [rows][N] BF16 or FP32.
 * Shared memory: the stage ring, then the output boxes of the tensor-copy epilogue (store_half_tma).
 * Synchronization: mbarriers (stage ring and item ring, gemm_tile.cuh); per math warpgroup a named
 * barrier around its box writes, and bulk-copy groups (its boxes are rewritten only after the
 * copies that read them); across CTAs only the claim counter (gemm_claims), which a launch's
 * last claim wraps back to zero for the next launch. Each CTA's thread 0 also adds its SM cycles
 * and nanoseconds to gemm_clock_sum at its end (the clock `megamoe gemm` reports; no one waits
 * on it). */
/* The ring is gemm_tile.cuh's five stages deep: the epilogue boxes (32 KB) leave room for them
 * (207872 B of shared memory). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>

#include "comm.cuh"
#include "gemm_schedule.h"
#include "gemm_tile.cuh"
#include "gemm_fp4.cuh"
#include "api.h"
#include "tile_prefix.cuh"

typedef struct {
    mm_tile_rows tab;
    int rows, a_row0, n0, last; /* last: no tile in this slot, the CTA is done */
} gemm_item;

/* A BF16 tile's 64-row half whose rows are all valid goes out through shared memory by two
 * tensor copies (64 x 64 boxes, 128-byte swizzle) that one thread issues; every other tile (a
 * partial half, FP32 output, or no output map) straight from the registers, valid rows only.
 * The previous epilogue staged every half and copied it out one row per bulk copy: those copies
 * take their operands from uniform registers, so the 64 of a half were issued one lane at a
 * time, ~1000 cycles per warpgroup and tile without MMAs (ncu source counters); the tensor
 * copies gained 4-10% at 49152 rows and 2-3% at 4096. */
#define GEMM_STAGING_BYTES (2 * 2 * MM_OUT_BOX_BYTES) /* per math warpgroup two boxes */
#define GEMM_SMEM_BYTES (MM_TILE_SMEM_BYTES + GEMM_STAGING_BYTES)
/* 227 KB per block on sm_90, ~4.2 KB of it static (the item slots and barriers) */
static_assert(GEMM_SMEM_BYTES <= 227 * 1024 - 8 * 1024, "the staging must fit next to the stage ring");
static_assert((MM_TILE_STAGES * MM_TILE_STAGE_BYTES) % 1024 == 0, "the boxes start on a 1 KB boundary (the swizzle's)");
#define GEMM_BAR_WARPGROUP 3 /* + math warpgroup 0 / 1: the epilogue's barriers, 128 threads each */

/* A thread's accumulators as BF16 pairs, in accumulator order (the tensor-copy epilogue's input). */
__device__ __forceinline__ void pack_bf16(const float acc[MM_TILE_ACC], uint32_t packed[MM_TILE_ACC / 2])
{
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i += 2) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(acc[i], acc[i + 1]);
        packed[i / 2] = *(const uint32_t *)&v;
    }
}

/* Math warpgroup g's full half: its packed accumulators into its two boxes (staging + wg x 16 KB)
 * in the swizzled layout the output map names, then thread 0 of the warpgroup issues the copies.
 * Before rewriting the boxes it waits until its copies of the previous tile have read them
 * (wait_group.read) and, by the barrier, until its threads have. */
__device__ __forceinline__ void store_half_tma(const mm_grouped_gemm_args &g, uint8_t *staging,
                                               const uint32_t packed[MM_TILE_ACC / 2], int a_row0, int n0)
{
    const int t = mm_math_thread(), wg = t / 128, lt = t % 128;
    uint8_t *boxes = staging + wg * 2 * MM_OUT_BOX_BYTES;
    if (lt == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    mm_named_barrier(GEMM_BAR_WARPGROUP + wg, 128);
    /* the boxes' swizzled layout (gemm_schedule.h, CPU-tested against the tensor map's and for
     * conflict-free stores: a warp's 8 rows hit 8 different chunks) */
    const int lane = lt % 32;
    const unsigned base = (unsigned)__cvta_generic_to_shared(boxes) + mm_out_box_base((lt / 32) % 4, lane);
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i += 2) {
        const unsigned at = base + mm_out_box_step(lane, i);
        asm volatile("st.shared.b32 [%0], %1;" ::"r"(at), "r"(packed[i / 2]) : "memory");
    }
    /* the shared stores (generic proxy) before the tensor copies (async proxy) read them */
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    mm_named_barrier(GEMM_BAR_WARPGROUP + wg, 128);
    if (lt == 0) {
#pragma unroll
        for (int bx = 0; bx < 2; bx++)
            asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                         ::"l"(g.out_map), "r"(n0 + 64 * bx), "r"(a_row0 + 64 * wg),
                         "r"((unsigned)__cvta_generic_to_shared(boxes + bx * MM_OUT_BOX_BYTES))
                         : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
}

/* A tile's valid rows of this math thread straight from its accumulators (BF16 or FP32). */
__device__ __forceinline__ void store_rows_from_registers(void *out, int out_fp32, int n, const float acc[MM_TILE_ACC],
                                                          int rows, int a_row0, int n0)
{
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i += 2) {
        const int r = mm_acc_row(i);
        if (r >= rows) continue;
        const size_t at = (size_t)(a_row0 + r) * n + n0 + mm_acc_col(i);
        if (out_fp32) *(float2 *)((float *)out + at) = make_float2(acc[i], acc[i + 1]);
        else *(__nv_bfloat162 *)((__nv_bfloat16 *)out + at) = __floats2bfloat162_rn(acc[i], acc[i + 1]);
    }
}

/* A swapped FP4 tile's valid rows from the registers (mm_fp4_swap_consume's transposed layout:
 * gemm_fp4.cuh mm_fp4_swap_acc_row / mm_fp4_swap_acc_col). */
template <int N>
__device__ __forceinline__ void store_rows_swapped(void *out, int out_fp32, int n, const float acc[N / 2], int rows,
                                                   int a_row0, int n0)
{
    const int lane = mm_tid() % 32, c = n0 + mm_fp4_swap_row();
#pragma unroll
    for (int i = 0; i < N / 2; i++) {
        const int r = mm_fp4_swap_acc_row(lane, i);
        if (r >= rows) continue;
        const size_t at = (size_t)(a_row0 + r) * n + mm_fp4_swap_acc_col(c, i);
        if (out_fp32) ((float *)out)[at] = acc[i];
        else ((__nv_bfloat16 *)out)[at] = __float2bfloat16_rn(acc[i]);
    }
}

/* Math (both warpgroups): `rows` (<= N) rows of an FP4 tile, from out row a_row0, in the swapped
 * form. */
template <int N>
__device__ __forceinline__ void gemm_fp4_swapped_rows(const mm_grouped_gemm_args &g, uint8_t *stages, mm_tile_pipe *p,
                                                      mm_ring &ring, int rows, int a_row0, int n0)
{
    float acc[N / 2];
    mm_fp4_swap_consume<N>(stages, p, ring, g.k, acc);
    store_rows_swapped<N>(g.out, g.out_fp32, g.n, acc, rows, a_row0, n0);
}

/* The claims of a launch of single CTAs past their first tiles (a pair walks its tiles in a fixed
 * order: both CTAs need the same one). Zero at the start of every launch: grouped_gemm_kernel's
 * claims wrap it back to zero with their last one (gemm_claim_next), and tile_prefix_kernel, where
 * it runs, zeroes it too (the wide form's claims experiment relies on that). One stream runs one
 * grouped GEMM at a time, and each launch reads the counter only after griddepcontrol.wait, when
 * the launch before it has completed. */
static __device__ unsigned int gemm_claims;

/* The SM clock the launches ran at, for `megamoe gemm`'s MHz column (under the H200's power cap
 * a long GEMM runs well below its boost clock, and the same kernel reads 10-15% apart from run to
 * run with it): thread 0 of each CTA adds its SM cycles (clock64) and nanoseconds (globaltimer)
 * from its start to its end. Both count the same span, so their ratio is the clock whatever the
 * CTA waited on. Summed over every launch since mm_grouped_gemm_clock_reset. */
static __device__ unsigned long long gemm_clock_sum[2];

__device__ __forceinline__ void gemm_clock_begin(uint64_t start[2])
{
    start[0] = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start[1]));
}

__device__ __forceinline__ void gemm_clock_end(const uint64_t start[2])
{
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    atomicAdd(&gemm_clock_sum[0], (unsigned long long)(clock64() - start[0]));
    atomicAdd(&gemm_clock_sum[1], (unsigned long long)(now - start[1]));
}

/* Thread 0 of a producer: the next claim; the tile is gridDim.x + the claim (each CTA's first
 * tile is blockIdx.x, no claim), added where it is read (gemm_walk), since an add here would wait
 * for the atomic. A launch of `total` tiles takes exactly `total` claims, one after each
 * tile published (the CTAs' last claims, one each, return tiles past the end), whatever a stalled
 * wait skips: atom.inc's limit total - 1 wraps the counter to zero with the last, so no CTA has
 * to count the finished ones at the end (a fence and a round trip at the end of every launch).
 * atom.inc rather than atomicAdd: an add, even one thread's, is compiled to a warp-aggregated
 * atomic whose result is shuffled at once, and the producer's warp 0 (whose thread 0 issues the
 * tensor copies) waited there for the round trip before loading the tile's first block; here the
 * result is first read when the next tile is walked. */
__device__ __forceinline__ int gemm_claim_next(int total)
{
    unsigned c;
    asm volatile("atom.global.inc.u32 %0, [%1], %2;" : "=r"(c) : "l"(&gemm_claims), "r"((unsigned)(total - 1)) : "memory");
    return (int)c;
}

/* Up to this many experts, each CTA builds the row-tile prefix itself (gemm_build_prefix) instead
 * of waiting for tile_prefix_kernel: that launch in front of every GEMM cost ~2 us of a decode
 * call's ~84 (measured with the prefix left out). 4 KB of shared memory. */
#define GEMM_OWN_PREFIX_MAX 1024
static __shared__ int32_t gemm_own_prefix[GEMM_OWN_PREFIX_MAX + 1];

/* The prefix this launch's producer reads: a fixed address either way, so no register holds it
 * through the producer's loop (with 56 registers a pointer kept there spilled). */
__device__ __forceinline__ const int32_t *gemm_tile_start(const mm_grouped_gemm_args &g)
{
    return g.experts <= GEMM_OWN_PREFIX_MAX ? gemm_own_prefix : g.tile_start;
}

/* Producer (all 128 threads): prefix[0..experts] = the row-tile prefix of the counts, in shared
 * memory (mm_group_tile_prefix on the producer's named barrier). CTA 0 writes it to g.tile_start
 * for the kernels after the GEMM (the activation kernel walks it after GEMM1). */
__device__ __forceinline__ void gemm_build_prefix(const mm_grouped_gemm_args &g, int32_t *prefix, int *warp_sums)
{
    mm_group_tile_prefix(g.row_count, g.experts, MM_GEMM_BM, prefix, warp_sums, MM_PRODUCER_THREADS, MM_BAR_PRODUCER);
    if (blockIdx.x == 0)
        for (int e = threadIdx.x; e <= g.experts; e += MM_PRODUCER_THREADS) g.tile_start[e] = prefix[e];
}


/* Whether this launch's CTAs claim their tiles (single CTAs) rather than walk a fixed order
 * (pairs). Read from the cluster size each time: kept in a register through the producer's
 * loop, ptxas spilled it once the prefix build came in front of the loop. */
__device__ __forceinline__ bool single_claims()
{
    return mm_cluster_size() != 2;
}

/* The pairs a walk of `total` items keeps busy (both forms' pairs; gemm_schedule.h mm_fewest_pairs) */
__device__ __forceinline__ int gemm_busy_pairs(int total)
{
    return mm_fewest_pairs(total / 2, (int)gridDim.x / 2);
}

/* The producer's view of an item it published: its tile, or last (no tile: the CTA is done). */
typedef struct {
    mm_tile t;
    int item, last;
} gemm_work;

/* The producer's n-th item, `item` being its (n - 1)-th (for n == 0: blockIdx.x): claimed (the
 * claim thread 0 took ahead, passed to all 128 through `claimed`), or the pair's fixed walk over
 * the `pairs` it keeps busy (gemm_busy_pairs; a pair past them gets `total`, no item), in the
 * plain order (mm_pair_walk_item unrotated: the wide form's rotation made no difference here). */
__device__ __forceinline__ int gemm_walk(bool claims, bool pair, int *claimed, int next, int item, uint32_t n,
                                         int pairs, int total)
{
    if (pair) {
        const int c = (int)blockIdx.x / 2;
        return c >= pairs ? total : 2 * mm_pair_walk_item(c, (int)n, pairs, false) + (int)(blockIdx.x & 1u);
    }
    if (n == 0) return item;
    if (claims) {
        /* every thread read the last claim before the table barrier of gemm_publish_item */
        if (threadIdx.x == 0) *claimed = (int)gridDim.x + next;
        mm_named_barrier(MM_BAR_PRODUCER, MM_PRODUCER_THREADS);
        return *claimed;
    }
    return item + (int)gridDim.x;
}

/* Producer (all 128 threads): item `item` as the CTA's n-th into its slot of the item ring (its
 * row table, rows, first row and columns, or `last` when item >= total), published to the math
 * warpgroups. Waits until the slot is free (the math released item n - 2). */
__device__ __forceinline__ gemm_work gemm_publish_item(const mm_grouped_gemm_args &g, gemm_item *slot,
                                                       mm_item_ring *items, uint32_t n, int item, int total, int band,
                                                       int col_tiles, int kblocks)
{
    gemm_item *it = &slot[n & 1];
    gemm_work w;
    w.item = item;
    w.last = item >= total;
    mm_item_wait_free(items, n);
    if (w.last) {
        if (threadIdx.x == 0) it->last = 1;
        mm_item_publish(items, n);
        return w;
    }
    w.t = mm_tile_locate_banded(gemm_tile_start(g), g.experts, col_tiles, band, item);
    const int a_row0 = g.row_offset[w.t.expert] + w.t.row_tile * MM_GEMM_BM;
    int rows = g.row_count[w.t.expert] - w.t.row_tile * MM_GEMM_BM;
    rows = rows < MM_GEMM_BM ? rows : MM_GEMM_BM;
    const int r = a_row0 + ((int)threadIdx.x < rows ? (int)threadIdx.x : 0);
    it->tab.row[threadIdx.x] = g.a + (size_t)r * g.k;
    it->tab.scale[threadIdx.x] = g.a_scale + (size_t)r * kblocks;
    if (threadIdx.x == 0) {
        it->last = 0;
        it->rows = rows;
        it->a_row0 = a_row0;
        it->n0 = w.t.col_tile * MM_GEMM_BN;
    }
    mm_named_barrier(MM_BAR_PRODUCER, MM_PRODUCER_THREADS); /* the table, for every loader */
    mm_item_publish(items, n);
    return w;
}

/* FP4: the experts' weights as MXFP4 (gemm_fp4.cuh; g.w_map maps the codes, g.w holds the
 * exponents, g.w_scale the blocks' words, fp4.h mm_fp4_block_word): single CTAs only, the math
 * warps expand each weight block. */
template <bool FP4>
__device__ __forceinline__ void grouped_gemm_body(const mm_grouped_gemm_args &g)
{
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ gemm_item slot[2];
    __shared__ __align__(8) mm_tile_pipe pipe;
    __shared__ __align__(8) mm_item_ring items;
    __shared__ int claimed;
    __shared__ int prefix_warp_sums[MM_PRODUCER_THREADS / 32];
    __shared__ uint64_t clock_start[2];
    uint8_t *stages = mm_tile_stages(smem);
    uint8_t *staging = stages + MM_TILE_STAGES * MM_TILE_STAGE_BYTES;
    /* a 2-CTA cluster (mm_launch_grouped_gemm) runs pairs of tiles on the same rows and adjacent
     * columns: item w and w + 1 (w even) share their A blocks, which the two CTAs load half each */
    const bool pair = mm_cluster_size() == 2;
    if (threadIdx.x == 0) {
        gemm_clock_begin(clock_start);
        mm_tile_pipe_init(&pipe, pair ? 2 : 1);
        mm_item_ring_init(&items);
    }
    if (pair) mm_cluster_sync(); /* the peer's barriers exist before the first remote arrival */
    else __syncthreads();
    /* launched as a programmatic dependent of the launch before it (mm_launch_grouped_gemm): the
     * launch and the set-up above overlapped its end; the row counts (and tile_start, where
     * tile_prefix_kernel wrote it) are visible from here on */
    asm volatile("griddepcontrol.wait;" ::: "memory");
    const int col_tiles = g.n / MM_GEMM_BN, kblocks = g.k / MM_GEMM_BK;
    mm_ring ring = MM_RING_START(MM_TILE_STAGES);

    /* The producer's prefix build, outside its branch and before its register decrease: inside
     * it, ptxas gave the producer's K loop fewer registers, and the loop then computed each of a
     * gathered block's 8 row addresses just before its copy instead of all of them up front
     * (decode 5-15% slower); after the decrease, it spilled. */
    if (mm_warpgroup() == 0 && g.experts <= GEMM_OWN_PREFIX_MAX) gemm_build_prefix(g, gemm_own_prefix, prefix_warp_sums);
    if (mm_warpgroup() == 0) {
        mm_regs_producer();
        const int total = gemm_tile_start(g)[g.experts] * col_tiles;
        /* Single CTAs claim their tiles (a decode launch: ~8 tiles a CTA, whose times vary with
         * the HBM traffic around them, and a fixed order ends with the slowest CTA), each one
         * once the loads of the current one are issued, so the atomic's round trip hides behind
         * the ring's blocks of math. Their experts have one row tile each (mm_tile_pairs), where
         * the band changes no item but costs the locate three divisions and a load: without it,
         * and with the give-up flag read before the stage wait (mm_tile_produce), decode is 3-4%
         * faster (Flash GEMM2 16 rows an expert 88.9 -> 86.0 us). */
        const int band = single_claims() ? 0 : MM_GEMM_BAND;
        int item = blockIdx.x, next = 0;
        /* item n + 1 is located, tabled and published once item n's loads are issued (published
         * before item n's last K block instead, decode moved within 0.3 us and Pro 0.5-1% slower:
         * the boundary's work already hides behind the ring's blocks in flight) */
        uint32_t n = 0;
        const int pairs = pair ? gemm_busy_pairs(total) : 0;
        gemm_work cur = gemm_publish_item(g, slot, &items, 0,
                                          gemm_walk(single_claims(), pair, &claimed, next, item, 0, pairs, total), total,
                                          band, col_tiles, kblocks);
        if (single_claims() && !cur.last && threadIdx.x == 0) next = gemm_claim_next(total);
        if constexpr (FP4) {
            while (!cur.last) {
                mm_inject_stall(cur.item);
                const gemm_item *it = &slot[n & 1];
                /* codes, exponents and word of each weight block; the math expands them into
                 * wgmma's A registers (gemm_fp4.cuh, the swapped form) */
                const mm_tile_b b = {g.w_map, cur.t.expert * g.n + cur.t.col_tile * MM_GEMM_BN,
                                     g.w_scale + ((size_t)cur.t.expert * col_tiles + cur.t.col_tile) * kblocks, g.w,
                                     g.k / MM_FP4_GROUP};
                const mm_tile_a_map am = {g.a_map, it->a_row0, 0};
                mm_fp4_produce_swapped(stages, &pipe, ring, &it->tab, it->rows, am, b, 0, kblocks, false, true, 0);
                const gemm_work nx = gemm_publish_item(g, slot, &items, n + 1,
                                                       gemm_walk(true, false, &claimed, next, cur.item, n + 1, 0, total),
                                                       total, band, col_tiles, kblocks);
                if (!nx.last && threadIdx.x == 0) next = gemm_claim_next(total);
                cur = nx;
                n++;
            }
        } else {
            while (!cur.last) {
                mm_inject_stall(cur.item);
                const gemm_item *it = &slot[n & 1];
                const mm_tile_b b = {g.w_map, cur.t.expert * g.n + cur.t.col_tile * MM_GEMM_BN,
                                     g.w_scale + ((size_t)cur.t.expert * col_tiles + cur.t.col_tile) * kblocks};
                const mm_tile_a_map am = {g.a_map, it->a_row0, pair ? 1 : 0};
                mm_tile_produce(stages, &pipe, ring, &it->tab, it->rows, am, b, 0, kblocks, 0, 0, false, 0, false, false,
                                true);
                const gemm_work nx = gemm_publish_item(g, slot, &items, n + 1,
                                                       gemm_walk(single_claims(), pair, &claimed, next, cur.item, n + 1,
                                                                 pairs, total),
                                                       total, band, col_tiles, kblocks);
                if (single_claims() && !nx.last && threadIdx.x == 0) next = gemm_claim_next(total);
                cur = nx;
                n++;
            }
        }
    } else {
        mm_regs_math();
        for (uint32_t n = 0;; n++) {
            const gemm_item *it = &slot[n & 1];
            /* the warpgroup agrees (its epilogue has a 128-thread barrier): after an expired wait
             * some threads may read a stale slot; all leave, the output is garbage, no hang. FP4:
             * both warpgroups agree (the expansion's barriers count all 256 math threads) */
            const bool ready = mm_item_wait_ready(&items, n, MM_STAGE_WAIT_NS);
            if (!mm_named_barrier_and(FP4 ? MM_BAR_CONSUMER : GEMM_BAR_WARPGROUP + mm_warpgroup() - 1,
                                      FP4 ? MM_CONSUMER_THREADS : 128, ready && !it->last))
                break;
            const int rows = it->rows, a_row0 = it->a_row0, n0 = it->n0;
            if constexpr (FP4) {
                /* every tile in the swapped form (gemm_fp4.cuh), wgmma's N by its rows: at 65-128
                 * rows it ran 16-18% faster than the tile expanded into the stage's FP8 block
                 * (docs/performance.md), which only fused's FP4 form still takes */
                if (rows <= 8) gemm_fp4_swapped_rows<8>(g, stages, &pipe, ring, rows, a_row0, n0);
                else if (rows <= 16) gemm_fp4_swapped_rows<16>(g, stages, &pipe, ring, rows, a_row0, n0);
                else if (rows <= 32) gemm_fp4_swapped_rows<32>(g, stages, &pipe, ring, rows, a_row0, n0);
                else if (rows <= 64) gemm_fp4_swapped_rows<64>(g, stages, &pipe, ring, rows, a_row0, n0);
                else gemm_fp4_swapped_rows<128>(g, stages, &pipe, ring, rows, a_row0, n0);
                mm_item_release(&items, n);
            } else {
                float acc[MM_TILE_ACC];
                mm_tile_consume(stages, &pipe, ring, rows, g.k, pair, !mm_tile_a_by_tma(g.a_map, rows), acc);
                mm_item_release(&items, n);
                /* a full BF16 half by tensor copies; the rest (a small tile at decode, whose
                 * streamed weights are the limit, a partial half, FP32) straight from the
                 * registers, valid rows only: staging a decode tile's 64 rows cost 1-4% */
                if (rows > 64 && g.out_map && !g.out_fp32 && rows >= 64 * mm_warpgroup()) {
                    uint32_t packed[MM_TILE_ACC / 2];
                    pack_bf16(acc, packed);
                    store_half_tma(g, staging, packed, a_row0, n0);
                    continue;
                }
                store_rows_from_registers(g.out, g.out_fp32, g.n, acc, rows, a_row0, n0);
            }
        }
        /* the last tile's rows are written before the kernel ends */
        if (mm_math_thread() % 128 == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
    /* neither CTA of a pair leaves while the other may still arrive on its barriers or write its
     * stages; and every thread's ring waits are over before thread 0 reads whether one expired */
    if (pair) mm_cluster_sync();
    else __syncthreads();
    if (threadIdx.x == 0 && mm_stage_wait_expired && g.error)
        mm_record_failure_to(g.abort_flag, g.error, g.rank, MM_PHASE_GEMM_PIPELINE, -1, mm_stage_wait_expired, blockIdx.x);
    if (threadIdx.x == 0) gemm_clock_end(clock_start);
}

/* The two kernels: FP8 experts in both tile heights' launcher (mm_launch_grouped_gemm), FP4 ones
 * in single CTAs (mm_launch_grouped_gemm_fp4). */
__global__ void __launch_bounds__(MM_TILE_THREADS, 1) grouped_gemm_kernel(mm_grouped_gemm_args g)
{
    grouped_gemm_body<false>(g);
}

__global__ void __launch_bounds__(MM_TILE_THREADS, 1) grouped_gemm_fp4_kernel(mm_grouped_gemm_args g)
{
    grouped_gemm_body<true>(g);
}

#include "gemm_wide.cuh" /* the wide form's kernel, compiled in this unit (it shares the claim counter, the clock sums and the prefix) */

#define PREFIX_THREADS 128

/* One thread block computes the tile prefix on the device: no host sync between the count and
 * the GEMM. wide: the wide form's prefix too (the 128-row one is always written: the modes'
 * activation kernel walks it after GEMM1). With one thread walking the counts (the form before
 * 604c7b0) it cost ~2 us at 32 local experts and ~15 us at 256 (EP1 Flash: ll and normal 25-30 us
 * slower a layer for their two GEMMs). */
/* wide_units: 0, or what wide_tile_start counts (MM_WIDE_UNITS or MM_WIDE_UNITS_N2: mm_prefix_tiles) */
__global__ void __launch_bounds__(PREFIX_THREADS) tile_prefix_kernel(const int32_t *row_count, int experts,
                                                                     int32_t *tile_start, int wide_units)
{
    /* the GEMM may start its launch now; it reads tile_start and its claim counter only after
     * this grid completed */
    asm volatile("griddepcontrol.launch_dependents;");
    __shared__ int warp_sums[PREFIX_THREADS / 32];
    mm_block_tile_prefix(row_count, experts, MM_GEMM_BM, tile_start, warp_sums);
    if (wide_units) mm_block_tile_prefix(row_count, experts, wide_units, wide_tile_start, warp_sums);
    if (threadIdx.x == 0) gemm_claims = 0u;
}

/* The driver's tensor-map encoder, through the runtime (nothing links libcuda directly). */
static cudaError_t tensor_map_encoder(PFN_cuTensorMapEncodeTiled_v12000 *encode)
{
    static PFN_cuTensorMapEncodeTiled_v12000 found = NULL;
    if (!found) {
        cudaDriverEntryPointQueryResult q;
        cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&found, 12000,
                                                         cudaEnableDefault, &q);
        if (e != cudaSuccess) return e;
        if (q != cudaDriverEntryPointSuccess || !found) return cudaErrorNotSupported;
    }
    *encode = found;
    return cudaSuccess;
}

/* `count` encoded descriptors copied side by side to device memory (cudaFree *out). */
static cudaError_t tensor_maps_upload(const CUtensorMap *maps, int count, void **out)
{
    cudaError_t e = cudaMalloc(out, count * sizeof(CUtensorMap));
    if (e != cudaSuccess) return e;
    e = cudaMemcpy(*out, maps, count * sizeof(CUtensorMap), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        cudaFree(*out);
        *out = NULL;
    }
    return e;
}

/* TMA descriptors over [rows][k] FP8 (row stride k bytes) in boxes of `box_rows[i]` rows x 128
 * bytes with the 128-byte swizzle the wgmma descriptors name, `count` of them side by side in
 * device memory (each 128 bytes); rows past the end of the tensor come back as zeros. */
static cudaError_t fp8_rows_maps(const uint8_t *p, uint64_t rows, uint64_t k, uint64_t stride, const int *box_rows,
                                 int count, void **out)
{
    PFN_cuTensorMapEncodeTiled_v12000 encode;
    *out = NULL;
    cudaError_t e = tensor_map_encoder(&encode);
    if (e != cudaSuccess) return e;
    if (k % MM_GEMM_BK || stride < k || stride % 16 || rows == 0 || rows > 0xffffffffull || count < 1 || count > 4)
        return cudaErrorInvalidValue;
    static_assert(sizeof(CUtensorMap) == 128, "the maps lie 128 bytes apart");
    CUtensorMap maps[4];
    for (int i = 0; i < count; i++) {
        cuuint64_t dims[2] = {k, rows}, strides[1] = {stride};
        cuuint32_t box[2] = {MM_GEMM_BK, (cuuint32_t)box_rows[i]}, elem[2] = {1, 1};
        CUresult r = encode(&maps[i], CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)p, dims, strides, box, elem,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS) return cudaErrorInvalidValue;
    }
    return tensor_maps_upload(maps, count, out);
}

extern "C" cudaError_t mm_weight_map_create(const uint8_t *w, uint64_t rows, uint64_t k, void **out)
{
    *out = NULL;
    if (rows % MM_GEMM_BN) return cudaErrorInvalidValue;
    const int box[1] = {MM_GEMM_BN};
    return fp8_rows_maps(w, rows, k, k, box, 1, out);
}

/* FP4 weights' codes [rows][k / 2] bytes in boxes of 64 bytes (a K block) x 128 rows (a weight
 * block) with the 64-byte swizzle (16-byte chunk c of row r at chunk c ^ ((r >> 1) & 3)): the
 * swapped form's reads of 4 bytes from 8 rows a warp (gemm_fp4.cuh) then hit 8 bank groups,
 * unswizzled they hit 2 (4-way conflicts). */
extern "C" cudaError_t mm_fp4_codes_map_create(const uint8_t *codes, uint64_t rows, uint64_t k, void **out)
{
    PFN_cuTensorMapEncodeTiled_v12000 encode;
    *out = NULL;
    cudaError_t e = tensor_map_encoder(&encode);
    if (e != cudaSuccess) return e;
    if (k % MM_GEMM_BK || rows % MM_GEMM_BN || rows == 0 || rows > 0xffffffffull) return cudaErrorInvalidValue;
    CUtensorMap m;
    cuuint64_t dims[2] = {k / 2, rows}, strides[1] = {k / 2};
    cuuint32_t box[2] = {MM_FP4_CODE_BYTES, MM_GEMM_BN}, elem[2] = {1, 1};
    CUresult r = encode(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)codes, dims, strides, box, elem,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return cudaErrorInvalidValue;
    return tensor_maps_upload(&m, 1, out);
}

/* Four descriptors: whole 128-row A blocks and the 64-row halves the CTAs of a pair load (the
 * core), then the wide form's 192-row blocks and 96-row halves. */
extern "C" cudaError_t mm_rows_map_create(const uint8_t *a, uint64_t rows, uint64_t k, void **out)
{
    const int box[4] = {MM_GEMM_BM, MM_GEMM_BM / 2, MM_WIDE_BM, MM_WIDE_BM / 2};
    return fp8_rows_maps(a, rows, k, k, box, 4, out);
}

/* The epilogue's 64 x 64 BF16 boxes (store_half_tma), 128-byte swizzle. */
extern "C" cudaError_t mm_out_map_create(void *out, uint64_t rows, uint64_t n, void **map)
{
    PFN_cuTensorMapEncodeTiled_v12000 encode;
    *map = NULL;
    cudaError_t e = tensor_map_encoder(&encode);
    if (e != cudaSuccess) return e;
    if (n % MM_GEMM_BN || rows == 0 || rows > 0xffffffffull) return cudaErrorInvalidValue;
    CUtensorMap m;
    cuuint64_t dims[2] = {n, rows}, strides[1] = {n * 2};
    cuuint32_t box[2] = {64, 64}, elem[2] = {1, 1};
    CUresult r = encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, out, dims, strides, box, elem,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return cudaErrorInvalidValue;
    return tensor_maps_upload(&m, 1, map);
}

/* The column band of the item order this build walks (MM_GEMM_BAND; gemm's header names it). */
extern "C" int mm_grouped_gemm_band(void)
{
    return MM_GEMM_BAND;
}

extern "C" cudaError_t mm_grouped_gemm_clock_reset(cudaStream_t stream)
{
    void *sum = NULL;
    cudaError_t e = cudaGetSymbolAddress(&sum, gemm_clock_sum);
    if (e == cudaSuccess) e = cudaMemsetAsync(sum, 0, sizeof gemm_clock_sum, stream);
    return e;
}

extern "C" cudaError_t mm_grouped_gemm_clock_read(cudaStream_t stream, unsigned long long *cycles,
                                                  unsigned long long *ns)
{
    unsigned long long sum[2];
    cudaError_t e = cudaMemcpyFromSymbolAsync(sum, gemm_clock_sum, sizeof sum, 0, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess) {
        *cycles = sum[0];
        *ns = sum[1];
    }
    return e;
}

extern "C" int mm_grouped_gemm_smem_bytes(void)
{
    return GEMM_SMEM_BYTES;
}

/* The launch of the grouped GEMM kernel: `pairs` 2-CTA clusters, or (pairs 0) `ctas` single CTAs;
 * attr: storage for the attributes the config points at. It is a programmatic dependent of the
 * launch before it on the stream (tile_prefix_kernel where it runs, else the kernel that wrote
 * the row counts): it may start while that one ends and waits for it (griddepcontrol.wait)
 * before reading the counts; without this, each GEMM paid the gap between two dependent
 * launches and its own set-up in series (~2 us, twice per pipeline, against 86 us for Flash
 * GEMM2 at decode). */
static cudaLaunchConfig_t gemm_launch(int pairs, int ctas, cudaStream_t stream, cudaLaunchAttribute attr[2])
{
    cudaLaunchConfig_t cfg = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = pairs ? 2 : 1;
    attr[1].val.clusterDim.y = 1;
    attr[1].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)(pairs ? 2 * pairs : ctas));
    cfg.blockDim = dim3(MM_TILE_THREADS);
    cfg.dynamicSmemBytes = GEMM_SMEM_BYTES;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = pairs ? 2 : 1;
    return cfg;
}

/* How many pairs can be resident at once (mm_grouped_gemm_prepare): pairs need two SMs of one
 * GPC, so this can be fewer than half the SMs. The same for the wide form's pairs. */
static int pairs_resident = 0, wide_pairs_resident = 0;
/* the tile height asked for (mm_grouped_gemm_set_tile): MM_GEMM_TILE_AUTO or a form's */
static int tile_asked = MM_GEMM_TILE_AUTO;
/* the wide form's scale copies asked for (mm_grouped_gemm_set_wide_scales) */
static int wide_scales_asked = MM_WIDE_SCALES_AUTO;

/* Raises the kernel's shared-memory limit and measures how many CTA pairs fit; call once before
 * the first launch (and before any graph capture). */
extern "C" cudaError_t mm_grouped_gemm_prepare(void)
{
    /* the 128 x 128 kernel with FP8 and with FP4 weights */
    const void *kernels[2] = {(const void *)grouped_gemm_kernel, (const void *)grouped_gemm_fp4_kernel};
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < 2; i++) {
        if ((e = mm_regs_split_ok(kernels[i])) != cudaSuccess) return e;
        e = cudaFuncSetAttribute(kernels[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 GEMM_SMEM_BYTES);
        if (e != cudaSuccess) return e;
    }
    /* the wide form's two kernels (its scale paths): the same threads, registers and shared memory */
    const void *wide_kernels[2] = {(const void *)grouped_gemm_wide_kernel<true>, (const void *)grouped_gemm_wide_kernel<false>};
    for (int i = 0; i < 2; i++) {
        if ((e = mm_regs_split_ok(wide_kernels[i], WIDE_LAUNCH_REGS)) != cudaSuccess) return e;
        e = cudaFuncSetAttribute(wide_kernels[i], cudaFuncAttributeMaxDynamicSharedMemorySize, WIDE_SMEM_BYTES);
        if (e != cudaSuccess) return e;
    }
    int dev = 0, sms = 0;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) return e;
    cudaLaunchAttribute attr[2];
    cudaLaunchConfig_t cfg = gemm_launch(sms / 2, 0, 0, attr);
    e = cudaOccupancyMaxActiveClusters(&pairs_resident, kernels[0], &cfg);
    if (e != cudaSuccess) return e;
    cfg.blockDim = dim3(WIDE_THREADS);
    cfg.dynamicSmemBytes = WIDE_SMEM_BYTES;
    return cudaOccupancyMaxActiveClusters(&wide_pairs_resident, wide_kernels[0], &cfg);
}

extern "C" void mm_grouped_gemm_set_tile(int rows)
{
    tile_asked = rows;
}

extern "C" void mm_grouped_gemm_set_wide_scales(int mode)
{
    wide_scales_asked = mode;
}

extern "C" int mm_grouped_gemm_wide_block_scales(const mm_grouped_gemm_args *g)
{
    /* the grouped form's 16-byte copies need their sources aligned */
    return mm_wide_block_scales(wide_scales_asked, g->n, g->k) || ((uintptr_t)g->a_scale & 15u) != 0 ||
           ((uintptr_t)g->w_scale & 15u) != 0;
}

extern "C" int mm_grouped_gemm_tile_rows(const mm_grouped_gemm_args *g, const int32_t *host_counts)
{
    return mm_gemm_tile_rows(tile_asked, g->a_map != NULL, g->experts, g->n, host_counts,
                             wide_pairs_resident);
}

/* Pairs when the column tiles come in pairs (every row tile then splits into pairs of items on
 * the same rows), prepare found room for them and an expert may have more than 64 rows; else one
 * CTA per tile. */
extern "C" int mm_grouped_gemm_pairs(int n, int ctas, int max_rows)
{
    return mm_tile_pairs(n, ctas, pairs_resident, max_rows);
}

extern "C" cudaError_t mm_launch_grouped_gemm(mm_grouped_gemm_args g, int ctas, int max_rows,
                                              const int32_t *host_counts, cudaStream_t stream)
{
    if (g.n % MM_GEMM_BN || g.k % MM_GEMM_BK) return cudaErrorInvalidValue;
    const int wide = mm_grouped_gemm_tile_rows(&g, host_counts) == MM_WIDE_BM;
    /* the wide form's prefix (and the core's past GEMM_OWN_PREFIX_MAX experts) in a launch of
     * its own; else the core builds it inside (gemm_build_prefix) */
    const int units = !wide ? 0 : mm_wide_narrow2(g.n / MM_GEMM_BN, MM_GEMM_BAND) ? MM_WIDE_UNITS_N2 : MM_WIDE_UNITS;
    if (wide || g.experts > GEMM_OWN_PREFIX_MAX)
        tile_prefix_kernel<<<1, PREFIX_THREADS, 0, stream>>>(g.row_count, g.experts, g.tile_start, units);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    cudaLaunchAttribute attr[2];
    if (wide) {
        int pairs = ctas / 2 < wide_pairs_resident ? ctas / 2 : wide_pairs_resident;
        cudaLaunchConfig_t cfg = gemm_launch(pairs, 0, stream, attr);
        cfg.blockDim = dim3(WIDE_THREADS);
        cfg.dynamicSmemBytes = WIDE_SMEM_BYTES;
        return mm_grouped_gemm_wide_block_scales(&g) ? cudaLaunchKernelEx(&cfg, grouped_gemm_wide_kernel<false>, g)
                                                     : cudaLaunchKernelEx(&cfg, grouped_gemm_wide_kernel<true>, g);
    }
    cudaLaunchConfig_t cfg = gemm_launch(mm_grouped_gemm_pairs(g.n, ctas, max_rows), ctas, stream, attr);
    return cudaLaunchKernelEx(&cfg, grouped_gemm_kernel, g);
}

extern "C" cudaError_t mm_launch_grouped_gemm_fp4(mm_grouped_gemm_args g, int ctas, cudaStream_t stream)
{
    if (g.n % MM_GEMM_BN || g.k % MM_GEMM_BK || !g.w_scale) return cudaErrorInvalidValue; /* the blocks' words */
    if (g.experts > GEMM_OWN_PREFIX_MAX)
        tile_prefix_kernel<<<1, PREFIX_THREADS, 0, stream>>>(g.row_count, g.experts, g.tile_start, 0);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    cudaLaunchAttribute attr[2];
    cudaLaunchConfig_t cfg = gemm_launch(0, ctas, stream, attr);
    cfg.dynamicSmemBytes = GEMM_SMEM_BYTES;
    return cudaLaunchKernelEx(&cfg, grouped_gemm_fp4_kernel, g);
}
