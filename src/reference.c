#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/recipe.h"
#include "datagen_host.h"

/* Step 2 / step 5: per-128 quantization of a row of width n. */
static void quantize_row(const float *v, int n, int ue8m0, uint8_t *q, float *scale)
{
    for (int b = 0; b < n / 128; b++) {
        float amax = 0.0f;
        for (int c = 0; c < 128; c++) amax = fmaxf(amax, fabsf(v[b * 128 + c]));
        scale[b] = mm_block_scale(amax, ue8m0);
        for (int c = 0; c < 128; c++) q[b * 128 + c] = mm_quantize(v[b * 128 + c], scale[b]);
    }
}

/* Step 3 / step 6: out[n] = sum over K blocks of (sa[kb] * sw[n/128][kb]) * sum(qa * qw), every
 * product and sum in double (exact for FP8 products; the block sums are exact too). */
static void gemm_row(const uint8_t *qa, const float *sa, const uint8_t *w, const float *sw, int n_out,
                     int k, double *out)
{
    int kblocks = k / 128;
    for (int n = 0; n < n_out; n++) {
        double acc = 0.0;
        for (int kb = 0; kb < kblocks; kb++) {
            double block = 0.0;
            for (int c = 0; c < 128; c++)
                block += (double)mm_fp8_decode(qa[kb * 128 + c]) *
                         (double)mm_fp8_decode(w[(size_t)n * k + kb * 128 + c]);
            acc += (double)sa[kb] * (double)sw[(n / 128) * kblocks + kb] * block;
        }
        out[n] = acc;
    }
}

void ref_fp4_block_refs(const uint8_t *exps, int n_out, int k, int *refs)
{
    const int kblocks = k / 128, groups = k / 32;
    for (int n0 = 0; n0 < n_out; n0 += 128)
        for (int kb = 0; kb < kblocks; kb++) {
            int top = 0;
            for (int r = n0; r < n0 + 128 && r < n_out; r++)
                for (int g = 0; g < 4; g++) top = exps[(size_t)r * groups + kb * 4 + g] > top ? exps[(size_t)r * groups + kb * 4 + g] : top;
            refs[(n0 / 128) * kblocks + kb] = top - 6;
        }
}

/* The 128 codes of K block kb of a row, in K order, from the storage order of docs/recipe.md
 * ("FP4 weights"), worked out here from the document rather than through fp4.h's accessors: the
 * block's 64 bytes are 16 little-endian words, word 4 q + j holding weights 32 j + 4 q + i ("lo",
 * magnitude in bits 4 i.., sign in bit 8 i + 7) and 32 j + 16 + 4 q + i ("hi", bits 16 + 4 i..,
 * sign in bit 8 i + 3), i = 0..3. */
static void host_fp4_block_codes(const uint8_t *row_codes, int kb, int out[128])
{
    for (int q = 0; q < 4; q++)
        for (int j = 0; j < 4; j++) {
            const uint8_t *word = row_codes + kb * 64 + q * 16 + j * 4;
            const uint32_t w = (uint32_t)word[0] | (uint32_t)word[1] << 8 | (uint32_t)word[2] << 16 | (uint32_t)word[3] << 24;
            for (int i = 0; i < 4; i++) {
                out[32 * j + 4 * q + i] = (int)((w >> (8 * i + 7)) & 1u) * 8 + (int)((w >> (4 * i)) & 7u);
                out[32 * j + 16 + 4 * q + i] = (int)((w >> (8 * i + 3)) & 1u) * 8 + (int)((w >> (16 + 4 * i)) & 7u);
            }
        }
}

