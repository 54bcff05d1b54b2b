#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
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
} ctx;

static void fail(ctx *c, const char *key, const char *rule)
{
    if (c->failed) return;
    c->failed = 1;
    mm_fmt(c->err, c->errlen, "%s: key '%s': %s", c->origin, key, rule);
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
    ctx c = {origin, err, errlen, 0};
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

    out->hidden = get_int(&c, root, "hidden_size", 1, 0);
    out->inter = get_int(&c, root, "moe_intermediate_size", 1, 0);
    out->experts = get_int(&c, root, "n_routed_experts", 1, 0);
    out->topk = get_int(&c, root, "num_experts_per_tok", 1, 0);
    out->shared_experts = get_int(&c, root, "n_shared_experts", 0, 0);
    out->routed_scaling_factor = get_double(&c, root, "routed_scaling_factor", 1.0, NULL);
    out->swiglu_limit = get_double(&c, root, "swiglu_limit", 0.0, &out->has_swiglu_limit);
    const cJSON *quant = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    if (quant && !cJSON_IsNull(quant) && !cJSON_IsObject(quant)) {
        fail(&c, "quantization_config", "must be an object");
        quant = NULL;
    }
    if (!c.failed) {
        positive_multiple(&c, "hidden_size", out->hidden, MM_QUANT_BLOCK);
        positive_multiple(&c, "moe_intermediate_size", out->inter, MM_QUANT_BLOCK);
        if (out->experts <= 0) fail(&c, "n_routed_experts", "must be positive");
        if (out->topk <= 0) fail(&c, "num_experts_per_tok", "must be positive");
        char rule[128];
        if (out->topk > out->experts) {
            mm_fmt(rule, sizeof rule, "top-k %d exceeds n_routed_experts %d", out->topk,
                   out->experts);
            fail(&c, "num_experts_per_tok", rule);
        }
        if (out->topk > MM_MAX_TOPK) {
            mm_fmt(rule, sizeof rule, "must be at most %d (got %d)", MM_MAX_TOPK, out->topk);
            fail(&c, "num_experts_per_tok", rule);
        }
        if (out->hidden > 65536) fail(&c, "hidden_size", "must be at most 65536");
        if (out->inter > 65536) fail(&c, "moe_intermediate_size", "must be at most 65536");
        if (out->experts > 4096) fail(&c, "n_routed_experts", "must be at most 4096");
        if (out->shared_experts < 0) fail(&c, "n_shared_experts", "must not be negative");
        if (!(out->routed_scaling_factor > 0) || out->routed_scaling_factor > 1e6)
            fail(&c, "routed_scaling_factor", "must be positive (at most 1e6)");
        if (out->has_swiglu_limit && !(out->swiglu_limit > 0))
            fail(&c, "swiglu_limit", "must be positive, or null for no limit");
    }
    parse_scale_fmt(&c, root, quant, out);
    parse_block_size(&c, quant);
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
    }
    free(buf);
    return s;
}

mm_status config_check_ranks(const mm_config *cfg, int ranks, char *err, size_t errlen)
{
    if (ranks <= 0 || cfg->experts % ranks != 0) {
        mm_fmt(err, errlen, "%s: key 'n_routed_experts': %d experts are not divisible by %d ranks",
               cfg->path, cfg->experts, ranks);
        return MM_USAGE;
    }
    return MM_OK;
}
