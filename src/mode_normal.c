/* normal mode, host side: carves the buffers of kernels/layout.h and runs one call of
 * kernels/normal.cu as its engines do: the stages up to the count exchange, then the CPU sync
 * (wait for the stream, read the received totals from host-mapped memory), then the rest.
 * Buffers are sized once for max_tokens per rank and reused by every call. */
#include <stdlib.h>

#include "../kernels/layout.h"
#include "launch.h"
#include "modes.h"
#include "plan.h"

typedef struct {
    mm_runtime *rt;
    mm_normal_args args; /* everything but the call's own pointers */
    void *local;
    int32_t *host_totals; /* host-mapped */
    cudaEvent_t offsets_done; /* the host waits on it, not on the stream */
    int pair_capacity;
} normal_state;

uint64_t normal_sym_bytes(const mm_config *cfg, int ranks, int max_tokens)
{
    mm_shape s = plan_shape(cfg, ranks, max_tokens > 0 ? max_tokens : 1);
    return mm_layout_normal_sym(&s).total;
}

static mm_status setup_local(normal_state **out, mm_runtime *rt, const mm_config *cfg, int max_tokens,
                             uint64_t sym_offset, const mm_local_weights *w)
{
    *out = NULL;
    mm_shape shape = plan_shape(cfg, rt->world, max_tokens);
    mm_layout sym = mm_layout_normal_sym(&shape), loc = mm_layout_normal_local(&shape);
    MM_TRY(modes_check_region("normal", rt, sym_offset, sym.total));
    if (rt->world > 32) {
        mm_error("normal: at most 32 ranks (a token's destinations are a 32-bit mask)");
        return MM_USAGE;
    }
    MM_TRY(runtime_check_fit(rt, "normal mode workspace", loc.total));
    CUDA_TRY(mm_grouped_gemm_prepare());
    normal_state *st = calloc(1, sizeof *st);
    if (!st) return MM_RUNTIME;
    *out = st; /* released by the caller on failure */
    st->rt = rt;
    st->pair_capacity = (int)mm_pair_capacity(&shape);
    CUDA_TRY(cudaMalloc(&st->local, loc.total));
    CUDA_TRY(cudaHostAlloc((void **)&st->host_totals, 4 * sizeof(int32_t), cudaHostAllocMapped));
    CUDA_TRY(cudaEventCreateWithFlags(&st->offsets_done, cudaEventDisableTiming));
    char *base = st->local;
    int el = cfg->experts / rt->world;
    mm_normal_args *a = &st->args;
    a->comm = rt->comm;
    a->off_counts = sym_offset + sym.region[NORMAL_COUNTS].offset;
    a->off_recv = sym_offset + sym.region[NORMAL_DISPATCH_RECV].offset;
    a->off_combine = sym_offset + sym.region[NORMAL_COMBINE_RECV].offset;
    a->row_bytes = mm_normal_row_bytes(&shape);
    a->m = modes_model_args(cfg, max_tokens);
    a->sm_count = rt->sm_count;
    a->comm_ctas = MM_COMM_CTAS_PER_SM * (rt->comm_sms > 0 && rt->comm_sms < rt->sm_count ? rt->comm_sms : rt->sm_count);
    a->xq = (uint8_t *)(base + loc.region[NORMAL_XQ].offset);
    a->xq_scales = (float *)(base + loc.region[NORMAL_XQ_SCALES].offset);
    a->token_slot = (int32_t *)(base + loc.region[NORMAL_TOKEN_SLOT].offset);
    a->send_count = (int32_t *)(base + loc.region[NORMAL_COUNTERS].offset);
    a->expert_count = a->send_count + rt->world;
    a->fill = a->expert_count + cfg->experts;
    a->done = (uint32_t *)(a->fill + el);
    a->send_offset = a->fill + el + 2;
    a->recv_base = a->send_offset + rt->world;
    a->f.row_offset = (int32_t *)(base + loc.region[NORMAL_SCHEDULE].offset);
    a->f.row_count = a->f.row_offset + el + 1;
    a->f.tile_start = a->f.row_count + el;
    a->f.packed_x = (uint8_t *)(base + loc.region[NORMAL_PACKED_X].offset);
    a->f.packed_scales = (float *)(base + loc.region[NORMAL_PACKED_SCALES].offset);
    a->f.packed_meta = base + loc.region[NORMAL_PACKED_META].offset;
    a->perm_index = (int32_t *)((char *)a->f.packed_meta + (size_t)st->pair_capacity * MM_ROW_META_BYTES);
    a->f.gemm1_out = (float *)(base + loc.region[NORMAL_GEMM1_OUT].offset);
    a->f.act = (uint8_t *)(base + loc.region[NORMAL_ACT].offset);
    a->f.act_scales = (float *)(base + loc.region[NORMAL_ACT_SCALES].offset);
    a->f.gemm2_out = (uint16_t *)(base + loc.region[NORMAL_GEMM2_OUT].offset);
    void *dev_totals = NULL;
    CUDA_TRY(cudaHostGetDevicePointer(&dev_totals, st->host_totals, 0));
    a->host_totals = dev_totals;
    MM_TRY(modes_expert_args(cfg, rt->world, w, &a->w));
    MM_TRY(modes_rows_map(a->f.packed_x, loc.region[NORMAL_PACKED_X].bytes, cfg->hidden, &a->f.x_map));
    MM_TRY(modes_rows_map(a->f.act, loc.region[NORMAL_ACT].bytes, cfg->inter, &a->f.act_map));
    MM_TRY(modes_out_map(a->f.gemm2_out, loc.region[NORMAL_GEMM2_OUT].bytes, cfg->hidden, &a->f.out2_map));
    CUDA_TRY(cudaMemset(st->local, 0, loc.total));
    CUDA_TRY(cudaMemset(rt->sym + sym_offset, 0, sym.total));
    CUDA_TRY(cudaDeviceSynchronize());
    return MM_OK;
}

