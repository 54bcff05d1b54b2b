/* Tile schedule of the grouped GEMM, host- and device-callable (CPU-tested).
 *
 * Expert e owns rows [row_offset[e], row_offset[e] + row_count[e]) of A and of the output (the
 * contiguous form: offsets are a prefix sum, segments optionally padded; the masked form:
 * row_offset[e] = e * max_rows). It is cut into ceil(count / BM) row tiles, each paired with every
 * one of N / BN column tiles. tile_start[e] is the prefix sum of row tiles, so a flat work index
 * maps to (expert, row tile, column tile) by a binary search; tiles never straddle experts. */
#ifndef MEGAMOE_GEMM_SCHEDULE_H
#define MEGAMOE_GEMM_SCHEDULE_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recipe.h" /* MM_HD */

#define MM_GEMM_BM 128
#define MM_GEMM_BN 128
#define MM_GEMM_BK 128

MM_HD int mm_row_tiles(int rows)
{
    return (rows + MM_GEMM_BM - 1) / MM_GEMM_BM;
}

/* An expert's row tiles `bm` rows high (bm > 0; a negative count has none): what every prefix,
 * the host's and the device's (tile_prefix.cuh), counts per expert. Unsigned, so the division by
 * a power of two stays a shift: as a signed one through this call nvcc added a sign fix-up, and
 * the device prefix's code is the one measured. */
MM_HD int mm_tiles_of(int rows, int bm)
{
    return (int)(((unsigned)(rows > 0 ? rows : 0) + (unsigned)bm - 1u) / (unsigned)bm);
}

MM_HD int mm_prefix_tiles(int rows, int bm); /* below, with the wide form */

/* tile_start[0..experts]: prefix sum of row tiles `bm` rows high (or of the wide form's units:
 * mm_prefix_tiles); returns the total. */
MM_HD int mm_tile_prefix_bm(const int32_t *row_count, int experts, int bm, int32_t *tile_start)
{
    int total = 0;
    for (int e = 0; e < experts; e++) {
        tile_start[e] = total;
        total += mm_prefix_tiles(row_count[e], bm);
    }
    tile_start[experts] = total;
    return total;
}

MM_HD int mm_tile_prefix(const int32_t *row_count, int experts, int32_t *tile_start)
{
    return mm_tile_prefix_bm(row_count, experts, MM_GEMM_BM, tile_start);
}

/* The split of a thread block's parallel prefix (gemm.cu tile_prefix_kernel): thread t of
 * `threads` takes experts [*e0, *e1), contiguous chunks of ceil(experts / threads) in thread
 * order (the last ones may be empty), so an exclusive scan of the chunks' tile sums in thread
 * order gives each chunk's first tile_start. */
MM_HD void mm_prefix_chunk(int experts, int threads, int t, int *e0, int *e1)
{
    const int per = (experts + threads - 1) / threads;
    const int b = t * per < experts ? t * per : experts;
    *e0 = b;
    *e1 = b + per < experts ? b + per : experts;
}

/* The wide form of the standalone grouped GEMM (gemm.cu): 192 x 128 tiles on three math
 * warpgroups, each block retired before the next (the core's 128 x 128 keeps one block in
 * flight). Per 128^3 of work a 2-CTA pair of wide tiles moves 18.7 KB from L2 instead of 24 and
 * its wgmmas read B from shared memory for 192 rows instead of 128 (perf-notes, twenty-fifth and
 * twenty-sixth sessions). It wants many rows an expert (a 192-row tile of a 100-row expert idles
 * a warpgroup), its A rows contiguous (A by TMA only) and at most MM_WIDE_MAX_EXPERTS experts
 * (its tile prefix lives in a fixed device array). */
#define MM_WIDE_BM 192
#define MM_WIDE_MAX_EXPERTS 1024
/* `auto` takes the wide form when the caller knows the experts' row counts and (a) the active
 * experts average at least MM_WIDE_MIN_MEAN_ROWS rows and (b) their rows padded to the wide
 * form's tiles (192 rows, or 64 for a last tile of at most 64: the narrow tile) are at most
 * MM_WIDE_MAX_PAD_PCT % more than padded to 128: the wide form computes its padding too, and
 * gains only a few % on equal work. Pro GEMM1 at 1024 rows an expert (5 x 192 + 64) ran 5% faster
 * wide once its walk was rotated (perf-notes, twenty-ninth session). */
