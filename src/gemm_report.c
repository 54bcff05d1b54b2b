/* gemm's results file: report.h's schema with gemm's modes and fields (gemm_report.h). */
#include "gemm_report.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

void gemm_results_init(mm_gemm_results *r)
{
    memset(r, 0, sizeof *r);
}

void gemm_results_free(mm_gemm_results *r)
{
    for (int i = 0; i < r->n; i++) free(r->rows[i].samples_us);
    free(r->rows);
    memset(r, 0, sizeof *r);
}

mm_status gemm_results_add(mm_gemm_results *r, const mm_gemm_result *row, const double *samples, int n_samples)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        mm_gemm_result *bigger = realloc(r->rows, sizeof *bigger * (size_t)cap);
        if (!bigger) return MM_RUNTIME;
        r->rows = bigger;
        r->cap = cap;
    }
    mm_gemm_result *dst = &r->rows[r->n];
    *dst = *row;
    dst->samples_us = NULL;
    dst->n_samples = 0;
    if (n_samples > 0) {
        dst->samples_us = malloc(sizeof(double) * (size_t)n_samples);
        if (!dst->samples_us) return MM_RUNTIME;
        memcpy(dst->samples_us, samples, sizeof(double) * (size_t)n_samples);
        dst->n_samples = n_samples;
    }
    r->n++;
    return MM_OK;
}

double mm_clock_mhz(unsigned long long cycles, unsigned long long ns)
{
    return ns ? (double)cycles * 1e3 / (double)ns : 0.0;
}

static cJSON *row_json(const mm_gemm_result *row)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "mode", row->mode);
    cJSON_AddNumberToObject(o, "batch", row->rows);
    cJSON_AddStringToObject(o, "status", row_status_name(row->status));
    cJSON_AddStringToObject(o, "note", row->note);
    const int timed = row->status == ROW_OK || row->status == ROW_FAIL;
    if (timed && row->stats.n > 0) cJSON_AddItemToObject(o, "time", report_stats_json(&row->stats));
    else cJSON_AddNullToObject(o, "time");
    cJSON *it = cJSON_AddArrayToObject(o, "iter_us");
    for (int i = 0; i < row->n_samples; i++) cJSON_AddItemToArray(it, cJSON_CreateNumber(row->samples_us[i]));
    cJSON *g = cJSON_AddObjectToObject(o, "gemm");
    cJSON_AddNumberToObject(g, "rows", row->rows);
    cJSON_AddNumberToObject(g, "n", row->n);
    cJSON_AddNumberToObject(g, "k", row->k);
    cJSON_AddNumberToObject(g, "tile", row->tile);
    if (row->stats.median > 0) {
        cJSON_AddNumberToObject(g, "tflops", row->flops / row->stats.median / 1e6);
        cJSON_AddNumberToObject(g, "weight_gbs", row->weight_bytes / row->stats.median / 1e3);
    }
    if (row->sm_mhz > 0) cJSON_AddNumberToObject(g, "sm_mhz", row->sm_mhz);
    cJSON *energy = report_energy_json(&row->energy, row->flops);
    if (energy) cJSON_AddItemToObject(g, "energy", energy);
    cJSON *d = cJSON_AddObjectToObject(o, "diff");
    cJSON_AddNumberToObject(d, "calc_diff", row->calc_diff);
    if (row->calc_diff_f32 >= 0) cJSON_AddNumberToObject(d, "calc_diff_f32", row->calc_diff_f32);
    cJSON *w = cJSON_AddObjectToObject(o, "work");
    cJSON_AddNumberToObject(w, "weight_bytes", row->weight_bytes);
    cJSON_AddNumberToObject(w, "flops", row->flops);
    return o;
}

mm_status gemm_report_json_write(const char *path, const mm_gemm_results *r)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", MM_RESULTS_SCHEMA);
    cJSON *meta = report_meta_json(&r->meta);
    cJSON_AddStringToObject(meta, "tool", "gemm");
    cJSON_AddStringToObject(meta, "spread", r->spread);
    cJSON_AddStringToObject(meta, "tile", r->tile);
    cJSON_AddStringToObject(meta, "wide_scales", r->wide_scales);
    cJSON_AddItemToObject(root, "meta", meta);
    cJSON *rows = cJSON_AddArrayToObject(root, "results");
    for (int i = 0; i < r->n; i++) cJSON_AddItemToArray(rows, row_json(&r->rows[i]));
    return json_write_atomic(path, root);
}
