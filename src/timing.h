/* Timing one (mode, batch): CUDA events around each iteration, ranks lined up by the device
 * barrier before each, L2 optionally flushed outside the timed region, failures agreed on by all
 * ranks, times gathered to rank 0. Shared by bench and the self-test. */
#ifndef MEGAMOE_TIMING_H
#define MEGAMOE_TIMING_H

#include "power.h"
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
    int idle_us; /* the GPU idles this long after each flush, before the line-up (bench --idle-ms) */
} mm_timing;

/* What comes before each call of the side-by-side loop: the L2 flush and the ranks' line-up
 * (NULL: the work has none). */
typedef struct {
    mm_status (*flush)(void *ctx, cudaStream_t stream, int iteration);
    mm_status (*line_up)(void *ctx, cudaStream_t stream);
    void *ctx;
    int stall_iter; /* self-test: the timed iteration whose line-up this rank skips (-1: none) */
    int idle_us;    /* a one-thread sleep kernel of this long after the flush (0: none) */
} mm_call_prelude;

/* The loop bench and gemm time with, enqueued on `stream`: warmup + iters iterations of each of
 * the n works, iteration i of every work before iteration i + 1 of any (so they share the GPU's
 * clock states), each call after the prelude, events around the timed ones (start[j * iters + i],
 * stop[...]). With several works each timed call follows an untimed call of the same work, so it
 * finds what a loop of that work alone leaves behind (its code in the SMs' instruction caches;
 * L2 is flushed either way). exec: NULL, or per work a graph to launch instead of the step. A
 * failure to enqueue stops the loop; what was enqueued still drains. */
mm_status timing_enqueue_side_by_side(cudaStream_t stream, int n, const mm_step_fn *steps, void *const *ctxs,
                                      const cudaGraphExec_t *exec, int warmup, int iters, const mm_call_prelude *pre,
                                      cudaEvent_t *start, cudaEvent_t *stop);

/* us[i] = the time between start[i] and stop[i] (the stream has drained). */
mm_status timing_elapsed_us(const cudaEvent_t *start, const cudaEvent_t *stop, int count, double *us);

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

/* The joules of one work (`--energy-ms`): its calls back to back (no flush; `line_up` before each
 * when given), in chunks of ~10 ms with two chunks queued (an event each), while the host polls
 * NVML: after 200 ms of settling, a sample at the first step of the energy counter, another at
 * its first step `window_ms` later. The counter steps ~100 ms apart on an H200, so samples
 * anywhere else would be off by up to a step: the watts come from the steps, the seconds a call
 * from the whole loop. max_calls 0: the loop stops once the window closes; else it makes exactly
 * max_calls calls (ranks that line up must make the same number) and the window must close
 * before they end. out->valid 0: the counter did not step twice in time, or NVML failed: then
 * the calls went on as planned, the return is MM_OK and `why` says what NVML said (the caller
 * warns; the row stays timed). An error return (a CUDA call failed) has its reason in `why`. */
mm_status timing_energy_loop(cudaStream_t stream, mm_step_fn step, void *ctx, mm_step_fn line_up, void *line_up_ctx,
                             int max_calls, double median_us, int window_ms, mm_power *pw, mm_power_window *out,
                             char *why, size_t why_len);

/* The calls a rank makes for a window of window_ms after the settling, with a margin (bench's
 * ranks agree on it before the loop). */
int timing_energy_calls(double median_us, int window_ms);

/* bench's energy of one (mode, batch) on every rank: timing_energy_loop with the ranks lined up
 * before each of `calls` calls, failures agreed and contained as timing_run_rows does (the row
 * then says TIMEOUT or ERROR, noted "in the energy loop"); rank 0's row->energy gets the sum
 * over ranks of the joules a call and the watts, the largest capped share and the rank-0 clock
 * fields, valid only if every rank's window was; NVML failing on a rank costs the row its reading
 * (that rank warns, energy.nvml_failed), not its status. */
mm_status timing_energy_row(mm_runtime *rt, mm_step_fn step, void *ctx, int calls, double median_us, int window_ms,
                            mm_power *pw, mm_row *row);

#endif
