/* The fused kernel's schedule (fused.cu): which GEMM items it runs and in what form (dual,
 * compact, folded extra rows, the hand-off form), where their rows and activations live, how the
 * dispatch rounds split the tokens, and how the CTAs find their items from the counts. Plain
 * __host__ __device__ functions: the kernel, plan's floors and the CPU tests (test_gemm_schedule.c)
 * compute the same answers. The GEMM core's own tile schedule is gemm_schedule.h. */
#ifndef MEGAMOE_FUSED_SCHEDULE_H
#define MEGAMOE_FUSED_SCHEDULE_H

#include "gemm_schedule.h"

/* The fused kernel's GEMM items (fused.cu, phase 3): all GEMM1 items (row tile, 128-block of I,
 * gate and up together), then all GEMM2 items (row tile, h_width adjacent 128-blocks of H). A
 * dual item streams two weight blocks over one pass of its A rows: every GEMM1 tile of more than
 * MM_FUSED_SMALL_ROWS rows, and, when the row tiles average more than MM_FUSED_DUAL_MIN_AVG_ROWS
 * rows (`large`: an expert's several tiles re-read its weights, L2 feeds them and the math is the
 * limit), every item, GEMM2's as pairs of H blocks. With fewer rows a small tile is bound by the
 * weight stream from HBM, which wants each stage freed as soon as its own MMAs are done. A dual
 * item of <= MM_FUSED_SMALL_ROWS rows is split by halves over the two math warpgroups. A tile of
 * <= MM_FUSED_TINY_ROWS rows (decode: a few tokens an expert) is *compact*: dual, both weight
 * blocks of a K block in one stage (mm_tile_produce with `compact`), since its stream is latency-bound
 * per CTA and wants bytes in flight; GEMM2 takes pairs of H blocks then too when every tile is
 * tiny and halving the items saves rounds of the grid (mm_fused_tiny_pairs). Measured against
 * pairs for every GEMM2 item and dual for every GEMM1 item: both 4-18% slower at 512-1024
 * tokens. */
#define MM_FUSED_SMALL_ROWS 64
#define MM_FUSED_TINY_ROWS MM_TILE_TINY_ROWS
#define MM_FUSED_DUAL_MIN_AVG_ROWS 64

MM_HD int mm_fused_large(int rows, int tiles)
{
    return rows > MM_FUSED_DUAL_MIN_AVG_ROWS * tiles;
}

/* A tile's extra rows (`large` calls): an expert whose rows end 1..MM_FUSED_EXTRA_ROWS past a
 * multiple of 128 folds them into its last full tile instead of a tile of their own, which would
 * stream the expert's whole weights through an SM for a few rows (at large batches the bytes each
 * SM receives per FLOP are the limit). The math computes them as the narrow side of swapped MMAs
 * (the weight block's rows as the 64-row side, m64n8k32: the same bits as the core's form,
 * lab/probes/swap_probe.cu); their A rows ride in the stage's tiny area. How many a tile of an
 * expert with `rows` rows carries (only its last one does). */
#define MM_FUSED_EXTRA_ROWS 8

/* Whether a call folds extra rows: a large one whose GEMM2 items are pairs of H blocks, so every
 * item of a tile is a dual pass (mm_fused_dual), the one pass that computes them. */
MM_HD int mm_fused_folds(int large, int h_blocks)
{
    return large && h_blocks % 2 == 0;
}

MM_HD int mm_fused_extra_rows(int rows, int large)
{
    const int rem = rows % MM_GEMM_BM;
    return large && rows > MM_GEMM_BM && rem <= MM_FUSED_EXTRA_ROWS ? rem : 0;
}

/* Which of the fused kernel's two forms a call launches (the host knows its tokens, not the
 * counts): the one that can fold extra rows, whose loops carry the swapped MMAs and whose producer
 * re-reads threadIdx.x (2-4% slower on tiles that fold nothing), when an
 * expert's expected rows (ranks x tokens x topk / experts) lie within MM_FUSED_FOLD_WINDOW of 128:
 * there about half the experts need a second tile and half of those hold 1..8 rows in it (Pro at
 * 128 rows an expert, one GPU: -3.5%). Near 256 or 384 rows the spread is wider, 15-20% of the
 * experts fold, and the form's cost eats the gain (V3 at 256 rows: equal). */
#define MM_FUSED_FOLD_WINDOW 16

