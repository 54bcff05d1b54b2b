#include "gate.h"
#include "gemm_report.h"
#include "sweep.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report.h"
#include "stats.h"

static const char *const verdict_names[] = {"SAME", "FASTER", "SLOWER", "UNSURE", "MISSING",
                                            "BROKEN"};

const char *verdict_name(mm_verdict v)
{
    return (unsigned)v < MM_ARRAY_LEN(verdict_names) ? verdict_names[v] : "?";
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile_sorted(const double *s, int n, double q)
{
    double pos = q * (n - 1);
    int lo = (int)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

void gate_spread(const double *samples, int n, double median, double stdev, mm_spread *out)
{
    out->median = median;
    if (n > 0) {
        double *s = malloc(sizeof(double) * (size_t)n);
        if (s) {
            memcpy(s, samples, sizeof(double) * (size_t)n);
            qsort(s, (size_t)n, sizeof(double), cmp_double);
            out->median = quantile_sorted(s, n, 0.5);
            out->lo = quantile_sorted(s, n, 0.1);
            out->hi = quantile_sorted(s, n, 0.9);
            free(s);
        }
    }
    if (n <= 0) {
        out->lo = median - stdev;
        out->hi = median + stdev;
    }
    out->noise = out->median > 0 ? (out->hi - out->lo) / 2.0 / out->median : INFINITY;
}

void gate_ratio_spread(const double *samples, int n, const mm_spread *row, const double *ref_samples, int ref_n,
                       const mm_spread *ref, int paired, mm_spread *out)
{
    double *q = paired && n > 0 && n == ref_n && samples && ref_samples ? malloc(sizeof(double) * (size_t)n) : NULL;
    if (q) {
        for (int i = 0; i < n; i++) q[i] = ref_samples[i] > 0 ? samples[i] / ref_samples[i] : 0.0;
        gate_spread(q, n, 0, 0, out);
        free(q);
        return;
    }
    out->median = ref->median > 0 ? row->median / ref->median : 0.0;
    out->lo = ref->hi > 0 ? row->lo / ref->hi : 0.0;
    out->hi = ref->lo > 0 ? row->hi / ref->lo : INFINITY;
    out->noise = out->median > 0 ? (out->hi - out->lo) / 2.0 / out->median : INFINITY;
}

mm_verdict gate_compare(const mm_spread *old_run, const mm_spread *new_run,
                        const mm_gate_opts *o, double *change)
{
    double c = old_run->median > 0 ? (new_run->median - old_run->median) / old_run->median : 0.0;
    *change = c;
    double threshold = o->min_gap;
    if (old_run->noise > threshold) threshold = old_run->noise;
    if (new_run->noise > threshold) threshold = new_run->noise;
    int separated = new_run->lo > old_run->hi || new_run->hi < old_run->lo;
    if (separated && fabs(c) > threshold) return c > 0 ? VERDICT_SLOWER : VERDICT_FASTER;
    /* A large apparent change the spread cannot confirm: say so rather than call it SAME. */
    if (fabs(c) > o->max_slowdown && fabs(c) > o->min_gap) return VERDICT_UNSURE;
    return VERDICT_SAME;
}

/* ---- files ---------------------------------------------------------------------------- */

/* A row's `--breakdown` stages as the file has them (the first GATE_MAX_STAGES), shown next to
 * a changed row so a reader sees where the change sits; never judged: each is the median of a few
 * instrumented calls, not a timed spread. */
#define GATE_MAX_STAGES 12

typedef struct {
    char name[24];
    double us;
} gate_stage;

typedef struct {
    char mode[16];
    int batch;
    int status; /* mm_row_status */
    int has_time;
    mm_spread spread;
    double *samples; /* iter_us (NULL when the file has none) */
    int n_samples;
    char note[192];
    int n_stages;
    gate_stage stages[GATE_MAX_STAGES];
    double sm_mhz; /* gemm's gemm.sm_mhz: the SM clock the row ran at (0: not recorded) */
    double joules; /* --energy-ms: joules a call (bench's energy, gemm's gemm.energy; 0: not recorded) */
    char accuracy[160]; /* an OK row whose recorded accuracy breaks the bound: why ("" when it holds) */
} gate_row;

typedef struct {
    char config[96], gpu[96], git[48], date[40];
    int ep;
    int interleave; /* meta.interleave; files from before the flag timed modes one after another */
    int idle_ms;    /* meta.idle_ms; 0 in files from before the flag */
    int ep_slice;   /* meta.ep_slice: one rank of EP N emulated on one GPU (0: a real run) */
    char weights[8]; /* meta.shape.weights: "fp8" (also where a file predates the key) or "fp4" */
    int n;
    gate_row *rows;
} gate_file;

static const char *str_item(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(it) ? it->valuestring : "";
}

static double num_item(const cJSON *o, const char *key, double def)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(it) ? it->valuedouble : def;
}

static const gate_row *find(const gate_file *g, const char *mode, int batch)
{
    for (int i = 0; i < g->n; i++)
        if (g->rows[i].batch == batch && strcmp(g->rows[i].mode, mode) == 0) return &g->rows[i];
    return NULL;
}

/* A results file's timings: a finite, positive number of microseconds. */
static int valid_us(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble > 0;
}

/* A row's timing fields, checked before any is used: a gate must not judge what it cannot read.
 * One line naming the file, the row and the field; MM_USAGE. */
static mm_status load_time(const char *path, int index, const cJSON *r, gate_row *gr)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "time");
    gr->has_time = cJSON_IsObject(t) && gr->status == ROW_OK;
    if (!gr->has_time) return MM_OK;
    if (!valid_us(cJSON_GetObjectItemCaseSensitive(t, "median_us"))) {
        mm_error("gate: %s: results[%d] (%s/%d): time.median_us must be a finite positive number", path, index,
                 gr->mode, gr->batch);
        return MM_USAGE;
    }
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(r, "iter_us");
    if (it && !cJSON_IsNull(it) && (!cJSON_IsArray(it) || cJSON_GetArraySize(it) == 0)) {
        mm_error("gate: %s: results[%d] (%s/%d): iter_us must be a non-empty list of times", path, index, gr->mode,
                 gr->batch);
        return MM_USAGE;
    }
    const int ns = cJSON_IsArray(it) ? cJSON_GetArraySize(it) : 0;
    double *samples = ns > 0 ? malloc(sizeof(double) * (size_t)ns) : NULL;
    if (ns > 0 && !samples) return MM_RUNTIME;
    int k = 0;
    const cJSON *v;
    if (samples) cJSON_ArrayForEach(v, it)
    {
        if (!valid_us(v)) {
            mm_error("gate: %s: results[%d] (%s/%d): iter_us[%d] must be a finite positive number of microseconds",
                     path, index, gr->mode, gr->batch, k);
            free(samples);
            return MM_USAGE;
        }
        samples[k++] = v->valuedouble;
    }
    gate_spread(samples, k, num_item(t, "median_us", 0), num_item(t, "stdev_us", 0), &gr->spread);
    gr->samples = samples; /* kept for --relative-to */
    gr->n_samples = k;
    return MM_OK;
}

