/* fused mode, host side: carves the symmetric and local buffers of kernels/layout.h, sizes the
 * persistent grid (every CTA must be resident: the kernel waits across CTAs) and enqueues the
 * one launch of kernels/fused.cu per call. Nothing is cleared between calls: the kernel's last
 * CTA leaves its counters clean, and its slots are epoch-tagged. */
#include <stdlib.h>

#include "../kernels/fused_schedule.h"
#include "../kernels/layout.h"
#include "launch.h"
#include "modes.h"
#include "plan.h"
#include "stats.h"

typedef struct {
    mm_runtime *rt;
    mm_fused_args args; /* everything but the call's own pointers */
    int ctas;
    void *local;
    /* --breakdown's per-CTA stamps [ctas][stamps_per_cta], allocated at setup: a cudaMalloc
     * between the line-up barrier and the instrumented launch delayed each rank's launch by its
     * own host time, and the peer's wait for the counts showed that skew (15-45 us "wait-counts") */
    unsigned long long *stamps;
    int stamps_per_cta; /* mm_fused_stamps_per_cta(): as the kernel was built */
} fused_state;

uint64_t fused_sym_bytes(const mm_config *cfg, int ranks, int max_tokens)
{
    mm_shape s = plan_shape(cfg, ranks, max_tokens > 0 ? max_tokens : 1);
    return mm_layout_fused_sym(&s).total;
}

/* The fused kernel's shared-memory limits on this GPU: 4 bytes an expert and 4 a local expert
 * beside the stage ring (gemm_schedule.h mm_fused_max_experts), and two dispatch rounds' rows of
 * hidden channels (mm_fused_prepare's cudaErrorInvalidValue). Where it fits, *max_ctas is
 * mm_fused_prepare's bound on resident CTAs. */
static mm_status fused_fits(const mm_config *cfg, int ranks, int *ok, char *why, size_t len, int *max_ctas)
{
    *ok = 1;
    *max_ctas = 0;
    size_t room = 0, need = mm_fused_smem_bytes(cfg->hidden, cfg->experts, ranks);
    CUDA_TRY(mm_fused_smem_room(&room));
    if (need > room) {
        *ok = 0;
        mm_fmt(why, len, "fused: %d experts (%d a rank) need %zu bytes of shared memory, this GPU allows %zu "
               "(at most %d experts at EP%d)",
               cfg->experts, cfg->experts / ranks, need, room,
               mm_fused_max_experts(room, need - mm_fused_smem_counts_bytes(cfg->experts, ranks), ranks), ranks);
        return MM_OK;
    }
    cudaError_t ce = mm_fused_prepare(cfg->hidden, cfg->experts, ranks, max_ctas);
    if (ce == cudaErrorInvalidValue) {
        *ok = 0;
        mm_fmt(why, len, "fused: hidden %d does not fit the kernel's shared-memory row buffer", cfg->hidden);
        return MM_OK;
    }
    CUDA_TRY(ce);
    return MM_OK;
}

mm_status fused_supports(const mm_config *cfg, int ranks, int *ok, char *why, size_t len)
{
    int max_ctas;
    return fused_fits(cfg, ranks, ok, why, len, &max_ctas);
}

