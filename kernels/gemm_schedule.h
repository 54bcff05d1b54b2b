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
/* the rows a stage's tiny area holds (a compact item's A rows; fused_schedule.h) */
#define MM_TILE_TINY_ROWS 8

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
 * its wgmmas read B from shared memory for 192 rows instead of 128. It wants many rows an expert (a 192-row tile of a 100-row expert idles
 * a warpgroup), its A rows contiguous (A by TMA only) and at most MM_WIDE_MAX_EXPERTS experts
 * (its tile prefix lives in a fixed device array). */
#define MM_WIDE_BM 192
#define MM_WIDE_MAX_EXPERTS 1024
/* `auto` takes the wide form when the caller knows the experts' row counts and (a) the active
 * experts average at least MM_WIDE_MIN_MEAN_ROWS rows and (b) their rows padded to the wide
 * form's tiles (192 rows, or 64 for a last tile of at most 64: the narrow tile) are at most
 * MM_WIDE_MAX_PAD_PCT % more than padded to 128: the wide form computes its padding too, and
 * gains only a few % on equal work. Pro GEMM1 at 1024 rows an expert (5 x 192 + 64) ran 5% faster
 * wide once its walk was rotated. */
#define MM_WIDE_MIN_MEAN_ROWS 384
#define MM_WIDE_MAX_PAD_PCT 2

/* gemm --tile and the modes: 0 auto, or the tile height asked for */
#define MM_GEMM_TILE_AUTO 0

/* How the wide form copies its scales (gemm --wide-scales; the kernel is compiled once for each):
 * four K blocks at a time into two slots beside the ring (group: a 16-byte copy a row, `full`
 * counts the TMAs alone) or each block's into its stage (block: a 4-byte copy a row, 129 arrivals
 * on `full`). Group needs K / 128 a multiple of 4 (every model shape); elsewhere it is block
 * whatever is asked. Auto is a measured choice, not a model: one H200, both forms in one call x 2
 *, block was 1-7% faster at Flash GEMM2, Pro GEMM1 and GEMM2
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
 * rows (Pro GEMM1: a narrow tile ~0.9 of a 192-row one, a 128-row tile ~0.87), so a narrow row
 * tile in half as many items, each as full a stage as a 192-row tile's (64 rows of A, two weight
 * blocks), costs less. Measured against the one-column form: Pro at 1024 rows an expert GEMM1
 * 5.6-6.3% faster, GEMM2 1-10%; skewed spreads 1-3.5%. Two column tiles an item need col_tiles
 * and the band a multiple of 4, so that the items of a pair (w, w + 1) still share their rows in
 * every band (mm_wide_narrow2). */
MM_HD int mm_wide_narrow2(int col_tiles, int band)
{
    return col_tiles % 4 == 0 && (band <= 0 || band >= col_tiles || band % 4 == 0);
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
 * the others, so the same waves run at a higher clock. Measured: the wide form at Flash 12288 rows (1024 pair items: 16 waves on 66 pairs or 64) 1.6-1.8%
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
 * run all-full shares, as long as the 1152-row call; rotated,
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
 * what bounds it. With an even band and an even count of column tiles, items w and w + 1 (w
 * even) still share their row tile (a pair's A blocks). */
#define MM_GEMM_BAND 8
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