/* An OK row's recorded accuracy, judged again against the documented bound: a file whose status
 * says OK over a calc_diff above it (or non-finite outputs) is wrong, whatever wrote it. */
static mm_status load_accuracy(const char *path, int index, const cJSON *r, gate_row *gr)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(r, "diff");
    if (gr->status != ROW_OK || !d || cJSON_IsNull(d)) return MM_OK;
    const cJSON *calc = cJSON_GetObjectItemCaseSensitive(d, "calc_diff");
    const cJSON *nonfinite = cJSON_GetObjectItemCaseSensitive(d, "nonfinite");
    if (!cJSON_IsObject(d) || (calc && !cJSON_IsNumber(calc)) || (nonfinite && !cJSON_IsNumber(nonfinite))) {
        mm_error("gate: %s: results[%d] (%s/%d): diff.calc_diff and diff.nonfinite must be numbers", path, index,
                 gr->mode, gr->batch);
        return MM_USAGE;
    }
    if (calc && !(calc->valuedouble <= MM_DEFAULT_TOL)) /* NaN fails too */
        mm_fmt(gr->accuracy, sizeof gr->accuracy, "status OK but calc_diff %.3g is above the bound %.0e",
               calc->valuedouble, MM_DEFAULT_TOL);
    else if (nonfinite && nonfinite->valuedouble != 0)
        mm_fmt(gr->accuracy, sizeof gr->accuracy, "status OK but %.0f outputs are not finite", nonfinite->valuedouble);
    return MM_OK;
}

