#include "plan.h"

#include "../kernels/fused_schedule.h"
#include "datagen_host.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *bound_name(mm_bound b)
{
    switch (b) {
    case BOUND_HBM: return "hbm";
    case BOUND_TC: return "tc";
    case BOUND_NVLINK: return "nvlink";
    }
    return "?";
}

double plan_expert_weight_bytes(const mm_config *cfg)
{
    double h = cfg->hidden, i = cfg->inter;
    double blocks = 3.0 * (h / 128.0) * (i / 128.0) * 4.0;   /* 4 bytes per 128x128 block */
    if (cfg->weights == MM_WEIGHTS_FP4) /* E2M1 codes, a UE8M0 exponent per 32, each block's word */
        return 3.0 * h * i / 2.0 + 3.0 * h * i / 32.0 + blocks;
    return 3.0 * h * i + blocks;                             /* W1 [2I][H] + W2 [H][I], FP32 block scales */
}

const char *ceiling_source_name(mm_ceiling_source s)
{
    return s == CEIL_MEASURED ? "measured" : s == CEIL_GIVEN ? "given" : "constant";
}

double *ceiling_value(mm_ceilings *c, mm_ceiling_kind k)
{
    return k == CEIL_HBM ? &c->hbm_gbps : k == CEIL_FP8 ? &c->fp8_tflops : &c->nvlink_gbps;
}

double ceiling_get(const mm_ceilings *c, mm_ceiling_kind k)
{
    return *ceiling_value((mm_ceilings *)c, k); /* only read */
}

void ceiling_set_defaults(mm_ceiling_set *set, const mm_ceilings *values, unsigned given)
{
    memset(set, 0, sizeof *set);
    set->value = *values;
    for (int k = 0; k < CEIL_COUNT; k++) {
        set->source[k] = (given >> k) & 1u ? CEIL_GIVEN : CEIL_CONSTANT;
        mm_fmt(set->how[k], sizeof set->how[k], "%s", (given >> k) & 1u ? "on the command line" : "not measured");
    }
}

void plan_floor(const mm_config *cfg, int ranks, int batch, const mm_ceilings *c, mm_floor *out)
{
    double experts = cfg->experts, k = cfg->topk, h = cfg->hidden, i = cfg->inter;
    double local = experts / ranks;
    /* An expert stays idle only if none of the batch*ranks tokens picks it. */
    double idle = pow(1.0 - k / experts, (double)batch * ranks);
    out->batch = batch;
    out->active_experts = local * (1.0 - idle);
    out->pairs = (double)batch * k;
    out->weight_bytes = out->active_experts * plan_expert_weight_bytes(cfg);
    out->flops = out->pairs * 6.0 * h * i;
    double remote = out->pairs * (ranks - 1) / ranks;
    double dispatch_row = h + h / 128.0 * 4.0 + MM_WIRE_HEADER_BYTES;
    double combine_row = 2.0 * h;
    out->nvlink_bytes = remote * (dispatch_row + combine_row);
    out->t_hbm_us = out->weight_bytes / (c->hbm_gbps * 1e9) * 1e6;
    out->t_tc_us = out->flops / (c->fp8_tflops * 1e12) * 1e6;
    out->t_nvlink_us = out->nvlink_bytes / (c->nvlink_gbps * 1e9) * 1e6;
    out->floor_us = out->t_hbm_us;
    out->bound = BOUND_HBM;
    if (out->t_tc_us > out->floor_us) { out->floor_us = out->t_tc_us; out->bound = BOUND_TC; }
    if (out->t_nvlink_us > out->floor_us) { out->floor_us = out->t_nvlink_us; out->bound = BOUND_NVLINK; }
}

void plan_rank_floor(const mm_config *cfg, int ranks, int batch, int slice, const mm_ceilings *c, mm_floor *out)
{
    plan_floor(cfg, ranks, batch, c, out);
    if (!slice) return;
    out->nvlink_bytes = 0;
    out->t_nvlink_us = 0;
    out->floor_us = out->t_hbm_us;
    out->bound = BOUND_HBM;
    if (out->t_tc_us > out->floor_us) { out->floor_us = out->t_tc_us; out->bound = BOUND_TC; }
}

mm_shape plan_shape(const mm_config *cfg, int ranks, int max_tokens)
{
    mm_shape s = {cfg->hidden, cfg->inter, cfg->experts, cfg->topk, ranks, max_tokens};
    return s;
}

