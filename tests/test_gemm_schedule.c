#include <string.h>

#include "../kernels/fused_schedule.h"
#include "../kernels/layout.h"
#include "test_util.h"

/* Every (expert, row tile, column tile) appears exactly once, in order, experts with 0 rows
 * (first, middle, last) own no tile, and partial tiles are counted. */
static void covers_every_tile_once(void **state)
{
    (void)state;
    const int32_t count[] = {0, 1, MM_GEMM_BM, MM_GEMM_BM + 1, 0, 0, 3 * MM_GEMM_BM + 8, 0};
    const int experts = 8, col_tiles = 3;
    int32_t start[9];
    int total = mm_tile_prefix(count, experts, start);
    assert_int_equal(total, 0 + 1 + 1 + 2 + 0 + 0 + 4 + 0);
    assert_int_equal(start[experts], total);
    int seen[8][4][3] = {{{0}}};
    for (int w = 0; w < total * col_tiles; w++) {
        mm_tile t = mm_tile_locate(start, experts, col_tiles, w);
        assert_true(t.expert >= 0 && t.expert < experts);
        assert_true(t.row_tile >= 0 && t.row_tile < mm_row_tiles(count[t.expert]));
        assert_int_equal(t.col_tile, w % col_tiles);
        seen[t.expert][t.row_tile][t.col_tile]++;
    }
    for (int e = 0; e < experts; e++)
        for (int r = 0; r < mm_row_tiles(count[e]); r++)
            for (int c = 0; c < col_tiles; c++) assert_int_equal(seen[e][r][c], 1);
}

static void single_and_empty(void **state)
{
    (void)state;
    const int32_t none[] = {0, 0, 0};
    int32_t start[4];
    assert_int_equal(mm_tile_prefix(none, 3, start), 0);
    const int32_t one[] = {MM_GEMM_BM};
    assert_int_equal(mm_tile_prefix(one, 1, start), 1);
    mm_tile t = mm_tile_locate(start, 1, 32, 31);
    assert_int_equal(t.expert, 0);
    assert_int_equal(t.row_tile, 0);
    assert_int_equal(t.col_tile, 31);
}

/* The prefix kernel's split: 128 threads' chunks cover every expert once, in order, and the
 * scan of their tile sums in thread order, each chunk then walked from its start, gives
 * mm_tile_prefix (counts with empty experts and partial tiles; up to 4096 experts, the config's
 * bound). */
static void prefix_chunks_compose(void **state)
{
    (void)state;
    static int32_t count[4096], want[4097], got[4097];
    for (int e = 0; e < 4096; e++) count[e] = (e * 37) % 5 == 0 ? 0 : (e * 7919) % 700;
    const int sizes[] = {1, 2, 31, 127, 128, 129, 255, 256, 257, 1000, 1023, 1024, 1025, 2048, 2100, 4096};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int experts = sizes[s], threads = 128;
        const int total = mm_tile_prefix(count, experts, want);
        int next = 0, base = 0;
        for (int t = 0; t < threads; t++) {
            int e0, e1;
            mm_prefix_chunk(experts, threads, t, &e0, &e1);
            assert_int_equal(e0, next);
            assert_true(e1 >= e0 && e1 - e0 <= (experts + threads - 1) / threads);
            for (int e = e0; e < e1; e++) {
                got[e] = base;
                base += mm_row_tiles(count[e] > 0 ? count[e] : 0);
            }
            next = e1;
        }
        assert_int_equal(next, experts);
        assert_int_equal(base, total);
        for (int e = 0; e < experts; e++) assert_int_equal(got[e], want[e]);
    }
}

/* Row lookup through the schedule: valid rows map into each expert's segment, padding rows of a
 * partial tile are refused. */
static void row_index(void **state)
{
    (void)state;
    const int32_t count[] = {3, 0, MM_GEMM_BM + 2};
    const int32_t offset[] = {0, 1000, 5000};
    int32_t start[4];
    assert_int_equal(mm_tile_prefix(count, 3, start), 1 + 0 + 2);
    size_t row = 0;
    assert_true(mm_tile_row_index(start, offset, count, 3, 0, 2, &row));
    assert_int_equal((int)row, 2);
    assert_false(mm_tile_row_index(start, offset, count, 3, 0, 3, &row));
    assert_true(mm_tile_row_index(start, offset, count, 3, 1, MM_GEMM_BM - 1, &row));
    assert_int_equal((int)row, 5000 + MM_GEMM_BM - 1);
    assert_true(mm_tile_row_index(start, offset, count, 3, 2, 1, &row));
    assert_int_equal((int)row, 5000 + MM_GEMM_BM + 1);
    assert_false(mm_tile_row_index(start, offset, count, 3, 2, 2, &row));
}

/* The wide form's prefix: tiles of 192 rows, every row of every expert in exactly one tile, no
 * tile past an expert's rows; the 128-row prefix of the same counts is what mm_tile_prefix gives. */
static void wide_prefix_covers_rows(void **state)
{
    (void)state;
    const int32_t count[] = {0, 1, 191, 192, 193, 0, 384, 1536, 100};
    const int experts = 9;
    int32_t wide[10], core[10], core_again[10];
    const int total = mm_tile_prefix_bm(count, experts, MM_WIDE_BM, wide);
    assert_int_equal(total, 0 + 1 + 1 + 1 + 2 + 0 + 2 + 8 + 1);
    assert_int_equal(wide[experts], total);
    for (int e = 0; e < experts; e++) {
        const int tiles = wide[e + 1] - wide[e];
        assert_true(tiles * MM_WIDE_BM >= count[e]);         /* every row covered */
        assert_true(tiles == 0 || (tiles - 1) * MM_WIDE_BM < count[e]); /* no empty tile */
    }
    /* a pair walks items w, w + 1 on the same row tile, as the core's does */
    for (int w = 0; w + 1 < total * 32; w += 2) {
        mm_tile a = mm_tile_locate(wide, experts, 32, w), b2 = mm_tile_locate(wide, experts, 32, w + 1);
        assert_int_equal(a.expert, b2.expert);
        assert_int_equal(a.row_tile, b2.row_tile);
        assert_true(a.row_tile * MM_WIDE_BM < count[a.expert]);
    }
    assert_int_equal(mm_tile_prefix_bm(count, experts, MM_GEMM_BM, core), mm_tile_prefix(count, experts, core_again));
    assert_memory_equal(core, core_again, sizeof core);
}

/* The wide form's items over units (mm_wide_locate): with narrow2 off, exactly the banded order
 * over the 192-row prefix; with it on, every (expert, row tile, column tile) in exactly one item,
 * two-column items only on an expert's narrow last tile (at most 64 rows) and only where
 * col_tiles % 4 == 0, and a pair's items (w, w + 1; w even) on the same expert and row tile. */
