/* Host side of the data generators: the tables some routing generators read, and host copies of
 * the data (bit-identical to the GPU's) for the CPU tests and the host reference. */
#ifndef MEGAMOE_DATAGEN_HOST_H
#define MEGAMOE_DATAGEN_HOST_H

#include <stdint.h>

#include "../kernels/datagen.h"
#include "config.h"
#include "sweep.h"

typedef struct {
    uint32_t *zipf_cdf; /* [experts] */
    uint32_t zipf_mult;
    float softplus[MM_SOFTPLUS_LEVELS];
} mm_route_tables;

/* Fills the tables for (routing, experts, seed); free with route_tables_free. */
mm_status route_tables_make(const mm_routing *r, int experts, uint64_t seed, mm_route_tables *t);
void route_tables_free(mm_route_tables *t);

/* Parameters for mm_route_token; table pointers are `zipf_cdf` / `softplus` as given (host or
 * device copies of the same tables). */
mm_route_params route_params(const mm_routing *r, const mm_config *cfg, int ranks, uint64_t seed,
                             const uint32_t *zipf_cdf, uint32_t zipf_mult, const float *softplus);

/* The default x magnitudes for a seed. */
mm_x_params x_params_default(uint64_t seed);

/* Host generation of what the GPU generates. */
void host_gen_x(mm_x_params params, uint64_t first_token, int tokens, int hidden, uint16_t *x);
void host_gen_routing(const mm_route_params *p, uint64_t first_token, int tokens, int32_t *ids,
                      float *w);
/* One MXFP4 expert (kernels/fp4.h, `pattern` an mm_fp4_pattern): codes [rows][K / 2] and UE8M0
 * exponents [rows][K / 32] of W1 ([2I][H]: c1, e1) and W2 ([H][I]: c2, e2). */
void host_gen_fp4_expert(uint64_t seed, int pattern, int expert, int hidden, int inter, uint8_t *c1, uint8_t *e1,
                         uint8_t *c2, uint8_t *e2);

/* --ep-slice: the tokens rank 0 of an EP deployment receives rows from. Of `tokens` tokens' top-k
 * picks over all experts (ids, w: [tokens][topk]), keeps the tokens that pick at least one of
 * experts [0, local) (rank 0's), compacted in token order, with their other picks masked (id -1,
 * weight 0); a kept pick keeps its id and weight, so the combine sums that rank's share of each
 * token's output. In place; returns how many tokens were kept. */
int ep_slice_select(int32_t *ids, float *w, int tokens, int topk, int local);

/* One expert: w1 [2I][H], w1_scale [2I/128][H/128], w2 [H][I], w2_scale [H/128][I/128]. */
void host_gen_expert(uint64_t seed, int expert, int hidden, int inter, int ue8m0, uint8_t *w1,
                     float *w1_scale, uint8_t *w2, float *w2_scale);

#endif
