#include "modes.h"

#include "../kernels/fp4.h"
#include "launch.h"

/* One entry per mode; a NULL `missing` means built. */
static const mm_mode_ops ops[MODE_COUNT] = {
    [MODE_FUSED] = {NULL, fused_sym_bytes, fused_setup, fused_run, fused_destroy, 1, fused_stages, fused_supports},
    [MODE_NORMAL] = {NULL, normal_sym_bytes, normal_setup, normal_run, normal_destroy, 0, normal_stages},
    [MODE_LL] = {NULL, ll_sym_bytes, ll_setup, ll_run, ll_destroy, 1, ll_stages},
};

const mm_mode_ops *mode_ops(mm_mode m)
{
    return &ops[m];
}

mm_model_args modes_model_args(const mm_config *cfg, int max_tokens)
{
    mm_model_args m;
    m.hidden = cfg->hidden;
    m.inter = cfg->inter;
    m.experts = cfg->experts;
    m.topk = cfg->topk;
    m.max_tokens = max_tokens;
    m.has_limit = cfg->has_swiglu_limit;
    m.ue8m0 = cfg->scale_fmt == MM_SCALE_UE8M0;
    m.limit = (float)cfg->swiglu_limit;
    return m;
}

mm_exchange modes_exchange(const mm_layout *sym, uint64_t sym_offset, const mm_shape *shape)
{
    mm_exchange x;
    x.mode_offset = sym_offset;
    x.off_state = sym->region[XCHG_STATE].offset;
    x.off_counts = sym->region[XCHG_COUNTS].offset;
    x.off_flags = sym->region[XCHG_COMBINE_FLAGS].offset;
    x.off_recv = sym->region[XCHG_DISPATCH_RECV].offset;
    x.off_combine = sym->region[XCHG_COMBINE_RECV].offset;
    /* fused's layout adds the meta region and sends rows without a meta */
    int per_rank = sym->count > XCHG_DISPATCH_META;
    x.off_meta = per_rank ? sym->region[XCHG_DISPATCH_META].offset : 0;
    x.off_ready = per_rank ? sym->region[XCHG_DISPATCH_READY].offset : 0;
    x.row_bytes = per_rank ? mm_fused_row_bytes(shape) : mm_ll_row_bytes(shape);
    return x;
}

mm_local_weights modes_local_weights(const mm_config *cfg, size_t first, const uint8_t *w1, const uint8_t *w2,
                                     const float *s1, const float *s2, const uint8_t *e1, const uint8_t *e2)
{
    const size_t h = (size_t)cfg->hidden, in = (size_t)cfg->inter;
    /* FP4: s1, s2 hold the blocks' words, in the scales' layout */
    const float *ls1 = s1 + first * (2 * in / 128) * (h / 128), *ls2 = s2 + first * (h / 128) * (in / 128);
    if (cfg->weights == MM_WEIGHTS_FP4) {
        const mm_local_weights fp4 = {w1 + first * 2 * in * h / 2, w2 + first * h * in / 2, ls1, ls2, 1,
                                      e1 + first * 2 * in * h / MM_FP4_GROUP, e2 + first * h * in / MM_FP4_GROUP};
        return fp4;
    }
    const mm_local_weights fp8 = {w1 + first * 2 * in * h, w2 + first * h * in, ls1, ls2, 0, NULL, NULL};
    return fp8;
}

mm_status modes_expert_args(const mm_config *cfg, int ranks, const mm_local_weights *w, mm_expert_args *out)
{
    uint64_t local_experts = (uint64_t)(cfg->experts / ranks);
    void *map = NULL;
    out->w1 = w->w1;
    out->w2 = w->w2;
    out->s1 = w->s1;
    out->s2 = w->s2;
    out->fp4 = w->fp4;
    out->e1 = w->e1;
    out->e2 = w->e2;
    out->w1_map = out->w2_map = NULL;
    cudaError_t (*create)(const uint8_t *, uint64_t, uint64_t, void **) = w->fp4 ? mm_fp4_codes_map_create
                                                                               : mm_weight_map_create;
    CUDA_TRY(create(w->w1, local_experts * 2 * cfg->inter, (uint64_t)cfg->hidden, &map));
    out->w1_map = map;
    CUDA_TRY(create(w->w2, local_experts * cfg->hidden, (uint64_t)cfg->inter, &map));
    out->w2_map = map;
    return MM_OK;
}