static void wide_units_cover_once(void **state)
{
    (void)state;
    const int32_t count[] = {0, 1, 64, 65, 191, 192, 193, 256, 257, 1024, 1088, 1152, 0, 1536, 40, 100};
    const int experts = 16;
    const int col_list[] = {4, 8, 12, 16, 20, 32, 48, 56, 6, 10};
    const int band_list[] = {0, 2, 4, 8, 64};
    for (int ci = 0; ci < 10; ci++)
        for (int bi = 0; bi < 5; bi++)
            for (int n2 = 0; n2 <= 1; n2++) {
                const int cols = col_list[ci], band = band_list[bi];
                const int narrow2 = n2 && mm_wide_narrow2(cols, band);
                int32_t units[17], tiles[17];
                const int total_units = mm_tile_prefix_bm(count, experts, narrow2 ? MM_WIDE_UNITS_N2 : MM_WIDE_UNITS, units);
                const int total_tiles = mm_tile_prefix_bm(count, experts, MM_WIDE_BM, tiles);
                int32_t expect_units = 0;
                for (int e = 0; e < experts; e++) expect_units += mm_wide_units(count[e], narrow2);
                assert_int_equal(total_units, expect_units);
                const int items = total_units * cols / 2;
                static unsigned char seen[16][8][56];
                memset(seen, 0, sizeof seen);
                for (int w = 0; w < items; w++) {
                    const mm_wide_tile t = mm_wide_locate(units, experts, cols, band, w);
                    assert_true(t.expert >= 0 && t.expert < experts);
                    assert_true(t.row_tile >= 0 && t.row_tile * MM_WIDE_BM < count[t.expert]);
                    assert_true(t.cols == 1 || t.cols == 2);
                    if (t.cols == 2) {
                        assert_true(narrow2);
                        assert_true(count[t.expert] - t.row_tile * MM_WIDE_BM <= 64);
                        assert_int_equal(t.col_tile % 2, 0);
                    }
                    for (int c = t.col_tile; c < t.col_tile + t.cols; c++) {
                        assert_true(c >= 0 && c < cols);
                        assert_int_equal(seen[t.expert][t.row_tile][c], 0);
                        seen[t.expert][t.row_tile][c] = 1;
                    }
                    if (w % 2 == 0 && w + 1 < items) {
                        const mm_wide_tile u = mm_wide_locate(units, experts, cols, band, w + 1);
                        assert_int_equal(t.expert, u.expert);
                        assert_int_equal(t.row_tile, u.row_tile);
                        assert_int_equal(t.cols, u.cols);
                    }
                    if (!narrow2) { /* the old order, item for item */
                        const mm_tile o = mm_tile_locate_banded(tiles, experts, cols, band, w);
                        assert_int_equal(o.expert, t.expert);
                        assert_int_equal(o.row_tile, t.row_tile);
                        assert_int_equal(o.col_tile, t.col_tile);
                        assert_int_equal(t.cols, 1);
                    }
                }
                for (int e = 0; e < experts; e++)
                    for (int r = 0; r * MM_WIDE_BM < count[e]; r++)
                        for (int c = 0; c < cols; c++) assert_int_equal(seen[e][r][c], 1);
                if (!narrow2) assert_int_equal(total_units, 2 * total_tiles);
            }
    assert_int_equal(mm_wide_units(1024, 1), 11);
    assert_int_equal(mm_wide_units(1024, 0), 12);
    assert_int_equal(mm_wide_units(1088, 1), 12);
    assert_int_equal(mm_wide_units(64, 1), 1);
    assert_int_equal(mm_wide_units(65, 1), 2);
    assert_int_equal(mm_wide_units(0, 1), 0);
    assert_true(mm_wide_narrow2(48, 8));
    assert_false(mm_wide_narrow2(6, 8));
    assert_false(mm_wide_narrow2(48, 6));
}

/* Which tile a launch takes: the wide form only with a rows map, an even column count, experts
 * that fit its prefix and room for its pairs; auto only from known counts that average
 * MM_WIDE_MIN_MEAN_ROWS an active expert and pad no worse than 128-row tiles (+ the margin). */
static void tile_form_choice(void **state)
{
    (void)state;
    const int n = 32 * MM_GEMM_BN;
    int32_t even[32], pro[32], small[32], skew[4] = {1536, 0, 0, 0}, odd[32];
    for (int e = 0; e < 32; e++) {
        even[e] = 1536; /* Flash at 49152 rows: 8 tiles of 192 or 12 of 128, no padding either way */
        pro[e] = 1024;  /* 5 x 192 + a narrow 64 = 1024 rows, as 8 x 128 */
        small[e] = 128;
        odd[e] = 1000;  /* 5 x 192 + 40: 1024 against 1024 */
    }
    assert_true(mm_wide_pays(even, 32));
    assert_true(mm_wide_pays(pro, 32));
    assert_true(mm_wide_pays(odd, 32));
    assert_int_equal(mm_wide_padded_rows(0), 0);
    assert_int_equal(mm_wide_padded_rows(1), 64);
    assert_int_equal(mm_wide_padded_rows(64), 64);
    assert_int_equal(mm_wide_padded_rows(65), 192);
    assert_int_equal(mm_wide_padded_rows(192), 192);
    assert_int_equal(mm_wide_padded_rows(1024), 1024);
    assert_int_equal(mm_wide_padded_rows(1100), 1152);
    assert_false(mm_wide_pays(small, 32)); /* below the mean */
    assert_true(mm_wide_pays(skew, 4));     /* the mean is over active experts */
    assert_false(mm_wide_pays(NULL, 32));
    const int32_t none[3] = {0, 0, 0};
    assert_false(mm_wide_pays(none, 3));
    /* 384 rows: 2 x 192 = 3 x 128; 400 rows: 384 + 64 against 512; 470 rows: 384 + 192 = 576
     * against 512, +12.5% */
    const int32_t at384[2] = {384, 384}, at400[2] = {400, 400}, at470[2] = {470, 470};
    assert_true(mm_wide_pays(at384, 2));
    assert_true(mm_wide_pays(at400, 2));
    assert_false(mm_wide_pays(at470, 2));
    assert_int_equal(mm_gemm_tile_rows(MM_GEMM_TILE_AUTO, 1, 32, n, even, 66), MM_WIDE_BM);
    assert_int_equal(mm_gemm_tile_rows(MM_GEMM_TILE_AUTO, 1, 32, n, pro, 66), MM_WIDE_BM);
    assert_int_equal(mm_gemm_tile_rows(MM_GEMM_TILE_AUTO, 1, 2, 2 * MM_GEMM_BN, at470, 66), MM_GEMM_BM);
    assert_int_equal(mm_gemm_tile_rows(MM_GEMM_TILE_AUTO, 1, 32, n, NULL, 66), MM_GEMM_BM); /* counts unknown */
    assert_int_equal(mm_gemm_tile_rows(MM_GEMM_TILE_AUTO, 0, 32, n, even, 66), MM_GEMM_BM); /* no rows map */
    assert_int_equal(mm_gemm_tile_rows(MM_GEMM_TILE_AUTO, 1, 32, n + MM_GEMM_BN, even, 66), MM_GEMM_BM); /* odd */
    assert_int_equal(mm_gemm_tile_rows(MM_GEMM_TILE_AUTO, 1, MM_WIDE_MAX_EXPERTS + 1, n, NULL, 66), MM_GEMM_BM);
    assert_int_equal(mm_gemm_tile_rows(MM_GEMM_TILE_AUTO, 1, 32, n, even, 0), MM_GEMM_BM); /* no pair fits */
    assert_int_equal(mm_gemm_tile_rows(MM_WIDE_BM, 1, 32, n, small, 66), MM_WIDE_BM);  /* forced */
    assert_int_equal(mm_gemm_tile_rows(MM_WIDE_BM, 0, 32, n, even, 66), MM_GEMM_BM);   /* forced, cannot run */
    assert_int_equal(mm_gemm_tile_rows(MM_GEMM_BM, 1, 32, n, even, 66), MM_GEMM_BM);
    /* the wide form's scale copies: forced either way where K / 128 is a multiple of 4, always
     * per block elsewhere */
    assert_int_equal(mm_wide_block_scales(MM_WIDE_SCALES_BLOCK, 4096, 4096), 1);
    assert_int_equal(mm_wide_block_scales(MM_WIDE_SCALES_GROUP, 4096, 2048), 0);
    assert_int_equal(mm_wide_block_scales(MM_WIDE_SCALES_GROUP, 4096, 640), 1);  /* 5 K blocks */
    assert_int_equal(mm_wide_block_scales(MM_WIDE_SCALES_AUTO, 4096, 384), 1);   /* 3 K blocks */
    /* auto at the model shapes: group for Flash GEMM1 and V3 GEMM1 (N 4096, K >= 4096), block
     * for Flash GEMM2, Pro GEMM1 and GEMM2, V3 GEMM2 */
    assert_int_equal(mm_wide_block_scales(MM_WIDE_SCALES_AUTO, 4096, 4096), 0);
    assert_int_equal(mm_wide_block_scales(MM_WIDE_SCALES_AUTO, 4096, 7168), 0);
    assert_int_equal(mm_wide_block_scales(MM_WIDE_SCALES_AUTO, 4096, 2048), 1);
    assert_int_equal(mm_wide_block_scales(MM_WIDE_SCALES_AUTO, 6144, 7168), 1);
    assert_int_equal(mm_wide_block_scales(MM_WIDE_SCALES_AUTO, 7168, 3072), 1);
    assert_int_equal(mm_wide_block_scales(MM_WIDE_SCALES_AUTO, 7168, 2048), 1);
}

