/* check: the correctness scenarios. For each scenario every rank generates its own tokens (global
 * token indices, so the data is the same at any EP size) and every expert's weights, runs the GPU
 * reference, and where the scenario is small, the host reference on the same inputs, which the
 * GPU reference must match. Each mode then runs and is compared with the GPU reference
 * (modes not built yet report SKIP). Results agree across ranks through MPI. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "datagen_host.h"
#include "launch.h"
#include "modes.h"
#include "reference.h"
#include "runtime.h"
#include "scenarios.h"

typedef struct {
    mm_row_status status;
    char note[160];
    double calc_diff, max_abs, ref_max_abs;
    long long nonfinite;
    /* FNV-1a of rank 0's output bytes and its token count: rank 0 holds global tokens 0..n-1 at
     * any EP size, so two runs at different EP sizes must agree (scripts/ep-invariance.py) */
    unsigned long long digest;
    int digest_tokens;
} cell;

typedef struct {
    const mm_scenario *sc;
    char shape[64];
    char tokens[32];
    cell ref;              /* GPU reference vs host reference */
    cell mode[MODE_COUNT];
    long long fused_ll_diff; /* outputs where fused and ll differ in any bit; -1: not both ran */
    double seconds;          /* rank 0's wall time for the scenario: references, modes, checks */
    /* FP4 experts: weight groups past the exact range of their block (rounded in e4m3 and so
     * counted, never silent), and all groups; -1: FP8 experts */
    long long fp4_past, fp4_groups;
} scenario_result;

static void judge(cell *c, const mm_diff_acc *acc, double tol)
{
    c->calc_diff = diff_acc_calc(acc);
    c->max_abs = acc->max_abs;
    c->ref_max_abs = acc->ref_max_abs;
    c->nonfinite = acc->nonfinite;
    int ok = diff_acc_passes(acc, tol);
    c->status = ok ? ROW_OK : ROW_FAIL;
    if (!ok)
        mm_fmt(c->note, sizeof c->note, "calc_diff %.3g (bound %.3g), %lld non-finite", c->calc_diff,
               tol, acc->nonfinite);
}

typedef struct {
    uint16_t *x;
    int32_t *ids;
    float *w;
    uint8_t *w1, *w2;
    float *s1, *s2;
    uint8_t *c1, *e1, *c2, *e2; /* FP4 experts (the FP8 ones are then not made) */
    unsigned long long *past;
    void *ws;
    double *y_ref;
    uint32_t *cdf;
    float *softplus;
} gpu_buffers;

static void free_buffers(gpu_buffers *b)
{
    cudaFree(b->x); cudaFree(b->ids); cudaFree(b->w);
    cudaFree(b->w1); cudaFree(b->w2); cudaFree(b->s1); cudaFree(b->s2);
    cudaFree(b->c1); cudaFree(b->e1); cudaFree(b->c2); cudaFree(b->e2); cudaFree(b->past);
    cudaFree(b->ws); cudaFree(b->y_ref); cudaFree(b->cdf); cudaFree(b->softplus);
    memset(b, 0, sizeof *b);
}

/* The tokens of a call: `gen` tokens from `first` under the routing, or for an EP slice (`local`
 * > 0: the slice's experts are [0, local)) those of them that pick one of its experts, the other
 * picks masked (ep_slice_select), compacted; their count into *tokens. Host arrays. */
static int call_tokens_host(const mm_route_params *hp, uint64_t first, int gen, int topk, int local, int32_t *ids,
                            float *w)
{
    host_gen_routing(hp, first, gen, ids, w);
    return local ? ep_slice_select(ids, w, gen, topk, local) : gen;
}

/* Runs one scenario on this rank; the GPU reference's output stays in b->y_ref. `gen` tokens are
 * generated from `first`; an EP slice (`local` > 0 experts) keeps those that reach it, *tokens. */
