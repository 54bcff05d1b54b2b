/* Model configuration: the MoE layer's shape and numerics, read from a model's config.json.
 *
 * Keys follow the models' own config.json so a published file can be passed as it is: the Hugging
 * Face spellings of the other MoE families are read too (num_experts, num_local_experts,
 * intermediate_size, ...; a multimodal model's text_config), and what our layer does not compute
 * (another activation, biases, router weights applied to the input) is refused naming its key.
 * Other keys are ignored. An optional "bench" object holds sweep defaults. */
#ifndef MEGAMOE_CONFIG_H
#define MEGAMOE_CONFIG_H

#include <stddef.h>

#include "common.h"

#define MM_MAX_BATCHES 128
#define MM_MAX_TOPK 16 /* per-token routing state lives in registers in every kernel */
#define MM_QUANT_BLOCK 128

typedef enum { MM_SCALE_FP32 = 0, MM_SCALE_UE8M0 = 1 } mm_scale_fmt;
/* The experts' weight format (docs/recipe.md): FP8 with 128 x 128 FP32 block scales, or MXFP4
 * (E2M1 with a UE8M0 exponent per 32 weights along K). */
typedef enum { MM_WEIGHTS_FP8 = 0, MM_WEIGHTS_FP4 = 1 } mm_weights_fmt;

typedef struct {
    char name[96];       /* "name" key, else the file's base name without .json */
    char path[512];      /* where it was read from */
    int hidden;          /* hidden_size */
    int inter;           /* moe_intermediate_size (or intermediate_size) */
    int experts;         /* n_routed_experts (or num_experts, num_local_experts) */
    int topk;            /* num_experts_per_tok (or experts_per_token) */
    int shared_experts;  /* n_shared_experts (or num_shared_experts, 1 where
                          * shared_expert_intermediate_size > 0); reported, not computed */
    /* where two spellings of a quantity could apply, which key was read (one line each, for the
     * user: config_load prints them as notes) */
    char notes[512];
    const char *experts_key; /* the spelling the expert count was read from, for messages */
    double routed_scaling_factor;
    int has_swiglu_limit; /* swiglu_limit absent or null: no clamp */
    double swiglu_limit;
    mm_scale_fmt scale_fmt; /* quantization_config.scale_fmt or scale_fmt: "ue8m0" or fp32 */
    mm_weights_fmt weights; /* quantization_config.quant_method "mxfp4": FP4; else FP8 */
    int fp4_pattern;        /* what the FP4 experts are generated as (kernels/fp4.h mm_fp4_pattern):
                             * a check scenario's; a model config's are MM_FP4_REAL */
    /* "bench" object (all optional; 0 = not given) */
    int n_batches;
    int batches[MM_MAX_BATCHES];
    int max_tokens_per_rank;
    char routing[64];
} mm_config;

/* Parse JSON text. `origin` names the source in messages. On failure writes one line (without the
 * "megamoe: error:" prefix) into err and returns MM_USAGE. */
mm_status config_parse(const char *text, size_t len, const char *origin, mm_config *out,
                       char *err, size_t errlen);

/* Read and parse a file; failures are printed as one line and return MM_USAGE. */
mm_status config_load(const char *path, mm_config *out);

/* Rules that depend on the EP size: experts divisible by ranks. */
mm_status config_check_ranks(const mm_config *cfg, int ranks, char *err, size_t errlen);

#endif
