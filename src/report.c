#include "report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const row_status_names[] = {"OK", "FAIL", "TIMEOUT", "ERROR", "SKIP"};

const char *row_status_name(mm_row_status s)
{
    return (unsigned)s < MM_ARRAY_LEN(row_status_names) ? row_status_names[s] : "?";
}

mm_status row_status_exit(mm_row_status s)
{
    switch (s) {
    case ROW_FAIL: return MM_FAIL;
    case ROW_TIMEOUT: return MM_TIMEOUT;
    case ROW_ERROR: return MM_RUNTIME;
    default: return MM_OK;
    }
}

int row_status_parse(const char *name)
{
    for (size_t i = 0; i < MM_ARRAY_LEN(row_status_names); i++)
        if (name && strcmp(name, row_status_names[i]) == 0) return (int)i;
    return -1;
}

void results_init(mm_results *r)
{
    memset(r, 0, sizeof *r);
}

void results_free(mm_results *r)
{
    for (int i = 0; i < r->n_rows; i++) free(r->rows[i].samples_us);
    free(r->rows);
    r->rows = NULL;
    r->n_rows = r->cap_rows = 0;
}

mm_row *results_add(mm_results *r, const mm_row *row, const double *samples, int n_samples)
{
    if (r->n_rows == r->cap_rows) {
        int cap = r->cap_rows ? r->cap_rows * 2 : 32;
        mm_row *rows = realloc(r->rows, sizeof(mm_row) * (size_t)cap);
        if (!rows) return NULL;
        r->rows = rows;
        r->cap_rows = cap;
    }
    mm_row *dst = &r->rows[r->n_rows];
    *dst = *row;
    dst->samples_us = NULL;
    dst->n_samples = 0;
    if (n_samples > 0) {
        dst->samples_us = malloc(sizeof(double) * (size_t)n_samples);
        if (!dst->samples_us) return NULL;
        memcpy(dst->samples_us, samples, sizeof(double) * (size_t)n_samples);
        dst->n_samples = n_samples;
    }
    r->n_rows++;
    return dst;
}

const mm_row *results_find(const mm_results *r, mm_mode mode, int batch)
{
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].mode == mode && r->rows[i].batch == batch) return &r->rows[i];
    return NULL;
}

/* ---- tables ---------------------------------------------------------------------------- */

typedef enum { STYLE_TEXT, STYLE_MARKDOWN } style;

/* Severity for merging two modes' statuses into one table row. */
static int severity(mm_row_status s)
{
    static const int rank[] = {[ROW_OK] = 0, [ROW_SKIP] = 1, [ROW_FAIL] = 2, [ROW_TIMEOUT] = 3,
                               [ROW_ERROR] = 4};
    return rank[s];
}

static int has_time(const mm_row *row)
{
    return row && row->status != ROW_SKIP && row->ranks_timed > 0;
}

static void cell_us(char *buf, size_t n, const mm_row *row)
{
    if (has_time(row)) mm_fmt(buf, n, "%.1f", row->stats.median);
    else mm_fmt(buf, n, "-");
}

static void header(FILE *f, const mm_results *r, style st)
{
    const mm_meta *m = &r->meta;
    const char *p = st == STYLE_TEXT ? "# " : "";
    const char *nl = st == STYLE_TEXT ? "\n" : "  \n";
    fprintf(f, "%smegamoe bench: %s (hidden %d, intermediate %d, %d experts, top-%d, %s scales, "
               "swiglu limit %s), EP %d%s",
            p, m->config, m->hidden, m->inter, m->experts, m->topk, m->scale_fmt, m->swiglu_limit,
            m->ep, nl);
    if (m->has_ceilings) {
        static const char *const what[CEIL_COUNT] = {"HBM %.0f GB/s", "FP8 GEMM %.0f TFLOP/s", "NVLink %.0f GB/s"};
        fprintf(f, "%sceilings of the floors:", p);
        for (int k = 0; k < CEIL_COUNT; k++) {
            fprintf(f, k ? "; " : " ");
            fprintf(f, what[k], ceiling_get(&m->ceilings.value, (mm_ceiling_kind)k));
            fprintf(f, " (%s: %s)", ceiling_source_name(m->ceilings.source[k]), m->ceilings.how[k]);
        }
        fprintf(f, "%s", nl);
    }
    if (m->ep_slice)
        fprintf(f, "%sEP %d slice: one rank's work of EP %d emulated on this GPU (%d experts, the rows rank 0 receives "
                   "from %d x batch tokens); no NVLink traffic and no waits on other ranks%s",
                p, m->ep_slice, m->ep_slice, m->experts / m->ep_slice, m->ep_slice, nl);
    fprintf(f, "%sGPU %s, driver %s, CUDA %s, NCCL %s%s", p, m->gpu, m->driver, m->cuda, m->nccl,
            nl);
    fprintf(f, "%srouting %s, seed %llu, warmup %d, iters %d, graph %s, L2 flush %s, idle %d ms before each call, modes %s%s",
            p, m->routing, m->seed, m->warmup, m->iters, m->graph ? "on" : "off", l2_flush_name(m->l2_flush),
            m->idle_ms, m->interleave ? "interleaved" : "one after another", nl);
    for (int i = 0; i < m->n_rank_lines; i++) fprintf(f, "%s%s%s", p, m->rank_lines[i], nl);
}

