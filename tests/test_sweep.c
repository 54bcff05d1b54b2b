#include <string.h>

#include "sweep.h"
#include "test_util.h"

static int batches(const char *text, int *out, char *err)
{
    int n = -1;
    if (parse_batch_list(text, 1, out, 128, &n, err, 256) != MM_OK) return -1;
    return n;
}

static void batch_lists(void **state)
{
    (void)state;
    int v[128], n;
    char err[256];
    n = batches("1,8,64", v, err);
    assert_int_equal(n, 3);
    assert_int_equal(v[2], 64);
    n = batches("1:8192:x2", v, err);
    assert_int_equal(n, 14);
    assert_int_equal(v[13], 8192);
    n = batches("3:10:+3", v, err);
    assert_int_equal(n, 3);
    assert_int_equal(v[2], 9);
    n = batches("1,2:16:x2,100", v, err);
    assert_int_equal(n, 6);
    assert_int_equal(v[5], 100);
    n = batches("5:5:x2", v, err);
    assert_int_equal(n, 1);
    /* 0 tokens is allowed where the caller allows it (check scenarios) */
    assert_int_equal(parse_batch_list("0,1", 0, v, 128, &n, err, sizeof err), MM_OK);
    assert_int_equal(n, 2);
}

static void bad_batch_lists(void **state)
{
    (void)state;
    const char *bad[] = {"", ",", "1,", "a", "-1", "0", "1.5", "1:8", "1:8:2", "8:1:x2",
                         "1:8:x1", "0:8:x2", "1:8:+0", "1:8:x", "1,1", "1:2000000:+1",
                         "99999999999999999999", "2097152", " 1", "1 ", "1::x2", ":8:x2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int v[128];
        char err[256] = "";
        if (batches(bad[i], v, err) != -1) fail_msg("'%s' was accepted", bad[i]);
        assert_non_null(strstr(err, "bad batch list"));
    }
}

static void modes_and_routing(void **state)
{
    (void)state;
    unsigned m;
    char err[256];
    assert_int_equal(parse_mode_list("fused,ll", &m, err, sizeof err), MM_OK);
    assert_int_equal(m, (1u << MODE_FUSED) | (1u << MODE_LL));
    assert_int_equal(parse_mode_list("fused,bogus", &m, err, sizeof err), MM_USAGE);
    assert_non_null(strstr(err, "unknown mode 'bogus'"));
    assert_int_equal(parse_mode_list("", &m, err, sizeof err), MM_USAGE);

    mm_routing r;
    char text[64];
    assert_int_equal(parse_routing("zipf:1.5", &r, err, sizeof err), MM_OK);
    assert_int_equal(r.kind, ROUTE_ZIPF);
    assert_true(r.param == 1.5);
    routing_format(&r, text, sizeof text);
    assert_string_equal(text, "zipf:1.5");
    assert_int_equal(parse_routing("masked", &r, err, sizeof err), MM_OK);
    assert_true(r.param == 0.3);
    assert_int_equal(parse_routing("rank-skew:0.9", &r, err, sizeof err), MM_OK);
    assert_int_equal(r.kind, ROUTE_RANK_SKEW);
    assert_int_equal(parse_routing("deepseek", &r, err, sizeof err), MM_OK);
    const char *bad[] = {"", "zipf:", "zipf:0", "masked:1.5", "uniform:3", "hot:1", "deep", "x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (parse_routing(bad[i], &r, err, sizeof err) != MM_USAGE) fail_msg("'%s' accepted", bad[i]);
    int on;
    assert_int_equal(parse_on_off("off", &on, err, sizeof err), MM_OK);
    assert_int_equal(on, 0);
    assert_int_equal(parse_on_off("maybe", &on, err, sizeof err), MM_USAGE);
    int flush;
    assert_int_equal(parse_l2_flush("clean", &flush, err, sizeof err), MM_OK);
    assert_int_equal(flush, MM_L2_FLUSH_CLEAN);
    assert_string_equal(l2_flush_name(flush), "clean");
    assert_int_equal(parse_l2_flush("on", &flush, err, sizeof err), MM_OK);
    assert_int_equal(flush, MM_L2_FLUSH_ON);
    assert_string_equal(l2_flush_name(flush), "on");
    assert_int_equal(parse_l2_flush("off", &flush, err, sizeof err), MM_OK);
    assert_string_equal(l2_flush_name(flush), "off");
    assert_int_equal(parse_l2_flush("cleaner", &flush, err, sizeof err), MM_USAGE);
}

int run_sweep_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batch_lists),
        cmocka_unit_test(bad_batch_lists),
        cmocka_unit_test(modes_and_routing),
    };
    return cmocka_run_group_tests_name("sweep", tests, NULL, NULL);
}
