/* bench: the sweep. For each batch (tokens per rank) the requested modes run one after another in
 * this process, on the same generated inputs, so every speedup is a ratio measured in one run.
 *
 * Flow: runtime up -> every expert's weights generated on the GPU (this rank's slice feeds the
 * modes, all of them feed the GPU reference) -> each built mode set up once for its largest batch
 * -> per batch: x and routing for this rank's global tokens -> per mode: check the first call
 * against the GPU reference (max_diff), or SKIP with the reason -> the checked modes timed side
 * by side, iteration by iteration (--interleave; timing.h) -> per mode: replay stability and the
 * stage breakdown -> tables, JSON and Markdown from rank 0. */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../kernels/fp4.h"
#include "ceilings.h"
#include "datagen_host.h"
#include "launch.h"
#include "modes.h"
#include "plan.h"
#include "reference.h"
#include "report.h"
#include "runtime.h"
#include "timing.h"

#ifndef MM_GIT_REV
#define MM_GIT_REV "unknown"
#endif

typedef struct {
    mm_runtime rt;
    int max_tokens;     /* the largest batch (tokens per rank) the buffers take */
    /* --ep-slice N: this GPU runs rank 0's share of EP N (its E / N experts; the tokens of
     * N x batch that pick one of them); 0: a real run */
    int slice;
    const mm_config *full; /* the model's config (all experts): the routing and the floors */
    int run_max;        /* tokens a call may carry: max_tokens, or N x max_tokens for a slice */
    int run_tokens;     /* the tokens of the current batch's calls */
    int run_batch;      /* the batch (tokens a rank): an EP slice's calls take that rank's form */
    mm_ceiling_set ceil; /* the floors' ceilings: measured on these GPUs where they can be */
    int mode_max[MODE_COUNT]; /* largest batch each built mode is set up for (0: not run) */
    uint64_t mode_sym[MODE_COUNT]; /* where each mode's region starts in the symmetric buffer */
    void *mode_state[MODE_COUNT];
    char mode_skip[MODE_COUNT][192]; /* a requested mode this config cannot run here: the rows' note */
    int local_experts;
    /* this rank's inputs, sized for max_tokens */
    uint16_t *x;
    int32_t *topk_ids;
    float *topk_w;
    /* per mode, as the modes are timed side by side: its output, and the checked first call's
     * output for the replay-stability check */
    uint16_t *y[MODE_COUNT], *y_first[MODE_COUNT];
    /* every expert's weights; this rank's experts are the slice at rank * local_experts */
    uint8_t *w1, *w2;
    float *w1_scale, *w2_scale;
    /* FP4 experts (--weights fp4; then w1, w2 hold the codes and the scales are not made): the
     * exponents */
    uint8_t *e1, *e2;
    /* the GPU reference for the current batch */
    void *ref_ws;
    double *y_ref;
    int ref_batch; /* batch y_ref holds, -1: none */
    mm_device_diff *diff;
    /* routing tables on the device */
    mm_route_tables tables;
    uint32_t *zipf_cdf_dev;
    float *softplus_dev;
    mm_route_params route;
} bench_state;

void meta_fill_common(mm_meta *m, const mm_options *o, const mm_config *cfg, int argc,
                      char **argv)
{
    mm_fmt(m->config, sizeof m->config, "%s", cfg->name);
    m->hidden = cfg->hidden;
    m->inter = cfg->inter;
    m->experts = cfg->experts;
    m->topk = cfg->topk;
    mm_fmt(m->scale_fmt, sizeof m->scale_fmt, "%s", cfg->scale_fmt == MM_SCALE_UE8M0 ? "ue8m0" : "fp32");
    mm_fmt(m->weights, sizeof m->weights, "%s", cfg->weights == MM_WEIGHTS_FP4 ? "fp4" : "fp8");
    if (cfg->has_swiglu_limit) mm_fmt(m->swiglu_limit, sizeof m->swiglu_limit, "%g", cfg->swiglu_limit);
    else mm_fmt(m->swiglu_limit, sizeof m->swiglu_limit, "none");
    routing_format(&o->routing, m->routing, sizeof m->routing);
    m->seed = o->seed;
    m->warmup = o->warmup;
    m->iters = o->iters;
    m->graph = o->graph;
    m->l2_flush = o->l2_flush;
    m->interleave = o->interleave;
    m->idle_ms = o->idle_ms;
    mm_fmt(m->git_rev, sizeof m->git_rev, "%s", MM_GIT_REV);
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    size_t used = 0;
    m->argv[0] = '\0';
    for (int i = 0; i < argc && used + 2 < sizeof m->argv; i++) {
        mm_fmt(m->argv + used, sizeof m->argv - used, "%s%s", i ? " " : "", argv[i]);
        used = strlen(m->argv);
    }
}

