#include "datagen_host.h"

#include "../kernels/fp4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t gcd_u32(uint32_t a, uint32_t b)
{
    while (b) {
        uint32_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

mm_status route_tables_make(const mm_routing *r, int experts, uint64_t seed, mm_route_tables *t)
{
    memset(t, 0, sizeof *t);
    /* softplus((j - 512) / 128), computed in double and rounded once to float. */
    for (int j = 0; j < MM_SOFTPLUS_LEVELS; j++) {
        double x = (j - 512) / 128.0;
        t->softplus[j] = (float)log1p(exp(x));
    }
    t->zipf_cdf = calloc((size_t)experts, sizeof(uint32_t));
    if (!t->zipf_cdf) return MM_RUNTIME;
    double s = r->kind == ROUTE_ZIPF ? r->param : 1.0, total = 0.0, acc = 0.0;
    for (int i = 0; i < experts; i++) total += pow(i + 1.0, -s);
    for (int i = 0; i < experts; i++) {
        acc += pow(i + 1.0, -s);
        double c = acc / total * 4294967296.0;
        t->zipf_cdf[i] = c >= 4294967295.0 ? 0xffffffffu : (uint32_t)c;
    }
    t->zipf_cdf[experts - 1] = 0xffffffffu;
    /* Which expert is hottest depends on the seed: rank i -> (i * mult) mod E. */
    uint32_t m = 1;
    if (experts > 1) {
        m = (uint32_t)(mm_hash(seed, MM_STREAM_ROUTE, 0xfffffffeull, 0) % (uint64_t)experts);
        while (m == 0 || gcd_u32(m, (uint32_t)experts) != 1) m = (m + 1) % (uint32_t)experts;
    }
    t->zipf_mult = m;
    return MM_OK;
}

void route_tables_free(mm_route_tables *t)
{
    free(t->zipf_cdf);
    t->zipf_cdf = NULL;
}

mm_route_params route_params(const mm_routing *r, const mm_config *cfg, int ranks, uint64_t seed,
                             const uint32_t *zipf_cdf, uint32_t zipf_mult, const float *softplus)
{
    mm_route_params p;
    memset(&p, 0, sizeof p);
    p.kind = (int)r->kind;
    p.experts = cfg->experts;
    p.topk = cfg->topk;
    p.ranks = ranks;
    p.seed = seed;
    double th = (r->kind == ROUTE_RANK_SKEW || r->kind == ROUTE_MASKED) ? r->param : 0.0;
    p.threshold = (uint64_t)llround(th * 4294967296.0);
    p.scaling = (float)cfg->routed_scaling_factor;
    p.zipf_cdf = zipf_cdf;
    p.zipf_mult = zipf_mult;
    p.softplus = softplus;
    return p;
}

mm_x_params x_params_default(uint64_t seed)
{
    mm_x_params p = {seed, MM_X_DEFAULT_EXP_LO, MM_X_DEFAULT_EXP_COUNT};
    return p;
}

void host_gen_x(mm_x_params seed, uint64_t first_token, int tokens, int hidden, uint16_t *x)
{
    for (int t = 0; t < tokens; t++)
        for (int c = 0; c < hidden; c++)
            x[(size_t)t * hidden + c] = mm_gen_x(seed, first_token + t, (uint32_t)c);
}

void host_gen_routing(const mm_route_params *p, uint64_t first_token, int tokens, int32_t *ids,
                      float *w)
{
    for (int t = 0; t < tokens; t++) {
        int id[16];
        float wt[16];
        mm_route_token(p, first_token + (uint64_t)t, id, wt);
        for (int k = 0; k < p->topk; k++) {
            ids[(size_t)t * p->topk + k] = id[k];
            w[(size_t)t * p->topk + k] = wt[k];
        }
    }
}

/* One matrix [rows][cols] of one expert, quantized per 128x128 block like the GPU kernel. Blocks
 * are independent: they run in parallel where OpenMP is on. */
static void gen_matrix(uint64_t seed, int matrix, int expert, int rows, int cols, int ue8m0,
                       uint8_t *w, float *scale)
{
    int bcols = cols / 128, nblocks = (rows / 128) * bcols;
#pragma omp parallel for schedule(static) if (nblocks >= 16)
    for (int blk = 0; blk < nblocks; blk++) {
        int br = blk / bcols, bc = blk % bcols;
        float v[128 * 128];
        float amax = 0.0f;
        for (int r = 0; r < 128; r++)
            for (int c = 0; c < 128; c++) {
                float x = mm_gen_w(seed, matrix, (uint64_t)expert, (uint64_t)(br * 128 + r),
                                   (uint64_t)(bc * 128 + c));
                v[r * 128 + c] = x;
                amax = mm_fabs(x) > amax ? mm_fabs(x) : amax;
            }
        float s = mm_block_scale(amax, ue8m0);
        scale[br * bcols + bc] = s;
        for (int r = 0; r < 128; r++)
            for (int c = 0; c < 128; c++)
                w[(size_t)(br * 128 + r) * cols + bc * 128 + c] = mm_quantize(v[r * 128 + c], s);
    }
}

void host_gen_expert(uint64_t seed, int expert, int hidden, int inter, int ue8m0, uint8_t *w1,
                     float *w1_scale, uint8_t *w2, float *w2_scale)
{
    gen_matrix(seed, 0, expert, 2 * inter, hidden, ue8m0, w1, w1_scale);
    gen_matrix(seed, 1, expert, hidden, inter, ue8m0, w2, w2_scale);
}

/* Rows are independent: in parallel where OpenMP is on, as gen_matrix's blocks. */
static void gen_fp4_matrix(uint64_t seed, int pattern, int matrix, int expert, int rows, int cols, uint8_t *codes,
                           uint8_t *exps)
{
#pragma omp parallel for schedule(static) if (rows >= 128)
    for (int r = 0; r < rows; r++) {
        uint8_t *row = codes + (size_t)r * (cols / 2);
        for (int w = 0; w < cols / 8; w++) /* the words the GPU generator writes */
            mm_fp4_store_word(row + 4 * w, mm_gen_fp4_row_word(seed, pattern, matrix, (uint64_t)expert, (uint64_t)r,
                                                                (uint64_t)w));
        for (int g = 0; g < cols / MM_FP4_GROUP; g++)
            exps[(size_t)r * (cols / MM_FP4_GROUP) + g] =
                mm_gen_fp4_scale(seed, pattern, matrix, (uint64_t)expert, (uint64_t)r, (uint64_t)g);
    }
}

void host_gen_fp4_expert(uint64_t seed, int pattern, int expert, int hidden, int inter, uint8_t *c1, uint8_t *e1,
                         uint8_t *c2, uint8_t *e2)
{
    gen_fp4_matrix(seed, pattern, 0, expert, 2 * inter, hidden, c1, e1);
    gen_fp4_matrix(seed, pattern, 1, expert, hidden, inter, c2, e2);
}

int ep_slice_select(int32_t *ids, float *w, int tokens, int topk, int local)
{
    int kept = 0;
    for (int t = 0; t < tokens; t++) {
        int mine = 0;
        for (int k = 0; k < topk; k++) mine |= ids[(size_t)t * topk + k] >= 0 && ids[(size_t)t * topk + k] < local;
        if (!mine) continue;
        for (int k = 0; k < topk; k++) {
            const int32_t id = ids[(size_t)t * topk + k];
            const int in = id >= 0 && id < local;
            ids[(size_t)kept * topk + k] = in ? id : -1;
            w[(size_t)kept * topk + k] = in ? w[(size_t)t * topk + k] : 0.0f;
        }
        kept++;
    }
    return kept;
}
