/* gemm's results as a results file (report.h's schema, so `gate` reads it): one row per (GEMM,
 * row count) for our kernel, mode "gemm1" / "gemm2", and one for the cuBLASLt per-expert loop timed
 * beside it, mode "gemm1-cublaslt" / "gemm2-cublaslt"; the batch column holds the GEMM's total rows.
 * Plain values only: written and read back without a GPU. */
#ifndef MEGAMOE_GEMM_REPORT_H
#define MEGAMOE_GEMM_REPORT_H

#include "power.h"
#include "report.h"

#define MM_GEMM_LT_SUFFIX "-cublaslt"

typedef struct {
    char mode[24];
    int rows, n, k;
    int tile;                  /* our tile height (0 for cuBLASLt's rows) */
    mm_row_status status;
    char note[96];
    mm_stats stats;
    double *samples_us;        /* per-iteration times, owned by the results */
    int n_samples;
    double flops, weight_bytes;
    double calc_diff;          /* ours: BF16 output vs the GPU reference; cuBLASLt's: ours vs its output */
    double calc_diff_f32;      /* ours: FP32 output vs the reference (-1: not measured) */
    double sm_mhz;             /* ours: the SM clock over its timed loop (0: not measured, cuBLASLt's rows) */
    mm_power_window energy;    /* --energy-ms: its joules back to back (valid 0: not measured) */
} mm_gemm_result;

typedef struct {
    mm_meta meta;
    char spread[32], tile[8], wide_scales[8]; /* --spread, --tile and --wide-scales as asked */
    int n, cap;
    mm_gemm_result *rows;
} mm_gemm_results;

void gemm_results_init(mm_gemm_results *r);
void gemm_results_free(mm_gemm_results *r);
/* Appends a copy of `row` with a copy of its n_samples samples; MM_RUNTIME when out of memory. */
mm_status gemm_results_add(mm_gemm_results *r, const mm_gemm_result *row, const double *samples, int n_samples);
/* The clock, in MHz, of `cycles` SM cycles spent in `ns` nanoseconds (0 when ns is 0). */
double mm_clock_mhz(unsigned long long cycles, unsigned long long ns);
/* Written atomically (json_write_atomic). */
mm_status gemm_report_json_write(const char *path, const mm_gemm_results *r);

#endif