void modes_expert_args_free(mm_expert_args *w)
{
    cudaFree((void *)w->w1_map);
    cudaFree((void *)w->w2_map);
    w->w1_map = w->w2_map = NULL;
}

mm_status modes_event_stages(int count, const char *const *stage, mm_status (*run)(void *ctx, cudaEvent_t *marks),
                             void *ctx, cudaStream_t stream, char names[][16], double *us, int *n)
{
    cudaEvent_t marks[MM_MAX_STAGES + 1];
    int made = 0;
    mm_status s = count <= MM_MAX_STAGES + 1 ? MM_OK : MM_RUNTIME;
    *n = 0;
    while (s == MM_OK && made < count) {
        if (cudaEventCreate(&marks[made]) != cudaSuccess) s = MM_RUNTIME;
        else made++;
    }
    if (s == MM_OK) s = run(ctx, marks);
    if (s == MM_OK && cudaStreamSynchronize(stream) != cudaSuccess) s = MM_RUNTIME;
    for (int i = 0; s == MM_OK && i < count - 1; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, marks[i], marks[i + 1]) != cudaSuccess) s = MM_RUNTIME;
        mm_fmt(names[i], 16, "%s", stage[i]);
        us[i] = ms * 1000.0;
    }
    for (int i = 0; i < made; i++) cudaEventDestroy(marks[i]);
    if (s == MM_OK) *n = count - 1;
    return s;
}

mm_status modes_rows_map(const void *rows, uint64_t bytes, int k, const void **map)
{
    void *m = NULL;
    CUDA_TRY(mm_rows_map_create(rows, bytes / (uint64_t)k, (uint64_t)k, &m));
    *map = m;
    return MM_OK;
}

mm_status modes_out_map(void *out, uint64_t bytes, int n, const void **map)
{
    void *m = NULL;
    CUDA_TRY(mm_out_map_create(out, bytes / (2 * (uint64_t)n), (uint64_t)n, &m));
    *map = m;
    return MM_OK;
}

mm_status modes_supported(const mm_mode_ops *ops, const mm_config *cfg, int ranks, int *ok, char *why, size_t len)
{
    int mine = 1;
    if (len) why[0] = '\0';
    mm_status local = ops->supports ? ops->supports(cfg, ranks, &mine, why, len) : MM_OK;
    MM_TRY(mpi_agree_all(local, mine, ok)); /* a CUDA failure on any rank stops every rank */
    if (!*ok && mine) mm_fmt(why, len, "another rank's GPU cannot run this config");
    return MM_OK;
}

mm_status modes_agree_setup(mm_status local, void *state, void (*destroy)(void *), void **out)
{
    mm_status agreed;
    MM_TRY(mpi_agree(local, &agreed));
    if (agreed != MM_OK) {
        destroy(state);
        return agreed;
    }
    *out = state;
    return MM_OK;
}

mm_status modes_check_region(const char *mode, const mm_runtime *rt, uint64_t offset, uint64_t bytes)
{
    if (offset >= MM_SYM_HEAD_BYTES && offset + bytes <= rt->sym_bytes) return MM_OK;
    mm_error("%s: needs bytes %llu..%llu of symmetric memory, the runtime has %llu", mode, (unsigned long long)offset,
             (unsigned long long)(offset + bytes), (unsigned long long)rt->sym_bytes);
    return MM_RUNTIME;
}

mm_status modes_check_tokens(const char *mode, int tokens, int max_tokens)
{
    if (tokens <= max_tokens) return MM_OK;
    mm_error("%s: %d tokens exceed the %d the buffers hold", mode, tokens, max_tokens);
    return MM_USAGE;
}