static int mode_present(const mm_results *r, mm_mode mode)
{
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].mode == mode) return 1;
    return 0;
}

/* Distinct batches in first-seen order. */
static int batches_of(const mm_results *r, int *out, int cap)
{
    int n = 0;
    for (int i = 0; i < r->n_rows; i++) {
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= out[j] == r->rows[i].batch;
        if (!seen && n < cap) out[n++] = r->rows[i].batch;
    }
    return n;
}

static void join_note(char *dst, size_t n, const mm_row *row)
{
    if (!row || !row->note[0]) return;
    size_t used = strlen(dst);
    mm_fmt(dst + used, n - used, "%s%s: %s", used ? "; " : "", mode_name(row->mode), row->note);
}

/* A table of `a` (fused, or a mode alone) against baseline `b` (or MODE_COUNT for none). */
static void table(FILE *f, const mm_results *r, mm_mode a, mm_mode b, style st)
{
    int has_b = b != MODE_COUNT;
    char a_us[24], b_us[24];
    mm_fmt(a_us, sizeof a_us, "%s_us", mode_name(a));
    mm_fmt(b_us, sizeof b_us, "%s_us", has_b ? mode_name(b) : "");
    if (st == STYLE_TEXT) {
        fprintf(f, "\n## %s%s%s\n", mode_name(a), has_b ? " vs " : "", has_b ? mode_name(b) : "");
        fprintf(f, "%7s  %-7s %10s", "batch", "status", a_us);
        if (has_b) fprintf(f, " %10s %8s", b_us, "speedup");
        fprintf(f, " %10s %6s  %s\n", "max_diff", "ranks", "note");
    } else {
        fprintf(f, "\n### %s%s%s\n\n", mode_name(a), has_b ? " vs " : "", has_b ? mode_name(b) : "");
        fprintf(f, "| batch | status | %s |", a_us);
        if (has_b) fprintf(f, " %s | speedup |", b_us);
        fprintf(f, " max_diff | ranks | note |\n|---:|---|---:|");
        if (has_b) fprintf(f, "---:|---:|");
        fprintf(f, "---:|---:|---|\n");
    }
    int batches[1024];
    int nb = batches_of(r, batches, (int)MM_ARRAY_LEN(batches));
    for (int i = 0; i < nb; i++) {
        const mm_row *ra = results_find(r, a, batches[i]);
        const mm_row *rb = has_b ? results_find(r, b, batches[i]) : NULL;
        if (!ra && !rb) continue;
        mm_row_status s = ra ? ra->status : ROW_SKIP;
        if (rb && severity(rb->status) > severity(s)) s = rb->status;
        char ca[24], cb[24], sp[24] = "-", md[24] = "-", note[400] = "";
        cell_us(ca, sizeof ca, ra);
        cell_us(cb, sizeof cb, rb);
        if (has_time(ra) && has_time(rb) && ra->stats.median > 0)
            mm_fmt(sp, sizeof sp, "%.2f", rb->stats.median / ra->stats.median);
        double worst = -1;
        if (ra && ra->diff.has_diff) worst = ra->diff.max_abs;
        if (rb && rb->diff.has_diff && rb->diff.max_abs > worst) worst = rb->diff.max_abs;
        if (worst >= 0) mm_fmt(md, sizeof md, "%.3g", worst);
        int ranks = ra ? ra->ranks_timed : 0;
        if (rb && (!ra || rb->ranks_timed < ranks)) ranks = rb->ranks_timed;
        if (!ra) mm_fmt(note, sizeof note, "%s: not run", mode_name(a));
        join_note(note, sizeof note, ra);
        join_note(note, sizeof note, rb);
        if (st == STYLE_TEXT) {
            fprintf(f, "%7d  %-7s %10s", batches[i], row_status_name(s), ca);
            if (has_b) fprintf(f, " %10s %8s", cb, sp);
            fprintf(f, " %10s %6d  %s\n", md, ranks, note);
        } else {
            fprintf(f, "| %d | %s | %s |", batches[i], row_status_name(s), ca);
            if (has_b) fprintf(f, " %s | %s |", cb, sp);
            fprintf(f, " %s | %d | %s |\n", md, ranks, note);
        }
    }
}