void plan_mode_bytes(mm_mode mode, const mm_shape *s, uint64_t *sym, uint64_t *local)
{
    mm_layout a, b;
    switch (mode) {
    case MODE_FUSED: a = mm_layout_fused_sym(s); b = mm_layout_fused_local(s); break;
    case MODE_NORMAL: a = mm_layout_normal_sym(s); b = mm_layout_normal_local(s); break;
    default: a = mm_layout_ll_sym(s); b = mm_layout_ll_local(s); break;
    }
    *sym = a.total;
    *local = b.total;
}

mm_fused_form plan_fused_form(const mm_floor *fl)
{
    mm_fused_form form = {0.0, 0};
    if (fl->active_experts <= 0.0 || fl->pairs <= 0.0) return form;
    const int rows = (int)lround(fl->pairs / fl->active_experts), tiles = mm_row_tiles(rows);
    if (tiles < 1) return form;
    form.rows_per_tile = (double)rows / tiles;
    form.dual = mm_fused_large(rows, tiles);
    return form;
}

void plan_fused_label(const mm_config *cfg, int ranks, int batch, const mm_fused_form *items, char *out, size_t len)
{
    const int form = mm_fused_kernel_form(batch, cfg->topk, ranks, cfg->experts, cfg->inter, PLAN_FUSED_CTAS,
                                          cfg->weights == MM_WEIGHTS_FP4);
    const char *kind = items->dual ? "dual" : "pass";
    if (form == MM_FUSED_FORM_FP4_SWAPPED) snprintf(out, len, "swap");
    else if (form == MM_FUSED_FORM_FOLD) snprintf(out, len, "%s+fold", kind);
    else if (form == MM_FUSED_FORM_HANDOFF) snprintf(out, len, "%s+handoff", kind);
    else snprintf(out, len, "%s", kind);
}

double plan_routing_floor_us(const mm_floor *expected, const mm_seed_floor *sf)
{
    double t = sf->t_hbm_us;
    if (expected->t_tc_us > t) t = expected->t_tc_us;
    if (expected->t_nvlink_us > t) t = expected->t_nvlink_us;
    return t;
}

/* Rows per expert (all experts) of bench's routing for `batch` tokens per rank: rows[experts]. */
static mm_status routing_rows(const mm_config *cfg, const mm_routing *routing, uint64_t seed, int ranks, int batch,
                              int32_t *rows)
{
    memset(rows, 0, (size_t)cfg->experts * sizeof *rows);
    const size_t n = (size_t)ranks * (size_t)batch * (size_t)cfg->topk;
    if (n == 0) return MM_OK;
    mm_route_tables tables;
    MM_TRY(route_tables_make(routing, cfg->experts, seed, &tables));
    int32_t *ids = malloc(n * sizeof *ids);
    float *w = malloc(n * sizeof *w);
    mm_status s = ids && w ? MM_OK : MM_RUNTIME;
    if (s == MM_OK) {
        const mm_route_params p = route_params(routing, cfg, ranks, seed, tables.zipf_cdf, tables.zipf_mult, tables.softplus);
        host_gen_routing(&p, 0, ranks * batch, ids, w);
        for (size_t i = 0; i < n; i++)
            if (ids[i] >= 0 && ids[i] < cfg->experts) rows[ids[i]]++;
    }
    free(ids);
    free(w);
    route_tables_free(&tables);
    return s;
}

mm_status plan_rank_rows(const mm_config *cfg, const mm_routing *routing, uint64_t seed, int ranks, int batch,
                         int rank, int32_t *rows)
{
    const int el = cfg->experts / ranks;
    int32_t *all = malloc((size_t)cfg->experts * sizeof *all);
    if (!all) return MM_RUNTIME;
    const mm_status s = routing_rows(cfg, routing, seed, ranks, batch, all);
    if (s == MM_OK) memcpy(rows, all + (size_t)rank * el, (size_t)el * sizeof *rows);
    free(all);
    return s;
}

double plan_tile_excess(const mm_seed_floor *sf)
{
    return sf->tiles_rows > 0 ? sf->tiles / ((double)sf->tiles_rows / MM_GEMM_BM) : 0.0;
}

static double mib(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0);
}

