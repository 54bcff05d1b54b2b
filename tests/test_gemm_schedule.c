#include "../kernels/gemm_schedule.h"
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

/* The fused tile's TMA boxes, against a row-by-row walk: over random sender counts (0..300 rows
 * per sender, 1..8 senders) every stage row [0, rows) of every tile is written by exactly one
 * box, from the row of the right sender's region, boxes land on multiples of 8 rows, and their
 * byte count is the rows' (or the decomposition reports that it does not fit). */
static void segment_boxes(void **state)
{
    (void)state;
    static int maps_id[MM_TILE_A_HEIGHTS];
    const void *maps[MM_TILE_A_HEIGHTS];
    for (int j = 0; j < MM_TILE_A_HEIGHTS; j++) maps[j] = &maps_id[j];
    uint64_t rng = 7;
    int tiles_checked = 0;
    for (int trial = 0; trial < 400; trial++) {
        int ranks = 1 + (int)((rng = rng * 6364136223846793005ull + 1) >> 33) % 8, cnt[8], total = 0;
        const int region_rows = 320, region0 = 3 * ranks * region_rows;
        for (int q = 0; q < ranks; q++) {
            int r = (int)((rng = rng * 6364136223846793005ull + 1) >> 33) % 6;
            cnt[q] = r == 0 ? 0 : r == 1 ? 1 : r == 2 ? 96 : (int)((rng >> 40) % 301);
            total += (cnt[q] + 7) / 8 * 8;
        }
        for (int t0 = 0; t0 < total; t0 += MM_GEMM_BM) {
            int rows = total - t0 < MM_GEMM_BM ? total - t0 : MM_GEMM_BM;
            mm_tile_a_boxes ab;
            if (!mm_tile_a_segment_boxes(&ab, maps, cnt, ranks, 8, region0, region_rows, t0, rows)) {
                assert_int_equal(ab.n, 0);
                continue;
            }
            int owner[MM_GEMM_BM], src[MM_GEMM_BM];
            for (int i = 0; i < MM_GEMM_BM; i++) owner[i] = -1;
            unsigned bytes = 0;
            for (int b = 0; b < ab.n; b++) {
                int h = -1;
                for (int j = 0; j < MM_TILE_A_HEIGHTS; j++)
                    if (ab.map[b] == maps[j]) h = 128 >> j;
                assert_true(h > 0);
                assert_int_equal(ab.dst_row[b] % 8, 0);
                assert_true(ab.dst_row[b] + h <= MM_GEMM_BM);
                for (int i = 0; i < h; i++) {
                    assert_int_equal(owner[ab.dst_row[b] + i], -1);
                    owner[ab.dst_row[b] + i] = b;
                    src[ab.dst_row[b] + i] = ab.row0[b] + i;
                }
                bytes += (unsigned)h * 128u;
            }
            assert_int_equal(bytes, ab.bytes);
            for (int i = 0; i < MM_GEMM_BM; i++) {
                if (i >= rows) {
                    assert_int_equal(owner[i], -1);
                    continue;
                }
                int logical = t0 + i, q = 0, p0 = 0;
                while (logical >= p0 + (cnt[q] + 7) / 8 * 8) p0 += (cnt[q++] + 7) / 8 * 8;
                assert_true(owner[i] >= 0);
                assert_int_equal(src[i], region0 + q * region_rows + logical - p0);
            }
            tiles_checked++;
        }
    }
    assert_true(tiles_checked > 400);
    /* one full run: a single 128-row box; a run that does not start on 8 rows is refused */
    mm_tile_a_boxes ab = {0};
    assert_true(mm_tile_a_add_run(&ab, maps, 40, 0, 128));
    assert_int_equal(ab.n, 1);
    assert_int_equal(ab.bytes, 128 * 128);
    ab.n = 0;
    assert_false(mm_tile_a_add_run(&ab, maps, 40, 4, 8));
}

int run_gemm_schedule_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(covers_every_tile_once),
        cmocka_unit_test(single_and_empty),
        cmocka_unit_test(row_index),
        cmocka_unit_test(segment_boxes),
    };
    return cmocka_run_group_tests_name("gemm_schedule", tests, NULL, NULL);
}
