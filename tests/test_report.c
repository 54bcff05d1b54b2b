#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"
#include "test_util.h"

static void fill(mm_results *r)
{
    results_init(r);
    mm_fmt(r->meta.config, sizeof r->meta.config, "deepseek-v4-flash");
    r->meta.hidden = 4096;
    r->meta.ep = 2;
    mm_fmt(r->meta.gpu, sizeof r->meta.gpu, "NVIDIA H200");
    mm_fmt(r->meta.routing, sizeof r->meta.routing, "uniform");
    r->meta.iters = 3;
    r->meta.idle_ms = 10;
    const mm_ceilings plan_values = {MM_DEFAULT_HBM_GBPS, MM_DEFAULT_NVLINK_GBPS, 1200.0};
    ceiling_set_defaults(&r->meta.ceilings, &plan_values, 1u << CEIL_FP8);
    r->meta.has_ceilings = 1;
    r->meta.ceilings.value.hbm_gbps = 4321.0;
    r->meta.ceilings.source[CEIL_HBM] = CEIL_MEASURED;
    mm_fmt(r->meta.ceilings.how[CEIL_HBM], sizeof r->meta.ceilings.how[CEIL_HBM], "a read of 1.00 GB");
    mm_fmt(r->meta.ceilings.how[CEIL_NVLINK], sizeof r->meta.ceilings.how[CEIL_NVLINK], "one GPU: no link to time");
    r->meta.ep_slice = 8;
    double samples[3] = {10.0, 12.0, 11.0};
    mm_row row;
    memset(&row, 0, sizeof row);
    row.mode = MODE_FUSED;
    row.batch = 8;
    row.status = ROW_OK;
    row.ranks_timed = 2;
    row.nranks = 2;
    row.stats.median = 11.0;
    row.rank_median_us[0] = 11.0;
    row.rank_median_us[1] = 10.5;
    row.diff.has_diff = 1;
    row.diff.max_abs = 0.0039;
    row.floor_us = 5.5;
    row.routing_floor_us = 6.6;
    row.routing_experts = 7;
    row.routing_tiles = 7; /* 7 experts with one row each: 7 tiles for 7 / 128 tiles of rows */
    row.routing_tile_excess = 128.0;
    assert_non_null(results_add(r, &row, samples, 3));
    row.mode = MODE_NORMAL;
    row.stats.median = 33.0;
    row.diff.max_abs = 0.0078;
    assert_non_null(results_add(r, &row, samples, 3));
    memset(&row, 0, sizeof row);
    row.mode = MODE_LL;
    row.batch = 8;
    row.status = ROW_TIMEOUT;
    mm_fmt(row.note, sizeof row.note, "rank 1 timed out in barrier");
    assert_non_null(results_add(r, &row, NULL, 0));
}

static char *render(void (*fn)(FILE *, const mm_results *), const mm_results *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fn(f, r);
    fclose(f);
    return buf;
}

static int saved_stderr = -1;
static FILE *captured;

void test_stderr_begin(void)
{
    assert_true(saved_stderr < 0);
    fflush(stderr);
    captured = tmpfile();
    assert_non_null(captured);
    saved_stderr = dup(fileno(stderr));
    assert_true(saved_stderr >= 0);
    assert_true(dup2(fileno(captured), fileno(stderr)) >= 0);
}

const char *test_stderr_end(void)
{
    static char text[4096];
    fflush(stderr);
    assert_true(dup2(saved_stderr, fileno(stderr)) >= 0);
    close(saved_stderr);
    saved_stderr = -1;
    rewind(captured);
    size_t n = fread(text, 1, sizeof text - 1, captured);
    text[n] = '\0';
    fclose(captured);
    return text;
}

void test_temp_path(char *buf, size_t len)
{
    mm_fmt(buf, len, "/tmp/megamoe-test-XXXXXX");
    int fd = mkstemp(buf);
    assert_true(fd >= 0);
    close(fd);
}

cJSON *test_take_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    unlink(path);
    buf[n] = '\0';
    cJSON *root = cJSON_Parse(buf);
    assert_non_null(root);
    return root;
}

/* The results as report_json_write writes them, parsed back (the caller deletes it). */
static cJSON *written_json(const mm_results *r)
{
    char path[64];
    test_temp_path(path, sizeof path);
    assert_int_equal(report_json_write(path, r), MM_OK);
    /* atomic: no temp file left beside it */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
    return test_take_json(path);
}

