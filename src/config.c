#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep.h"

#define MAX_CONFIG_BYTES (4 << 20)

/* Parsing context: the first error wins and is kept as one line. */
typedef struct {
    const char *origin;
    char *err;
    size_t errlen;
    int failed;
    const char *prefix; /* "text_config." while the layer's keys are read from there */
} ctx;

static void fail(ctx *c, const char *key, const char *rule)
{
    if (c->failed) return;
    c->failed = 1;
    mm_fmt(c->err, c->errlen, "%s: key '%s%s': %s", c->origin, c->prefix, key, rule);
}

/* Appends one line to out->notes. */
static void __attribute__((format(printf, 2, 3))) note(mm_config *out, const char *fmt, ...)
{
    size_t u = strlen(out->notes);
    if (u && u + 1 < sizeof out->notes) out->notes[u++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->notes + u, sizeof out->notes - u, fmt, ap);
    va_end(ap);
}

/* An integer-valued number; returns 0 (and fails) if missing when required. */
static int get_int(ctx *c, const cJSON *obj, const char *key, int required, int def)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it || cJSON_IsNull(it)) {
        if (required) fail(c, key, "missing (required)");
        return def;
    }
    if (!cJSON_IsNumber(it)) {
        fail(c, key, "must be a number");
        return def;
    }
    double v = it->valuedouble;
    if (!isfinite(v) || v != floor(v) || v < -2147483648.0 || v > 2147483647.0) {
        fail(c, key, "must be an integer");
        return def;
    }
    return (int)v;
}

static double get_double(ctx *c, const cJSON *obj, const char *key, double def, int *present)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (present) *present = 0;
    if (!it || cJSON_IsNull(it)) return def;
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble)) {
        fail(c, key, "must be a finite number");
        return def;
    }
    if (present) *present = 1;
    return it->valuedouble;
}

/* The spellings of one quantity across MoE families' config.json files, preferred first: DeepSeek's,
 * then Qwen's and Mixtral's (num_experts, num_local_experts; intermediate_size is the experts' width
 * where no moe_intermediate_size says otherwise, as in Mixtral), then gpt-oss's. */
static const char *const EXPERTS_KEYS[] = {"n_routed_experts", "num_experts", "num_local_experts", NULL};
static const char *const INTER_KEYS[] = {"moe_intermediate_size", "intermediate_size", NULL};
static const char *const TOPK_KEYS[] = {"num_experts_per_tok", "experts_per_token", NULL};
static const char *const SHARED_KEYS[] = {"n_shared_experts", "num_shared_experts", NULL};

/* The first spelling present is read; each other one present is noted as passed over (where two
 * could apply, the user sees which was read). *used: the key read, for later messages. */
static int get_alias_int(ctx *c, const cJSON *obj, const char *const *keys, int required, mm_config *out,
                         const char **used)
{
    *used = keys[0];
    int v = 0, found = 0;
    for (int k = 0; keys[k]; k++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, keys[k]);
        if (!it || cJSON_IsNull(it)) continue;
        if (!found) {
            found = 1;
            *used = keys[k];
            v = get_int(c, obj, keys[k], 1, 0);
            continue;
        }
        char other[32];
        if (cJSON_IsNumber(it)) mm_fmt(other, sizeof other, "%g", it->valuedouble);
        else mm_fmt(other, sizeof other, "not a number");
        note(out, "read '%s' (%d), not '%s' (%s)", *used, v, keys[k], other);
    }
    if (!found && required) {
        char rule[160] = "missing (required";
        for (int k = 1; keys[k]; k++) {
            size_t u = strlen(rule);
            mm_fmt(rule + u, sizeof rule - u, "%s'%s'", k == 1 ? "; also read as " : " or ", keys[k]);
        }
        size_t u = strlen(rule);
        mm_fmt(rule + u, sizeof rule - u, ")");
        fail(c, keys[0], rule);
    }
    return v;
}

/* What our layer does not compute, refused with the key that says so: the routed experts here are
 * SwiGLU (silu(gate) * up) without biases, weighted by their router scores after the expert. */
