/* Summary statistics of a set of per-iteration times. */
#ifndef MEGAMOE_STATS_H
#define MEGAMOE_STATS_H

typedef struct {
    int n;
    double median, mean, min, max, p90, stdev;
} mm_stats;

/* Does not modify `v`; n may be 0 (all fields zero). p90 and the median interpolate linearly
 * between order statistics; stdev is the sample standard deviation (n - 1). */
void stats_compute(const double *v, int n, mm_stats *out);

/* --breakdown of a persistent kernel: stamps [ctas][n] (a CTA's clock at the end of each phase;
 * column 0 its start, 0 = never written) -> n - 1 phase durations in us along the critical path:
 * phase i runs from the last CTA's end of phase i - 1 (for i = 1: the first CTA's start) to the
 * last CTA's end of phase i. A phase that ends before the previous one counts 0. */
void stats_phase_path(const unsigned long long *stamps_ns, int ctas, int n, double *us);

#endif