static mm_status run_reference(mm_runtime *rt, const mm_scenario *sc, const mm_config *cfg,
                               uint64_t seed, gpu_buffers *b, int gen, int local, int *tokens, uint64_t first,
                               mm_route_tables *tab, mm_route_params *hp, mm_x_params *xp)
{
    size_t h = (size_t)cfg->hidden, in = (size_t)cfg->inter, e = (size_t)cfg->experts;
    size_t t = (size_t)gen, k = (size_t)cfg->topk;
    size_t ws = mm_reference_workspace_bytes(gen, cfg->hidden, cfg->inter, cfg->topk);
    size_t weights = e * 3 * h * in + e * 3 * (h / 128) * (in / 128) * 4;
    size_t cdf_entries = (size_t)hp->experts;
    char what[128];
    mm_fmt(what, sizeof what, "check %s (reference)", sc->name);
    MM_TRY(runtime_check_fit(rt, what, weights + ws + t * h * 10 + t * k * 8));
    CUDA_TRY(cudaMalloc((void **)&b->x, t * h * 2 + 16));
    CUDA_TRY(cudaMalloc((void **)&b->ids, t * k * 4 + 16));
    CUDA_TRY(cudaMalloc((void **)&b->w, t * k * 4 + 16));
    const int fp4 = cfg->weights == MM_WEIGHTS_FP4;
    if (fp4) {
        CUDA_TRY(cudaMalloc((void **)&b->c1, e * in * h));
        CUDA_TRY(cudaMalloc((void **)&b->e1, e * 2 * in * h / 32));
        CUDA_TRY(cudaMalloc((void **)&b->c2, e * h * in / 2));
        CUDA_TRY(cudaMalloc((void **)&b->e2, e * h * in / 32));
        CUDA_TRY(cudaMalloc((void **)&b->past, sizeof *b->past));
    } else {
        CUDA_TRY(cudaMalloc((void **)&b->w1, e * 2 * in * h));
        CUDA_TRY(cudaMalloc((void **)&b->w2, e * h * in));
    }
    /* FP8: the block scales; FP4: the blocks' words in their place (mm_launch_fp4_block_words) */
    CUDA_TRY(cudaMalloc((void **)&b->s1, e * (2 * in / 128) * (h / 128) * 4));
    CUDA_TRY(cudaMalloc((void **)&b->s2, e * (h / 128) * (in / 128) * 4));
    CUDA_TRY(cudaMalloc(&b->ws, ws));
    CUDA_TRY(cudaMalloc((void **)&b->y_ref, t * h * 8 + 16));
    CUDA_TRY(cudaMalloc((void **)&b->cdf, cdf_entries * 4));
    CUDA_TRY(cudaMalloc((void **)&b->softplus, sizeof tab->softplus));
    CUDA_TRY(cudaMemcpy(b->cdf, tab->zipf_cdf, cdf_entries * 4, cudaMemcpyHostToDevice));
    CUDA_TRY(cudaMemcpy(b->softplus, tab->softplus, sizeof tab->softplus, cudaMemcpyHostToDevice));
    mm_route_params dp = *hp;
    dp.zipf_cdf = b->cdf;
    dp.softplus = b->softplus;
    int ue8m0 = cfg->scale_fmt == MM_SCALE_UE8M0;
    CUDA_TRY(mm_launch_gen_routing(dp, first, gen, b->ids, b->w, rt->stream));
    *tokens = gen;
    /* the slice's tokens, selected on the host from the GPU's routing (bit-identical to the
     * host's, which host_versus_gpu selects from alike) */
    if (local) MM_TRY(runtime_slice_select(rt, b->ids, b->w, gen, (int)k, local, tokens));
    CUDA_TRY(mm_launch_gen_x(*xp, first, *tokens, cfg->hidden, b->x, rt->stream));
    /* Every expert, the remote ones regenerated here: weights never cross NVLink for a check. */
    if (fp4) {
        CUDA_TRY(mm_launch_gen_fp4_weights(seed, cfg->fp4_pattern, 0, cfg->experts, cfg->hidden, cfg->inter, b->c1,
                                           b->e1, (uint32_t *)b->s1, b->c2, b->e2, (uint32_t *)b->s2, rt->stream));
        CUDA_TRY(cudaMemsetAsync(b->past, 0, sizeof *b->past, rt->stream));
        CUDA_TRY(mm_launch_fp4_past_groups(b->e1, (long long)e * 2 * in, cfg->hidden, b->past, rt->stream));
        CUDA_TRY(mm_launch_fp4_past_groups(b->e2, (long long)e * h, cfg->inter, b->past, rt->stream));
    } else {
        CUDA_TRY(mm_launch_gen_weights(seed, 0, cfg->experts, cfg->hidden, cfg->inter, ue8m0, b->w1,
                                       b->s1, b->w2, b->s2, rt->stream));
    }
    mm_reference_args a = {*tokens, cfg->hidden, cfg->inter, cfg->topk, cfg->has_swiglu_limit,
                           cfg->swiglu_limit, ue8m0, b->x, b->ids, b->w, b->w1, b->s1, b->w2, b->s2,
                           b->c1, b->e1, b->c2, b->e2, b->ws, b->y_ref};
    CUDA_TRY(mm_launch_reference(a, rt->stream));
    CUDA_TRY(cudaStreamSynchronize(rt->stream));
    return MM_OK;
}

