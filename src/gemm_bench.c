/* gemm: the GEMM core alone on one GPU (a kernel lab). For a config's two GEMM shapes and a list
 * of total row counts spread over the local experts of an EP size, it checks our grouped kernel
 * against the GPU reference (double) and times it with L2 flushed between iterations.
 * The cuBLASLt per-expert comparison is not implemented yet: its columns say so. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "datagen_host.h"
#include "runtime.h"
#include "stats.h"

typedef struct {
    int gemm; /* 1: gate/up (N 2I, K H), 2: down (N H, K I) */
    int n, k;
} gemm_shape;

/* Rows per expert: uniform, or skewed (expert e gets a share proportional to 1 / (e + 1)). */
static void spread_rows(int rows, int experts, int skewed, int32_t *count)
{
    if (!skewed) {
        for (int e = 0; e < experts; e++) count[e] = rows / experts + (e < rows % experts);
        return;
    }
    double total = 0;
    for (int e = 0; e < experts; e++) total += 1.0 / (e + 1);
    int given = 0;
    for (int e = 0; e < experts; e++) {
        count[e] = (int)floor(rows * (1.0 / (e + 1)) / total);
        given += count[e];
    }
    count[0] += rows - given;
}

typedef struct {
    uint8_t *w1, *w2;
    float *s1, *s2;
    void *w1_map, *w2_map; /* TMA descriptors of w1, w2 */
    uint16_t *x;
    uint8_t *qa;
    float *sa;
    int32_t *count, *offset, *tiles, *expert_of_row;
    void *out;
    double *ref;
    mm_device_diff *diff;
    void *flush;
    size_t flush_bytes;
} gemm_buffers;

static mm_status check_one(const gemm_buffers *b, mm_grouped_gemm_args g, int rows, int ctas,
                           cudaStream_t st, double *calc)
{
    size_t n_out = (size_t)rows * g.n;
    CUDA_TRY(mm_launch_poison(b->out, n_out * (g.out_fp32 ? 4 : 2), st));
    CUDA_TRY(mm_launch_grouped_gemm(g, ctas, st));
    if (g.out_fp32) CUDA_TRY(mm_launch_compare_f32((const float *)b->out, b->ref, (long long)n_out, b->diff, st));
    else CUDA_TRY(mm_launch_compare((const uint16_t *)b->out, b->ref, (long long)n_out, b->diff, st));
    mm_device_diff d;
    CUDA_TRY(cudaMemcpyAsync(&d, b->diff, sizeof d, cudaMemcpyDeviceToHost, st));
    CUDA_TRY(cudaStreamSynchronize(st));
    *calc = d.sum_aa_bb > 0 ? 1.0 - 2.0 * d.sum_ab / d.sum_aa_bb : 0.0;
    if (d.nonfinite) *calc = INFINITY;
    return MM_OK;
}