MM_HD int mm_fused_fold_kernel(long long tokens, int topk, int ranks, int experts)
{
    if (experts < 1 || tokens < 1) return 0;
    const long long rows = (long long)ranks * tokens * topk / experts;
    return rows >= MM_GEMM_BM - MM_FUSED_FOLD_WINDOW && rows <= MM_GEMM_BM + MM_FUSED_FOLD_WINDOW;
}

/* Whether a fused call with FP4 experts runs the swapped form (fused.cu fused_swapped_rows: every
 * tile in passes of <= 64 rows with the weights expanded into wgmma's registers) rather than the
 * FP4 form of the FP8 items (each weight block expanded into the stage): when a local expert
 * expects at most MM_FUSED_FP4_SWAP_ROWS rows (tokens x topk x ranks / experts). Measured on one
 * H100 with the swapped form's promotion as it is now (the limit at 64 against 38, alternated in
 * one run, us): Flash EP8 slice 39 rows an expert (208 tokens a rank) 348.7 -> 289.3, 48 rows
 * (256) 361.9 -> 304.7, 55.5 rows (296) 368.7 -> 315.2, 64 rows (341) 393.1 -> 381.0; Pro EP8
 * slice 40 rows (320) 1133.2 -> 873.1, 50 rows (400) 1184.9 -> 966.6, but 64 rows (512) 1268.2
 * -> 1321.9. So the limit sits below 64, past the largest row count measured faster on both
 * models; at 96-128 rows (512-4096 tokens on the Flash slice) the swapped form is 1.4-1.5x
 * slower. A call whose experts get more rows than expected still runs correctly (a tile of more
 * rows in passes of up to 64). */
#define MM_FUSED_FP4_SWAP_ROWS 56
MM_HD int mm_fused_fp4_swapped(long long tokens, int topk, int ranks, int experts)
{
    if (tokens < 1 || topk < 1 || ranks < 1 || experts < 1) return 0;
    return (long long)ranks * tokens * topk <= (long long)MM_FUSED_FP4_SWAP_ROWS * experts;
}

/* Whether a fused call runs the hand-off form (fused.cu handoff_arm): not the folding one, a bit
 * per I block fits a word (I / 128 <= 32), and the GEMM1 items expected on a rank fit one wave
 * of `ctas` CTAs (times MM_FUSED_HANDOFF_MARGIN): the rank's experts touched when each of
 * tokens x ranks tokens picks topk distinct experts of `experts` uniformly, times the I blocks.
 * Flash at 1 token: 5.9 experts x 16 = 95 items on 132 CTAs at EP1, EP2 and EP8 (yes); V3 at 1
 * token: 8 x 16 = 128 at EP1 (yes: -2.5 us on one GPU), 126 at EP2 (yes, unmeasured); Pro at 1
 * token: 6 x 24 = 144 (no: its second wave of GEMM1 items is the critical path); Flash at 2
 * tokens: 185 (no). A call whose routing touches more experts than expected still runs correctly,
 * only without the gain (its stragglers share HBM with early GEMM2 items: ~1 us at Pro's 12). */
MM_HD int mm_fused_handoff_kernel(long long tokens, int topk, int ranks, int experts, int inter, int ctas)
{
    if (tokens < 1 || topk < 1 || topk > experts || ranks < 1 || experts < ranks || inter / 128 > 32 || ctas < 1 ||
        mm_fused_fold_kernel(tokens, topk, ranks, experts))
        return 0;
    const double picks = (double)tokens * ranks; /* tokens, each picking topk distinct experts */
    if (picks * topk > (double)ctas * experts) return 0; /* far past one wave: skip the estimate */
    const double touched = (double)(experts / ranks) * (1.0 - exp(picks * log1p(-(double)topk / experts)));
    return touched * (inter / 128) <= ctas;
}

/* The fused kernel's forms (fused.cu, one instantiation each) and the one a call takes
 * (mm_launch_fused): FP4 experts run the swapped form or the FP4 form of the FP8 items; FP8 the
 * folding form near 128 rows an expert, the hand-off form when the GEMM1 items fit a wave, else
 * the base form. `tokens`, `ranks`, `experts`: a rank's tokens, the EP size and all experts of
 * the deployment (an EP slice passes the deployment it emulates, so that it runs that rank's
 * form). */
