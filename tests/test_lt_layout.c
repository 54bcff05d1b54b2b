#include <stdlib.h>

#include "../src/lt_layout.h"
#include "test_util.h"

/* Padding to 16 rows, empty experts, 16-byte aligned scale blocks, hand-worked offsets. */
static void plan_offsets(void **state)
{
    (void)state;
    const int32_t count[] = {1, 0, 16, 17};
    lt_layout l;
    assert_int_equal(lt_layout_plan(count, 4, 3, &l), 0);
    assert_int_equal(l.n_pad[0], 16);
    assert_int_equal(l.n_pad[1], 0);
    assert_int_equal(l.n_pad[2], 16);
    assert_int_equal(l.n_pad[3], 32);
    assert_int_equal((int)l.row0[3], 32);
    assert_int_equal((int)l.rows_total, 64);
    assert_int_equal((int)l.scale0[1], 48); /* 16 * 3 = 48, already a multiple of 4 */
    assert_int_equal((int)l.scale0[3], 96);
    for (int e = 0; e < 4; e++) assert_int_equal((int)(l.scale0[e] % 4), 0);
    lt_layout_free(&l);
}

/* Padding rows repeat the expert's first row; both scale orders put every value where the
 * order says. */
static void pack_scales(void **state)
{
    (void)state;
    const int32_t count[] = {2, 0, 17}, offset[] = {0, 2, 2};
    const int kb = 2, rows = 19;
    float sa[19 * 2];
    for (int r = 0; r < rows; r++)
        for (int b = 0; b < kb; b++) sa[r * kb + b] = (float)(100 * r + b);
    lt_layout l;
    assert_int_equal(lt_layout_plan(count, 3, kb, &l), 0);
    assert_int_equal((int)lt_source_row(count, offset, 2, 16), 18);
    assert_int_equal((int)lt_source_row(count, offset, 2, 17), 2); /* padding: first row */
    float *by_rows = calloc(l.scales_total, sizeof(float)), *by_k = calloc(l.scales_total, sizeof(float));
    assert_non_null(by_rows);
    assert_non_null(by_k);
    lt_pack_act_scales(&l, count, offset, sa, 1, by_rows);
    lt_pack_act_scales(&l, count, offset, sa, 0, by_k);
    /* expert 2, padded row 5 (source row 7), k-block 1 */
    assert_true(by_rows[l.scale0[2] + 1 * 32 + 5] == 701.0f);
    assert_true(by_k[l.scale0[2] + 5 * kb + 1] == 701.0f);
    /* expert 0, padded row 9 (padding: source row 0), k-block 1 */
    assert_true(by_rows[l.scale0[0] + 16 + 9] == 1.0f);
    free(by_rows);
    free(by_k);
    lt_layout_free(&l);
}

static void weight_scales(void **state)
{
    (void)state;
    const int experts = 2, nb = 3, kb = 2;
    float ws[12], out[12];
    for (int i = 0; i < 12; i++) ws[i] = (float)i;
    lt_transpose_weight_scales(ws, experts, nb, kb, out);
    /* expert 1, n-block 2, k-block 1: ws[(1 * 3 + 2) * 2 + 1] = 11 at out[(1 * 2 + 1) * 3 + 2] */
    assert_true(out[11] == 11.0f);
    assert_true(out[(0 * 2 + 1) * 3 + 0] == ws[(0 * 3 + 0) * 2 + 1]);
}

int run_lt_layout_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_offsets),
        cmocka_unit_test(pack_scales),
        cmocka_unit_test(weight_scales),
    };
    return cmocka_run_group_tests_name("lt_layout", tests, NULL, NULL);
}