/* The banded order: every tile once, each expert's items still contiguous, every band's items on
 * its own columns only (all its row tiles before the next band), pairs (w, w + 1, w even) on one
 * row tile and adjacent columns for an even band and column count, and the plain order for no
 * band or one as wide as the columns. */
/* The wide pairs' walk over Pro GEMM1's items at EP8 and 1024 rows an expert (48 experts, 48 column
 * tiles, band 8, 66 pairs): plain, a third of the pairs get no narrow (64-row) item; rotated, every
 * pair's count of narrow items is within 2 of the mean, and each walk takes every item pair once. */
static void wide_walk_shares(void **state)
{
    (void)state;
    enum { E = 48, COLS = 48, PAIRS = 66 };
    static int32_t count[E], start[E + 1];
    for (int e = 0; e < E; e++) count[e] = 1024;
    const int row_tiles = mm_tile_prefix_bm(count, E, MM_WIDE_BM, start);
    assert_int_equal(row_tiles, E * 6);
    const int pair_items = row_tiles * COLS / 2;
    static unsigned char taken[E * 6 * COLS / 2];
    for (int rotate = 0; rotate <= 1; rotate++) {
        int narrow[PAIRS] = {0}, all = 0;
        memset(taken, 0, sizeof taken);
        for (int c = 0; c < PAIRS; c++)
            for (int n = 0;; n++) {
                const int p = mm_pair_walk_item(c, n, PAIRS, rotate);
                if (n * PAIRS >= pair_items) break;
                if (p >= pair_items) continue;
                taken[p]++;
                const mm_tile t = mm_tile_locate_banded(start, E, COLS, MM_GEMM_BAND, 2 * p);
                const int rows = count[t.expert] - t.row_tile * MM_WIDE_BM;
                if (rows <= 64) narrow[c]++, all++;
            }
        for (int p = 0; p < pair_items; p++) assert_int_equal(taken[p], 1);
        int lo = narrow[0], hi = narrow[0], zero = 0;
        for (int c = 0; c < PAIRS; c++) {
            lo = narrow[c] < lo ? narrow[c] : lo;
            hi = narrow[c] > hi ? narrow[c] : hi;
            zero += narrow[c] == 0;
        }
        const double mean = (double)all / PAIRS;
        if (!rotate) {
            assert_int_equal(zero, PAIRS / 3);
        } else {
            assert_int_equal(zero, 0);
            assert_true(lo >= mean - 2 && hi <= mean + 2);
        }
    }
}

static void banded_order_covers_once(void **state)
{
    (void)state;
    const int32_t count[] = {0, 1, 64, MM_GEMM_BM, 0, 8 * MM_GEMM_BM, 3 * MM_GEMM_BM + 8, 0};
    const int experts = 8;
    int32_t start[9];
    const int total_rows = mm_tile_prefix(count, experts, start);
    static int seen[8][8][56];
    const int bands[] = {0, 1, 2, 4, 6, 8, 16, 56, 100};
    for (int col_tiles = 1; col_tiles <= 56; col_tiles += 5) {
        for (size_t bi = 0; bi < sizeof bands / sizeof bands[0]; bi++) {
            const int band = bands[bi];
            memset(seen, 0, sizeof seen);
            for (int w = 0; w < total_rows * col_tiles; w++) {
                const mm_tile t = mm_tile_locate_banded(start, experts, col_tiles, band, w);
                const mm_tile plain = mm_tile_locate(start, experts, col_tiles, w);
                assert_int_equal(t.expert, plain.expert); /* an expert's items stay its own */
                assert_true(t.row_tile >= 0 && t.row_tile < mm_row_tiles(count[t.expert]));
                assert_true(t.col_tile >= 0 && t.col_tile < col_tiles);
                seen[t.expert][t.row_tile][t.col_tile]++;
                if (band <= 0 || band >= col_tiles) {
                    assert_int_equal(t.row_tile, plain.row_tile);
                    assert_int_equal(t.col_tile, plain.col_tile);
                } else {
                    /* the band this item's column lies in holds local items [b * R * band, ...) */
                    const int rows = start[t.expert + 1] - start[t.expert];
                    const int local = w - start[t.expert] * col_tiles, b = t.col_tile / band;
                    assert_true(local >= b * rows * band && local < (b + 1) * rows * band);
                }
                if (band > 0 && band % 2 == 0 && col_tiles % 2 == 0 && w % 2 == 1) {
                    const mm_tile prev = mm_tile_locate_banded(start, experts, col_tiles, band, w - 1);
                    assert_int_equal(prev.expert, t.expert);
                    assert_int_equal(prev.row_tile, t.row_tile);
                    assert_int_equal(prev.col_tile + 1, t.col_tile);
                }
            }
            for (int e = 0; e < experts; e++)
                for (int r = 0; r < mm_row_tiles(count[e]); r++)
                    for (int c = 0; c < col_tiles; c++) assert_int_equal(seen[e][r][c], 1);
        }
    }
    /* Pro GEMM1's shape at 1024 rows an expert, the default band: the first 8 x 8 items are row
     * tiles 0-7 over columns 0-7, then the band of columns 8-15 begins */
    int32_t pro[2] = {8 * MM_GEMM_BM, 8 * MM_GEMM_BM}, pro_start[3];
    mm_tile_prefix(pro, 2, pro_start);
    const mm_tile a = mm_tile_locate_banded(pro_start, 2, 48, 8, 8 * 8 - 1), b = mm_tile_locate_banded(pro_start, 2, 48, 8, 8 * 8);
    assert_int_equal(a.row_tile, 7);
    assert_int_equal(a.col_tile, 7);
    assert_int_equal(b.row_tile, 0);
    assert_int_equal(b.col_tile, 8);
}

/* The clusters' invariant: with an even count of column tiles, the two CTAs of a pair always
 * hold items on the same expert and row tile, in adjacent columns (they split that A block), and
 * run out of items at the same step; odd column counts or no room for pairs mean no clusters. */
static void pairs_share_row_tiles(void **state)
{
    (void)state;
    const int32_t count[] = {0, 1, 64, MM_GEMM_BM, 0, 3 * MM_GEMM_BM + 8, MM_GEMM_BM + 1};
    const int experts = 7;
    int32_t start[8];
    const int total_rows = mm_tile_prefix(count, experts, start);
    for (int col_tiles = 2; col_tiles <= 56; col_tiles += 6) {
        const int n = col_tiles * MM_GEMM_BN, items = total_rows * col_tiles;
        for (int resident = 1; resident <= 80; resident += 13) {
            const int pairs = mm_tile_pairs(n, 132, resident, 3 * MM_GEMM_BM + 8), grid = 2 * pairs;
            assert_int_equal(pairs, resident < 66 ? resident : 66);
            for (int c = 0; c < pairs; c++) {
                int w0 = 2 * c, w1 = 2 * c + 1;
                for (; w0 < items; w0 += grid, w1 += grid) {
                    assert_true(w1 < items); /* both CTAs of the pair have an item, or neither */
                    mm_tile a = mm_tile_locate(start, experts, col_tiles, w0);
                    mm_tile b = mm_tile_locate(start, experts, col_tiles, w1);
                    assert_int_equal(a.expert, b.expert);
                    assert_int_equal(a.row_tile, b.row_tile);
                    assert_int_equal(b.col_tile, a.col_tile + 1);
                }
                assert_true(w1 >= items);
            }
        }
    }
    assert_int_equal(mm_tile_pairs(3 * MM_GEMM_BN, 132, 66, 0), 0); /* odd column tiles */
    assert_int_equal(mm_tile_pairs(4 * MM_GEMM_BN, 132, 0, 0), 0);  /* no pair fits */
    assert_int_equal(mm_tile_pairs(4 * MM_GEMM_BN, 1, 66, 0), 0);   /* one CTA */
    assert_int_equal(mm_tile_pairs(4 * MM_GEMM_BN, 7, 66, 0), 3);   /* an odd CTA left out */
    /* no expert with more than 64 rows: no tile takes A by TMA, nothing to share */
    assert_int_equal(mm_tile_pairs(4 * MM_GEMM_BN, 132, 66, MM_GEMM_BM / 2), 0);
    assert_int_equal(mm_tile_pairs(4 * MM_GEMM_BN, 132, 66, 1), 0);
    assert_int_equal(mm_tile_pairs(4 * MM_GEMM_BN, 132, 66, MM_GEMM_BM / 2 + 1), 66);
    assert_int_equal(mm_tile_pairs(4 * MM_GEMM_BN, 132, 66, -1), 66); /* unknown */
}