#define MM_WIDE_MIN_MEAN_ROWS 384
#define MM_WIDE_MAX_PAD_PCT 2

/* gemm --tile and the modes: 0 auto, or the tile height asked for */
#define MM_GEMM_TILE_AUTO 0

/* How the wide form copies its scales (gemm --wide-scales; the kernel is compiled once for each):
 * four K blocks at a time into two slots beside the ring (group: a 16-byte copy a row, `full`
 * counts the TMAs alone) or each block's into its stage (block: a 4-byte copy a row, 129 arrivals
 * on `full`). Group needs K / 128 a multiple of 4 (every model shape); elsewhere it is block
 * whatever is asked. Auto is a measured choice, not a model: one H200, both forms in one call x 2
 * (perf-notes, thirty-eighth session), block was 1-7% faster at Flash GEMM2, Pro GEMM1 and GEMM2
 * (9216 and 49152 rows) and V3 GEMM2, group 3-4% faster at Flash GEMM1 (N 4096, K 4096; 12288 and
 * 49152 rows) and even at V3 GEMM1 (N 4096, K 7168): group where N <= MM_WIDE_GROUP_MAX_N and
 * K >= MM_WIDE_GROUP_MIN_K. */
#define MM_WIDE_SCALE_GROUP 4 /* K blocks a group's copies cover (gemm.cu WIDE_GROUP) */
#define MM_WIDE_SCALES_AUTO 0
#define MM_WIDE_SCALES_GROUP 1
#define MM_WIDE_SCALES_BLOCK 2
#define MM_WIDE_GROUP_MAX_N 4096
#define MM_WIDE_GROUP_MIN_K 4096

/* Whether a wide launch of N x K takes the per-block scales: `asked` forces one, auto as above. */
MM_HD int mm_wide_block_scales(int asked, int n, int k)
{
    if ((k / MM_GEMM_BK) % MM_WIDE_SCALE_GROUP != 0) return 1;
    if (asked == MM_WIDE_SCALES_AUTO) return !(n <= MM_WIDE_GROUP_MAX_N && k >= MM_WIDE_GROUP_MIN_K);
    return asked == MM_WIDE_SCALES_BLOCK;
}

/* The rows the wide form computes for an expert of c rows: its full 192-row tiles, and a last
 * tile of 64 (narrow, at most 64 rows) or 192. */
MM_HD long long mm_wide_padded_rows(int c)
{
    const int rest = c % MM_WIDE_BM;
    return (long long)(c / MM_WIDE_BM) * MM_WIDE_BM + (rest == 0 ? 0 : rest <= 64 ? 64 : MM_WIDE_BM);
}

/* Whether the wide form pays for these counts (count NULL: unknown, no). */
MM_HD int mm_wide_pays(const int32_t *count, int experts)
{
    if (!count) return 0;
    long long rows = 0, pad128 = 0, pad192 = 0;
    int active = 0;
    for (int e = 0; e < experts; e++) {
        const int c = count[e] > 0 ? count[e] : 0;
        rows += c;
        active += c > 0;
        pad128 += (long long)((c + MM_GEMM_BM - 1) / MM_GEMM_BM) * MM_GEMM_BM;
        pad192 += mm_wide_padded_rows(c);
    }
    return active > 0 && rows >= (long long)MM_WIDE_MIN_MEAN_ROWS * active &&
           pad192 * 100 <= pad128 * (100 + MM_WIDE_MAX_PAD_PCT);
}

/* The tile height a launch takes: `asked` MM_WIDE_BM or MM_GEMM_BM forces a form (the wide one
 * only where it can run); auto takes the wide form where mm_wide_pays for the caller's host copy
 * of the counts (NULL: unknown). wide_resident: how many wide pairs fit at once (0: the wide
 * kernel cannot run here). */