static mm_status load(const char *path, gate_file *g)
{
    memset(g, 0, sizeof *g);
    char err[600];
    size_t n = 0;
    char *buf = mm_read_file(path, &n, err, sizeof err);
    if (!buf) {
        mm_error("gate: %s", err);
        return MM_USAGE;
    }
    cJSON *root = cJSON_ParseWithLength(buf, n);
    free(buf);
    if (!root) {
        mm_error("gate: %s is not valid JSON", path);
        return MM_USAGE;
    }
    mm_status s = MM_OK;
    const char *schema = str_item(root, "schema");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "meta");
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(root, "results");
    if (strcmp(schema, MM_RESULTS_SCHEMA) != 0) {
        mm_error("gate: %s has schema '%s', this gate reads '%s'", path, schema, MM_RESULTS_SCHEMA);
        s = MM_USAGE;
    } else if (!cJSON_IsObject(meta) || !cJSON_IsArray(rows)) {
        mm_error("gate: %s lacks 'meta' or 'results'", path);
        s = MM_USAGE;
    }
    if (s == MM_OK) {
        mm_fmt(g->config, sizeof g->config, "%s", str_item(meta, "config"));
        mm_fmt(g->gpu, sizeof g->gpu, "%s", str_item(meta, "gpu"));
        mm_fmt(g->git, sizeof g->git, "%s", str_item(meta, "git_rev"));
        mm_fmt(g->date, sizeof g->date, "%s", str_item(meta, "date"));
        g->ep = (int)num_item(meta, "ep", 0);
        g->interleave = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "interleave"));
        g->idle_ms = (int)num_item(meta, "idle_ms", 0);
        g->ep_slice = (int)num_item(meta, "ep_slice", 0);
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(meta, "shape");
        const char *weights = cJSON_IsObject(shape) ? str_item(shape, "weights") : "";
        mm_fmt(g->weights, sizeof g->weights, "%s", weights[0] ? weights : "fp8");
        int count = cJSON_GetArraySize(rows);
        if (count == 0) {
            mm_error("gate: %s: 'results' is empty (a gate that compares nothing cannot pass)", path);
            s = MM_USAGE;
        }
        g->rows = calloc((size_t)(count > 0 ? count : 1), sizeof(gate_row));
        if (!g->rows) s = MM_RUNTIME;
        const cJSON *r;
        cJSON_ArrayForEach(r, rows)
        {
            if (s != MM_OK) break;
            gate_row *gr = &g->rows[g->n];
            const cJSON *batch = cJSON_GetObjectItemCaseSensitive(r, "batch");
            mm_fmt(gr->mode, sizeof gr->mode, "%s", str_item(r, "mode"));
            gr->batch = cJSON_IsNumber(batch) && batch->valuedouble >= 0 && batch->valuedouble <= MM_MAX_BATCH_VALUE * 64.0 &&
                                batch->valuedouble == floor(batch->valuedouble)
                            ? (int)batch->valuedouble
                            : -1;
            gr->status = row_status_parse(str_item(r, "status"));
            mm_fmt(gr->note, sizeof gr->note, "%s", str_item(r, "note"));
            if (!gr->mode[0] || gr->batch < 0 || gr->status < 0) {
                mm_error("gate: %s: results[%d] lacks a mode, a whole non-negative batch or a known status", path, g->n);
                s = MM_USAGE;
                break;
            }
            if (find(g, gr->mode, gr->batch)) {
                mm_error("gate: %s: results[%d]: a second row for %s/%d", path, g->n, gr->mode, gr->batch);
                s = MM_USAGE;
                break;
            }
            s = load_time(path, g->n, r, gr);
            if (s == MM_OK) s = load_accuracy(path, g->n, r, gr);
            if (s != MM_OK) {
                free(gr->samples);
                gr->samples = NULL;
                break;
            }
            const cJSON *gm = cJSON_GetObjectItemCaseSensitive(r, "gemm");
            gr->sm_mhz = cJSON_IsObject(gm) ? num_item(gm, "sm_mhz", 0) : 0;
            const cJSON *en = cJSON_GetObjectItemCaseSensitive(r, "energy");
            if (!cJSON_IsObject(en) && cJSON_IsObject(gm)) en = cJSON_GetObjectItemCaseSensitive(gm, "energy");
            gr->joules = cJSON_IsObject(en) ? num_item(en, "joules_per_call", 0) : 0;
            const cJSON *stages = cJSON_GetObjectItemCaseSensitive(r, "stages"), *st;
            if (cJSON_IsArray(stages)) cJSON_ArrayForEach(st, stages)
            {
                const cJSON *us = cJSON_GetObjectItemCaseSensitive(st, "us");
                if (gr->n_stages == GATE_MAX_STAGES || !str_item(st, "name")[0] || !cJSON_IsNumber(us)) continue;
                mm_fmt(gr->stages[gr->n_stages].name, sizeof gr->stages[0].name, "%s", str_item(st, "name"));
                gr->stages[gr->n_stages++].us = us->valuedouble;
            }
            g->n++;
        }
    }
    cJSON_Delete(root);
    return s;
}

