#include "timing.h"

#include <stdlib.h>
#include <string.h>

#include "launch.h"
#include "stats.h"

#define MM_MAX_WORKS 8

static mm_status call(cudaStream_t stream, mm_step_fn step, void *ctx, cudaGraphExec_t exec)
{
    if (exec) CUDA_TRY(cudaGraphLaunch(exec, stream));
    else MM_TRY(step(ctx, stream));
    return MM_OK;
}

mm_status timing_enqueue_side_by_side(cudaStream_t stream, int n, const mm_step_fn *steps, void *const *ctxs,
                                      const cudaGraphExec_t *exec, int warmup, int iters, const mm_call_prelude *pre,
                                      cudaEvent_t *start, cudaEvent_t *stop)
{
    for (int i = -warmup; i < iters; i++) {
        for (int j = 0; j < n; j++) {
            const int at = j * iters + i;
            const cudaGraphExec_t graph = exec ? exec[j] : NULL;
            if (n > 1 && i >= 0) {
                if (pre->line_up) MM_TRY(pre->line_up(pre->ctx, stream));
                MM_TRY(call(stream, steps[j], ctxs[j], graph));
            }
            if (pre->flush) MM_TRY(pre->flush(pre->ctx, stream, i));
            if (pre->idle_us > 0) CUDA_TRY(mm_launch_idle((uint64_t)pre->idle_us * 1000u, stream));
            if (pre->line_up && (i != pre->stall_iter || i < 0)) MM_TRY(pre->line_up(pre->ctx, stream));
            if (i >= 0) CUDA_TRY(cudaEventRecord(start[at], stream));
            MM_TRY(call(stream, steps[j], ctxs[j], graph));
            if (i >= 0) CUDA_TRY(cudaEventRecord(stop[at], stream));
        }
    }
    return MM_OK;
}

mm_status timing_elapsed_us(const cudaEvent_t *start, const cudaEvent_t *stop, int count, double *us)
{
    for (int i = 0; i < count; i++) {
        float ms = 0;
        CUDA_TRY(cudaEventElapsedTime(&ms, start[i], stop[i]));
        us[i] = ms * 1000.0;
    }
    return MM_OK;
}

static mm_status rt_flush(void *ctx, cudaStream_t stream, int iteration)
{
    (void)stream; /* the runtime's own stream */
    mm_runtime *rt = (mm_runtime *)ctx;
    return runtime_flush_l2(rt, rt->flush_mode, iteration);
}