enum { MM_FUSED_FORM_BASE, MM_FUSED_FORM_FOLD, MM_FUSED_FORM_HANDOFF, MM_FUSED_FORM_FP4, MM_FUSED_FORM_FP4_SWAPPED };

MM_HD int mm_fused_kernel_form(long long tokens, int topk, int ranks, int experts, int inter, int ctas, int fp4)
{
    if (fp4) return mm_fused_fp4_swapped(tokens, topk, ranks, experts) ? MM_FUSED_FORM_FP4_SWAPPED : MM_FUSED_FORM_FP4;
    if (mm_fused_fold_kernel(tokens, topk, ranks, experts)) return MM_FUSED_FORM_FOLD;
    if (mm_fused_handoff_kernel(tokens, topk, ranks, experts, inter, ctas)) return MM_FUSED_FORM_HANDOFF;
    return MM_FUSED_FORM_BASE;
}

/* A call's form (mm_launch_fused): `tokens` of this rank, of `ranks`, over `experts` local x
 * ranks; an EP slice (slice_ranks N > 0, slice_tokens a rank's batch there) runs on one rank the
 * E / N experts of EP N, and takes the form of that deployment's rank. */
MM_HD int mm_fused_call_form(long long tokens, int slice_tokens, int slice_ranks, int topk, int ranks, int experts,
                             int inter, int ctas, int fp4)
{
    if (slice_ranks > 0) return mm_fused_kernel_form(slice_tokens, topk, slice_ranks, experts * slice_ranks, inter, ctas, fp4);
    return mm_fused_kernel_form(tokens, topk, ranks, experts, inter, ctas, fp4);
}

/* An expert's row tiles in the fused kernel: 128 rows each, but for the extra rows folded into
 * the last one. */
MM_HD int mm_fused_expert_tiles(int rows, int large)
{
    return mm_row_tiles(rows) - (mm_fused_extra_rows(rows, large) > 0);
}

/* Where act keeps a row tile's 128 rows and an expert's extra rows: the extra rows of the el
 * local experts first (MM_FUSED_EXTRA_ROWS each), then the row tiles (layout.h sizes it). */
MM_HD size_t mm_fused_act_tile_row(int el, int tile)
{
    return (size_t)el * MM_FUSED_EXTRA_ROWS + (size_t)tile * MM_GEMM_BM;
}

MM_HD size_t mm_fused_act_extra_row(int le, int j)
{
    return (size_t)le * MM_FUSED_EXTRA_ROWS + (size_t)j;
}

/* 128-blocks of H per GEMM2 item; tiny: no expert has more than MM_FUSED_TINY_ROWS rows and the
 * pairs save rounds (mm_fused_tiny_pairs) */
MM_HD int mm_fused_h_width(int h_blocks, int large, int tiny)
{
    return h_blocks % 2 == 0 && (large || tiny) ? 2 : 1;
}

/* A compact pair item (two H blocks in one stage per K block) takes ~1.7x a single item's time
 * (measured at 1-8 tokens, 1.5-1.9x), x10 */
#define MM_FUSED_PAIR_COST_X10 17

/* Whether GEMM2 pairs of H blocks save time over `ctas` CTAs when every tile is tiny, counted in
 * rounds of the grid (Flash EP2: 1 token, 6 tiles: 192 single items are 2 rounds, 96 pairs 1
 * round -> yes; 2 tokens, 12 tiles: 3 rounds against 2 x 1.7 -> no). */
MM_HD bool mm_fused_tiny_pairs(int h_blocks, int tiles, int ctas)
{
    if (h_blocks % 2 || ctas < 1) return false;
    const int single = (tiles * h_blocks + ctas - 1) / ctas, pairs = (tiles * h_blocks / 2 + ctas - 1) / ctas;
    return 10 * single > MM_FUSED_PAIR_COST_X10 * pairs;
}

/* The fused kernel's row-tile schedule from the counts (cnt[e * ranks + s]: rows sender s sent
 * to local expert e), split over `lanes` lanes of a warp so no thread walks every expert alone
 * (one thread did: 11-12 us of every call, on the critical path). Lane `lane`
 * owns experts [lane * per, lane * per + per), per = ceil(el / lanes): first its sums
 * (mm_fused_schedule_sums: unfolded row tiles, rows, most rows of one expert, foldable experts),
 * then, given the row tiles of the lanes before it (an exclusive scan of tiles - folds in a
 * `large` call, else of tiles), its experts' tile_start (mm_fused_schedule_write). The result is
 * the prefix of mm_fused_expert_tiles over the experts. */
