#include "modes.h"

/* One entry per mode; a NULL `missing` means built. */
static const mm_mode_ops ops[MODE_COUNT] = {
    [MODE_FUSED] = {NULL, fused_sym_bytes, fused_setup, fused_run, fused_destroy, 1, fused_stages},
    [MODE_NORMAL] = {"not implemented", NULL, NULL, NULL, NULL, 0, NULL},
    [MODE_LL] = {NULL, ll_sym_bytes, ll_setup, ll_run, ll_destroy, 1, ll_stages},
};

const mm_mode_ops *mode_ops(mm_mode m)
{
    return &ops[m];
}
