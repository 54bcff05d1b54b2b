/* selftest: the GPU runtime's own tests, run by scripts/gpu-check.sh under mpirun.
 *
 *   roundtrip   every rank stores a rank-tagged pattern into every peer's symmetric buffer, meets
 *               the others at the device barrier, and verifies what its peers stored into its own
 *   barrier     timed back-to-back device barriers (the line-up every timed iteration starts with)
 *   stall       the last rank skips one line-up barrier, as a hung peer would: the others must
 *               report TIMEOUT naming the phase and that rank, and nobody may hang
 *   recover     the same timing loop right after, which must pass again (the sweep goes on)
 *   graph       the timing loop replaying a captured CUDA graph
 *   gridsync    1000 grid-wide syncs of a persistent grid (one CTA per SM), all arrivals
 *               visible after each; then one CTA never arrives and the others must time out
 *   generators  x, every routing generator and expert weights from the GPU equal the host's bits
 *   fp8-hw      the recipe's FP8 encoder against the hardware conversion on every midpoint,
 *               specials and random values (MEGAMOE_FP8_TABLE=path writes the table the CPU tests
 *               read: tests/data/fp8_e4m3_hw.txt)
 *   swiglu-gpu  the kernels' SwiGLU (approximate exp2 and reciprocal on the GPU) against the
 *               formula in double: relative error <= 4e-6 (the CPU tests' bound for the host's)
 *   weights     all local experts of the config generated on the GPU, timed */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "datagen_host.h"
#include "launch.h"
#include "reference.h"
#include "runtime.h"
#include "timing.h"

#define ROUNDTRIP_OFFSET (MM_SIGNAL_WORDS * 8)
#define ROUNDTRIP_WORDS 4096 /* per rank: 8 ranks * 32 KiB stays inside the 64 KiB head */

typedef struct {
    int failed;
    int passed;
} tally;

static void verdict(const mm_runtime *rt, tally *t, const char *name, int ok, const char *detail)
{
    if (ok) t->passed++;
    else t->failed++;
    if (rt->rank == 0) printf("%-12s %-5s %s\n", name, ok ? "PASS" : "FAIL", detail);
    fflush(stdout);
}