typedef struct {
    int tiles, rows, most;
    int folds; /* experts whose extra rows a `large` call folds (mm_fused_extra_rows) */
} mm_fused_lane_sums;

MM_HD mm_fused_lane_sums mm_fused_schedule_sums(const int *cnt, int el, int ranks, int lane, int lanes)
{
    const int per = (el + lanes - 1) / lanes, e0 = lane * per, e1 = e0 + per < el ? e0 + per : el;
    mm_fused_lane_sums r = {0, 0, 0, 0};
    for (int e = e0; e < e1; e++) {
        int rows = 0;
        for (int s = 0; s < ranks; s++) rows += cnt[e * ranks + s];
        r.tiles += mm_row_tiles(rows);
        r.rows += rows;
        r.most = rows > r.most ? rows : r.most;
        r.folds += mm_fused_extra_rows(rows, 1) > 0;
    }
    return r;
}

/* large: mm_fused_large over all lanes' rows and unfolded tiles (folding keeps it true). */
MM_HD void mm_fused_schedule_write(const int *cnt, int el, int ranks, int lane, int lanes, int tiles_before,
                                   int large, int *tile_start)
{
    const int per = (el + lanes - 1) / lanes, e0 = lane * per, e1 = e0 + per < el ? e0 + per : el;
    for (int e = e0; e < e1; e++) {
        int rows = 0;
        for (int s = 0; s < ranks; s++) rows += cnt[e * ranks + s];
        tile_start[e] = tiles_before;
        tiles_before += mm_fused_expert_tiles(rows, large);
    }
}

MM_HD bool mm_fused_compact(bool is_gemm1, int rows, int h_width)
{
    return rows <= MM_FUSED_TINY_ROWS && (is_gemm1 || h_width == 2);
}

MM_HD bool mm_fused_dual(bool is_gemm1, int rows, int large, int h_width)
{
    return is_gemm1 ? rows > MM_FUSED_SMALL_ROWS || large || rows <= MM_FUSED_TINY_ROWS : h_width == 2;
}

/* The fused kernel's shared memory beside its fixed part (stage ring, staging area, extra-row
 * accumulators): every expert's count (4 bytes) and the tile schedule's start per local expert
 * plus 4 words (fused.cu mm_fused_smem_bytes). */
MM_HD size_t mm_fused_smem_counts_bytes(int experts, int ranks)
{
    return (size_t)experts * 4 + ((size_t)experts / ranks + 4) * 4;
}

/* The most experts (a multiple of `ranks`) whose counts fit `room` bytes with the fixed part
 * `fixed`; 0 when not even one per rank does. */
MM_HD int mm_fused_max_experts(size_t room, size_t fixed, int ranks)
{
    if (ranks < 1 || room < fixed + mm_fused_smem_counts_bytes(ranks, ranks)) return 0;
    /* one more expert on every rank costs ranks * 4 + 4 bytes */
    return (int)((room - fixed - mm_fused_smem_counts_bytes(0, ranks)) / ((size_t)ranks * 4 + 4)) * ranks;
}

/* Counts first (fused.cu): a rank with at most this many tokens, and no more than one per CTA,
 * publishes its counts from its ids at the start of a call and signals each row. */
#define MM_FUSED_COUNTS_FIRST_MAX_TOKENS 32

MM_HD bool mm_fused_counts_first(int tokens, int ctas)
{
    return tokens <= MM_FUSED_COUNTS_FIRST_MAX_TOKENS && tokens <= ctas;
}

/* A counts-first pair's slot among its expert's rows from this rank: how many pairs before it in
 * (token, k) order chose the same expert, so the slots of an expert are 0..count-1 without
 * atomics. ids: [tokens][topk], -1 for a masked k. */
MM_HD int mm_fused_first_slot(const int32_t *ids, int t, int k, int topk)
{
    const int e = ids[t * topk + k];
    int slot = 0;
    for (int i = 0; i < t * topk + k; i++) slot += ids[i] == e;
    return slot;
}

/* fused's dispatch rounds (fused.cu dispatch_tokens): each round's tokens come into shared memory
 * as BF16 rows (2 * hidden bytes) and leave as wire rows (row_bytes), both double-buffered so the
 * next round's loads and this round's sends overlap. Tokens a round can hold in `span` bytes, at
 * most `most`; 0 when not even one fits (the host refuses such a hidden size). */
