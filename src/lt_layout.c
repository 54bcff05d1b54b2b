/* Operand layout of the cuBLASLt comparison: see lt_layout.h. */
#include "lt_layout.h"

#include <stdlib.h>

int lt_layout_plan(const int32_t *count, int experts, int kb, lt_layout *l)
{
    l->experts = experts;
    l->kb = kb;
    l->n_pad = calloc((size_t)experts, sizeof *l->n_pad);
    l->row0 = calloc((size_t)experts, sizeof *l->row0);
    l->scale0 = calloc((size_t)experts, sizeof *l->scale0);
    if (!l->n_pad || !l->row0 || !l->scale0) {
        lt_layout_free(l);
        return -1;
    }
    size_t rows = 0, scales = 0;
    for (int e = 0; e < experts; e++) {
        int c = count[e] > 0 ? count[e] : 0;
        l->n_pad[e] = (c + LT_ROW_ALIGN - 1) / LT_ROW_ALIGN * LT_ROW_ALIGN;
        l->row0[e] = rows;
        l->scale0[e] = scales;
        rows += (size_t)l->n_pad[e];
        scales += ((size_t)l->n_pad[e] * kb + 3) / 4 * 4;
    }
    l->rows_total = rows;
    l->scales_total = scales;
    return 0;
}

void lt_layout_free(lt_layout *l)
{
    free(l->n_pad);
    free(l->row0);
    free(l->scale0);
    l->n_pad = NULL;
    l->row0 = l->scale0 = NULL;
}

size_t lt_source_row(const int32_t *count, const int32_t *offset, int e, int r)
{
    return (size_t)offset[e] + (r < count[e] ? (size_t)r : 0);
}

void lt_pack_act_scales(const lt_layout *l, const int32_t *count, const int32_t *offset, const float *sa,
                        int rows_fastest, float *out)
{
    for (int e = 0; e < l->experts; e++) {
        float *dst = out + l->scale0[e];
        const int n = l->n_pad[e];
        for (int r = 0; r < n; r++) {
            const float *src = sa + lt_source_row(count, offset, e, r) * (size_t)l->kb;
            for (int b = 0; b < l->kb; b++) {
                size_t at = rows_fastest ? (size_t)b * n + r : (size_t)r * l->kb + b;
                dst[at] = src[b];
            }
        }
    }
}

void lt_transpose_weight_scales(const float *ws, int experts, int nb, int kb, float *out)
{
    for (int e = 0; e < experts; e++)
        for (int n = 0; n < nb; n++)
            for (int b = 0; b < kb; b++)
                out[((size_t)e * kb + b) * nb + n] = ws[((size_t)e * nb + n) * kb + b];
}