static mm_status alloc_inputs(bench_state *b, const mm_config *cfg, const mm_options *o)
{
    mm_runtime *rt = &b->rt;
    size_t x_bytes = (size_t)b->run_max * cfg->hidden * 2;
    size_t k_bytes = (size_t)b->run_max * cfg->topk * 4;
    double per_expert = plan_expert_weight_bytes(cfg);
    size_t w_bytes = (size_t)(per_expert * cfg->experts);
    int ref_tokens = 0;
    for (int m = 0; m < MODE_COUNT; m++) ref_tokens = b->mode_max[m] > ref_tokens ? b->mode_max[m] : ref_tokens;
    if (!o->check) ref_tokens = 0;
    size_t ref_bytes = ref_tokens ? mm_reference_workspace_bytes(ref_tokens, cfg->hidden, cfg->inter, cfg->topk) +
                                        (size_t)ref_tokens * cfg->hidden * 8 : 0;
    int modes = 0;
    for (int m = 0; m < MODE_COUNT; m++) modes += b->mode_max[m] > 0;
    MM_TRY(runtime_check_fit(rt, "inputs, outputs, all experts' weights and the reference",
                             (1 + 2 * (size_t)modes) * x_bytes + 2 * k_bytes + w_bytes + ref_bytes));
    CUDA_TRY(cudaMalloc((void **)&b->x, x_bytes + 16));
    for (int m = 0; m < MODE_COUNT; m++) {
        if (!b->mode_max[m]) continue;
        CUDA_TRY(cudaMalloc((void **)&b->y[m], x_bytes + 16));
        CUDA_TRY(cudaMalloc((void **)&b->y_first[m], x_bytes + 16));
    }
    CUDA_TRY(cudaMalloc((void **)&b->topk_ids, k_bytes + 16));
    CUDA_TRY(cudaMalloc((void **)&b->topk_w, k_bytes + 16));
    CUDA_TRY(cudaMalloc((void **)&b->diff, sizeof(mm_device_diff)));
    if (ref_tokens) {
        CUDA_TRY(cudaMalloc(&b->ref_ws, mm_reference_workspace_bytes(ref_tokens, cfg->hidden, cfg->inter, cfg->topk)));
        CUDA_TRY(cudaMalloc((void **)&b->y_ref, (size_t)ref_tokens * cfg->hidden * 8));
    }
    b->ref_batch = -1;
    size_t h = (size_t)cfg->hidden, i = (size_t)cfg->inter, e = (size_t)cfg->experts;
    const int fp4 = cfg->weights == MM_WEIGHTS_FP4;
    if (fp4) {
        CUDA_TRY(cudaMalloc((void **)&b->w1, e * 2 * i * h / 2));
        CUDA_TRY(cudaMalloc((void **)&b->w2, e * h * i / 2));
        CUDA_TRY(cudaMalloc((void **)&b->e1, e * 2 * i * h / MM_FP4_GROUP));
        CUDA_TRY(cudaMalloc((void **)&b->e2, e * h * i / MM_FP4_GROUP));
    } else {
        CUDA_TRY(cudaMalloc((void **)&b->w1, e * 2 * i * h));
        CUDA_TRY(cudaMalloc((void **)&b->w2, e * h * i));
    }
    /* FP8: the block scales; FP4: the blocks' words in their place (mm_launch_fp4_block_words) */
    CUDA_TRY(cudaMalloc((void **)&b->w1_scale, e * (2 * i / 128) * (h / 128) * 4));
    CUDA_TRY(cudaMalloc((void **)&b->w2_scale, e * (h / 128) * (i / 128) * 4));

    cudaEvent_t t0, t1;
    CUDA_TRY(cudaEventCreate(&t0));
    CUDA_TRY(cudaEventCreate(&t1));
    CUDA_TRY(cudaEventRecord(t0, rt->stream));
    if (fp4) {
        CUDA_TRY(mm_launch_gen_fp4_weights(o->seed, cfg->fp4_pattern, 0, cfg->experts, cfg->hidden, cfg->inter, b->w1, b->e1,
                                           (uint32_t *)b->w1_scale, b->w2, b->e2, (uint32_t *)b->w2_scale, rt->stream));
    } else
        CUDA_TRY(mm_launch_gen_weights(o->seed, 0, cfg->experts, cfg->hidden, cfg->inter,
                                       cfg->scale_fmt == MM_SCALE_UE8M0, b->w1, b->w1_scale, b->w2,
                                       b->w2_scale, rt->stream));
    CUDA_TRY(cudaEventRecord(t1, rt->stream));
    CUDA_TRY(cudaStreamSynchronize(rt->stream));
    float ms = 0;
    CUDA_TRY(cudaEventElapsedTime(&ms, t0, t1));
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    if (rt->rank == 0)
        fprintf(stderr, "megamoe: generated all %d experts' weights (%.2f GB) in %.1f ms\n",
                cfg->experts, per_expert * cfg->experts / 1e9, ms);

    /* the routing picks among all of the model's experts, over the EP size it emulates */
    const mm_config *full = b->full;
    MM_TRY(route_tables_make(&o->routing, full->experts, o->seed, &b->tables));
    CUDA_TRY(cudaMalloc((void **)&b->zipf_cdf_dev, sizeof(uint32_t) * (size_t)full->experts));
    CUDA_TRY(cudaMalloc((void **)&b->softplus_dev, sizeof b->tables.softplus));
    CUDA_TRY(cudaMemcpy(b->zipf_cdf_dev, b->tables.zipf_cdf, sizeof(uint32_t) * (size_t)full->experts,
                        cudaMemcpyHostToDevice));
    CUDA_TRY(cudaMemcpy(b->softplus_dev, b->tables.softplus, sizeof b->tables.softplus,
                        cudaMemcpyHostToDevice));
    b->route = route_params(&o->routing, full, b->slice ? b->slice : rt->world, o->seed, b->zipf_cdf_dev,
                            b->tables.zipf_mult, b->softplus_dev);
    return MM_OK;
}

