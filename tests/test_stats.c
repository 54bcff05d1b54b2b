#include <math.h>

#include "stats.h"
#include "test_util.h"

static void basic(void **state)
{
    (void)state;
    double v[] = {5, 1, 4, 2, 3};
    mm_stats s;
    stats_compute(v, 5, &s);
    assert_int_equal(s.n, 5);
    assert_true(s.median == 3.0);
    assert_true(s.mean == 3.0);
    assert_true(s.min == 1.0 && s.max == 5.0);
    assert_true(fabs(s.p90 - 4.6) < 1e-12);          /* 4 + 0.6 * (5 - 4) */
    assert_true(fabs(s.stdev - sqrt(2.5)) < 1e-12);  /* sample stdev of 1..5 */
    assert_true(v[0] == 5);                          /* input untouched */
    double even[] = {1, 2, 3, 10};
    stats_compute(even, 4, &s);
    assert_true(s.median == 2.5);
    stats_compute(even, 1, &s);
    assert_true(s.median == 1.0 && s.stdev == 0.0);
    stats_compute(even, 0, &s);
    assert_int_equal(s.n, 0);
}

/* The critical path of a persistent kernel's phases, worked by hand: 3 CTAs, start, 2 phases. */
static void phase_path(void **state)
{
    (void)state;
    const unsigned long long stamps[3 * 3] = {
        1000, 5000, 9000,  /* CTA 0 */
        2000, 7000, 8000,  /* CTA 1: its phase 1 ends last (7000) */
        0,    0,    0,     /* CTA 2 never ran (0 = not written) */
    };
    double us[2];
    stats_phase_path(stamps, 3, 3, us);
    assert_true(us[0] == 6.0);   /* first start 1000 -> last end of phase 1, 7000 */
    assert_true(us[1] == 2.0);   /* 7000 -> last end of phase 2, 9000 */
    /* a phase whose last end precedes the previous phase's counts 0, and the path goes on from
     * the later time */
    const unsigned long long odd[1 * 4] = {100, 5000, 4000, 6000};
    double w[3];
    stats_phase_path(odd, 1, 4, w);
    assert_true(w[0] == 4.9 && w[1] == 0.0 && w[2] == 1.0);
}

int run_stats_tests(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(basic), cmocka_unit_test(phase_path)};
    return cmocka_run_group_tests_name("stats", tests, NULL, NULL);
}