MM_HD int mm_gemm_tile_rows(int asked, int has_a_map, int experts, int n, const int32_t *count, int wide_resident)
{
    const int can = has_a_map && experts <= MM_WIDE_MAX_EXPERTS && (n / MM_GEMM_BN) % 2 == 0 && wide_resident > 0;
    if (asked == MM_WIDE_BM) return can ? MM_WIDE_BM : MM_GEMM_BM;
    if (asked == MM_GEMM_BM) return MM_GEMM_BM;
    return can && mm_wide_pays(count, experts) ? MM_WIDE_BM : MM_GEMM_BM;
}

/* The wide form's items in units (wide_tile_start holds their prefix; an expert's items are its
 * units x col_tiles / 2): two per 192-row tile, but one for a narrow last tile (at most 64 rows)
 * whose items take two column tiles each (narrow2). Why: an item's cost hardly depends on its
 * rows (Pro GEMM1, thirty-second session: a narrow tile ~0.9 of a 192-row one, a 128-row tile
 * ~0.87), so a narrow row tile in half as many items, each as full a stage as a 192-row tile's
 * (64 rows of A, two weight blocks), costs less. Measured against the one-column form
 * (-DMM_WIDE_NARROW2=0; perf-notes, thirty-third session): Pro at 1024 rows an expert GEMM1
 * 5.6-6.3% faster, GEMM2 1-10%; skewed spreads 1-3.5%. Two column tiles an item need col_tiles
 * and the band a multiple of 4, so that the items of a pair (w, w + 1) still share their rows in
 * every band (mm_wide_narrow2). */
#ifndef MM_WIDE_NARROW2 /* experiments: 0 runs a narrow tile's items on one column tile each */
#define MM_WIDE_NARROW2 1
#endif
MM_HD int mm_wide_narrow2(int col_tiles, int band)
{
    return MM_WIDE_NARROW2 && col_tiles % 4 == 0 && (band <= 0 || band >= col_tiles || band % 4 == 0);
}

MM_HD int mm_wide_units(int rows, int narrow2)
{
    if (rows <= 0) return 0;
    const int tiles = mm_tiles_of(rows, MM_WIDE_BM), rest = rows % MM_WIDE_BM;
    return 2 * tiles - (narrow2 && rest >= 1 && rest <= 64 ? 1 : 0);
}

/* How many of `max_pairs` pairs a walk of `pair_items` item pairs (two items, w and w + 1, a
 * pair at a time) keeps busy: the fewest that finish in as many waves as all of them would (items
 * taken as equal; mm_pair_walk_item then gives each kept pair the wave count or one less); the
 * others take no item and leave. Why: under the power cap an SM with no item leaves its watts to
 * the others, so the same waves run at a higher clock. Measured (perf-notes, thirty-sixth
 * session): the wide form at Flash 12288 rows (1024 pair items: 16 waves on 66 pairs or 64) 1.6-1.8%
 * faster on 64; at 49152 rows 64 pairs (64 waves against 63) 0.7% slower and 60 pairs 6-7% slower,
 * so a wave more costs more than the clock it buys. No items: max_pairs. */
MM_HD int mm_fewest_pairs(int pair_items, int max_pairs)
{
    if (pair_items <= 0 || max_pairs <= 0) return max_pairs;
    const int waves = (pair_items - 1) / max_pairs + 1; /* no overflow near INT_MAX */
    return (pair_items - 1) / waves + 1;
}

/* What a prefix counts per expert: tiles of `bm` rows, or (bm MM_WIDE_UNITS / MM_WIDE_UNITS_N2)
 * the wide form's units without / with narrow2. */
#define MM_WIDE_UNITS (-1)
#define MM_WIDE_UNITS_N2 (-2)
MM_HD int mm_prefix_tiles(int rows, int bm)
{
    if (bm == MM_WIDE_UNITS || bm == MM_WIDE_UNITS_N2) return mm_wide_units(rows, bm == MM_WIDE_UNITS_N2);
    return mm_tiles_of(rows, bm);
}

/* A wide item: its expert, row tile (192 rows high), first column tile and how many (2: a
 * narrow2 item). */
typedef struct {
    int expert, row_tile, col_tile, cols;
} mm_wide_tile;