MM_HD int mm_fused_dispatch_group(unsigned hidden, unsigned row_bytes, unsigned span, int most)
{
    const unsigned per_token = 2u * (2u * hidden + row_bytes); /* hidden <= 65536 (config.c): no overflow */
    const unsigned fit = per_token ? span / per_token : 0u;
    return fit < (unsigned)most ? (int)fit : most;
}

/* The dispatch's rounds: CTA `cta` of `ctas` takes tokens cta, cta + ctas, ... in rounds of `group`;
 * token g of its round j, and how many of round j's tokens exist (0: the CTA is done; a round
 * short of `group` is its last). */
MM_HD int mm_fused_round_token(int cta, int ctas, int group, int j, int g)
{
    return cta + (j * group + g) * ctas;
}

MM_HD int mm_fused_round_tokens(int tokens, int cta, int ctas, int group, int j)
{
    const int first = mm_fused_round_token(cta, ctas, group, j, 0);
    if (first >= tokens) return 0;
    const int n = (tokens - first + ctas - 1) / ctas;
    return n < group ? n : group;
}

/* GEMM2 item g (counted from the first GEMM2 item): its row tile and first 128-block of H. */
MM_HD int mm_fused_gemm2_tile(int g, int h_items)
{
    return g / h_items;
}

MM_HD int mm_fused_gemm2_block(int g, int h_items, int h_width)
{
    return g % h_items * h_width;
}

/* The staged combine (fused.cu phase 5, combine_staged). A unit is one token's
 * `chunk` columns: its valid k's rows come into shared memory by one bulk copy each, and a
 * warpgroup (a thread per 16-byte column) sums them from there. Loads from registers held ~2.8
 * rows of 16 bytes a thread in flight at the EP8 slice (~1.4 valid of 6 slots), ~0.8 TB/s; a ring
 * of bulk copies holds tens of KB a SM. The chunk: the fewest equal parts of hidden of at most
 * MM_COMBINE_CHUNK_MOST columns (one 16-byte column a thread of the warpgroup), each a multiple
 * of 128 columns (hidden's quantization blocks; parts = hidden / 128 always is one); 0 when
 * hidden is not a multiple of 128 (the flat combine then). */
#define MM_COMBINE_CHUNK_MOST 1024
#define MM_COMBINE_GROUP_THREADS 128
/* A warpgroup's ring is cut into `regions` equal regions (mm_combine_regions), each as large as a
 * unit with every k valid; units go in batches, a batch the consecutive units that fit one
 * region (mm_combine_batch_end), at most MM_COMBINE_BATCH_MOST of them (one issuing lane each). A
 * batch costs one barrier wait, one proxy fence and one warpgroup barrier whatever its units: the
 * EP8 slice's units hold ~1.4 valid rows of 6, and per unit those fixed costs outweighed the rows.
 * regions - 1 batches are in flight while one is summed. Masks (a byte per unit: bit k, k valid)
 * are read MM_COMBINE_AHEAD units at a time into two buffers. */
#define MM_COMBINE_REGIONS_MOST 8
#define MM_COMBINE_BATCH_MOST 8
#define MM_COMBINE_AHEAD 128
/* a batch of masks is rewritten once the units before the previous batch are summed; the issue
 * runs at most regions batches (plus one probe) ahead of that: combine_staged relies on it */
#if (MM_COMBINE_REGIONS_MOST + 1) * MM_COMBINE_BATCH_MOST >= MM_COMBINE_AHEAD
#error "the staged combine's issue would read masks not yet written"
#endif

MM_HD int mm_combine_chunk(int hidden)
{
    if (hidden < 128 || hidden % 128) return 0;
    for (int parts = (hidden + MM_COMBINE_CHUNK_MOST - 1) / MM_COMBINE_CHUNK_MOST;; parts++)
        if (hidden / 128 % parts == 0) return hidden / parts;
}

/* A warpgroup's part of the staged combine's shared memory: the head (a barrier and a batch's
 * unit count a region, two batches of masks) of every group first, then one ring each. */
typedef struct {
    uint64_t full[MM_COMBINE_REGIONS_MOST];
    uint32_t count[MM_COMBINE_REGIONS_MOST]; /* the units of the batch in each region */
    uint8_t mask[2][MM_COMBINE_AHEAD];
} mm_combine_head;