long long ref_gemm_row_fp4(const uint8_t *qa, const float *sa, const uint8_t *codes, const uint8_t *exps, const int *refs,
                           int n_out, int k, double *out)
{
    static const double e2m1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
    const int kblocks = k / 128, groups = k / 32;
    long long past = 0;
    for (int n = 0; n < n_out; n++) {
        const uint8_t *row_codes = codes + (size_t)n * (k / 2), *row_exps = exps + (size_t)n * groups;
        const int *ref = refs + (size_t)(n / 128) * kblocks;
        double acc = 0.0;
        for (int kb = 0; kb < kblocks; kb++) {
            int block_codes[128];
            host_fp4_block_codes(row_codes, kb, block_codes);
            double block = 0.0;
            for (int g = 0; g < 4; g++) {
                const int d = row_exps[kb * 4 + g] - ref[kb];
                past += d < -8;
                for (int j = 0; j < 32; j++) {
                    const int c = kb * 128 + g * 32 + j;
                    const int code = block_codes[g * 32 + j];
                    const double v = (code & 8 ? -1.0 : 1.0) * e2m1[code & 7] * ldexp(1.0, d);
                    /* exact in e4m3 within the range; past it the recipe's e4m3 rounding */
                    const double w8 = d >= -8 ? v : (double)mm_fp8_decode(mm_fp8_encode((float)v));
                    block += (double)mm_fp8_decode(qa[c]) * w8;
                }
            }
            acc += (double)sa[kb] * ldexp(1.0, ref[kb] - 127) * block;
        }
        out[n] = acc;
    }
    return past;
}

/* Tokens per pass: a pass keeps every (token, k) output row ([tokens][k][h] doubles) under this. */
#define REF_PASS_BYTES ((size_t)64 << 20)

/* Within a pass the (token, k) slots run grouped by expert, so each expert is fetched once per
 * pass: token order would regenerate an expert on every slot once the experts in use outnumber
 * the source's cache (balanced routing at EP4 cycles through 16 experts). The rows are then summed
 * per token in k order, as before. */
mm_status ref_host_layer(const mm_config *cfg, const mm_expert_source *experts, const uint16_t *x,
                         const int32_t *ids, const float *w, int tokens, double *y)
{
    const int h = cfg->hidden, in = cfg->inter, k = cfg->topk, ue8m0 = cfg->scale_fmt == MM_SCALE_UE8M0;
    const int fp4 = cfg->weights == MM_WEIGHTS_FP4;
    size_t per_token = (size_t)k * (size_t)h * sizeof(double);
    int pass = (int)(REF_PASS_BYTES / per_token);
    if (pass < 1) pass = 1;
    if (pass > tokens) pass = tokens > 0 ? tokens : 1;
    float *xf = malloc(sizeof(float) * (size_t)h), *hf = malloc(sizeof(float) * (size_t)in);
    uint8_t *qx = malloc((size_t)pass * h), *qh = malloc((size_t)in);
    float *sx = malloc(sizeof(float) * (size_t)pass * (h / 128)), *sh = malloc(sizeof(float) * (size_t)(in / 128));
    double *g1 = malloc(sizeof(double) * 2 * (size_t)in), *part = malloc(per_token * (size_t)pass);
    int *order = malloc(sizeof(int) * (size_t)pass * k), *first = malloc(sizeof(int) * ((size_t)cfg->experts + 1));
    /* FP4: the current expert's block references of W1 and W2, worked out once per fetch */
    const size_t refs1_n = (size_t)(2 * in / 128) * (h / 128), refs2_n = (size_t)(h / 128) * (in / 128);
    int *refs1 = fp4 ? malloc(sizeof(int) * refs1_n) : NULL, *refs2 = fp4 ? malloc(sizeof(int) * refs2_n) : NULL;
    mm_status s = (xf && hf && qx && qh && sx && sh && g1 && part && order && first && (!fp4 || (refs1 && refs2)))
                      ? MM_OK : MM_RUNTIME;
    for (int t0 = 0; s == MM_OK && t0 < tokens; t0 += pass) {
        const int n = tokens - t0 < pass ? tokens - t0 : pass;
        const int32_t *pid = ids + (size_t)t0 * k;
        for (int i = 0; i < n; i++) {
            for (int c = 0; c < h; c++) xf[c] = mm_bf16_decode(x[(size_t)(t0 + i) * h + c]);
            quantize_row(xf, h, ue8m0, qx + (size_t)i * h, sx + (size_t)i * (h / 128));
        }
        /* counting sort of the valid slots by expert (stable: token order within an expert) */
        memset(first, 0, sizeof(int) * ((size_t)cfg->experts + 1));
        for (int q = 0; q < n * k && s == MM_OK; q++) {
            if (pid[q] >= cfg->experts) s = MM_RUNTIME;
            else if (pid[q] >= 0) first[pid[q] + 1]++;
        }
        for (int e = 0; e < cfg->experts; e++) first[e + 1] += first[e];
        const int valid = s == MM_OK ? first[cfg->experts] : 0;
        for (int q = 0; q < n * k && s == MM_OK; q++)
            if (pid[q] >= 0) order[first[pid[q]]++] = q;
        const mm_expert_weights *ew = NULL;
        for (int v = 0; v < valid && s == MM_OK; v++) {
            const int q = order[v], i = q / k, e = pid[q];
            if (v == 0 || pid[order[v - 1]] != e) {
                ew = experts->get(experts->ctx, e);
                if (ew && fp4) {
                    ref_fp4_block_refs(ew->e1, 2 * in, h, refs1);
                    ref_fp4_block_refs(ew->e2, h, in, refs2);
                }
            }
            if (!ew) { s = MM_RUNTIME; break; }
            if (fp4) ref_gemm_row_fp4(qx + (size_t)i * h, sx + (size_t)i * (h / 128), ew->c1, ew->e1, refs1, 2 * in, h, g1);
            else gemm_row(qx + (size_t)i * h, sx + (size_t)i * (h / 128), ew->w1, ew->s1, 2 * in, h, g1);
            /* Step 4 in double, then rounded once to FP32 for step 5's quantization. */
            for (int c = 0; c < in; c++) {
                double gate = g1[c], up = g1[in + c];
                if (cfg->has_swiglu_limit) {
                    double l = cfg->swiglu_limit;
                    gate = gate < l ? gate : l;
                    up = up < -l ? -l : (up > l ? l : up);
                }
                hf[c] = (float)(gate / (1.0 + exp(-gate)) * up * (double)w[(size_t)t0 * k + q]);
            }
            quantize_row(hf, in, ue8m0, qh, sh);
            if (fp4) ref_gemm_row_fp4(qh, sh, ew->c2, ew->e2, refs2, h, in, part + (size_t)q * h);
            else gemm_row(qh, sh, ew->w2, ew->s2, h, in, part + (size_t)q * h);
        }
        for (int i = 0; i < n && s == MM_OK; i++) {
            double *yt = y + (size_t)(t0 + i) * h;
            for (int c = 0; c < h; c++) yt[c] = 0.0;
            for (int j = 0; j < k; j++) {
                if (pid[i * k + j] < 0) continue; /* step 7: masked slots add nothing */
                const double *row = part + (size_t)(i * k + j) * h;
                for (int c = 0; c < h; c++) yt[c] += row[c]; /* k order */
            }
        }
    }
    free(xf); free(hf); free(qx); free(qh); free(sx); free(sh); free(g1); free(part); free(order); free(first);
    free(refs1); free(refs2);
    return s;
}