/* Wide item w in [0, unit_start[experts] * col_tiles / 2) -> its tile, in the banded order of
 * mm_tile_locate_banded: inside each expert, bands of `band` column tiles (band <= 0 or >=
 * col_tiles: one band), each band's full row tiles in turn, columns fastest, then its narrow2 row
 * tile's items (two columns each). With units two per tile this is mm_tile_locate_banded's
 * order over the 192-row prefix (CPU-tested). */
MM_HD mm_wide_tile mm_wide_locate(const int32_t *unit_start, int experts, int col_tiles, int band, int w)
{
    const int half = col_tiles / 2;
    const int u = w / half;
    int lo = 0, hi = experts - 1; /* last expert whose first unit <= u */
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (unit_start[mid] <= u) lo = mid;
        else hi = mid - 1;
    }
    const int units = unit_start[lo + 1] - unit_start[lo], full = units / 2, narrow = units % 2;
    if (band <= 0 || band >= col_tiles) band = col_tiles;
    const int local = w - unit_start[lo] * half;
    const int per_band = full * band + narrow * (band / 2); /* every band but the last */
    const int b = local / per_band, first = b * band;
    const int width = col_tiles - first < band ? col_tiles - first : band;
    const int in_band = local - b * per_band;
    mm_wide_tile t;
    t.expert = lo;
    if (in_band < full * width) {
        t.row_tile = in_band / width;
        t.col_tile = first + in_band % width;
        t.cols = 1;
    } else {
        t.row_tile = full;
        t.col_tile = first + 2 * (in_band - full * width);
        t.cols = 2;
    }
    return t;
}

/* A 2-CTA pair's walk without claims (the wide form's, and the 128 x 128 kernel's pairs): pair
 * `pair`'s item pair in wave `wave` (its CTA r takes item 2 p + r: the two share their rows). In
 * wave n the `pairs` pairs take pair items n P .. n P + P - 1 (the same set either way, so a
 * wave's weights and rows in L2 do not change); plain, pair c takes
 * n P + c, and its share repeats with the walk's stride: at Pro's 1024 rows an expert (band 8: 24
 * pair items a band, the last 4 of them narrow) and 66 pairs, 22 pairs never get a narrow item and
 * run all-full shares, as long as the 1152-row call (perf-notes, twenty-eighth session); rotated,
 * pair c takes n P + (c + n) mod P, and every pair's share comes within a few items of the mean
 * (CPU-tested). */
MM_HD int mm_pair_walk_item(int pair, int wave, int pairs, int rotate)
{
    return wave * pairs + (rotate ? (pair + wave) % pairs : pair);
}

typedef struct {
    int expert;
    int row_tile; /* within the expert */
    int col_tile;
} mm_tile;

/* Work item w in [0, total_row_tiles * col_tiles) -> its tile. Column tiles vary fastest, so
 * consecutive CTAs share A rows (and stream different weight columns). */
MM_HD mm_tile mm_tile_locate(const int32_t *tile_start, int experts, int col_tiles, int w)
{
    mm_tile t;
    int row = w / col_tiles;
    t.col_tile = w % col_tiles;
    int lo = 0, hi = experts - 1; /* last expert whose start <= row */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (tile_start[mid] <= row) lo = mid;
        else hi = mid - 1;
    }
    t.expert = lo;
    t.row_tile = row - tile_start[lo];
    return t;
}

/* The standalone GEMM's item order (gemm.cu): inside each expert, bands of `band` column tiles,
 * each band's row tiles in turn, its columns fastest; the last band may be narrower; band <= 0 or
 * >= col_tiles: the plain order of mm_tile_locate. Why: in the plain order the CTAs of one wave
 * span 2-3 row tiles and every column of the expert, so each wave streams the expert's whole
 * weight matrix again (Pro GEMM1: 44 MB an expert against a 50 MB L2, re-read from HBM by every
 * wave); a band keeps a wave on a few weight columns that all its row tiles share while they are
 * in L2, and the expert's A rows, re-read once per band, are the smaller operand. Measured: Pro
 * GEMM1 on 128 x 128 tiles 1-2% faster, the rest within the runs' spread: the re-reads were not
 * what bounds it (perf-notes, twenty-seventh session). With an even band and an even count of
 * column tiles, items w and w + 1 (w even) still share their row tile (a pair's A blocks). */