static void refuse_other_layers(ctx *c, const cJSON *layer)
{
    static const char *const act_keys[] = {"hidden_act", "hidden_activation", "activation_function"};
    for (size_t k = 0; k < MM_ARRAY_LEN(act_keys); k++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(layer, act_keys[k]);
        if (!it || cJSON_IsNull(it)) continue;
        if (!cJSON_IsString(it) || (strcmp(it->valuestring, "silu") != 0 && strcmp(it->valuestring, "swish") != 0)) {
            char rule[160];
            mm_fmt(rule, sizeof rule, "'%s' is not computed here: the experts are SwiGLU (silu)",
                   cJSON_IsString(it) ? it->valuestring : "?");
            fail(c, act_keys[k], rule);
        }
    }
    static const char *const bias_keys[] = {"mlp_bias", "moe_bias", "expert_bias"};
    for (size_t k = 0; k < MM_ARRAY_LEN(bias_keys); k++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(layer, bias_keys[k])))
            fail(c, bias_keys[k], "true: the experts here have no biases");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(layer, "model_type");
    if (!cJSON_IsString(type)) return;
    if (strcmp(type->valuestring, "gpt_oss") == 0)
        fail(c, "model_type", "gpt_oss experts carry biases and a clamped sigmoid GLU, not computed here");
    else if (strncmp(type->valuestring, "llama4", 6) == 0)
        fail(c, "model_type", "Llama 4 scales a token by its router score before the expert; here the "
                              "scores weight the experts' outputs");
}

static void positive_multiple(ctx *c, const char *key, int v, int of)
{
    char rule[128];
    if (v <= 0 || v % of != 0) {
        mm_fmt(rule, sizeof rule, "must be a positive multiple of %d (got %d)", of, v);
        fail(c, key, rule);
    }
}

static void parse_scale_fmt(ctx *c, const cJSON *root, const cJSON *quant, mm_config *out)
{
    const cJSON *it = quant ? cJSON_GetObjectItemCaseSensitive(quant, "scale_fmt") : NULL;
    const char *key = "quantization_config.scale_fmt";
    if (!it || cJSON_IsNull(it)) {
        it = cJSON_GetObjectItemCaseSensitive(root, "scale_fmt");
        key = "scale_fmt";
    }
    out->scale_fmt = MM_SCALE_FP32;
    if (!it || cJSON_IsNull(it)) return;
    if (!cJSON_IsString(it)) {
        fail(c, key, "must be a string (\"ue8m0\" or \"fp32\")");
        return;
    }
    if (strcmp(it->valuestring, "ue8m0") == 0)
        out->scale_fmt = MM_SCALE_UE8M0;
    else if (strcmp(it->valuestring, "fp32") != 0 && strcmp(it->valuestring, "float32") != 0)
        fail(c, key, "must be \"ue8m0\" or \"fp32\"");
}

/* quant_method "mxfp4" (the MXFP4 MoE checkpoints' spelling) means FP4 experts; "fp8", or any
 * other method, the FP8 recipe this tool quantizes to. */
static void parse_weights(const cJSON *quant, mm_config *out)
{
    const cJSON *it = quant ? cJSON_GetObjectItemCaseSensitive(quant, "quant_method") : NULL;
    out->weights = cJSON_IsString(it) && strcmp(it->valuestring, "mxfp4") == 0 ? MM_WEIGHTS_FP4 : MM_WEIGHTS_FP8;
}

static void parse_block_size(ctx *c, const cJSON *quant)
{
    const char *key = "quantization_config.weight_block_size";
    const cJSON *it = quant ? cJSON_GetObjectItemCaseSensitive(quant, "weight_block_size") : NULL;
    if (!it || cJSON_IsNull(it)) return; /* 128x128 is the only recipe; absent means it */
    if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2) {
        fail(c, key, "must be an array of two integers");
        return;
    }
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetArrayItem(it, i);
        if (!cJSON_IsNumber(v) || v->valuedouble != MM_QUANT_BLOCK) {
            fail(c, key, "must be [128, 128] (the only block size of the recipe)");
            return;
        }
    }
}