static void release(gate_file *g)
{
    for (int i = 0; g->rows && i < g->n; i++) free(g->rows[i].samples);
    free(g->rows);
    g->rows = NULL;
}


typedef struct {
    const gate_row *old_row, *new_row;
    mm_verdict verdict;
    double change;
    int fails;
    int relative;            /* judged on the time over the reference mode's (ratios below) */
    double old_ratio, new_ratio;
    int reference;           /* a row of the reference mode itself */
} gate_line;

/* "name old -> new (+x%), ..." over the stages both rows have, in the current row's order. */
static void stage_changes(const gate_row *old_row, const gate_row *new_row, char *out, size_t cap)
{
    out[0] = 0;
    size_t u = 0;
    for (int j = 0; j < new_row->n_stages && u + 1 < cap; j++) {
        const gate_stage *nw = &new_row->stages[j];
        for (int i = 0; i < old_row->n_stages; i++) {
            const gate_stage *o = &old_row->stages[i];
            if (strcmp(o->name, nw->name) != 0) continue;
            char change[24] = "";
            if (o->us > 0) mm_fmt(change, sizeof change, " (%+.1f%%)", (nw->us - o->us) / o->us * 100.0);
            mm_fmt(out + u, cap - u, "%s%s %.1f -> %.1f%s", u ? ", " : "", nw->name, o->us, nw->us, change);
            u = strlen(out);
            break;
        }
    }
}

/* "old -> new (+x%)" where both runs recorded a value (> 0) and it moved by 2% or more, else "":
 * a changed row's SM clock (at gemm's large rows the power cap sets it and the time follows it,
 * README, How a number is taken, so a change may be the machine's state rather than the code's)
 * and its joules a call (--energy-ms: at the power cap they say what a change cost). `whole`:
 * print whole numbers (MHz), else four significant digits (joules). */
static void value_change(double old_v, double new_v, int whole, char *out, size_t cap)
{
    out[0] = 0;
    if (old_v <= 0 || new_v <= 0) return;
    const double change = (new_v - old_v) / old_v;
    if (fabs(change) < 0.02) return;
    if (whole) mm_fmt(out, cap, "%.0f -> %.0f (%+.1f%%)", old_v, new_v, change * 100.0);
    else mm_fmt(out, cap, "%.4g -> %.4g (%+.1f%%)", old_v, new_v, change * 100.0);
}