/* Sender rows: every row of every sender appears exactly once, in sender order. */
static void sender_rows_cover_once(void **state)
{
    (void)state;
    static const int cases[][4] = {{96, 96, 0, 0}, {192, 200, 0, 0}, {0, 128, 5, 300},
                                   {256, 0, 0, 1}, {0, 0, 0, 7},   {127, 129, 128, 1}};
    static int seen[4][512];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int *cnt = cases[c];
        int total = 0;
        for (int s = 0; s < 4; s++) total += cnt[s];
        memset(seen, 0, sizeof seen);
        int prev_s = 0, prev_idx = -1;
        for (int r = 0; r < total; r++) {
            int idx, s = mm_sender_row(cnt, 4, r, &idx);
            assert_true(s >= 0 && s < 4 && idx >= 0 && idx < cnt[s]);
            seen[s][idx]++;
            /* the next row of the same segment, or the first row of a later one */
            assert_true((s == prev_s && idx == prev_idx + 1) || (s > prev_s && idx == 0));
            prev_s = s;
            prev_idx = idx;
        }
        for (int s = 0; s < 4; s++)
            for (int i = 0; i < cnt[s]; i++) assert_int_equal(seen[s][i], 1);
    }
}

/* fused's GEMM2 items cover every (row tile, 128-block of H) exactly once, in whole items of
 * h_width adjacent blocks, for H of 1-57 blocks and both widths the rule can pick. */
static void fused_gemm2_items_cover_once(void **state)
{
    (void)state;
    static int seen[7][64];
    const int tiles = 7;
    for (int h_blocks = 1; h_blocks <= 57; h_blocks++) {
        for (int large = 0; large <= 1; large++) {
            const int width = mm_fused_h_width(h_blocks, large, 0), h_items = h_blocks / width;
            assert_true(width == 1 || (width == 2 && h_blocks % 2 == 0 && large));
            assert_int_equal(mm_fused_h_width(h_blocks, 0, 1), h_blocks % 2 == 0 ? 2 : 1);
            memset(seen, 0, sizeof seen);
            for (int g = 0; g < tiles * h_items; g++) {
                const int t = mm_fused_gemm2_tile(g, h_items), b = mm_fused_gemm2_block(g, h_items, width);
                assert_true(t >= 0 && t < tiles && b >= 0 && b + width <= h_blocks);
                for (int j = 0; j < width; j++) seen[t][b + j]++;
            }
            for (int t = 0; t < tiles; t++)
                for (int b = 0; b < h_blocks; b++) assert_int_equal(seen[t][b], 1);
        }
    }
}

/* fused's dual rule: large tiles on average make every item dual (GEMM2 as pairs when H allows);
 * otherwise only GEMM1 tiles of more than 64 rows. Flash EP2's row tiles at 512 / 2048 / 4096
 * tokens: 24 rows an expert (1 tile each), 96 (1 tile), 192 (128 + 64). */
static void fused_dual_rule(void **state)
{
    (void)state;
    const int el = 128, h_blocks = 32;
    /* 512 tokens: 128 tiles of 24 rows */
    int large = mm_fused_large(el * 24, el), w = mm_fused_h_width(h_blocks, large, 0);
    assert_false(large);
    assert_int_equal(w, 1);
    assert_false(mm_fused_dual(true, 24, large, w));
    assert_false(mm_fused_dual(false, 24, large, w));
    assert_true(mm_fused_dual(true, 65, large, w)); /* a hot expert's full tile: dual anyway */
    assert_false(mm_fused_dual(true, 64, large, w));
    /* 2048 tokens: 96 rows a tile */
    large = mm_fused_large(el * 96, el);
    w = mm_fused_h_width(h_blocks, large, 0);
    assert_true(large);
    assert_int_equal(w, 2);
    assert_true(mm_fused_dual(true, 96, large, w) && mm_fused_dual(false, 96, large, w));
    /* 4096 tokens: tiles of 128 and 64 rows, 96 on average: the 64-row tiles are dual (split) too */
    large = mm_fused_large(el * 192, 2 * el);
    w = mm_fused_h_width(h_blocks, large, 0);
    assert_true(large && mm_fused_dual(true, 64, large, w) && mm_fused_dual(false, 64, large, w));
    /* exactly 64 on average is not large; an odd count of H blocks keeps single GEMM2 items */
    assert_false(mm_fused_large(64 * 10, 10));
    assert_int_equal(mm_fused_h_width(7, 1, 0), 1);
    assert_false(mm_fused_dual(false, 128, 1, mm_fused_h_width(7, 1, 0)));
}

/* Decode: a tile of <= 8 rows is compact (dual, both weight blocks in one stage) in GEMM1 always,
 * in GEMM2 when its items are pairs of H blocks: when every tile is tiny (Flash EP2 at 1 token:
 * 1-2 rows an expert), or when the tiles are large on average (a hot expert's 130 rows leave a
 * 2-row tile). A 9-row tile stays as it was; an odd H keeps GEMM2 single. */
static void fused_compact_rule(void **state)
{
    (void)state;
    const int h_blocks = 32;
    int w = mm_fused_h_width(h_blocks, 0, 1);
    assert_int_equal(w, 2);
    assert_true(mm_fused_compact(true, 1, w) && mm_fused_dual(true, 1, 0, w));
    assert_true(mm_fused_compact(false, 8, w) && mm_fused_dual(false, 8, 0, w));
    assert_false(mm_fused_compact(true, 9, w));
    assert_false(mm_fused_dual(true, 9, 0, mm_fused_h_width(h_blocks, 0, 0)));
    w = mm_fused_h_width(h_blocks, 0, 0); /* some expert has more than 8 rows */
    assert_int_equal(w, 1);
    assert_true(mm_fused_compact(true, 3, w));   /* GEMM1 is compact per tile */
    assert_false(mm_fused_compact(false, 3, w)); /* GEMM2 single: not dual, not compact */
    assert_false(mm_fused_dual(false, 3, 0, w));
    w = mm_fused_h_width(h_blocks, 1, 0);
    assert_true(mm_fused_compact(false, 2, w));
    assert_int_equal(mm_fused_h_width(7, 0, 1), 1);
    assert_false(mm_fused_compact(false, 2, 1));
    /* pairs where they save rounds of 132 CTAs (Flash EP2, 32 H blocks): 1 token (6 tiles) yes,
     * 2 tokens (12) no, 4 and 8 tokens (24, 48) yes; an odd H never */
    assert_true(mm_fused_tiny_pairs(h_blocks, 6, 132));
    assert_false(mm_fused_tiny_pairs(h_blocks, 12, 132));
    assert_true(mm_fused_tiny_pairs(h_blocks, 24, 132));
    assert_true(mm_fused_tiny_pairs(h_blocks, 48, 132));
    assert_false(mm_fused_tiny_pairs(7, 6, 132));
    assert_false(mm_fused_tiny_pairs(h_blocks, 6, 0));
}

/* The fused kernel's schedule split over a warp's lanes equals the one-thread prefix, for expert
 * counts below, at and above the lane count, with empty experts and empty lanes. */
