/* Types and limits shared by the kernels and the host: the peers' pointers, the failure record a
 * bounded wait leaves, the phases and pipeline waits it names, the communication context every
 * communicating kernel takes by value. Plain C, includable from host C and CUDA. */
#ifndef MEGAMOE_TYPES_H
#define MEGAMOE_TYPES_H

#include <stdint.h>

#define MM_MAX_PEERS 8 /* one NVLink domain of one node */
/* normal's communication kernels: CTAs of 128 threads, this many per SM of --comm-sms, all
 * resident at once (their __launch_bounds__ hold them to the registers that takes: at 137
 * registers the reduce-send ran a second wave and took 1.45x as long) */
#define MM_COMM_THREADS 128
#define MM_COMM_CTAS_PER_SM 4
#define MM_KERNEL_MAX_TOPK 16 /* per-token routing state the kernels keep (config.h MM_MAX_TOPK fits) */

/* Every rank's symmetric buffer as a plain pointer in this process's address space (NVLink loads
 * and stores go straight through them). Built once from NCCL's window; kernels take it by value
 * so they need no NCCL headers. */
typedef struct {
    int rank, ranks;
    char *base[MM_MAX_PEERS];
} mm_peers;

/* What a bounded wait leaves behind when it gives up. Lives in host-mapped memory so the host can
 * read it after the kernel returned; the first waiter to expire fills it (CAS on `code`). */
typedef struct {
    uint32_t code; /* 0 = no failure, MM_WAIT_TIMEOUT */
    uint32_t phase; /* mm_phase */
    int32_t rank;   /* the rank that waited */
    int32_t peer;   /* the rank it waited for (-1: not one rank) */
    uint64_t expected, seen;
} mm_wait_error;

#define MM_WAIT_TIMEOUT 1u

typedef enum {
    MM_PHASE_NONE = 0,
    MM_PHASE_BARRIER,      /* cross-rank barrier over the symmetric signal words */
    MM_PHASE_GRID_SYNC,    /* grid-wide sync of a persistent kernel */
    MM_PHASE_LL_DISPATCH,  /* ll: waiting for a peer's dispatch counts */
    MM_PHASE_LL_COMBINE,   /* ll: waiting for a peer's combine rows */
    MM_PHASE_FUSED_DISPATCH, /* fused: waiting for a peer's dispatch counts */
    MM_PHASE_FUSED_GEMM1,  /* fused: a GEMM2 tile waiting for its GEMM1 tiles (this rank) */
    MM_PHASE_FUSED_COMBINE, /* fused: waiting for a peer's combine rows */
    MM_PHASE_FUSED_PIPELINE, /* fused: a CTA's own shared-memory pipeline (expected: mm_pipe_wait, seen: the CTA) */
    MM_PHASE_GEMM_PIPELINE, /* the grouped GEMM of ll and normal: the same, in one of its CTAs */
    MM_PHASE_COUNT
} mm_phase;

/* The shared-memory pipeline waits of a GEMM CTA (gemm_tile.cuh): which one expired first. */
typedef enum {
    MM_PIPE_WAIT_NONE = 0,
    MM_PIPE_WAIT_STAGE_FULL,  /* math: a K block's operands */
    MM_PIPE_WAIT_STAGE_EMPTY, /* producer: the math releasing a stage */
    MM_PIPE_WAIT_ITEM_FREE,   /* producer: the math releasing an item slot */
    MM_PIPE_WAIT_ITEM_READY,  /* math: the producer publishing the next item */
    MM_PIPE_WAIT_TOKEN_ROWS,  /* fused dispatch: a round's BF16 rows (bulk copies into shared memory) */
    MM_PIPE_WAIT_GEMM1_BLOCK, /* fused GEMM2 producer: an I block of its row tile's GEMM1 (hand-off) */
    MM_PIPE_WAIT_COMBINE_ROWS, /* fused combine: a unit's rows (bulk copies into shared memory) */
    MM_PIPE_WAIT_COUNT
} mm_pipe_wait;

/* Device-side context every communicating kernel gets: peers, where barrier epochs live, the
 * failure record, and the wait bound. */
typedef struct {
    mm_peers peers;
    uint64_t *epoch;          /* local device memory: this rank's barrier epoch counter */
    uint32_t *abort_flag;     /* local device memory: set by the first expired wait */
    mm_wait_error *error;     /* host-mapped */
    uint64_t timeout_ns;
} mm_comm;

/* Symmetric-buffer head: barrier slots, one per source rank, written by that rank. */
#define MM_SIGNAL_BARRIER_OFFSET 0

#endif