static void print_table(FILE *f, const gate_file *a, const gate_file *b, const gate_line *lines,
                        int n, int markdown, const char *summary)
{
    if (markdown)
        fprintf(f, "### megamoe gate: %s, EP %d, %s\n\nbaseline %s (%s) vs current %s (%s)\n\n"
                   "| row | old us | new us | change | verdict |\n|---|---:|---:|---:|---|\n",
                a->config, b->ep, b->gpu, a->git, a->date, b->git, b->date);
    else
        fprintf(f, "# megamoe gate: %s, EP %d, %s; baseline %s (%s) vs current %s (%s)\n"
                   "%-18s %10s %10s %8s  %s\n",
                a->config, b->ep, b->gpu, a->git, a->date, b->git, b->date, "row", "old_us",
                "new_us", "change", "verdict");
    for (int i = 0; i < n; i++) {
        const gate_line *l = &lines[i];
        char row[40], o[24] = "-", nw[24] = "-", ch[24] = "-", verdict[240];
        const gate_row *key = l->old_row ? l->old_row : l->new_row;
        mm_fmt(row, sizeof row, "%s/%d", key->mode, key->batch);
        if (l->relative) {
            mm_fmt(o, sizeof o, "%.4fx", l->old_ratio);
            mm_fmt(nw, sizeof nw, "%.4fx", l->new_ratio);
        } else {
            if (l->old_row && l->old_row->has_time) mm_fmt(o, sizeof o, "%.1f", l->old_row->spread.median);
            if (l->new_row && l->new_row->has_time) mm_fmt(nw, sizeof nw, "%.1f", l->new_row->spread.median);
        }
        if (l->old_row && l->new_row && l->old_row->has_time && l->new_row->has_time)
            mm_fmt(ch, sizeof ch, "%+.1f%%", l->change * 100.0);
        mm_fmt(verdict, sizeof verdict, "%s%s%s", verdict_name(l->verdict), l->fails ? " (fails)" : "",
               l->reference ? " (reference)" : "");
        if (l->verdict == VERDICT_BROKEN && l->new_row) {
            size_t u = strlen(verdict);
            mm_fmt(verdict + u, sizeof verdict - u, ": %s %s", row_status_name(l->new_row->status),
                   l->new_row->accuracy[0] ? l->new_row->accuracy : l->new_row->note);
        }
        /* where a changed row's time went, when both runs have its stages */
        char stages[640] = "", clock[64] = "", joules[64] = "";
        if (l->old_row && l->new_row && l->verdict != VERDICT_SAME && l->verdict != VERDICT_MISSING) {
            stage_changes(l->old_row, l->new_row, stages, sizeof stages);
            value_change(l->old_row->sm_mhz, l->new_row->sm_mhz, 1, clock, sizeof clock);
            value_change(l->old_row->joules, l->new_row->joules, 0, joules, sizeof joules);
        }
        if (markdown)
            fprintf(f, "| %s | %s | %s | %s | %s%s%s%s%s%s%s |\n", row, o, nw, ch, verdict,
                    stages[0] ? "<br>stages: " : "", stages, clock[0] ? "<br>SM clock, MHz: " : "", clock,
                    joules[0] ? "<br>joules a call: " : "", joules);
        else {
            fprintf(f, "%-18s %10s %10s %8s  %s\n", row, o, nw, ch, verdict);
            if (stages[0]) fprintf(f, "%-18s stages (us, not judged): %s\n", "", stages);
            if (clock[0]) fprintf(f, "%-18s SM clock (MHz, not judged): %s\n", "", clock);
            if (joules[0]) fprintf(f, "%-18s joules a call (--energy-ms, not judged): %s\n", "", joules);
        }
    }
    fprintf(f, "%s%s\n", markdown ? "\n" : "", summary);
}

/* Whether rows of `mode` are the reference of --relative-to. */
static int is_reference(const mm_gate_opts *o, const char *mode)
{
    if (o->relative_to == MM_GATE_RELATIVE_CUBLASLT) {
        const size_t n = strlen(mode), k = strlen(MM_GEMM_LT_SUFFIX);
        return n > k && strcmp(mode + n - k, MM_GEMM_LT_SUFFIX) == 0;
    }
    return strcmp(mode, mode_name((mm_mode)o->relative_to)) == 0;
}

/* The mode a row of `mode` is judged against: the one mode asked for, or gemm's M-cublaslt. */
static void reference_of(const mm_gate_opts *o, const char *mode, char *out, size_t cap)
{
    if (o->relative_to == MM_GATE_RELATIVE_CUBLASLT) mm_fmt(out, cap, "%s" MM_GEMM_LT_SUFFIX, mode);
    else mm_fmt(out, cap, "%s", mode_name((mm_mode)o->relative_to));
}

static const char *reference_name(const mm_gate_opts *o)
{
    return o->relative_to == MM_GATE_RELATIVE_CUBLASLT ? "cublaslt" : mode_name((mm_mode)o->relative_to);
}

