/* Results of a sweep and their three renderings: text tables (stdout), Markdown, JSON.
 * The results hold plain values only, so the writers are testable without a GPU. */
#ifndef MEGAMOE_REPORT_H
#define MEGAMOE_REPORT_H

#include <stdio.h>

#include "config.h"
#include "plan.h"
#include "power.h"
#include "stats.h"
#include "sweep.h"

#define MM_RESULTS_SCHEMA "megamoe.results/1"
#define MM_MAX_RANKS 64
#define MM_MAX_STAGES 10

typedef enum { ROW_OK = 0, ROW_FAIL, ROW_TIMEOUT, ROW_ERROR, ROW_SKIP } mm_row_status;
const char *row_status_name(mm_row_status s);
/* Parses a name back (for the gate); returns -1 if unknown. */
int row_status_parse(const char *name);
/* The exit status a row (or check cell) carries: FAIL -> MM_FAIL, TIMEOUT -> MM_TIMEOUT, ERROR ->
 * MM_RUNTIME; OK and SKIP are not failures. */
mm_status row_status_exit(mm_row_status s);

typedef struct {
    int has_diff;
    double calc_diff;   /* vs the reference, recipe.md definition */
    double max_abs;     /* max |out - ref| */
    double ref_max_abs; /* max |ref| */
    long nonfinite;     /* outputs that are NaN or Inf */
    char bitwise_vs[16]; /* mode compared bit for bit ("" = none) */
    int bitwise_equal;
} mm_diff;

typedef struct {
    mm_mode mode;
    int batch;
    mm_row_status status;
    char note[192];
    /* Timing: the row's figures are those of the slowest rank (highest median). */
    mm_stats stats;
    int ranks_timed;
    int nranks;
    double rank_median_us[MM_MAX_RANKS];
    int n_samples;
    double *samples_us; /* that rank's per-iteration times, owned by the row */
    mm_diff diff;
    double weight_bytes, nvlink_bytes, flops, floor_us; /* expected, from the plan */
    /* the floor of this run's routing: the plan's, with the local experts the busiest rank's
     * tokens actually touch (routing_experts) in place of the expected count (plan_seed_floor);
     * 0: not computed */
    double routing_floor_us;
    int routing_experts;
    /* the row tiles of the rank with the most (plan_seed_floor's tiles) and their excess over its
     * rows / 128 (plan_tile_excess): at large batches the GEMMs follow tiles, not rows */
    int routing_tiles;
    double routing_tile_excess;
    /* --breakdown: the mode's stages, median over instrumented calls: per stage the slowest
     * rank's, and each rank's (ranks < MM_MAX_RANKS; a stage that waits for another rank is long
     * on the rank that waits, so the per-stage maxima need not add up to one rank's call) */
    int n_stages;
    char stage_name[MM_MAX_STAGES][16];
    double stage_us[MM_MAX_STAGES];
    double stage_rank_us[MM_MAX_RANKS][MM_MAX_STAGES];
    /* --energy-ms: the (mode, batch)'s calls back to back, joules a call and watts summed over
     * the ranks, the largest capped share (valid 0: not measured) */
    mm_power_window energy;
} mm_row;

typedef struct {
    char config[96];
    int hidden, inter, experts, topk;
    char scale_fmt[8];
    char weights[8]; /* the experts' format: "fp8" or "fp4" (MXFP4) */
    char swiglu_limit[16];
    int ep;
    char gpu[96];
    char driver[32];
    char cuda[32];
    char nccl[32];
    char routing[64];
    unsigned long long seed;
    int warmup, iters;
    int graph, l2_flush;
    int interleave; /* a batch's modes timed side by side */
    int idle_ms;    /* the GPU idled this long before each timed call (--idle-ms) */
    int ep_slice;   /* --ep-slice N: one rank of EP N emulated on this GPU (0: a real run) */
    /* the ceilings the floors were computed with (bench), each with where it came from */
    int has_ceilings;
    mm_ceiling_set ceilings;
    char git_rev[48];
    char host[96];
    char date[40];
    char argv[1024];
    int n_rank_lines;
    char rank_lines[MM_MAX_RANKS][160]; /* "rank 0: host gpu-node, device 0, 0000:1b:00.0" */
} mm_meta;

typedef struct {
    mm_meta meta;
    int n_rows, cap_rows;
    mm_row *rows;
} mm_results;

void results_init(mm_results *r);
void results_free(mm_results *r);
/* Appends a row (copying it; samples are copied too). Returns NULL when out of memory. */
mm_row *results_add(mm_results *r, const mm_row *row, const double *samples, int n_samples);
const mm_row *results_find(const mm_results *r, mm_mode mode, int batch);

/* Tables: one per baseline present (fused vs normal, fused vs ll), or fused alone. */
void report_text(FILE *f, const mm_results *r);
void report_markdown(FILE *f, const mm_results *r);
/* The ceilings a bench results file's floors used (meta.ceilings: measured on its GPUs, or given),
 * for plan --ceilings: MM_OK with *c filled, else MM_USAGE with `err` naming the file and why. */
mm_status report_read_ceilings(const char *path, mm_ceilings *c, char *err, size_t len);
/* Written atomically (temp file in the same directory, then rename). */
mm_status report_json_write(const char *path, const mm_results *r);
/* Renders `root` (a cJSON *, consumed) to `path` atomically; shared by every JSON writer. */
struct cJSON;
mm_status json_write_atomic(const char *path, struct cJSON *root);
/* The fields every results file carries about the run: EP size, GPU, driver, CUDA, NCCL, seed,
 * git revision, host, date, argv, ranks. */
struct cJSON *report_run_meta_json(const mm_meta *m);
/* That plus what a sweep adds (config and shape, routing, iterations, timing method): the `meta`
 * of a results file (also gemm's, gemm_report.h). */
struct cJSON *report_meta_json(const mm_meta *m);
/* A row's `time` object (n, median_us, mean_us, min_us, max_us, p90_us, stdev_us). */
struct cJSON *report_stats_json(const mm_stats *s);
/* A row's `energy` object (--energy-ms; NULL when the window has no reading): joules_per_call,
 * watts, power_capped_frac (when known), window_s, calls, loop_s, sm_mhz (when measured) and,
 * for flops > 0, gflop_per_joule. */
struct cJSON *report_energy_json(const mm_power_window *w, double flops);
/* One progress line on stderr per finished (mode, batch). */
void report_progress(FILE *f, const mm_row *row);

#endif