static void fused_schedule_lanes(void **state)
{
    (void)state;
    const int els[] = {1, 5, 31, 32, 33, 128, 384, 500}, ranks = 3;
    static int cnt[500 * 3], rows[500];
    static int32_t want[501];
    static int got[501];
    for (size_t i = 0; i < sizeof els / sizeof els[0]; i++) {
        const int el = els[i];
        int all = 0, most = 0;
        for (int e = 0; e < el; e++) {
            rows[e] = 0;
            for (int s = 0; s < ranks; s++) {
                cnt[e * ranks + s] = (e * 7 + s * 13) % 5 == 0 ? 0 : (e * 31 + s * 17) % 150;
                rows[e] += cnt[e * ranks + s];
            }
            all += rows[e];
            most = rows[e] > most ? rows[e] : most;
        }
        const int total = mm_tile_prefix(rows, el, want);
        int before = 0, sum_rows = 0, max_rows = 0, folds = 0;
        for (int lane = 0; lane < 32; lane++) {
            const mm_fused_lane_sums r = mm_fused_schedule_sums(cnt, el, ranks, lane, 32);
            mm_fused_schedule_write(cnt, el, ranks, lane, 32, before, 0, got);
            before += r.tiles;
            sum_rows += r.rows;
            max_rows = r.most > max_rows ? r.most : max_rows;
            folds += r.folds;
        }
        assert_int_equal(before, total);
        assert_int_equal(sum_rows, all);
        assert_int_equal(max_rows, most);
        for (int e = 0; e < el; e++) assert_int_equal(got[e], want[e]);
        /* a `large` call: each lane's tiles less its folds, the prefix of mm_fused_expert_tiles */
        int want_folds = 0, at = 0;
        for (int e = 0; e < el; e++) {
            want[e] = at;
            at += mm_fused_expert_tiles(rows[e], 1);
            want_folds += mm_fused_extra_rows(rows[e], 1) > 0;
        }
        assert_int_equal(folds, want_folds);
        assert_int_equal(at, total - folds);
        before = 0;
        for (int lane = 0; lane < 32; lane++) {
            const mm_fused_lane_sums r = mm_fused_schedule_sums(cnt, el, ranks, lane, 32);
            mm_fused_schedule_write(cnt, el, ranks, lane, 32, before, 1, got);
            before += r.tiles - r.folds;
        }
        assert_int_equal(before, at);
        for (int e = 0; e < el; e++) assert_int_equal(got[e], want[e]);
    }
}

/* Extra rows: only in a `large` call, only 1..8 rows past a whole tile of an expert with more than
 * one tile's rows; they take the expert's last tile instead of one of their own, and act keeps
 * them apart from every tile's rows. */
static void fused_extra_rows(void **state)
{
    (void)state;
    assert_int_equal(mm_fused_extra_rows(136, 1), 8);
    assert_int_equal(mm_fused_extra_rows(129, 1), 1);
    assert_int_equal(mm_fused_extra_rows(137, 1), 0);
    assert_int_equal(mm_fused_extra_rows(128, 1), 0);
    assert_int_equal(mm_fused_extra_rows(8, 1), 0); /* no full tile to fold into */
    assert_int_equal(mm_fused_extra_rows(264, 1), 8);
    assert_int_equal(mm_fused_extra_rows(136, 0), 0); /* not large */
    for (int rows = 0; rows < 1000; rows++) {
        const int extra = mm_fused_extra_rows(rows, 1), tiles = mm_fused_expert_tiles(rows, 1);
        assert_int_equal(mm_fused_expert_tiles(rows, 0), mm_row_tiles(rows));
        /* every row in a tile: 128 per tile, the last one up to 8 more */
        assert_true(rows <= tiles * MM_GEMM_BM + extra);
        assert_true(rows > (tiles - 1) * MM_GEMM_BM || rows == 0);
        assert_true(extra == 0 || rows == tiles * MM_GEMM_BM + extra);
        assert_true(extra <= MM_FUSED_EXTRA_ROWS);
    }
    /* act: 3 experts' extra rows [0, 24), then tile t at 24 + 128 t; no overlap */
    assert_int_equal((int)mm_fused_act_extra_row(2, 7), 23);
    assert_int_equal((int)mm_fused_act_tile_row(3, 0), 24);
    assert_int_equal((int)mm_fused_act_tile_row(3, 5), 24 + 5 * 128);
    assert_int_equal(MM_FUSED_EXTRA_ROWS, MM_FUSED_ACT_EXTRA_ROWS);
    /* the folding form: Pro EP2 4096 tokens and EP1 8192 (128 rows an expert) and the check
     * scenarios (132 and 129 rows at EP1, 132 at EP2) take it; Pro EP2 8192 (256), Flash EP2 8192
     * (384), Flash EP2 4096 (192), 512 (24) and decode do not */
    assert_true(mm_fused_fold_kernel(4096, 6, 2, 384));
    assert_true(mm_fused_fold_kernel(8192, 6, 1, 384));
    assert_false(mm_fused_fold_kernel(8192, 6, 2, 384));
    assert_false(mm_fused_fold_kernel(8192, 6, 2, 256));
    assert_true(mm_fused_fold_kernel(264, 2, 1, 4) && mm_fused_fold_kernel(258, 2, 1, 4));
    assert_true(mm_fused_fold_kernel(132, 2, 2, 4) && !mm_fused_fold_kernel(132, 2, 1, 4));
    assert_false(mm_fused_fold_kernel(264, 2, 2, 4));
    assert_false(mm_fused_fold_kernel(4096, 6, 2, 256));
    assert_false(mm_fused_fold_kernel(512, 6, 2, 256));
    assert_false(mm_fused_fold_kernel(1, 6, 2, 256));
    assert_false(mm_fused_fold_kernel(0, 6, 2, 256));
    /* the hand-off form: GEMM1 items expected to fit one wave. Flash at 1 token (EP1, EP2, EP8:
     * 5.8-6 experts x 16 I blocks), V3 at 1 token (8 x 16 = 128 at EP1), the check's small
     * scenarios; not Pro at 1 token (6 x 24 = 144 on 132 CTAs), Flash at 2 tokens (11.6 x 16),
     * more than 32 I blocks, a folding call, no tokens, or too few CTAs */
    assert_true(mm_fused_handoff_kernel(1, 6, 2, 256, 2048, 132));
    assert_true(mm_fused_handoff_kernel(1, 6, 1, 256, 2048, 132));
    assert_true(mm_fused_handoff_kernel(1, 6, 8, 256, 2048, 132));
    assert_true(mm_fused_handoff_kernel(4, 2, 1, 8, 128, 132));
    assert_false(mm_fused_handoff_kernel(1, 6, 2, 384, 3072, 132));
    assert_false(mm_fused_handoff_kernel(2, 6, 2, 256, 2048, 132));
    assert_true(mm_fused_handoff_kernel(1, 8, 1, 256, 2048, 132));
    assert_false(mm_fused_handoff_kernel(1, 6, 1, 384, 3072, 132));
    assert_false(mm_fused_handoff_kernel(1, 6, 2, 256, 8192, 132));
    assert_false(mm_fused_handoff_kernel(4096, 6, 2, 384, 3072, 132));
    assert_false(mm_fused_handoff_kernel(8192, 6, 2, 256, 2048, 132));
    assert_false(mm_fused_handoff_kernel(0, 6, 2, 256, 2048, 132));
    assert_false(mm_fused_handoff_kernel(1, 6, 2, 256, 2048, 64));
    /* the FP4 swapped form: a local expert expects <= 56 rows. Flash (256 experts, top-6) at EP8
     * up to 298 tokens a rank (8 x 298 x 6 = 14304 <= 56 x 256), not 299; at EP1 up to 2389 */
    assert_true(mm_fused_fp4_swapped(1, 6, 8, 256));
    assert_true(mm_fused_fp4_swapped(298, 6, 8, 256));
    assert_false(mm_fused_fp4_swapped(299, 6, 8, 256));
    assert_true(mm_fused_fp4_swapped(2389, 6, 1, 256) && !mm_fused_fp4_swapped(2390, 6, 1, 256));
    assert_false(mm_fused_fp4_swapped(0, 6, 8, 256));
    assert_false(mm_fused_fp4_swapped(1, 6, 8, 0));
    assert_false(mm_fused_fp4_swapped(1, 0, 8, 256));
    assert_false(mm_fused_fold_kernel(4096, 6, 2, 0));
    assert_true(mm_fused_fold_kernel(1, 128 + 16, 1, 1) && !mm_fused_fold_kernel(1, 128 + 17, 1, 1));
    assert_true(mm_fused_fold_kernel(1, 128 - 16, 1, 1) && !mm_fused_fold_kernel(1, 128 - 17, 1, 1));
    assert_false(mm_fused_fold_kernel(1, 16, 1, 1));  /* near 0, not a tile */
    assert_false(mm_fused_fold_kernel(1, 256, 1, 1)); /* near 256: too few fold */
}

