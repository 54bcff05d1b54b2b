#include "sweep.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

mm_status parse_int(const char *text, long min, long max, long *out, char *err, size_t errlen)
{
    if (!text || !*text || isspace((unsigned char)*text)) {
        mm_fmt(err, errlen, "expected an integer, got '%s'", text ? text : "");
        return MM_USAGE;
    }
    errno = 0;
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (errno == ERANGE && *end == '\0') { /* an integer, only too large for a long */
        mm_fmt(err, errlen, "%s is out of range [%ld, %ld]", text, min, max);
        return MM_USAGE;
    }
    if (errno || *end != '\0') {
        mm_fmt(err, errlen, "expected an integer, got '%s'", text);
        return MM_USAGE;
    }
    if (v < min || v > max) {
        mm_fmt(err, errlen, "%ld is out of range [%ld, %ld]", v, min, max);
        return MM_USAGE;
    }
    *out = v;
    return MM_OK;
}

mm_status parse_double(const char *text, double min, double max, double *out, char *err,
                       size_t errlen)
{
    if (!text || !*text || isspace((unsigned char)*text)) {
        mm_fmt(err, errlen, "expected a number, got '%s'", text ? text : "");
        return MM_USAGE;
    }
    errno = 0;
    char *end = NULL;
    double v = strtod(text, &end);
    if (errno || *end != '\0' || !isfinite(v)) {
        mm_fmt(err, errlen, "expected a finite number, got '%s'", text);
        return MM_USAGE;
    }
    if (v < min || v > max) {
        mm_fmt(err, errlen, "%g is out of range [%g, %g]", v, min, max);
        return MM_USAGE;
    }
    *out = v;
    return MM_OK;
}

/* Parses one decimal batch value out of [p, p+n). */
static mm_status batch_value(const char *p, size_t n, int min_value, long *v, char *err,
                             size_t errlen)
{
    char tmp[32];
    if (n == 0) {
        mm_fmt(err, errlen, "bad batch list: empty number");
        return MM_USAGE;
    }
    if (n >= sizeof tmp) {
        mm_fmt(err, errlen, "bad batch list: '%.*s...' is out of range [%d, %d]", 12, p, min_value,
               MM_MAX_BATCH_VALUE);
        return MM_USAGE;
    }
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)tmp[i])) {
            mm_fmt(err, errlen, "bad batch list: '%s' is not a non-negative integer", tmp);
            return MM_USAGE;
        }
    }
    char sub[128];
    if (parse_int(tmp, min_value, MM_MAX_BATCH_VALUE, v, sub, sizeof sub) != MM_OK) {
        /* 0 tokens per rank is a check scenario (tokens-0), not a batch a sweep times */
        mm_fmt(err, errlen, "bad batch list: %s%s", sub,
               strspn(tmp, "0") == n && min_value > 0 ? " (a batch is tokens per rank: at least 1)" : "");
        return MM_USAGE;
    }
    return MM_OK;
}

static mm_status push_batch(long v, int *out, int cap, int *count, char *err, size_t errlen)
{
    for (int i = 0; i < *count; i++) {
        if (out[i] == v) {
            mm_fmt(err, errlen, "bad batch list: %ld appears twice", v);
            return MM_USAGE;
        }
    }
    if (*count >= cap) {
        mm_fmt(err, errlen, "bad batch list: more than %d values", cap);
        return MM_USAGE;
    }
    out[(*count)++] = (int)v;
    return MM_OK;
}

/* One comma-separated item: "N" or "A:B:xF" or "A:B:+S". */
static mm_status batch_item(const char *p, size_t n, int min_value, int *out, int cap, int *count,
                            char *err, size_t errlen)
{
    const char *c1 = memchr(p, ':', n);
    if (!c1) {
        long v;
        MM_TRY(batch_value(p, n, min_value, &v, err, errlen));
        return push_batch(v, out, cap, count, err, errlen);
    }
    const char *c2 = memchr(c1 + 1, ':', (size_t)(p + n - c1 - 1));
    if (!c2) {
        mm_fmt(err, errlen, "bad batch list: a range is START:END:xFACTOR or START:END:+STEP");
        return MM_USAGE;
    }
    long a, b, step;
    MM_TRY(batch_value(p, (size_t)(c1 - p), min_value, &a, err, errlen));
    MM_TRY(batch_value(c1 + 1, (size_t)(c2 - c1 - 1), min_value, &b, err, errlen));
    const char *s = c2 + 1;
    size_t sn = (size_t)(p + n - s);
    if (sn < 2 || (s[0] != 'x' && s[0] != '+')) {
        mm_fmt(err, errlen, "bad batch list: range step must be xFACTOR or +STEP");
        return MM_USAGE;
    }
    MM_TRY(batch_value(s + 1, sn - 1, 0, &step, err, errlen));
    if (a > b) {
        mm_fmt(err, errlen, "bad batch list: range start %ld is above its end %ld", a, b);
        return MM_USAGE;
    }
    int geometric = s[0] == 'x';
    if ((geometric && (step < 2 || a == 0)) || (!geometric && step < 1)) {
        mm_fmt(err, errlen,
               "bad batch list: need factor >= 2 from a start >= 1, or step >= 1");
        return MM_USAGE;
    }
    for (long v = a; v <= b; v = geometric ? v * step : v + step)
        MM_TRY(push_batch(v, out, cap, count, err, errlen));
    return MM_OK;
}