mm_status normal_setup(void **out, mm_runtime *rt, const mm_config *cfg, int max_tokens, uint64_t sym_offset,
                       const mm_local_weights *w)
{
    normal_state *st = NULL;
    mm_status local = setup_local(&st, rt, cfg, max_tokens < 1 ? 1 : max_tokens, sym_offset, w);
    return modes_agree_setup(local, st, normal_destroy, out);
}

static mm_normal_args call_args(const normal_state *st, const mm_mode_io *io)
{
    mm_normal_args a = st->args;
    a.comm = st->rt->comm;
    a.io = *io;
    return a;
}

/* One call; marks (NULL or MM_NORMAL_MARKS events) for --breakdown. */
static mm_status run_call(normal_state *st, const mm_mode_io *io, cudaStream_t stream, cudaEvent_t *marks)
{
    MM_TRY(modes_check_tokens("normal", io->tokens, st->args.m.max_tokens));
    mm_normal_args a = call_args(st, io);
    CUDA_TRY(mm_launch_normal_front(a, marks, st->offsets_done, stream));
    /* the CPU sync: the received totals size the launches that follow (the dispatch, already
     * queued behind the offsets kernel, runs meanwhile) */
    CUDA_TRY(cudaEventSynchronize(st->offsets_done));
    a.recv_rows = ((volatile int32_t *)st->host_totals)[0];
    int padded = ((volatile int32_t *)st->host_totals)[1];
    if (a.recv_rows < 0 || a.recv_rows > st->rt->world * st->args.m.max_tokens || padded < 0 ||
        padded > st->pair_capacity) {
        mm_error("normal: count exchange gave %d rows (%d padded), beyond the buffers (%d, %d)", a.recv_rows,
                 padded, st->rt->world * st->args.m.max_tokens, st->pair_capacity);
        return MM_RUNTIME;
    }
    CUDA_TRY(mm_launch_normal_rest(a, marks, stream));
    return MM_OK;
}

mm_status normal_run(void *state, const mm_mode_io *io, cudaStream_t stream)
{
    return run_call(state, io, stream, NULL);
}

typedef struct {
    normal_state *st;
    const mm_mode_io *io;
    cudaStream_t stream;
} normal_marked_call;

static mm_status normal_run_marked(void *ctx, cudaEvent_t *marks)
{
    normal_marked_call *c = ctx;
    return run_call(c->st, c->io, c->stream, marks);
}

mm_status normal_stages(void *state, const mm_mode_io *io, cudaStream_t stream, char names[][16], double *us,
                        int *n)
{
    static const char *const stage[MM_NORMAL_MARKS - 1] = {"quant-layout", "notify", "dispatch", "sync-permute",
                                                           "gemm1", "act", "gemm2", "reduce-send", "combine"};
    normal_marked_call c = {state, io, stream};
    return modes_event_stages(MM_NORMAL_MARKS, stage, normal_run_marked, &c, stream, names, us, n);
}

void normal_destroy(void *state)
{
    normal_state *st = state;
    if (!st) return;
    modes_expert_args_free(&st->args.w);
    cudaFree((void *)st->args.f.x_map);
    cudaFree((void *)st->args.f.act_map);
    cudaFree((void *)st->args.f.out2_map);
    cudaFreeHost(st->host_totals);
    if (st->offsets_done) cudaEventDestroy(st->offsets_done);
    cudaFree(st->local);
    free(st);
}
