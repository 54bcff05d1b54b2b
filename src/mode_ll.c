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
    a->x = modes_exchange(&sym, sym_offset, &shape);
    a->m = modes_model_args(cfg, max_tokens);
    a->sm_count = rt->sm_count;
    a->f.packed_x = (uint8_t *)(base + loc.region[LL_PACKED_X].offset);
    a->f.packed_scales = (float *)(base + loc.region[LL_PACKED_SCALES].offset);
    a->f.packed_meta = base + loc.region[LL_PACKED_META].offset;
    a->f.gemm1_out = (float *)(base + loc.region[LL_GEMM1_OUT].offset);
    a->f.act = (uint8_t *)(base + loc.region[LL_ACT].offset);
    a->f.act_scales = (float *)(base + loc.region[LL_ACT_SCALES].offset);
    a->f.gemm2_out = (uint16_t *)(base + loc.region[LL_GEMM2_OUT].offset);
    int el = cfg->experts / rt->world;
    a->f.row_offset = (int32_t *)(base + loc.region[LL_SCHEDULE].offset);
    a->f.row_count = a->f.row_offset + el;
    a->f.tile_start = a->f.row_count + el;
    MM_TRY(modes_expert_args(cfg, rt->world, w, &a->w));
    MM_TRY(modes_rows_map(a->f.packed_x, loc.region[LL_PACKED_X].bytes, cfg->hidden, &a->f.x_map));
    MM_TRY(modes_rows_map(a->f.act, loc.region[LL_ACT].bytes, cfg->inter, &a->f.act_map));
    MM_TRY(modes_out_map(a->f.gemm2_out, loc.region[LL_GEMM2_OUT].bytes, cfg->hidden, &a->f.out2_map));
    /* masked layout: expert le's rows start at le * R * T */
    int32_t *offsets = malloc(sizeof(int32_t) * (size_t)el);
    if (!offsets) return MM_RUNTIME;
    for (int e = 0; e < el; e++) offsets[e] = e * rt->world * max_tokens;
    cudaError_t ce = cudaMemset(a->f.row_offset, 0, (size_t)(3 * el + 1) * 4);
    if (ce == cudaSuccess)
        ce = cudaMemcpy(a->f.row_offset, offsets, sizeof(int32_t) * (size_t)el, cudaMemcpyHostToDevice);
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
    a.io = *io;
    return a;
}

mm_status ll_run(void *state, const mm_mode_io *io, cudaStream_t stream)
{
    ll_state *st = state;
    MM_TRY(modes_check_tokens("ll", io->tokens, st->args.m.max_tokens));
    mm_ll_args a = call_args(st, io);
    CUDA_TRY(mm_launch_ll(a, NULL, stream));
    return MM_OK;
}

typedef struct {
    mm_ll_args a;
    cudaStream_t stream;
} ll_marked_call;

static mm_status ll_run_marked(void *ctx, cudaEvent_t *marks)
{
    ll_marked_call *c = ctx;
    CUDA_TRY(mm_launch_ll(c->a, marks, c->stream));
    return MM_OK;
}

/* One call with an event between launches: the stages as the stream sees them. */
mm_status ll_stages(void *state, const mm_mode_io *io, cudaStream_t stream, char names[][16], double *us,
                    int *n)
{
    static const char *const stage[MM_LL_MARKS - 1] = {"dispatch", "receive", "gemm1", "act",
                                                       "gemm2", "comb-send", "comb-recv"};
    ll_marked_call c = {call_args(state, io), stream};
    return modes_event_stages(MM_LL_MARKS, stage, ll_run_marked, &c, stream, names, us, n);
}

void ll_destroy(void *state)
{
    ll_state *st = state;
    if (!st) return;
    modes_expert_args_free(&st->args.w);
    cudaFree((void *)st->args.f.x_map);
    cudaFree((void *)st->args.f.act_map);
    cudaFree((void *)st->args.f.out2_map);
    cudaFree(st->local);
    free(st);
}