/* --relative-to: a row of another mode whose batch has a timed reference row in both runs is
 * judged on its time over the reference's (per-round ratios when both runs timed their modes side
 * by side); the reference mode's own rows keep their absolute verdict, for information. */
static void judge_relative(gate_line *l, const gate_file *a, const gate_file *b, const mm_gate_opts *o)
{
    if (o->relative_to < 0) return;
    if (is_reference(o, l->old_row->mode)) {
        l->reference = 1;
        return;
    }
    char ref_mode[sizeof l->old_row->mode + sizeof MM_GEMM_LT_SUFFIX];
    reference_of(o, l->old_row->mode, ref_mode, sizeof ref_mode);
    const gate_row *ra = find(a, ref_mode, l->old_row->batch), *rb = find(b, ref_mode, l->old_row->batch);
    if (!ra || !rb || !ra->has_time || !rb->has_time) return; /* no reference here: absolute */
    mm_spread old_ratio, new_ratio;
    gate_ratio_spread(l->old_row->samples, l->old_row->n_samples, &l->old_row->spread, ra->samples, ra->n_samples,
                      &ra->spread, a->interleave, &old_ratio);
    gate_ratio_spread(l->new_row->samples, l->new_row->n_samples, &l->new_row->spread, rb->samples, rb->n_samples,
                      &rb->spread, b->interleave, &new_ratio);
    l->verdict = gate_compare(&old_ratio, &new_ratio, o, &l->change);
    l->relative = 1;
    l->old_ratio = old_ratio.median;
    l->new_ratio = new_ratio.median;
}

/* Whether the two files can be compared row by row: the same GPU and EP size (unless
 * --ignore-device), both real runs or slices of one EP size, one config, a timed reference row for
 * --relative-to, and a baseline whose rows hold their own accuracy bound. One line and MM_USAGE
 * when not. */
static mm_status files_comparable(const gate_file *a, const gate_file *b, const char *baseline, const mm_gate_opts *o)
{
    if (!o->ignore_device && (strcmp(a->gpu, b->gpu) != 0 || a->ep != b->ep)) {
        mm_error("gate: baseline ran on %s at EP %d, current on %s at EP %d (--ignore-device to "
                 "compare anyway)", a->gpu, a->ep, b->gpu, b->ep);
        return MM_USAGE;
    }
    if (o->relative_to >= 0) {
        int timed = 0;
        for (int i = 0; i < a->n; i++) timed += a->rows[i].has_time && is_reference(o, a->rows[i].mode);
        if (!timed) {
            mm_error("gate: --relative-to %s: the baseline has no timed %s row", reference_name(o),
                     o->relative_to == MM_GATE_RELATIVE_CUBLASLT ? "*" MM_GEMM_LT_SUFFIX " (gemm --json)" : reference_name(o));
            return MM_USAGE;
        }
    }
    if (a->ep_slice != b->ep_slice) { /* an emulated rank has no NVLink traffic: never a real run's match */
        char was[32] = "a real run", is[32] = "a real run";
        if (a->ep_slice) mm_fmt(was, sizeof was, "an EP %d slice", a->ep_slice);
        if (b->ep_slice) mm_fmt(is, sizeof is, "an EP %d slice", b->ep_slice);
        mm_error("gate: baseline is %s, current %s: an emulated slice matches only a slice of the same EP size", was, is);
        return MM_USAGE;
    }
    if (strcmp(a->config, b->config) != 0) {
        mm_error("gate: baseline is of config '%s', current of '%s': no row can match", a->config, b->config);
        return MM_USAGE;
    }
    if (strcmp(a->weights, b->weights) != 0) { /* half the weight bytes: a format change, not a speedup */
        mm_error("gate: baseline has %s experts, current %s: no row can match", a->weights, b->weights);
        return MM_USAGE;
    }
    for (int i = 0; i < a->n; i++)
        if (a->rows[i].accuracy[0]) {
            mm_error("gate: %s: %s/%d: %s: not a baseline to compare against", baseline, a->rows[i].mode,
                     a->rows[i].batch, a->rows[i].accuracy);
            return MM_USAGE;
        }
    return MM_OK;
}

