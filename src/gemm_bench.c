/* gemm: the GEMM core alone on one GPU (a kernel lab). For a config's two GEMM shapes and a list
 * of total row counts spread over the local experts of an EP size, it checks our grouped kernel
 * against the GPU reference (double), times it with L2 flushed between iterations, and runs the
 * same problem as a loop of cuBLASLt block-scaled FP8 matmuls, one per active expert
 * (gemm_cublaslt.c), timed the same way, with the calc_diff between the two outputs. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "../kernels/fp4.h"
#include "../kernels/gemm_schedule.h"
#include "datagen_host.h"
#include "gemm_cublaslt.h"
#include "gemm_report.h"
#include "plan.h"
#include "power.h"
#include "runtime.h"
#include "stats.h"
#include "timing.h"

typedef struct {
    int gemm; /* 1: gate/up (N 2I, K H), 2: down (N H, K I) */
    int n, k;
} gemm_shape;

/* Rows per expert for a total of `rows` (--spread): uniform; skewed (expert e gets a share
 * proportional to 1 / (e + 1)); or routing: rank 0's local experts under bench's routing for
 * rows / top-k tokens per rank at EP size --ep, whose total is the routing's (about `rows`) and
 * whose partly filled tiles are those the modes' GEMMs get. *total: the rows spread. */
static mm_status spread_rows(const mm_options *o, const mm_config *cfg, int rows, int experts, int32_t *count,
                             int *total)
{
    *total = rows;
    if (o->spread == MM_SPREAD_UNIFORM) {
        for (int e = 0; e < experts; e++) count[e] = rows / experts + (e < rows % experts);
        return MM_OK;
    }
    if (o->spread == MM_SPREAD_ROUTING) {
        const int batch = rows > 0 && rows < cfg->topk ? 1 : rows / cfg->topk;
        MM_TRY(plan_rank_rows(cfg, &o->routing, o->seed, o->ep, batch, 0, count));
        *total = 0;
        for (int e = 0; e < experts; e++) *total += count[e];
        return MM_OK;
    }
    double share = 0;
    for (int e = 0; e < experts; e++) share += 1.0 / (e + 1);
    int given = 0;
    for (int e = 0; e < experts; e++) {
        count[e] = (int)floor(rows * (1.0 / (e + 1)) / share);
        given += count[e];
    }
    count[0] += rows - given;
    return MM_OK;
}

typedef struct {
    uint8_t *w1, *w2;
    float *s1, *s2;        /* block scales (FP4: the blocks' words, mm_launch_fp4_block_words) */
    void *w1_map, *w2_map; /* TMA descriptors of w1, w2 (FP4: of the codes c1, c2) */
    /* FP4 experts (--weights fp4; then w1, w2 are not allocated): codes [E][N][K / 2] and
     * exponents [E][N][K / 32] of W1 and W2 (kernels/fp4.h) */
    int fp4;
    uint8_t *c1, *e1, *c2, *e2;
    void *qa_map[2];       /* TMA descriptors of qa as [rows][K] for GEMM1's K and GEMM2's */
    void *out_map[2];      /* of out as BF16 [rows][N] for GEMM1's N and GEMM2's */
    uint16_t *x;
    uint8_t *qa;
    float *sa;
    int32_t *count, *offset, *tiles, *expert_of_row;
    void *out;
    double *ref, *ref_lt; /* exact reference; cuBLASLt's output widened */
    mm_device_diff *diff;
    void *flush;
    size_t flush_bytes;
    int flush_mode;        /* MM_L2_FLUSH_ON (a write) or _CLEAN (a read) */
    /* where a CTA whose pipeline wait expired says so (host-mapped; the kernel gets error_dev),
     * so an expiry is a TIMEOUT naming the wait, not only a wrong output */
    mm_wait_error *error_host, *error_dev;
    uint32_t *abort_flag;
} gemm_buffers;

/* MM_TIMEOUT, with the failure's sentence on stderr, once a launch so far recorded one. */
static mm_status pipeline_status(const gemm_buffers *b)
{
    char what[256];
    if (wait_error_describe(b->error_host, what, sizeof what) == MM_OK) return MM_OK;
    mm_error("gemm: %s", what);
    return MM_TIMEOUT;
}

/* One launch of our grouped GEMM: the FP4 kernel (single CTAs, 128 x 128 tiles) or the FP8 one's
 * forms. */
static cudaError_t launch_ours(int fp4, mm_grouped_gemm_args g, int ctas, int most, const int32_t *counts,
                               cudaStream_t st)
{
    return fp4 ? mm_launch_grouped_gemm_fp4(g, ctas, st) : mm_launch_grouped_gemm(g, ctas, most, counts, st);
}

