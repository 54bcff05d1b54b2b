/* bench: the sweep. For each batch (tokens per rank) the requested modes run one after another in
 * this process, on the same generated inputs, so every speedup is a ratio measured in one run.
 *
 * Flow: runtime up -> inputs for the largest batch and every local expert's weights generated on
 * the GPU -> per batch: generate x and routing for this rank's global tokens -> per mode: time it
 * (or SKIP with the reason) -> tables, JSON and Markdown from rank 0. */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "datagen_host.h"
#include "launch.h"
#include "plan.h"
#include "report.h"
#include "runtime.h"
#include "timing.h"

#ifndef MM_GIT_REV
#define MM_GIT_REV "unknown"
#endif

/* Why a mode cannot run yet; NULL once it exists. The sweep reports SKIP with this note and never
 * a number. */
static const char *mode_missing(mm_mode m)
{
    (void)m;
    return "not implemented";
}

typedef struct {
    mm_runtime rt;
    int max_tokens;
    int local_experts;
    /* this rank's inputs, sized for max_tokens */
    uint16_t *x;
    int32_t *topk_ids;
    float *topk_w;
    /* local experts' weights */
    uint8_t *w1, *w2;
    float *w1_scale, *w2_scale;
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
    if (cfg->has_swiglu_limit) mm_fmt(m->swiglu_limit, sizeof m->swiglu_limit, "%g", cfg->swiglu_limit);
    else mm_fmt(m->swiglu_limit, sizeof m->swiglu_limit, "none");
    routing_format(&o->routing, m->routing, sizeof m->routing);
    m->seed = o->seed;
    m->warmup = o->warmup;
    m->iters = o->iters;
    m->graph = o->graph;
    m->l2_flush = o->l2_flush;
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
    size_t x_bytes = (size_t)b->max_tokens * cfg->hidden * 2;
    size_t k_bytes = (size_t)b->max_tokens * cfg->topk * 4;
    double per_expert = plan_expert_weight_bytes(cfg);
    size_t w_bytes = (size_t)(per_expert * b->local_experts);
    MM_TRY(runtime_check_fit(rt, "inputs and local expert weights", x_bytes + 2 * k_bytes + w_bytes));
    CUDA_TRY(cudaMalloc((void **)&b->x, x_bytes > 0 ? x_bytes : 16));
    CUDA_TRY(cudaMalloc((void **)&b->topk_ids, k_bytes > 0 ? k_bytes : 16));
    CUDA_TRY(cudaMalloc((void **)&b->topk_w, k_bytes > 0 ? k_bytes : 16));
    size_t h = (size_t)cfg->hidden, i = (size_t)cfg->inter, el = (size_t)b->local_experts;
    CUDA_TRY(cudaMalloc((void **)&b->w1, el * 2 * i * h));
    CUDA_TRY(cudaMalloc((void **)&b->w2, el * h * i));
    CUDA_TRY(cudaMalloc((void **)&b->w1_scale, el * (2 * i / 128) * (h / 128) * 4));
    CUDA_TRY(cudaMalloc((void **)&b->w2_scale, el * (h / 128) * (i / 128) * 4));

    cudaEvent_t t0, t1;
    CUDA_TRY(cudaEventCreate(&t0));
    CUDA_TRY(cudaEventCreate(&t1));
    CUDA_TRY(cudaEventRecord(t0, rt->stream));
    CUDA_TRY(mm_launch_gen_weights(o->seed, rt->rank * b->local_experts, b->local_experts,
                                   cfg->hidden, cfg->inter, cfg->scale_fmt == MM_SCALE_UE8M0,
                                   b->w1, b->w1_scale, b->w2, b->w2_scale, rt->stream));
    CUDA_TRY(cudaEventRecord(t1, rt->stream));
    CUDA_TRY(cudaStreamSynchronize(rt->stream));
    float ms = 0;
    CUDA_TRY(cudaEventElapsedTime(&ms, t0, t1));
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    if (rt->rank == 0)
        fprintf(stderr, "megamoe: generated %d local experts' weights (%.2f GB) in %.1f ms\n",
                b->local_experts, per_expert * b->local_experts / 1e9, ms);

    MM_TRY(route_tables_make(&o->routing, cfg->experts, o->seed, &b->tables));
    CUDA_TRY(cudaMalloc((void **)&b->zipf_cdf_dev, sizeof(uint32_t) * (size_t)cfg->experts));
    CUDA_TRY(cudaMalloc((void **)&b->softplus_dev, sizeof b->tables.softplus));
    CUDA_TRY(cudaMemcpy(b->zipf_cdf_dev, b->tables.zipf_cdf, sizeof(uint32_t) * (size_t)cfg->experts,
                        cudaMemcpyHostToDevice));
    CUDA_TRY(cudaMemcpy(b->softplus_dev, b->tables.softplus, sizeof b->tables.softplus,
                        cudaMemcpyHostToDevice));
    b->route = route_params(&o->routing, cfg, rt->world, o->seed, b->zipf_cdf_dev,
                            b->tables.zipf_mult, b->softplus_dev);
    return MM_OK;
}