/* Each built, requested mode once, for its largest batch. Collective. */
static mm_status setup_modes(bench_state *b, const mm_config *cfg)
{
    mm_runtime *rt = &b->rt;
    const size_t first = (size_t)rt->rank * b->local_experts;
    const mm_local_weights lw = modes_local_weights(cfg, first, b->w1, b->w2, b->w1_scale, b->w2_scale, b->e1, b->e2);
    for (int m = 0; m < MODE_COUNT; m++) {
        if (!b->mode_max[m]) continue;
        MM_TRY(mode_ops((mm_mode)m)->setup(&b->mode_state[m], rt, cfg, b->mode_max[m], b->mode_sym[m], &lw));
    }
    return MM_OK;
}

static void free_inputs(bench_state *b)
{
    for (int m = 0; m < MODE_COUNT; m++)
        if (b->mode_state[m]) mode_ops((mm_mode)m)->destroy(b->mode_state[m]);
    for (int m = 0; m < MODE_COUNT; m++) {
        cudaFree(b->y[m]);
        cudaFree(b->y_first[m]);
    }
    cudaFree(b->diff);
    cudaFree(b->ref_ws);
    cudaFree(b->y_ref);
    cudaFree(b->x);
    cudaFree(b->topk_ids);
    cudaFree(b->topk_w);
    cudaFree(b->w1);
    cudaFree(b->w2);
    cudaFree(b->w1_scale);
    cudaFree(b->w2_scale);
    cudaFree(b->e1);
    cudaFree(b->e2);
    cudaFree(b->zipf_cdf_dev);
    cudaFree(b->softplus_dev);
    route_tables_free(&b->tables);
}

/* This rank's tokens of a batch are global tokens [rank * batch, (rank + 1) * batch). A slice of
 * EP N: of the N x batch tokens of all N ranks, those that pick one of rank 0's experts, their
 * other picks masked (ep_slice_select), with x generated for as many tokens. */
static mm_status gen_batch(bench_state *b, const mm_config *cfg, const mm_options *o, int batch)
{
    mm_runtime *rt = &b->rt;
    b->run_tokens = batch;
    b->run_batch = batch;
    if (b->slice) {
        const int all = b->slice * batch;
        CUDA_TRY(mm_launch_gen_routing(b->route, 0, all, b->topk_ids, b->topk_w, rt->stream));
        MM_TRY(runtime_slice_select(rt, b->topk_ids, b->topk_w, all, cfg->topk, cfg->experts, &b->run_tokens));
        CUDA_TRY(mm_launch_gen_x(x_params_default(o->seed), 0, b->run_tokens, cfg->hidden, b->x, rt->stream));
        CUDA_TRY(cudaStreamSynchronize(rt->stream));
        return MM_OK;
    }
    uint64_t first = (uint64_t)rt->rank * (uint64_t)batch;
    CUDA_TRY(mm_launch_gen_x(x_params_default(o->seed), first, batch, cfg->hidden, b->x, rt->stream));
    CUDA_TRY(mm_launch_gen_routing(b->route, first, batch, b->topk_ids, b->topk_w, rt->stream));
    CUDA_TRY(cudaStreamSynchronize(rt->stream));
    return MM_OK;
}