mm_status plan_seed_floor(const mm_config *cfg, const mm_routing *routing, uint64_t seed, int ranks, int batch,
                          const mm_ceilings *c, mm_seed_floor *out)
{
    memset(out, 0, sizeof *out);
    out->batch = batch;
    int32_t *rows = malloc((size_t)cfg->experts * sizeof *rows);
    if (!rows) return MM_RUNTIME;
    const mm_status s = routing_rows(cfg, routing, seed, ranks, batch, rows);
    if (s == MM_OK) {
        const int el = cfg->experts / ranks;
        for (int r = 0; r < ranks; r++) {
            int active = 0, tiles = 0;
            long rank_rows = 0;
            for (int e = r * el; e < (r + 1) * el; e++) {
                active += rows[e] > 0;
                tiles += mm_row_tiles(rows[e]);
                rank_rows += rows[e];
            }
            /* as the kernel schedules them: a large call folds the extra rows into the last tile */
            if (mm_fused_fold_kernel(batch, cfg->topk, ranks, cfg->experts) &&
                mm_fused_folds(mm_fused_large((int)rank_rows, tiles), cfg->hidden / 128)) {
                tiles = 0;
                for (int e = r * el; e < (r + 1) * el; e++) tiles += mm_fused_expert_tiles(rows[e], 1);
            }
            if (active > out->active) {
                out->active = active;
                out->rank = r;
            }
            if (tiles > out->tiles) {
                out->tiles = tiles;
                out->tiles_rank = r;
                out->tiles_rows = rank_rows;
            }
        }
        out->weight_bytes = out->active * plan_expert_weight_bytes(cfg);
        out->t_hbm_us = out->weight_bytes / (c->hbm_gbps * 1e9) * 1e6;
    }
    free(rows);
    return s;
}

