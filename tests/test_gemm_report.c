/* gemm's results file (src/gemm_report.c): the fields it writes, and that `gate` reads it, absolutely
 * and against the cuBLASLt loop timed beside each row (--relative-to cublaslt). */
#include "test_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gate.h"
#include "gemm_report.h"

#define ITERS 30

/* the SM clock make_results records for our rows, and their joules a call (0: no --energy-ms) */
static double rows_mhz = 1605.0, rows_joules = 0.0;

/* ours at `ours_us` and cuBLASLt at `lt_us`, both with the same per-round clock factor (side by
 * side), for GEMM1 and GEMM2 at 4096 rows; `fail_gemm2`: ours' GEMM2 row FAIL */
static void make_results(mm_gemm_results *r, double ours_us, double lt_us, int fail_gemm2, int with_lt)
{
    gemm_results_init(r);
    mm_fmt(r->meta.config, sizeof r->meta.config, "deepseek-v4-flash");
    mm_fmt(r->meta.gpu, sizeof r->meta.gpu, "NVIDIA H200");
    mm_fmt(r->meta.git_rev, sizeof r->meta.git_rev, "test");
    r->meta.ep = 8;
    r->meta.interleave = 1;
    r->meta.iters = ITERS;
    mm_fmt(r->spread, sizeof r->spread, "uniform");
    mm_fmt(r->tile, sizeof r->tile, "auto");
    double ours[ITERS], lt[ITERS];
    for (int g = 1; g <= 2; g++) {
        for (int i = 0; i < ITERS; i++) {
            const double clock = 1.0 + 0.002 * (i % 5);
            ours[i] = ours_us * g * clock;
            lt[i] = lt_us * g * clock;
        }
        mm_gemm_result row = {.rows = 4096, .n = 4096, .k = g == 1 ? 4096 : 2048, .tile = 128, .status = ROW_OK,
                              .flops = 2.0 * 4096 * 4096 * (g == 1 ? 4096 : 2048), .weight_bytes = 1e9,
                              .calc_diff = 1.4e-6, .calc_diff_f32 = 1.5e-8, .sm_mhz = rows_mhz};
        stats_compute(ours, ITERS, &row.stats);
        if (rows_joules > 0) { /* a reading of rows_joules * g a call at 700 W */
            row.energy.valid = 1;
            row.energy.joules_per_call = rows_joules * g;
            row.energy.watts = 700.0;
            row.energy.capped_frac = 1.0;
            row.energy.calls = 1000;
            row.energy.window_s = row.energy.loop_s = 1.0;
        }
        mm_fmt(row.mode, sizeof row.mode, "gemm%d", g);
        if (g == 2 && fail_gemm2) row.status = ROW_FAIL;
        assert_int_equal(gemm_results_add(r, &row, ours, ITERS), MM_OK);
        if (!with_lt) continue;
        row.tile = 0;
        row.status = ROW_OK;
        row.calc_diff_f32 = -1;
        row.sm_mhz = 0;
        memset(&row.energy, 0, sizeof row.energy);
        stats_compute(lt, ITERS, &row.stats);
        mm_fmt(row.mode, sizeof row.mode, "gemm%d" MM_GEMM_LT_SUFFIX, g);
        assert_int_equal(gemm_results_add(r, &row, lt, ITERS), MM_OK);
    }
}

static void write_tmp(char *path, size_t cap, const char *name, double ours_us, double lt_us, int fail_gemm2, int with_lt)
{
    mm_gemm_results r;
    make_results(&r, ours_us, lt_us, fail_gemm2, with_lt);
    snprintf(path, cap, "/tmp/megamoe-test-gemm-%ld-%s.json", (long)getpid(), name);
    assert_int_equal(gemm_report_json_write(path, &r), MM_OK);
    gemm_results_free(&r);
}

static void fields(void **state)
{
    (void)state;
    char path[256];
    write_tmp(path, sizeof path, "fields", 100.0, 300.0, 0, 1);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *root = cJSON_Parse(buf);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItem(root, "schema")->valuestring, MM_RESULTS_SCHEMA);
    const cJSON *meta = cJSON_GetObjectItem(root, "meta");
    assert_string_equal(cJSON_GetObjectItem(meta, "tool")->valuestring, "gemm");
    assert_int_equal(cJSON_GetObjectItem(meta, "ep")->valueint, 8);
    const cJSON *rows = cJSON_GetObjectItem(root, "results");
    assert_int_equal(cJSON_GetArraySize(rows), 4);
    const cJSON *r0 = cJSON_GetArrayItem(rows, 0), *r1 = cJSON_GetArrayItem(rows, 1);
    assert_string_equal(cJSON_GetObjectItem(r0, "mode")->valuestring, "gemm1");
    assert_string_equal(cJSON_GetObjectItem(r1, "mode")->valuestring, "gemm1-cublaslt");
    assert_int_equal(cJSON_GetObjectItem(r0, "batch")->valueint, 4096);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r0, "iter_us")), ITERS);
    const double median = cJSON_GetObjectItem(cJSON_GetObjectItem(r0, "time"), "median_us")->valuedouble;
    assert_true(median > 100.0 && median < 101.0);
    /* 137 GFLOP in ~100.4 us: ~1369 TFLOP/s */
    const double tflops = cJSON_GetObjectItem(cJSON_GetObjectItem(r0, "gemm"), "tflops")->valuedouble;
    assert_true(fabs(tflops - 2.0 * 4096 * 4096 * 4096 / median / 1e6) < 1e-6);
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(r0, "diff"), "calc_diff_f32"));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(r1, "diff"), "calc_diff_f32"));
    /* the clock is ours alone: cuBLASLt's row has none */
    assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(r0, "gemm"), "sm_mhz")->valuedouble == 1605.0);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(r1, "gemm"), "sm_mhz"));
    cJSON_Delete(root);
    remove(path);
}

