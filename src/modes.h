/* The modes as a table of operations (the nccl-tests habit): bench and check drive every mode
 * through it, and a mode that is not built yet says why instead of running. */
#ifndef MEGAMOE_MODES_H
#define MEGAMOE_MODES_H

#include "config.h"
#include "report.h" /* MM_MAX_STAGES */
#include "runtime.h"
#include "sweep.h"

/* This rank's local experts' weights, in the recipe's layout. */
typedef struct {
    const uint8_t *w1, *w2;
    const float *s1, *s2;
} mm_local_weights;

/* One call: this rank's tokens in, its outputs out (device pointers). */
typedef struct {
    int tokens;
    const uint16_t *x;
    const int32_t *ids;
    const float *topk_w;
    uint16_t *y;
} mm_mode_io;

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
} mm_mode_ops;

const mm_mode_ops *mode_ops(mm_mode m);

/* Helpers the modes share. TMA descriptors of this rank's local W1 and W2 (cudaFree them). */
mm_status modes_weight_maps(const mm_config *cfg, int ranks, const mm_local_weights *w, const void **w1_map,
                            const void **w2_map);
/* TMA descriptor over a GEMM input of [bytes / k][k] FP8 rows (cudaFree it). */
mm_status modes_rows_map(const void *rows, uint64_t bytes, int k, const void **map);
/* The mode's symmetric region [offset, offset + bytes) lies in the runtime's buffer, past its head. */
mm_status modes_check_region(const char *mode, const mm_runtime *rt, uint64_t offset, uint64_t bytes);
/* A call's tokens fit the buffers the mode was set up for (MM_USAGE with a message if not). */
mm_status modes_check_tokens(const char *mode, int tokens, int max_tokens);
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
mm_status fused_stages(void *state, const mm_mode_io *io, cudaStream_t stream, char names[][16],
                       double *us, int *n);

#endif