static mm_status run_case(const mm_options *o, const mm_config *cfg, const gemm_buffers *b,
                          gemm_shape sh, int rows, int local_experts, int ctas, cudaStream_t st)
{
    int32_t *count = malloc(sizeof(int32_t) * (size_t)local_experts);
    int32_t *offset = malloc(sizeof(int32_t) * (size_t)local_experts);
    int32_t *owner = malloc(sizeof(int32_t) * (size_t)(rows > 0 ? rows : 1));
    if (!count || !offset || !owner) return MM_RUNTIME;
    spread_rows(rows, local_experts, o->skewed, count);
    int at = 0, active = 0;
    for (int e = 0; e < local_experts; e++) {
        offset[e] = at;
        for (int r = 0; r < count[e]; r++) owner[at + r] = e;
        at += count[e];
        active += count[e] > 0;
    }
    CUDA_TRY(cudaMemcpy(b->count, count, sizeof(int32_t) * (size_t)local_experts, cudaMemcpyHostToDevice));
    CUDA_TRY(cudaMemcpy(b->offset, offset, sizeof(int32_t) * (size_t)local_experts, cudaMemcpyHostToDevice));
    CUDA_TRY(cudaMemcpy(b->expert_of_row, owner, sizeof(int32_t) * (size_t)rows, cudaMemcpyHostToDevice));
    int ue8m0 = cfg->scale_fmt == MM_SCALE_UE8M0;
    mm_x_params xp = x_params_default(o->seed + (uint64_t)rows);
    CUDA_TRY(mm_launch_gen_x(xp, 0, rows, sh.k, b->x, st));
    CUDA_TRY(mm_launch_quantize_rows(b->x, rows, sh.k, ue8m0, b->qa, b->sa, st));
    const uint8_t *w = sh.gemm == 1 ? b->w1 : b->w2;
    const void *wmap = sh.gemm == 1 ? b->w1_map : b->w2_map;
    const float *ws = sh.gemm == 1 ? b->s1 : b->s2;
    CUDA_TRY(mm_launch_ref_gemm(b->qa, b->sa, b->expert_of_row, rows, w, ws, sh.n, sh.k, b->ref, st));

    mm_grouped_gemm_args g = {b->qa, b->sa, w, wmap, ws, b->offset, b->count, b->tiles,
                              local_experts, sh.n, sh.k, b->out, 0};
    double calc = 0, calc32 = 0;
    MM_TRY(check_one(b, g, rows, ctas, st, &calc));
    g.out_fp32 = 1;
    MM_TRY(check_one(b, g, rows, ctas, st, &calc32));
    g.out_fp32 = 0;

    int iters = o->iters;
    double *us = malloc(sizeof(double) * (size_t)iters);
    cudaEvent_t *ev = malloc(sizeof(cudaEvent_t) * 2 * (size_t)iters);
    if (!us || !ev) return MM_RUNTIME;
    for (int i = 0; i < 2 * iters; i++) CUDA_TRY(cudaEventCreate(&ev[i]));
    for (int i = -o->warmup; i < iters; i++) {
        if (o->l2_flush) CUDA_TRY(cudaMemsetAsync(b->flush, i & 0xff, b->flush_bytes, st));
        if (i >= 0) CUDA_TRY(cudaEventRecord(ev[2 * i], st));
        CUDA_TRY(mm_launch_grouped_gemm(g, ctas, st));
        if (i >= 0) CUDA_TRY(cudaEventRecord(ev[2 * i + 1], st));
    }
    CUDA_TRY(cudaStreamSynchronize(st));
    for (int i = 0; i < iters; i++) {
        float ms;
        CUDA_TRY(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
        us[i] = ms * 1000.0;
    }
    for (int i = 0; i < 2 * iters; i++) cudaEventDestroy(ev[i]);
    mm_stats s;
    stats_compute(us, iters, &s);
    double flops = 2.0 * rows * (double)sh.n * sh.k;
    double wbytes = (double)active * sh.n * sh.k * (1.0 + 4.0 / 16384.0);
    int ok = calc <= o->tol && calc32 <= o->tol;
    printf("gemm%d %6d x %5d x %5d %8.1f %9.1f %8.1f %9.1f  %9.2e %9.2e  %-4s  %s\n", sh.gemm,
           rows, sh.n, sh.k, (double)rows / local_experts, s.median, flops / s.median / 1e6,
           wbytes / s.median / 1e3, calc, calc32, ok ? "OK" : "FAIL", "not implemented yet");
    fflush(stdout);
    free(us); free(ev); free(count); free(offset); free(owner);
    return ok ? MM_OK : MM_FAIL;
}

mm_status gemm_main(const mm_options *o, const mm_config *cfg)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        mm_error("gemm: no usable CUDA device");
        return MM_USAGE;
    }
    if (cfg->experts % o->ep) {
        mm_error("gemm: %d experts are not divisible by --ep %d", cfg->experts, o->ep);
        return MM_USAGE;
    }
    CUDA_TRY(cudaSetDevice(0));
    CUDA_TRY(mm_grouped_gemm_prepare());
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, 0));
    int el = cfg->experts / o->ep, max_rows = 0;
    for (int i = 0; i < o->n_rows; i++) max_rows = o->rows[i] > max_rows ? o->rows[i] : max_rows;
    size_t h = (size_t)cfg->hidden, in = (size_t)cfg->inter, maxk = h > in ? h : in, maxn = 2 * in > h ? 2 * in : h;
    gemm_buffers b;
    memset(&b, 0, sizeof b);
    cudaStream_t st;
    CUDA_TRY(cudaStreamCreate(&st));
    CUDA_TRY(cudaMalloc((void **)&b.w1, (size_t)el * 2 * in * h));
    CUDA_TRY(cudaMalloc((void **)&b.w2, (size_t)el * h * in));
    CUDA_TRY(cudaMalloc((void **)&b.s1, (size_t)el * (2 * in / 128) * (h / 128) * 4));
    CUDA_TRY(cudaMalloc((void **)&b.s2, (size_t)el * (h / 128) * (in / 128) * 4));
    CUDA_TRY(cudaMalloc((void **)&b.x, (size_t)max_rows * maxk * 2));
    CUDA_TRY(cudaMalloc((void **)&b.qa, (size_t)max_rows * maxk));
    CUDA_TRY(cudaMalloc((void **)&b.sa, (size_t)max_rows * (maxk / 128) * 4));
    CUDA_TRY(cudaMalloc((void **)&b.count, (size_t)el * 4));
    CUDA_TRY(cudaMalloc((void **)&b.offset, (size_t)el * 4));
    CUDA_TRY(cudaMalloc((void **)&b.tiles, (size_t)(el + 1) * 4));
    CUDA_TRY(cudaMalloc((void **)&b.expert_of_row, (size_t)max_rows * 4));
    CUDA_TRY(cudaMalloc(&b.out, (size_t)max_rows * maxn * 4));
    CUDA_TRY(cudaMalloc((void **)&b.ref, (size_t)max_rows * maxn * 8));
    CUDA_TRY(cudaMalloc((void **)&b.diff, sizeof(mm_device_diff)));
    b.flush_bytes = (size_t)prop.l2CacheSize * 5 / 2;
    CUDA_TRY(cudaMalloc(&b.flush, b.flush_bytes));
    CUDA_TRY(mm_launch_gen_weights(o->seed, 0, el, cfg->hidden, cfg->inter,
                                   cfg->scale_fmt == MM_SCALE_UE8M0, b.w1, b.s1, b.w2, b.s2, st));
    CUDA_TRY(mm_weight_map_create(b.w1, (uint64_t)el * 2 * in, h, &b.w1_map));
    CUDA_TRY(mm_weight_map_create(b.w2, (uint64_t)el * h, in, &b.w2_map));
    printf("# megamoe gemm: %s, EP %d (%d local experts), %s, %d CTAs of %d B shared memory, "
           "L2 flush %s, %d iterations\n",
           cfg->name, o->ep, el, prop.name, prop.multiProcessorCount, mm_grouped_gemm_smem_bytes(),
           o->l2_flush ? "on" : "off", o->iters);
    printf("%-5s %-22s %8s %9s %8s %9s  %9s %9s  %-4s  %s\n", "gemm", "rows x N x K", "rows/e",
           "us", "TFLOP/s", "wGB/s", "calc_bf16", "calc_f32", "stat", "vs cuBLASLt");
    mm_status s = MM_OK;
    gemm_shape shapes[2] = {{1, 2 * cfg->inter, cfg->hidden}, {2, cfg->hidden, cfg->inter}};
    for (int gi = 0; gi < 2 && s != MM_RUNTIME; gi++)
        for (int i = 0; i < o->n_rows && s != MM_RUNTIME; i++)
            s = mm_worse(s, run_case(o, cfg, &b, shapes[gi], o->rows[i], el, prop.multiProcessorCount, st));
    cudaFree(b.w1_map); cudaFree(b.w2_map);
    cudaFree(b.w1); cudaFree(b.w2); cudaFree(b.s1); cudaFree(b.s2); cudaFree(b.x); cudaFree(b.qa);
    cudaFree(b.sa); cudaFree(b.count); cudaFree(b.offset); cudaFree(b.tiles);
    cudaFree(b.expert_of_row); cudaFree(b.out); cudaFree(b.ref); cudaFree(b.diff); cudaFree(b.flush);
    cudaStreamDestroy(st);
    return s;
}
