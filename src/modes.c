#include "modes.h"

#include "launch.h"

/* One entry per mode; a NULL `missing` means built. */
static const mm_mode_ops ops[MODE_COUNT] = {
    [MODE_FUSED] = {NULL, fused_sym_bytes, fused_setup, fused_run, fused_destroy, 1, fused_stages},
    [MODE_NORMAL] = {NULL, normal_sym_bytes, normal_setup, normal_run, normal_destroy, 0, normal_stages},
    [MODE_LL] = {NULL, ll_sym_bytes, ll_setup, ll_run, ll_destroy, 1, ll_stages},
};

const mm_mode_ops *mode_ops(mm_mode m)
{
    return &ops[m];
}

mm_status modes_weight_maps(const mm_config *cfg, int ranks, const mm_local_weights *w, const void **w1_map,
                            const void **w2_map)
{
    uint64_t local_experts = (uint64_t)(cfg->experts / ranks);
    void *map = NULL;
    CUDA_TRY(mm_weight_map_create(w->w1, local_experts * 2 * cfg->inter, (uint64_t)cfg->hidden, &map));
    *w1_map = map;
    CUDA_TRY(mm_weight_map_create(w->w2, local_experts * cfg->hidden, (uint64_t)cfg->inter, &map));
    *w2_map = map;
    return MM_OK;
}

mm_status modes_rows_map(const void *rows, uint64_t bytes, int k, const void **map)
{
    void *m = NULL;
    CUDA_TRY(mm_rows_map_create(rows, bytes / (uint64_t)k, (uint64_t)k, &m));
    *map = m;
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
