/* Shared bits of the CPU tests (cmocka). Each test_*.c exposes one run_*_tests() group. */
#ifndef MEGAMOE_TEST_UTIL_H
#define MEGAMOE_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

int run_config_tests(void);
int run_sweep_tests(void);
int run_plan_tests(void);
int run_report_tests(void);
int run_recipe_tests(void);
int run_datagen_tests(void);
int run_stats_tests(void);
int run_cli_tests(void);
int run_gate_tests(void);
int run_reference_tests(void);
int run_scenario_tests(void);
int run_gemm_schedule_tests(void);
int run_normal_layout_tests(void);
int run_lt_layout_tests(void);
int run_gemm_report_tests(void);
int run_power_tests(void);
int run_fp4_tests(void);

/* A fresh temporary file (created empty) for a writer under test: its path into buf. */
void test_temp_path(char *buf, size_t len);
/* The JSON file at `path` parsed (asserted to parse), the file then removed; the caller deletes
 * the tree. */
struct cJSON *test_take_json(const char *path);

/* A test that expects an error message: stderr goes to a temporary file from test_stderr_begin
 * until test_stderr_end, which returns what was written (a static buffer). The test asserts on it,
 * and a passing run's log shows no "megamoe: error:" line. */
void test_stderr_begin(void);
const char *test_stderr_end(void);

/* Relative paths in tests are from the repository root (make test runs there). */
#endif