/* A call's form: a real rank's from its tokens; an EP slice's from the rank it emulates, not from
 * its own tokens (each keeps only its picks of the slice's experts, so tokens x topk would count
 * ~4.5x the rows at Flash EP8). */
static void fused_call_forms(void **state)
{
    (void)state;
    enum { H = 2048, CTAS = 132 };
    /* Flash EP8, a real rank: hand-off at 1 token, folding near 128 rows an expert (597-768
     * tokens), the swapped FP4 form up to 298 tokens, the base form at 4096 */
    assert_int_equal(mm_fused_call_form(1, 0, 0, 6, 8, 256, H, CTAS, 0), MM_FUSED_FORM_HANDOFF);
    assert_int_equal(mm_fused_call_form(680, 0, 0, 6, 8, 256, H, CTAS, 0), MM_FUSED_FORM_FOLD);
    assert_int_equal(mm_fused_call_form(160, 0, 0, 6, 8, 256, H, CTAS, 0), MM_FUSED_FORM_BASE);
    assert_int_equal(mm_fused_call_form(4096, 0, 0, 6, 8, 256, H, CTAS, 0), MM_FUSED_FORM_BASE);
    assert_int_equal(mm_fused_call_form(298, 0, 0, 6, 8, 256, H, CTAS, 1), MM_FUSED_FORM_FP4_SWAPPED);
    assert_int_equal(mm_fused_call_form(299, 0, 0, 6, 8, 256, H, CTAS, 1), MM_FUSED_FORM_FP4);
    /* its EP8 slice on one GPU (32 experts, the ~55% of 8 x batch tokens that reach them) takes
     * the same forms; counted by its own tokens it took the base form at 1 token (~5 tokens x 6
     * picks over 32 experts: 19 experts x 16 items, past a wave), folding at 160 (700 x 6 / 32 =
     * 131 rows) and FP4's FP8-block form at 160 */
    assert_int_equal(mm_fused_call_form(5, 1, 8, 6, 1, 32, H, CTAS, 0), MM_FUSED_FORM_HANDOFF);
    assert_int_equal(mm_fused_kernel_form(5, 6, 1, 32, H, CTAS, 0), MM_FUSED_FORM_BASE);
    assert_int_equal(mm_fused_call_form(700, 160, 8, 6, 1, 32, H, CTAS, 0), MM_FUSED_FORM_BASE);
    assert_int_equal(mm_fused_kernel_form(700, 6, 1, 32, H, CTAS, 0), MM_FUSED_FORM_FOLD);
    assert_int_equal(mm_fused_call_form(2980, 680, 8, 6, 1, 32, H, CTAS, 0), MM_FUSED_FORM_FOLD);
    assert_int_equal(mm_fused_call_form(700, 160, 8, 6, 1, 32, H, CTAS, 1), MM_FUSED_FORM_FP4_SWAPPED);
    assert_int_equal(mm_fused_kernel_form(700, 6, 1, 32, H, CTAS, 1), MM_FUSED_FORM_FP4);
    assert_int_equal(mm_fused_call_form(18400, 4096, 8, 6, 1, 32, H, CTAS, 0), MM_FUSED_FORM_BASE);
    /* a real EP1 rank with the slice fields unset */
    assert_int_equal(mm_fused_call_form(1, 0, 0, 6, 1, 256, H, CTAS, 0), MM_FUSED_FORM_HANDOFF);
}

/* Counts first: an expert's slots from one rank are 0..count-1, each once, in (token, k) order,
 * with masked k (-1) and an expert repeated within a token; the rule's token bounds. */
static void fused_first_slots(void **state)
{
    (void)state;
    enum { T = 5, K = 4, E = 6 };
    const int32_t ids[T * K] = {3, 1, -1, 5, 1, 3, 0, -1, 3, 3, 2, 1, -1, -1, -1, -1, 5, 4, 1, 3};
    int count[E] = {0}, seen[E][T * K], last[E];
    memset(seen, 0, sizeof seen);
    for (int e = 0; e < E; e++) last[e] = -1;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            const int e = ids[t * K + k];
            if (e < 0) continue;
            const int slot = mm_fused_first_slot(ids, t, k, K);
            assert_true(slot >= 0 && slot < T * K);
            seen[e][slot]++;
            assert_int_equal(slot, last[e] + 1); /* in (t, k) order */
            last[e] = slot;
            count[e]++;
        }
    for (int e = 0; e < E; e++)
        for (int s = 0; s < T * K; s++) assert_int_equal(seen[e][s], s < count[e] ? 1 : 0);
    assert_int_equal(count[3], 5); /* twice in token 2 */
    assert_true(mm_fused_counts_first(0, 132));
    assert_true(mm_fused_counts_first(MM_FUSED_COUNTS_FIRST_MAX_TOKENS, 132));
    assert_false(mm_fused_counts_first(MM_FUSED_COUNTS_FIRST_MAX_TOKENS + 1, 132));
    assert_false(mm_fused_counts_first(16, 8)); /* more tokens than CTAs */
}

/* fused's dispatch rounds: both buffers of every token of a round fit the span, one more would
 * not (unless the cap binds), and a hidden size whose round cannot hold one token gets 0. */
static void fused_dispatch_group(void **state)
{
    (void)state;
    /* the stage ring (5 stages of 34816 B) and the staging area (fused.cu: 33792 B) */
    const long long span = 5 * 34816 + 33792;
    const long long hiddens[] = {128, 2048, 4096, 7168, 16384, 34176, 34304, 40960};
    for (size_t i = 0; i < sizeof hiddens / sizeof hiddens[0]; i++) {
        const long long h = hiddens[i], wire = h + (h / 128 * 4 + 15) / 16 * 16, per = 2 * (2 * h + wire);
        const int g = mm_fused_dispatch_group(h, wire, span, 8);
        assert_true(g >= 0 && g <= 8);
        assert_true((long long)g * per <= span);
        if (g < 8) assert_true((long long)(g + 1) * per > span);
    }
    assert_int_equal(mm_fused_dispatch_group(4096, 4224, span, 8), 8);   /* Flash: 12416 B a token */
    assert_int_equal(mm_fused_dispatch_group(7168, 7392, span, 8), 4);   /* Pro, V3: 21728 B */
    assert_int_equal(mm_fused_dispatch_group(40960, 42240, span, 8), 0); /* no room: refused */
    /* the largest hidden size the fused mode takes (README), and the next multiple of 128 */
    assert_int_equal(mm_fused_dispatch_group(34176, 34176 + 1072, span, 8), 1);
    assert_int_equal(mm_fused_dispatch_group(34304, 34304 + 1072, span, 8), 0);
    assert_int_equal(mm_fused_dispatch_group(4096, 4224, span, 2), 2);
}

/* fused's dispatch rounds cover every token exactly once: CTA c's rounds j = 0, 1, ... while
 * mm_fused_round_tokens > 0, tokens g < that count; a round short of `group` is the CTA's last,
 * and the count is exactly how many of the round's `group` slots hold a token. */
static void fused_dispatch_rounds(void **state)
{
    (void)state;
    const int cases[][3] = {{0, 132, 8}, {1, 132, 8}, {31, 132, 8}, {132, 132, 8}, {133, 132, 4},
                            {1000, 132, 8}, {1056, 132, 8}, {4096, 132, 8}, {8192, 132, 4},
                            {8192, 78, 8}, {37, 5, 3}, {7, 1, 8}};
    static int seen[8192];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int tokens = cases[c][0], ctas = cases[c][1], group = cases[c][2];
        memset(seen, 0, sizeof seen);
        for (int cta = 0; cta < ctas; cta++) {
            int j = 0, n;
            for (; (n = mm_fused_round_tokens(tokens, cta, ctas, group, j)) > 0; j++) {
                assert_true(n <= group);
                for (int g = 0; g < group; g++) {
                    const int t = mm_fused_round_token(cta, ctas, group, j, g);
                    assert_int_equal(g < n, t < tokens);
                    if (g < n) seen[t]++;
                }
                if (n < group) assert_int_equal(mm_fused_round_tokens(tokens, cta, ctas, group, j + 1), 0);
            }
            assert_true(j <= (tokens + ctas * group - 1) / (ctas * group) + 1);
        }
        for (int t = 0; t < tokens; t++) assert_int_equal(seen[t], 1);
    }
}