static void parse_bench(ctx *c, const cJSON *root, mm_config *out)
{
    const cJSON *bench = cJSON_GetObjectItemCaseSensitive(root, "bench");
    if (!bench || cJSON_IsNull(bench)) return;
    if (!cJSON_IsObject(bench)) {
        fail(c, "bench", "must be an object");
        return;
    }
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(bench, "batches");
    if (b && !cJSON_IsNull(b)) {
        char sub[256];
        if (cJSON_IsString(b)) {
            if (parse_batch_list(b->valuestring, 1, out->batches, MM_MAX_BATCHES, &out->n_batches,
                                 sub, sizeof sub) != MM_OK)
                fail(c, "bench.batches", sub);
        } else if (cJSON_IsArray(b) && cJSON_GetArraySize(b) > 0) {
            /* Same rules as the string form: reuse its parser on each value. */
            const cJSON *v;
            cJSON_ArrayForEach(v, b)
            {
                char num[32];
                int tmp[1], n = 0;
                if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
                    fabs(v->valuedouble) > 1e9) {
                    fail(c, "bench.batches", "must hold integers");
                    return;
                }
                mm_fmt(num, sizeof num, "%.0f", v->valuedouble);
                if (parse_batch_list(num, 1, tmp, 1, &n, sub, sizeof sub) != MM_OK) {
                    fail(c, "bench.batches", sub);
                    return;
                }
                for (int i = 0; i < out->n_batches; i++)
                    if (out->batches[i] == tmp[0]) {
                        fail(c, "bench.batches", "holds a value twice");
                        return;
                    }
                if (out->n_batches >= MM_MAX_BATCHES) {
                    fail(c, "bench.batches", "too many values");
                    return;
                }
                out->batches[out->n_batches++] = tmp[0];
            }
        } else {
            fail(c, "bench.batches", "must be a non-empty array of integers or a batch string");
        }
    }
    int mtpr = get_int(c, bench, "max_tokens_per_rank", 0, 0);
    if (mtpr < 0 || mtpr > MM_MAX_BATCH_VALUE) fail(c, "bench.max_tokens_per_rank", "out of range");
    out->max_tokens_per_rank = mtpr;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(bench, "routing");
    if (r && !cJSON_IsNull(r)) {
        mm_routing parsed;
        char sub[256];
        if (!cJSON_IsString(r))
            fail(c, "bench.routing", "must be a string");
        else if (parse_routing(r->valuestring, &parsed, sub, sizeof sub) != MM_OK)
            fail(c, "bench.routing", sub);
        else
            mm_fmt(out->routing, sizeof out->routing, "%s", r->valuestring);
    }
}

static void default_name(const char *origin, mm_config *out)
{
    const char *base = strrchr(origin, '/');
    base = base ? base + 1 : origin;
    size_t n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, ".json") == 0) n -= 5;
    if (n >= sizeof out->name) n = sizeof out->name - 1;
    memcpy(out->name, base, n);
    out->name[n] = '\0';
}

