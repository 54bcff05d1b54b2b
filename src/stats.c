#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile q in [0,1] of sorted s[0..n), linear between neighbours. */
static double quantile(const double *s, int n, double q)
{
    double pos = q * (n - 1);
    int lo = (int)floor(pos);
    int hi = lo + 1 < n ? lo + 1 : lo;
    return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

void stats_compute(const double *v, int n, mm_stats *out)
{
    memset(out, 0, sizeof *out);
    if (n <= 0) return;
    double *s = malloc(sizeof(double) * (size_t)n);
    if (!s) return;
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += s[i];
    out->n = n;
    out->mean = sum / n;
    out->min = s[0];
    out->max = s[n - 1];
    out->median = quantile(s, n, 0.5);
    out->p90 = quantile(s, n, 0.9);
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (s[i] - out->mean) * (s[i] - out->mean);
    out->stdev = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
    free(s);
}

void stats_phase_path(const unsigned long long *stamps_ns, int ctas, int n, double *us)
{
    unsigned long long prev = ~0ull;
    for (int c = 0; c < ctas; c++) {
        unsigned long long t = stamps_ns[(size_t)c * n];
        if (t && t < prev) prev = t;
    }
    if (prev == ~0ull) prev = 0;
    for (int i = 1; i < n; i++) {
        unsigned long long end = 0;
        for (int c = 0; c < ctas; c++) {
            unsigned long long t = stamps_ns[(size_t)c * n + i];
            end = t > end ? t : end;
        }
        us[i - 1] = end > prev ? (double)(end - prev) / 1000.0 : 0.0;
        if (end > prev) prev = end;
    }
}
