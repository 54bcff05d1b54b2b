#include <string.h>

#include "cli.h"
#include "../kernels/gemm_schedule.h"
#include "test_util.h"

static mm_status run(mm_options *o, char *err, int argc, const char *const *argv)
{
    return cli_parse(argc, (char **)argv, o, err, 512);
}

static void parses(void **state)
{
    (void)state;
    mm_options o;
    char err[512];
    const char *a[] = {"megamoe", "bench", "--batches", "1:64:x4", "--modes", "fused,ll",
                       "--iters", "7", "--graph", "on", "--routing", "hot", "--json", "x.json"};
    assert_int_equal(run(&o, err, 14, a), MM_OK);
    assert_int_equal(o.cmd, CMD_BENCH);
    assert_int_equal(o.n_batches, 4);
    assert_int_equal(o.iters, 7);
    assert_int_equal(o.warmup, MM_DEFAULT_WARMUP);
    assert_true(o.graph);
    assert_int_equal(o.l2_flush, MM_L2_FLUSH_ON); /* the write flush unless asked otherwise */
    assert_true(o.interleave); /* modes timed side by side unless asked otherwise */
    assert_int_equal(o.routing.kind, ROUTE_HOT);
    assert_string_equal(o.json_path, "x.json");
    assert_int_equal(o.sweeps, 1);
    const char *sw[] = {"megamoe", "bench", "--sweeps", "3", "--breakdown"};
    assert_int_equal(run(&o, err, 5, sw), MM_OK);
    assert_int_equal(o.sweeps, 3);
    assert_true(o.breakdown);
    const char *fl[] = {"megamoe", "gemm", "--l2-flush", "clean"};
    assert_int_equal(run(&o, err, 4, fl), MM_OK);
    assert_int_equal(o.l2_flush, MM_L2_FLUSH_CLEAN);
    assert_int_equal(o.spread, MM_SPREAD_UNIFORM);
    const char *gr[] = {"megamoe", "gemm", "--spread", "routing", "--routing", "rank-skew:0.9", "--seed", "3"};
    assert_int_equal(run(&o, err, 8, gr), MM_OK);
    assert_int_equal(o.spread, MM_SPREAD_ROUTING);
    assert_int_equal(o.routing.kind, ROUTE_RANK_SKEW);
    const char *gs[] = {"megamoe", "gemm", "--spread", "zipf"};
    assert_int_equal(run(&o, err, 4, gs), MM_USAGE);
    assert_non_null(strstr(err, "uniform, skewed or routing"));
    assert_int_equal(o.tile, 0); /* auto unless asked */
    const char *gt[] = {"megamoe", "gemm", "--tile", "192"};
    assert_int_equal(run(&o, err, 4, gt), MM_OK);
    assert_int_equal(o.tile, 192);
    const char *gt2[] = {"megamoe", "gemm", "--tile", "256"};
    assert_int_equal(run(&o, err, 4, gt2), MM_USAGE);
    assert_non_null(strstr(err, "auto, 128 or 192"));
    const char *gt3[] = {"megamoe", "bench", "--tile", "128"};
    assert_int_equal(run(&o, err, 4, gt3), MM_USAGE); /* a gemm option */
    assert_int_equal(o.wide_scales, MM_WIDE_SCALES_AUTO); /* auto unless asked */
    const char *ws[] = {"megamoe", "gemm", "--wide-scales", "block"};
    assert_int_equal(run(&o, err, 4, ws), MM_OK);
    assert_int_equal(o.wide_scales, MM_WIDE_SCALES_BLOCK);
    const char *ws2[] = {"megamoe", "gemm", "--wide-scales", "group"};
    assert_int_equal(run(&o, err, 4, ws2), MM_OK);
    assert_int_equal(o.wide_scales, MM_WIDE_SCALES_GROUP);
    const char *ws3[] = {"megamoe", "gemm", "--wide-scales", "stage"};
    assert_int_equal(run(&o, err, 4, ws3), MM_USAGE);
    assert_non_null(strstr(err, "auto, group or block"));
    const char *ws4[] = {"megamoe", "check", "--wide-scales", "block"};
    assert_int_equal(run(&o, err, 4, ws4), MM_USAGE); /* a gemm option */
    assert_int_equal(o.energy_ms, 0); /* no NVML readings unless asked */
    const char *en[] = {"megamoe", "gemm", "--energy-ms", "1000"};
    assert_int_equal(run(&o, err, 4, en), MM_OK);
    assert_int_equal(o.energy_ms, 1000);
    const char *en_short[] = {"megamoe", "gemm", "--energy-ms", "50"};
    assert_int_equal(run(&o, err, 4, en_short), MM_USAGE);
    assert_non_null(strstr(err, "too short"));
    const char *en_bench[] = {"megamoe", "bench", "--energy-ms", "1000"};
    assert_int_equal(run(&o, err, 4, en_bench), MM_OK);
    assert_int_equal(o.energy_ms, 1000);
    const char *en_check[] = {"megamoe", "check", "--energy-ms", "1000"};
    assert_int_equal(run(&o, err, 4, en_check), MM_USAGE); /* timing commands only */
    const char *fb[] = {"megamoe", "bench", "--l2-flush", "dirty"};
    assert_int_equal(run(&o, err, 4, fb), MM_USAGE);
    assert_non_null(strstr(err, "on, off or clean"));
    assert_int_equal(o.idle_ms, 0); /* calls back to back unless asked otherwise */
    const char *id[] = {"megamoe", "bench", "--idle-ms", "10"};
    assert_int_equal(run(&o, err, 4, id), MM_OK);
    assert_int_equal(o.idle_ms, 10);
    const char *il[] = {"megamoe", "bench", "--interleave", "off"};
    assert_int_equal(run(&o, err, 4, il), MM_OK);
    assert_false(o.interleave);
    const char *sw0[] = {"megamoe", "bench", "--sweeps", "0"};
    assert_int_equal(run(&o, err, 4, sw0), MM_USAGE);
    const char *swc[] = {"megamoe", "check", "--sweeps", "2"};
    assert_int_equal(run(&o, err, 4, swc), MM_USAGE);
    const char *p[] = {"megamoe", "plan", "--ranks", "8", "--hbm-gbps", "4000"};
    assert_int_equal(run(&o, err, 6, p), MM_OK);
    assert_int_equal(o.ranks, 8);
    assert_true(o.ceilings.hbm_gbps == 4000.0);
    assert_int_equal(o.ceilings_given, 1u << CEIL_HBM);
    /* bench measures a ceiling unless it is given */
    const char *bc[] = {"megamoe", "bench", "--fp8-tflops", "1100", "--nvlink-gbps", "400"};
    assert_int_equal(run(&o, err, 6, bc), MM_OK);
    assert_int_equal(o.ceilings_given, (1u << CEIL_FP8) | (1u << CEIL_NVLINK));
    assert_true(o.ceilings.fp8_tflops == 1100.0 && o.ceilings.hbm_gbps == MM_DEFAULT_HBM_GBPS);
    const char *cc[] = {"megamoe", "check", "--hbm-gbps", "4000"};
    assert_int_equal(run(&o, err, 4, cc), MM_USAGE);
    const char *h[] = {"megamoe", "check", "--help"};
    assert_int_equal(run(&o, err, 3, h), MM_OK);
    assert_true(o.help);
}

