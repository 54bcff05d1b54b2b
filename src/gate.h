/* The CI performance gate: compare a current results file against a committed baseline and fail
 * on a slowdown beyond the allowed one, on any row that is not OK, or on a missing row.
 * No GPU and no MPI. */
#ifndef MEGAMOE_GATE_H
#define MEGAMOE_GATE_H

#include <stdio.h>

#include "common.h"

typedef enum {
    VERDICT_SAME = 0,
    VERDICT_FASTER,
    VERDICT_SLOWER,
    VERDICT_UNSURE,  /* the runs are too noisy to tell a change of the allowed size */
    VERDICT_MISSING, /* in the baseline, absent (or SKIP) in the current run */
    VERDICT_BROKEN,  /* the current row is FAIL, TIMEOUT or ERROR */
} mm_verdict;

const char *verdict_name(mm_verdict v);

typedef struct {
    double max_slowdown; /* fraction: 0.05 = 5% */
    double min_gap;      /* fraction: differences below it are SAME */
    int ignore_device;   /* match rows across GPU models and EP sizes */
    int relative_to;     /* -1, or an mm_mode: judge the other modes by their time over this mode's
                          * at the same batch in the same run (a drift of the whole machine cancels);
                          * its own rows are reported, and fail only when BROKEN or MISSING; or
                          * MM_GATE_RELATIVE_CUBLASLT: gemm's rows of mode M over M-cublaslt's */
} mm_gate_opts;

/* --relative-to cublaslt (gemm's results, gemm_report.h): each of our rows against the cuBLASLt
 * loop timed beside it at the same rows */
#define MM_GATE_RELATIVE_CUBLASLT 100

/* Summary of one run of a row: its median and the spread that decides whether a change is real. */
typedef struct {
    double median;
    double lo, hi; /* p10 and p90 of the per-iteration times */
    double noise;  /* relative spread: (p90 - p10) / 2 / median */
} mm_spread;

/* From per-iteration times (n > 0); with no samples, from median and stdev. */
void gate_spread(const double *samples, int n, double median, double stdev, mm_spread *out);

/* The spread of a row's time over a reference row's of the same run. paired (both timed side by
 * side, as many samples): per-round ratios, round i of each having run in the same machine state;
 * else the ratio of the medians, with the widest range the two spreads allow. */
void gate_ratio_spread(const double *samples, int n, const mm_spread *row, const double *ref_samples, int ref_n,
                       const mm_spread *ref, int paired, mm_spread *out);

/* A change counts only when the runs' p10-p90 ranges do not overlap and the relative gap exceeds
 * both min_gap and the noise of either run. `change` gets (new - old) / old. */
mm_verdict gate_compare(const mm_spread *old_run, const mm_spread *new_run,
                        const mm_gate_opts *o, double *change);

/* Whole files. Writes the table to `out` (and Markdown to `markdown_path` if not NULL). Returns
 * MM_OK, MM_FAIL (gate failed) or MM_USAGE (unreadable file, other schema, other device). */
mm_status gate_files(const char *baseline, const char *current, const mm_gate_opts *o,
                     FILE *out, const char *markdown_path);

#endif
