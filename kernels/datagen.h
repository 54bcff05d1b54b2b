/* Deterministic test data, one definition for host C and CUDA, so the GPU generators and the host
 * reference produce the same bits.
 *
 * Everything is a pure function of (seed, global token index, global expert id, ...): the same
 * tokens, routing and experts come out at any EP size, because a rank only decides which global
 * indices it evaluates (token g = rank * tokens_per_rank + t; expert e = rank * El + local).
 * Randomness is a counter-based 64-bit hash; floats are built from integers with exact or
 * explicitly rounded operations (recipe.h), never with transcendental functions, whose last bit
 * differs between libm and the GPU. Where a generator needs a transcendental (zipf's CDF, the
 * softplus of deepseek scores) the host computes a small table once and both sides read it. */
#ifndef MEGAMOE_DATAGEN_H
#define MEGAMOE_DATAGEN_H

#include <stdint.h>

#include "recipe.h"

#ifndef __CUDACC__
#include <math.h> /* sqrtf */
#endif

/* Streams: the hash's first word keeps the data kinds independent. */
enum {
    MM_STREAM_X = 1,
    MM_STREAM_W1 = 2,
    MM_STREAM_W2 = 3,
    MM_STREAM_ROUTE = 4,
    MM_STREAM_WEIGHT = 5,
    MM_STREAM_MASK = 6,
    MM_STREAM_ROW = 7,
    MM_STREAM_BLOCK = 8,
    MM_STREAM_BIAS = 9,
};

#define MM_SOFTPLUS_LEVELS 1024 /* deepseek logits take 1024 levels in [-4, 4) */

MM_HD uint64_t mm_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

MM_HD uint64_t mm_hash(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b)
{
    uint64_t h = mm_mix64(seed * 0x9e3779b97f4a7c15ull + stream);
    h = mm_mix64(h ^ (a + 0x632be59bd9b4e019ull));
    return mm_mix64(h ^ (b * 0xd6e8feb86659fd93ull + 0x2545f4914f6cdd1dull));
}

/* Uniform in [0, 1) with 24 random bits: exact in float. */
MM_HD float mm_unit(uint64_t h)
{
    return (float)(uint32_t)(h >> 40) * (1.0f / 16777216.0f);
}

/* Roughly normal, mean 0, stdev ~1: centred sum of three uniforms scaled by 2. */
MM_HD float mm_bell(uint64_t h)
{
    float s = MM_ADD(MM_ADD(mm_unit(h), mm_unit(mm_mix64(h ^ 1u))), mm_unit(mm_mix64(h ^ 2u)));
    return MM_MUL(MM_ADD(s, -1.5f), 2.0f);
}

MM_HD float mm_pow2(int e)
{
    return mm_bits_f32((uint32_t)(e + 127) << 23);
}

/* Magnitudes of x: token g's rows are scaled by 2^(exp_lo + h(g) % exp_count). The default
 * (-3, 6) spans 2^-3 .. 2^2; check scenarios use tiny, huge and mixed ranges. */
typedef struct {
    uint64_t seed;
    int exp_lo, exp_count;
} mm_x_params;

#define MM_X_DEFAULT_EXP_LO (-3)
#define MM_X_DEFAULT_EXP_COUNT 6

/* x[g][c] as BF16 bits. Each token has its own magnitude so rows differ in scale, and one channel
 * in 128 is an outlier 16x larger, as real activations have. */
MM_HD uint16_t mm_gen_x(mm_x_params p, uint64_t token, uint32_t channel)
{
    uint64_t seed = p.seed;
    uint64_t row = mm_hash(seed, MM_STREAM_ROW, token, 0);
    float v = MM_MUL(mm_bell(mm_hash(seed, MM_STREAM_X, token, channel)),
                     mm_pow2((int)(row % (uint64_t)p.exp_count) + p.exp_lo));
    if ((mm_mix64(row ^ channel) & 127u) == 0u) v = MM_MUL(v, 16.0f);
    return mm_bf16_encode(v);
}

/* A weight before quantization (BF16-valued float): matrix 0 = W1 [2I][H], 1 = W2 [H][I].
 * Each 128x128 block has its own magnitude so block scales differ. */
MM_HD float mm_gen_w(uint64_t seed, int matrix, uint64_t expert, uint64_t row, uint64_t col)
{
    uint64_t stream = matrix == 0 ? MM_STREAM_W1 : MM_STREAM_W2;
    uint64_t block = (row / 128u) * 65536u + col / 128u;
    int mag = (int)(mm_hash(seed, MM_STREAM_BLOCK + 16u * stream, expert, block) % 4u);
    float v = MM_MUL(mm_bell(mm_hash(seed, stream, expert, row * 65536u + col)), mm_pow2(-5 - mag));
    return mm_bf16_decode(mm_bf16_encode(v));
}

/* ---- routing ---------------------------------------------------------------------------- */

enum {
    MM_ROUTE_UNIFORM = 0, MM_ROUTE_BALANCED, MM_ROUTE_ZIPF, MM_ROUTE_HOT, MM_ROUTE_RANK_SKEW,
    MM_ROUTE_MASKED, MM_ROUTE_DEEPSEEK
}; /* same order as mm_routing_kind in src/sweep.h */

typedef struct {
    int kind;
    int experts, topk, ranks;
    uint64_t seed;
    uint64_t threshold; /* rank-skew / masked: probability * 2^32 */
    float scaling;      /* routed_scaling_factor */
    const uint32_t *zipf_cdf;  /* [experts], zipf: cumulative probability * 2^32, rank order */
    uint32_t zipf_mult;        /* zipf: rank i -> expert (i * mult) mod E, mult coprime to E */
    const float *softplus;     /* [MM_SOFTPLUS_LEVELS], deepseek: softplus((j - 512) / 128) */
} mm_route_params;