#ifndef MM_GEMM_BAND /* -DMM_GEMM_BAND=0: the plain order (A/B runs) */
#define MM_GEMM_BAND 8
#endif
MM_HD mm_tile mm_tile_locate_banded(const int32_t *tile_start, int experts, int col_tiles, int band, int w)
{
    mm_tile t = mm_tile_locate(tile_start, experts, col_tiles, w);
    if (band <= 0 || band >= col_tiles) return t;
    const int row_tiles = tile_start[t.expert + 1] - tile_start[t.expert];
    const int local = w - tile_start[t.expert] * col_tiles;
    const int b = local / (row_tiles * band), first = b * band;
    const int width = col_tiles - first < band ? col_tiles - first : band;
    const int in_band = local - b * row_tiles * band;
    t.row_tile = in_band / width;
    t.col_tile = first + in_band % width;
    return t;
}

/* The 2-CTA clusters of the standalone grouped GEMM (gemm.cu): CTA 2c + r of a grid of 2p CTAs
 * walks items 2c + r, 2c + r + 2p, ..., so a pair always holds items w and w + 1 (w even); with
 * an even count of column tiles those share their row tile (the A blocks the pair splits), and
 * the pair runs out of items together. How many pairs a launch of `ctas` CTAs over N = n columns
 * runs when `resident` pairs fit at once; 0: one CTA per tile. max_rows: what the caller knows of
 * the most rows an expert has (<= 0: nothing); when no tile can have more than 64 rows no tile
 * takes A by TMA (mm_tile_a_by_tma), so a pair would share nothing and only run in lockstep. */
MM_HD int mm_tile_pairs(int n, int ctas, int resident, int max_rows)
{
    const int pairs = ctas / 2 < resident ? ctas / 2 : resident;
    if (max_rows > 0 && max_rows <= MM_GEMM_BM / 2) return 0;
    return (n / MM_GEMM_BN) % 2 || pairs < 1 ? 0 : pairs;
}

/* Row r_in_tile of flat row tile `tile_flat` (one column tile): its row index in A, or false
 * when the tile's expert has fewer rows. */
MM_HD bool mm_tile_row_index(const int32_t *tile_start, const int32_t *row_offset, const int32_t *row_count,
                             int experts, int tile_flat, int r_in_tile, size_t *row)
{
    mm_tile t = mm_tile_locate(tile_start, experts, 1, tile_flat);
    int local = t.row_tile * MM_GEMM_BM + r_in_tile;
    if (local >= row_count[t.expert]) return false;
    *row = (size_t)row_offset[t.expert] + local;
    return true;
}

/* Where logical row r of an expert lives when its rows arrive in per-sender segments (cnt[s]
 * rows from sender s, s < senders), concatenated in sender order. Returns the segment, the row in
 * it in *index. */
MM_HD int mm_sender_row(const int *cnt, int senders, int r, int *index)
{
    int s = 0;
    while (s < senders - 1 && r >= cnt[s]) r -= cnt[s++];
    *index = r;
    return s;
}

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
 * pairs for every GEMM2 item and dual for every GEMM1 item: both 4-18% slower at 512-1024 tokens
 * (perf-notes, twelfth session). */
#define MM_FUSED_SMALL_ROWS 64
#define MM_FUSED_TINY_ROWS 8
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
 * tests/gpu/swap_probe.cu); their A rows ride in the stage's tiny area. How many a tile of an
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
 * re-reads threadIdx.x (2-4% slower on tiles that fold nothing, nineteenth session), when an
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

/* Whether a fused call runs the hand-off form (fused.cu handoff_arm): not the folding one, a bit
 * per I block fits a word (I / 128 <= 32), and the GEMM1 items expected on a rank fit one wave
 * of `ctas` CTAs (times MM_FUSED_HANDOFF_MARGIN): the rank's experts touched when each of
 * tokens x ranks tokens picks topk distinct experts of `experts` uniformly, times the I blocks.
 * Flash at 1 token: 5.9 experts x 16 = 95 items on 132 CTAs at EP1, EP2 and EP8 (yes); V3 at 1
 * token: 8 x 16 = 128 at EP1 (yes: -2.5 us on one GPU), 126 at EP2 (yes, unmeasured); Pro at 1
 * token: 6 x 24 = 144 (no: its second wave of GEMM1 items is the critical path); Flash at 2
 * tokens: 185 (no). A call whose routing touches more experts than expected still runs correctly,
 * only without the gain (its stragglers share HBM with early GEMM2 items: ~1 us at Pro's 12). */