/* Host reference on this rank's tokens (the same `gen` and slice selection as run_reference),
 * compared with the GPU reference. */
static mm_status host_versus_gpu(const mm_config *cfg, uint64_t seed, const gpu_buffers *b,
                                 int gen, int local, uint64_t first, const mm_route_params *hp,
                                 const mm_x_params *xp, mm_diff_acc *acc)
{
    size_t h = (size_t)cfg->hidden, t = (size_t)gen, k = (size_t)cfg->topk;
    uint16_t *x = malloc(t * h * 2 + 2);
    int32_t *ids = malloc(t * k * 4 + 4);
    float *w = malloc(t * k * 4 + 4);
    double *y_host = malloc(t * h * 8 + 8), *y_gpu = malloc(t * h * 8 + 8);
    mm_generated_experts *gen_experts = generated_experts_new(cfg, seed);
    mm_status s = (x && ids && w && y_host && y_gpu && gen_experts) ? MM_OK : MM_RUNTIME;
    if (s == MM_OK) {
        t = (size_t)call_tokens_host(hp, first, gen, (int)k, local, ids, w);
        host_gen_x(*xp, first, (int)t, cfg->hidden, x);
        mm_expert_source src = generated_experts_source(gen_experts);
        s = ref_host_layer(cfg, &src, x, ids, w, (int)t, y_host);
    }
    if (s == MM_OK && t > 0) {
        cudaError_t e = cudaMemcpy(y_gpu, b->y_ref, t * h * 8, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            mm_error("CUDA %s copying the GPU reference", cudaGetErrorName(e));
            s = MM_RUNTIME;
        }
        for (size_t i = 0; s == MM_OK && i < t * h; i++) diff_acc_add(acc, y_gpu[i], y_host[i]);
    }
    free(x); free(ids); free(w); free(y_host); free(y_gpu);
    generated_experts_free(gen_experts);
    return s;
}

static mm_status output_digest(const uint16_t *y, size_t n, cell *c)
{
    uint8_t *host = malloc(n * 2 + 2);
    if (!host) return MM_RUNTIME;
    if (n && cudaMemcpy(host, y, n * 2, cudaMemcpyDeviceToHost) != cudaSuccess) {
        free(host);
        mm_error("CUDA error copying an output for its digest");
        return MM_RUNTIME;
    }
    unsigned long long d = 1469598103934665603ull;
    for (size_t i = 0; i < n * 2; i++) d = (d ^ host[i]) * 1099511628211ull;
    free(host);
    c->digest = d;
    return MM_OK;
}

