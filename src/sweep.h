/* Parsers for the sweep's small languages: batch lists, mode lists, routing specs, on/off flags.
 * Pure functions over strings (fuzzed in CI); errors go into a caller's buffer as one line. */
#ifndef MEGAMOE_SWEEP_H
#define MEGAMOE_SWEEP_H

#include <stddef.h>

#include "common.h"

#define MM_MAX_BATCH_VALUE (1 << 20)

/* "1,8,64", "1:8192:x2" (geometric), "16:64:+16" (arithmetic), or a comma list mixing them.
 * Values in [min_value, MM_MAX_BATCH_VALUE], at most `cap` of them, no duplicates. */
mm_status parse_batch_list(const char *text, int min_value, int *out, int cap, int *count,
                           char *err, size_t errlen);

typedef enum { MODE_FUSED = 0, MODE_NORMAL = 1, MODE_LL = 2, MODE_COUNT = 3 } mm_mode;
const char *mode_name(mm_mode m);

/* "fused,normal,ll" -> bit set over mm_mode; order of the run is always fused, normal, ll. */
mm_status parse_mode_list(const char *text, unsigned *mask, char *err, size_t errlen);

typedef enum {
    ROUTE_UNIFORM = 0,
    ROUTE_BALANCED,
    ROUTE_ZIPF,      /* param: exponent s > 0 */
    ROUTE_HOT,
    ROUTE_RANK_SKEW, /* param: fraction of choices sent to rank 0's experts, in [0, 1] */
    ROUTE_MASKED,    /* param: fraction of slots set to -1, in [0, 1] */
    ROUTE_DEEPSEEK,
    ROUTE_COUNT
} mm_routing_kind;

typedef struct {
    mm_routing_kind kind;
    double param;
} mm_routing;

/* "uniform", "zipf:1.2", "masked:0.3", ... */
mm_status parse_routing(const char *text, mm_routing *out, char *err, size_t errlen);
/* Canonical text ("zipf:1.2"), for reports. */
void routing_format(const mm_routing *r, char *buf, size_t len);
const char *routing_kind_name(mm_routing_kind k);

/* "on"/"off" (also 1/0, true/false, yes/no). */
mm_status parse_on_off(const char *text, int *out, char *err, size_t errlen);
/* --l2-flush: MM_L2_FLUSH_OFF, _ON (write over 2.5x the L2: what the peers' tests do; it leaves
 * the L2 full of dirty lines whose write-back lands in the timed call) or _CLEAN (read 2.5x the
 * L2: cold and clean). */
enum { MM_L2_FLUSH_OFF = 0, MM_L2_FLUSH_ON = 1, MM_L2_FLUSH_CLEAN = 2 };
mm_status parse_l2_flush(const char *text, int *out, char *err, size_t errlen);
const char *l2_flush_name(int mode);

/* A positive (or >= min) decimal int with no trailing junk. */
mm_status parse_int(const char *text, long min, long max, long *out, char *err, size_t errlen);
mm_status parse_double(const char *text, double min, double max, double *out, char *err,
                       size_t errlen);

#endif
