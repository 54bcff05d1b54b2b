/* The modes as a table of operations (the nccl-tests habit): bench and check drive every mode
 * through it, and a mode that is not built yet says why instead of running. */
#ifndef MEGAMOE_MODES_H
#define MEGAMOE_MODES_H

#include "config.h"
#include "../kernels/layout.h"
#include "report.h" /* MM_MAX_STAGES */
#include "runtime.h"
#include "sweep.h"

/* This rank's local experts' weights, in the recipe's layout: FP8 weights w1, w2 with block scales
 * s1, s2; or (fp4 1) MXFP4 codes w1, w2 with exponents e1, e2, and s1, s2 their blocks' words
 * (mm_expert_args). */
typedef struct {
    const uint8_t *w1, *w2;
    const float *s1, *s2;
    int fp4;
    const uint8_t *e1, *e2;
} mm_local_weights;

/* One call: this rank's tokens in, its outputs out (device pointers; api.h). */
typedef mm_call_io mm_mode_io;

typedef struct {
    const char *missing; /* NULL when the mode is built; else the SKIP note */
    /* bytes needed in every rank's symmetric buffer beyond the runtime's head */
    uint64_t (*sym_bytes)(const mm_config *cfg, int ranks, int max_tokens);
    /* the mode's region starts at byte sym_offset of every rank's symmetric buffer (the same
     * offset on every rank; modes set up side by side get disjoint regions) */
    mm_status (*setup)(void **state, mm_runtime *rt, const mm_config *cfg, int max_tokens,
                       uint64_t sym_offset, const mm_local_weights *w);
    /* enqueue one call on `stream` (graph-capturable when graph_ok) */
    mm_status (*run)(void *state, const mm_mode_io *io, cudaStream_t stream);
    void (*destroy)(void *state);
    int graph_ok;
    /* --breakdown (NULL: no stages): one instrumented call, synchronous; fills up to
     * MM_MAX_STAGES stage names and durations in us and returns how many */
    mm_status (*stages)(void *state, const mm_mode_io *io, cudaStream_t stream, char names[][16],
                        double *us, int *n);
    /* NULL (every valid config runs), or whether this config runs on this rank's GPU at `ranks`
     * ranks: *ok 0 with the SKIP note in `why` when it does not (a limit of the mode's kernel,
     * not a bad config: the other modes still run it). Host only; the device must be set. */
    mm_status (*supports)(const mm_config *cfg, int ranks, int *ok, char *why, size_t len);
} mm_mode_ops;

const mm_mode_ops *mode_ops(mm_mode m);

/* Helpers the modes share. The kernels' view of the config, for buffers of max_tokens per rank. */
mm_model_args modes_model_args(const mm_config *cfg, int max_tokens);
/* Where an exchange region laid out as `sym` (ll, fused) starts at sym_offset in the symmetric
 * buffer, with the parts' offsets and the dispatched row's size for `shape`. */
mm_exchange modes_exchange(const mm_layout *sym, uint64_t sym_offset, const mm_shape *shape);
/* Experts [first, first + E / ranks) of weights laid out for all of cfg's experts (FP8: w1, w2
 * with block scales s1, s2; FP4: codes w1, w2 with exponents e1, e2 and the blocks' words s1,
 * s2), as the modes take them. */
mm_local_weights modes_local_weights(const mm_config *cfg, size_t first, const uint8_t *w1, const uint8_t *w2,
                                     const float *s1, const float *s2, const uint8_t *e1, const uint8_t *e2);
/* This rank's weights with TMA descriptors of W1 and W2 (modes_expert_args_free releases them). */
mm_status modes_expert_args(const mm_config *cfg, int ranks, const mm_local_weights *w, mm_expert_args *out);
void modes_expert_args_free(mm_expert_args *w);
/* --breakdown for a mode whose launches record `count` events (stage i is the gap between
 * events i and i + 1): creates the events, calls run(ctx, events) once, waits for the stream and
 * fills names and us with the count - 1 stages. */
mm_status modes_event_stages(int count, const char *const *stage, mm_status (*run)(void *ctx, cudaEvent_t *marks),
                             void *ctx, cudaStream_t stream, char names[][16], double *us, int *n);
/* TMA descriptor over a GEMM input of [bytes / k][k] FP8 rows (cudaFree it). */
mm_status modes_rows_map(const void *rows, uint64_t bytes, int k, const void **map);
/* The same for a BF16 GEMM output region of `bytes` as [rows][n] (mm_out_map_create). */
mm_status modes_out_map(void *out, uint64_t bytes, int n, const void **map);
/* The mode's symmetric region [offset, offset + bytes) lies in the runtime's buffer, past its head. */
mm_status modes_check_region(const char *mode, const mm_runtime *rt, uint64_t offset, uint64_t bytes);
/* A call's tokens fit the buffers the mode was set up for (MM_USAGE with a message if not). */
mm_status modes_check_tokens(const char *mode, int tokens, int max_tokens);
/* Whether a mode runs `cfg` on every rank (ops->supports, then the ranks agree: one rank's GPU
 * that cannot makes every rank skip it, so all ranks run the same modes). *ok 0: `why` holds
 * this rank's reason, or says another rank's GPU could not. Collective. */
mm_status modes_supported(const mm_mode_ops *ops, const mm_config *cfg, int ranks, int *ok, char *why, size_t len);
/* A collective setup's end: every rank agrees on `local` (the agreement is also the barrier that
 * orders every rank's clean region before anyone's first call); on failure `state` is destroyed. */
mm_status modes_agree_setup(mm_status local, void *state, void (*destroy)(void *), void **out);

/* ll (mode_ll.c) */
uint64_t ll_sym_bytes(const mm_config *cfg, int ranks, int max_tokens);
mm_status ll_setup(void **state, mm_runtime *rt, const mm_config *cfg, int max_tokens,
                   uint64_t sym_offset, const mm_local_weights *w);
mm_status ll_run(void *state, const mm_mode_io *io, cudaStream_t stream);
void ll_destroy(void *state);
mm_status ll_stages(void *state, const mm_mode_io *io, cudaStream_t stream, char names[][16], double *us,
                    int *n);

/* normal (mode_normal.c) */
uint64_t normal_sym_bytes(const mm_config *cfg, int ranks, int max_tokens);
mm_status normal_setup(void **state, mm_runtime *rt, const mm_config *cfg, int max_tokens,
                       uint64_t sym_offset, const mm_local_weights *w);
mm_status normal_run(void *state, const mm_mode_io *io, cudaStream_t stream);
void normal_destroy(void *state);
mm_status normal_stages(void *state, const mm_mode_io *io, cudaStream_t stream, char names[][16],
                        double *us, int *n);

/* fused (mode_fused.c) */
uint64_t fused_sym_bytes(const mm_config *cfg, int ranks, int max_tokens);
mm_status fused_setup(void **state, mm_runtime *rt, const mm_config *cfg, int max_tokens,
                      uint64_t sym_offset, const mm_local_weights *w);
mm_status fused_run(void *state, const mm_mode_io *io, cudaStream_t stream);
void fused_destroy(void *state);
mm_status fused_supports(const mm_config *cfg, int ranks, int *ok, char *why, size_t len);
mm_status fused_stages(void *state, const mm_mode_io *io, cudaStream_t stream, char names[][16],
                       double *us, int *n);

#endif