static void tables(FILE *f, const mm_results *r, style st)
{
    header(f, r, st);
    int fused = mode_present(r, MODE_FUSED);
    int baselines = 0;
    for (int m = MODE_NORMAL; m < MODE_COUNT; m++) {
        if (!mode_present(r, (mm_mode)m)) continue;
        baselines++;
        if (fused) table(f, r, MODE_FUSED, (mm_mode)m, st);
        else table(f, r, (mm_mode)m, MODE_COUNT, st);
    }
    if (fused && !baselines) table(f, r, MODE_FUSED, MODE_COUNT, st);
}

/* --breakdown rows: one line per (mode, batch) with its stages. */
static void stages_text(FILE *f, const mm_results *r)
{
    int any = 0;
    for (int i = 0; i < r->n_rows; i++) {
        const mm_row *row = &r->rows[i];
        if (!row->n_stages) continue;
        if (!any) fprintf(f, "\n## stages (--breakdown: us, median of instrumented calls, per stage the slowest rank's; each rank's in the JSON)\n");
        any = 1;
        fprintf(f, "%-6s %6d ", mode_name(row->mode), row->batch);
        for (int k = 0; k < row->n_stages; k++) fprintf(f, " %s %.1f", row->stage_name[k], row->stage_us[k]);
        fprintf(f, "\n");
    }
}

/* Per batch: the expected floor and this routing's, and each timed mode's floor / measured
 * against both (a decode batch's routing can touch more or fewer experts than expected). */
static void floors_text(FILE *f, const mm_results *r)
{
    int batches[MM_MAX_BATCHES];
    const int nb = batches_of(r, batches, MM_MAX_BATCHES);
    int any = 0;
    for (int i = 0; i < nb; i++) {
        const mm_row *ref = NULL;
        for (int m = 0; m < MODE_COUNT && !ref; m++) {
            const mm_row *row = results_find(r, (mm_mode)m, batches[i]);
            if (row && row->floor_us > 0.0 && row->routing_floor_us > 0.0) ref = row;
        }
        if (!ref) continue;
        if (!any) {
            fprintf(f, "\n## floors (us: the plan's expected, and this routing's: the busiest rank's local experts in "
                       "place of the expected count; tiles: the most 128-row tiles on a rank, tiles_x: those over its "
                       "rows / 128; per mode floor / measured, expected / routing)\n");
            fprintf(f, "%7s %9s %9s %8s %6s %7s", "batch", "floor", "routing", "experts", "tiles", "tiles_x");
            for (int m = 0; m < MODE_COUNT; m++)
                if (mode_present(r, (mm_mode)m)) fprintf(f, " %12s", mode_name((mm_mode)m));
            fprintf(f, "\n");
        }
        any = 1;
        fprintf(f, "%7d %9.1f %9.1f %8d %6d %7.2f", batches[i], ref->floor_us, ref->routing_floor_us, ref->routing_experts,
                ref->routing_tiles, ref->routing_tile_excess);
        for (int m = 0; m < MODE_COUNT; m++) {
            if (!mode_present(r, (mm_mode)m)) continue;
            const mm_row *row = results_find(r, (mm_mode)m, batches[i]);
            char cell[32] = "-";
            if (row && has_time(row) && row->stats.median > 0.0)
                mm_fmt(cell, sizeof cell, "%.2f/%.2f", ref->floor_us / row->stats.median,
                       ref->routing_floor_us / row->stats.median);
            fprintf(f, " %12s", cell);
        }
        fprintf(f, "\n");
    }
}

/* --energy-ms rows: one line per (mode, batch) with a reading, and a baseline's joules over
 * fused's at the same batch. */
