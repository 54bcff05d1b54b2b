#define _POSIX_C_SOURCE 200809L /* nanosleep, setenv */
/* gemm --energy-ms (src/power.c): the window math between two NVML samples, what opening NVML says
 * where it cannot, and the energy fields of gemm's results file. */
#include "test_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gemm_report.h"
#include "power.h"

static mm_power_sample sample(unsigned long long mj, unsigned long long capped_ns, int have_capped, double wall_s)
{
    mm_power_sample s = {.energy_mj = mj, .power_capped_ns = capped_ns, .have_capped = have_capped, .wall_s = wall_s};
    return s;
}

static void test_window_math(void **state)
{
    (void)state;
    /* 700 J between steps 1 s apart, the cap held 0.9 s of it; 500 calls in a 1.4 s loop */
    mm_power_sample a = sample(5000000ull, 1000000000ull, 1, 100.0);
    mm_power_sample b = sample(5700000ull, 1900000000ull, 1, 101.0);
    mm_power_window w = mm_power_between(&a, &b, 500, 1.4);
    assert_true(w.valid);
    assert_true(fabs(w.watts - 700.0) < 1e-9);
    assert_true(fabs(w.joules_per_call - 700.0 * 1.4 / 500) < 1e-12);
    assert_true(fabs(w.capped_frac - 0.9) < 1e-12);
    assert_true(fabs(w.window_s - 1.0) < 1e-12);
    assert_int_equal(w.calls, 500);
    assert_true(w.loop_s == 1.4);

    /* the driver's clock ran a little ahead of the host's: a share, not more than the window */
    b.power_capped_ns = a.power_capped_ns + 1010000000ull;
    assert_true(mm_power_between(&a, &b, 500, 1.4).capped_frac == 1.0);

    /* no power-cap time on this GPU: the joules stand, the share is "not reported" */
    mm_power_sample c = sample(5000000ull, 0, 0, 100.0), d = sample(5350000ull, 0, 0, 100.5);
    w = mm_power_between(&c, &d, 10, 0.7);
    assert_true(w.valid);
    assert_true(w.capped_frac == -1);
    assert_true(fabs(w.watts - 700.0) < 1e-9);
    assert_true(fabs(w.joules_per_call - 49.0) < 1e-9);

    /* nothing to say: no calls, no loop time, no window, a counter that went backwards (a driver reload) */
    assert_false(mm_power_between(&a, &b, 0, 1.4).valid);
    assert_false(mm_power_between(&a, &b, 5, 0.0).valid);
    assert_false(mm_power_between(&a, &a, 5, 1.4).valid);
    mm_power_sample back = sample(4000000ull, 1900000000ull, 1, 101.0);
    assert_false(mm_power_between(&a, &back, 5, 1.4).valid);
}

static void test_format(void **state)
{
    (void)state;
    char buf[160];
    mm_power_sample a = sample(5000000ull, 0ull, 1, 100.0), b = sample(5700000ull, 980000000ull, 1, 101.0);
    mm_power_window w = mm_power_between(&a, &b, 1000, 1.2);
    mm_power_format(&w, buf, sizeof buf);
    assert_string_equal(buf, "0.8400 J/call 700 W capped 98%");
    a.have_capped = 0;
    w = mm_power_between(&a, &b, 1000, 1.2);
    mm_power_format(&w, buf, sizeof buf);
    assert_string_equal(buf, "0.8400 J/call 700 W capped ?");
    memset(&w, 0, sizeof w);
    w.window_s = 5.5;
    mm_power_format(&w, buf, sizeof buf);
    assert_string_equal(buf, "no reading (the energy counter did not step twice in 5.50 s)");
}

static void test_open_without_nvml(void **state)
{
    (void)state;
    mm_power *p = (mm_power *)&p; /* anything but NULL: the call must clear it */
    char why[256] = "";
    assert_int_equal(mm_power_open("libmegamoe-no-such-nvml.so.1", "00000000:01:00.0", &p, why, sizeof why),
                     MM_RUNTIME);
    assert_null(p);
    assert_non_null(strstr(why, "cannot load libmegamoe-no-such-nvml.so.1"));
    mm_power_close(NULL); /* harmless */
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* NVML's stand-in (tests/fake_nvml.c): a counter that steps every 100 ms at 700 W, then a read
 * that fails as a GPU that fell off the bus does, which names the failure and still stamps the
 * sample's time (the energy loop's window is measured from it). */
