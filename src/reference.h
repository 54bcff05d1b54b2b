/* Host reference of the MoE layer: recipe.md step by step, in double precision, written for
 * clarity rather than speed (small scenarios; a handful of tokens at model shapes).
 *
 * The quantization steps (2 and 5) are those of the recipe exactly (FP32 scales, FP8 codes); the
 * GEMM sums, the activation and the combine are in double, so the only differences a correct
 * kernel may show are its FP32 accumulation and its BF16 roundings. */
#ifndef MEGAMOE_REFERENCE_H
#define MEGAMOE_REFERENCE_H

#include <stdint.h>

#include "config.h"

/* One expert's weights as the recipe lays them out: FP8 (w, s), or with FP4 weights
 * (cfg->weights, docs/recipe.md) E2M1 codes and UE8M0 exponents (c, e; kernels/fp4.h). */
typedef struct {
    const uint8_t *w1; /* [2I][H] FP8: rows [0, I) gate, [I, 2I) up */
    const float *s1;   /* [2I/128][H/128] */
    const uint8_t *w2; /* [H][I] */
    const float *s2;   /* [H/128][I/128] */
    const uint8_t *c1, *e1; /* FP4 W1: codes [2I][H/2], exponents [2I][H/32] */
    const uint8_t *c2, *e2; /* FP4 W2: codes [H][I/2], exponents [H][I/32] */
} mm_expert_weights;

/* FP4 weights (docs/recipe.md): each 128 x 128 weight block's reference exponent, its largest
 * group exponent less 6, of a matrix of n_out rows (a last block of fewer rows over those) and K
 * = k, from its exponents [n_out][k / 32]: refs[(n / 128) * (k / 128) + kb]. */
void ref_fp4_block_refs(const uint8_t *exps, int n_out, int k, int *refs);
/* Step 3 / 6 with FP4 weights for one activation row (qa [k] FP8, sa [k/128]): out[n] for
 * n < n_out, in double, written from docs/recipe.md's definition independently of kernels/fp4.h's
 * expansion, with the blocks' references from ref_fp4_block_refs. Returns how many (row, group)
 * pairs lay past the exact range. */
long long ref_gemm_row_fp4(const uint8_t *qa, const float *sa, const uint8_t *codes, const uint8_t *exps, const int *refs,
                           int n_out, int k, double *out);

/* Supplies expert `e` (global id); the pointers stay valid until the next call. */
typedef struct {
    void *ctx;
    const mm_expert_weights *(*get)(void *ctx, int expert);
} mm_expert_source;

/* y[t][h] (double) for `tokens` tokens: x [T][H] BF16 bits, ids [T][K], w [T][K]. */
mm_status ref_host_layer(const mm_config *cfg, const mm_expert_source *experts, const uint16_t *x,
                         const int32_t *ids, const float *w, int tokens, double *y);

/* SwiGLU with the limit in double (recipe step 4), the inputs both SwiGLU checks draw (gate and
 * up in [-20, 20), w in [0, 1); tests/test_recipe.c on the host's float version, the selftest
 * swiglu-gpu on the GPU's) and their bound: |h - ref| <= 4e-6 |ref| (+1e-37). */
double ref_swiglu(float gate, float up, float w, int has_limit, float limit);
void ref_swiglu_input(uint64_t *rng, float *gate, float *up, float *w);
int ref_swiglu_close(float h, double ref);

/* An expert source that regenerates experts from the seed (datagen.h), caching a few. */
typedef struct mm_generated_experts mm_generated_experts;
mm_generated_experts *generated_experts_new(const mm_config *cfg, uint64_t seed);
void generated_experts_free(mm_generated_experts *g);
mm_expert_source generated_experts_source(mm_generated_experts *g);

/* Comparison of an output against the reference, recipe.md's calc_diff and friends. Sums are
 * kept separately so ranks can add theirs before the final division. */
typedef struct {
    double sum_ab, sum_aa_bb; /* calc_diff = 1 - 2 * sum_ab / sum_aa_bb */
    double max_abs, ref_max_abs;
    long long nonfinite, count;
} mm_diff_acc;

void diff_acc_add(mm_diff_acc *acc, double out, double ref);
void diff_acc_merge(mm_diff_acc *into, const mm_diff_acc *from);
/* 0 when both are all zeros (identical), per the definition otherwise. */
double diff_acc_calc(const mm_diff_acc *acc);
/* The pass rule of README "Correctness": no non-finite output and calc_diff <= tol (a negative
 * calc_diff, impossible for complete sums, fails too). */
int diff_acc_passes(const mm_diff_acc *acc, double tol);

#endif
