/* Timing one (mode, batch): CUDA events around each iteration, ranks lined up by the device
 * barrier before each, L2 optionally flushed outside the timed region, failures agreed on by all
 * ranks, times gathered to rank 0. Shared by bench and the self-test. */
#ifndef MEGAMOE_TIMING_H
#define MEGAMOE_TIMING_H

#include "report.h"
#include "runtime.h"

/* One iteration of the work being timed, enqueued on `stream` (must be graph-capturable when
 * graph mode is asked for). */
typedef mm_status (*mm_step_fn)(void *ctx, cudaStream_t stream);

typedef struct {
    int warmup, iters;
    int l2_flush;
    int graph;
    /* Self-test only: this rank skips the line-up barrier before timed iteration `stall_iter`
     * (-1: never), as a peer that stopped answering would. */
    int stall_iter;
} mm_timing;

/* Runs the loop on every rank and fills `row` (status, note, stats, per-rank medians) on rank 0.
 * Returns MM_OK when the row was measured or its failure was contained (then row->status says
 * TIMEOUT or ERROR and the communication state has been reset); an error return means the
 * runtime itself is unusable and the sweep must stop. */
mm_status timing_run_row(mm_runtime *rt, mm_step_fn step, void *ctx, const mm_timing *t,
                         mm_row *row, double *samples_us);

/* The same for n works timed side by side: iteration i of work 0, then of work 1, ..., then
 * iteration i + 1 of work 0, so every work sees the same share of each clock and power state
 * the GPU goes through (a sustained load can lower the clocks part way through a row, which
 * would favour whichever work ran first). Each timed call comes right after an untimed call of
 * the same work, as in a loop of one work. samples_us[j] gets work j's samples. A failure marks
 * every row with it: which work failed is for the caller to find out (by timing each alone). */
mm_status timing_run_rows(mm_runtime *rt, int n, const mm_step_fn *steps, void *const *ctxs,
                          const mm_timing *t, mm_row *const *rows, double *const *samples_us);

#endif