mm_status parse_batch_list(const char *text, int min_value, int *out, int cap, int *count,
                           char *err, size_t errlen)
{
    *count = 0;
    if (!text || !*text) {
        mm_fmt(err, errlen, "bad batch list: empty");
        return MM_USAGE;
    }
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        MM_TRY(batch_item(p, n, min_value, out, cap, count, err, errlen));
        if (!comma) break;
        p = comma + 1;
    }
    return MM_OK;
}

static const char *const mode_names[MODE_COUNT] = {"fused", "normal", "ll"};

const char *mode_name(mm_mode m)
{
    return (unsigned)m < MODE_COUNT ? mode_names[m] : "?";
}

mm_status parse_mode_list(const char *text, unsigned *mask, char *err, size_t errlen)
{
    *mask = 0;
    if (!text || !*text) {
        mm_fmt(err, errlen, "empty mode list (choose from fused,normal,ll)");
        return MM_USAGE;
    }
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        int found = -1;
        for (int m = 0; m < MODE_COUNT; m++)
            if (strlen(mode_names[m]) == n && strncmp(p, mode_names[m], n) == 0) found = m;
        if (found < 0) {
            mm_fmt(err, errlen, "unknown mode '%.*s' (choose from fused, normal, ll)", (int)n, p);
            return MM_USAGE;
        }
        *mask |= 1u << found;
        if (!comma) break;
        p = comma + 1;
    }
    return MM_OK;
}

static const char *const routing_names[ROUTE_COUNT] = {
    "uniform", "balanced", "zipf", "hot", "rank-skew", "masked", "deepseek"};

const char *routing_kind_name(mm_routing_kind k)
{
    return (unsigned)k < ROUTE_COUNT ? routing_names[k] : "?";
}

static int routing_has_param(mm_routing_kind k)
{
    return k == ROUTE_ZIPF || k == ROUTE_RANK_SKEW || k == ROUTE_MASKED;
}

mm_status parse_routing(const char *text, mm_routing *out, char *err, size_t errlen)
{
    const char *colon = text ? strchr(text, ':') : NULL;
    size_t n = colon ? (size_t)(colon - text) : (text ? strlen(text) : 0);
    int found = -1;
    for (int k = 0; k < ROUTE_COUNT; k++)
        if (text && strlen(routing_names[k]) == n && strncmp(text, routing_names[k], n) == 0)
            found = k;
    if (found < 0) {
        mm_fmt(err, errlen,
               "unknown routing '%s' (choose from uniform, balanced, zipf:S, hot, rank-skew:F, "
               "masked:F, deepseek)",
               text ? text : "");
        return MM_USAGE;
    }
    out->kind = (mm_routing_kind)found;
    out->param = 0.0;
    if (!routing_has_param(out->kind)) {
        if (colon) {
            mm_fmt(err, errlen, "routing '%s' takes no parameter", routing_names[found]);
            return MM_USAGE;
        }
        return MM_OK;
    }
    /* Defaults for a parameter left out. */
    double def = out->kind == ROUTE_ZIPF ? 1.2 : out->kind == ROUTE_RANK_SKEW ? 0.9 : 0.3;
    if (!colon) {
        out->param = def;
        return MM_OK;
    }
    char sub[128];
    double lo = out->kind == ROUTE_ZIPF ? 1e-3 : 0.0, hi = out->kind == ROUTE_ZIPF ? 8.0 : 1.0;
    if (parse_double(colon + 1, lo, hi, &out->param, sub, sizeof sub) != MM_OK) {
        mm_fmt(err, errlen, "routing '%s': parameter %s", routing_names[found], sub);
        return MM_USAGE;
    }
    return MM_OK;
}

void routing_format(const mm_routing *r, char *buf, size_t len)
{
    if (routing_has_param(r->kind))
        mm_fmt(buf, len, "%s:%g", routing_kind_name(r->kind), r->param);
    else
        mm_fmt(buf, len, "%s", routing_kind_name(r->kind));
}

mm_status parse_l2_flush(const char *text, int *out, char *err, size_t errlen)
{
    if (text && strcmp(text, "clean") == 0) {
        *out = MM_L2_FLUSH_CLEAN;
        return MM_OK;
    }
    if (parse_on_off(text, out, err, errlen) == MM_OK) return MM_OK;
    mm_fmt(err, errlen, "expected on, off or clean, got '%s'", text ? text : "");
    return MM_USAGE;
}

const char *l2_flush_name(int mode)
{
    return mode == MM_L2_FLUSH_CLEAN ? "clean" : mode ? "on" : "off";
}

mm_status parse_on_off(const char *text, int *out, char *err, size_t errlen)
{
    static const char *const on[] = {"on", "1", "true", "yes"};
    static const char *const off[] = {"off", "0", "false", "no"};
    for (size_t i = 0; i < MM_ARRAY_LEN(on); i++) {
        if (text && strcmp(text, on[i]) == 0) { *out = 1; return MM_OK; }
        if (text && strcmp(text, off[i]) == 0) { *out = 0; return MM_OK; }
    }
    mm_fmt(err, errlen, "expected on or off, got '%s'", text ? text : "");
    return MM_USAGE;
}