/* One mode on this scenario's inputs, compared with the GPU reference. Collective. */
static mm_status run_mode(mm_runtime *rt, const mm_options *o, mm_mode m, const mm_scenario *sc, const mm_config *cfg,
                          const gpu_buffers *b, int tokens, int max_tokens, cell *c, uint16_t **keep_y)
{
    const mm_mode_ops *ops = mode_ops(m);
    int el = cfg->experts / rt->world;
    size_t h = (size_t)cfg->hidden, first = (size_t)rt->rank * el;
    const int fp4 = cfg->weights == MM_WEIGHTS_FP4;
    const mm_local_weights lw = modes_local_weights(cfg, first, fp4 ? b->c1 : b->w1, fp4 ? b->c2 : b->w2, b->s1, b->s2,
                                                    b->e1, b->e2);
    void *state = NULL;
    uint16_t *y = NULL;
    char what[256] = "";
    mm_status local = ops->setup(&state, rt, cfg, max_tokens, MM_SYM_HEAD_BYTES, &lw);
    if (local == MM_OK && cudaMalloc((void **)&y, (size_t)tokens * h * 2 + 16) != cudaSuccess) local = MM_RUNTIME;
    if (local == MM_OK && mm_launch_poison(y, (size_t)tokens * h * 2, rt->stream) != cudaSuccess) local = MM_RUNTIME;
    /* a slice's call takes the form of the EP N rank it emulates (api.h mm_call_io) */
    mm_mode_io io = {tokens, b->x, b->ids, b->w, y, sc->ep_slice ? scenario_tokens(sc, 0) : 0, sc->ep_slice};
    if (local == MM_OK) local = ops->run(state, &io, rt->stream);
    if (local == MM_OK) {
        char label[64];
        mm_fmt(label, sizeof label, "the %s call", mode_name(m));
        local = runtime_sync(rt, label, what, sizeof what);
    }
    if (local == MM_OK) local = runtime_wait_status(rt, what, sizeof what);
    mm_diff_acc acc;
    memset(&acc, 0, sizeof acc);
    mm_device_diff *d = NULL;
    if (local == MM_OK && cudaMalloc((void **)&d, sizeof *d) != cudaSuccess) local = MM_RUNTIME;
    if (local == MM_OK)
        local = runtime_compare(rt, y, b->y_ref, (long long)tokens * (long long)h, d, &acc);
    cudaFree(d);
    if (state) ops->destroy(state);
    mm_status agreed;
    MM_TRY(mpi_agree(local, &agreed));
    if (agreed == MM_OK && rt->rank == 0) {
        MM_TRY(output_digest(y, (size_t)tokens * h, c));
        c->digest_tokens = tokens;
    }
    if (agreed == MM_OK && keep_y) *keep_y = y; /* the caller compares and frees it */
    else cudaFree(y);
    if (agreed == MM_TIMEOUT || agreed == MM_RUNTIME) {
        MM_TRY(runtime_failure_note(rt, what, c->note, sizeof c->note));
        if (agreed == MM_TIMEOUT) MM_TRY(runtime_reset_comm(rt));
        c->status = agreed == MM_TIMEOUT ? ROW_TIMEOUT : ROW_ERROR;
        return agreed == MM_RUNTIME ? MM_RUNTIME : MM_OK;
    }
    if (agreed == MM_USAGE) { /* e.g. the workspace does not fit: said on stderr */
        c->status = ROW_SKIP;
        mm_fmt(c->note, sizeof c->note, "setup failed (see stderr)");
        return MM_OK;
    }
    MM_TRY(diff_acc_allreduce(&acc));
    judge(c, &acc, o->tol);
    return MM_OK;
}