/* This rank's part of the setup; fused_setup makes the ranks agree on it. */
static mm_status setup_local(fused_state **out, mm_runtime *rt, const mm_config *cfg, int max_tokens,
                             uint64_t sym_offset, const mm_local_weights *w)
{
    *out = NULL;
    mm_shape shape = plan_shape(cfg, rt->world, max_tokens);
    mm_layout sym = mm_layout_fused_sym(&shape), loc = mm_layout_fused_local(&shape);
    MM_TRY(modes_check_region("fused", rt, sym_offset, sym.total));
    MM_TRY(runtime_check_fit(rt, "fused mode workspace", loc.total));
    /* bench and check skip the mode where it does not fit (modes_supported); a caller that did
     * not ask gets the reason as an error. Before mm_fused_prepare: past the GPU's limit its
     * attribute call fails with the same cudaErrorInvalidValue as a hidden size it cannot take */
    int ok = 1, max_ctas = 0;
    char why[192];
    MM_TRY(fused_fits(cfg, rt->world, &ok, why, sizeof why, &max_ctas));
    if (!ok) {
        mm_error("%s", why);
        return MM_USAGE;
    }
    if (max_ctas < 1) {
        mm_error("fused: the kernel cannot be resident with %zu bytes of shared memory",
                 mm_fused_smem_bytes(cfg->hidden, cfg->experts, rt->world));
        return MM_RUNTIME;
    }
    fused_state *st = calloc(1, sizeof *st);
    if (!st) return MM_RUNTIME;
    *out = st; /* released by the caller on failure */
    st->rt = rt;
    /* one CTA per SM: the GEMM tile wants the whole SM, and every CTA must be resident */
    st->ctas = rt->sm_count < max_ctas ? rt->sm_count : max_ctas;
    CUDA_TRY(cudaMalloc(&st->local, loc.total));
    st->stamps_per_cta = mm_fused_stamps_per_cta();
    CUDA_TRY(cudaMalloc((void **)&st->stamps, (size_t)st->ctas * st->stamps_per_cta * sizeof *st->stamps));
    char *base = st->local;
    mm_fused_args *a = &st->args;
    a->comm = rt->comm;
    a->x = modes_exchange(&sym, sym_offset, &shape);
    a->m = modes_model_args(cfg, max_tokens);
    a->act = (uint8_t *)(base + loc.region[FUSED_ACT].offset);
    a->act_scales = (float *)(base + loc.region[FUSED_ACT_SCALES].offset);
    MM_TRY(modes_expert_args(cfg, rt->world, w, &a->w));
    MM_TRY(modes_rows_map(a->act, loc.region[FUSED_ACT].bytes, cfg->inter, &a->act_map));
    /* a clean symmetric region on every rank before anyone's first call */
    CUDA_TRY(cudaMemset(rt->sym + sym_offset, 0, sym.total));
    CUDA_TRY(cudaDeviceSynchronize());
    return MM_OK;
}

mm_status fused_setup(void **out, mm_runtime *rt, const mm_config *cfg, int max_tokens,
                      uint64_t sym_offset, const mm_local_weights *w)
{
    fused_state *st = NULL;
    mm_status local = setup_local(&st, rt, cfg, max_tokens < 1 ? 1 : max_tokens, sym_offset, w);
    return modes_agree_setup(local, st, fused_destroy, out);
}

/* The setup's arguments with this call's tokens and pointers. */
static mm_fused_args call_args(const fused_state *st, const mm_mode_io *io)
{
    mm_fused_args a = st->args;
    a.comm = st->rt->comm;
    a.io = *io;
    return a;
}

mm_status fused_run(void *state, const mm_mode_io *io, cudaStream_t stream)
{
    fused_state *st = state;
    MM_TRY(modes_check_tokens("fused", io->tokens, st->args.m.max_tokens));
    mm_fused_args a = call_args(st, io);
    CUDA_TRY(mm_launch_fused(a, st->ctas, stream));
    return MM_OK;
}

/* Diagnostic builds: each CTA's first items' times, appended to $MM_TRACE_ITEMS_FILE.<rank> as CSV
 * (us after t0, the first CTA's start; -1: not reached). */
static void trace_items(const unsigned long long *t, int ctas, int rank, int tokens, unsigned long long t0)
{
    const char *path = getenv("MM_TRACE_ITEMS_FILE");
    if (!path) return;
    char name_r[512];
    snprintf(name_r, sizeof name_r, "%s.%d", path, rank);
    FILE *f = fopen(name_r, "a");
    if (!f) return;
    static int call;
    call++;
    for (int c = 0; c < ctas; c++)
        for (int n = 0; n < MM_FUSED_TRACE_ITEMS; n++) {
            const unsigned long long *r = t + (size_t)c * MM_FUSED_TRACE_STAMPS + MM_FUSED_COUNT_STAMPS + (size_t)n * MM_FUSED_ITEM_FIELDS;
            if (!r[1]) break;
            fprintf(f, "%d,%d,%d,%d,%llu", tokens, call, c, n, r[0]);
            for (int i = 1; i < MM_FUSED_ITEM_FIELDS; i++)
                fprintf(f, ",%.2f", r[i] ? ((double)r[i] - (double)t0) / 1e3 : -1.0);
            fprintf(f, "\n");
        }
    fclose(f);
}