static mm_status rt_line_up(void *ctx, cudaStream_t stream)
{
    (void)stream;
    return runtime_device_barrier((mm_runtime *)ctx);
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

/* This rank's part: run, drain, read the failure record and the event times (mine[j * iters + i]). */
static mm_status run_local(mm_runtime *rt, int n, const mm_step_fn *steps, void *const *ctxs, const mm_timing *t,
                           double *mine, char *what, size_t what_len)
{
    mm_status s = MM_OK;
    const int events = n * t->iters;
    cudaEvent_t *ev = calloc((size_t)events * 2, sizeof(cudaEvent_t));
    if (!ev) return MM_RUNTIME;
    int made = 0;
    for (; made < events * 2; made++)
        if (cudaEventCreate(&ev[made]) != cudaSuccess) { s = MM_RUNTIME; break; }
    cudaGraph_t graph[MM_MAX_WORKS] = {0};
    cudaGraphExec_t exec[MM_MAX_WORKS] = {0};
    for (int j = 0; s == MM_OK && t->graph && j < n; j++) s = capture(rt, steps[j], ctxs[j], &graph[j], &exec[j]);
    rt->flush_mode = t->l2_flush;
    const mm_call_prelude pre = {t->l2_flush ? rt_flush : NULL, rt_line_up, rt, t->stall_iter, t->idle_us};
    if (s == MM_OK) s = timing_enqueue_side_by_side(rt->stream, n, steps, ctxs, exec, t->warmup, t->iters, &pre, ev, ev + events);
    cudaError_t sync = cudaStreamSynchronize(rt->stream);
    if (sync != cudaSuccess) {
        mm_error("CUDA %s while timing: %s", cudaGetErrorName(sync), cudaGetErrorString(sync));
        mm_fmt(what, what_len, "rank %d: CUDA %s", rt->rank, cudaGetErrorName(sync));
        s = MM_RUNTIME;
    }
    mm_status waited = runtime_wait_status(rt, what, what_len);
    if (waited != MM_OK) s = waited;
    if (s == MM_OK) s = timing_elapsed_us(ev, ev + events, events, mine);
    for (int j = 0; j < n; j++) {
        if (exec[j]) cudaGraphExecDestroy(exec[j]);
        if (graph[j]) cudaGraphDestroy(graph[j]);
    }
    for (int i = 0; i < made; i++) cudaEventDestroy(ev[i]);
    free(ev);
    if (s == MM_RUNTIME && !what[0]) mm_fmt(what, what_len, "rank %d: runtime error", rt->rank);
    return s;
}

/* Rank 0: work j's row from the gathered times all[r][j * iters + i]: the slowest rank's median
 * is the row's, its samples the row's samples. */
static void fill_row(const double *all, int world, int n, int j, int iters, mm_row *row, double *samples_us)
{
    int slowest = 0;
    double worst = -1;
    double *mine = malloc(sizeof(double) * (size_t)iters);
    for (int r = 0; r < world && mine; r++) {
        memcpy(mine, all + ((size_t)r * n + j) * iters, sizeof(double) * (size_t)iters);
        mm_stats st;
        stats_compute(mine, iters, &st);
        if (r < MM_MAX_RANKS) row->rank_median_us[r] = st.median;
        if (st.median > worst) {
            worst = st.median;
            slowest = r;
            row->stats = st;
        }
    }
    free(mine);
    memcpy(samples_us, all + ((size_t)slowest * n + j) * iters, sizeof(double) * (size_t)iters);
    row->n_samples = iters;
    row->ranks_timed = world;
    row->status = ROW_OK;
}

mm_status timing_run_rows(mm_runtime *rt, int n, const mm_step_fn *steps, void *const *ctxs,
                          const mm_timing *t, mm_row *const *rows, double *const *samples_us)
{
    if (n < 1 || n > MM_MAX_WORKS) return MM_RUNTIME;
    const size_t per_rank = (size_t)n * t->iters;
    double *mine = calloc(per_rank, sizeof(double));
    double *all = rt->rank == 0 ? calloc(per_rank * rt->world, sizeof(double)) : NULL;
    if (!mine || (rt->rank == 0 && !all)) {
        free(mine);
        free(all);
        mm_error("out of host memory for %d timing samples", t->iters);
        return MM_RUNTIME;
    }
    char what[256] = "";
    mm_status local = run_local(rt, n, steps, ctxs, t, mine, what, sizeof what);
    mm_status global;
    mm_status s = mpi_agree(local, &global);
    for (int j = 0; j < n; j++) rows[j]->nranks = rt->world;
    if (s == MM_OK && global != MM_OK) {
        /* Contain it: everyone learns what happened, clears the signal state and goes on. */
        s = runtime_failure_note(rt, what, rows[0]->note, sizeof rows[0]->note);
        if (s == MM_OK) s = runtime_reset_comm(rt);
        if (rt->rank == 0 && !rows[0]->note[0])
            mm_fmt(rows[0]->note, sizeof rows[0]->note, "%s on another rank", mm_status_name(global));
        for (int j = 0; j < n; j++) {
            rows[j]->status = global == MM_TIMEOUT ? ROW_TIMEOUT : ROW_ERROR;
            rows[j]->ranks_timed = 0;
            if (j) memcpy(rows[j]->note, rows[0]->note, sizeof rows[j]->note);
        }
    } else if (s == MM_OK) {
        int rc = MPI_Gather(mine, (int)per_rank, MPI_DOUBLE, all, (int)per_rank, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) {
            mm_error("MPI_Gather of timings failed (%d)", rc);
            s = MM_RUNTIME;
        } else if (rt->rank == 0) {
            for (int j = 0; j < n; j++) fill_row(all, rt->world, n, j, t->iters, rows[j], samples_us[j]);
        }
    }
    free(mine);
    free(all);
    return s;
}

mm_status timing_run_row(mm_runtime *rt, mm_step_fn step, void *ctx, const mm_timing *t,
                         mm_row *row, double *samples_us)
{
    return timing_run_rows(rt, 1, &step, &ctx, t, &row, &samples_us);
}

int timing_energy_calls(double median_us, int window_ms)
{
    /* the settling, the window, up to two steps of the counter to find its ends, and a margin for
     * a loop that runs slower back to back than its timed median (the power cap) */
    const double seconds = 0.2 + window_ms * 1e-3 + 0.2 + 0.5;
    const double calls = median_us > 0 ? seconds * 1e6 / median_us : 1e6;
    return calls < 8 ? 8 : calls > 2e7 ? 20000000 : (int)calls;
}

/* Up to `chunk` calls (fewer where max_calls ends them), each after the line-up when there is one,
 * then `done`'s record when given. */
static mm_status energy_chunk(cudaStream_t stream, mm_step_fn step, void *ctx, mm_step_fn line_up, void *line_up_ctx,
                              int chunk, int max_calls, int *calls, cudaEvent_t done)
{
    for (int c = 0; c < chunk && (!max_calls || *calls < max_calls); c++, (*calls)++) {
        if (line_up) MM_TRY(line_up(line_up_ctx, stream));
        MM_TRY(step(ctx, stream));
    }
    if (done) CUDA_TRY(cudaEventRecord(done, stream));
    return MM_OK;
}

mm_status timing_energy_loop(cudaStream_t stream, mm_step_fn step, void *ctx, mm_step_fn line_up, void *line_up_ctx,
                             int max_calls, double median_us, int window_ms, mm_power *pw, mm_power_window *out,
                             char *why, size_t why_len)
{
    enum { SETTLE, FIRST_STEP, WINDOW, LAST_STEP, DONE };
    const double settle_s = 0.2, give_up_s = settle_s + window_ms * 1e-3 + 5.0;
    const int chunk = median_us > 0 && median_us < 10000.0 ? (int)(10000.0 / median_us) : 1;
    cudaEvent_t ev[2] = {NULL, NULL};
    mm_power_sample a = {0}, b = {0}, cur = {0};
    int calls = 0, phase = SETTLE, next = 0, steps = 0, queued = 0;
    /* NVML failed: no more samples and no reading, but the calls go on (the other ranks' line-ups
     * wait for this rank's), so the row stays timed and only its joules are missing */
    char lost[192] = "";
    memset(out, 0, sizeof *out);
    why[0] = 0;
    mm_status s = MM_OK;
    for (int i = 0; i < 2 && s == MM_OK; i++)
        if (cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming) != cudaSuccess) s = MM_RUNTIME;
    if (s == MM_OK) (void)mm_power_read(pw, &cur, lost, sizeof lost); /* its wall_s even where it fails */
    const double t0 = cur.wall_s;
    unsigned long long seen = cur.energy_mj;
    for (int i = 0; i < 2 && s == MM_OK; i++) s = energy_chunk(stream, step, ctx, line_up, line_up_ctx, chunk, max_calls, &calls, ev[i]);
    queued = 2;
    while (s == MM_OK && !lost[0] && phase != DONE) {
        const cudaError_t q = cudaEventQuery(ev[next]);
        if (q == cudaSuccess) {
            queued--;
            if (!max_calls || calls < max_calls) { /* the older chunk is done: queue one behind the newer */
                s = energy_chunk(stream, step, ctx, line_up, line_up_ctx, chunk, max_calls, &calls, ev[next]);
                queued++;
            }
            next ^= 1;
        } else if (q != cudaErrorNotReady) {
            s = MM_RUNTIME;
        }
        if (s != MM_OK || mm_power_read(pw, &cur, lost, sizeof lost) != MM_OK) break;
        const int stepped = cur.energy_mj != seen;
        seen = cur.energy_mj;
        steps += stepped && phase >= WINDOW;
        if (phase == SETTLE && cur.wall_s - t0 >= settle_s) phase = FIRST_STEP;
        else if (phase == FIRST_STEP && stepped) { a = cur; phase = WINDOW; }
        else if (phase == WINDOW && cur.wall_s - a.wall_s >= window_ms * 1e-3) phase = LAST_STEP;
        else if (phase == LAST_STEP && stepped) { b = cur; phase = DONE; }
        /* a counter that never steps, or a fixed number of calls that ran out first: no reading */
        if (phase != DONE && (cur.wall_s - t0 > give_up_s || queued == 0)) break;
    }
    /* a fixed number of calls is made in full whatever the window did: the other ranks make theirs */
    while (s == MM_OK && max_calls && calls < max_calls)
        s = energy_chunk(stream, step, ctx, line_up, line_up_ctx, chunk, max_calls, &calls, NULL);
    const cudaError_t sync = cudaStreamSynchronize(stream);
    if (sync != cudaSuccess && s == MM_OK) {
        mm_fmt(why, why_len, "CUDA %s in the energy loop", cudaGetErrorName(sync));
        s = MM_RUNTIME;
    }
    for (int i = 0; i < 2; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    if (s != MM_OK) {
        if (!why[0]) mm_fmt(why, why_len, "a CUDA call failed in the energy loop");
        return s;
    }
    mm_power_sample end;
    char end_why[192] = "";
    const mm_status end_read = mm_power_read(pw, &end, end_why, sizeof end_why); /* its wall_s even where it fails */
    if (!lost[0] && end_read != MM_OK) mm_fmt(lost, sizeof lost, "%s", end_why);
    if (!lost[0] && phase == DONE) *out = mm_power_between(&a, &b, calls, end.wall_s - t0);
    else out->window_s = cur.wall_s - t0;
    out->loop_s = end.wall_s - t0;
    if (lost[0]) {
        out->valid = 0;
        out->nvml_failed = 1;
        mm_fmt(why, why_len, "NVML failed in the energy loop (%s)", lost);
    }
    out->calls = calls;
    out->steps = steps;
    return MM_OK;
}

mm_status timing_energy_row(mm_runtime *rt, mm_step_fn step, void *ctx, int calls, double median_us, int window_ms,
                            mm_power *pw, mm_row *row)
{
    char why[256] = "", what[256] = "";
    mm_power_window w;
    memset(&w, 0, sizeof w);
    mm_status local = timing_energy_loop(rt->stream, step, ctx, rt_line_up, rt, calls, median_us, window_ms, pw, &w,
                                         why, sizeof why);
    if (local != MM_OK) mm_fmt(what, sizeof what, "rank %d: %s", rt->rank, why);
    else if (why[0]) mm_warn("bench: --energy-ms: rank %d: no reading for this row: %s", rt->rank, why);
    const mm_status waited = runtime_wait_status(rt, what, sizeof what);
    if (waited != MM_OK) local = waited;
    mm_status global;
    mm_status s = mpi_agree(local, &global);
    if (s == MM_OK && global != MM_OK) {
        char note[192] = "";
        s = runtime_failure_note(rt, what, note, sizeof note);
        if (s == MM_OK) s = runtime_reset_comm(rt);
        if (rt->rank == 0) {
            row->status = global == MM_TIMEOUT ? ROW_TIMEOUT : ROW_ERROR;
            mm_fmt(row->note, sizeof row->note, "in the energy loop: %s",
                   note[0] ? note : mm_status_name(global));
        }
        return s;
    }
    if (s != MM_OK) return s;
    /* rank 0 gets the sums of joules a call and watts, the largest capped share, and whether every
     * rank's window closed */
    double sums[2] = {w.joules_per_call, w.watts}, tot[2] = {0, 0};
    double most[1] = {w.capped_frac}, capped[1] = {0};
    int valid = w.valid, all_valid = 0, failed = w.nvml_failed, any_failed = 0;
    if (MPI_Reduce(sums, tot, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Reduce(most, capped, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Reduce(&valid, &all_valid, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Reduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        mm_error("MPI_Reduce of the energy readings failed");
        return MM_RUNTIME;
    }
    if (rt->rank == 0) {
        row->energy = w; /* rank 0's window, calls and loop time */
        row->energy.valid = all_valid;
        row->energy.nvml_failed = any_failed;
        row->energy.joules_per_call = tot[0];
        row->energy.watts = tot[1];
        row->energy.capped_frac = capped[0];
    }
    return MM_OK;
}