/* The staged combine's chunks: the fewest equal parts of hidden of at most 1024 columns, each a
 * multiple of 128 columns, or 0 when hidden is not a multiple of 128; and when a call takes it. */
static void combine_chunks(void **state)
{
    (void)state;
    assert_int_equal(mm_combine_chunk(4096), 1024); /* Flash: 4 parts */
    assert_int_equal(mm_combine_chunk(7168), 1024); /* Pro, V3: 7 */
    assert_int_equal(mm_combine_chunk(256), 256);
    assert_int_equal(mm_combine_chunk(1408), 128); /* 11 blocks of 128: 11 parts */
    assert_int_equal(mm_combine_chunk(1000), 0);
    assert_int_equal(mm_combine_chunk(100), 0);
    for (int h = 128; h <= 40960; h += 128) {
        const int c = mm_combine_chunk(h);
        assert_true(c > 0 && c <= MM_COMBINE_CHUNK_MOST && c % 128 == 0 && h % c == 0);
        /* no fewer parts would do */
        for (int parts = 1; parts < h / c; parts++)
            assert_false(h % parts == 0 && h / parts % 128 == 0 && h / parts <= MM_COMBINE_CHUNK_MOST);
    }
    /* span: the stage ring and staging area (fused.cu's DISPATCH_SPAN_BYTES) */
    const unsigned span = 5 * 34816 + 33792, ring = mm_combine_ring_bytes(span, 3);
    assert_true(ring % 128 == 0 && 3 * ring + mm_combine_heads_bytes(3) <= span);
    assert_true(mm_combine_staged_call(32768, 4096, 6, 132, 3, span)); /* Flash EP8 slice, 4096 tokens */
    assert_true(mm_combine_staged_call(512, 4096, 6, 132, 3, span));
    assert_false(mm_combine_staged_call(64, 4096, 6, 132, 3, span));  /* 256 units: under 4 a warpgroup */
    assert_false(mm_combine_staged_call(8192, 4096, 9, 132, 3, span)); /* top-k past 8: a token per CTA */
    assert_false(mm_combine_staged_call(8192, 100, 6, 132, 3, span));  /* no chunk */
    assert_false(mm_combine_staged_call(8192, 4096, 8, 132, 3, 40000)); /* a full unit would not fit */
}

/* The staged combine's batches, run as combine_staged runs them over random masks (runs of empty
 * units, full units and mixed ones): the regions hold a full unit each and fit the ring; every
 * batch is 1..MM_COMBINE_BATCH_MOST consecutive units whose rows fit a region, as many as fit;
 * warp 0's cut a lane a unit (mm_combine_in_batch) is that batch; every batch is issued before
 * it is summed and every unit is summed once; and every mask either side reads is in the
 * buffer that holds its batch, never in the one rewritten that round (its new masks are visible
 * only after the round's barrier). */
static void combine_batches(void **state)
{
    (void)state;
    const unsigned rings[] = {68736, 12288, 16384, 20000 & ~127u, 200000 & ~127u};
    const unsigned row = 2048;
    unsigned seed = 12345;
    enum { N = 5000 };
    static uint8_t mask_of[N + 4 * MM_COMBINE_AHEAD];
    static long long batch_start[N + 1], batch_stop[N + 1];
    for (size_t ri = 0; ri < sizeof rings / sizeof rings[0]; ri++)
        for (int topk = 1; topk <= 8; topk++) {
            const unsigned ring = rings[ri];
            const int regions = mm_combine_regions(ring, (unsigned)topk * row);
            if (regions < 1) {
                assert_true(ring < (unsigned)topk * row);
                continue;
            }
            const unsigned region = mm_combine_region_bytes(ring, regions);
            assert_true(regions <= MM_COMBINE_REGIONS_MOST && region % 128 == 0);
            assert_true(region >= (unsigned)topk * row && (unsigned)regions * region <= ring);
            const long long n = 1 + (seed % N);
            for (long long j = 0; j < N + 4 * MM_COMBINE_AHEAD; j++) {
                seed = seed * 1103515245u + 12345u;
                const unsigned kind = (unsigned)(j / 97 + ri) % 3, r = seed >> 16;
                const unsigned m = kind == 0 ? 0u : kind == 1 ? (1u << topk) - 1u : r & ((1u << topk) - 1u);
                mask_of[j] = (uint8_t)(j < n ? m : 0u);
            }
            uint8_t mask2[2 * MM_COMBINE_AHEAD];
            long long held[2] = {0, 1}; /* which batch of masks each buffer holds */
            memcpy(mask2, mask_of, sizeof mask2);
            long long rewriting = -1; /* the buffer rewritten this round */
            /* every read of unit j's mask (and the batch's probe one past its end) */
            #define READS_OK(from, to)                                                                  \
                for (long long q = (from); q <= (to) && q < n; q++) {                                \
                    assert_int_equal(held[(q / MM_COMBINE_AHEAD) & 1], q / MM_COMBINE_AHEAD);          \
                    assert_true((q / MM_COMBINE_AHEAD & 1) != rewriting);                            \
                }
            /* warp 0's cut: a lane a unit, the prefix of lanes mm_combine_in_batch keeps */
            #define ISSUE()                                                                            \
                do {                                                                                 \
                    const long long end = mm_combine_batch_end(mask2, issue_j, n, region, row);      \
                    READS_OK(issue_j, issue_j + MM_COMBINE_BATCH_MOST - 1);                          \
                    unsigned upto = 0;                                                               \
                    int count = 0, last_in = 1;                                                      \
                    for (int i = 0; i < 32; i++) {                                                   \
                        const long long u = issue_j + i;                                             \
                        upto += i < MM_COMBINE_BATCH_MOST && u < n ? (unsigned)mm_combine_rows(mask_of[u]) * row : 0u; \
                        const bool in = mm_combine_in_batch(i, upto, n - issue_j, region);           \
                        assert_true(!in || last_in); /* a prefix */                                  \
                        last_in = in;                                                                \
                        count += in;                                                                 \
                    }                                                                                \
                    assert_int_equal(count, end - issue_j);                                          \
                    batch_start[issue_b] = issue_j;                                                  \
                    batch_stop[issue_b++] = end;                                                     \
                    issue_j = end;                                                                   \
                } while (0)
            long long issue_j = 0, issue_b = 0, sum_j = 0, sum_b = 0, next_masks = 2;
            for (int q = 0; q < regions - 1 && issue_j < n; q++) ISSUE();
            while (sum_j < n) {
                rewriting = -1;
                if ((next_masks - 1) * MM_COMBINE_AHEAD <= sum_j) {
                    rewriting = next_masks & 1;
                    next_masks++;
                }
                if (issue_j < n) ISSUE();
                assert_true(issue_b > sum_b && batch_start[sum_b] == sum_j); /* issued, in order */
                const long long end = batch_stop[sum_b]; /* the count warp 0 published */
                READS_OK(sum_j, end - 1);                /* the masks of its units */
                assert_true(end > sum_j && end - sum_j <= MM_COMBINE_BATCH_MOST);
                unsigned bytes = 0;
                for (long long u = sum_j; u < end; u++) bytes += (unsigned)mm_combine_rows(mask_of[u]) * row;
                assert_true(bytes <= region);
                if (end < n && end - sum_j < MM_COMBINE_BATCH_MOST) /* no longer batch fits */
                    assert_true(bytes + (unsigned)mm_combine_rows(mask_of[end]) * row > region);
                sum_j = end;
                sum_b++;
                if (rewriting >= 0) { /* visible after the round's barrier */
                    const long long c = next_masks - 1;
                    memcpy(mask2 + rewriting * MM_COMBINE_AHEAD, mask_of + c * MM_COMBINE_AHEAD, MM_COMBINE_AHEAD);
                    held[rewriting] = c;
                }
            }
            #undef READS_OK
            #undef ISSUE
            assert_int_equal(sum_j, n);
        }
}