/* Elements of two BF16 outputs that differ in any bit, summed over the ranks. Collective. */
static mm_status count_bit_differences(const uint16_t *a, const uint16_t *b, size_t n, long long *out)
{
    uint16_t *ha = malloc(n * 2 + 2), *hb = malloc(n * 2 + 2);
    mm_status local = ha && hb ? MM_OK : MM_RUNTIME;
    long long differ = 0;
    if (local == MM_OK && n && (cudaMemcpy(ha, a, n * 2, cudaMemcpyDeviceToHost) != cudaSuccess ||
                                cudaMemcpy(hb, b, n * 2, cudaMemcpyDeviceToHost) != cudaSuccess)) {
        mm_error("CUDA error copying outputs for the fused/ll comparison");
        local = MM_RUNTIME;
    }
    for (size_t i = 0; local == MM_OK && i < n; i++) differ += ha[i] != hb[i];
    free(ha);
    free(hb);
    mm_status agreed;
    MM_TRY(mpi_agree(local, &agreed));
    if (agreed != MM_OK) return agreed;
    if (MPI_Allreduce(&differ, out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) return MM_RUNTIME;
    return MM_OK;
}

static mm_status run_scenario(mm_runtime *rt, const mm_options *o, const mm_scenario *sc,
                              scenario_result *res)
{
    mm_config cfg;
    char why[160];
    memset(res, 0, sizeof *res);
    res->fused_ll_diff = -1;
    res->fp4_past = res->fp4_groups = -1;
    res->sc = sc;
    scenario_shape_text(sc, rt->world, res->shape, sizeof res->shape);
    int counts[MM_MAX_PEERS], first = 0;
    for (int r = 0; r < rt->world; r++) counts[r] = scenario_tokens(sc, r);
    for (int r = 0; r < rt->rank; r++) first += counts[r];
    if (sc->pattern == TOKENS_SAME) mm_fmt(res->tokens, sizeof res->tokens, "%d", counts[0]);
    else if (rt->world == 1) mm_fmt(res->tokens, sizeof res->tokens, "%d", counts[0]);
    else mm_fmt(res->tokens, sizeof res->tokens, "%d,%d%s", counts[0], counts[1], rt->world > 2 ? ",.." : "");

    if (scenario_config(sc, rt->world, &cfg, why, sizeof why) != MM_OK) {
        res->ref.status = ROW_SKIP;
        mm_fmt(res->ref.note, sizeof res->ref.note, "%s", why);
        for (int m = 0; m < MODE_COUNT; m++) res->mode[m] = res->ref;
        return MM_OK;
    }
    scenario_apply_weights(&cfg, o->weights);
    /* the routing is the model's at its EP size: an EP N slice's at N, over all E experts */
    mm_config full = cfg;
    int route_ranks = rt->world, local = 0;
    if (sc->ep_slice) {
        if (scenario_full_config(sc, &full, why, sizeof why) != MM_OK) return MM_USAGE;
        route_ranks = sc->ep_slice;
        local = cfg.experts;
    }
    mm_routing routing;
    char sub[256];
    if (parse_routing(sc->routing, &routing, sub, sizeof sub) != MM_OK) return MM_USAGE;
    mm_route_tables tab;
    MM_TRY(route_tables_make(&routing, full.experts, o->seed, &tab));
    mm_route_params hp = route_params(&routing, &full, route_ranks, o->seed, tab.zipf_cdf,
                                      tab.zipf_mult, tab.softplus);
    mm_x_params xp = {o->seed, 0, 0};
    scenario_x_exponents(sc, &xp.exp_lo, &xp.exp_count);

    gpu_buffers b;
    memset(&b, 0, sizeof b);
    const int gen = scenario_call_tokens_max(sc, rt->rank);
    int tokens = 0;
    mm_status local_s = run_reference(rt, sc, &cfg, o->seed, &b, gen, local, &tokens, (uint64_t)first, &tab, &hp, &xp);
    if (sc->ep_slice) mm_fmt(res->tokens, sizeof res->tokens, "%d of %d", tokens, gen);
    mm_diff_acc acc;
    memset(&acc, 0, sizeof acc);
    int host = scenario_host_reference(sc);
    if (local_s == MM_OK && host)
        local_s = host_versus_gpu(&cfg, o->seed, &b, gen, local, (uint64_t)first, &hp, &xp, &acc);
    mm_status agreed;
    MM_TRY(mpi_agree(local_s, &agreed));
    if (agreed != MM_OK) {
        free_buffers(&b);
        route_tables_free(&tab);
        return agreed;
    }
    if (cfg.weights == MM_WEIGHTS_FP4) {
        unsigned long long past = 0;
        CUDA_TRY(cudaMemcpy(&past, b.past, sizeof past, cudaMemcpyDeviceToHost));
        res->fp4_past = (long long)past;
        res->fp4_groups = (long long)cfg.experts * 3 * cfg.hidden / 32 * cfg.inter;
    }
    if (host) {
        MM_TRY(diff_acc_allreduce(&acc));
        judge(&res->ref, &acc, o->tol);
    } else {
        res->ref.status = ROW_SKIP;
        mm_fmt(res->ref.note, sizeof res->ref.note, "GPU reference only (too large for the host)");
    }
    int max_tokens = 0;
    for (int r = 0; r < rt->world; r++) max_tokens = counts[r] > max_tokens ? counts[r] : max_tokens;
    if (sc->ep_slice) max_tokens = tokens; /* one GPU: the call's tokens */
    mm_status s = MM_OK;
    uint16_t *outputs[MODE_COUNT] = {NULL};
    for (int m = 0; m < MODE_COUNT && s == MM_OK; m++) {
        cell *c = &res->mode[m];
        const mm_mode_ops *ops = mode_ops((mm_mode)m);
        int ok = 1;
        c->status = ROW_SKIP;
        if (!(o->modes & (1u << m))) mm_fmt(c->note, sizeof c->note, "not requested");
        else if (ops->missing) mm_fmt(c->note, sizeof c->note, "%s", ops->missing);
        else if (sc->needs) mm_fmt(c->note, sizeof c->note, "needs %s", sc->needs);
        else if (m == MODE_LL && max_tokens > o->ll_max)
            mm_fmt(c->note, sizeof c->note, "above the ll cap of %d tokens per rank", o->ll_max);
        else if ((s = modes_supported(ops, &cfg, rt->world, &ok, c->note, sizeof c->note)) != MM_OK || !ok)
            continue; /* SKIP with the mode's reason (or the failure stops the loop) */
        else
            s = run_mode(rt, o, (mm_mode)m, sc, &cfg, &b, tokens, max_tokens, c,
                         m == MODE_FUSED || m == MODE_LL ? &outputs[m] : NULL);
    }
    if (s == MM_OK && outputs[MODE_FUSED] && outputs[MODE_LL])
        s = count_bit_differences(outputs[MODE_FUSED], outputs[MODE_LL], (size_t)tokens * cfg.hidden,
                                  &res->fused_ll_diff);
    cudaFree(outputs[MODE_FUSED]);
    cudaFree(outputs[MODE_LL]);
    free_buffers(&b);
    route_tables_free(&tab);
    return s;
}

/* Symmetric bytes the built modes need over the scenarios that will run. */
static uint64_t scenarios_sym_bytes(const mm_options *o, int world)
{
    uint64_t need = 0;
    for (int i = 0; i < scenario_count(); i++) {
        const mm_scenario *sc = scenario_get(i);
        mm_config cfg;
        char why[160];
        if ((o->filter[0] && !strstr(sc->name, o->filter)) ||
            scenario_config(sc, world, &cfg, why, sizeof why) != MM_OK)
            continue;
        int max_tokens = 1;
        for (int r = 0; r < world; r++)
            max_tokens = scenario_call_tokens_max(sc, r) > max_tokens ? scenario_call_tokens_max(sc, r) : max_tokens;
        for (int m = 0; m < MODE_COUNT; m++) {
            const mm_mode_ops *ops = mode_ops((mm_mode)m);
            if (ops->missing || !(o->modes & (1u << m))) continue;
            uint64_t b = ops->sym_bytes(&cfg, world, max_tokens);
            need = b > need ? b : need;
        }
    }
    return need;
}



static const char *cell_text(const cell *c, char *buf, size_t len)
{
    if (c->status == ROW_OK || c->status == ROW_FAIL)
        mm_fmt(buf, len, "%s %.1e", row_status_name(c->status), c->calc_diff);
    else
        mm_fmt(buf, len, "%s", row_status_name(c->status));
    return buf;
}

static void print_row(FILE *f, const scenario_result *r)
{
    char a[32], m0[32], m1[32], m2[32], md[24] = "-", bits[24] = "-";
    if (r->ref.status == ROW_OK || r->ref.status == ROW_FAIL) mm_fmt(md, sizeof md, "%.2e", r->ref.max_abs);
    if (r->fused_ll_diff == 0) mm_fmt(bits, sizeof bits, "same");
    else if (r->fused_ll_diff > 0) mm_fmt(bits, sizeof bits, "FAIL %lld", r->fused_ll_diff);
    fprintf(f, "%-22s %-20s %-9s %-14s %-13s %9s  %-13s %-13s %-13s %-8s %6.1f\n", r->sc->name, r->shape,
            r->tokens, r->sc->routing, cell_text(&r->ref, a, sizeof a), md,
            cell_text(&r->mode[MODE_FUSED], m0, sizeof m0),
            cell_text(&r->mode[MODE_NORMAL], m1, sizeof m1), cell_text(&r->mode[MODE_LL], m2, sizeof m2), bits,
            r->seconds);
    if (r->fused_ll_diff > 0)
        fprintf(f, "    fused vs ll: %lld outputs differ in some bit (they must be identical)\n", r->fused_ll_diff);
    if (r->fp4_past > 0)
        fprintf(f, "    fp4: %lld of %lld weight groups past the exact range (rounded in e4m3, docs/recipe.md)\n",
                r->fp4_past, r->fp4_groups);
    const cell *cells[4] = {&r->ref, &r->mode[0], &r->mode[1], &r->mode[2]};
    const char *labels[4] = {"reference", "fused", "normal", "ll"};
    for (int i = 0; i < 4; i++)
        if (row_status_exit(cells[i]->status) != MM_OK) /* FAIL, TIMEOUT, ERROR */
            fprintf(f, "    %s: %s\n", labels[i], cells[i]->note[0] ? cells[i]->note : row_status_name(cells[i]->status));
}

static cJSON *cell_json(const cell *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", row_status_name(c->status));
    cJSON_AddStringToObject(o, "note", c->note);
    if (c->status == ROW_OK || c->status == ROW_FAIL) {
        cJSON_AddNumberToObject(o, "calc_diff", c->calc_diff);
        cJSON_AddNumberToObject(o, "max_abs", c->max_abs);
        cJSON_AddNumberToObject(o, "ref_max_abs", c->ref_max_abs);
        cJSON_AddNumberToObject(o, "nonfinite", (double)c->nonfinite);
        if (c->digest_tokens > 0) {
            char hex[20];
            mm_fmt(hex, sizeof hex, "%016llx", c->digest);
            cJSON_AddStringToObject(o, "rank0_digest", hex);
            cJSON_AddNumberToObject(o, "rank0_tokens", c->digest_tokens);
        }
    }
    return o;
}

static mm_status write_json(const char *path, const mm_meta *meta, const scenario_result *r, int n)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", "megamoe.check/1");
    cJSON_AddItemToObject(root, "meta", report_run_meta_json(meta));
    cJSON *arr = cJSON_AddArrayToObject(root, "scenarios");
    for (int i = 0; i < n; i++) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "name", r[i].sc->name);
        cJSON_AddStringToObject(s, "shape", r[i].shape);
        cJSON_AddStringToObject(s, "tokens", r[i].tokens);
        cJSON_AddStringToObject(s, "routing", r[i].sc->routing);
        cJSON_AddItemToObject(s, "reference", cell_json(&r[i].ref));
        for (int k = 0; k < MODE_COUNT; k++) cJSON_AddItemToObject(s, mode_name((mm_mode)k), cell_json(&r[i].mode[k]));
        cJSON_AddNumberToObject(s, "seconds", r[i].seconds);
        cJSON_AddStringToObject(s, "weights", r[i].fp4_groups >= 0 ? "fp4" : "fp8");
        if (r[i].fp4_groups >= 0) {
            cJSON_AddNumberToObject(s, "fp4_groups", (double)r[i].fp4_groups);
            cJSON_AddNumberToObject(s, "fp4_groups_past_limit", (double)r[i].fp4_past);
        }
        if (r[i].fused_ll_diff >= 0) cJSON_AddNumberToObject(s, "fused_ll_bit_differences", (double)r[i].fused_ll_diff);
        else cJSON_AddNullToObject(s, "fused_ll_bit_differences");
        cJSON_AddItemToArray(arr, s);
    }
    return json_write_atomic(path, root);
}

