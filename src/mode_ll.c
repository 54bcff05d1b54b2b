/* ll mode, host side: carves the symmetric and local buffers of kernels/layout.h and enqueues
 * one call of kernels/ll.cu. Buffers are sized once for max_tokens per rank and reused by every
 * call; nothing is cleared between calls (the kernels' slots are epoch-tagged). */
#include <stdlib.h>
#include <string.h>

#include "../kernels/layout.h"
#include "launch.h"
#include "modes.h"
#include "plan.h"

_Static_assert(MM_MAX_TOPK <= MM_KERNEL_MAX_TOPK, "the kernels hold every top-k slot of a token");

typedef struct {
    mm_runtime *rt;
    mm_ll_args args; /* everything but the call's own pointers */
    void *local;
} ll_state;

uint64_t ll_sym_bytes(const mm_config *cfg, int ranks, int max_tokens)
{
    mm_shape s = plan_shape(cfg, ranks, max_tokens > 0 ? max_tokens : 1);
    return mm_layout_ll_sym(&s).total;
}

/* This rank's part of the setup; ll_setup makes the ranks agree on it. */
static mm_status setup_local(ll_state **out, mm_runtime *rt, const mm_config *cfg, int max_tokens,
                             uint64_t sym_offset, const mm_local_weights *w)
{
    *out = NULL;
    mm_shape shape = plan_shape(cfg, rt->world, max_tokens);
    mm_layout sym = mm_layout_ll_sym(&shape), loc = mm_layout_ll_local(&shape);
    MM_TRY(modes_check_region("ll", rt, sym_offset, sym.total));
    MM_TRY(runtime_check_fit(rt, "ll mode workspace", loc.total));
    CUDA_TRY(mm_grouped_gemm_prepare());
    ll_state *st = calloc(1, sizeof *st);
    if (!st) return MM_RUNTIME;
    *out = st; /* released by the caller on failure */
    st->rt = rt;
    CUDA_TRY(cudaMalloc(&st->local, loc.total));
    char *base = st->local;
    mm_ll_args *a = &st->args;
    a->comm = rt->comm;
    a->mode_offset = sym_offset;
    a->off_state = sym.region[LL_STATE].offset;
    a->off_counts = sym.region[LL_COUNTS].offset;
    a->off_flags = sym.region[LL_COMBINE_FLAGS].offset;
    a->off_recv = sym.region[LL_DISPATCH_RECV].offset;
    a->off_combine = sym.region[LL_COMBINE_RECV].offset;
    a->row_bytes = mm_ll_row_bytes(&shape);
    a->hidden = cfg->hidden;
    a->inter = cfg->inter;
    a->experts = cfg->experts;
    a->topk = cfg->topk;
    a->max_tokens = max_tokens;
    a->has_limit = cfg->has_swiglu_limit;
    a->limit = (float)cfg->swiglu_limit;
    a->ue8m0 = cfg->scale_fmt == MM_SCALE_UE8M0;
    a->sm_count = rt->sm_count;
    a->packed_x = (uint8_t *)(base + loc.region[LL_PACKED_X].offset);
    a->packed_scales = (float *)(base + loc.region[LL_PACKED_SCALES].offset);
    a->packed_meta = base + loc.region[LL_PACKED_META].offset;
    a->gemm1_out = (float *)(base + loc.region[LL_GEMM1_OUT].offset);
    a->act = (uint8_t *)(base + loc.region[LL_ACT].offset);
    a->act_scales = (float *)(base + loc.region[LL_ACT_SCALES].offset);
    a->gemm2_out = (uint16_t *)(base + loc.region[LL_GEMM2_OUT].offset);
    int el = cfg->experts / rt->world;
    a->row_offset = (int32_t *)(base + loc.region[LL_SCHEDULE].offset);
    a->row_count = a->row_offset + el;
    a->tile_start = a->row_count + el;
    a->w1 = w->w1;
    a->w2 = w->w2;
    a->s1 = w->s1;
    a->s2 = w->s2;
    MM_TRY(modes_weight_maps(cfg, rt->world, w, &a->w1_map, &a->w2_map));
    MM_TRY(modes_rows_map(a->packed_x, loc.region[LL_PACKED_X].bytes, cfg->hidden, &a->x_map));
    MM_TRY(modes_rows_map(a->act, loc.region[LL_ACT].bytes, cfg->inter, &a->act_map));
    /* masked layout: expert le's rows start at le * R * T */
    int32_t *offsets = malloc(sizeof(int32_t) * (size_t)el);
    if (!offsets) return MM_RUNTIME;
    for (int e = 0; e < el; e++) offsets[e] = e * rt->world * max_tokens;
    cudaError_t ce = cudaMemset(a->row_offset, 0, (size_t)(3 * el + 1) * 4);
    if (ce == cudaSuccess)
        ce = cudaMemcpy(a->row_offset, offsets, sizeof(int32_t) * (size_t)el, cudaMemcpyHostToDevice);
    free(offsets);
    CUDA_TRY(ce);
    /* A clean symmetric region on every rank before anyone's first call. */
    CUDA_TRY(cudaMemset(rt->sym + sym_offset, 0, sym.total));
    CUDA_TRY(cudaDeviceSynchronize());
    return MM_OK;
}