/* The tensor-copy epilogue's box layout: the per-thread base plus per-pair step the kernel adds
 * lands every fragment pair where the 128-byte-swizzled map expects (row, col); every (row, col
 * pair) of the two boxes is written exactly once; and each warp-wide store (one pair i of 32 lanes)
 * touches 32 different banks. */
static void out_box_layout(void **state)
{
    (void)state;
    static unsigned char written[2 * MM_OUT_BOX_BYTES / 4];
    memset(written, 0, sizeof written);
    for (int w = 0; w < 4; w++)
        for (int i = 0; i < 64; i += 2) {
            unsigned banks = 0;
            for (int lane = 0; lane < 32; lane++) {
                const int row = mm_frag_row(w, lane, i), col = mm_frag_col(lane, i);
                const unsigned at = mm_out_box_base(w, lane) + mm_out_box_step(lane, i);
                assert_int_equal(at, mm_out_box_offset(row, col));
                assert_true(at % 4 == 0 && at < 2 * MM_OUT_BOX_BYTES);
                written[at / 4]++;
                banks |= 1u << ((at / 4) % 32);
            }
            assert_int_equal(banks, 0xffffffffu);
        }
    for (unsigned k = 0; k < sizeof written; k++) assert_int_equal(written[k], 1);
    /* the map's own rule at a few points: chunk 0 of row 9 sits at chunk 1, box 1 starts at 8 KB */
    assert_int_equal(mm_out_box_offset(9, 0), 9 * 128 + 16);
    assert_int_equal(mm_out_box_offset(0, 64), 8192);
    assert_int_equal(mm_out_box_offset(7, 62), 7 * 128 + ((7 ^ 7) * 16) + 12);
}

/* fused's swizzled GEMM2 out tiles: a row's chunks are a permutation of the row (the 16-byte
 * reads of lane ^ (row % 8) find what the stores wrote), and a warp's stores of one pair hit 32
 * banks, for 128- and 256-column tiles. */
static void out_tile_swizzle(void **state)
{
    (void)state;
    const int widths[2] = {128, 256};
    for (int wi = 0; wi < 2; wi++) {
        const int width = widths[wi];
        for (int row = 0; row < 128; row++) {
            int seen[256] = {0};
            for (int col = 0; col < width; col += 2) {
                const int at = mm_out_tile_at(row, col, width);
                assert_true(at >= row * width && at < (row + 1) * width);
                seen[at - row * width]++;
                /* the reader's chunk lane ^ (row & 7) holds chunk col / 8 */
                assert_int_equal((at - row * width) / 8, (col / 8) ^ (row & 7));
            }
            for (int c = 0; c < width; c += 2) assert_int_equal(seen[c], 1);
        }
        for (int w = 0; w < 8; w++)
            for (int i = 0; i < 64; i += 2) {
                unsigned banks = 0;
                for (int lane = 0; lane < 32; lane++) {
                    const int row = 64 * (w / 4) + mm_frag_row(w % 4, lane, i), col = mm_frag_col(lane, i);
                    banks |= 1u << ((mm_out_tile_at(row, col, width) * 2 / 4) % 32);
                }
                assert_int_equal(banks, 0xffffffffu);
            }
    }
}

/* The expert limit of the fused kernel's shared memory: the largest multiple of the ranks that
 * fits, one rank's worth more does not; the H200 figures the README quotes (room 223360 B, fixed
 * part 217088 B: five stages, the staging area, the extra-row accumulators) */
static void fused_max_experts_fit(void **state)
{
    (void)state;
    for (int ranks = 1; ranks <= 16; ranks *= 2)
        for (size_t room = 200000; room < 240000; room += 997) {
            const size_t fixed = 190000;
            const int e = mm_fused_max_experts(room, fixed, ranks);
            assert_int_equal(e % ranks, 0);
            if (e > 0) assert_true(fixed + mm_fused_smem_counts_bytes(e, ranks) <= room);
            assert_true(fixed + mm_fused_smem_counts_bytes(e + ranks, ranks) > room);
        }
    assert_int_equal(mm_fused_max_experts(223360, 217088, 1), 782);
    assert_int_equal(mm_fused_max_experts(223360, 217088, 8), 1384);
    assert_int_equal(mm_fused_max_experts(1000, 2000, 1), 0);
    assert_int_equal(mm_fused_max_experts(2000 + 12, 2000, 1), 0); /* one expert needs 4 + 4 + 16 */
    assert_int_equal(mm_fused_max_experts(2000 + 24, 2000, 1), 1);
}

/* The pairs a walk keeps busy (mm_fewest_pairs): the fewest that take as many waves as all, and
 * their rotated walk still covers every item pair once. */
static void fewest_pairs(void **state)
{
    (void)state;
    /* Flash EP8 (32 experts, 32 column tiles: 16 item pairs a row tile) on 66 pairs */
    assert_int_equal(mm_fewest_pairs(32 * 2 * 16, 66), 64);  /* 384 rows an expert: 16 waves, as on 64 */
    assert_int_equal(mm_fewest_pairs(32 * 8 * 16, 66), 66);  /* 1536 rows: 63 waves, 64 on 65 */
    assert_int_equal(mm_fewest_pairs(32 * 1 * 16, 66), 64);  /* 128-row tiles at 4096 rows: 8 waves */
    assert_int_equal(mm_fewest_pairs(32 * 11 * 24 / 2, 66), 66); /* Pro GEMM1 1024 rows: 64 waves exactly */
    assert_int_equal(mm_fewest_pairs(24, 66), 24);           /* fewer item pairs than pairs: one each */
    assert_int_equal(mm_fewest_pairs(0, 66), 66);            /* nothing to do: as launched */
    assert_int_equal(mm_fewest_pairs(2147483647, 66), 66);   /* the largest count: no overflow */
    for (int items = 1; items <= 3000; items += 7) {
        for (int max = 1; max <= 66; max += 5) {
            const int waves = (items + max - 1) / max;
            const int p = mm_fewest_pairs(items, max);
            assert_true(p >= 1 && p <= max);
            assert_true((items + p - 1) / p == waves);
            assert_true(p == 1 || (items + p - 2) / (p - 1) > waves);
            /* the rotated walk over p pairs: every item pair once; a pair stops at its first
             * past the end, after which it has none left */
            int seen[3000] = {0};
            for (int c = 0; c < p; c++)
                for (int n = 0;; n++) {
                    const int w = mm_pair_walk_item(c, n, p, 1);
                    if (w >= items) break;
                    seen[w]++;
                }
            for (int w = 0; w < items; w++) assert_int_equal(seen[w], 1);
        }
    }
}

int run_gemm_schedule_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(covers_every_tile_once),
        cmocka_unit_test(wide_prefix_covers_rows),
        cmocka_unit_test(wide_units_cover_once),
        cmocka_unit_test(tile_form_choice),
        cmocka_unit_test(fused_max_experts_fit),
        cmocka_unit_test(single_and_empty),
        cmocka_unit_test(row_index),
        cmocka_unit_test(prefix_chunks_compose),
        cmocka_unit_test(pairs_share_row_tiles),
        cmocka_unit_test(banded_order_covers_once),
        cmocka_unit_test(wide_walk_shares),
        cmocka_unit_test(fewest_pairs),
        cmocka_unit_test(sender_rows_cover_once),
        cmocka_unit_test(fused_gemm2_items_cover_once),
        cmocka_unit_test(fused_dual_rule),
        cmocka_unit_test(fused_compact_rule),
        cmocka_unit_test(fused_schedule_lanes),
        cmocka_unit_test(fused_extra_rows),
        cmocka_unit_test(fused_call_forms),
        cmocka_unit_test(fused_first_slots),
        cmocka_unit_test(fused_dispatch_group),
        cmocka_unit_test(fused_dispatch_rounds),
        cmocka_unit_test(combine_chunks),
        cmocka_unit_test(combine_batches),
        cmocka_unit_test(out_box_layout),
        cmocka_unit_test(out_tile_swizzle),
    };
    return cmocka_run_group_tests_name("gemm_schedule", tests, NULL, NULL);
}