/* plan --ceilings reads back what bench wrote; a file without them, or with a bad one, is refused
 * naming the file and the field. */
static void ceilings_read_back(void **state)
{
    (void)state;
    mm_results r;
    fill(&r);
    char path[64], err[700];
    test_temp_path(path, sizeof path);
    assert_int_equal(report_json_write(path, &r), MM_OK);
    mm_ceilings c = {0, 0, 0};
    assert_int_equal(report_read_ceilings(path, &c, err, sizeof err), MM_OK);
    assert_true(c.hbm_gbps == 4321.0 && c.fp8_tflops == 1200.0 && c.nvlink_gbps == MM_DEFAULT_NVLINK_GBPS);
    r.meta.has_ceilings = 0; /* a file from before measured ceilings */
    assert_int_equal(report_json_write(path, &r), MM_OK);
    assert_int_equal(report_read_ceilings(path, &c, err, sizeof err), MM_USAGE);
    assert_non_null(strstr(err, "has no meta.ceilings"));
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"meta\": {\"ceilings\": {\"hbm_gbps\": 3000, \"fp8_tflops\": -1, \"nvlink_gbps\": 370}}}", f);
    fclose(f);
    assert_int_equal(report_read_ceilings(path, &c, err, sizeof err), MM_USAGE);
    assert_non_null(strstr(err, "meta.ceilings.fp8_tflops must be a positive number"));
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"meta\": ", f);
    fclose(f);
    assert_int_equal(report_read_ceilings(path, &c, err, sizeof err), MM_USAGE);
    assert_non_null(strstr(err, "is not valid JSON"));
    unlink(path);
    assert_int_equal(report_read_ceilings(path, &c, err, sizeof err), MM_USAGE);
    assert_non_null(strstr(err, "cannot read"));
    results_free(&r);
}

static void text_tables(void **state)
{
    (void)state;
    mm_results r;
    fill(&r);
    char *t = render(report_text, &r);
    assert_non_null(strstr(t, "## fused vs normal"));
    assert_non_null(strstr(t, "idle 10 ms before each call"));
    assert_non_null(strstr(t, "# ceilings of the floors: HBM 4321 GB/s (measured: a read of 1.00 GB); FP8 GEMM 1200 "
                              "TFLOP/s (given: on the command line); NVLink 370 GB/s (constant: one GPU: no link to time)"));
    assert_non_null(strstr(t, "# EP 8 slice: one rank's work of EP 8 emulated on this GPU"));
    assert_non_null(strstr(t, "## fused vs ll"));
    assert_non_null(strstr(t, "speedup"));
    assert_non_null(strstr(t, "3.00"));     /* 33 / 11 */
    assert_non_null(strstr(t, "0.0078"));   /* the worse max_diff of the two modes */
    assert_non_null(strstr(t, "TIMEOUT"));
    assert_non_null(strstr(t, "ll: rank 1 timed out in barrier"));
    /* floors: expected 5.5 and this routing's 6.6 (7 experts, 7 tiles: 128 x its rows / 128);
     * fused 11 us, normal 33, ll none */
    const char *fl = strstr(t, "## floors");
    assert_non_null(fl);
    assert_non_null(strstr(fl, "tiles_x"));
    assert_non_null(
        strstr(fl, "      8       5.5       6.6        7      7  128.00    0.50/0.60    0.17/0.20            -"));
    free(t);
    char *m = render(report_markdown, &r);
    assert_non_null(strstr(m, "| batch | status | fused_us | normal_us | speedup |"));
    assert_non_null(strstr(m, "| 8 | OK | 11.0 | 33.0 | 3.00 |"));
    free(m);
    results_free(&r);
}

