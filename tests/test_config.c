#include <string.h>

#include "config.h"
#include "test_util.h"

static mm_status parse(const char *json, mm_config *c, char *err)
{
    return config_parse(json, strlen(json), "t.json", c, err, 512);
}

#define BASE "\"hidden_size\": 4096, \"moe_intermediate_size\": 2048, \"n_routed_experts\": 256, " \
             "\"num_experts_per_tok\": 6"

static void shipped_configs_parse(void **state)
{
    (void)state;
    const char *files[] = {"configs/deepseek-v4-flash.json", "configs/deepseek-v4-pro.json",
                           "configs/deepseek-v3.json", "configs/tiny.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        mm_config c;
        assert_int_equal(config_load(files[i], &c), MM_OK);
    }
    mm_config c;
    assert_int_equal(config_load("configs/deepseek-v4-pro.json", &c), MM_OK);
    assert_string_equal(c.name, "deepseek-v4-pro");
    assert_int_equal(c.hidden, 7168);
    assert_int_equal(c.inter, 3072);
    assert_int_equal(c.experts, 384);
    assert_int_equal(c.topk, 6);
    assert_int_equal(c.scale_fmt, MM_SCALE_UE8M0);
    assert_true(c.has_swiglu_limit);
    assert_true(c.swiglu_limit == 10.0);
    assert_true(c.routed_scaling_factor == 2.5);
    assert_int_equal(c.n_batches, 14);
    assert_int_equal(c.batches[13], 8192);
    assert_int_equal(config_load("configs/deepseek-v3.json", &c), MM_OK);
    assert_false(c.has_swiglu_limit);
    assert_int_equal(c.scale_fmt, MM_SCALE_FP32);
    assert_int_equal(c.topk, 8);
}

static void defaults_and_unknown_keys(void **state)
{
    (void)state;
    mm_config c;
    char err[512];
    assert_int_equal(parse("{" BASE ", \"whatever\": [1, {\"x\": null}]}", &c, err), MM_OK);
    assert_string_equal(c.name, "t");
    assert_true(c.routed_scaling_factor == 1.0);
    assert_false(c.has_swiglu_limit);
    assert_int_equal(c.n_batches, 0);
    assert_int_equal(parse("{" BASE ", \"scale_fmt\": \"ue8m0\", \"bench\": {\"batches\": [3, 1]}}",
                           &c, err), MM_OK);
    assert_int_equal(c.scale_fmt, MM_SCALE_UE8M0);
    assert_int_equal(c.n_batches, 2);
    assert_int_equal(c.batches[0], 3);
}

/* Each bad input: exit class USAGE and a message naming the key (or the file's problem). */
static void bad_inputs(void **state)
{
    (void)state;
    static const struct {
        const char *json, *expect;
    } cases[] = {
        {"", "empty file"},
        {"{ not json", "not valid JSON"},
        {"[1, 2]", "top level must be a JSON object"},
        {"{\"moe_intermediate_size\": 2048, \"n_routed_experts\": 256, \"num_experts_per_tok\": 6}",
         "'hidden_size': missing"},
        {"{\"hidden_size\": \"4096\", \"moe_intermediate_size\": 2048, \"n_routed_experts\": 256, "
         "\"num_experts_per_tok\": 6}", "'hidden_size': must be a number"},
        {"{\"hidden_size\": 4096.5, \"moe_intermediate_size\": 2048, \"n_routed_experts\": 256, "
         "\"num_experts_per_tok\": 6}", "'hidden_size': must be an integer"},
        {"{\"hidden_size\": 0, \"moe_intermediate_size\": 2048, \"n_routed_experts\": 256, "
         "\"num_experts_per_tok\": 6}", "'hidden_size': must be a positive multiple of 128"},
        {"{\"hidden_size\": 4000, \"moe_intermediate_size\": 2048, \"n_routed_experts\": 256, "
         "\"num_experts_per_tok\": 6}", "'hidden_size': must be a positive multiple of 128 (got 4000)"},
        {"{\"hidden_size\": 4096, \"moe_intermediate_size\": 100, \"n_routed_experts\": 256, "
         "\"num_experts_per_tok\": 6}", "'moe_intermediate_size': must be a positive multiple of 128"},
        {"{\"hidden_size\": 4096, \"moe_intermediate_size\": 2048, \"n_routed_experts\": -4, "
         "\"num_experts_per_tok\": 6}", "'n_routed_experts': must be positive"},
        {"{\"hidden_size\": 4096, \"moe_intermediate_size\": 2048, \"n_routed_experts\": 4, "
         "\"num_experts_per_tok\": 6}", "top-k 6 exceeds n_routed_experts 4"},
        {"{\"hidden_size\": 4096, \"moe_intermediate_size\": 2048, \"n_routed_experts\": 256, "
         "\"num_experts_per_tok\": 0}", "'num_experts_per_tok': must be positive"},
        {"{" BASE ", \"routed_scaling_factor\": -1}", "'routed_scaling_factor'"},
        {"{" BASE ", \"swiglu_limit\": 0}", "'swiglu_limit'"},
        {"{" BASE ", \"scale_fmt\": \"e5m2\"}", "'scale_fmt'"},
        {"{" BASE ", \"quantization_config\": {\"weight_block_size\": [64, 64]}}",
         "'quantization_config.weight_block_size'"},
        {"{" BASE ", \"quantization_config\": 3}", "'quantization_config': must be an object"},
        {"{" BASE ", \"bench\": {\"batches\": \"1:x\"}}", "'bench.batches': bad batch list"},
        {"{" BASE ", \"bench\": {\"batches\": [1, 1]}}", "'bench.batches'"},
        {"{" BASE ", \"bench\": {\"batches\": []}}", "'bench.batches'"},
        {"{" BASE ", \"bench\": {\"batches\": [0]}}", "'bench.batches'"},
        {"{" BASE ", \"bench\": {\"routing\": \"nope\"}}", "'bench.routing': unknown routing"},
        {"{" BASE ", \"bench\": {\"routing\": \"zipf:-1\"}}", "'bench.routing'"},
        {"{" BASE ", \"bench\": 7}", "'bench': must be an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mm_config c;
        char err[512] = "";
        mm_status s = parse(cases[i].json, &c, err);
        if (s != MM_USAGE || !strstr(err, cases[i].expect))
            fail_msg("case %zu: status %d, message '%s', expected to contain '%s'", i, s, err,
                     cases[i].expect);
        assert_null(strchr(err, '\n'));
    }
}

static void files_and_ranks(void **state)
{
    (void)state;
    mm_config c;
    assert_int_equal(config_load("tests/configs/does-not-exist.json", &c), MM_USAGE);
    assert_int_equal(config_load("tests", &c), MM_USAGE); /* a directory */
    assert_int_equal(config_load("configs/deepseek-v4-flash.json", &c), MM_OK);
    char err[512];
    assert_int_equal(config_check_ranks(&c, 8, err, sizeof err), MM_OK);
    assert_int_equal(config_check_ranks(&c, 3, err, sizeof err), MM_USAGE);
    assert_non_null(strstr(err, "not divisible by 3 ranks"));
}

int run_config_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shipped_configs_parse),
        cmocka_unit_test(defaults_and_unknown_keys),
        cmocka_unit_test(bad_inputs),
        cmocka_unit_test(files_and_ranks),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