/* cycles over nanoseconds as MHz: 1.5 M cycles in 1 ms is 1500 MHz; no time, no clock */
static void clock_mhz(void **state)
{
    (void)state;
    assert_true(fabs(mm_clock_mhz(1500000ull, 1000000ull) - 1500.0) < 1e-9);
    assert_true(fabs(mm_clock_mhz(132ull * 3960000000ull, 132ull * 2000000000ull) - 1980.0) < 1e-9);
    assert_true(mm_clock_mhz(12345ull, 0ull) == 0.0);
}

static void gated(void **state)
{
    (void)state;
    char base[256], same[256], drift[256], slower[256], broken[256], no_lt[256], clocked[256], ebase[256],
        eslower[256];
    write_tmp(base, sizeof base, "base", 100.0, 300.0, 0, 1);
    write_tmp(same, sizeof same, "same", 100.0, 300.0, 0, 1);
    write_tmp(drift, sizeof drift, "drift", 106.0, 318.0, 0, 1);   /* the whole machine 6% slower */
    write_tmp(slower, sizeof slower, "slower", 110.0, 300.0, 0, 1); /* ours 10% slower */
    write_tmp(broken, sizeof broken, "broken", 100.0, 300.0, 1, 1);
    write_tmp(no_lt, sizeof no_lt, "no-lt", 100.0, 300.0, 0, 0);
    rows_mhz = 1450.0; /* ours 10% slower, at a 9.7% lower clock */
    write_tmp(clocked, sizeof clocked, "clocked", 110.0, 300.0, 0, 1);
    rows_mhz = 1605.0;
    rows_joules = 1.0;
    write_tmp(ebase, sizeof ebase, "ebase", 100.0, 300.0, 0, 1);
    rows_joules = 1.1; /* ours 10% slower and 10% more joules a call */
    write_tmp(eslower, sizeof eslower, "eslower", 110.0, 300.0, 0, 1);
    rows_joules = 0.0;
    FILE *out = tmpfile();
    assert_non_null(out);
    mm_gate_opts o = {0.03, 0.01, 0, -1};
    assert_int_equal(gate_files(base, same, &o, out, NULL), MM_OK);
    assert_int_equal(gate_files(base, drift, &o, out, NULL), MM_FAIL);
    assert_int_equal(gate_files(base, slower, &o, out, NULL), MM_FAIL);
    assert_int_equal(gate_files(base, broken, &o, out, NULL), MM_FAIL);
    o.relative_to = MM_GATE_RELATIVE_CUBLASLT;
    assert_int_equal(gate_files(base, drift, &o, out, NULL), MM_OK); /* drift cancels */
    /* a changed row whose clock moved says so (not judged); an unchanged clock says nothing */
    FILE *plain = tmpfile();
    assert_non_null(plain);
    o.relative_to = -1;
    assert_int_equal(gate_files(base, slower, &o, plain, NULL), MM_FAIL);
    assert_int_equal(gate_files(base, clocked, &o, plain, NULL), MM_FAIL);
    rewind(plain);
    char line[512];
    int clock_lines = 0;
    while (fgets(line, sizeof line, plain)) {
        if (!strstr(line, "SM clock (MHz, not judged)")) continue;
        clock_lines++;
        assert_non_null(strstr(line, "1605 -> 1450 (-9.7%)"));
    }
    assert_int_equal(clock_lines, 2); /* gemm1 and gemm2 of `clocked`, none of `slower` */
    fclose(plain);
    /* the same for the joules: only where both files have them */
    FILE *joules = tmpfile();
    assert_non_null(joules);
    assert_int_equal(gate_files(base, slower, &o, joules, NULL), MM_FAIL);
    assert_int_equal(gate_files(ebase, slower, &o, joules, NULL), MM_FAIL);
    assert_int_equal(gate_files(ebase, eslower, &o, joules, NULL), MM_FAIL);
    rewind(joules);
    int joule_lines = 0;
    while (fgets(line, sizeof line, joules)) {
        if (!strstr(line, "joules a call (--energy-ms, not judged)")) continue;
        joule_lines++;
        assert_true(strstr(line, "1 -> 1.1 (+10.0%)") || strstr(line, "2 -> 2.2 (+10.0%)"));
    }
    assert_int_equal(joule_lines, 2); /* gemm1 and gemm2 of ebase -> eslower */
    fclose(joules);
    o.relative_to = MM_GATE_RELATIVE_CUBLASLT;
    assert_int_equal(gate_files(base, slower, &o, out, NULL), MM_FAIL);
    test_stderr_begin();
    assert_int_equal(gate_files(no_lt, no_lt, &o, out, NULL), MM_USAGE); /* nothing to be relative to */
    assert_non_null(strstr(test_stderr_end(), "has no timed *-cublaslt (gemm --json) row"));
    fclose(out);
    const char *all[] = {base, same, drift, slower, broken, no_lt, clocked, ebase, eslower};
    for (int i = 0; i < 9; i++) remove(all[i]);
}

int run_gemm_report_tests(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(fields), cmocka_unit_test(gated), cmocka_unit_test(clock_mhz)};
    return cmocka_run_group_tests_name("gemm_report", tests, NULL, NULL);
}
