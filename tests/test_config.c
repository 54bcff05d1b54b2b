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

/* Other MoE families' config.json files, as published (the keys that matter): the same quantities
 * under their own names are read, the key read is noted where two could apply, and a layer this
 * tool does not compute is refused naming the key that says so. */
static void other_families(void **state)
{
    (void)state;
    mm_config c;
    char err[512] = "";
    /* Mixtral: num_local_experts, intermediate_size is the experts' width */
    assert_int_equal(parse("{\"hidden_act\": \"silu\", \"hidden_size\": 4096, \"intermediate_size\": 14336, "
                           "\"model_type\": \"mixtral\", \"num_experts_per_tok\": 2, \"num_local_experts\": 8}",
                           &c, err), MM_OK);
    assert_int_equal(c.experts, 8);
    assert_int_equal(c.inter, 14336);
    assert_int_equal(c.topk, 2);
    assert_string_equal(c.notes, "");
    /* Qwen3-MoE: num_experts; intermediate_size is the dense MLP's and moe_intermediate_size wins */
    assert_int_equal(parse("{\"hidden_act\": \"silu\", \"hidden_size\": 2048, \"intermediate_size\": 6144, "
                           "\"moe_intermediate_size\": 768, \"num_experts\": 128, \"num_experts_per_tok\": 8, "
                           "\"model_type\": \"qwen3_moe\"}", &c, err), MM_OK);
    assert_int_equal(c.experts, 128);
    assert_int_equal(c.inter, 768);
    assert_string_equal(c.notes, "read 'moe_intermediate_size' (768), not 'intermediate_size' (6144)");
    /* Qwen2-MoE: one shared expert given by its width */
    assert_int_equal(parse("{\"hidden_size\": 3584, \"moe_intermediate_size\": 2560, \"num_experts\": 64, "
                           "\"num_experts_per_tok\": 8, \"shared_expert_intermediate_size\": 20480}", &c, err), MM_OK);
    assert_int_equal(c.shared_experts, 1);
    /* two spellings of the expert count: the first is read, the other named */
    assert_int_equal(parse("{" BASE ", \"num_experts\": 64}", &c, err), MM_OK);
    assert_int_equal(c.experts, 256);
    assert_string_equal(c.notes, "read 'n_routed_experts' (256), not 'num_experts' (64)");
    /* a multimodal model's language model */
    assert_int_equal(parse("{\"model_type\": \"qwen3_vl_moe\", \"text_config\": {\"hidden_size\": 2048, "
                           "\"moe_intermediate_size\": 768, \"num_experts\": 128, \"num_experts_per_tok\": 8}}",
                           &c, err), MM_OK);
    assert_int_equal(c.hidden, 2048);
    assert_string_equal(c.notes, "read the layer's keys from 'text_config'");
    /* messages name the spelling the file used */
    assert_int_equal(parse("{\"hidden_size\": 4096, \"intermediate_size\": 100, \"num_local_experts\": 8, "
                           "\"num_experts_per_tok\": 2}", &c, err), MM_USAGE);
    assert_non_null(strstr(err, "key 'intermediate_size': must be a positive multiple of 128"));
    assert_int_equal(parse("{\"hidden_size\": 4096, \"intermediate_size\": 1024, \"num_local_experts\": 8, "
                           "\"num_experts_per_tok\": 9}", &c, err), MM_USAGE);
    assert_non_null(strstr(err, "key 'num_experts_per_tok': top-k 9 exceeds num_local_experts 8"));
    assert_int_equal(parse("{\"text_config\": {\"hidden_size\": 2048, \"moe_intermediate_size\": 768, "
                           "\"num_experts_per_tok\": 8}}", &c, err), MM_USAGE);
    assert_non_null(strstr(err, "key 'text_config.n_routed_experts': missing (required; also read as "
                                "'num_experts' or 'num_local_experts')"));
    char ranks_err[512];
    assert_int_equal(parse("{\"hidden_size\": 4096, \"intermediate_size\": 1024, \"num_local_experts\": 8, "
                           "\"num_experts_per_tok\": 2}", &c, err), MM_OK);
    assert_int_equal(config_check_ranks(&c, 3, ranks_err, sizeof ranks_err), MM_USAGE);
    assert_non_null(strstr(ranks_err, "key 'num_local_experts': 8 experts are not divisible by 3 ranks"));
    /* refused: what the layer here does not compute */
    static const struct {
        const char *json, *expect;
    } refused[] = {
        {"{" BASE ", \"hidden_act\": \"gelu\"}", "key 'hidden_act': 'gelu' is not computed here"},
        {"{" BASE ", \"hidden_activation\": \"gelu_pytorch_tanh\"}", "key 'hidden_activation': 'gelu_pytorch_tanh'"},
        {"{" BASE ", \"mlp_bias\": true}", "key 'mlp_bias': true: the experts here have no biases"},
        {"{\"model_type\": \"gpt_oss\", \"hidden_size\": 2880, \"intermediate_size\": 2880, "
         "\"num_local_experts\": 32, \"experts_per_token\": 4, \"swiglu_limit\": 7.0}",
         "key 'model_type': gpt_oss experts carry biases"},
        {"{\"model_type\": \"llama4\", \"text_config\": {\"model_type\": \"llama4_text\", \"hidden_size\": 5120, "
         "\"intermediate_size\": 8192, \"num_local_experts\": 16, \"num_experts_per_tok\": 1}}",
         "key 'model_type': Llama 4 scales a token by its router score"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        mm_status s = parse(refused[i].json, &c, err);
        if (s != MM_USAGE || !strstr(err, refused[i].expect))
            fail_msg("refused %zu: status %d, message '%s', expected '%s'", i, s, err, refused[i].expect);
    }
    /* MXFP4 checkpoints name their experts' format in quant_method */
    assert_int_equal(parse("{" BASE ", \"quantization_config\": {\"quant_method\": \"mxfp4\"}}", &c, err), MM_OK);
    assert_int_equal(c.weights, MM_WEIGHTS_FP4);
    assert_int_equal(parse("{" BASE ", \"quantization_config\": {\"quant_method\": \"fp8\"}}", &c, err), MM_OK);
    assert_int_equal(c.weights, MM_WEIGHTS_FP8);
    assert_int_equal(parse("{" BASE "}", &c, err), MM_OK);
    assert_int_equal(c.weights, MM_WEIGHTS_FP8);
    /* config_load prints each note once, as a note */
    test_stderr_begin();
    assert_int_equal(config_load("tests/configs/qwen3-moe.json", &c), MM_OK);
    assert_string_equal(test_stderr_end(), "megamoe: note: config tests/configs/qwen3-moe.json: read "
                                           "'moe_intermediate_size' (768), not 'intermediate_size' (6144)\n");
}

static void files_and_ranks(void **state)
{
    (void)state;
    mm_config c;
    test_stderr_begin();
    assert_int_equal(config_load("tests/configs/does-not-exist.json", &c), MM_USAGE);
    assert_int_equal(config_load("tests", &c), MM_USAGE); /* a directory */
    const char *said = test_stderr_end();
    assert_non_null(strstr(said, "megamoe: error: config tests/configs/does-not-exist.json: cannot read"));
    assert_non_null(strstr(said, "megamoe: error: config tests: cannot read (is it a directory?)"));
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
        cmocka_unit_test(other_families),
        cmocka_unit_test(files_and_ranks),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
