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

int run_stats_tests(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(basic)};
    return cmocka_run_group_tests_name("stats", tests, NULL, NULL);
}