/* Diagnostic builds: the counts hand-off's steps on this rank, us after the first CTA's start
 * (and that start's raw globaltimer, to line up the ranks where the GPUs' timers agree), then
 * the items' times. */
static void trace_counts(const unsigned long long *t, int ctas, int rank, int tokens)
{
    unsigned long long t0 = ~0ull;
    for (int c = 0; c < ctas; c++)
        if (t[(size_t)c * MM_FUSED_TRACE_STAMPS] && t[(size_t)c * MM_FUSED_TRACE_STAMPS] < t0) t0 = t[(size_t)c * MM_FUSED_TRACE_STAMPS];
    static const char *const name[] = {"start", "sent", "counts", "gemm1", "gemm2", "combine",
                                       "stored", "elected", "published", "seen-last", "read-all"};
    fprintf(stderr, "trace rank %d t0 %llu:", rank, t0);
    for (int i = 1; i < MM_FUSED_COUNT_STAMPS; i++) {
        unsigned long long lo = ~0ull, hi = 0;
        for (int c = 0; c < ctas; c++) {
            const unsigned long long v = t[(size_t)c * MM_FUSED_TRACE_STAMPS + i];
            if (!v) continue;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        if (hi) fprintf(stderr, " %s %.1f-%.1f", name[i], (double)(lo - t0) / 1e3, (double)(hi - t0) / 1e3);
    }
    fprintf(stderr, "\n");
    trace_items(t, ctas, rank, tokens, t0);
}

/* One call with per-CTA timestamps: the critical path split at the phase boundaries (each
 * boundary is the last CTA's; the kernel's start is the first CTA's). */
mm_status fused_stages(void *state, const mm_mode_io *io, cudaStream_t stream, char names[][16],
                       double *us, int *n)
{
    static const char *const stage[MM_FUSED_PHASE_STAMPS - 1] = {"dispatch", "wait-counts", "gemm1", "gemm2", "combine"};
    fused_state *st = state;
    const int stride = st->stamps_per_cta;
    size_t count = (size_t)st->ctas * stride;
    unsigned long long *host = malloc(count * sizeof *host);
    *n = 0;
    if (!host) return MM_RUNTIME;
    mm_status s = MM_OK;
    mm_fused_args a = call_args(st, io);
    a.stamps = st->stamps;
    if (cudaMemsetAsync(st->stamps, 0, count * sizeof *host, stream) != cudaSuccess ||
        mm_launch_fused(a, st->ctas, stream) != cudaSuccess || cudaStreamSynchronize(stream) != cudaSuccess ||
        cudaMemcpy(host, st->stamps, count * sizeof *host, cudaMemcpyDeviceToHost) != cudaSuccess)
        s = MM_RUNTIME;
    if (s == MM_OK && stride == MM_FUSED_TRACE_STAMPS) trace_counts(host, st->ctas, st->rt->rank, io->tokens);
    if (s == MM_OK) {
        /* the phase boundaries: the first MM_FUSED_PHASE_STAMPS of each CTA's */
        for (int c = 0; c < st->ctas; c++)
            for (int i = 0; i < MM_FUSED_PHASE_STAMPS; i++)
                host[(size_t)c * MM_FUSED_PHASE_STAMPS + i] = host[(size_t)c * stride + i];
        stats_phase_path(host, st->ctas, MM_FUSED_PHASE_STAMPS, us);
        for (int i = 0; i < MM_FUSED_PHASE_STAMPS - 1; i++) mm_fmt(names[i], 16, "%s", stage[i]);
        *n = MM_FUSED_PHASE_STAMPS - 1;
    }
    free(host);
    return s;
}

void fused_destroy(void *state)
{
    fused_state *st = state;
    if (!st) return;
    modes_expert_args_free(&st->args.w);
    cudaFree((void *)st->args.act_map);
    cudaFree(st->local);
    cudaFree(st->stamps);
    free(st);
}