mm_status config_parse(const char *text, size_t len, const char *origin, mm_config *out,
                       char *err, size_t errlen)
{
    ctx c = {origin, err, errlen, 0, ""};
    memset(out, 0, sizeof *out);
    mm_fmt(out->path, sizeof out->path, "%s", origin);
    if (len == 0) {
        mm_fmt(err, errlen, "%s: empty file", origin);
        return MM_USAGE;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        mm_fmt(err, errlen, "%s: not valid JSON", origin);
        return MM_USAGE;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        mm_fmt(err, errlen, "%s: top level must be a JSON object", origin);
        return MM_USAGE;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (cJSON_IsString(name) && name->valuestring[0])
        mm_fmt(out->name, sizeof out->name, "%s", name->valuestring);
    else
        default_name(origin, out);

    /* a multimodal model keeps its language model's keys under text_config */
    const cJSON *layer = root;
    const cJSON *text_config = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    refuse_other_layers(&c, root);
    if (!cJSON_GetObjectItemCaseSensitive(root, "hidden_size") && cJSON_IsObject(text_config)) {
        layer = text_config;
        c.prefix = "text_config.";
        refuse_other_layers(&c, layer);
    }
    const char *inter_key, *experts_key, *topk_key, *shared_key;
    out->hidden = get_int(&c, layer, "hidden_size", 1, 0);
    out->inter = get_alias_int(&c, layer, INTER_KEYS, 1, out, &inter_key);
    out->experts = get_alias_int(&c, layer, EXPERTS_KEYS, 1, out, &experts_key);
    out->experts_key = experts_key;
    out->topk = get_alias_int(&c, layer, TOPK_KEYS, 1, out, &topk_key);
    out->shared_experts = get_alias_int(&c, layer, SHARED_KEYS, 0, out, &shared_key);
    /* Qwen2-MoE: one shared expert, given by its width */
    if (!cJSON_GetObjectItemCaseSensitive(layer, shared_key) &&
        get_int(&c, layer, "shared_expert_intermediate_size", 0, 0) > 0)
        out->shared_experts = 1;
    out->routed_scaling_factor = get_double(&c, layer, "routed_scaling_factor", 1.0, NULL);
    out->swiglu_limit = get_double(&c, layer, "swiglu_limit", 0.0, &out->has_swiglu_limit);
    const cJSON *quant = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    if (quant && !cJSON_IsNull(quant) && !cJSON_IsObject(quant)) {
        fail(&c, "quantization_config", "must be an object");
        quant = NULL;
    }
    if (!c.failed) {
        positive_multiple(&c, "hidden_size", out->hidden, MM_QUANT_BLOCK);
        positive_multiple(&c, inter_key, out->inter, MM_QUANT_BLOCK);
        if (out->experts <= 0) fail(&c, experts_key, "must be positive");
        if (out->topk <= 0) fail(&c, topk_key, "must be positive");
        char rule[128];
        if (out->topk > out->experts) {
            mm_fmt(rule, sizeof rule, "top-k %d exceeds %s %d", out->topk, experts_key, out->experts);
            fail(&c, topk_key, rule);
        }
        if (out->topk > MM_MAX_TOPK) {
            mm_fmt(rule, sizeof rule, "must be at most %d (got %d)", MM_MAX_TOPK, out->topk);
            fail(&c, topk_key, rule);
        }
        if (out->hidden > 65536) fail(&c, "hidden_size", "must be at most 65536");
        if (out->inter > 65536) fail(&c, inter_key, "must be at most 65536");
        if (out->experts > 4096) fail(&c, experts_key, "must be at most 4096");
        if (out->shared_experts < 0) fail(&c, shared_key, "must not be negative");
        if (!(out->routed_scaling_factor > 0) || out->routed_scaling_factor > 1e6)
            fail(&c, "routed_scaling_factor", "must be positive (at most 1e6)");
        if (out->has_swiglu_limit && !(out->swiglu_limit > 0))
            fail(&c, "swiglu_limit", "must be positive, or null for no limit");
    }
    if (layer != root && !c.failed) note(out, "read the layer's keys from 'text_config'");
    c.prefix = "";
    parse_scale_fmt(&c, root, quant, out);
    parse_block_size(&c, quant);
    parse_weights(quant, out);
    parse_bench(&c, root, out);
    cJSON_Delete(root);
    return c.failed ? MM_USAGE : MM_OK;
}

mm_status config_load(const char *path, mm_config *out)
{
    char err[1024];
    FILE *f = fopen(path, "rb");
    if (!f) {
        mm_error("config %s: cannot read: %s", path, strerror(errno));
        return MM_USAGE;
    }
    char *buf = malloc(MAX_CONFIG_BYTES + 1);
    if (!buf) {
        fclose(f);
        mm_error("config %s: out of memory", path);
        return MM_RUNTIME;
    }
    size_t n = fread(buf, 1, MAX_CONFIG_BYTES + 1, f);
    int read_error = ferror(f);
    fclose(f);
    mm_status s = MM_OK;
    if (read_error) {
        mm_error("config %s: cannot read (is it a directory?)", path);
        s = MM_USAGE;
    } else if (n > MAX_CONFIG_BYTES) {
        mm_error("config %s: larger than %d bytes", path, MAX_CONFIG_BYTES);
        s = MM_USAGE;
    } else if (config_parse(buf, n, path, out, err, sizeof err) != MM_OK) {
        mm_error("config %s", err);
        s = MM_USAGE;
    } else {
        for (const char *line = out->notes; *line;) { /* one note a line */
            size_t len = strcspn(line, "\n");
            mm_note("config %s: %.*s", path, (int)len, line);
            line += len + (line[len] == '\n');
        }
    }
    free(buf);
    return s;
}

mm_status config_check_ranks(const mm_config *cfg, int ranks, char *err, size_t errlen)
{
    if (ranks <= 0 || cfg->experts % ranks != 0) {
        mm_fmt(err, errlen, "%s: key '%s': %d experts are not divisible by %d ranks",
               cfg->path, cfg->experts_key, cfg->experts, ranks);
        return MM_USAGE;
    }
    return MM_OK;
}