static void energy_text(FILE *f, const mm_results *r)
{
    int any = 0;
    for (int i = 0; i < r->n_rows; i++) {
        const mm_row *row = &r->rows[i];
        if (!row->energy.valid && !row->energy.calls) continue;
        if (!any)
            fprintf(f, "\n## energy (--energy-ms: each row's calls back to back, ranks lined up, no flush; J a call and "
                       "W summed over the ranks' GPUs, capped: the largest share of the window a rank's power cap "
                       "held its clocks down)\n");
        any = 1;
        char cell[128], ratio[48] = "";
        mm_power_format(&row->energy, cell, sizeof cell);
        const mm_row *fused = row->mode != MODE_FUSED ? results_find(r, MODE_FUSED, row->batch) : NULL;
        if (fused && fused->energy.valid && row->energy.valid && fused->energy.joules_per_call > 0)
            mm_fmt(ratio, sizeof ratio, "  %s / fused %.2fx", mode_name(row->mode),
                   row->energy.joules_per_call / fused->energy.joules_per_call);
        fprintf(f, "%-6s %6d  %s  (%d calls)%s\n", mode_name(row->mode), row->batch, cell, row->energy.calls, ratio);
    }
}

void report_text(FILE *f, const mm_results *r)
{
    tables(f, r, STYLE_TEXT);
    floors_text(f, r);
    stages_text(f, r);
    energy_text(f, r);
}

void report_markdown(FILE *f, const mm_results *r)
{
    tables(f, r, STYLE_MARKDOWN);
}

void report_progress(FILE *f, const mm_row *row)
{
    if (has_time(row))
        fprintf(f, "megamoe: %-6s batch %6d  %-7s median %10.1f us  (%d ranks)%s%s\n",
                mode_name(row->mode), row->batch, row_status_name(row->status), row->stats.median,
                row->ranks_timed, row->note[0] ? "  " : "", row->note);
    else
        fprintf(f, "megamoe: %-6s batch %6d  %-7s %s\n", mode_name(row->mode), row->batch,
                row_status_name(row->status), row->note);
    fflush(f);
}

/* ---- JSON ------------------------------------------------------------------------------ */

cJSON *report_stats_json(const mm_stats *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", s->n);
    cJSON_AddNumberToObject(o, "median_us", s->median);
    cJSON_AddNumberToObject(o, "mean_us", s->mean);
    cJSON_AddNumberToObject(o, "min_us", s->min);
    cJSON_AddNumberToObject(o, "max_us", s->max);
    cJSON_AddNumberToObject(o, "p90_us", s->p90);
    cJSON_AddNumberToObject(o, "stdev_us", s->stdev);
    return o;
}

cJSON *report_run_meta_json(const mm_meta *m)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "ep", m->ep);
    cJSON_AddStringToObject(o, "gpu", m->gpu);
    cJSON_AddStringToObject(o, "driver", m->driver);
    cJSON_AddStringToObject(o, "cuda", m->cuda);
    cJSON_AddStringToObject(o, "nccl", m->nccl);
    cJSON_AddNumberToObject(o, "seed", (double)m->seed);
    cJSON_AddStringToObject(o, "git_rev", m->git_rev);
    cJSON_AddStringToObject(o, "host", m->host);
    cJSON_AddStringToObject(o, "date", m->date);
    cJSON_AddStringToObject(o, "argv", m->argv);
    cJSON *ranks = cJSON_AddArrayToObject(o, "ranks");
    for (int i = 0; i < m->n_rank_lines; i++)
        cJSON_AddItemToArray(ranks, cJSON_CreateString(m->rank_lines[i]));
    return o;
}