mm_status plan_print(FILE *f, const mm_config *cfg, int ranks, const int *batches, int n_batches, int max_tokens,
                     int ll_max_tokens, const mm_ceilings *c, unsigned built, const mm_routing *routing,
                     uint64_t seed, int slice)
{
    fprintf(f, "# megamoe plan: %s (hidden %d, intermediate %d, %d experts, top-%d, %s scales, "
               "swiglu limit ",
            cfg->name, cfg->hidden, cfg->inter, cfg->experts, cfg->topk,
            cfg->scale_fmt == MM_SCALE_UE8M0 ? "ue8m0" : "fp32");
    if (cfg->has_swiglu_limit) fprintf(f, "%g)\n", cfg->swiglu_limit);
    else fprintf(f, "none)\n");
    mm_config as_fp8 = *cfg, as_fp4 = *cfg;
    as_fp8.weights = MM_WEIGHTS_FP8;
    as_fp4.weights = MM_WEIGHTS_FP4;
    const double fp8_bytes = plan_expert_weight_bytes(&as_fp8), fp4_bytes = plan_expert_weight_bytes(&as_fp4);
    fprintf(f, "# EP %d: %d experts per rank, %.1f MB of %s weights + scales per expert\n", ranks,
            cfg->experts / ranks, plan_expert_weight_bytes(cfg) / 1e6, cfg->weights == MM_WEIGHTS_FP4 ? "FP4" : "FP8");
    fprintf(f, "# experts' weights per rank: FP8 %.2f GB, FP4 %.2f GB (%.3fx)%s\n", fp8_bytes * (cfg->experts / ranks) / 1e9,
            fp4_bytes * (cfg->experts / ranks) / 1e9, fp4_bytes / fp8_bytes,
            cfg->weights == MM_WEIGHTS_FP4 ? "; the floors below stream FP4" : "");
    if (slice)
        fprintf(f, "# EP %d slice (--ep-slice): one rank's work on one GPU, %d experts and up to %d x batch tokens; "
                   "no NVLink bytes in the floors\n", ranks, cfg->experts / ranks, ranks);
    fprintf(f, "# ceilings: HBM %.0f GB/s, NVLink %.0f GB/s one direction, FP8 GEMM %.0f TFLOP/s\n",
            c->hbm_gbps, c->nvlink_gbps, c->fp8_tflops);
    fprintf(f, "#\n# per-rank buffers (MiB)\n");
    fprintf(f, "# %-7s %10s %12s %12s %12s\n", "mode", "tokens", "symmetric", "local", "total");
    for (int m = 0; m < MODE_COUNT; m++) {
        int t = m == MODE_LL && ll_max_tokens < max_tokens ? ll_max_tokens : max_tokens; /* as bench sizes it */
        mm_shape s = plan_shape(cfg, ranks, t);
        if (slice) { /* one GPU holding the rank's experts, for every token that picks one of them */
            s.experts = cfg->experts / ranks;
            s.ranks = 1;
            s.max_tokens = (int64_t)t * ranks;
            t = (int)s.max_tokens;
        }
        uint64_t sym, local;
        plan_mode_bytes((mm_mode)m, &s, &sym, &local);
        fprintf(f, "  %-7s %10d %12.1f %12.1f %12.1f%s\n", mode_name((mm_mode)m), t, mib(sym),
                mib(local), mib(sym + local),
                built & (1u << m) ? "" : "  (planned layout: mode not built yet)");
    }
    fprintf(f, "#\n# per batch (tokens per rank), uniform routing, expected values\n");
    fprintf(f, "# fused: its items (dual: two weight blocks over one pass of the rows; pass: one) and the kernel's "
               "form where not the base one (+fold, +handoff; swap: FP4's swapped form), for %d CTAs%s\n",
            PLAN_FUSED_CTAS, slice ? ", as the emulated rank's" : "");
    fprintf(f, "%7s %8s %9s %11s %9s %10s %9s %9s %10s %9s %7s %10s %s\n", "batch", "active", "pairs",
            "weights_MB", "GFLOP", "nvlink_MB", "hbm_us", "tc_us", "nvlink_us", "floor_us",
            "bound", "rows/tile", "fused");
    for (int b = 0; b < n_batches; b++) {
        if (batches[b] > max_tokens) { /* bench sizes its buffers for max_tokens and skips these */
            fprintf(f, "%7d  SKIP: above the buffers' %d tokens per rank (--max-tokens-per-rank)\n", batches[b],
                    max_tokens);
            continue;
        }
        mm_floor fl;
        plan_rank_floor(cfg, ranks, batches[b], slice, c, &fl);
        const mm_fused_form form = plan_fused_form(&fl);
        char label[32];
        plan_fused_label(cfg, ranks, batches[b], &form, label, sizeof label);
        fprintf(f, "%7d %8.2f %9.0f %11.1f %9.1f %10.1f %9.1f %9.1f %10.1f %9.1f %7s %10.1f %s\n", fl.batch,
                fl.active_experts, fl.pairs, fl.weight_bytes / 1e6, fl.flops / 1e9,
                fl.nvlink_bytes / 1e6, fl.t_hbm_us, fl.t_tc_us, fl.t_nvlink_us, fl.floor_us,
                bound_name(fl.bound), form.rows_per_tile, label);
    }
    char route[64];
    routing_format(routing, route, sizeof route);
    fprintf(f, "#\n# per batch, bench's routing (%s, seed %llu): the rank whose local experts the tokens touch most\n",
            route, (unsigned long long)seed);
    fprintf(f, "# (tiles: the most %d-row tiles of one expert on a rank, each streaming its expert's weights from\n"
               "#  L2 once; tiles_x: those tiles over that rank's rows / %d, above 1 where last tiles are partly empty)\n",
            MM_GEMM_BM, MM_GEMM_BM);
    fprintf(f, "%7s %8s %6s %11s %9s %16s %6s %5s %8s\n", "batch", "active", "rank", "weights_MB", "hbm_us",
            "hbm_us/expected", "tiles", "rank", "tiles_x");
    for (int b = 0; b < n_batches; b++) {
        if (batches[b] > max_tokens) {
            fprintf(f, "%7d  SKIP\n", batches[b]);
            continue;
        }
        mm_floor fl;
        mm_seed_floor sf;
        plan_rank_floor(cfg, ranks, batches[b], slice, c, &fl);
        MM_TRY(plan_seed_floor(cfg, routing, seed, ranks, batches[b], c, &sf));
        fprintf(f, "%7d %8d %6d %11.1f %9.1f %16.2f %6d %5d %8.2f\n", sf.batch, sf.active, sf.rank,
                sf.weight_bytes / 1e6, sf.t_hbm_us, fl.t_hbm_us > 0 ? sf.t_hbm_us / fl.t_hbm_us : 0.0, sf.tiles,
                sf.tiles_rank, plan_tile_excess(&sf));
    }
    return MM_OK;
}