/* ---- SwiGLU checks --------------------------------------------------------------------------- */

double ref_swiglu(float gate, float up, float w, int has_limit, float limit)
{
    double g = has_limit ? fmin((double)gate, limit) : gate;
    double u = has_limit ? fmax(-(double)limit, fmin((double)up, limit)) : up;
    return g / (1.0 + exp(-g)) * u * w;
}

void ref_swiglu_input(uint64_t *rng, float *gate, float *up, float *w)
{
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    *gate = (float)((double)(*rng >> 40) / (1 << 24) * 40.0 - 20.0);
    *up = (float)((double)((*rng >> 16) & 0xffffff) / (1 << 24) * 40.0 - 20.0);
    *w = (float)((double)(*rng & 0xffff) / 65536.0);
}

int ref_swiglu_close(float h, double ref)
{
    return fabs((double)h - ref) <= 4e-6 * fabs(ref) + 1e-37;
}

/* ---- experts regenerated from the seed --------------------------------------------------- */

#define CACHE_SLOTS 8

struct mm_generated_experts {
    mm_config cfg;
    uint64_t seed;
    int id[CACHE_SLOTS];
    int next;
    uint8_t *w1[CACHE_SLOTS], *w2[CACHE_SLOTS];
    float *s1[CACHE_SLOTS], *s2[CACHE_SLOTS];
    uint8_t *c1[CACHE_SLOTS], *e1[CACHE_SLOTS], *c2[CACHE_SLOTS], *e2[CACHE_SLOTS]; /* FP4 weights */
    mm_expert_weights view[CACHE_SLOTS];
};