/* The run's meta plus what a sweep adds: the config and its shape, routing, iterations. */
cJSON *report_meta_json(const mm_meta *m)
{
    cJSON *o = report_run_meta_json(m);
    cJSON_AddStringToObject(o, "config", m->config);
    cJSON *shape = cJSON_AddObjectToObject(o, "shape");
    cJSON_AddNumberToObject(shape, "hidden", m->hidden);
    cJSON_AddNumberToObject(shape, "intermediate", m->inter);
    cJSON_AddNumberToObject(shape, "experts", m->experts);
    cJSON_AddNumberToObject(shape, "topk", m->topk);
    cJSON_AddStringToObject(shape, "scale_fmt", m->scale_fmt);
    cJSON_AddStringToObject(shape, "weights", m->weights[0] ? m->weights : "fp8");
    cJSON_AddStringToObject(shape, "swiglu_limit", m->swiglu_limit);
    cJSON_AddStringToObject(o, "routing", m->routing);
    cJSON_AddNumberToObject(o, "warmup", m->warmup);
    cJSON_AddNumberToObject(o, "iters", m->iters);
    cJSON_AddBoolToObject(o, "graph", m->graph);
    cJSON_AddBoolToObject(o, "l2_flush", m->l2_flush);
    cJSON_AddStringToObject(o, "l2_flush_mode", l2_flush_name(m->l2_flush)); /* on (a write) or clean (a read) */
    cJSON_AddBoolToObject(o, "interleave", m->interleave);
    cJSON_AddNumberToObject(o, "idle_ms", m->idle_ms);
    cJSON_AddNumberToObject(o, "ep_slice", m->ep_slice);
    if (m->has_ceilings) {
        static const char *const key[CEIL_COUNT] = {"hbm_gbps", "fp8_tflops", "nvlink_gbps"};
        static const char *const src[CEIL_COUNT] = {"hbm", "fp8", "nvlink"};
        cJSON *c = cJSON_AddObjectToObject(o, "ceilings");
        for (int k = 0; k < CEIL_COUNT; k++) {
            char how_key[32];
            cJSON_AddNumberToObject(c, key[k], ceiling_get(&m->ceilings.value, (mm_ceiling_kind)k));
            cJSON_AddStringToObject(c, src[k], ceiling_source_name(m->ceilings.source[k]));
            mm_fmt(how_key, sizeof how_key, "%s_how", src[k]);
            cJSON_AddStringToObject(c, how_key, m->ceilings.how[k]);
        }
    }
    return o;
}

static cJSON *row_json(const mm_row *row)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "mode", mode_name(row->mode));
    cJSON_AddNumberToObject(o, "batch", row->batch);
    cJSON_AddStringToObject(o, "status", row_status_name(row->status));
    cJSON_AddStringToObject(o, "note", row->note);
    if (has_time(row)) cJSON_AddItemToObject(o, "time", report_stats_json(&row->stats));
    else cJSON_AddNullToObject(o, "time");
    cJSON_AddNumberToObject(o, "ranks_timed", row->ranks_timed);
    cJSON *pr = cJSON_AddArrayToObject(o, "rank_median_us");
    for (int i = 0; i < row->nranks && i < MM_MAX_RANKS; i++)
        cJSON_AddItemToArray(pr, cJSON_CreateNumber(row->rank_median_us[i]));
    cJSON *it = cJSON_AddArrayToObject(o, "iter_us");
    for (int i = 0; i < row->n_samples; i++)
        cJSON_AddItemToArray(it, cJSON_CreateNumber(row->samples_us[i]));
    if (row->diff.has_diff) {
        cJSON *d = cJSON_AddObjectToObject(o, "diff");
        cJSON_AddNumberToObject(d, "calc_diff", row->diff.calc_diff);
        cJSON_AddNumberToObject(d, "max_abs", row->diff.max_abs);
        cJSON_AddNumberToObject(d, "ref_max_abs", row->diff.ref_max_abs);
        cJSON_AddNumberToObject(d, "nonfinite", (double)row->diff.nonfinite);
        if (row->diff.bitwise_vs[0]) {
            cJSON_AddStringToObject(d, "bitwise_vs", row->diff.bitwise_vs);
            cJSON_AddBoolToObject(d, "bitwise_equal", row->diff.bitwise_equal);
        }
    } else {
        cJSON_AddNullToObject(o, "diff");
    }
    if (row->n_stages) {
        cJSON *st = cJSON_AddArrayToObject(o, "stages");
        for (int k = 0; k < row->n_stages; k++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", row->stage_name[k]);
            cJSON_AddNumberToObject(e, "us", row->stage_us[k]);
            cJSON *br = cJSON_AddArrayToObject(e, "by_rank");
            for (int r = 0; r < row->nranks && r < MM_MAX_RANKS; r++)
                cJSON_AddItemToArray(br, cJSON_CreateNumber(row->stage_rank_us[r][k]));
            cJSON_AddItemToArray(st, e);
        }
    }
    cJSON *energy = report_energy_json(&row->energy, row->flops);
    if (energy) cJSON_AddItemToObject(o, "energy", energy);
    cJSON *w = cJSON_AddObjectToObject(o, "work");
    cJSON_AddNumberToObject(w, "weight_bytes", row->weight_bytes);
    cJSON_AddNumberToObject(w, "nvlink_bytes", row->nvlink_bytes);
    cJSON_AddNumberToObject(w, "flops", row->flops);
    cJSON_AddNumberToObject(w, "floor_us", row->floor_us);
    if (row->routing_floor_us > 0.0) {
        cJSON_AddNumberToObject(w, "routing_floor_us", row->routing_floor_us);
        cJSON_AddNumberToObject(w, "routing_experts", row->routing_experts);
        cJSON_AddNumberToObject(w, "routing_tiles", row->routing_tiles);
        cJSON_AddNumberToObject(w, "routing_tile_excess", row->routing_tile_excess);
    }
    return o;
}