static void free_inputs(bench_state *b)
{
    cudaFree(b->x);
    cudaFree(b->topk_ids);
    cudaFree(b->topk_w);
    cudaFree(b->w1);
    cudaFree(b->w2);
    cudaFree(b->w1_scale);
    cudaFree(b->w2_scale);
    cudaFree(b->zipf_cdf_dev);
    cudaFree(b->softplus_dev);
    route_tables_free(&b->tables);
}

/* This rank's tokens of a batch are global tokens [rank * batch, (rank + 1) * batch). */
static mm_status gen_batch(bench_state *b, const mm_config *cfg, const mm_options *o, int batch)
{
    mm_runtime *rt = &b->rt;
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

static mm_status sweep(bench_state *b, const mm_config *cfg, const mm_options *o, mm_results *res)
{
    mm_runtime *rt = &b->rt;
    mm_ceilings ceil = {MM_DEFAULT_HBM_GBPS, MM_DEFAULT_NVLINK_GBPS, MM_DEFAULT_FP8_TFLOPS};
    for (int bi = 0; bi < o->n_batches; bi++) {
        int batch = o->batches[bi];
        int fits = batch <= b->max_tokens;
        char step[96];
        mm_fmt(step, sizeof step, "bench batch %d", batch);
        watchdog_arm(MM_WATCHDOG_SECONDS, step);
        if (fits) MM_TRY(gen_batch(b, cfg, o, batch));
        mm_floor fl;
        plan_floor(cfg, rt->world, batch, &ceil, &fl);
        for (int m = 0; m < MODE_COUNT; m++) {
            if (!(o->modes & (1u << m))) continue;
            mm_row row;
            memset(&row, 0, sizeof row);
            row.mode = (mm_mode)m;
            row.batch = batch;
            row.nranks = rt->world;
            row.weight_bytes = fl.weight_bytes;
            row.nvlink_bytes = fl.nvlink_bytes;
            row.flops = fl.flops;
            row.floor_us = fl.floor_us;
            row.status = ROW_SKIP;
            if (!fits)
                mm_fmt(row.note, sizeof row.note, "batch above the buffers' %d tokens per rank "
                       "(--max-tokens-per-rank)", b->max_tokens);
            else if (m == MODE_LL && batch > o->ll_max)
                mm_fmt(row.note, sizeof row.note, "above the ll cap of %d tokens per rank "
                       "(--ll-max)", o->ll_max);
            else
                mm_fmt(row.note, sizeof row.note, "%s", mode_missing((mm_mode)m));
            if (rt->rank == 0) {
                const mm_row *added = results_add(res, &row, NULL, 0);
                if (!added) return MM_RUNTIME;
                report_progress(stderr, added);
            }
        }
        watchdog_disarm();
    }
    return MM_OK;
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
    for (int i = 0; i < res->n_rows; i++) {
        switch (res->rows[i].status) {
        case ROW_FAIL: s = mm_worse(s, MM_FAIL); break;
        case ROW_TIMEOUT: s = mm_worse(s, MM_TIMEOUT); break;
        case ROW_ERROR: s = mm_worse(s, MM_RUNTIME); break;
        default: break;
        }
    }
    return s;
}

mm_status bench_main(const mm_options *o, const mm_config *cfg, int argc, char **argv)
{
    bench_state *b = calloc(1, sizeof *b);
    if (!b) return MM_RUNTIME;
    watchdog_arm(MM_WATCHDOG_SECONDS, "start-up (MPI, CUDA, NCCL)");
    mm_status s = runtime_init(&b->rt, o->timeout_ms, 0);
    watchdog_disarm();
    mm_runtime *rt = &b->rt;
    char err[512];
    if (s == MM_OK && config_check_ranks(cfg, rt->world, err, sizeof err) != MM_OK) {
        if (rt->rank == 0) mm_error("config %s", err);
        s = MM_USAGE;
    }
    mm_results res;
    results_init(&res);
    if (s == MM_OK) {
        b->local_experts = cfg->experts / rt->world;
        b->max_tokens = largest(o->batches, o->n_batches);
        if (o->max_tokens_per_rank && o->max_tokens_per_rank < b->max_tokens)
            b->max_tokens = o->max_tokens_per_rank;
        mm_status agreed, local = alloc_inputs(b, cfg, o);
        s = mpi_agree(local, &agreed);
        if (s == MM_OK) s = agreed;
    }
    if (s == MM_OK) {
        meta_fill_common(&res.meta, o, cfg, argc, argv);
        runtime_fill_meta(rt, &res.meta);
        s = sweep(b, cfg, o, &res);
    }
    if (s == MM_OK && rt->rank == 0) s = mm_worse(write_reports(o, &res), rows_status(&res));
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