static void json_round_trip(void **state)
{
    (void)state;
    mm_results r;
    fill(&r);
    cJSON *root = written_json(&r);
    assert_string_equal(cJSON_GetObjectItem(root, "schema")->valuestring, MM_RESULTS_SCHEMA);
    cJSON *meta = cJSON_GetObjectItem(root, "meta");
    assert_string_equal(cJSON_GetObjectItem(meta, "gpu")->valuestring, "NVIDIA H200");
    assert_int_equal(cJSON_GetObjectItem(meta, "ep")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(meta, "idle_ms")->valueint, 10);
    assert_int_equal(cJSON_GetObjectItem(meta, "ep_slice")->valueint, 8);
    cJSON *ceil = cJSON_GetObjectItem(meta, "ceilings");
    assert_true(cJSON_GetObjectItem(ceil, "hbm_gbps")->valuedouble == 4321.0);
    assert_string_equal(cJSON_GetObjectItem(ceil, "hbm")->valuestring, "measured");
    assert_string_equal(cJSON_GetObjectItem(ceil, "hbm_how")->valuestring, "a read of 1.00 GB");
    assert_string_equal(cJSON_GetObjectItem(ceil, "fp8")->valuestring, "given");
    assert_true(cJSON_GetObjectItem(ceil, "fp8_tflops")->valuedouble == 1200.0);
    assert_string_equal(cJSON_GetObjectItem(ceil, "nvlink")->valuestring, "constant");
    cJSON *rows = cJSON_GetObjectItem(root, "results");
    assert_int_equal(cJSON_GetArraySize(rows), 3);
    cJSON *r0 = cJSON_GetArrayItem(rows, 0);
    assert_string_equal(cJSON_GetObjectItem(r0, "mode")->valuestring, "fused");
    assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(r0, "time"), "median_us")->valuedouble == 11.0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r0, "iter_us")), 3);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r0, "rank_median_us")), 2);
    cJSON *work = cJSON_GetObjectItem(r0, "work");
    assert_true(cJSON_GetObjectItem(work, "floor_us")->valuedouble == 5.5);
    assert_true(cJSON_GetObjectItem(work, "routing_floor_us")->valuedouble == 6.6);
    assert_int_equal(cJSON_GetObjectItem(work, "routing_experts")->valueint, 7);
    assert_int_equal(cJSON_GetObjectItem(work, "routing_tiles")->valueint, 7);
    assert_true(cJSON_GetObjectItem(work, "routing_tile_excess")->valuedouble == 128.0);
    cJSON *r2 = cJSON_GetArrayItem(rows, 2);
    assert_string_equal(cJSON_GetObjectItem(r2, "status")->valuestring, "TIMEOUT");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(r2, "diff")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(r2, "time"))); /* no time, never a zero */
    cJSON_Delete(root);
    /* an unwritable place is an error, not a crash */
    test_stderr_begin();
    assert_int_not_equal(report_json_write("/nonexistent-dir/x.json", &r), MM_OK);
    assert_non_null(strstr(test_stderr_end(), "megamoe: error: json /nonexistent-dir/x.json: cannot write"));
    results_free(&r);
}

static void statuses(void **state)
{
    (void)state;
    assert_int_equal(row_status_parse("SKIP"), ROW_SKIP);
    assert_int_equal(row_status_parse("nope"), -1);
    assert_string_equal(row_status_name(ROW_ERROR), "ERROR");
    /* a TIMEOUT is a failure with its own exit code, a SKIP is not one */
    assert_int_equal(row_status_exit(ROW_TIMEOUT), MM_TIMEOUT);
    assert_int_equal(row_status_exit(ROW_FAIL), MM_FAIL);
    assert_int_equal(row_status_exit(ROW_ERROR), MM_RUNTIME);
    assert_int_equal(row_status_exit(ROW_SKIP), MM_OK);
    assert_int_equal(row_status_exit(ROW_OK), MM_OK);
}

