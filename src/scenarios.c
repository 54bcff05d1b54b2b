#include "scenarios.h"

#include <string.h>

#include "sweep.h"
#include "../kernels/fp4.h"

/* Model shapes (../shared/reference/models.md). */
#define FLASH 4096, 2048, 256, 0, 6, 10.0, 1
#define PRO 7168, 3072, 384, 0, 6, 10.0, 1
#define V3 7168, 2048, 256, 0, 8, LIMIT_NONE, 0
/* The small default: 256 x 128, 4 experts per rank, top-2, limit 10, FP32 scales. */
#define SMALL 256, 128, 0, 4, 2, 10.0, 0

static const mm_scenario scenarios[] = {
    {"smoke", SMALL, 4, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    /* the real shapes */
    {"flash-t1", FLASH, 1, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"flash-t64", FLASH, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"flash-t512", FLASH, 512, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"pro-t1", PRO, 1, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"pro-t64", PRO, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"pro-t512", PRO, 512, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"v3-t1", V3, 1, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"v3-t64", V3, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"v3-t512", V3, 512, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    /* hidden x intermediate, including sizes that are not powers of two or multiples of 256 */
    {"shape-h128-i128", 128, 128, 0, 4, 2, 10.0, 0, 16, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"shape-h256-i512", 256, 512, 0, 4, 2, 10.0, 0, 16, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"shape-h512-i256", 512, 256, 0, 4, 2, 10.0, 0, 16, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"shape-h1536-i384", 1536, 384, 0, 4, 2, 10.0, 0, 16, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"shape-h2048-i1536", 2048, 1536, 0, 4, 2, 10.0, 0, 8, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"shape-h3072-i640", 3072, 640, 0, 4, 2, 10.0, 0, 8, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"shape-h4096-i3072", 4096, 3072, 0, 2, 2, 10.0, 0, 4, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"shape-h7168-i128", 7168, 128, 0, 4, 2, 10.0, 0, 8, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    /* top-k and experts per rank */
    {"topk-1", 256, 256, 0, 8, 1, 10.0, 0, 32, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"topk-2", 256, 256, 0, 8, 2, 10.0, 0, 32, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"topk-6", 256, 256, 0, 8, 6, 10.0, 0, 32, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"topk-8", 256, 256, 0, 8, 8, 10.0, 0, 32, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    /* past 8: fused's combine takes its per-token path (token_io.cuh MM_COMBINE_ROWS) */
    {"topk-12", 256, 256, 0, 16, 12, 10.0, 0, 32, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"experts-per-rank-1", 256, 128, 0, 1, 1, 10.0, 0, 32, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"experts-per-rank-2", 256, 128, 0, 2, 2, 10.0, 0, 32, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"experts-per-rank-32", 256, 128, 0, 32, 6, 10.0, 0, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"experts-per-rank-48", 256, 128, 0, 48, 8, 10.0, 0, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    /* every routing generator */
    {"route-uniform", SMALL, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"route-balanced", SMALL, 64, TOKENS_SAME, "balanced", X_NORMAL, NULL, 0, 0},
    {"route-zipf", 256, 128, 0, 8, 2, 10.0, 0, 64, TOKENS_SAME, "zipf:1.2", X_NORMAL, NULL, 0, 0},
    {"route-hot", SMALL, 64, TOKENS_SAME, "hot", X_NORMAL, NULL, 0, 0},
    {"route-rank-skew", SMALL, 64, TOKENS_SAME, "rank-skew:0.9", X_NORMAL, NULL, 0, 0},
    {"route-deepseek", 256, 128, 0, 8, 6, 10.0, 0, 64, TOKENS_SAME, "deepseek", X_NORMAL, NULL, 0, 0},
    {"masked-0.3", SMALL, 64, TOKENS_SAME, "masked:0.3", X_NORMAL, NULL, 0, 0},
    {"masked-0.7", SMALL, 64, TOKENS_SAME, "masked:0.7", X_NORMAL, NULL, 0, 0},
    {"masked-1.0", SMALL, 64, TOKENS_SAME, "masked:1", X_NORMAL, NULL, 0, 0},
    /* where tokens go */
    {"all-experts-remote", SMALL, 32, TOKENS_SAME, "rank-skew:1", X_NORMAL, NULL, 0, 0},
    {"one-expert-for-all", 256, 128, 0, 4, 1, 10.0, 0, 64, TOKENS_SAME, "hot", X_NORMAL, NULL, 0, 0},
    {"unpicked-experts", 256, 128, 0, 8, 2, 10.0, 0, 16, TOKENS_SAME, "hot", X_NORMAL, NULL, 0, 0},
    /* token counts */
    {"tokens-0-everywhere", SMALL, 0, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"tokens-0-on-rank-0", SMALL, 37, TOKENS_FIRST_EMPTY, "uniform", X_NORMAL, NULL, 0, 0},
    {"tokens-uneven", SMALL, 3, TOKENS_UNEVEN, "uniform", X_NORMAL, NULL, 0, 0},
    {"tokens-1", SMALL, 1, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"tokens-3", SMALL, 3, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"tokens-37", SMALL, 37, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"tokens-1000", SMALL, 1000, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"tokens-max", SMALL, 1024, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    /* fused's dispatch runs its tokens in rounds of up to 8 a CTA over two buffers: here 4 rounds
     * (132 CTAs), so each buffer is refilled; past ll's cap (ll skips it) */
    {"tokens-4096", SMALL, 4096, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    /* fused folds 1..8 rows past a full tile into it (swapped MMAs, gemm_schedule.h
     * mm_fused_extra_rows; its folding form runs near 128 rows an expert, mm_fused_fold_kernel):
     * balanced routing over 4 experts gives every expert 132 or 129 rows at EP1 (4 and 1 extra),
     * or 132 at EP2 (4 extra; 66 at EP1) */
    {"fold-extra-rows", 256, 128, 4, 0, 2, 10.0, 0, 264, TOKENS_SAME, "balanced", X_NORMAL, NULL, 0, 0},
    {"fold-extra-rows-1", 512, 256, 4, 0, 2, 10.0, 0, 258, TOKENS_SAME, "balanced", X_NORMAL, NULL, 0, 0},
    {"fold-extra-rows-ep2", 256, 256, 4, 0, 2, 10.0, 0, 132, TOKENS_SAME, "balanced", X_NORMAL, NULL, 0, 0},
    /* fused's tiles of 33-64 rows, past what its small tiles' park holds side by side at 32 rows
     * a side (branch exp/fused-ring-5): 48 rows an expert at EP1 (a call that is not large: the
     * gate pass, then the up pass), and 176 (large: a full tile and a split one of 48) */
    {"small-tiles-48", 256, 256, 4, 0, 2, 10.0, 0, 96, TOKENS_SAME, "balanced", X_NORMAL, NULL, 0, 0},
    {"small-tiles-176", 256, 256, 4, 0, 2, 10.0, 0, 352, TOKENS_SAME, "balanced", X_NORMAL, NULL, 0, 0},
    /* fused's staged combine (fused_schedule.h mm_combine_staged_call: >= 4 units a warpgroup):
     * parts of 768 columns (96 of a warpgroup's 128 threads sum), top-8 rows of 1.5 KB a part with
     * 30% of the picks masked, so units of 0-8 rows make batches of uneven length and bytes */
    {"combine-staged", 1536, 256, 0, 16, 8, 10.0, 0, 1024, TOKENS_SAME, "masked:0.3", X_NORMAL, NULL, 0, 0},
    /* numerics */
    {"limit-1", 256, 128, 0, 4, 2, 1.0, 0, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"limit-10", 256, 128, 0, 4, 2, 10.0, 0, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"limit-none", 256, 128, 0, 4, 2, LIMIT_NONE, 0, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"scales-fp32", 256, 128, 0, 4, 2, 10.0, 0, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"scales-ue8m0", 256, 128, 0, 4, 2, 10.0, 1, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 0},
    {"x-tiny", SMALL, 64, TOKENS_SAME, "uniform", X_TINY, NULL, 0, 0},
    {"x-huge", SMALL, 64, TOKENS_SAME, "uniform", X_HUGE, NULL, 0, 0},
    {"x-mixed", SMALL, 64, TOKENS_SAME, "uniform", X_MIXED, NULL, 0, 0},
    /* one rank of EP N on one GPU (bench --ep-slice): E / N experts, the tokens of N x T that
     * pick one of them with their other picks masked, so most tokens keep 1-2 of their k rows
     * (the combine's masked slots) and the experts' rows are as ragged as the routing makes them;
     * flash-t160's ~700 tokens stay under ll's cap (fused = ll bit for bit), flash-t1024's ~4.5k
     * run fused's large form (dual items); each call takes the form of the EP N rank it emulates
     * (fused_schedule.h mm_fused_call_form: at t160 30 rows an expert, split items) */
    {"slice8-small", 256, 128, 0, 8, 6, 10.0, 0, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 8, 0},
    {"slice8-tokens-1", 256, 128, 0, 4, 2, 10.0, 0, 1, TOKENS_SAME, "uniform", X_NORMAL, NULL, 8, 0},
    {"slice8-zipf", 256, 128, 0, 8, 6, 10.0, 0, 96, TOKENS_SAME, "zipf:1.2", X_NORMAL, NULL, 8, 0},
    {"slice8-flash-t64", FLASH, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 8, 0},
    {"slice8-flash-t160", FLASH, 160, TOKENS_SAME, "deepseek", X_NORMAL, NULL, 8, 0},
    {"slice8-flash-t1024", FLASH, 1024, TOKENS_SAME, "uniform", X_NORMAL, NULL, 8, 0},
    /* the folding form as an EP8 rank takes it near 128 rows an expert (~3k tokens in the slice) */
    {"slice8-flash-t680", FLASH, 680, TOKENS_SAME, "uniform", X_NORMAL, NULL, 8, 0},
    {"slice4-pro-t64", PRO, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 4, 0},
    /* FP4 experts (MXFP4; docs/recipe.md "FP4 weights"): the GPU reference against the host's,
     * each written apart, and every mode against them. Realistic experts at the
     * model shapes and on ragged experts, exponents spread to the exact limit and past it (those
     * groups rounded and counted), rows of zeros, only the largest magnitude. */
    {"fp4-smoke", SMALL, 16, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 1 + MM_FP4_REAL},
    {"fp4-flash-t1", FLASH, 1, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 1 + MM_FP4_REAL},
    {"fp4-pro-t1", PRO, 1, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 1 + MM_FP4_REAL},
    {"fp4-ragged", 512, 256, 0, 8, 6, 10.0, 1, 96, TOKENS_SAME, "zipf:1.2", X_NORMAL, NULL, 0, 1 + MM_FP4_REAL},
    {"fp4-spread-limit", 512, 256, 0, 4, 2, 10.0, 0, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 1 + MM_FP4_SPREAD_LIMIT},
    {"fp4-spread-past", 512, 256, 0, 4, 2, 10.0, 0, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 1 + MM_FP4_SPREAD_PAST},
    {"fp4-zeros", SMALL, 64, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 1 + MM_FP4_ZEROS},
    {"fp4-largest", SMALL, 64, TOKENS_SAME, "uniform", X_HUGE, NULL, 0, 1 + MM_FP4_LARGEST},
    /* fused's FP4 form: full and partial row tiles (GEMM2's rows by TMA, GEMM2 items waiting for
     * their tile's GEMM1 items) with two K blocks an item, fewer than the ring holds; and the
     * ragged rows of an EP8 slice at the Flash shape (an EP8 rank's form there: the swapped one) */
    {"fp4-large-tiles", 256, 256, 0, 2, 2, 10.0, 1, 300, TOKENS_SAME, "uniform", X_NORMAL, NULL, 0, 1 + MM_FP4_REAL},
    {"fp4-slice8-flash-t160", FLASH, 160, TOKENS_SAME, "deepseek", X_NORMAL, NULL, 8, 1 + MM_FP4_REAL},
    /* the swapped form at ~37 rows an expert (ragged: passes of 8-32 and of 33-64 rows, ~880
     * tokens in the slice, under ll's cap) */
    {"fp4-slice8-flash-t200", FLASH, 200, TOKENS_SAME, "uniform", X_NORMAL, NULL, 8, 1 + MM_FP4_REAL},
    /* fused's swapped FP4 form (a call whose experts expect <= 56 rows: fused_schedule.h
     * mm_fused_fp4_swapped) on two hot experts of 200 rows each: full tiles in two 64-row passes,
     * a partial tile in passes of 64 and 8 rows */
    {"fp4-swapped-hot", 256, 256, 0, 16, 2, 10.0, 0, 200, TOKENS_SAME, "hot", X_NORMAL, NULL, 0, 1 + MM_FP4_REAL},
    /* the same tokens at EP1 and at this EP size must give bit-identical outputs */
    {"ep-invariance", SMALL, 64, TOKENS_SAME, "uniform", X_NORMAL, "two runs at different EP sizes: every scenario's JSON carries rank 0's output digest; compare them with scripts/ep-invariance.py", 0, 0},
};

int scenario_count(void)
{
    return (int)MM_ARRAY_LEN(scenarios);
}

const mm_scenario *scenario_get(int i)
{
    return i >= 0 && i < scenario_count() ? &scenarios[i] : NULL;
}

static mm_status config_at(const mm_scenario *s, int ranks, mm_config *out, char *why, size_t len);

mm_status scenario_config(const mm_scenario *s, int ranks, mm_config *out, char *why, size_t len)
{
    if (!s->ep_slice) return config_at(s, ranks, out, why, len);
    if (ranks != 1) {
        mm_fmt(why, len, "an EP %d slice runs on one GPU (without mpirun)", s->ep_slice);
        memset(out, 0, sizeof *out);
        return MM_USAGE;
    }
    MM_TRY(config_at(s, s->ep_slice, out, why, len));
    out->experts /= s->ep_slice;
    return MM_OK;
}

mm_status scenario_full_config(const mm_scenario *s, mm_config *out, char *why, size_t len)
{
    return config_at(s, s->ep_slice ? s->ep_slice : 1, out, why, len);
}

int scenario_call_tokens_max(const mm_scenario *s, int rank)
{
    return scenario_tokens(s, rank) * (s->ep_slice ? s->ep_slice : 1);
}

static mm_status config_at(const mm_scenario *s, int ranks, mm_config *out, char *why, size_t len)
{
    memset(out, 0, sizeof *out);
    mm_fmt(out->name, sizeof out->name, "%s", s->name);
    mm_fmt(out->path, sizeof out->path, "scenario %s", s->name);
    out->hidden = s->hidden;
    out->inter = s->inter;
    out->experts = s->experts ? s->experts : s->experts_per_rank * ranks;
    out->topk = s->topk;
    out->routed_scaling_factor = 1.5;
    out->has_swiglu_limit = s->limit > 0;
    out->swiglu_limit = s->limit > 0 ? s->limit : 0.0;
    out->scale_fmt = s->ue8m0 ? MM_SCALE_UE8M0 : MM_SCALE_FP32;
    out->weights = s->fp4 ? MM_WEIGHTS_FP4 : MM_WEIGHTS_FP8;
    out->fp4_pattern = s->fp4 ? s->fp4 - 1 : 0;
    if (out->experts % ranks != 0) {
        mm_fmt(why, len, "%d experts do not divide over %d ranks", out->experts, ranks);
        return MM_USAGE;
    }
    if (out->topk > out->experts) {
        mm_fmt(why, len, "top-%d of %d experts", out->topk, out->experts);
        return MM_USAGE;
    }
    mm_routing r;
    char sub[256];
    if (parse_routing(s->routing, &r, sub, sizeof sub) != MM_OK) {
        mm_fmt(why, len, "%s", sub);
        return MM_USAGE;
    }
    /* rank-skew draws from rank 0's experts: they must be enough for distinct top-k */
    if (r.kind == ROUTE_RANK_SKEW && out->experts / ranks < out->topk && r.param >= 1.0) {
        mm_fmt(why, len, "rank 0 owns %d experts, fewer than top-%d", out->experts / ranks, out->topk);
        return MM_USAGE;
    }
    return MM_OK;
}

int scenario_tokens(const mm_scenario *s, int rank)
{
    switch (s->pattern) {
    case TOKENS_FIRST_EMPTY: return rank == 0 ? 0 : s->tokens;
    case TOKENS_UNEVEN: return s->tokens + 34 * rank; /* 3, 37, 71, ... */
    default: return s->tokens;
    }
}

int scenario_host_reference(const mm_scenario *s)
{
    const long long size = (long long)s->hidden * s->inter, tokens = scenario_call_tokens_max(s, 0);
    if (size <= 512 * 512) return tokens <= 1024;
    if (size <= 4096 * 3072) return tokens <= 16;
    return tokens <= 1;
}

void scenario_x_exponents(const mm_scenario *s, int *lo, int *count)
{
    switch (s->x_kind) {
    case X_TINY: *lo = -26; *count = 4; break;  /* amax under the 1e-4 scale floor */
    case X_HUGE: *lo = 10; *count = 4; break;   /* up to ~2^17: far above FP8's 448 */
    case X_MIXED: *lo = -24; *count = 36; break; /* 2^-24 .. 2^11 across tokens */
    default: *lo = -3; *count = 6; break;
    }
}

void scenario_shape_text(const mm_scenario *s, int ranks, char *buf, size_t len)
{
    int experts = s->experts ? s->experts : s->experts_per_rank * (s->ep_slice ? s->ep_slice : ranks);
    mm_fmt(buf, len, "%dx%d e%d k%d%s", s->hidden, s->inter, experts, s->topk, s->fp4 ? " fp4" : "");
}

void scenario_apply_weights(mm_config *cfg, int weights)
{
    if (weights == MM_WEIGHTS_FP4 && cfg->weights != MM_WEIGHTS_FP4) {
        cfg->weights = MM_WEIGHTS_FP4;
        cfg->fp4_pattern = MM_FP4_REAL;
    }
}