/* The scenario table as Markdown: the text table's columns, every note a row of its own. */
static mm_status write_markdown(const char *path, const mm_meta *meta, const scenario_result *r, int n,
                                double tol, const char *summary)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        mm_error("markdown %s: cannot write", path);
        return MM_USAGE;
    }
    fprintf(f, "### megamoe check: EP %d, %s, %s, seed %llu, bound calc_diff <= %.1e\n\n", meta->ep, meta->gpu,
            meta->git_rev, (unsigned long long)meta->seed, tol);
    fprintf(f, "| scenario | shape | tokens | routing | reference | max_diff | fused | normal | ll | fused=ll |\n"
               "|---|---|---|---|---|---:|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        char a[32], m0[32], m1[32], m2[32], md[24] = "-", bits[24] = "-";
        if (r[i].ref.status == ROW_OK || r[i].ref.status == ROW_FAIL) mm_fmt(md, sizeof md, "%.2e", r[i].ref.max_abs);
        if (r[i].fused_ll_diff == 0) mm_fmt(bits, sizeof bits, "same");
        else if (r[i].fused_ll_diff > 0) mm_fmt(bits, sizeof bits, "FAIL %lld", r[i].fused_ll_diff);
        fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r[i].sc->name, r[i].shape, r[i].tokens,
                r[i].sc->routing, cell_text(&r[i].ref, a, sizeof a), md, cell_text(&r[i].mode[MODE_FUSED], m0, sizeof m0),
                cell_text(&r[i].mode[MODE_NORMAL], m1, sizeof m1), cell_text(&r[i].mode[MODE_LL], m2, sizeof m2), bits);
    }
    fprintf(f, "\n%s\n", summary);
    for (int i = 0; i < n; i++) {
        const cell *cells[4] = {&r[i].ref, &r[i].mode[0], &r[i].mode[1], &r[i].mode[2]};
        const char *labels[4] = {"reference", "fused", "normal", "ll"};
        for (int c = 0; c < 4; c++)
            if (row_status_exit(cells[c]->status) != MM_OK)
                fprintf(f, "- %s, %s: %s\n", r[i].sc->name, labels[c],
                        cells[c]->note[0] ? cells[c]->note : row_status_name(cells[c]->status));
    }
    if (fclose(f) != 0) {
        mm_error("markdown %s: cannot write", path);
        return MM_USAGE;
    }
    return MM_OK;
}