static mm_status test_roundtrip(mm_runtime *rt, tally *t)
{
    unsigned long long *bad_dev = NULL, bad = 0;
    CUDA_TRY(cudaMalloc((void **)&bad_dev, sizeof bad));
    CUDA_TRY(cudaMemsetAsync(bad_dev, 0, sizeof bad, rt->stream));
    CUDA_TRY(mm_launch_roundtrip_write(rt->comm, ROUNDTRIP_OFFSET, ROUNDTRIP_WORDS, rt->stream));
    MM_TRY(runtime_device_barrier(rt));
    CUDA_TRY(mm_launch_roundtrip_verify(rt->comm, ROUNDTRIP_OFFSET, ROUNDTRIP_WORDS, bad_dev,
                                        rt->stream));
    CUDA_TRY(cudaStreamSynchronize(rt->stream));
    CUDA_TRY(cudaMemcpy(&bad, bad_dev, sizeof bad, cudaMemcpyDeviceToHost));
    CUDA_TRY(cudaFree(bad_dev));
    char what[256];
    mm_status waited = runtime_wait_status(rt, what, sizeof what);
    long long total = 0, mine = (long long)bad + (waited != MM_OK);
    MPI_TRY(MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
    char detail[160];
    mm_fmt(detail, sizeof detail, "%d ranks x %d words each way, %lld mismatching words%s",
           rt->world, ROUNDTRIP_WORDS, total, waited != MM_OK ? " (barrier timed out)" : "");
    verdict(rt, t, "roundtrip", total == 0, detail);
    if (waited != MM_OK) MM_TRY(runtime_reset_comm(rt));
    return MM_OK;
}

/* The timed step of the barrier tests: one more device barrier. */
static mm_status barrier_step(void *ctx, cudaStream_t stream)
{
    (void)stream;
    return runtime_device_barrier((mm_runtime *)ctx);
}

static mm_status test_barrier_rows(mm_runtime *rt, tally *t)
{
    mm_timing timing = {.warmup = 10, .iters = 200, .l2_flush = 0, .graph = 0, .stall_iter = -1};
    double *samples = calloc(200, sizeof(double));
    if (!samples) return MM_RUNTIME;
    mm_row row;
    char detail[300];

    memset(&row, 0, sizeof row);
    MM_TRY(timing_run_row(rt, barrier_step, rt, &timing, &row, samples));
    int ok = 1;
    if (rt->rank == 0) {
        ok = row.status == ROW_OK;
        mm_fmt(detail, sizeof detail, "%d timed device barriers: median %.2f us, p90 %.2f us",
               timing.iters, row.stats.median, row.stats.p90);
    }
    MPI_TRY(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
    verdict(rt, t, "barrier", ok, detail);

    if (rt->world > 1) {
        memset(&row, 0, sizeof row);
        mm_timing stall = timing;
        stall.iters = 20;
        stall.stall_iter = rt->rank == rt->world - 1 ? 5 : -1;
        MM_TRY(timing_run_row(rt, barrier_step, rt, &stall, &row, samples));
        if (rt->rank == 0) {
            char expect[64];
            mm_fmt(expect, sizeof expect, "waiting for rank %d", rt->world - 1);
            ok = row.status == ROW_TIMEOUT && strstr(row.note, "barrier") &&
                 strstr(row.note, expect);
            mm_fmt(detail, sizeof detail, "status %s: %s", row_status_name(row.status), row.note);
        }
        MPI_TRY(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
        verdict(rt, t, "stall", ok, detail);

        memset(&row, 0, sizeof row);
        MM_TRY(timing_run_row(rt, barrier_step, rt, &timing, &row, samples));
        if (rt->rank == 0) {
            ok = row.status == ROW_OK;
            mm_fmt(detail, sizeof detail, "status %s after the reset, median %.2f us",
                   row_status_name(row.status), row.stats.median);
        }
        MPI_TRY(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
        verdict(rt, t, "recover", ok, detail);
    } else {
        if (rt->rank == 0) printf("%-12s %-5s %s\n", "stall", "SKIP", "needs 2 or more ranks");
    }

    /* The same loop with the step captured once into a CUDA graph and replayed. */
    memset(&row, 0, sizeof row);
    mm_timing graph = timing;
    graph.graph = 1;
    MM_TRY(timing_run_row(rt, barrier_step, rt, &graph, &row, samples));
    if (rt->rank == 0) {
        ok = row.status == ROW_OK && row.ranks_timed == rt->world;
        mm_fmt(detail, sizeof detail, "status %s, %d graph replays: median %.2f us",
               row_status_name(row.status), graph.iters, row.stats.median);
    }
    MPI_TRY(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
    verdict(rt, t, "graph", ok, detail);
    free(samples);
    return MM_OK;
}

static mm_status test_grid_sync(mm_runtime *rt, tally *t)
{
    unsigned int *scratch = NULL, host[3];
    CUDA_TRY(cudaMalloc((void **)&scratch, sizeof host));
    cudaEvent_t a, b;
    CUDA_TRY(cudaEventCreate(&a));
    CUDA_TRY(cudaEventCreate(&b));
    const int rounds = 1000;
    CUDA_TRY(cudaEventRecord(a, rt->stream));
    CUDA_TRY(mm_launch_grid_sync_test(rt->comm, rt->sm_count, scratch, rounds, -1, rt->stream));
    CUDA_TRY(cudaEventRecord(b, rt->stream));
    CUDA_TRY(cudaStreamSynchronize(rt->stream));
    float ms = 0;
    CUDA_TRY(cudaEventElapsedTime(&ms, a, b));
    CUDA_TRY(cudaMemcpy(host, scratch, sizeof host, cudaMemcpyDeviceToHost));
    char what[256], detail[300];
    mm_status waited = runtime_wait_status(rt, what, sizeof what);
    int ok = waited == MM_OK && host[2] == 0 && host[1] == (unsigned)(rounds * rt->sm_count);
    mm_fmt(detail, sizeof detail, "%d CTAs x %d syncs: %.2f us per sync, %u visibility errors%s%s",
           rt->sm_count, rounds, ms * 1000.0 / rounds, host[2], waited ? ": " : "", what);
    int all_ok = 0;
    MPI_TRY(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    verdict(rt, t, "gridsync", all_ok, detail);
    if (waited != MM_OK) MM_TRY(runtime_reset_comm(rt));

    /* one CTA missing: every other CTA's wait must expire and name the phase */
    CUDA_TRY(mm_launch_grid_sync_test(rt->comm, rt->sm_count, scratch, rounds, 7, rt->stream));
    CUDA_TRY(cudaStreamSynchronize(rt->stream));
    waited = runtime_wait_status(rt, what, sizeof what);
    ok = waited == MM_TIMEOUT && strstr(what, "grid-sync") != NULL;
    mm_fmt(detail, sizeof detail, "%s", what[0] ? what : "no timeout reported");
    MPI_TRY(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    verdict(rt, t, "gridsync-stall", all_ok, detail);
    MM_TRY(runtime_reset_comm(rt));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    CUDA_TRY(cudaFree(scratch));
    return MM_OK;
}

/* GPU vs host, bit for bit: x for 64 tokens, every routing generator for 512 tokens, and two
 * experts' weights at the config's shape. Each rank checks its own global slice. */
static mm_status test_generators(mm_runtime *rt, const mm_config *cfg, uint64_t seed, tally *t)
{
    const int tokens = 512, xt = 64;
    int h = cfg->hidden, in = cfg->inter, k = cfg->topk;
    uint64_t first = (uint64_t)rt->rank * tokens;
    long long mismatches = 0;
    char detail[256] = "";

    uint16_t *x_dev, *x_gpu = malloc((size_t)xt * h * 2), *x_host = malloc((size_t)xt * h * 2);
    CUDA_TRY(cudaMalloc((void **)&x_dev, (size_t)xt * h * 2));
    CUDA_TRY(mm_launch_gen_x(x_params_default(seed), first, xt, h, x_dev, rt->stream));
    CUDA_TRY(cudaStreamSynchronize(rt->stream));
    CUDA_TRY(cudaMemcpy(x_gpu, x_dev, (size_t)xt * h * 2, cudaMemcpyDeviceToHost));
    host_gen_x(x_params_default(seed), first, xt, h, x_host);
    long long bad_x = 0;
    for (size_t i = 0; i < (size_t)xt * h; i++) bad_x += x_gpu[i] != x_host[i];
    mismatches += bad_x;
    cudaFree(x_dev);
    free(x_gpu);
    free(x_host);

    int32_t *ids_dev, *ids_gpu = malloc((size_t)tokens * k * 4), *ids_host = malloc((size_t)tokens * k * 4);
    float *w_dev, *w_gpu = malloc((size_t)tokens * k * 4), *w_host = malloc((size_t)tokens * k * 4);
    CUDA_TRY(cudaMalloc((void **)&ids_dev, (size_t)tokens * k * 4));
    CUDA_TRY(cudaMalloc((void **)&w_dev, (size_t)tokens * k * 4));
    uint32_t *cdf_dev;
    float *sp_dev;
    CUDA_TRY(cudaMalloc((void **)&cdf_dev, (size_t)cfg->experts * 4));
    CUDA_TRY(cudaMalloc((void **)&sp_dev, MM_SOFTPLUS_LEVELS * 4));
    long long bad_route = 0;
    for (int kind = 0; kind < ROUTE_COUNT; kind++) {
        mm_routing r = {(mm_routing_kind)kind, kind == ROUTE_ZIPF ? 1.2 : kind == ROUTE_MASKED ? 0.3 : 0.9};
        mm_route_tables tab;
        MM_TRY(route_tables_make(&r, cfg->experts, seed, &tab));
        CUDA_TRY(cudaMemcpy(cdf_dev, tab.zipf_cdf, (size_t)cfg->experts * 4, cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(sp_dev, tab.softplus, sizeof tab.softplus, cudaMemcpyHostToDevice));
        mm_route_params pd = route_params(&r, cfg, rt->world, seed, cdf_dev, tab.zipf_mult, sp_dev);
        mm_route_params ph = route_params(&r, cfg, rt->world, seed, tab.zipf_cdf, tab.zipf_mult,
                                          tab.softplus);
        CUDA_TRY(mm_launch_gen_routing(pd, first, tokens, ids_dev, w_dev, rt->stream));
        CUDA_TRY(cudaStreamSynchronize(rt->stream));
        CUDA_TRY(cudaMemcpy(ids_gpu, ids_dev, (size_t)tokens * k * 4, cudaMemcpyDeviceToHost));
        CUDA_TRY(cudaMemcpy(w_gpu, w_dev, (size_t)tokens * k * 4, cudaMemcpyDeviceToHost));
        host_gen_routing(&ph, first, tokens, ids_host, w_host);
        bad_route += memcmp(ids_gpu, ids_host, (size_t)tokens * k * 4) != 0;
        bad_route += memcmp(w_gpu, w_host, (size_t)tokens * k * 4) != 0;
        route_tables_free(&tab);
    }
    mismatches += bad_route;
    cudaFree(ids_dev);
    cudaFree(w_dev);
    cudaFree(cdf_dev);
    cudaFree(sp_dev);
    free(ids_gpu); free(ids_host); free(w_gpu); free(w_host);

    /* Two experts of this rank's range. */
    size_t w1n = (size_t)2 * in * h, w2n = (size_t)h * in;
    size_t s1n = w1n / 16384, s2n = w2n / 16384;
    uint8_t *w1d, *w2d;
    float *s1d, *s2d;
    CUDA_TRY(cudaMalloc((void **)&w1d, 2 * w1n));
    CUDA_TRY(cudaMalloc((void **)&w2d, 2 * w2n));
    CUDA_TRY(cudaMalloc((void **)&s1d, 2 * s1n * 4));
    CUDA_TRY(cudaMalloc((void **)&s2d, 2 * s2n * 4));
    int e0 = rt->rank * (cfg->experts / rt->world);
    int ue8m0 = cfg->scale_fmt == MM_SCALE_UE8M0;
    CUDA_TRY(mm_launch_gen_weights(seed, e0, 2, h, in, ue8m0, w1d, s1d, w2d, s2d, rt->stream));
    CUDA_TRY(cudaStreamSynchronize(rt->stream));
    uint8_t *g1 = malloc(w1n), *g2 = malloc(w2n), *h1 = malloc(w1n), *h2 = malloc(w2n);
    float *gs1 = malloc(s1n * 4), *gs2 = malloc(s2n * 4), *hs1 = malloc(s1n * 4), *hs2 = malloc(s2n * 4);
    long long bad_w = 0;
    for (int e = 0; e < 2 && cfg->experts / rt->world > e; e++) {
        CUDA_TRY(cudaMemcpy(g1, w1d + e * w1n, w1n, cudaMemcpyDeviceToHost));
        CUDA_TRY(cudaMemcpy(g2, w2d + e * w2n, w2n, cudaMemcpyDeviceToHost));
        CUDA_TRY(cudaMemcpy(gs1, s1d + e * s1n, s1n * 4, cudaMemcpyDeviceToHost));
        CUDA_TRY(cudaMemcpy(gs2, s2d + e * s2n, s2n * 4, cudaMemcpyDeviceToHost));
        host_gen_expert(seed, e0 + e, h, in, ue8m0, h1, hs1, h2, hs2);
        bad_w += memcmp(g1, h1, w1n) != 0;
        bad_w += memcmp(g2, h2, w2n) != 0;
        bad_w += memcmp(gs1, hs1, s1n * 4) != 0;
        bad_w += memcmp(gs2, hs2, s2n * 4) != 0;
    }
    mismatches += bad_w;
    free(g1); free(g2); free(h1); free(h2); free(gs1); free(gs2); free(hs1); free(hs2);
    cudaFree(w1d); cudaFree(w2d); cudaFree(s1d); cudaFree(s2d);

    long long total = 0;
    MPI_TRY(MPI_Allreduce(&mismatches, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
    mm_fmt(detail, sizeof detail,
           "rank 0: %lld x values, %lld routing arrays (of %d), %lld weight arrays differ; all "
           "ranks: %lld",
           bad_x, bad_route, 2 * ROUTE_COUNT, bad_w, total);
    verdict(rt, t, "generators", total == 0, detail);
    return MM_OK;
}

/* Inputs that decide an encoder: every code's value and the midpoints to its neighbour (exact and
 * one ulp either side), both signs, specials, and random floats over the whole useful range. */
static int fp8_inputs(float *v, int cap)
{
    int n = 0;
    for (int c = 0; c < 0x7f; c++) {
        float a = mm_fp8_decode((uint8_t)c), b = mm_fp8_decode((uint8_t)(c + 1));
        float mid = (a + b) / 2; /* exact: both have few mantissa bits */
        float set[4] = {a, mid, nextafterf(mid, 0.0f), nextafterf(mid, 1e9f)};
        for (int j = 0; j < 4 && n + 2 <= cap; j++) {
            v[n++] = set[j];
            v[n++] = -set[j];
        }
    }
    float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 448.0f, 464.0f, 479.0f, 480.0f,
                        1e30f, -1e30f, 1.0f / 1024, 1.0f / 2048, 3.0f / 1024, 1e-30f, 1e-45f};
    for (size_t j = 0; j < sizeof specials / sizeof specials[0] && n < cap; j++) v[n++] = specials[j];
    uint64_t h = 12345;
    while (n < cap) {
        h = mm_mix64(h + 1);
        int e = (int)(h % 40) - 24; /* 2^-24 .. 2^15 */
        float m = 1.0f + (float)((h >> 8) & 0xffffff) / 16777216.0f;
        v[n++] = ((h >> 40) & 1 ? -m : m) * ldexpf(1.0f, e);
    }
    return n;
}

static mm_status test_fp8_hardware(mm_runtime *rt, tally *t)
{
    enum { N = 20000 };
    float *in = malloc(sizeof(float) * N);
    uint8_t *hw = malloc(N), *ours = malloc(N);
    if (!in || !hw || !ours) return MM_RUNTIME;
    int n = fp8_inputs(in, N);
    float *d_in;
    uint8_t *d_hw, *d_ours;
    CUDA_TRY(cudaMalloc((void **)&d_in, sizeof(float) * N));
    CUDA_TRY(cudaMalloc((void **)&d_hw, N));
    CUDA_TRY(cudaMalloc((void **)&d_ours, N));
    CUDA_TRY(cudaMemcpy(d_in, in, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice));
    CUDA_TRY(mm_launch_fp8_compare(d_in, n, d_hw, d_ours, rt->stream));
    CUDA_TRY(cudaStreamSynchronize(rt->stream));
    CUDA_TRY(cudaMemcpy(hw, d_hw, (size_t)n, cudaMemcpyDeviceToHost));
    CUDA_TRY(cudaMemcpy(ours, d_ours, (size_t)n, cudaMemcpyDeviceToHost));
    int bad_gpu = 0, bad_host = 0, first = -1;
    for (int i = 0; i < n; i++) {
        int nan_in = isnan(in[i]);
        /* NaN: any NaN code is right (the sign of a NaN is not meaningful) */
        int same = nan_in ? ((hw[i] & 0x7f) == 0x7f && (ours[i] & 0x7f) == 0x7f) : hw[i] == ours[i];
        int same_host = nan_in ? (mm_fp8_encode(in[i]) & 0x7f) == 0x7f : hw[i] == mm_fp8_encode(in[i]);
        bad_gpu += !same;
        bad_host += !same_host;
        if ((!same || !same_host) && first < 0) first = i;
    }
    const char *path = getenv("MEGAMOE_FP8_TABLE");
    if (path && rt->rank == 0) {
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "# float bits -> FP8 e4m3 code from __nv_cvt_float_to_fp8(x, __NV_SATFINITE, "
                       "__NV_E4M3) on %s, CUDA %s\n", rt->gpu_name, rt->cuda);
            for (int i = 0; i < n; i++) fprintf(f, "%08x %02x\n", mm_f32_bits(in[i]), hw[i]);
            fclose(f);
        }
    }
    char detail[200];
    mm_fmt(detail, sizeof detail, "%d inputs: %d differ on the GPU, %d on the host%s", n, bad_gpu,
           bad_host, first >= 0 ? " (see the first: input bits below)" : "");
    if (first >= 0 && rt->rank == 0)
        printf("  first difference: input %08x, hardware %02x, ours %02x\n", mm_f32_bits(in[first]),
               hw[first], ours[first]);
    verdict(rt, t, "fp8-hw", bad_gpu == 0 && bad_host == 0, detail);
    cudaFree(d_in); cudaFree(d_hw); cudaFree(d_ours);
    free(in); free(hw); free(ours);
    return MM_OK;
}

/* The inputs, formula and bound of tests/test_recipe.c's swiglu_against_double (ref_swiglu_*),
 * with and without a limit of 7, on the GPU's SwiGLU. */
static mm_status test_swiglu_gpu(mm_runtime *rt, tally *t)
{
    enum { N = 200000 };
    const float limit = 7.0f;
    float *host = malloc(sizeof(float) * 4 * N);
    if (!host) return MM_RUNTIME;
    float *g = host, *u = host + N, *w = host + 2 * N, *h = host + 3 * N;
    uint64_t rng = 99;
    for (int i = 0; i < N; i++) ref_swiglu_input(&rng, &g[i], &u[i], &w[i]);
    float *dev = NULL;
    CUDA_TRY(cudaMalloc((void **)&dev, sizeof(float) * 4 * N));
    CUDA_TRY(cudaMemcpy(dev, host, sizeof(float) * 3 * N, cudaMemcpyHostToDevice));
    int bad = 0;
    double worst = 0.0;
    for (int has_limit = 0; has_limit < 2; has_limit++) {
        CUDA_TRY(mm_launch_swiglu_eval(dev, dev + N, dev + 2 * N, N, has_limit, limit, dev + 3 * N, rt->stream));
        CUDA_TRY(cudaStreamSynchronize(rt->stream));
        CUDA_TRY(cudaMemcpy(h, dev + 3 * N, sizeof(float) * N, cudaMemcpyDeviceToHost));
        for (int i = 0; i < N; i++) {
            double ref = ref_swiglu(g[i], u[i], w[i], has_limit, limit);
            const double err = fabs((double)h[i] - ref);
            bad += !ref_swiglu_close(h[i], ref);
            if (fabs(ref) > 1e-30 && err / fabs(ref) > worst) worst = err / fabs(ref);
        }
    }
    cudaFree(dev);
    free(host);
    char detail[160];
    mm_fmt(detail, sizeof detail, "%d inputs x 2: %d beyond 4e-6 relative, worst %.2e", N, bad, worst);
    verdict(rt, t, "swiglu-gpu", bad == 0, detail);
    return MM_OK;
}

static mm_status test_weight_speed(mm_runtime *rt, const mm_config *cfg, uint64_t seed, tally *t)
{
    int el = cfg->experts / rt->world;
    size_t h = (size_t)cfg->hidden, in = (size_t)cfg->inter;
    size_t bytes = (size_t)el * 3 * h * in + (size_t)el * 3 * (h / 128) * (in / 128) * 4;
    MM_TRY(runtime_check_fit(rt, "all local experts' weights", bytes));
    uint8_t *w1, *w2;
    float *s1, *s2;
    CUDA_TRY(cudaMalloc((void **)&w1, (size_t)el * 2 * in * h));
    CUDA_TRY(cudaMalloc((void **)&w2, (size_t)el * h * in));
    CUDA_TRY(cudaMalloc((void **)&s1, (size_t)el * (2 * in / 128) * (h / 128) * 4));
    CUDA_TRY(cudaMalloc((void **)&s2, (size_t)el * (h / 128) * (in / 128) * 4));
    cudaEvent_t a, b;
    CUDA_TRY(cudaEventCreate(&a));
    CUDA_TRY(cudaEventCreate(&b));
    CUDA_TRY(cudaEventRecord(a, rt->stream));
    CUDA_TRY(mm_launch_gen_weights(seed, rt->rank * el, el, (int)h, (int)in,
                                   cfg->scale_fmt == MM_SCALE_UE8M0, w1, s1, w2, s2, rt->stream));
    CUDA_TRY(cudaEventRecord(b, rt->stream));
    CUDA_TRY(cudaStreamSynchronize(rt->stream));
    float ms = 0;
    CUDA_TRY(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaFree(w1); cudaFree(w2); cudaFree(s1); cudaFree(s2);
    char detail[160];
    mm_fmt(detail, sizeof detail, "%s: %d experts per rank, %.2f GB in %.1f ms", cfg->name, el,
           bytes / 1e9, ms);
    verdict(rt, t, "weights", ms < 60000.0f, detail);
    return MM_OK;
}

mm_status selftest_main(const mm_options *o, const mm_config *cfg, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    mm_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return MM_RUNTIME;
    watchdog_arm(MM_WATCHDOG_SECONDS, "selftest");
    mm_status s = runtime_init(rt, "selftest", o->timeout_ms, 0);
    char err[512];
    if (s == MM_OK && config_check_ranks(cfg, rt->world, err, sizeof err) != MM_OK) {
        if (rt->rank == 0) mm_error("config %s", err);
        s = MM_USAGE;
    }
    tally t = {0, 0};
    if (s == MM_OK) {
        if (rt->rank == 0) {
            printf("# megamoe selftest: %d rank(s), %s, config %s, timeout %d ms\n", rt->world,
                   rt->gpu_name, cfg->name, o->timeout_ms);
            for (int r = 0; r < rt->world; r++) printf("# %s\n", rt->rank_lines[r]);
        }
        s = test_roundtrip(rt, &t);
        if (s == MM_OK) s = test_barrier_rows(rt, &t);
        if (s == MM_OK) s = test_grid_sync(rt, &t);
        if (s == MM_OK) s = test_generators(rt, cfg, o->seed, &t);
        if (s == MM_OK) s = test_fp8_hardware(rt, &t);
        if (s == MM_OK) s = test_swiglu_gpu(rt, &t);
        if (s == MM_OK) s = test_weight_speed(rt, cfg, o->seed, &t);
        if (s == MM_OK && rt->rank == 0)
            printf("selftest: %d passed, %d failed\n", t.passed, t.failed);
        if (s == MM_OK && t.failed) s = MM_FAIL;
    }
    watchdog_disarm();
    runtime_destroy(rt);
    free(rt);
    mpi_finish();
    return s;
}