static mm_status check_one(const gemm_buffers *b, mm_grouped_gemm_args g, int rows, int ctas, int most, const int32_t *counts,
                           cudaStream_t st, double *calc)
{
    size_t n_out = (size_t)rows * g.n;
    CUDA_TRY(mm_launch_poison(b->out, n_out * (g.out_fp32 ? 4 : 2), st));
    CUDA_TRY(launch_ours(b->fp4, g, ctas, most, counts, st));
    if (g.out_fp32) CUDA_TRY(mm_launch_compare_f32((const float *)b->out, b->ref, (long long)n_out, b->diff, st));
    else CUDA_TRY(mm_launch_compare((const uint16_t *)b->out, b->ref, (long long)n_out, b->diff, st));
    mm_device_diff d;
    CUDA_TRY(cudaMemcpyAsync(&d, b->diff, sizeof d, cudaMemcpyDeviceToHost, st));
    CUDA_TRY(cudaStreamSynchronize(st));
    MM_TRY(pipeline_status(b));
    *calc = d.sum_aa_bb > 0 ? 1.0 - 2.0 * d.sum_ab / d.sum_aa_bb : 0.0;
    if (d.nonfinite) *calc = INFINITY;
    return MM_OK;
}

static int lt_layout_reported;

typedef mm_step_fn enqueue_fn; /* timing.h: one call of a work on a stream */

typedef struct {
    mm_grouped_gemm_args g;
    int fp4;
    int ctas, most;         /* an expert's most rows (the launch form) */
    const int32_t *counts; /* the experts' rows (the tile, mm_grouped_gemm_tile_rows) */
} ours_ctx;

static mm_status ours_enqueue(void *ctx, cudaStream_t st)
{
    ours_ctx *c = ctx;
    CUDA_TRY(launch_ours(c->fp4, c->g, c->ctas, c->most, c->counts, st));
    return MM_OK;
}

static mm_status lt_enqueue(void *ctx, cudaStream_t st)
{
    return lt_runner_enqueue(ctx, st);
}

static mm_status flush_l2(void *ctx, cudaStream_t st, int iteration)
{
    const gemm_buffers *b = ctx;
    CUDA_TRY(mm_launch_l2_flush(b->flush, b->flush_bytes, b->flush_mode == MM_L2_FLUSH_CLEAN, iteration, st));
    return MM_OK;
}

/* Median times of n works (ours, and cuBLASLt when it takes the problem) over o->iters calls
 * after o->warmup, side by side as bench times its modes (timing.h), L2 flushed before each call
 * when asked: both see the same share of the GPU's clock states under its power cap. us: room for
 * n * o->iters per-iteration times, filled work by work. */
static mm_status time_side_by_side(const mm_options *o, const gemm_buffers *b, cudaStream_t st, int n,
                                   const enqueue_fn *fn, void *const *ctx, mm_stats *out, double *us)
{
    const int iters = o->iters, events = n * iters;
    cudaEvent_t *ev = malloc(sizeof(cudaEvent_t) * 2 * (size_t)events);
    mm_status s = ev ? MM_OK : MM_RUNTIME;
    int made = 0;
    for (; s == MM_OK && made < 2 * events; made++)
        if (cudaEventCreate(&ev[made]) != cudaSuccess) s = MM_RUNTIME;
    const mm_call_prelude pre = {o->l2_flush ? flush_l2 : NULL, NULL, (void *)b, -1, 0};
    if (s == MM_OK) s = timing_enqueue_side_by_side(st, n, fn, ctx, NULL, o->warmup, iters, &pre, ev, ev + events);
    if (cudaStreamSynchronize(st) != cudaSuccess) s = MM_RUNTIME;
    if (s == MM_OK) s = timing_elapsed_us(ev, ev + events, events, us);
    for (int j = 0; s == MM_OK && j < n; j++) stats_compute(us + (size_t)j * iters, iters, &out[j]);
    for (int i = 0; i < made; i++) cudaEventDestroy(ev[i]);
    free(ev);
    if (s != MM_OK) mm_error("gemm: timing failed (CUDA error)");
    return s;
}

/* The joules of one work (--energy-ms): timing_energy_loop until its window closes, no line-up
 * (one GPU). `clock`: our kernel's SM clock over the loop too. */
static mm_status energy_window(mm_power *pw, int ms, double median_us, enqueue_fn fn, void *ctx, int clock,
                               cudaStream_t st, mm_power_window *out)
{
    char why[256];
    if (clock) CUDA_TRY(mm_grouped_gemm_clock_reset(st));
    CUDA_TRY(cudaStreamSynchronize(st));
    const mm_status s = timing_energy_loop(st, fn, ctx, NULL, NULL, 0, median_us, ms, pw, out, why, sizeof why);
    if (s != MM_OK) {
        mm_error("gemm: --energy-ms: %s", why);
        return s;
    }
    if (why[0]) mm_warn("gemm: --energy-ms: no reading for this loop: %s", why);
    if (clock) {
        unsigned long long cycles = 0, ns = 0;
        CUDA_TRY(mm_grouped_gemm_clock_read(st, &cycles, &ns));
        out->sm_mhz = mm_clock_mhz(cycles, ns);
    }
    return MM_OK;
}

/* A row of the results file for a case that stopped before it was timed (its status from s). */
static void add_untimed(mm_gemm_results *res, gemm_shape sh, int rows, mm_status s, const char *note)
{
    mm_gemm_result r;
    memset(&r, 0, sizeof r);
    mm_fmt(r.mode, sizeof r.mode, "gemm%d", sh.gemm);
    r.rows = rows;
    r.n = sh.n;
    r.k = sh.k;
    r.status = s == MM_FAIL ? ROW_FAIL : s == MM_TIMEOUT ? ROW_TIMEOUT : ROW_ERROR;
    mm_fmt(r.note, sizeof r.note, "%s", note);
    r.calc_diff_f32 = -1;
    if (gemm_results_add(res, &r, NULL, 0) != MM_OK) mm_warn("gemm: out of memory for the results file");
}