cJSON *report_energy_json(const mm_power_window *w, double flops)
{
    if (!w->valid) return NULL;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "joules_per_call", w->joules_per_call);
    cJSON_AddNumberToObject(e, "watts", w->watts);
    if (w->capped_frac >= 0) cJSON_AddNumberToObject(e, "power_capped_frac", w->capped_frac);
    cJSON_AddNumberToObject(e, "window_s", w->window_s);
    cJSON_AddNumberToObject(e, "calls", w->calls);
    cJSON_AddNumberToObject(e, "loop_s", w->loop_s);
    if (w->sm_mhz > 0) cJSON_AddNumberToObject(e, "sm_mhz", w->sm_mhz);
    if (flops > 0 && w->joules_per_call > 0) cJSON_AddNumberToObject(e, "gflop_per_joule", flops / w->joules_per_call / 1e9);
    return e;
}

mm_status json_write_atomic(const char *path, cJSON *root)
{
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        mm_error("json %s: out of memory while rendering", path);
        return MM_RUNTIME;
    }
    char tmp[1100];
    mm_fmt(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    mm_status s = MM_OK;
    if (!f) {
        mm_error("json %s: cannot write %s: %s", path, tmp, strerror(errno));
        s = MM_USAGE;
    } else {
        size_t n = strlen(text);
        int bad = fwrite(text, 1, n, f) != n || fputc('\n', f) == EOF;
        bad |= fclose(f) != 0;
        if (bad || rename(tmp, path) != 0) {
            mm_error("json %s: write failed: %s", path, strerror(errno));
            remove(tmp);
            s = MM_USAGE;
        }
    }
    cJSON_free(text);
    return s;
}

mm_status report_read_ceilings(const char *path, mm_ceilings *c, char *err, size_t len)
{
    size_t n = 0;
    char *buf = mm_read_file(path, &n, err, len);
    if (!buf) return MM_USAGE;
    cJSON *root = cJSON_ParseWithLength(buf, n);
    free(buf);
    const cJSON *meta = root ? cJSON_GetObjectItemCaseSensitive(root, "meta") : NULL;
    const cJSON *ceil = meta ? cJSON_GetObjectItemCaseSensitive(meta, "ceilings") : NULL;
    static const char *const key[CEIL_COUNT] = {"hbm_gbps", "fp8_tflops", "nvlink_gbps"};
    mm_ceilings read = {0, 0, 0};
    mm_status s = MM_OK;
    if (!root) {
        mm_fmt(err, len, "%s is not valid JSON", path);
        s = MM_USAGE;
    } else if (!cJSON_IsObject(ceil)) {
        mm_fmt(err, len, "%s has no meta.ceilings (a bench results file has them)", path);
        s = MM_USAGE;
    }
    for (int k = 0; k < CEIL_COUNT && s == MM_OK; k++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(ceil, key[k]);
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble <= 0 || x->valuedouble > 1e9) {
            mm_fmt(err, len, "%s: meta.ceilings.%s must be a positive number", path, key[k]);
            s = MM_USAGE;
        } else {
            *ceiling_value(&read, (mm_ceiling_kind)k) = x->valuedouble;
        }
    }
    if (s == MM_OK) *c = read;
    cJSON_Delete(root);
    return s;
}

mm_status report_json_write(const char *path, const mm_results *r)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", MM_RESULTS_SCHEMA);
    cJSON_AddItemToObject(root, "meta", report_meta_json(&r->meta));
    cJSON *rows = cJSON_AddArrayToObject(root, "results");
    for (int i = 0; i < r->n_rows; i++) cJSON_AddItemToArray(rows, row_json(&r->rows[i]));
    return json_write_atomic(path, root);
}
