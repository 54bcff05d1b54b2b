/* The named correctness scenarios of `check`: shapes, token counts, routing and input magnitudes
 * that together cover what can go wrong. Plain data plus the rules that turn a scenario into a
 * config and per-rank token counts; no GPU. */
#ifndef MEGAMOE_SCENARIOS_H
#define MEGAMOE_SCENARIOS_H

#include "config.h"

typedef enum { TOKENS_SAME, TOKENS_FIRST_EMPTY, TOKENS_UNEVEN } mm_token_pattern;
typedef enum { X_NORMAL, X_TINY, X_HUGE, X_MIXED } mm_x_kind;

#define LIMIT_NONE (-1.0)
#define SCALE_FROM_SHAPE (-1)

typedef struct {
    const char *name;
    int hidden, inter;
    int experts;          /* total experts; 0: experts_per_rank * ranks */
    int experts_per_rank;
    int topk;
    double limit;         /* > 0: swiglu limit; LIMIT_NONE: no clamp */
    int ue8m0;            /* 0 FP32 scales, 1 UE8M0 */
    int tokens;           /* tokens per rank (base of the pattern) */
    mm_token_pattern pattern;
    const char *routing;
    mm_x_kind x_kind;
    const char *needs;    /* non-NULL: what the scenario needs that may be missing (SKIP note) */
    int ep_slice;         /* N > 0: one rank of EP N on one GPU (bench --ep-slice): E / N experts, the
                           * tokens of N x `tokens` that pick one of them, other picks masked */
    int fp4;              /* 0: FP8 experts; 1 + an mm_fp4_pattern (kernels/fp4.h): FP4 experts so drawn */
} mm_scenario;

int scenario_count(void);
const mm_scenario *scenario_get(int i);

/* The config the scenario runs at `ranks`; MM_USAGE with a reason if it cannot run there. */
mm_status scenario_config(const mm_scenario *s, int ranks, mm_config *out, char *why, size_t len);

/* check --weights: MM_WEIGHTS_FP4 gives every scenario's config FP4 experts drawn as checkpoints
 * (MM_FP4_REAL; an FP4 scenario keeps its pattern); anything else (-1: not given, or FP8) leaves
 * the scenario's own format. */
void scenario_apply_weights(mm_config *cfg, int weights);

/* Tokens of rank r (an EP slice: the tokens per rank of the EP it emulates). */
int scenario_tokens(const mm_scenario *s, int rank);
/* The most tokens a call of rank r can carry: scenario_tokens, or N times it for an EP N slice
 * (whose call carries those of the N x tokens that reach rank 0). */
int scenario_call_tokens_max(const mm_scenario *s, int rank);
/* An EP N slice's model: the config at EP N whose routing picks the slice's tokens
 * (scenario_config gives the slice itself, E / N experts at EP 1). */
mm_status scenario_full_config(const mm_scenario *s, mm_config *out, char *why, size_t len);

/* Small enough for the host reference (double precision, plain loops, experts regenerated on the
 * host): small shapes up to a few hundred tokens, model shapes at one token per rank. */
int scenario_host_reference(const mm_scenario *s);

/* Exponent range of x for the scenario's magnitudes (datagen.h's mm_x_params). */
void scenario_x_exponents(const mm_scenario *s, int *lo, int *count);

void scenario_shape_text(const mm_scenario *s, int ranks, char *buf, size_t len);

#endif
