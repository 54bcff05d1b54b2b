#include <math.h>
#include <string.h>

#include "gate.h"
#include "sweep.h"
#include "test_util.h"

static const mm_gate_opts OPTS = {0.05, 0.01, 0, -1};

static mm_spread spread(double median, double half_width)
{
    mm_spread s = {median, median - half_width, median + half_width, half_width / median};
    return s;
}

static void verdicts(void **state)
{
    (void)state;
    double change;
    mm_spread a = spread(100, 1), b;
    b = spread(100.5, 1);
    assert_int_equal(gate_compare(&a, &b, &OPTS, &change), VERDICT_SAME);
    b = spread(110, 1);
    assert_int_equal(gate_compare(&a, &b, &OPTS, &change), VERDICT_SLOWER);
    assert_true(fabs(change - 0.10) < 1e-12);
    b = spread(90, 1);
    assert_int_equal(gate_compare(&a, &b, &OPTS, &change), VERDICT_FASTER);
    /* 3% slower, separated ranges, but within the noise of the new run (4%): SAME */
    b = spread(103, 4.12);
    assert_true(b.lo < a.hi || b.noise > 0.03);
    assert_int_equal(gate_compare(&a, &b, &OPTS, &change), VERDICT_SAME);
    /* 20% slower but overlapping wide ranges: the spread cannot confirm it */
    a = spread(100, 30);
    b = spread(120, 30);
    assert_int_equal(gate_compare(&a, &b, &OPTS, &change), VERDICT_UNSURE);
    /* a gap under min-gap never counts, however tight the runs */
    a = spread(100, 0.01);
    b = spread(100.5, 0.01);
    assert_int_equal(gate_compare(&a, &b, &OPTS, &change), VERDICT_SAME);
}

static void spreads(void **state)
{
    (void)state;
    double v[11] = {10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0};
    mm_spread s;
    gate_spread(v, 11, 0, 0, &s);
    assert_true(s.median == 5.0);
    assert_true(s.lo == 1.0 && s.hi == 9.0);
    assert_true(fabs(s.noise - 0.8) < 1e-12);
    gate_spread(NULL, 0, 50, 5, &s);
    assert_true(s.lo == 45 && s.hi == 55);
}

/* Ratios to a reference row: per round when paired, else from the two spreads' extremes. */
static void ratio_spreads(void **state)
{
    (void)state;
    const double row[] = {2.0, 4.4, 6.0}, ref[] = {1.0, 2.2, 3.0};
    mm_spread r = {0}, f = {0}, out;
    gate_spread(row, 3, 0, 0, &r);
    gate_spread(ref, 3, 0, 0, &f);
    gate_ratio_spread(row, 3, &r, ref, 3, &f, 1, &out); /* every round 2.0 */
    assert_true(out.median == 2.0 && out.lo == 2.0 && out.hi == 2.0 && out.noise == 0.0);
    const mm_spread a = {10.0, 9.0, 11.0, 0.1}, b = {5.0, 4.0, 6.0, 0.2};
    gate_ratio_spread(NULL, 0, &a, NULL, 0, &b, 1, &out); /* no samples: the conservative range */
    assert_true(out.median == 2.0 && out.lo == 1.5 && out.hi == 2.75);
    gate_ratio_spread(row, 3, &a, ref, 2, &b, 1, &out); /* counts differ: not paired */
    assert_true(out.median == 2.0 && out.lo == 1.5);
    gate_ratio_spread(row, 3, &a, ref, 3, &b, 0, &out); /* not timed side by side */
    assert_true(out.hi == 2.75);
}

/* Whole files (also under ASan in test_host_asan): drift cancels relative to normal, a slower
 * fused fails; the absolute gate fails the drift. */
static void files_relative(void **state)
{
    (void)state;
    FILE *out = tmpfile();
    assert_non_null(out);
    mm_gate_opts o = {0.03, 0.01, 0, MODE_NORMAL};
    assert_int_equal(gate_files("tests/gate/rounds-base.json", "tests/gate/rounds-drift4.json", &o, out, NULL), MM_OK);
    assert_int_equal(gate_files("tests/gate/rounds-base.json", "tests/gate/rounds-fused8.json", &o, out, NULL), MM_FAIL);
    o.relative_to = -1;
    assert_int_equal(gate_files("tests/gate/rounds-base.json", "tests/gate/rounds-drift4.json", &o, out, NULL), MM_FAIL);
    o.relative_to = MODE_LL; /* the baseline has no timed ll row */
    test_stderr_begin();
    assert_int_equal(gate_files("tests/gate/base.json", "tests/gate/base.json", &o, out, NULL), MM_USAGE);
    assert_non_null(strstr(test_stderr_end(), "--relative-to ll: the baseline has no timed ll row"));
    fclose(out);
}

int run_gate_tests(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(verdicts), cmocka_unit_test(spreads),
                                       cmocka_unit_test(ratio_spreads), cmocka_unit_test(files_relative)};
    return cmocka_run_group_tests_name("gate", tests, NULL, NULL);
}