static void test_read_then_nvml_fails(void **state)
{
    (void)state;
    mm_power *p = NULL;
    char why[256] = "";
    unsetenv("FAKE_NVML_FAIL_AFTER_MS");
    assert_int_equal(mm_power_open(MM_TEST_FAKE_NVML, "00000000:01:00.0", &p, why, sizeof why), MM_OK);
    assert_non_null(p);
    mm_power_sample a, b;
    assert_int_equal(mm_power_read(p, &a, why, sizeof why), MM_OK);
    sleep_ms(250);
    assert_int_equal(mm_power_read(p, &b, why, sizeof why), MM_OK);
    assert_true(b.energy_mj > a.energy_mj); /* two or three steps of 70 J */
    assert_int_equal((b.energy_mj - a.energy_mj) % 70000ull, 0);
    assert_true(b.have_capped && b.power_capped_ns > a.power_capped_ns);
    setenv("FAKE_NVML_FAIL_AFTER_MS", "0", 1);
    mm_power_sample c = {0};
    why[0] = 0;
    assert_int_equal(mm_power_read(p, &c, why, sizeof why), MM_RUNTIME);
    assert_non_null(strstr(why, "the GPU's energy counter: GPU is lost (fake NVML)"));
    assert_true(c.wall_s >= b.wall_s);
    unsetenv("FAKE_NVML_FAIL_AFTER_MS");
    mm_power_close(p);

    /* the line a row without a reading prints, by why it has none */
    mm_power_window w;
    memset(&w, 0, sizeof w);
    w.nvml_failed = 1;
    w.window_s = 0.4;
    mm_power_format(&w, why, sizeof why);
    assert_string_equal(why, "no reading (NVML failed during the loop)");
}

/* MEGAMOE_NVML_LIBRARY names another library; unset or empty, the driver's. */
static void test_library_from_environment(void **state)
{
    (void)state;
    unsetenv(MM_NVML_LIBRARY_ENV);
    assert_string_equal(mm_power_library(), MM_NVML_LIBRARY);
    setenv(MM_NVML_LIBRARY_ENV, "", 1);
    assert_string_equal(mm_power_library(), MM_NVML_LIBRARY);
    setenv(MM_NVML_LIBRARY_ENV, MM_TEST_FAKE_NVML, 1);
    assert_string_equal(mm_power_library(), MM_TEST_FAKE_NVML);
    unsetenv(MM_NVML_LIBRARY_ENV);
}

static void test_energy_in_results_file(void **state)
{
    (void)state;
    mm_gemm_results r;
    gemm_results_init(&r);
    mm_fmt(r.meta.config, sizeof r.meta.config, "deepseek-v4-flash");
    double t[3] = {1400.0, 1420.0, 1410.0};
    mm_gemm_result row = {.rows = 49152, .n = 4096, .k = 4096, .tile = 192, .status = ROW_OK,
                          .flops = 2.0 * 49152 * 4096 * 4096, .weight_bytes = 1e9, .calc_diff = 1e-6,
                          .calc_diff_f32 = 1e-8, .sm_mhz = 1580};
    stats_compute(t, 3, &row.stats);
    mm_fmt(row.mode, sizeof row.mode, "gemm1");
    mm_power_sample a = sample(1000000ull, 0ull, 1, 10.0), b = sample(1700000ull, 950000000ull, 1, 11.0);
    row.energy = mm_power_between(&a, &b, 700, 1.0);
    row.energy.sm_mhz = 1560;
    assert_int_equal(gemm_results_add(&r, &row, t, 3), MM_OK);
    memset(&row.energy, 0, sizeof row.energy); /* a row without a reading */
    mm_fmt(row.mode, sizeof row.mode, "gemm2");
    assert_int_equal(gemm_results_add(&r, &row, t, 3), MM_OK);
    char path[64];
    test_temp_path(path, sizeof path);
    assert_int_equal(gemm_report_json_write(path, &r), MM_OK);
    gemm_results_free(&r);
    cJSON *doc = test_take_json(path);
    cJSON *rows = cJSON_GetObjectItem(doc, "results");
    cJSON *e = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "gemm"), "energy");
    assert_non_null(e);
    assert_true(fabs(cJSON_GetObjectItem(e, "joules_per_call")->valuedouble - 1.0) < 1e-12);
    assert_true(fabs(cJSON_GetObjectItem(e, "watts")->valuedouble - 700.0) < 1e-9);
    assert_true(fabs(cJSON_GetObjectItem(e, "power_capped_frac")->valuedouble - 0.95) < 1e-12);
    assert_int_equal(cJSON_GetObjectItem(e, "calls")->valueint, 700);
    assert_true(cJSON_GetObjectItem(e, "loop_s")->valuedouble == 1.0);
    assert_true(cJSON_GetObjectItem(e, "sm_mhz")->valuedouble == 1560.0);
    /* 1.65 TFLOP a call for 1 J */
    assert_true(fabs(cJSON_GetObjectItem(e, "gflop_per_joule")->valuedouble - 2.0 * 49152 * 4096 * 4096 / 1e9) < 1e-6);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 1), "gemm"), "energy"));
    cJSON_Delete(doc);
}

int run_power_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_math),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_open_without_nvml),
        cmocka_unit_test(test_read_then_nvml_fails),
        cmocka_unit_test(test_library_from_environment),
        cmocka_unit_test(test_energy_in_results_file),
    };
    return cmocka_run_group_tests_name("power", tests, NULL, NULL);
}