mm_generated_experts *generated_experts_new(const mm_config *cfg, uint64_t seed)
{
    mm_generated_experts *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->cfg = *cfg;
    g->seed = seed;
    size_t h = (size_t)cfg->hidden, in = (size_t)cfg->inter;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        g->id[i] = -1;
        g->w1[i] = malloc(2 * in * h);
        g->w2[i] = malloc(h * in);
        g->s1[i] = malloc(sizeof(float) * (2 * in / 128) * (h / 128));
        g->s2[i] = malloc(sizeof(float) * (h / 128) * (in / 128));
        if (cfg->weights == MM_WEIGHTS_FP4) {
            g->c1[i] = malloc(in * h);
            g->e1[i] = malloc(2 * in * h / 32);
            g->c2[i] = malloc(h * in / 2);
            g->e2[i] = malloc(h * in / 32);
        }
        if (!g->w1[i] || !g->w2[i] || !g->s1[i] || !g->s2[i] ||
            (cfg->weights == MM_WEIGHTS_FP4 && (!g->c1[i] || !g->e1[i] || !g->c2[i] || !g->e2[i]))) {
            generated_experts_free(g);
            return NULL;
        }
    }
    return g;
}

void generated_experts_free(mm_generated_experts *g)
{
    if (!g) return;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        free(g->w1[i]);
        free(g->w2[i]);
        free(g->s1[i]);
        free(g->s2[i]);
        free(g->c1[i]);
        free(g->e1[i]);
        free(g->c2[i]);
        free(g->e2[i]);
    }
    free(g);
}

static const mm_expert_weights *generated_get(void *ctx, int expert)
{
    mm_generated_experts *g = ctx;
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (g->id[i] == expert) return &g->view[i];
    int i = g->next;
    g->next = (g->next + 1) % CACHE_SLOTS;
    if (g->cfg.weights == MM_WEIGHTS_FP4)
        host_gen_fp4_expert(g->seed, g->cfg.fp4_pattern, expert, g->cfg.hidden, g->cfg.inter, g->c1[i], g->e1[i], g->c2[i], g->e2[i]);
    else
        host_gen_expert(g->seed, expert, g->cfg.hidden, g->cfg.inter, g->cfg.scale_fmt == MM_SCALE_UE8M0, g->w1[i],
                        g->s1[i], g->w2[i], g->s2[i]);
    g->id[i] = expert;
    mm_expert_weights v = {g->w1[i], g->s1[i], g->w2[i], g->s2[i], g->c1[i], g->e1[i], g->c2[i], g->e2[i]};
    g->view[i] = v;
    return &g->view[i];
}

mm_expert_source generated_experts_source(mm_generated_experts *g)
{
    mm_expert_source s = {g, generated_get};
    return s;
}

/* ---- diff ---------------------------------------------------------------------------------- */

void diff_acc_add(mm_diff_acc *acc, double out, double ref)
{
    acc->count++;
    if (!isfinite(out)) {
        acc->nonfinite++;
        return;
    }
    acc->sum_ab += out * ref;
    acc->sum_aa_bb += out * out + ref * ref;
    double d = fabs(out - ref);
    if (d > acc->max_abs) acc->max_abs = d;
    if (fabs(ref) > acc->ref_max_abs) acc->ref_max_abs = fabs(ref);
}

void diff_acc_merge(mm_diff_acc *into, const mm_diff_acc *from)
{
    into->sum_ab += from->sum_ab;
    into->sum_aa_bb += from->sum_aa_bb;
    into->max_abs = fmax(into->max_abs, from->max_abs);
    into->ref_max_abs = fmax(into->ref_max_abs, from->ref_max_abs);
    into->nonfinite += from->nonfinite;
    into->count += from->count;
}

double diff_acc_calc(const mm_diff_acc *acc)
{
    if (acc->sum_aa_bb == 0.0) return 0.0;
    return 1.0 - 2.0 * acc->sum_ab / acc->sum_aa_bb;
}

int diff_acc_passes(const mm_diff_acc *acc, double tol)
{
    double c = diff_acc_calc(acc);
    return acc->nonfinite == 0 && c <= tol && c > -1e-12;
}