mm_status ll_setup(void **out, mm_runtime *rt, const mm_config *cfg, int max_tokens,
                   uint64_t sym_offset, const mm_local_weights *w)
{
    ll_state *st = NULL;
    mm_status local = setup_local(&st, rt, cfg, max_tokens < 1 ? 1 : max_tokens, sym_offset, w);
    return modes_agree_setup(local, st, ll_destroy, out);
}

/* The setup's arguments with this call's tokens and pointers. */
static mm_ll_args call_args(const ll_state *st, const mm_mode_io *io)
{
    mm_ll_args a = st->args;
    a.comm = st->rt->comm;
    a.tokens = io->tokens;
    a.x = io->x;
    a.ids = io->ids;
    a.topk_w = io->topk_w;
    a.y = io->y;
    return a;
}

mm_status ll_run(void *state, const mm_mode_io *io, cudaStream_t stream)
{
    ll_state *st = state;
    MM_TRY(modes_check_tokens("ll", io->tokens, st->args.max_tokens));
    mm_ll_args a = call_args(st, io);
    CUDA_TRY(mm_launch_ll(a, NULL, stream));
    return MM_OK;
}

/* One call with an event between launches: the stages as the stream sees them. */
mm_status ll_stages(void *state, const mm_mode_io *io, cudaStream_t stream, char names[][16], double *us,
                    int *n)
{
    static const char *const stage[MM_LL_MARKS - 1] = {"dispatch", "receive", "gemm1", "act",
                                                       "gemm2", "comb-send", "comb-recv"};
    ll_state *st = state;
    cudaEvent_t marks[MM_LL_MARKS];
    int made = 0;
    mm_status s = MM_OK;
    for (; made < MM_LL_MARKS && s == MM_OK; made++)
        if (cudaEventCreate(&marks[made]) != cudaSuccess) s = MM_RUNTIME;
    mm_ll_args a = call_args(st, io);
    if (s == MM_OK && (mm_launch_ll(a, marks, stream) != cudaSuccess || cudaStreamSynchronize(stream) != cudaSuccess))
        s = MM_RUNTIME;
    for (int i = 0; s == MM_OK && i < MM_LL_MARKS - 1; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, marks[i], marks[i + 1]) != cudaSuccess) s = MM_RUNTIME;
        mm_fmt(names[i], 16, "%s", stage[i]);
        us[i] = ms * 1000.0;
    }
    for (int i = 0; i < made; i++) cudaEventDestroy(marks[i]);
    *n = s == MM_OK ? MM_LL_MARKS - 1 : 0;
    return s;
}

void ll_destroy(void *state)
{
    ll_state *st = state;
    if (!st) return;
    cudaFree((void *)st->args.w1_map);
    cudaFree((void *)st->args.w2_map);
    cudaFree((void *)st->args.x_map);
    cudaFree((void *)st->args.act_map);
    cudaFree(st->local);
    free(st);
}
