#include "test_util.h"

int main(void)
{
    int failed = 0;
    failed += run_config_tests();
    failed += run_sweep_tests();
    failed += run_plan_tests();
    failed += run_report_tests();
    failed += run_recipe_tests();
    failed += run_datagen_tests();
    failed += run_stats_tests();
    failed += run_cli_tests();
    failed += run_gate_tests();
    failed += run_reference_tests();
    failed += run_scenario_tests();
    failed += run_gemm_schedule_tests();
    failed += run_normal_layout_tests();
    failed += run_lt_layout_tests();
    failed += run_gemm_report_tests();
    failed += run_power_tests();
    failed += run_fp4_tests();
    return failed ? 1 : 0;
}