/* One case's rows: per expert counts and offsets, each row's expert, and their sums. */
typedef struct {
    int32_t *count, *offset, *owner;
    int rows, active, most;
} case_rows;

static void case_rows_free(case_rows *c)
{
    free(c->count);
    free(c->offset);
    free(c->owner);
    memset(c, 0, sizeof *c);
}

static mm_status case_rows_make(const mm_options *o, const mm_config *cfg, int rows_asked, int local_experts,
                                case_rows *c)
{
    memset(c, 0, sizeof *c);
    c->count = malloc(sizeof(int32_t) * (size_t)local_experts);
    c->offset = malloc(sizeof(int32_t) * (size_t)local_experts);
    mm_status s = c->count && c->offset ? spread_rows(o, cfg, rows_asked, local_experts, c->count, &c->rows) : MM_RUNTIME;
    if (s == MM_OK && !(c->owner = malloc(sizeof(int32_t) * (size_t)(c->rows > 0 ? c->rows : 1)))) s = MM_RUNTIME;
    if (s != MM_OK) {
        case_rows_free(c);
        return s;
    }
    for (int e = 0, at = 0; e < local_experts; e++) {
        c->offset[e] = at;
        for (int r = 0; r < c->count[e]; r++) c->owner[at + r] = e;
        at += c->count[e];
        c->active += c->count[e] > 0;
        c->most = c->count[e] > c->most ? c->count[e] : c->most;
    }
    return MM_OK;
}

/* The case's layout and quantized rows on the GPU (the same data in the timing and the energy pass). */
static mm_status case_upload(const mm_options *o, const mm_config *cfg, const gemm_buffers *b, gemm_shape sh,
                             const case_rows *c, int local_experts, cudaStream_t st)
{
    CUDA_TRY(cudaMemcpy(b->count, c->count, sizeof(int32_t) * (size_t)local_experts, cudaMemcpyHostToDevice));
    CUDA_TRY(cudaMemcpy(b->offset, c->offset, sizeof(int32_t) * (size_t)local_experts, cudaMemcpyHostToDevice));
    CUDA_TRY(cudaMemcpy(b->expert_of_row, c->owner, sizeof(int32_t) * (size_t)c->rows, cudaMemcpyHostToDevice));
    mm_x_params xp = x_params_default(o->seed + (uint64_t)c->rows);
    CUDA_TRY(mm_launch_gen_x(xp, 0, c->rows, sh.k, b->x, st));
    CUDA_TRY(mm_launch_quantize_rows(b->x, c->rows, sh.k, cfg->scale_fmt == MM_SCALE_UE8M0, b->qa, b->sa, st));
    return MM_OK;
}

/* FP4: w the exponents, w_map the codes' map, w_scale the blocks' words (mm_launch_grouped_gemm_fp4) */
static mm_grouped_gemm_args case_args(const gemm_buffers *b, gemm_shape sh, int local_experts)
{
    const uint8_t *w = b->fp4 ? (sh.gemm == 1 ? b->e1 : b->e2) : (sh.gemm == 1 ? b->w1 : b->w2);
    mm_grouped_gemm_args g = {b->qa, b->sa, w, sh.gemm == 1 ? b->w1_map : b->w2_map,
                              sh.gemm == 1 ? b->s1 : b->s2, b->offset, b->count, b->tiles,
                              local_experts, sh.n, sh.k, 0, b->out, b->qa_map[sh.gemm - 1],
                              b->error_dev, b->abort_flag, 0, b->out_map[sh.gemm - 1]};
    return g;
}

/* The GPU reference of the case's GEMM (double) into b->ref, for the weights g names. */
static cudaError_t launch_reference(const gemm_buffers *b, gemm_shape sh, int rows, const mm_grouped_gemm_args *g,
                                    cudaStream_t st)
{
    if (b->fp4)
        return mm_launch_ref_gemm_fp4(b->qa, b->sa, b->expert_of_row, rows, sh.gemm == 1 ? b->c1 : b->c2, g->w, sh.n,
                                      sh.k, b->ref, st);
    return mm_launch_ref_gemm(b->qa, b->sa, b->expert_of_row, rows, g->w, g->w_scale, sh.n, sh.k, b->ref, st);
}

/* The row of `res` for this case's `mode` ("gemm1", "gemm1-cublaslt", ...), or NULL. */
static mm_gemm_result *find_row(mm_gemm_results *res, const char *mode, int rows)
{
    for (int i = 0; i < res->n; i++)
        if (res->rows[i].rows == rows && strcmp(res->rows[i].mode, mode) == 0) return &res->rows[i];
    return NULL;
}

/* --energy-ms, after every case was timed (so no timing follows a sustained load it did not ask
 * for): ours and then cuBLASLt's loop back to back on the case's data, their windows kept in the
 * case's rows of `res` and printed as one line. Cases that did not time OK or FAIL are skipped. */