MM_HD int mm_route_taken(const int *ids, int n, int e)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == e) return 1;
    return 0;
}

/* Draws one expert for slot k, distinct from ids[0..k). Rejection with a bounded number of tries,
 * then the first free expert after the last draw: always terminates, always distinct. */
MM_HD int mm_route_draw(const mm_route_params *p, uint64_t token, int k, const int *ids)
{
    int e = 0;
    for (int attempt = 0; attempt < 64; attempt++) {
        uint64_t h = mm_hash(p->seed, MM_STREAM_ROUTE, token, (uint64_t)k * 64u + attempt);
        uint32_t u = (uint32_t)(h >> 32);
        if (p->kind == MM_ROUTE_ZIPF) {
            int lo = 0, hi = p->experts - 1; /* first rank whose cdf exceeds u */
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (p->zipf_cdf[mid] > u) hi = mid;
                else lo = mid + 1;
            }
            e = (int)(((uint64_t)lo * p->zipf_mult) % (uint64_t)p->experts);
        } else if (p->kind == MM_ROUTE_RANK_SKEW && (uint64_t)(uint32_t)h < p->threshold) {
            e = (int)(u % (uint32_t)(p->experts / p->ranks)); /* rank 0 owns [0, E/R) */
        } else {
            e = (int)(u % (uint32_t)p->experts);
        }
        if (!mm_route_taken(ids, k, e)) return e;
    }
    while (mm_route_taken(ids, k, e)) e = (e + 1) % p->experts;
    return e;
}

/* Weights for non-deepseek generators: positive raw values normalized to sum 1, times the routed
 * scaling factor; masked slots (-1) get 0 after normalization. */
MM_HD void mm_route_weights(const mm_route_params *p, uint64_t token, int *ids, float *w)
{
    float raw[16], sum = 0.0f;
    for (int k = 0; k < p->topk; k++) {
        uint64_t h = mm_hash(p->seed, MM_STREAM_WEIGHT, token, (uint64_t)k);
        raw[k] = MM_ADD(1.0f, (float)(h % 1024u) * (1.0f / 1024.0f));
        sum = MM_ADD(sum, raw[k]);
    }
    for (int k = 0; k < p->topk; k++)
        w[k] = ids[k] < 0 ? 0.0f : MM_MUL(MM_DIV(raw[k], sum), p->scaling);
}

/* DeepSeek V4 style: score = sqrt(softplus(logit)), top-k on score + bias (ties to the lower
 * expert id), weights = chosen scores renormalized, times the routed scaling factor. */
MM_HD void mm_route_deepseek(const mm_route_params *p, uint64_t token, int *ids, float *w)
{
    float best[16];
    for (int k = 0; k < p->topk; k++) { ids[k] = -1; best[k] = -1e30f; }
    for (int e = 0; e < p->experts; e++) {
        uint32_t j = (uint32_t)(mm_hash(p->seed, MM_STREAM_ROUTE, token, (uint64_t)e) >> 54);
        float bias = (float)((int)(mm_hash(p->seed, MM_STREAM_BIAS, (uint64_t)e, 0) % 1024u) - 512) *
                     (1.0f / 4096.0f);
        float score = sqrtf(p->softplus[j]); /* IEEE sqrt: identical on host and GPU */
        float key = MM_ADD(score, bias);
        if (key <= best[p->topk - 1]) continue;
        int pos = p->topk - 1; /* insertion keeps best[] descending; equal keys keep lower ids */
        while (pos > 0 && key > best[pos - 1]) {
            best[pos] = best[pos - 1];
            ids[pos] = ids[pos - 1];
            pos--;
        }
        best[pos] = key;
        ids[pos] = e;
    }
    float sum = 0.0f, score[16];
    for (int k = 0; k < p->topk; k++) {
        uint32_t j = (uint32_t)(mm_hash(p->seed, MM_STREAM_ROUTE, token, (uint64_t)ids[k]) >> 54);
        score[k] = sqrtf(p->softplus[j]);
        sum = MM_ADD(sum, score[k]);
    }
    for (int k = 0; k < p->topk; k++) w[k] = MM_MUL(MM_DIV(score[k], sum), p->scaling);
}

/* The top-k experts and weights of global token `token` (ids[topk], w[topk]). */
MM_HD void mm_route_token(const mm_route_params *p, uint64_t token, int *ids, float *w)
{
    if (p->kind == MM_ROUTE_DEEPSEEK) {
        mm_route_deepseek(p, token, ids, w);
        return;
    }
    uint32_t base = (uint32_t)(mm_hash(p->seed, MM_STREAM_ROUTE, 0xffffffffull, 0) % (uint32_t)p->experts);
    for (int k = 0; k < p->topk; k++) {
        if (p->kind == MM_ROUTE_HOT)
            ids[k] = (int)((base + (uint32_t)k) % (uint32_t)p->experts);
        else if (p->kind == MM_ROUTE_BALANCED)
            ids[k] = (int)((token * (uint64_t)p->topk + (uint64_t)k + base) % (uint64_t)p->experts);
        else
            ids[k] = mm_route_draw(p, token, k, ids);
    }
    if (p->kind == MM_ROUTE_MASKED) {
        for (int k = 0; k < p->topk; k++) {
            uint64_t h = mm_hash(p->seed, MM_STREAM_MASK, token, (uint64_t)k);
            if ((h >> 32) < p->threshold) ids[k] = -1;
        }
    }
    mm_route_weights(p, token, ids, w);
}

#endif