MM_HD unsigned mm_combine_heads_bytes(int groups)
{
    return ((unsigned)groups * (unsigned)sizeof(mm_combine_head) + 127u) & ~127u;
}

/* Each warpgroup's ring in a span of `span` bytes (a multiple of 128), 0 when the heads do not fit. */
MM_HD unsigned mm_combine_ring_bytes(unsigned span, int groups)
{
    const unsigned heads = mm_combine_heads_bytes(groups);
    return span > heads ? (span - heads) / (unsigned)groups & ~127u : 0u;
}

/* How many regions a ring of `ring` bytes holds for units of at most `unit_most` bytes (top-k
 * rows of a chunk): as many as fit, at most MM_COMBINE_REGIONS_MOST; 0 when not one does. */
MM_HD int mm_combine_regions(unsigned ring, unsigned unit_most)
{
    if (!unit_most) return 0;
    const unsigned r = ring / unit_most;
    return r < MM_COMBINE_REGIONS_MOST ? (int)r : MM_COMBINE_REGIONS_MOST;
}

/* A region's bytes (a multiple of 128, at least unit_most when regions > 0). */
MM_HD unsigned mm_combine_region_bytes(unsigned ring, int regions)
{
    return regions > 0 ? ring / (unsigned)regions & ~127u : 0u;
}

/* Bits set in m (the valid rows of a unit's mask). */
MM_HD int mm_combine_rows(unsigned m)
{
#ifdef __CUDA_ARCH__
    return __popc(m);
#else
    int c = 0;
    for (; m; m &= m - 1) c++;
    return c;
#endif
}

/* The mask of unit j in the two mask buffers (mask2: [2][MM_COMBINE_AHEAD]). */
MM_HD unsigned mm_combine_mask_at(const uint8_t *mask2, long long j)
{
    return mask2[((j / MM_COMBINE_AHEAD) & 1) * MM_COMBINE_AHEAD + j % MM_COMBINE_AHEAD];
}

/* The batch starting at unit j of n: the end of the longest run of at most MM_COMBINE_BATCH_MOST
 * units from j whose valid rows (row bytes each) fit `region` bytes; j + 1 at least (a unit with
 * every k valid fits a region). */
MM_HD long long mm_combine_batch_end(const uint8_t *mask2, long long j, long long n, unsigned region,
                                     unsigned row_bytes)
{
    long long end = j;
    unsigned bytes = 0;
    while (end < n && end - j < MM_COMBINE_BATCH_MOST) {
        const unsigned m = mm_combine_mask_at(mask2, end), b = (unsigned)mm_combine_rows(m) * row_bytes;
        if (end > j && bytes + b > region) break;
        bytes += b;
        end++;
    }
    return end;
}

/* The same cut as combine_staged's warp 0 makes it, a lane a unit: unit j + i is in the batch when
 * i is under MM_COMBINE_BATCH_MOST and the units left, and the rows of units j..j + i (`upto`
 * bytes, a prefix sum over the lanes) fit the region or i is 0. The lanes that are form a prefix
 * (upto grows with i), and their count is mm_combine_batch_end(...) - j (test_gemm_schedule.c). */
MM_HD bool mm_combine_in_batch(int i, unsigned upto, long long left, unsigned region)
{
    return i < MM_COMBINE_BATCH_MOST && i < left && (i == 0 || upto <= region);
}

/* Whether a call combines through shared memory: a chunk exists, top-k is at most 8 (a unit's
 * valid-k mask is a byte), a unit with every k valid fits a ring, and every warpgroup of every CTA
 * gets at least MM_COMBINE_STAGED_MIN_UNITS units (below that the ring has nothing to overlap
 * and the flat combine's direct loads are one latency less). */
#define MM_COMBINE_STAGED_MIN_UNITS 4

MM_HD int mm_combine_staged_call(long long tokens, int hidden, int topk, int ctas, int groups, unsigned span)
{
    const int chunk = mm_combine_chunk(hidden);
    if (!chunk || topk < 1 || topk > 8 || ctas < 1 || groups < 1) return 0;
    if (mm_combine_regions(mm_combine_ring_bytes(span, groups), (unsigned)topk * (unsigned)chunk * 2u) < 1) return 0;
    return tokens * (hidden / chunk) >= (long long)ctas * groups * MM_COMBINE_STAGED_MIN_UNITS;
}

#endif
