/* The wide form of the standalone grouped GEMM: 192 x 128 tiles in 2-CTA pairs on three math
 * warpgroups (grouped_gemm_wide_kernel), included by gemm.cu, whose launcher picks it for many rows
 * an expert (gemm_schedule.h mm_gemm_tile_rows) and with whose 128 x 128 kernel it shares the
 * launch's device state: the claim counter, the clock sums and the row-tile prefix. Its roles,
 * buffers and synchronization are described at the kernel below. */
#ifndef MEGAMOE_GEMM_WIDE_CUH
#define MEGAMOE_GEMM_WIDE_CUH

/* The wide form: 192 x 128 tiles in 2-CTA pairs (gemm_schedule.h MM_WIDE_BM; the launch picks
 * it, mm_gemm_tile_rows).
 * Roles: 512 threads. Warpgroup 0 (producer, 56 registers) walks the pair's items in a fixed
 * order rotated each wave (CTA r of pair c in wave n: item 2 (n P + (c + n) mod P) + r, P pairs,
 * mm_pair_walk_item; items w and w + 1 share their rows), publishes each in the item
 * ring and streams its K blocks into a 4-stage ring: per stage this CTA's 96 of the block's 192
 * A rows into both CTAs' stages (TMA multicast; a narrow tile's 64 rows by CTA 0) and the weight block
 * (TMA), issued by thread 0; in grouped_gemm_wide_kernel<true> every 4 K blocks the rows' and the
 * weight block's scales for those 4 (one 16-byte cp.async a row, all 128 threads) into one of two
 * scale slots, in <false> each block's scales into its stage, 4 bytes a row (gemm_schedule.h
 * mm_wide_block_scales picks; always <false> where K / 128 is not a multiple of 4). Warpgroups 1-3 (math, 152
 * registers) compute rows 64g..64g+63 of the tile for all 128 columns, each K block's four k32
 * wgmmas into a fresh block sum retired (stage freed, sum promoted) before the next block: the
 * registers hold one accumulator and one block sum, and three warpgroups keep the tensor cores
 * busy through each other's promotions (lab/probes/wide_tile_probe.cu: 1531-1543 TFLOP/s without
 * loads, against 1550-1614 for the core's two warpgroups with a block in flight). A narrow
 * tile (<= 64 rows) runs on warpgroups 1-2, 64 columns each (wide_narrow_consume).
 * Buffers: as the core's, but A must have a rows map (mm_rows_map_create: its 192- and 96-row
 * boxes, and its 64-row one for narrow tiles) and the wide tile prefix is wide_tile_start (tile_start still gets the 128-row prefix,
 * which ll's and normal's activation kernel walks after GEMM1).
 * Shared memory: 4 stages of 41 KB (A 24 KB, B 16 KB, 1 KB of per-block scales), three
 * warpgroups' epilogue boxes (48 KB), two scale slots ([193][4] floats each): 224288 B.
 * Synchronization: the core's (mm_tile_pipe, mm_item_ring) with 12 math warps a CTA; `empty`
 * counts the math warps of both CTAs, `full` thread 0's arrival with the TMA bytes (the whole A
 * block arrives in each CTA; with per-block scales also the 128 threads' cp.async arrivals);
 * scales_full[j] the 128 threads' cp.async arrivals for slot j, waited by the math at a group's
 * first block. A slot is rewritten two groups later, after `empty` of a stage that followed the
 * group's last block (static_assert). A full tile's math waits and releases on the barriers'
 * shared-window addresses, computed once per CTA (wide_release, below). Nothing across pairs. */
#define WIDE_THREADS 512
#define WIDE_MATH_WARPS 12
#define WIDE_STAGES 4
#define WIDE_A_STAGE (MM_WIDE_BM * MM_GEMM_BK)
#define WIDE_STAGE_BYTES (WIDE_A_STAGE + MM_TILE_B_STAGE + MM_TILE_SCALE_BYTES)
#define WIDE_STAGING_BYTES (3 * 2 * MM_OUT_BOX_BYTES)
/* The scales of 4 K blocks at a time (where K / 128 is a multiple of 4): per row 16 contiguous
 * bytes of its [K/128] scales, one cp.async each, into one of two slots beside the ring
 * ([193][4] floats: the tile's rows, then the weight block's 4 scales). */