/* --breakdown rows: a `## stages` section in the text and a `stages` array in the JSON. */
static void stages(void **state)
{
    (void)state;
    mm_results r;
    fill(&r);
    r.rows[0].n_stages = 2;
    mm_fmt(r.rows[0].stage_name[0], sizeof r.rows[0].stage_name[0], "dispatch");
    r.rows[0].stage_us[0] = 12.5;
    mm_fmt(r.rows[0].stage_name[1], sizeof r.rows[0].stage_name[1], "gemms");
    r.rows[0].stage_us[1] = 99.0;
    r.rows[0].stage_rank_us[0][1] = 99.0; /* the slowest rank's */
    r.rows[0].stage_rank_us[1][1] = 61.5;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    report_text(f, &r);
    fclose(f);
    assert_non_null(strstr(text, "## stages"));
    assert_non_null(strstr(text, "fused       8  dispatch 12.5 gemms 99.0"));
    free(text);
    cJSON *root = written_json(&r);
    cJSON *rows = cJSON_GetObjectItem(root, "results");
    cJSON *st = cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "stages");
    assert_int_equal(cJSON_GetArraySize(st), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(st, 1), "name")->valuestring, "gemms");
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(st, 1), "us")->valuedouble == 99.0);
    cJSON *by_rank = cJSON_GetObjectItem(cJSON_GetArrayItem(st, 1), "by_rank");
    assert_int_equal(cJSON_GetArraySize(by_rank), r.rows[0].nranks);
    assert_true(cJSON_GetArrayItem(by_rank, 0)->valuedouble == 99.0);
    assert_true(cJSON_GetArrayItem(by_rank, 1)->valuedouble == 61.5);
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 1), "stages"));
    cJSON_Delete(root);
    results_free(&r);
}

/* --energy-ms rows: a `## energy` section with a baseline's joules over fused's, an `energy`
 * object in the JSON, nothing for rows without a reading. */
static void energy(void **state)
{
    (void)state;
    mm_results r;
    fill(&r);
    mm_power_sample a = {.energy_mj = 1000000, .power_capped_ns = 0, .have_capped = 1, .wall_s = 5.0};
    mm_power_sample b = {.energy_mj = 1700000, .power_capped_ns = 500000000, .have_capped = 1, .wall_s = 6.0};
    r.rows[0].energy = mm_power_between(&a, &b, 1000, 1.5); /* fused: 700 W, 1.05 J a call */
    r.rows[0].flops = 2.1e9;
    b.energy_mj = 1350000;                                  /* normal: 350 W, 0.735 J a call */
    r.rows[1].energy = mm_power_between(&a, &b, 1000, 2.1);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    report_text(f, &r);
    fclose(f);
    const char *sec = strstr(text, "## energy");
    assert_non_null(sec);
    assert_non_null(strstr(sec, "fused       8  1.0500 J/call 700 W capped 50%  (1000 calls)"));
    assert_non_null(strstr(sec, "normal      8  0.7350 J/call 350 W capped 50%  (1000 calls)  normal / fused 0.70x"));
    assert_null(strstr(sec, "\nll ")); /* the timed-out row has no reading */
    free(text);
    cJSON *root = written_json(&r);
    cJSON *rows = cJSON_GetObjectItem(root, "results");
    cJSON *e = cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "energy");
    assert_non_null(e);
    assert_true(fabs(cJSON_GetObjectItem(e, "joules_per_call")->valuedouble - 1.05) < 1e-12);
    assert_true(fabs(cJSON_GetObjectItem(e, "watts")->valuedouble - 700.0) < 1e-9);
    assert_true(fabs(cJSON_GetObjectItem(e, "power_capped_frac")->valuedouble - 0.5) < 1e-12);
    assert_true(fabs(cJSON_GetObjectItem(e, "gflop_per_joule")->valuedouble - 2.0) < 1e-9); /* 2.1 GFLOP / 1.05 J */
    assert_null(cJSON_GetObjectItem(e, "sm_mhz")); /* not measured in bench */
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 2), "energy"));
    cJSON_Delete(root);

    /* NVML failed on a rank during normal's loop: its calls were made, the line says why there is
     * no reading and gives no ratio, the JSON has no energy for it */
    memset(&r.rows[1].energy, 0, sizeof r.rows[1].energy);
    r.rows[1].energy.calls = 1000;
    r.rows[1].energy.nvml_failed = 1;
    f = open_memstream(&text, &len);
    report_text(f, &r);
    fclose(f);
    assert_non_null(strstr(text, "\nnormal      8  no reading (NVML failed during the loop)  (1000 calls)\n"));
    free(text);
    root = written_json(&r);
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "results"), 1), "energy"));
    cJSON_Delete(root);
    results_free(&r);
}

int run_report_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(text_tables),
        cmocka_unit_test(json_round_trip),
        cmocka_unit_test(ceilings_read_back),
        cmocka_unit_test(statuses),
        cmocka_unit_test(stages),
        cmocka_unit_test(energy),
    };
    return cmocka_run_group_tests_name("report", tests, NULL, NULL);
}