static mm_status energy_case(const mm_options *o, const mm_config *cfg, const gemm_buffers *b, gemm_shape sh,
                             int rows_asked, int local_experts, int ctas, mm_power *pw, cudaStream_t st,
                             mm_gemm_results *res)
{
    case_rows c;
    MM_TRY(case_rows_make(o, cfg, rows_asked, local_experts, &c));
    char mode[24], lt_mode[40];
    mm_fmt(mode, sizeof mode, "gemm%d", sh.gemm);
    mm_fmt(lt_mode, sizeof lt_mode, "gemm%d" MM_GEMM_LT_SUFFIX, sh.gemm);
    mm_gemm_result *ours = c.rows > 0 ? find_row(res, mode, c.rows) : NULL;
    mm_gemm_result *theirs = ours ? find_row(res, lt_mode, c.rows) : NULL;
    if (!ours || ours->stats.n == 0) {
        case_rows_free(&c);
        return MM_OK;
    }
    mm_status s = case_upload(o, cfg, b, sh, &c, local_experts, st);
    mm_grouped_gemm_args g = case_args(b, sh, local_experts);
    ours_ctx oc = {g, b->fp4, ctas, c.most, c.count};
    lt_runner *lt = NULL;
    char why[256] = "not timed";
    lt_problem lp = {g.w, g.w_scale, b->qa, b->sa, c.count, c.offset, local_experts, sh.n, sh.k, c.rows};
    /* the runner picks its scale layout against the reference, so the case's reference first */
    if (s == MM_OK && theirs && theirs->stats.n > 0) { /* timed, so a failure here is unexpected: the line says why */
        if (launch_reference(b, sh, c.rows, &g, st) != cudaSuccess)
            mm_fmt(why, sizeof why, "the reference GEMM failed to launch");
        else if (lt_runner_create(&lp, b->ref, st, &lt, why, sizeof why) != MM_OK)
            lt = NULL;
    }
    if (s == MM_OK) s = energy_window(pw, o->energy_ms, ours->stats.median, ours_enqueue, &oc, 1, st, &ours->energy);
    if (s == MM_OK) s = pipeline_status(b);
    if (s == MM_OK && lt)
        s = energy_window(pw, o->energy_ms, theirs->stats.median, lt_enqueue, lt, 0, st, &theirs->energy);
    if (s == MM_OK) {
        char mine[96], other[300], ratio[64] = "";
        mm_fmt(other, sizeof other, "not run (%s)", why);
        const mm_power_window *e = &ours->energy;
        mm_power_format(e, mine, sizeof mine);
        if (lt) mm_power_format(&theirs->energy, other, sizeof other);
        if (lt && e->valid && theirs->energy.valid)
            mm_fmt(ratio, sizeof ratio, "; joules ours / cuBLASLt %.3f", e->joules_per_call / theirs->energy.joules_per_call);
        printf("energy gemm%d %6d: ours %s %.0f MHz (%d calls in %.2f s, %.3f s in %d steps of the counter); "
               "cuBLASLt %s%s\n", sh.gemm, c.rows, mine, e->sm_mhz, e->calls, e->loop_s, e->window_s, e->steps, other,
               ratio);
        fflush(stdout);
    }
    lt_runner_destroy(lt);
    case_rows_free(&c);
    return s;
}