#define WIDE_GROUP MM_WIDE_SCALE_GROUP /* the launcher's test of K (mm_wide_block_scales) reads the same */
#define WIDE_SLOT_FLOATS ((MM_WIDE_BM + 1) * WIDE_GROUP)
/* A narrow2 item (mm_wide_units: a narrow tile's <= 64 rows over two column tiles): its second
 * weight block in the A area after the 64 rows of A (a stage then as full as a 192-row tile's),
 * its scales in the row of the scale area (slot or stage) after the item's rows. */
#define WIDE_B1_OFFSET (64 * MM_GEMM_BK)
#define WIDE_B1_SCALE_ROW 64
#define WIDE_SLOTS_BYTES (2 * WIDE_SLOT_FLOATS * 4)
#define WIDE_SMEM_BYTES (WIDE_STAGES * WIDE_STAGE_BYTES + 1024 + WIDE_STAGING_BYTES + WIDE_SLOTS_BYTES)
/* 512 x 128 registers at launch: 128 x 56 + 384 x 152 = 65536, the whole file */
#define WIDE_LAUNCH_REGS 128
#define WIDE_PRODUCER_REGS 56
#define WIDE_MATH_REGS 152
static_assert(WIDE_STAGES <= MM_TILE_STAGES, "the wide ring uses mm_tile_pipe's barriers");
/* a scale slot is rewritten for group G + 2 once the producer passed `empty` for block 4 (G + 2):
 * that stage last held block 4 (G + 2) - WIDE_STAGES, which must come after group G's last */
static_assert(WIDE_STAGES <= WIDE_GROUP + 1, "two scale slots cover a ring this deep");
static_assert(WIDE_SMEM_BYTES <= 227 * 1024 - 1024, "the wide ring and its boxes fit one CTA");
static_assert(WIDE_STAGE_BYTES % 1024 == 0 && WIDE_A_STAGE % 1024 == 0, "swizzle atoms on 1 KB boundaries");
static_assert(MM_WIDE_BM + 1 <= MM_TILE_SCALE_BYTES / 4, "the A scales and the weight scale fit the scale area");
static_assert(WIDE_B1_OFFSET + MM_TILE_B_STAGE <= WIDE_A_STAGE && WIDE_B1_OFFSET % 1024 == 0,
              "a narrow2 item's second weight block fits the A area on a swizzle atom");

/* the wide form's unit prefix (mm_wide_units; tile_prefix_kernel writes it; one grouped GEMM at a
 * time per process) */
static __device__ int32_t wide_tile_start[MM_WIDE_MAX_EXPERTS + 1];

typedef struct {
    int rows, a_row0, n0, last, cols; /* cols 2: a narrow2 item (two weight blocks) */
} wide_item;



/* A full tile's K loop waits and releases on the barriers' shared-window addresses, computed
 * once per CTA. From a pointer, each wait and release of a cluster launch read the CTA's cluster id
 * again (S2UR SR_CgaCtaId) on the path from one block's MMAs to the next block's, and ptxas had
 * turned the release back into a branch with a reconvergence (BSSY/BSYNC): the peeled block 0
 * below no longer got it predicated. Lean, the release's address arithmetic sits before the wgmma
 * wait; the peeled block's release is predicated, the loop's (this nvcc) a branch around lane 0's
 * arrivals again: elect.sync kept it predicated and measured even, so the branch stays. Against
 * the pointer form: Flash GEMM1 / GEMM2 at 12288 rows 361 / 202.6 -> 353.5 / 198.9 us, Pro 1052 /
 * 547.7 -> 1037.8 / 542.3; 49152 rows within their spread. A stage's release also arrives on the
 * peer's `empty` (both CTAs read the multicast A). The ring audit's build releases from the
 * pointer, where its bookkeeping sits. */
__device__ __forceinline__ void wide_release(mm_tile_pipe *pipe, int st, unsigned empty0, unsigned empty_peer0)
{
#if !defined(MM_RING_AUDIT)
    mm_tile_release_at(empty0 + 8u * st, empty_peer0 + 8u * st, true);
#else
    mm_tile_release_branch(pipe, st, true);
#endif
}

/* A narrow tile: at most 64 rows (an expert's last, e.g. Pro's 1024 = 5 x 192 + 64), split over
 * two warpgroups of 64 columns each rather than one warpgroup's dependent chain of K blocks
 * (wait, four wgmmas, retire, promote), and loaded as 64 rows by CTA 0 alone (8 KB of A a stage,
 * not 24). Measured within 1-2% of one warpgroup on all 128 columns: what made Pro's 1024 rows as
 * slow as 1152 was the fixed order's shares, not these tiles. */