mm_status gate_files(const char *baseline, const char *current, const mm_gate_opts *o,
                     FILE *out, const char *markdown_path)
{
    gate_file a, b;
    mm_status s = load(baseline, &a);
    if (s == MM_OK) s = load(current, &b);
    else b.rows = NULL;
    if (s != MM_OK) {
        release(&a);
        release(&b);
        return s;
    }
    s = files_comparable(&a, &b, baseline, o);
    if (s != MM_OK) {
        release(&a);
        release(&b);
        return s;
    }
    if (a.interleave != b.interleave)
        mm_warn("gate: the baseline timed its modes %s, the current run %s: at large batches the GPU's "
                "clock states then differ between the two (README, How a number is taken)",
                a.interleave ? "side by side" : "one after another", b.interleave ? "side by side" : "one after another");
    if (a.idle_ms != b.idle_ms)
        mm_warn("gate: the baseline idled the GPU %d ms before each call, the current run %d ms: at large "
                "batches the clock states then differ between the two (README, How a number is taken)",
                a.idle_ms, b.idle_ms);
    gate_line *lines = calloc((size_t)(a.n + b.n + 1), sizeof(gate_line));
    if (!lines) {
        release(&a);
        release(&b);
        return MM_RUNTIME;
    }
    int n = 0, failures = 0, counts[6] = {0};
    for (int i = 0; i < a.n; i++) {
        gate_line *l = &lines[n++];
        l->old_row = &a.rows[i];
        l->new_row = find(&b, a.rows[i].mode, a.rows[i].batch);
        if (l->new_row && ((l->new_row->status != ROW_OK && l->new_row->status != ROW_SKIP) || l->new_row->accuracy[0])) {
            l->verdict = VERDICT_BROKEN;
            l->fails = 1;
        } else if (!l->old_row->has_time) {
            l->verdict = VERDICT_SAME; /* nothing timed in the baseline: nothing to compare */
        } else if (!l->new_row || !l->new_row->has_time) {
            l->verdict = VERDICT_MISSING;
            l->fails = 1;
        } else {
            l->verdict = gate_compare(&l->old_row->spread, &l->new_row->spread, o, &l->change);
            judge_relative(l, &a, &b, o);
            l->fails = l->verdict == VERDICT_SLOWER && l->change > o->max_slowdown && !l->reference;
        }
        failures += l->fails;
        counts[l->verdict]++;
    }
    /* Rows only in the current run still must not be wrong. */
    for (int i = 0; i < b.n; i++) {
        if (find(&a, b.rows[i].mode, b.rows[i].batch)) continue;
        if ((b.rows[i].status == ROW_OK || b.rows[i].status == ROW_SKIP) && !b.rows[i].accuracy[0]) continue;
        gate_line *l = &lines[n++];
        l->new_row = &b.rows[i];
        l->verdict = VERDICT_BROKEN;
        l->fails = 1;
        failures++;
        counts[VERDICT_BROKEN]++;
    }
    char summary[320];
    mm_fmt(summary, sizeof summary,
           "gate: %s: %d rows: %d same, %d faster, %d slower, %d unsure, %d missing, %d broken; "
           "max slowdown %.1f%%, min gap %.1f%%%s%s",
           failures ? "FAIL" : "PASS", n, counts[VERDICT_SAME], counts[VERDICT_FASTER],
           counts[VERDICT_SLOWER], counts[VERDICT_UNSURE], counts[VERDICT_MISSING],
           counts[VERDICT_BROKEN], o->max_slowdown * 100, o->min_gap * 100,
           o->relative_to >= 0 ? "; other modes relative to " : "",
           o->relative_to >= 0 ? reference_name(o) : "");
    print_table(out, &a, &b, lines, n, 0, summary);
    if (markdown_path) {
        FILE *f = fopen(markdown_path, "w");
        if (!f) {
            mm_error("gate: cannot write %s", markdown_path);
            s = MM_USAGE;
        } else {
            print_table(f, &a, &b, lines, n, 1, summary);
            if (fclose(f) != 0) s = MM_USAGE;
        }
    }
    free(lines);
    release(&a);
    release(&b);
    if (s != MM_OK) return s;
    return failures ? MM_FAIL : MM_OK;
}
