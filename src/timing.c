#include "timing.h"

#include <stdlib.h>
#include <string.h>

#include "launch.h"
#include "stats.h"

/* Enqueues warmup + iters iterations; events only around the timed ones. A failure to enqueue
 * stops the loop; what was enqueued still drains. */
static mm_status enqueue(mm_runtime *rt, mm_step_fn step, void *ctx, const mm_timing *t,
                         cudaGraphExec_t exec, cudaEvent_t *start, cudaEvent_t *stop)
{
    for (int i = -t->warmup; i < t->iters; i++) {
        if (t->l2_flush) MM_TRY(runtime_flush_l2(rt, i));
        if (i != t->stall_iter || i < 0) MM_TRY(runtime_device_barrier(rt));
        if (i >= 0) CUDA_TRY(cudaEventRecord(start[i], rt->stream));
        if (exec)
            CUDA_TRY(cudaGraphLaunch(exec, rt->stream));
        else
            MM_TRY(step(ctx, rt->stream));
        if (i >= 0) CUDA_TRY(cudaEventRecord(stop[i], rt->stream));
    }
    return MM_OK;
}

static mm_status capture(mm_runtime *rt, mm_step_fn step, void *ctx, cudaGraph_t *graph,
                         cudaGraphExec_t *exec)
{
    CUDA_TRY(cudaStreamBeginCapture(rt->stream, cudaStreamCaptureModeThreadLocal));
    mm_status s = step(ctx, rt->stream);
    cudaError_t e = cudaStreamEndCapture(rt->stream, graph);
    MM_TRY(s);
    CUDA_TRY(e);
    CUDA_TRY(cudaGraphInstantiate(exec, *graph, 0));
    return MM_OK;
}

/* This rank's part: run, drain, read the failure record and the event times. */
static mm_status run_local(mm_runtime *rt, mm_step_fn step, void *ctx, const mm_timing *t,
                           double *mine, char *what, size_t what_len)
{
    mm_status s = MM_OK;
    cudaEvent_t *ev = calloc((size_t)t->iters * 2, sizeof(cudaEvent_t));
    if (!ev) return MM_RUNTIME;
    int made = 0;
    for (; made < t->iters * 2; made++)
        if (cudaEventCreate(&ev[made]) != cudaSuccess) { s = MM_RUNTIME; break; }
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (s == MM_OK && t->graph) s = capture(rt, step, ctx, &graph, &exec);
    if (s == MM_OK) s = enqueue(rt, step, ctx, t, exec, ev, ev + t->iters);
    cudaError_t sync = cudaStreamSynchronize(rt->stream);
    if (sync != cudaSuccess) {
        mm_error("CUDA %s while timing: %s", cudaGetErrorName(sync), cudaGetErrorString(sync));
        mm_fmt(what, what_len, "rank %d: CUDA %s", rt->rank, cudaGetErrorName(sync));
        s = MM_RUNTIME;
    }
    mm_status waited = runtime_wait_status(rt, what, what_len);
    if (waited != MM_OK) s = waited;
    for (int i = 0; s == MM_OK && i < t->iters; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, ev[i], ev[t->iters + i]) != cudaSuccess) s = MM_RUNTIME;
        mine[i] = ms * 1000.0;
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    for (int i = 0; i < made; i++) cudaEventDestroy(ev[i]);
    free(ev);
    if (s == MM_RUNTIME && !what[0]) mm_fmt(what, what_len, "rank %d: runtime error", rt->rank);
    return s;
}

mm_status timing_run_row(mm_runtime *rt, mm_step_fn step, void *ctx, const mm_timing *t,
                         mm_row *row, double *samples_us)
{
    double *mine = calloc((size_t)t->iters, sizeof(double));
    double *all = rt->rank == 0 ? calloc((size_t)t->iters * rt->world, sizeof(double)) : NULL;
    if (!mine || (rt->rank == 0 && !all)) {
        free(mine);
        free(all);
        mm_error("out of host memory for %d timing samples", t->iters);
        return MM_RUNTIME;
    }
    char what[256] = "";
    mm_status local = run_local(rt, step, ctx, t, mine, what, sizeof what);
    mm_status global;
    mm_status s = mpi_agree(local, &global);
    row->nranks = rt->world;
    if (s == MM_OK && global != MM_OK) {
        /* Contain it: everyone learns what happened, clears the signal state and goes on. */
        s = runtime_failure_note(rt, what, row->note, sizeof row->note);
        if (s == MM_OK) s = runtime_reset_comm(rt);
        row->status = global == MM_TIMEOUT ? ROW_TIMEOUT : ROW_ERROR;
        row->ranks_timed = 0;
        if (rt->rank == 0 && !row->note[0])
            mm_fmt(row->note, sizeof row->note, "%s on another rank", mm_status_name(global));
    } else if (s == MM_OK) {
        int rc = MPI_Gather(mine, t->iters, MPI_DOUBLE, all, t->iters, MPI_DOUBLE, 0,
                            MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) {
            mm_error("MPI_Gather of timings failed (%d)", rc);
            s = MM_RUNTIME;
        } else if (rt->rank == 0) {
            int slowest = 0;
            double worst = -1;
            for (int r = 0; r < rt->world; r++) {
                mm_stats st;
                stats_compute(all + (size_t)r * t->iters, t->iters, &st);
                if (r < MM_MAX_RANKS) row->rank_median_us[r] = st.median;
                if (st.median > worst) {
                    worst = st.median;
                    slowest = r;
                    row->stats = st;
                }
            }
            memcpy(samples_us, all + (size_t)slowest * t->iters, sizeof(double) * (size_t)t->iters);
            row->n_samples = t->iters;
            row->ranks_timed = rt->world;
            row->status = ROW_OK;
        }
    }
    free(mine);
    free(all);
    return s;
}