static mm_status run_case(const mm_options *o, const mm_config *cfg, const gemm_buffers *b, gemm_shape sh,
                          int rows_asked, int local_experts, int ctas, cudaStream_t st, mm_gemm_results *res)
{
    case_rows c;
    MM_TRY(case_rows_make(o, cfg, rows_asked, local_experts, &c));
    const int rows = c.rows, active = c.active, most = c.most;
    int32_t *const count = c.count, *const offset = c.offset;
    if (rows == 0) { /* --spread routing can leave rank 0 without rows: nothing to run */
        printf("gemm%d %6d x %5d x %5d  rank 0's experts get no rows under this routing: nothing to time\n", sh.gemm,
               0, sh.n, sh.k);
        case_rows_free(&c);
        return MM_OK;
    }
    mm_status us = case_upload(o, cfg, b, sh, &c, local_experts, st);
    if (us != MM_OK) {
        case_rows_free(&c);
        return us;
    }
    mm_grouped_gemm_args g = case_args(b, sh, local_experts);
    const uint8_t *w = g.w;
    const float *ws = g.w_scale;
    if (launch_reference(b, sh, rows, &g, st) != cudaSuccess) {
        mm_error("gemm: the reference GEMM failed to launch");
        case_rows_free(&c);
        return MM_RUNTIME;
    }
    double calc = 0, calc32 = 0;
    mm_status cs = check_one(b, g, rows, ctas, most, count, st, &calc);
    g.out_fp32 = 1;
    if (cs == MM_OK) cs = check_one(b, g, rows, ctas, most, count, st, &calc32);
    g.out_fp32 = 0;
    if (cs != MM_OK) {
        add_untimed(res, sh, rows, cs, "stopped in the correctness check");
        case_rows_free(&c);
        return cs;
    }

    /* the same problem through cuBLASLt, one matmul per active expert, timed next to ours */
    lt_problem lp = {w, ws, b->qa, b->sa, count, offset, local_experts, sh.n, sh.k, rows};
    lt_runner *lt = NULL;
    char why[256];
    mm_status ls = MM_OK;
    if (b->fp4) /* not a failure: the comparison has no counterpart */
        mm_fmt(why, sizeof why, "cuBLASLt: not run (it has no FP8 x FP4 matmul on SM90)");
    else
        ls = lt_runner_create(&lp, b->ref, st, &lt, why, sizeof why);
    ours_ctx oc = {g, b->fp4, ctas, most, count};
    const enqueue_fn fns[2] = {ours_enqueue, lt_enqueue};
    void *const ctxs[2] = {&oc, lt};
    mm_stats times[2];
    double *samples = malloc(sizeof(double) * 2 * (size_t)o->iters);
    if (!samples && ls == MM_OK) ls = MM_RUNTIME;
    unsigned long long cycles = 0, ns = 0;
    cudaError_t ce = cudaSuccess;
    if (ls == MM_OK && (ce = mm_grouped_gemm_clock_reset(st)) != cudaSuccess) ls = MM_RUNTIME;
    if (ls == MM_OK) ls = time_side_by_side(o, b, st, lt ? 2 : 1, fns, ctxs, times, samples);
    if (ls == MM_OK && (ce = mm_grouped_gemm_clock_read(st, &cycles, &ns)) != cudaSuccess) ls = MM_RUNTIME;
    if (ce != cudaSuccess) mm_error("gemm: the kernel's clock counter: %s", cudaGetErrorString(ce));
    if (ls == MM_OK) ls = pipeline_status(b);
    if (ls != MM_OK) {
        add_untimed(res, sh, rows, ls, "stopped while timed");
        lt_runner_destroy(lt);
        free(samples);
        case_rows_free(&c);
        return ls;
    }
    const mm_stats s = times[0];
    double flops = 2.0 * rows * (double)sh.n * sh.k;
    /* the weight bytes streamed: FP8 and a float per 128 x 128 block, or FP4 codes and a byte per 32 */
    double wbytes = (double)active * sh.n * sh.k * (b->fp4 ? 0.5 + 1.0 / MM_FP4_GROUP : 1.0 + 4.0 / 16384.0);
    int ok = calc <= o->tol && calc32 <= o->tol;
    const int tile = b->fp4 ? MM_GEMM_BM : mm_grouped_gemm_tile_rows(&g, count);
    const double mhz = mm_clock_mhz(cycles, ns);
    printf("gemm%d %6d x %5d x %5d %8.1f %4d %9.1f %8.1f %9.1f  %9.2e %9.2e  %-4s %5.0f  ", sh.gemm, rows, sh.n, sh.k,
           (double)rows / local_experts, tile, s.median, flops / s.median / 1e6, wbytes / s.median / 1e3, calc, calc32,
           ok ? "OK" : "FAIL", mhz);
    mm_gemm_result ours = {.rows = rows, .n = sh.n, .k = sh.k, .tile = tile, .status = ok ? ROW_OK : ROW_FAIL,
                           .stats = s, .flops = flops, .weight_bytes = wbytes, .calc_diff = calc, .calc_diff_f32 = calc32,
                           .sm_mhz = mhz};
    mm_fmt(ours.mode, sizeof ours.mode, "gemm%d", sh.gemm);
    mm_fmt(ours.note, sizeof ours.note, "%.1f rows an expert, %d-row tiles%s", (double)rows / local_experts, tile,
           tile != MM_WIDE_BM ? "" : mm_grouped_gemm_wide_block_scales(&g) ? ", block scales" : ", group scales");
    mm_status rs = gemm_results_add(res, &ours, samples, o->iters);

    if (lt) {
        const mm_stats lts = times[1];
        const uint16_t *lt_out;
        double calc_lt = 0;
        ls = lt_runner_output(lt, st, &lt_out);
        /* ours (BF16) against cuBLASLt's output */
        if (ls == MM_OK && (mm_launch_bf16_to_f64(lt_out, (long long)rows * sh.n, b->ref_lt, st) != cudaSuccess ||
                            launch_ours(b->fp4, g, ctas, most, count, st) != cudaSuccess))
            ls = MM_RUNTIME;
        if (ls == MM_OK) {
            mm_device_diff d;
            if (mm_launch_compare((const uint16_t *)b->out, b->ref_lt, (long long)rows * sh.n, b->diff, st) != cudaSuccess ||
                cudaMemcpyAsync(&d, b->diff, sizeof d, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
                cudaStreamSynchronize(st) != cudaSuccess)
                ls = MM_RUNTIME;
            else
                calc_lt = d.nonfinite ? INFINITY : (d.sum_aa_bb > 0 ? 1.0 - 2.0 * d.sum_ab / d.sum_aa_bb : 0.0);
        }
        if (ls == MM_OK) {
            int lt_ok = calc_lt <= o->tol;
            ok = ok && lt_ok;
            printf("%9.1f %7.2fx %9.2e%s\n", lts.median, lts.median / s.median, calc_lt, lt_ok ? "" : "  FAIL");
            mm_gemm_result lr = {.rows = rows, .n = sh.n, .k = sh.k, .status = lt_ok ? ROW_OK : ROW_FAIL, .stats = lts,
                                 .flops = flops, .weight_bytes = wbytes, .calc_diff = calc_lt, .calc_diff_f32 = -1};
            mm_fmt(lr.mode, sizeof lr.mode, "gemm%d" MM_GEMM_LT_SUFFIX, sh.gemm);
            mm_fmt(lr.note, sizeof lr.note, "one matmul per active expert; calc_diff: ours against its output");
            if (rs == MM_OK) rs = gemm_results_add(res, &lr, samples + o->iters, o->iters);
            if (!lt_layout_reported) {
                printf("# cuBLASLt scale layout (checked against the reference): %s\n", lt_runner_layout(lt));
                lt_layout_reported = 1;
            }
        }
        lt_runner_destroy(lt);
    } else {
        printf("%s\n", why);
    }
    fflush(stdout);
    free(samples);
    case_rows_free(&c);
    if (rs != MM_OK) mm_warn("gemm: out of memory for the results file");
    if (ls == MM_OK) ls = pipeline_status(b);
    if (ls != MM_OK) return ls;
    return ok ? MM_OK : MM_FAIL;
}

/* What the results file's meta says beyond meta_fill_common: this GPU and its software, the EP size
 * whose local experts the rows spread over, side-by-side timing, the spread and tile asked for. */
static void gemm_fill_meta(mm_gemm_results *res, const mm_options *o, const struct cudaDeviceProp *prop)
{
    mm_meta *m = &res->meta;
    mm_fmt(m->gpu, sizeof m->gpu, "%s", prop->name);
    runtime_driver_version(m->driver, sizeof m->driver);
    if (runtime_cuda_version(m->cuda, sizeof m->cuda) != MM_OK) mm_fmt(m->cuda, sizeof m->cuda, "unknown");
    mm_fmt(m->nccl, sizeof m->nccl, "not used");
    m->ep = o->ep;
    m->interleave = 1; /* ours and cuBLASLt side by side, always */
    m->graph = 0;
    if (gethostname(m->host, sizeof m->host) != 0) mm_fmt(m->host, sizeof m->host, "unknown");
    m->host[sizeof m->host - 1] = '\0';
    mm_fmt(res->spread, sizeof res->spread, "%s",
           o->spread == MM_SPREAD_ROUTING ? "routing" : o->spread == MM_SPREAD_SKEWED ? "skewed" : "uniform");
    mm_fmt(res->tile, sizeof res->tile, "%s", o->tile == MM_WIDE_BM ? "192" : o->tile == MM_GEMM_BM ? "128" : "auto");
    mm_fmt(res->wide_scales, sizeof res->wide_scales, "%s",
           o->wide_scales == MM_WIDE_SCALES_BLOCK ? "block" : o->wide_scales == MM_WIDE_SCALES_GROUP ? "group" : "auto");
}

mm_status gemm_main(const mm_options *o, const mm_config *cfg, int argc, char **argv)
{
    if (cfg->weights == MM_WEIGHTS_FP4 && o->tile == MM_WIDE_BM) {
        mm_error("gemm: --tile 192: FP4 weights run the 128 x 128 tiles only so far");
        return MM_USAGE;
    }
    int count = 0;
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    MM_TRY(runtime_gpu_count(host, "gemm", &count));
    if (cfg->experts % o->ep) {
        mm_error("gemm: %d experts are not divisible by --ep %d", cfg->experts, o->ep);
        return MM_USAGE;
    }
    CUDA_TRY(cudaSetDevice(0));
    CUDA_TRY(mm_grouped_gemm_prepare());
    mm_grouped_gemm_set_tile(o->tile);
    mm_grouped_gemm_set_wide_scales(o->wide_scales);
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, 0));
    int el = cfg->experts / o->ep, max_rows = 0;
    int32_t *spread = malloc(sizeof(int32_t) * (size_t)el);
    if (!spread) return MM_RUNTIME;
    for (int i = 0; i < o->n_rows; i++) {
        int rows = 0;
        const mm_status ss = spread_rows(o, cfg, o->rows[i], el, spread, &rows);
        if (ss != MM_OK) {
            free(spread);
            return ss;
        }
        max_rows = rows > max_rows ? rows : max_rows;
    }
    free(spread);
    if (max_rows == 0) max_rows = 1; /* every case without rows: the buffers and maps still want one */
    size_t h = (size_t)cfg->hidden, in = (size_t)cfg->inter, maxk = h > in ? h : in, maxn = 2 * in > h ? 2 * in : h;
    gemm_buffers b;
    memset(&b, 0, sizeof b);
    cudaStream_t st;
    CUDA_TRY(cudaStreamCreate(&st));
    b.fp4 = cfg->weights == MM_WEIGHTS_FP4;
    if (b.fp4) {
        CUDA_TRY(cudaMalloc((void **)&b.c1, (size_t)el * 2 * in * h / 2));
        CUDA_TRY(cudaMalloc((void **)&b.e1, (size_t)el * 2 * in * h / MM_FP4_GROUP));
        CUDA_TRY(cudaMalloc((void **)&b.c2, (size_t)el * h * in / 2));
        CUDA_TRY(cudaMalloc((void **)&b.e2, (size_t)el * h * in / MM_FP4_GROUP));
    } else {
        CUDA_TRY(cudaMalloc((void **)&b.w1, (size_t)el * 2 * in * h));
        CUDA_TRY(cudaMalloc((void **)&b.w2, (size_t)el * h * in));
    }
    /* FP8: the block scales; FP4: the blocks' words in their place (mm_launch_fp4_block_words) */
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
    CUDA_TRY(cudaMalloc((void **)&b.ref_lt, (size_t)max_rows * maxn * 8));
    CUDA_TRY(cudaMalloc((void **)&b.diff, sizeof(mm_device_diff)));
    b.flush_bytes = mm_l2_flush_bytes((uint64_t)prop.l2CacheSize);
    b.flush_mode = o->l2_flush;
    CUDA_TRY(cudaMalloc(&b.flush, b.flush_bytes));
    CUDA_TRY(cudaHostAlloc((void **)&b.error_host, sizeof *b.error_host, cudaHostAllocMapped));
    memset(b.error_host, 0, sizeof *b.error_host);
    CUDA_TRY(cudaHostGetDevicePointer((void **)&b.error_dev, b.error_host, 0));
    CUDA_TRY(cudaMalloc((void **)&b.abort_flag, sizeof *b.abort_flag));
    CUDA_TRY(cudaMemset(b.abort_flag, 0, sizeof *b.abort_flag));
    if (b.fp4) {
        CUDA_TRY(mm_launch_gen_fp4_weights(o->seed, cfg->fp4_pattern, 0, el, cfg->hidden, cfg->inter, b.c1, b.e1,
                                           (uint32_t *)b.s1, b.c2, b.e2, (uint32_t *)b.s2, st));
        CUDA_TRY(mm_fp4_codes_map_create(b.c1, (uint64_t)el * 2 * in, h, &b.w1_map));
        CUDA_TRY(mm_fp4_codes_map_create(b.c2, (uint64_t)el * h, in, &b.w2_map));
    } else {
        CUDA_TRY(mm_launch_gen_weights(o->seed, 0, el, cfg->hidden, cfg->inter,
                                       cfg->scale_fmt == MM_SCALE_UE8M0, b.w1, b.s1, b.w2, b.s2, st));
        CUDA_TRY(mm_weight_map_create(b.w1, (uint64_t)el * 2 * in, h, &b.w1_map));
        CUDA_TRY(mm_weight_map_create(b.w2, (uint64_t)el * h, in, &b.w2_map));
    }
    CUDA_TRY(mm_rows_map_create(b.qa, (uint64_t)max_rows * maxk / h, h, &b.qa_map[0]));
    CUDA_TRY(mm_rows_map_create(b.qa, (uint64_t)max_rows * maxk / in, in, &b.qa_map[1]));
    CUDA_TRY(mm_out_map_create(b.out, (uint64_t)max_rows, (uint64_t)2 * in, &b.out_map[0]));
    CUDA_TRY(mm_out_map_create(b.out, (uint64_t)max_rows, (uint64_t)h, &b.out_map[1]));
    mm_gemm_results res;
    gemm_results_init(&res);
    meta_fill_common(&res.meta, o, cfg, argc, argv);
    gemm_fill_meta(&res, o, &prop);
    printf("# megamoe gemm: %s, EP %d (%d local experts), %s, %d CTAs of %d B shared memory, "
           "L2 flush %s, %d iterations, ours and cuBLASLt timed side by side\n",
           cfg->name, o->ep, el, prop.name, prop.multiProcessorCount, mm_grouped_gemm_smem_bytes(),
           l2_flush_name(o->l2_flush), o->iters);
    if (o->spread == MM_SPREAD_ROUTING) {
        char route[64];
        routing_format(&o->routing, route, sizeof route);
        printf("# rows per expert: rank 0's local experts under routing %s, seed %llu, for rows / %d tokens per "
               "rank at EP %d (the rows column is the routing's total)\n",
               route, (unsigned long long)o->seed, cfg->topk, o->ep);
    } else {
        printf("# rows per expert: %s\n", o->spread == MM_SPREAD_SKEWED ? "skewed, ~1 / (e + 1)" : "uniform");
    }
    if (b.fp4)
        printf("# weights: FP4 (MXFP4: E2M1 codes, a UE8M0 exponent per 32 along K; %s), expanded to FP8 "
               "by the math warps straight into wgmma's registers, the tile's rows as N (docs/recipe.md); one CTA per "
               "tile of up to 128 rows x 128 columns, tiles claimed from a counter; wGB/s counts the FP4 bytes "
               "streamed\n",
               cfg->fp4_pattern == MM_FP4_REAL ? "drawn as checkpoints look" : "a check pattern");
    for (int gi = 1; gi <= 2 && !b.fp4; gi++) {
        int n = gi == 1 ? 2 * cfg->inter : cfg->hidden, pairs = mm_grouped_gemm_pairs(n, prop.multiProcessorCount, 0);
        if (pairs)
            printf("# gemm%d: %d CTAs in 2-CTA clusters, each pair sharing its A blocks (TMA multicast), where an "
                   "expert has more than %d rows (only as many pairs busy as finish the items in as many waves as all "
                   "would: an idle SM leaves its watts to the others under the power cap); else one CTA per tile, "
                   "tiles claimed from a counter\n",
                   gi, 2 * pairs, MM_GEMM_BM / 2);
        else printf("# gemm%d: one CTA per tile, no clusters, tiles claimed from a counter\n", gi);
    }
    if (mm_grouped_gemm_band() > 0)
        printf("# order: inside an expert, bands of %d column tiles, each band's row tiles in turn, so a wave of CTAs "
               "shares a few weight columns while they are in L2\n", mm_grouped_gemm_band());
    else printf("# order: inside an expert, every column tile of a row tile before the next row tile\n");
    if (!b.fp4)
        printf("# tile: the rows of our tiles; 128 (128 x 128, two math warpgroups) or 192 (the wide form: 192 x 128, "
           "three math warpgroups, always in pairs, %s; auto takes it where the active experts average %d rows or "
           "more and 192-row tiles pad them at most %d%% more than 128-row ones); --tile %s\n",
           "in a fixed order rotated each wave",
           MM_WIDE_MIN_MEAN_ROWS, MM_WIDE_MAX_PAD_PCT, res.tile);
    if (!b.fp4)
        printf("# wide scales: the wide form's scale copies, 4 K blocks at a time into slots beside the ring (group) or "
           "each K block's into its stage (block; always where K / 128 is not a multiple of 4); --wide-scales %s "
           "(auto: group where N <= %d and K >= %d, else block)\n", res.wide_scales, MM_WIDE_GROUP_MAX_N, MM_WIDE_GROUP_MIN_K);
    printf("# MHz: the SM clock our kernel ran at over its calls in the timing loop (its CTAs' cycles over their "
           "time); a long GEMM runs power-capped below the boost clock, and its time follows the clock from run to run\n");
    /* NVML only when asked: without it the tool runs as before (no driver library needed) */
    mm_power *pw = NULL;
    if (o->energy_ms > 0) {
        char bus[32], why[256];
        if (cudaDeviceGetPCIBusId(bus, sizeof bus, 0) != cudaSuccess) mm_fmt(bus, sizeof bus, "unknown");
        if (mm_power_open(mm_power_library(), bus, &pw, why, sizeof why) != MM_OK)
            mm_warn("gemm: --energy-ms: no energy readings: %s", why);
        else
            printf("# energy: once every case is timed, each case's ours and then cuBLASLt's loop run back to back "
                   "(no L2 flush), each for 200 ms and then %d ms between two steps of the GPU's energy counter (NVML, "
                   "the whole board); W: the energy between the steps over their time; J/call: W x the loop's seconds "
                   "a call; capped: the power cap's share of that time; MHz: our kernel's SM clock over its loop\n",
                   o->energy_ms);
    }
    printf("%-5s %-22s %8s %4s %9s %8s %9s  %9s %9s  %-4s %5s  %s\n", "gemm", "rows x N x K", "rows/e", "tile",
           "us", "TFLOP/s", "wGB/s", "calc_bf16", "calc_f32", "stat", "MHz",
           "lt_us   lt/ours   calc_lt (cuBLASLt, one matmul per expert)");
    mm_status s = MM_OK;
    gemm_shape shapes[2] = {{1, 2 * cfg->inter, cfg->hidden}, {2, cfg->hidden, cfg->inter}};
    /* Each row count's GEMM1 then its GEMM2 before the next count, so a case follows the other GEMM
     * of its own size, as in a layer: a long GEMM leaves the GPU power-capped for a while, and
     * with GEMM1's whole list first, GEMM2's decode rows (after GEMM1's 49152) ran at 1363-1468
     * MHz against ~1800 for GEMM1's. After a TIMEOUT the
     * kernel's state (the abort flag, a stalled CTA) is not worth timing. */
    for (int i = 0; i < o->n_rows && s != MM_RUNTIME && s != MM_TIMEOUT; i++)
        for (int gi = 0; gi < 2 && s != MM_RUNTIME && s != MM_TIMEOUT; gi++)
            s = mm_worse(s, run_case(o, cfg, &b, shapes[gi], o->rows[i], el, prop.multiProcessorCount, st, &res));
    if (pw && s != MM_RUNTIME && s != MM_TIMEOUT)
        printf("# energy, every case timed above first (so no timing follows these sustained loads):\n");
    for (int i = 0; pw && i < o->n_rows && s != MM_RUNTIME && s != MM_TIMEOUT; i++)
        for (int gi = 0; gi < 2 && s != MM_RUNTIME && s != MM_TIMEOUT; gi++)
            s = mm_worse(s, energy_case(o, cfg, &b, shapes[gi], o->rows[i], el, prop.multiProcessorCount, pw, st, &res));
    mm_power_close(pw);
    if (o->json_path[0]) s = mm_worse(s, gemm_report_json_write(o->json_path, &res));
    gemm_results_free(&res);
    cudaFree(b.w1_map); cudaFree(b.w2_map); cudaFree(b.qa_map[0]); cudaFree(b.qa_map[1]);
    cudaFree(b.out_map[0]); cudaFree(b.out_map[1]);
    cudaFree(b.w1); cudaFree(b.w2); cudaFree(b.s1); cudaFree(b.s2); cudaFree(b.x); cudaFree(b.qa);
    cudaFree(b.c1); cudaFree(b.e1); cudaFree(b.c2); cudaFree(b.e2);
    cudaFree(b.sa); cudaFree(b.count); cudaFree(b.offset); cudaFree(b.tiles);
    cudaFree(b.expert_of_row); cudaFree(b.out); cudaFree(b.ref); cudaFree(b.ref_lt); cudaFree(b.diff); cudaFree(b.flush);
    cudaFreeHost(b.error_host); cudaFree(b.abort_flag);
    cudaStreamDestroy(st);
    return s;
}
