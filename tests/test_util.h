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

/* Relative paths in tests are from the repository root (make test runs there). */
#endif