static void rejects(void **state)
{
    (void)state;
    static const struct {
        int argc;
        const char *argv[6];
        const char *expect;
    } cases[] = {
        {1, {"megamoe"}, "no command"},
        {2, {"megamoe", "frobnicate"}, "unknown command"},
        {3, {"megamoe", "bench", "--nope"}, "unknown option"},
        {3, {"megamoe", "bench", "--iters"}, "needs a value"},
        {4, {"megamoe", "bench", "--iters", "0"}, "--iters"},
        {4, {"megamoe", "bench", "--iters", "abc"}, "--iters"},
        {4, {"megamoe", "bench", "--modes", "fast"}, "unknown mode"},
        {4, {"megamoe", "bench", "--routing", "zipf:-2"}, "--routing"},
        {4, {"megamoe", "bench", "--graph", "sometimes"}, "--graph"},
        {4, {"megamoe", "bench", "--interleave", "maybe"}, "--interleave"},
        {4, {"megamoe", "bench", "--idle-ms", "5000"}, "--idle-ms"},
        {4, {"megamoe", "gemm", "--idle-ms", "10"}, "does not apply"},
        {4, {"megamoe", "check", "--interleave", "on"}, "does not apply"},
        {4, {"megamoe", "bench", "--ranks", "2"}, "does not apply"},
        {4, {"megamoe", "check", "--tol", "0.01"}, "--tol"},
        {4, {"megamoe", "plan", "--batches", "0"}, "bad batch list"},
        {3, {"megamoe", "plan", "stray"}, "unexpected argument"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mm_options o;
        char err[512] = "";
        mm_status s = run(&o, err, cases[i].argc, cases[i].argv);
        if (s != MM_USAGE || !strstr(err, cases[i].expect))
            fail_msg("case %zu: status %d, '%s' lacks '%s'", i, s, err, cases[i].expect);
    }
}

int run_cli_tests(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(parses), cmocka_unit_test(rejects)};
    return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
