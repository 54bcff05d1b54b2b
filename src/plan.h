/* The plan: what one layer must move and compute on one rank, the floor time that follows from
 * the machine's ceilings, and the memory each mode needs. No GPU, no MPI. */
#ifndef MEGAMOE_PLAN_H
#define MEGAMOE_PLAN_H

#include "../kernels/layout.h"
#include "config.h"
#include "sweep.h"

/* Measured H200 ceilings (../shared/reference/anchors.md, 2026-11-30). */
#define MM_DEFAULT_HBM_GBPS 3900.0
#define MM_DEFAULT_NVLINK_GBPS 370.0
#define MM_DEFAULT_FP8_TFLOPS 1325.0
/* Dispatched row header counted on the wire: source token, k slot, expert id, weight. */
#define MM_WIRE_HEADER_BYTES 16

typedef struct {
    double hbm_gbps, nvlink_gbps, fp8_tflops;
} mm_ceilings;

/* Where each ceiling a bench's floors divide by came from (src/ceilings.c): measured on the GPUs
 * that run, given on the command line, or plan's constant (with why it was not measured). */
typedef enum { CEIL_HBM = 0, CEIL_FP8 = 1, CEIL_NVLINK = 2, CEIL_COUNT = 3 } mm_ceiling_kind;
typedef enum { CEIL_CONSTANT = 0, CEIL_MEASURED = 1, CEIL_GIVEN = 2 } mm_ceiling_source;
typedef struct {
    mm_ceilings value;
    mm_ceiling_source source[CEIL_COUNT];
    char how[CEIL_COUNT][112]; /* what was measured, or why the constant stayed */
} mm_ceiling_set;
const char *ceiling_source_name(mm_ceiling_source s);
/* The ceiling of kind k in c (its field), to read or to set. */
double *ceiling_value(mm_ceilings *c, mm_ceiling_kind k);
double ceiling_get(const mm_ceilings *c, mm_ceiling_kind k);
/* plan's constants (or the given values: bit k of `given` for kind k), each with its reason */
void ceiling_set_defaults(mm_ceiling_set *set, const mm_ceilings *values, unsigned given);

typedef enum { BOUND_HBM = 0, BOUND_TC = 1, BOUND_NVLINK = 2 } mm_bound;
const char *bound_name(mm_bound b);

typedef struct {
    int batch;
    double active_experts; /* expected local experts with at least one token */
    double pairs;          /* (token, expert) pairs computed on this rank */
    double weight_bytes;   /* FP8 weights + FP32 block scales of the active experts */
    double flops;          /* 6 * H * I per pair (GEMM1 2*2I*H, GEMM2 2*H*I) */
    double nvlink_bytes;   /* remote pairs: FP8 row + scales + header out, BF16 row back */
    double t_hbm_us, t_tc_us, t_nvlink_us, floor_us;
    mm_bound bound;
} mm_floor;

/* Expected figures for uniform routing with distinct top-k (formulas in README "plan"). */
void plan_floor(const mm_config *cfg, int ranks, int batch, const mm_ceilings *c, mm_floor *out);
/* plan_floor, or with `slice` (--ep-slice: one rank of EP `ranks` emulated on one GPU) that rank's
 * weights and FLOPs without NVLink bytes (its dispatch and combine stay on the GPU). */
void plan_rank_floor(const mm_config *cfg, int ranks, int batch, int slice, const mm_ceilings *c, mm_floor *out);

/* How the fused kernel is expected to run its GEMM items at a batch (uniform routing): the rows
 * an active expert receives, cut into row tiles of 128, and whether the tiles average enough
 * rows for dual items (kernels/gemm_schedule.h mm_fused_large; the kernel decides per call from
 * the counts it received). */
typedef struct {
    double rows_per_tile;
    int dual;
} mm_fused_form;
mm_fused_form plan_fused_form(const mm_floor *fl);

/* The fused kernel's choice at a batch as plan's `fused` column prints it: the items (dual or
 * pass, from plan_fused_form) and the form (fused_schedule.h mm_fused_kernel_form) on a rank of
 * `ranks` (an EP slice of N: ranks = N, that rank's form) where it is not the base one: "dual",
 * "pass+handoff", "dual+fold", "swap" (FP4's swapped form). The hand-off form depends on the
 * CTAs: PLAN_FUSED_CTAS, an H100's or H200's SMs. */
#define PLAN_FUSED_CTAS 132
void plan_fused_label(const mm_config *cfg, int ranks, int batch, const mm_fused_form *items, char *out, size_t len);

/* Bytes of one expert's W1 and W2 in cfg's format: FP8 weights and their FP32 128x128 block
 * scales, or FP4 codes, exponents and each block's word. */
double plan_expert_weight_bytes(const mm_config *cfg);

mm_shape plan_shape(const mm_config *cfg, int ranks, int max_tokens);

/* Symmetric and local bytes per rank of one mode at `max_tokens` tokens per rank. */
void plan_mode_bytes(mm_mode mode, const mm_shape *s, uint64_t *sym, uint64_t *local);

/* What bench's own routing does at one batch (its generator and seed; rank r holds the global
 * tokens [r * batch, (r + 1) * batch)): the expected floor averages over routings, but a call
 * waits for the rank whose local experts its tokens touch most. */
typedef struct {
    int batch;
    int active;          /* the most local experts with at least one (token, k) on any rank */
    int rank;            /* the first rank with that many */
    double weight_bytes; /* their FP8 weights + block scales */
    double t_hbm_us;     /* those bytes at the HBM ceiling */
    /* Row tiles (MM_GEMM_BM rows of one expert each) of the rank with the most: each streams its
     * expert's weights through L2 into the SMs once, so at large batches the GEMMs follow tiles,
     * not rows; an expert's last tile is partly empty (rows / MM_GEMM_BM is the bound), but for
     * up to 8 rows past a full tile, which the fused kernel folds into it in a large call
     * (gemm_schedule.h mm_fused_expert_tiles). */
    int tiles;
    int tiles_rank;      /* the first rank with that many */
    long tiles_rows;     /* that rank's (token, k) rows */
} mm_seed_floor;
mm_status plan_seed_floor(const mm_config *cfg, const mm_routing *routing, uint64_t seed, int ranks, int batch,
                          const mm_ceilings *c, mm_seed_floor *out);
/* The floor of that routing (bench's `## floors`, work.routing_floor_us): the expected floor's
 * terms with the busiest rank's weight time in place of the expected one. */
double plan_routing_floor_us(const mm_floor *expected, const mm_seed_floor *sf);
/* Rows per local expert of rank `rank` under bench's routing (its generator and seed, rank r
 * holding global tokens [r * batch, (r + 1) * batch)): rows[experts / ranks]. `gemm --spread
 * routing` gives the GEMM core the tiles a mode's GEMMs see. */
mm_status plan_rank_rows(const mm_config *cfg, const mm_routing *routing, uint64_t seed, int ranks, int batch,
                         int rank, int32_t *rows);
/* The busiest rank's row tiles over its rows / MM_GEMM_BM (1: every tile full; 0 without rows). */
double plan_tile_excess(const mm_seed_floor *sf);

/* Prints the whole plan (header, buffers, expected floors, and the floor of bench's routing for
 * `routing` and `seed`) on `f`. `built` is a bit set over mm_mode: the others' buffers are marked
 * as planned layouts. */
mm_status plan_print(FILE *f, const mm_config *cfg, int ranks, const int *batches, int n_batches, int max_tokens,
                     int ll_max_tokens, const mm_ceilings *c, unsigned built, const mm_routing *routing,
                     uint64_t seed, int slice);

#endif