#ifndef MM_FUSED_HANDOFF_MARGIN /* an experiment may set it (nvcc -D...; the launch decides in fused.cu) */
#define MM_FUSED_HANDOFF_MARGIN 1.0
#endif
MM_HD int mm_fused_handoff_kernel(long long tokens, int topk, int ranks, int experts, int inter, int ctas)
{
    if (tokens < 1 || topk < 1 || topk > experts || ranks < 1 || experts < ranks || inter / 128 > 32 || ctas < 1 ||
        mm_fused_fold_kernel(tokens, topk, ranks, experts))
        return 0;
    const double picks = (double)tokens * ranks; /* tokens, each picking topk distinct experts */
    if (picks * topk > (double)ctas * experts) return 0; /* far past one wave: skip the estimate */
    const double touched = (double)(experts / ranks) * (1.0 - exp(picks * log1p(-(double)topk / experts)));
    return touched * (inter / 128) * MM_FUSED_HANDOFF_MARGIN <= ctas;
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
 * (measured at 1-8 tokens, 1.5-1.9x; perf-notes, tenth session), x10 */
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
 * (one thread did: 11-12 us of every call, on the critical path; twelfth session). Lane `lane`
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

/* The epilogues' shared-memory layouts. A math thread holds the wgmma D fragment of its warp w
 * (0..3 within its warpgroup): accumulator pair i (even) is row 16 w + lane / 4 + 8 ((i >> 1) & 1)
 * of the warpgroup's 64, columns 8 (i >> 2) + 2 (lane % 4) and + 1 (gemm_tile.cuh's mm_acc_row /
 * mm_acc_col apply it to the thread index). */
MM_HD int mm_frag_row(int warp, int lane, int i)
{
    return 16 * warp + lane / 4 + 8 * ((i >> 1) & 1);
}

MM_HD int mm_frag_col(int lane, int i)
{
    return 8 * (i >> 2) + 2 * (lane % 4);
}

#define MM_OUT_BOX_BYTES 8192 /* one 64 x 64 BF16 box of the tensor-copy epilogue */

/* Byte offset of BF16 element (row 0..63, col 0..127) in a warpgroup's two 64 x 64 boxes as a
 * 128-byte-swizzled tensor map lays them out (gemm.cu's tensor-copy epilogue): box col / 64 at
 * 8 KB each, row r at 128 r, its 16-byte chunk c at c ^ (r % 8). */
MM_HD unsigned mm_out_box_offset(int row, int col)
{
    const int b = (col % 64) * 2;
    return (unsigned)((col / 64) * MM_OUT_BOX_BYTES + row * 128 + (((b / 16) ^ (row % 8)) * 16) + b % 16);
}

/* The same offset for fragment pair i, split as the epilogue computes it: a per-thread base and a
 * per-pair step (row % 8 = lane / 4 for every pair of a thread). */
MM_HD unsigned mm_out_box_base(int warp, int lane)
{
    return (unsigned)((16 * warp + lane / 4) * 128 + 4 * (lane % 4));
}

MM_HD unsigned mm_out_box_step(int lane, int i)
{
    return (unsigned)((i >> 5) * MM_OUT_BOX_BYTES + ((i >> 1) & 1) * 1024 + ((((i >> 2) % 8) * 16) ^ ((lane / 4) * 16)));
}

/* Element offset of (row, col) (col even) in fused.cu's BF16 GEMM2 out tiles of `width` columns:
 * a row's 16-byte chunks XOR-swizzled by row % 8, so a warp's bfloat162 stores of one fragment
 * pair (8 rows x 16 bytes) hit 32 banks instead of 4. */
MM_HD int mm_out_tile_at(int row, int col, int width)
{
    return row * width + (((col / 8) ^ (row & 7)) * 8) + col % 8;
}

#endif