mm_status check_main(const mm_options *o, const mm_config *cfg, int argc, char **argv)
{
    (void)cfg; /* the scenarios carry their own shapes, the model ones included */
    mm_runtime *rt = calloc(1, sizeof *rt);
    scenario_result *results = calloc((size_t)scenario_count(), sizeof *results);
    if (!rt || !results) return MM_RUNTIME;
    watchdog_arm(MM_WATCHDOG_SECONDS, "start-up (MPI, CUDA, NCCL)");
    int rank = 0, world = 1;
    mm_status s = mpi_start(&rank, &world);
    if (s == MM_OK) s = runtime_init(rt, "check", o->timeout_ms, scenarios_sym_bytes(o, world));
    watchdog_disarm();
    int n = 0, failed = 0, passed = 0, skipped = 0;
    mm_status worst = MM_OK; /* the worst cell, for the exit code */
    if (s == MM_OK) rt->comm_sms = o->comm_sms;
    mm_meta meta;
    memset(&meta, 0, sizeof meta);
    if (s == MM_OK) {
        meta_fill_common(&meta, o, cfg, argc, argv);
        runtime_fill_meta(rt, &meta);
        if (rt->rank == 0) {
            printf("# megamoe check: EP %d, %s, driver %s, CUDA %s, NCCL %s, seed %llu, bound "
                   "calc_diff <= %.1e\n",
                   rt->world, rt->gpu_name, rt->driver, rt->cuda, rt->nccl, o->seed, o->tol);
            printf("# reference = GPU reference vs host reference (double); modes vs GPU reference\n");
            printf("# fused=ll: fused and ll outputs compared bit for bit (same recipe, same order)\n");
            printf("%-22s %-20s %-9s %-14s %-13s %9s  %-13s %-13s %-13s %-8s %6s\n", "scenario", "shape",
                   "tokens", "routing", "reference", "max_diff", "fused", "normal", "ll", "fused=ll", "sec");
            fflush(stdout);
        }
    }
    for (int i = 0; s == MM_OK && i < scenario_count(); i++) {
        const mm_scenario *sc = scenario_get(i);
        if (o->filter[0] && !strstr(sc->name, o->filter)) continue;
        scenario_result *r = &results[n++];
        char step[128];
        mm_fmt(step, sizeof step, "check scenario %s", sc->name);
        watchdog_arm(MM_WATCHDOG_SECONDS, step);
        double started = MPI_Wtime();
        s = run_scenario(rt, o, sc, r);
        r->seconds = MPI_Wtime() - started;
        watchdog_disarm();
        if (s != MM_OK) { /* the rest would run on a broken context: say where it stopped */
            if (rt->rank == 0) {
                const char *why = "";
                for (int m = 0; m < MODE_COUNT && !why[0]; m++)
                    if (r->mode[m].status == ROW_ERROR) why = r->mode[m].note;
                mm_error("check: scenario %s stopped the run%s%s", sc->name, why[0] ? ": " : "", why);
            }
            break;
        }
        const cell *cells[4] = {&r->ref, &r->mode[0], &r->mode[1], &r->mode[2]};
        int any_fail = 0, any_ok = 0;
        for (int c = 0; c < 4; c++) {
            const mm_status cs = row_status_exit(cells[c]->status);
            any_fail |= cs != MM_OK; /* a TIMEOUT fails the scenario too */
            worst = mm_worse(worst, cs);
            any_ok |= cells[c]->status == ROW_OK;
        }
        any_fail |= r->fused_ll_diff > 0;
        if (any_fail) failed++;
        else if (any_ok) passed++;
        else skipped++;
        if (rt->rank == 0) {
            print_row(stdout, r);
            fflush(stdout);
        }
    }
    if (s == MM_OK && rt->rank == 0) {
        char summary[160];
        mm_fmt(summary, sizeof summary, "check: %d scenarios: %d passed, %d failed, %d skipped (no reference or mode ran)",
               n, passed, failed, skipped);
        printf("%s\n", summary);
        if (n == 0) mm_error("check: no scenario matches --filter '%s'", o->filter);
        if (o->json_path[0]) s = write_json(o->json_path, &meta, results, n);
        if (s == MM_OK && o->markdown_path[0]) s = write_markdown(o->markdown_path, &meta, results, n, o->tol, summary);
    }
    if (s == MM_OK && failed) s = mm_worse(MM_FAIL, worst); /* a TIMEOUT exits 4, as in bench */
    if (s == MM_OK && n == 0) s = MM_USAGE;
    if (rt->world > 0) {
        int code = (int)s;
        if (MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD) == MPI_SUCCESS) s = mm_worse(s, (mm_status)code);
    }
    runtime_destroy(rt);
    free(rt);
    free(results);
    mpi_finish();
    return s;
}