__device__ __forceinline__ bool wide_tile_narrow(int rows)
{
    return rows <= 64;
}

/* A math warpgroup's wait for K block kb of a wide tile (at a scale group's first block also for
 * the group's slot) and this thread's two rows' scales of it, a_scale * w_scale (0 past the
 * tile's rows): in the group's slot at [r][kb % 4], else in the stage. */
typedef struct {
    float t_lo, t_hi;
} wide_scales;

__device__ __forceinline__ wide_scales wide_wait_block(const uint8_t *stages, mm_tile_pipe *pipe, const mm_ring &ring,
                                                       uint64_t *scales_full, const float *scale_slots,
                                                       const float *&slot_f, uint32_t &group, bool grouped, int kb,
                                                       int rows, int r_lo, int r_hi, int w_row = MM_WIDE_BM,
                                                       unsigned full0 = 0, unsigned scales_full0 = 0,
                                                       long long *slot_done = NULL)
{
    const int st = ring.stage;
    if (grouped && kb % WIDE_GROUP == 0) {
        if (scales_full0) /* the barriers' addresses computed once by the caller (full tiles) */
            mm_mbar_wait_at(scales_full0 + 8u * (group & 1u), (group >> 1) & 1u, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
        else
            mm_mbar_wait(&scales_full[group & 1u], (group >> 1) & 1u, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
        slot_f = scale_slots + (group & 1u) * WIDE_SLOT_FLOATS;
        group++;
    }
    if (full0) mm_mbar_wait_at(full0 + 8u * st, ring.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
    else mm_mbar_wait(&pipe->full[st], ring.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
    MM_AUDIT_ENTER(st);
    const float *sc = grouped ? slot_f + kb % WIDE_GROUP
                              : (const float *)(stages + st * WIDE_STAGE_BYTES + WIDE_A_STAGE + MM_TILE_B_STAGE);
    const int step = grouped ? WIDE_GROUP : 1;
    const float sw = sc[w_row * step]; /* the weight block's scale (a narrow2 item's second: WIDE_B1_SCALE_ROW) */
    const wide_scales t = {r_lo < rows ? sc[r_lo * step] * sw : 0.0f, r_hi < rows ? sc[r_hi * step] * sw : 0.0f};
    return t;
}

/* Math warpgroup wg (0 or 1) of a narrow tile: its rows 0..63 x columns 64 wg..64 wg + 63 over
 * every K block (m64n64k32: the elements' bits are the full form's), promoted into acc. */
__device__ __forceinline__ void wide_narrow_consume(uint8_t *stages, mm_tile_pipe *pipe, mm_ring &ring,
                                                    uint64_t *scales_full, const float *scale_slots, uint32_t &group,
                                                    bool grouped, int kblocks, int rows, int wg,
                                                    float acc[MM_TILE_ACC / 2])
{
    const int t = mm_math_thread() % 128;
    const int r_lo = mm_frag_row(t / 32, t % 32, 0), r_hi = mm_frag_row(t / 32, t % 32, 2);
    const uint64_t da = mm_wgmma_desc(stages), db = mm_wgmma_desc(stages + WIDE_A_STAGE + wg * 64 * 128);
    const float *slot_f = scale_slots;
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC / 2; i++) acc[i] = 0.0f;
    for (int kb = 0; kb < kblocks; kb++) {
        const int st = ring.stage;
        const wide_scales t = wide_wait_block(stages, pipe, ring, scales_full, scale_slots, slot_f, group, grouped, kb,
                                              rows, r_lo, r_hi);
        const uint64_t at = (uint64_t)st * (WIDE_STAGE_BYTES >> 4);
        float blk[MM_TILE_ACC / 2];
        mm_tile_issue_n64(da + at, db + at, blk);
        MM_WGMMA_WAIT(0, 13);
        mm_tile_release_branch(pipe, st, true);
#pragma unroll
        for (int i = 0; i < MM_TILE_ACC / 2; i++) acc[i] = fmaf((i & 2) ? t.t_hi : t.t_lo, blk[i], acc[i]);
        mm_ring_advance(ring);
    }
}

/* Math warpgroup wg (0 or 1) of a narrow2 item: its rows 0..63 x the 128 columns of weight block
 * wg (block 0 in the B area, block 1 at WIDE_B1_OFFSET of the A area), both over the A rows at the
 * stage's start, every K block retired (m64n128k32 as the full form's, then the promotion). */
__device__ __forceinline__ void wide_two_consume(uint8_t *stages, mm_tile_pipe *pipe, mm_ring &ring,
                                                 uint64_t *scales_full, const float *scale_slots, uint32_t &group,
                                                 bool grouped, int kblocks, int rows, int wg, float acc[MM_TILE_ACC])
{
    const int t = mm_math_thread() % 128;
    const int r_lo = mm_frag_row(t / 32, t % 32, 0), r_hi = mm_frag_row(t / 32, t % 32, 2);
    const uint64_t da = mm_wgmma_desc(stages), db = mm_wgmma_desc(stages + (wg == 0 ? WIDE_A_STAGE : WIDE_B1_OFFSET));
    const int w_row = wg == 0 ? MM_WIDE_BM : WIDE_B1_SCALE_ROW;
    const float *slot_f = scale_slots;
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = 0.0f;
    for (int kb = 0; kb < kblocks; kb++) {
        const int st = ring.stage;
        const wide_scales sc = wide_wait_block(stages, pipe, ring, scales_full, scale_slots, slot_f, group, grouped, kb,
                                               rows, r_lo, r_hi, w_row);
        float blk[MM_TILE_ACC];
        mm_tile_issue_ab(da, st, db, st, blk, WIDE_STAGE_BYTES);
        MM_WGMMA_WAIT(0, 14);
        mm_tile_release_branch(pipe, st, true);
        mm_tile_promote(sc.t_lo, sc.t_hi, blk, acc);
        mm_ring_advance(ring);
    }
}

/* Whether warpgroup wg's half of a wide tile goes out by the tensor copies: all its 64 rows
 * valid, BF16, an output map; else from the registers, valid rows only. */
__device__ __forceinline__ bool wide_half_by_tma(const mm_grouped_gemm_args &g, int rows, int wg)
{
    return rows > 64 && g.out_map && !g.out_fp32 && rows >= 64 * (wg + 1);
}

/* A narrow tile's valid rows of this warpgroup's `count` / 2 columns (64 for a narrow tile, 128
 * for a narrow2 item's weight block), from its registers (BF16 or FP32). */
__device__ __forceinline__ void store_narrow_from_registers(void *out, int out_fp32, int n, const float *acc, int count,
                                                            int rows, int a_row0, int n0)
{
    const int t = mm_math_thread() % 128;
#pragma unroll
    for (int i = 0; i < count; i += 2) {
        const int r = mm_frag_row(t / 32, t % 32, i);
        if (r >= rows) continue;
        const size_t at = (size_t)(a_row0 + r) * n + n0 + mm_frag_col(t % 32, i);
        if (out_fp32) *(float2 *)((float *)out + at) = make_float2(acc[i], acc[i + 1]);
        else *(__nv_bfloat162 *)((__nv_bfloat16 *)out + at) = __floats2bfloat162_rn(acc[i], acc[i + 1]);
    }
}

template <bool GROUPED>
__global__ void __launch_bounds__(WIDE_THREADS, 1) grouped_gemm_wide_kernel(mm_grouped_gemm_args g)
{
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ wide_item slot[2];
    __shared__ __align__(8) mm_tile_pipe pipe;
    __shared__ __align__(8) mm_item_ring items;
    __shared__ __align__(8) uint64_t scales_full[2]; /* per slot: the producer's 128 copies landed */
    __shared__ uint64_t clock_start[2];
    uint8_t *stages = mm_tile_stages(smem);
    uint8_t *staging = stages + WIDE_STAGES * WIDE_STAGE_BYTES;
    float *scale_slots = (float *)(staging + WIDE_STAGING_BYTES);
    const int col_tiles = g.n / MM_GEMM_BN, kblocks = g.k / MM_GEMM_BK;
    /* grouped: the scales by 16-byte copies every 4 K blocks, and `full` waits for thread 0's
     * TMAs alone; else each block's scales in its stage, copied by the producer's 128 threads,
     * which all arrive on `full`. A template argument (the launcher checked K / 128 a multiple of
     * 4 and the copies' sources aligned, mm_launch_grouped_gemm; which one: gemm_schedule.h
     * mm_wide_block_scales). Compiled beside each other in one kernel, the per-block path ran 5-7%
     * slower than compiled alone. */
    constexpr bool grouped = GROUPED;
    if (threadIdx.x == 0) {
        gemm_clock_begin(clock_start);
        mm_tile_pipe_init(&pipe, 2, WIDE_MATH_WARPS, grouped ? 1 : MM_PRODUCER_THREADS + 1);
        mm_item_ring_init(&items, WIDE_MATH_WARPS);
        for (int j = 0; j < 2; j++) {
            mm_mbar_init(&scales_full[j], MM_PRODUCER_THREADS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    mm_cluster_sync(); /* the peer's barriers exist before the first remote arrival */
    asm volatile("griddepcontrol.wait;" ::: "memory");
    const int total = wide_tile_start[g.experts] * (col_tiles / 2);
    mm_ring ring = MM_RING_START(WIDE_STAGES);
    uint32_t group = 0; /* both roles count the scale groups in the same order (the slot: group % 2) */

    if (mm_warpgroup() == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(WIDE_PRODUCER_REGS));
        const unsigned rank = mm_cluster_rank();
        const void *half_map = (const uint8_t *)g.a_map + 3 * 128; /* the 96-row box */
        const void *rows64_map = (const uint8_t *)g.a_map + 1 * 128; /* the 64-row box */
        const int pairs = gemm_busy_pairs(total), pair_index = (int)blockIdx.x / 2;
        for (uint32_t n = 0, item;; n++) {
            wide_item *it = &slot[n & 1];
            mm_item_wait_free(&items, n);
            /* the fixed walk over the pairs kept busy, rotated each wave (gemm_schedule.h
             * mm_pair_walk_item); a pair past them takes none */
            item = pair_index >= pairs ? (uint32_t)total
                                       : 2u * (uint32_t)mm_pair_walk_item(pair_index, (int)n, pairs, true) + rank;
            if ((int)item >= total) {
                if (threadIdx.x == 0) it->last = 1;
                mm_item_publish(&items, n);
                break;
            }
            const mm_wide_tile t = mm_wide_locate(wide_tile_start, g.experts, col_tiles, MM_GEMM_BAND, (int)item);
            const int a_row0 = g.row_offset[t.expert] + t.row_tile * MM_WIDE_BM;
            int rows = g.row_count[t.expert] - t.row_tile * MM_WIDE_BM;
            rows = rows < MM_WIDE_BM ? rows : MM_WIDE_BM;
            if (threadIdx.x == 0) {
                it->last = 0;
                it->rows = rows;
                it->a_row0 = a_row0;
                it->n0 = t.col_tile * MM_GEMM_BN;
                it->cols = t.cols;
            }
            mm_item_publish(&items, n);
            mm_inject_stall((int)item);
            const int pt = mm_tid();
            const bool two = t.cols == 2, narrow = two || wide_tile_narrow(rows); /* two: 64 rows of A too */
            /* this thread's scale copies: row pt, and row pt + 128 for pt < 64 (rows past the
             * tile's are not loaded; the math gives them scale 0) */
            const float *s_lo = pt < rows ? g.a_scale + (size_t)(a_row0 + pt) * kblocks : NULL;
            const float *s_hi = pt + 128 < rows ? g.a_scale + (size_t)(a_row0 + pt + 128) * kblocks : NULL;
            const float *s_w = g.w_scale + ((size_t)t.expert * col_tiles + t.col_tile) * kblocks;
            const int w_row0 = t.expert * g.n + t.col_tile * MM_GEMM_BN;
            /* a narrow2 item's second weight block: its scales at row WIDE_B1_SCALE_ROW of the
             * slot (past the item's <= 64 rows), its block in the A area after the 64 rows */
            const float *s_w1 = two ? s_w + kblocks : NULL;
            for (int kb = 0; kb < kblocks; kb++) {
                const int st = ring.stage;
                uint8_t *sa = stages + st * WIDE_STAGE_BYTES, *sb = sa + WIDE_A_STAGE;
                float *sc = (float *)(sb + MM_TILE_B_STAGE);
                const bool group_start = grouped && kb % WIDE_GROUP == 0;
                /* grouped, warps 1-3 act at a group's first block only (its slot is free once
                 * that block's stage is: the static_assert above) and do not poll the others */
                if (!grouped || pt < 32 || group_start) {
                    mm_mbar_wait(&pipe.empty[st], ring.phase ^ 1u, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_EMPTY);
                    MM_AUDIT_REFILL(st);
                }
                /* once a wait of the CTA expired, no more loads (mm_tile_produce's give_up) */
                if (*(volatile uint32_t *)&mm_stage_wait_expired) {
                    mm_ring_advance(ring);
                    continue;
                }
                const unsigned full = (unsigned)__cvta_generic_to_shared(&pipe.full[st]);
                if (pt == 0) {
                    /* a narrow tile's 64 rows come from CTA 0 alone, into both (same rows: a pair) */
                    const int a_bytes = narrow ? 64 * MM_GEMM_BK : WIDE_A_STAGE;
                    mm_mbar_expect_tx(full, a_bytes + (two ? 2 : 1) * MM_TILE_B_STAGE);
                    if (!narrow)
                        mm_tile_tma_a_multicast(sa + rank * (MM_WIDE_BM / 2) * 128, half_map, kb,
                                                a_row0 + (MM_WIDE_BM / 2) * (int)rank, full);
                    else if (rank == 0)
                        mm_tile_tma_a_multicast(sa, rows64_map, kb, a_row0, full);
                    mm_tile_tma_b(sb, mm_tile_b{g.w_map, w_row0, NULL}, kb, full);
                    if (two) mm_tile_tma_b(sa + WIDE_B1_OFFSET, mm_tile_b{g.w_map, w_row0 + MM_GEMM_BN, NULL}, kb, full);
                }
                if (group_start) {
                    float *slot_f = scale_slots + (group & 1u) * WIDE_SLOT_FLOATS;
                    if (s_lo) mm_cp_async16(slot_f + pt * WIDE_GROUP, s_lo + kb);
                    if (s_hi) mm_cp_async16(slot_f + (pt + 128) * WIDE_GROUP, s_hi + kb);
                    if (pt == MM_PRODUCER_THREADS - 1) mm_cp_async16(slot_f + MM_WIDE_BM * WIDE_GROUP, s_w + kb);
                    if (two && pt == MM_PRODUCER_THREADS - 2) mm_cp_async16(slot_f + WIDE_B1_SCALE_ROW * WIDE_GROUP, s_w1 + kb);
                    const unsigned sf = (unsigned)__cvta_generic_to_shared(&scales_full[group & 1u]);
                    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(sf) : "memory");
                    group++;
                } else if (!grouped) {
                    if (s_lo) mm_cp_async4(sc + pt, s_lo + kb);
                    if (s_hi) mm_cp_async4(sc + 128 + pt, s_hi + kb);
                    if (pt == MM_PRODUCER_THREADS - 1) mm_cp_async4(sc + MM_WIDE_BM, s_w + kb);
                    if (two && pt == MM_PRODUCER_THREADS - 2) mm_cp_async4(sc + WIDE_B1_SCALE_ROW, s_w1 + kb);
                    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(full) : "memory");
                }
                mm_ring_advance(ring);
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(WIDE_MATH_REGS));
        const int wg = mm_warpgroup() - 1;
        const int r_lo = mm_acc_row(0), r_hi = mm_acc_row(2);
        /* the barriers' shared-window addresses, once (wide_release) */
        const unsigned full0 = (unsigned)__cvta_generic_to_shared(&pipe.full[0]);
        const unsigned scales_full0 = (unsigned)__cvta_generic_to_shared(&scales_full[0]);
        const unsigned empty0 = (unsigned)__cvta_generic_to_shared(&pipe.empty[0]);
        unsigned empty_peer0 = empty0;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(empty_peer0) : "r"(empty0), "r"(mm_cluster_rank() ^ 1u));
        for (uint32_t n = 0;; n++) {
            const wide_item *it = &slot[n & 1];
            const bool ready = mm_item_wait_ready(&items, n, MM_STAGE_WAIT_NS);
            if (!mm_named_barrier_and(GEMM_BAR_WARPGROUP + wg, 128, ready && !it->last)) break;
            const int rows = it->rows, a_row0 = it->a_row0, n0 = it->n0;
            float acc[MM_TILE_ACC]; /* zeroed at the first K block's promotion */
            const bool two = it->cols == 2, narrow = two || wide_tile_narrow(rows);
            if (narrow ? wg == 2 : rows <= 64 * wg) { /* no rows for this warpgroup: only free the stages */
#pragma unroll
                for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = 0.0f;
                if (grouped) group += kblocks / WIDE_GROUP; /* its scales are not read */
                for (int kb = 0; kb < kblocks; kb++) {
                    mm_mbar_wait(&pipe.full[ring.stage], ring.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
                    MM_AUDIT_ENTER(ring.stage);
                    mm_tile_release_branch(&pipe, ring.stage, true);
                    mm_ring_advance(ring);
                }
            } else if (two) {
                wide_two_consume(stages, &pipe, ring, scales_full, scale_slots, group, grouped, kblocks, rows, wg, acc);
                mm_item_release(&items, n);
                store_narrow_from_registers(g.out, g.out_fp32, g.n, acc, MM_TILE_ACC, rows, a_row0, n0 + MM_GEMM_BN * wg);
                continue;
            } else if (narrow) {
                float acc_n[MM_TILE_ACC / 2];
                wide_narrow_consume(stages, &pipe, ring, scales_full, scale_slots, group, grouped, kblocks, rows, wg, acc_n);
                mm_item_release(&items, n);
                store_narrow_from_registers(g.out, g.out_fp32, g.n, acc_n, MM_TILE_ACC / 2, rows, a_row0, n0 + 64 * wg);
                continue;
            } else {
                const uint64_t da = mm_wgmma_desc(stages + wg * 64 * 128), db = mm_wgmma_desc(stages + WIDE_A_STAGE);
                const float *slot_f = scale_slots;
                /* K block 0 apart (acc zeroed once its MMAs are issued): when it was peeled ptxas
                 * predicated the loop's stage release instead of branching around it with a
                 * reconvergence (BSSY/BSYNC) between each block's wgmma wait and its promotion,
                 * 2-4% faster at 12288-49152 rows. Later the loop's branch came back; the lean
                 * release (above) keeps block 0's predicated, and elect.sync removing the loop's
                 * measured even. Check the SASS after touching this loop. */
                {
                    const int st = ring.stage;
                    const wide_scales t = wide_wait_block(stages, &pipe, ring, scales_full, scale_slots, slot_f, group,
                                                          grouped, 0, rows, r_lo, r_hi, MM_WIDE_BM, full0, scales_full0,
                                                          NULL);
                    float blk[MM_TILE_ACC];
                    mm_tile_issue_ab(da, st, db, st, blk, WIDE_STAGE_BYTES);
                    MM_WGMMA_WAIT(0, 12);
                    wide_release(&pipe, st, empty0, empty_peer0);
#pragma unroll
                    for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = 0.0f;
                    mm_tile_promote(t.t_lo, t.t_hi, blk, acc);
                    mm_ring_advance(ring);
                }
                for (int kb = 1; kb < kblocks; kb++) {
                    const int st = ring.stage;
                    const wide_scales t = wide_wait_block(stages, &pipe, ring, scales_full, scale_slots, slot_f, group,
                                                          grouped, kb, rows, r_lo, r_hi, MM_WIDE_BM, full0, scales_full0);
                    float blk[MM_TILE_ACC];
                    mm_tile_issue_ab(da, st, db, st, blk, WIDE_STAGE_BYTES);
                    MM_WGMMA_WAIT(0, 12);
                    wide_release(&pipe, st, empty0, empty_peer0);
                    mm_tile_promote(t.t_lo, t.t_hi, blk, acc);
                    mm_ring_advance(ring);
                }
            }
            mm_item_release(&items, n);
            if (!wide_half_by_tma(g, rows, wg)) {
                store_rows_from_registers(g.out, g.out_fp32, g.n, acc, rows, a_row0, n0);
                continue;
            }
            uint32_t packed[MM_TILE_ACC / 2];
            pack_bf16(acc, packed);
            store_half_tma(g, staging, packed, a_row0, n0);
        }
        /* the last tile's rows are written before the kernel ends */
        if (mm_math_thread() % 128 == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
    mm_cluster_sync();
    if (threadIdx.x == 0 && mm_stage_wait_expired && g.error)
        mm_record_failure_to(g.abort_flag, g.error, g.rank, MM_PHASE_GEMM_PIPELINE, -1, mm_stage_wait_expired, blockIdx.x);
    if (threadIdx.x == 0) gemm_clock_end(clock_start);
}

#endif
