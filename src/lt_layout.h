/* Operand layout for the cuBLASLt comparison of `megamoe gemm` (gemm_cublaslt.c): a per-expert
 * loop of block-scaled FP8 matmuls, each expert's rows padded to a multiple of 16 (cuBLASLt's FP8
 * kernels want aligned dimensions; the padding rows repeat the expert's first row and their
 * outputs are ignored). Plain C, CPU-tested (tests/test_lt_layout.c).
 *
 * Scale layouts: cuBLASLt's documentation fixes one per scale mode; which dimension runs fastest
 * is checked numerically at run time (gemm_cublaslt.c tries each and keeps the one whose output
 * matches the exact reference), so both orders are provided here. */
#ifndef MEGAMOE_LT_LAYOUT_H
#define MEGAMOE_LT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define LT_ROW_ALIGN 16

typedef struct {
    int experts, kb;     /* kb: K / 128 */
    int32_t *n_pad;      /* [E] rows of expert e padded to LT_ROW_ALIGN (0 when it has none) */
    size_t *row0;        /* [E] first padded row of expert e (X and D) */
    size_t *scale0;      /* [E] first activation scale of expert e (a multiple of 4: 16-byte aligned) */
    size_t rows_total;   /* padded rows over all experts */
    size_t scales_total; /* activation scales over all experts */
} lt_layout;

/* Fills the layout for `count` rows per expert (arrays allocated; lt_layout_free). 0 on success. */
int lt_layout_plan(const int32_t *count, int experts, int kb, lt_layout *l);
void lt_layout_free(lt_layout *l);

/* Source row (in the compact [rows][K] activations, experts one after another from `offset`) of
 * padded row r of expert e: the expert's own rows, then its first row again. */
size_t lt_source_row(const int32_t *count, const int32_t *offset, int e, int r);

/* Activation scales for cuBLASLt from compact sa [rows][kb]: expert e's block at scale0[e], either
 * k-block-major ([kb][n_pad], rows fastest: rows_fastest = 1) or row-major ([n_pad][kb]). */
void lt_pack_act_scales(const lt_layout *l, const int32_t *count, const int32_t *offset, const float *sa,
                        int rows_fastest, float *out);

/* Weight block scales [E][nb][kb] (k-blocks fastest) into [E][kb][nb] (n-blocks fastest). */
void lt_transpose_weight_scales(const float *ws, int experts, int nb, int kb, float *out);

#endif
