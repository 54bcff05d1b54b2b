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

#endif