static int largest(const int *v, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

typedef struct {
    bench_state *b;
    mm_mode mode;
    mm_mode_io io;
} step_ctx;

/* The current batch's call of mode m: its tokens, and for an EP slice the rank it emulates. */
static step_ctx step_of(bench_state *b, mm_mode m)
{
    step_ctx c = {b, m, {b->run_tokens, b->x, b->topk_ids, b->topk_w, b->y[m], b->slice ? b->run_batch : 0, b->slice}};
    return c;
}

static mm_status mode_step(void *ctx, cudaStream_t stream)
{
    step_ctx *c = ctx;
    return mode_ops(c->mode)->run(c->b->mode_state[c->mode], &c->io, stream);
}

/* The GPU reference of this batch (computed once, shared by the modes) on its calls' tokens. */
static mm_status reference_for(bench_state *b, const mm_config *cfg, int batch)
{
    if (b->ref_batch == batch) return MM_OK;
    const int fp4 = cfg->weights == MM_WEIGHTS_FP4;
    mm_reference_args a = {b->run_tokens, cfg->hidden, cfg->inter, cfg->topk, cfg->has_swiglu_limit,
                           cfg->swiglu_limit, cfg->scale_fmt == MM_SCALE_UE8M0, b->x, b->topk_ids,
                           b->topk_w, fp4 ? NULL : b->w1, b->w1_scale, fp4 ? NULL : b->w2, b->w2_scale,
                           fp4 ? b->w1 : NULL, b->e1, fp4 ? b->w2 : NULL, b->e2, b->ref_ws, b->y_ref};
    CUDA_TRY(mm_launch_reference(a, b->rt.stream));
    CUDA_TRY(cudaStreamSynchronize(b->rt.stream));
    b->ref_batch = batch;
    return MM_OK;
}

/* First call of a (mode, batch) against the reference: fills row->diff, FAIL beyond the bound.
 * Collective. Returns MM_OK when the row's outcome was decided (even TIMEOUT). */
static mm_status check_row(bench_state *b, const mm_config *cfg, step_ctx *ctx, mm_row *row)
{
    mm_runtime *rt = &b->rt;
    size_t n = (size_t)ctx->io.tokens * cfg->hidden;
    char what[256] = "";
    mm_status local = reference_for(b, cfg, row->batch);
    uint16_t *y = (uint16_t *)ctx->io.y;
    if (local == MM_OK && mm_launch_poison(y, n * 2, rt->stream) != cudaSuccess) local = MM_RUNTIME;
    if (local == MM_OK) local = mode_step(ctx, rt->stream);
    if (local == MM_OK) {
        char label[64];
        mm_fmt(label, sizeof label, "the checked %s call", mode_name(ctx->mode));
        local = runtime_sync(rt, label, what, sizeof what);
    }
    if (local == MM_OK) local = runtime_wait_status(rt, what, sizeof what);
    mm_diff_acc acc;
    memset(&acc, 0, sizeof acc);
    if (local == MM_OK) local = runtime_compare(rt, y, b->y_ref, (long long)n, b->diff, &acc);
    mm_status agreed;
    MM_TRY(mpi_agree(local, &agreed));
    if (agreed != MM_OK) {
        MM_TRY(runtime_failure_note(rt, what, row->note, sizeof row->note));
        if (agreed == MM_TIMEOUT) MM_TRY(runtime_reset_comm(rt));
        row->status = agreed == MM_TIMEOUT ? ROW_TIMEOUT : ROW_ERROR;
        return agreed == MM_TIMEOUT ? MM_OK : agreed;
    }
    MM_TRY(diff_acc_allreduce(&acc));
    CUDA_TRY(cudaMemcpy(b->y_first[ctx->mode], y, n * 2, cudaMemcpyDeviceToDevice));
    row->diff.has_diff = 1;
    row->diff.calc_diff = diff_acc_calc(&acc);
    row->diff.max_abs = acc.max_abs;
    row->diff.ref_max_abs = acc.ref_max_abs;
    row->diff.nonfinite = acc.nonfinite;
    if (!diff_acc_passes(&acc, MM_DEFAULT_TOL)) {
        row->status = ROW_FAIL;
        mm_fmt(row->note, sizeof row->note, "calc_diff %.3g (bound %.0e), %lld non-finite",
               row->diff.calc_diff, MM_DEFAULT_TOL, acc.nonfinite);
    }
    return MM_OK;
}

/* After timing: the last replay's output must equal the checked first call's bit for bit (same
 * inputs; a kernel that leaks state between calls, or races, shows here). Collective. */
static mm_status check_stable(bench_state *b, const mm_config *cfg, mm_row *row)
{
    size_t n = (size_t)b->run_tokens * cfg->hidden;
    uint16_t *first = malloc(n * 2 + 2), *last = malloc(n * 2 + 2);
    mm_status local = first && last ? MM_OK : MM_RUNTIME;
    long long differ = 0, total = 0;
    if (local == MM_OK && n && (cudaMemcpy(first, b->y_first[row->mode], n * 2, cudaMemcpyDeviceToHost) != cudaSuccess ||
                                cudaMemcpy(last, b->y[row->mode], n * 2, cudaMemcpyDeviceToHost) != cudaSuccess))
        local = MM_RUNTIME;
    for (size_t i = 0; local == MM_OK && i < n; i++) differ += first[i] != last[i];
    free(first);
    free(last);
    mm_status agreed;
    MM_TRY(mpi_agree(local, &agreed));
    if (agreed != MM_OK) return agreed;
    if (MPI_Allreduce(&differ, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) return MM_RUNTIME;
    if (total && row->status == ROW_OK) {
        row->status = ROW_FAIL;
        mm_fmt(row->note, sizeof row->note, "output changed across replays: %lld elements differ from the "
               "checked first call", total);
    }
    return MM_OK;
}

/* --breakdown: the mode's stages over MM_BREAKDOWN_CALLS instrumented calls, each after the
 * same L2 flush and line-up barrier as a timed call (a flush's dirty lines are written back
 * during the call that follows it: without it the stages would describe a faster call than the
 * one timed), median per stage, then the slowest rank's. Collective. */
#define MM_BREAKDOWN_CALLS 9
static mm_status breakdown_row(bench_state *b, int l2_flush, step_ctx *ctx, mm_row *row)
{
    mm_runtime *rt = &b->rt;
    const mm_mode_ops *ops = mode_ops(ctx->mode);
    double us[MM_BREAKDOWN_CALLS][MM_MAX_STAGES], col[MM_BREAKDOWN_CALLS];
    char names[MM_MAX_STAGES][16];
    int n = 0;
    char what[256] = "";
    mm_status local = MM_OK;
    for (int c = 0; c < MM_BREAKDOWN_CALLS && local == MM_OK; c++) {
        if (l2_flush != MM_L2_FLUSH_OFF) local = runtime_flush_l2(rt, l2_flush, c);
        if (local == MM_OK) local = runtime_device_barrier(rt);
        if (local == MM_OK) local = ops->stages(b->mode_state[ctx->mode], &ctx->io, rt->stream, names, us[c], &n);
        if (local == MM_OK) local = runtime_wait_status(rt, what, sizeof what);
    }
    mm_status agreed;
    MM_TRY(mpi_agree(local, &agreed));
    if (agreed != MM_OK) {
        if (agreed == MM_TIMEOUT) MM_TRY(runtime_reset_comm(rt));
        mm_warn("--breakdown: %s batch %d: instrumented calls failed; no stages", mode_name(ctx->mode), row->batch);
        return agreed == MM_RUNTIME ? MM_RUNTIME : MM_OK;
    }
    double med[MM_MAX_STAGES] = {0};
    for (int k = 0; k < n; k++) {
        for (int c = 0; c < MM_BREAKDOWN_CALLS; c++) col[c] = us[c][k];
        mm_stats st;
        stats_compute(col, MM_BREAKDOWN_CALLS, &st);
        med[k] = st.median;
    }
    /* every rank's medians to rank 0, which reports them and, per stage, their maximum (the
     * runtime allows at most MM_MAX_PEERS ranks: no allocation before the collective) */
    double all[MM_MAX_PEERS][MM_MAX_STAGES];
    if (MPI_Gather(med, MM_MAX_STAGES, MPI_DOUBLE, all, MM_MAX_STAGES, MPI_DOUBLE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        return MM_RUNTIME;
    row->n_stages = n;
    for (int k = 0; k < n; k++) {
        mm_fmt(row->stage_name[k], sizeof row->stage_name[k], "%s", names[k]);
        row->stage_us[k] = med[k];
        for (int r = 0; rt->rank == 0 && r < rt->world; r++) {
            row->stage_rank_us[r][k] = all[r][k];
            row->stage_us[k] = all[r][k] > row->stage_us[k] ? all[r][k] : row->stage_us[k];
        }
    }
    return MM_OK;
}

/* Times the checked modes of one batch (ms[0..n)): side by side when asked (timing.h says why);
 * if that fails, each alone, so the row that failed is the one that says so. rows[m] gets mode
 * m's timing, samples + m * iters its samples. */
static mm_status time_modes(bench_state *b, const mm_options *o, const mm_timing *timing, int n, const int *ms,
                            step_ctx *ctxs, mm_row *rows, double *samples)
{
    mm_step_fn steps[MODE_COUNT];
    void *ctx[MODE_COUNT];
    mm_row *row[MODE_COUNT];
    double *out[MODE_COUNT];
    for (int j = 0; j < n; j++) {
        steps[j] = mode_step;
        ctx[j] = &ctxs[ms[j]];
        row[j] = &rows[ms[j]];
        out[j] = samples + (size_t)ms[j] * o->iters;
    }
    mm_row before[MODE_COUNT];
    for (int j = 0; j < n; j++) before[j] = *row[j];
    if (o->interleave && n > 1) {
        MM_TRY(timing_run_rows(&b->rt, n, steps, ctx, timing, row, out));
        int failed = 0;
        for (int j = 0; j < n; j++) failed |= row[j]->status == ROW_TIMEOUT || row[j]->status == ROW_ERROR;
        if (!failed) return MM_OK;
        for (int j = 0; j < n; j++) *row[j] = before[j];
    }
    for (int j = 0; j < n; j++) MM_TRY(timing_run_rows(&b->rt, 1, &steps[j], &ctx[j], timing, &row[j], &out[j]));
    return MM_OK;
}

static mm_status sweep(bench_state *b, const mm_config *cfg, const mm_options *o, mm_results *res)
{
    mm_runtime *rt = &b->rt;
    const mm_ceilings ceil = b->ceil.value;
    mm_timing timing = {o->warmup, o->iters, o->l2_flush, o->graph, -1, o->idle_ms * 1000};
    double *samples = calloc((size_t)o->iters * MODE_COUNT, sizeof(double));
    if (!samples) return MM_RUNTIME;
    mm_status s = MM_OK;
    for (int bi = 0; bi < o->n_batches && s == MM_OK; bi++) {
        int batch = o->batches[bi];
        int fits = batch <= b->max_tokens;
        char step[96];
        mm_fmt(step, sizeof step, "bench batch %d", batch);
        watchdog_arm(MM_WATCHDOG_SECONDS, step);
        if (fits) s = gen_batch(b, cfg, o, batch);
        /* the floors are the model's (all experts) at the EP size run or emulated */
        const mm_config *full = b->full;
        const int ranks = b->slice ? b->slice : rt->world;
        mm_floor fl;
        plan_rank_floor(full, ranks, batch, b->slice, &ceil, &fl);
        /* the same floor for this batch's own routing: the busiest rank's active experts (the
         * same host generator as the GPU's, same seed), the other terms as expected */
        mm_seed_floor sf = {0};
        if (s == MM_OK) s = plan_seed_floor(full, &o->routing, o->seed, ranks, batch, &ceil, &sf);
        const double routing_floor = plan_routing_floor_us(&fl, &sf);
        mm_row rows[MODE_COUNT], checked[MODE_COUNT];
        step_ctx ctxs[MODE_COUNT];
        int timed[MODE_COUNT], n_timed = 0;
        /* each mode's row: SKIP with the reason, or checked against the reference */
        for (int m = 0; m < MODE_COUNT && s == MM_OK; m++) {
            if (!(o->modes & (1u << m))) continue;
            const mm_mode_ops *ops = mode_ops((mm_mode)m);
            mm_row *row = &rows[m];
            memset(row, 0, sizeof *row);
            row->mode = (mm_mode)m;
            row->batch = batch;
            row->nranks = rt->world;
            row->weight_bytes = fl.weight_bytes;
            row->nvlink_bytes = fl.nvlink_bytes;
            row->flops = fl.flops;
            row->floor_us = fl.floor_us;
            row->routing_floor_us = routing_floor;
            row->routing_experts = sf.active;
            row->routing_tiles = sf.tiles;
            row->routing_tile_excess = plan_tile_excess(&sf);
            row->status = ROW_SKIP;
            if (ops->missing)
                mm_fmt(row->note, sizeof row->note, "%s", ops->missing);
            else if (b->mode_skip[m][0])
                mm_fmt(row->note, sizeof row->note, "%s", b->mode_skip[m]);
            else if (!fits)
                mm_fmt(row->note, sizeof row->note, "batch above the buffers' %d tokens per rank "
                       "(--max-tokens-per-rank)", b->max_tokens);
            else if (b->run_tokens > b->mode_max[m])
                mm_fmt(row->note, sizeof row->note, "above the ll cap of %d tokens per rank "
                       "(--ll-max)", b->slice ? b->mode_max[m] / b->slice : b->mode_max[m]);
            else if (o->graph && !ops->graph_ok)
                mm_fmt(row->note, sizeof row->note, "not capturable in a CUDA graph (--graph off)");
            else {
                step_ctx ctx = step_of(b, (mm_mode)m);
                ctxs[m] = ctx;
                row->status = ROW_OK;
                if (o->check) s = check_row(b, cfg, &ctxs[m], row);
                if (s == MM_OK && row->status != ROW_TIMEOUT && row->status != ROW_ERROR) timed[n_timed++] = m;
            }
            checked[m] = *row;
        }
        if (s == MM_OK && n_timed) s = time_modes(b, o, &timing, n_timed, timed, ctxs, rows, samples);
        for (int j = 0; j < n_timed && s == MM_OK; j++) {
            const int m = timed[j];
            mm_row *row = &rows[m];
            /* keep the check's verdict unless timing itself failed */
            if (row->status == ROW_OK) row->status = checked[m].status;
            else if (checked[m].note[0] && row->note[0]) {
                char both[192];
                mm_fmt(both, sizeof both, "%s; %s", checked[m].note, row->note);
                mm_fmt(row->note, sizeof row->note, "%s", both);
            }
            if (!row->note[0]) mm_fmt(row->note, sizeof row->note, "%s", checked[m].note);
            if (s == MM_OK && o->check && row->diff.has_diff && (row->status == ROW_OK || row->status == ROW_FAIL))
                s = check_stable(b, cfg, row);
            if (s == MM_OK && o->breakdown && mode_ops((mm_mode)m)->stages && row->status == ROW_OK)
                s = breakdown_row(b, o->l2_flush, &ctxs[m], row);
        }
        for (int m = 0; m < MODE_COUNT && s == MM_OK && rt->rank == 0; m++) {
            if (!(o->modes & (1u << m))) continue;
            const mm_row *added = results_add(res, &rows[m], samples + (size_t)m * o->iters, rows[m].n_samples);
            if (!added) s = MM_RUNTIME;
            else report_progress(stderr, added);
        }
        watchdog_disarm();
    }
    free(samples);
    return s;
}

/* Rank 0's row of (mode, batch) in the results, writable (NULL: none). */
static mm_row *row_of(mm_results *res, mm_mode mode, int batch)
{
    for (int i = 0; i < res->n_rows; i++)
        if (res->rows[i].mode == mode && res->rows[i].batch == batch) return &res->rows[i];
    return NULL;
}

/* --energy-ms, once every batch is timed (so no timing follows these sustained loads): each
 * timed (mode, batch) row's calls back to back on every rank, lined up (timing_energy_row), the
 * batch's inputs made again as the sweep made them; rank 0 decides which rows and how many calls
 * from its times and tells the others. NVML must open on every rank, else a warning and no
 * readings. */
static mm_status energy_pass(bench_state *b, const mm_config *cfg, const mm_options *o, mm_results *res)
{
    mm_runtime *rt = &b->rt;
    char why[256] = "";
    mm_power *pw = NULL;
    int opened = mm_power_open(mm_power_library(), rt->bus_id, &pw, why, sizeof why) == MM_OK, all_opened = 0;
    if (MPI_Allreduce(&opened, &all_opened, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) {
        mm_power_close(pw);
        return MM_RUNTIME;
    }
    if (!all_opened) {
        if (!opened) mm_warn("bench: --energy-ms: no energy readings: %s", why);
        else if (rt->rank == 0) mm_warn("bench: --energy-ms: no energy readings: NVML failed on another rank");
        mm_power_close(pw);
        return MM_OK;
    }
    mm_status s = MM_OK;
    for (int bi = 0; bi < o->n_batches && s == MM_OK; bi++) {
        const int batch = o->batches[bi];
        if (batch > b->max_tokens) continue;
        char step[96];
        mm_fmt(step, sizeof step, "bench energy, batch %d", batch);
        watchdog_arm(MM_WATCHDOG_SECONDS, step);
        s = gen_batch(b, cfg, o, batch);
        for (int m = 0; m < MODE_COUNT && s == MM_OK; m++) {
            if (!(o->modes & (1u << m))) continue;
            mm_row *row = rt->rank == 0 ? row_of(res, (mm_mode)m, batch) : NULL;
            double plan[2] = {0, 0}; /* calls (0: not this row), the timed median */
            if (row && (row->status == ROW_OK || row->status == ROW_FAIL) && row->stats.n > 0)
                plan[0] = timing_energy_calls(row->stats.median, o->energy_ms), plan[1] = row->stats.median;
            if (MPI_Bcast(plan, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) s = MM_RUNTIME;
            if (s != MM_OK || plan[0] <= 0) continue;
            step_ctx ctx = step_of(b, (mm_mode)m);
            mm_row scratch;
            memset(&scratch, 0, sizeof scratch);
            s = timing_energy_row(rt, mode_step, &ctx, (int)plan[0], plan[1], o->energy_ms, pw, row ? row : &scratch);
        }
        watchdog_disarm();
    }
    mm_power_close(pw);
    return s;
}

static mm_status write_reports(const mm_options *o, const mm_results *res)
{
    report_text(stdout, res);
    fflush(stdout);
    mm_status s = MM_OK;
    if (o->json_path[0]) s = mm_worse(s, report_json_write(o->json_path, res));
    if (o->markdown_path[0]) {
        FILE *f = fopen(o->markdown_path, "w");
        if (!f) {
            mm_error("markdown %s: cannot write", o->markdown_path);
            s = mm_worse(s, MM_USAGE);
        } else {
            report_markdown(f, res);
            if (fclose(f) != 0) s = mm_worse(s, MM_USAGE);
        }
    }
    return s;
}

/* Worst row status as an exit code: FAIL -> 1, TIMEOUT -> 4, ERROR -> 3; SKIP is not a failure. */
static mm_status rows_status(const mm_results *res)
{
    mm_status s = MM_OK;
    for (int i = 0; i < res->n_rows; i++) s = mm_worse(s, row_status_exit(res->rows[i].status));
    return s;
}

mm_status bench_main(const mm_options *o, const mm_config *model, int argc, char **argv)
{
    bench_state *b = calloc(1, sizeof *b);
    if (!b) return MM_RUNTIME;
    watchdog_arm(MM_WATCHDOG_SECONDS, "start-up (MPI, CUDA, NCCL)");
    int rank = 0, world = 1;
    mm_status s = mpi_start(&rank, &world);
    /* --ep-slice N: the modes see one GPU holding rank 0's E / N experts, whose calls carry up to
     * N x batch tokens; the routing and the floors stay the model's */
    char err[512];
    b->slice = o->ep_slice;
    b->full = model;
    mm_config slice_cfg = *model;
    if (s == MM_OK && b->slice) {
        if (world != 1) {
            if (rank == 0)
                mm_error("bench: --ep-slice %d emulates one rank of EP %d on one GPU: run it without mpirun (or -np 1)",
                         b->slice, b->slice);
            s = MM_USAGE;
        } else if (config_check_ranks(model, b->slice, err, sizeof err) != MM_OK) {
            mm_error("config %s", err);
            s = MM_USAGE;
        }
        slice_cfg.experts = model->experts / b->slice;
    }
    const mm_config *cfg = b->slice ? &slice_cfg : model;
    int max_tokens = largest(o->batches, o->n_batches);
    if (o->max_tokens_per_rank && o->max_tokens_per_rank < max_tokens) max_tokens = o->max_tokens_per_rank;
    const int per_call = b->slice ? b->slice : 1; /* a call's tokens per batch token, at most */
    uint64_t sym = 0;
    for (int m = 0; m < MODE_COUNT && s == MM_OK; m++) {
        const mm_mode_ops *ops = mode_ops((mm_mode)m);
        if (ops->missing || !(o->modes & (1u << m)) || cfg->experts % world) continue;
        b->mode_max[m] = per_call * (m == MODE_LL && o->ll_max < max_tokens ? o->ll_max : max_tokens);
        /* side by side: modes interleave calls row by row, each with its own epochs */
        b->mode_sym[m] = MM_SYM_HEAD_BYTES + sym;
        sym += (ops->sym_bytes(cfg, world, b->mode_max[m]) + 4095) / 4096 * 4096;
    }
    if (s == MM_OK) s = runtime_init(&b->rt, "bench", o->timeout_ms, sym);
    watchdog_disarm();
    mm_runtime *rt = &b->rt;
    if (s == MM_OK && config_check_ranks(cfg, rt->world, err, sizeof err) != MM_OK) {
        if (rt->rank == 0) mm_error("config %s", err);
        s = MM_USAGE;
    }
    mm_results res;
    results_init(&res);
    mm_status res_failed_before = MM_OK; /* worst row status of the earlier --sweeps */
    if (s == MM_OK) rt->comm_sms = o->comm_sms;
    /* a mode whose kernel cannot take this config on these GPUs: SKIP rows, the others run */
    for (int m = 0; m < MODE_COUNT && s == MM_OK; m++) {
        if (!b->mode_max[m]) continue;
        int ok = 1;
        s = modes_supported(mode_ops((mm_mode)m), cfg, rt->world, &ok, b->mode_skip[m], sizeof b->mode_skip[m]);
        if (s == MM_OK && !ok) b->mode_max[m] = 0;
    }
    if (s == MM_OK) {
        b->local_experts = cfg->experts / rt->world;
        b->max_tokens = max_tokens;
        b->run_max = per_call * max_tokens;
        mm_status agreed, local = alloc_inputs(b, cfg, o);
        s = mpi_agree(local, &agreed);
        if (s == MM_OK) s = agreed;
        /* the floors' ceilings, measured on these GPUs before the modes set up their regions of
         * the symmetric buffer (the NVLink write uses them) */
        ceiling_set_defaults(&b->ceil, &o->ceilings, o->ceilings_given);
        /* W1 of the local experts (FP4: their codes) */
        const size_t per_expert = (size_t)2 * cfg->inter * cfg->hidden / (cfg->weights == MM_WEIGHTS_FP4 ? 2 : 1);
        const mm_ceiling_inputs in = {b->w1 + (size_t)rt->rank * b->local_experts * per_expert,
                                      (uint64_t)b->local_experts * per_expert, MM_SYM_HEAD_BYTES, sym};
        if (s == MM_OK) s = ceilings_measure(rt, &in, o->ceilings_given, &b->ceil);
        if (s == MM_OK) s = setup_modes(b, cfg);
    }
    if (s == MM_OK) {
        meta_fill_common(&res.meta, o, model, argc, argv);
        runtime_fill_meta(rt, &res.meta);
        res.meta.ep_slice = b->slice;
        res.meta.has_ceilings = 1;
        res.meta.ceilings = b->ceil;
        s = sweep(b, cfg, o, &res);
    }
    /* --sweeps: again, from the same process and buffers; a failed row of an earlier sweep
     * still decides the exit code */
    for (int rep = 1; s == MM_OK && rep < o->sweeps; rep++) {
        mm_status earlier = rt->rank == 0 ? rows_status(&res) : MM_OK;
        mm_meta meta = res.meta;
        results_free(&res);
        results_init(&res);
        res.meta = meta;
        s = sweep(b, cfg, o, &res);
        res_failed_before = mm_worse(res_failed_before, earlier);
    }
    if (s == MM_OK && o->energy_ms > 0) s = energy_pass(b, cfg, o, &res);
    if (s == MM_OK && rt->rank == 0)
        s = mm_worse(mm_worse(write_reports(o, &res), rows_status(&res)), res_failed_before);
    /* Rank 0's verdict (reports, row statuses) becomes everyone's exit code. */
    if (rt->world > 0) {
        int code = (int)s;
        if (MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD) == MPI_SUCCESS) s = mm_worse(s, (mm_status)code);
    }
    results_free(&res);
    free_inputs(b);
    runtime_destroy(rt);
    free(b);
    mpi_finish();
    return s;
}
