#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datagen_host.h"
#include "test_util.h"

static mm_config shape(int experts, int topk)
{
    mm_config c;
    memset(&c, 0, sizeof c);
    c.hidden = 256;
    c.inter = 128;
    c.experts = experts;
    c.topk = topk;
    c.routed_scaling_factor = 2.5;
    return c;
}

typedef struct {
    int32_t ids[4096 * 8];
    float w[4096 * 8];
} routing_buf;

static void generate(const char *spec, const mm_config *c, int ranks, uint64_t first, int tokens,
                     routing_buf *out)
{
    mm_routing r;
    char err[256];
    assert_int_equal(parse_routing(spec, &r, err, sizeof err), MM_OK);
    mm_route_tables t;
    assert_int_equal(route_tables_make(&r, c->experts, 11, &t), MM_OK);
    mm_route_params p = route_params(&r, c, ranks, 11, t.zipf_cdf, t.zipf_mult, t.softplus);
    host_gen_routing(&p, first, tokens, out->ids, out->w);
    route_tables_free(&t);
}

static void distinct_and_weighted(void **state)
{
    (void)state;
    const char *specs[] = {"uniform", "balanced", "zipf:1.2", "zipf:3", "hot", "rank-skew:0.9",
                           "masked:0.3", "deepseek"};
    static routing_buf b;
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        for (int shape_i = 0; shape_i < 2; shape_i++) {
            mm_config c = shape_i ? shape(8, 8) : shape(256, 6); /* top-k = experts is legal */
            generate(specs[s], &c, 2, 0, 1000, &b);
            for (int t = 0; t < 1000; t++) {
                double sum = 0;
                for (int k = 0; k < c.topk; k++) {
                    int e = b.ids[t * c.topk + k];
                    float w = b.w[t * c.topk + k];
                    if (e < 0) {
                        assert_true(w == 0.0f);
                        continue;
                    }
                    assert_true(e < c.experts);
                    assert_true(w > 0.0f);
                    sum += w;
                    for (int j = 0; j < k; j++)
                        if (b.ids[t * c.topk + j] == e) fail_msg("%s: token %d repeats %d", specs[s], t, e);
                }
                if (strncmp(specs[s], "masked", 6) != 0 && fabs(sum - 2.5) > 1e-5)
                    fail_msg("%s: weights of token %d sum to %g", specs[s], t, sum);
            }
        }
    }
}

/* One expert, top-1: every generator must still terminate (zipf's table once looped forever). */
static void single_expert(void **state)
{
    (void)state;
    const char *specs[] = {"uniform", "balanced", "zipf:1.2", "hot", "rank-skew:0.9", "masked:0.3",
                           "deepseek"};
    static routing_buf b;
    mm_config c = shape(1, 1);
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        generate(specs[s], &c, 1, 0, 50, &b);
        for (int t = 0; t < 50; t++) assert_true(b.ids[t] == 0 || b.ids[t] == -1);
    }
}

static void distributions(void **state)
{
    (void)state;
    static routing_buf b;
    mm_config c = shape(256, 6);
    int counts[256];
    /* balanced: 4096 tokens * 6 / 256 = 96 per expert exactly */
    generate("balanced", &c, 2, 0, 4096, &b);
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < 4096 * 6; i++) counts[b.ids[i]]++;
    for (int e = 0; e < 256; e++) assert_int_equal(counts[e], 96);
    /* masked:0.3 leaves 30% +- 1.5% of slots empty; masked:1 all of them */
    generate("masked:0.3", &c, 2, 0, 4096, &b);
    int empty = 0;
    for (int i = 0; i < 4096 * 6; i++) empty += b.ids[i] < 0;
    assert_true(fabs(empty / (4096.0 * 6) - 0.3) < 0.015);
    generate("masked:1", &c, 2, 0, 100, &b);
    for (int i = 0; i < 600; i++) assert_int_equal(b.ids[i], -1);
    /* hot: every token picks the same experts */
    generate("hot", &c, 2, 0, 100, &b);
    for (int t = 1; t < 100; t++) assert_memory_equal(b.ids, b.ids + t * 6, 6 * sizeof(int32_t));
    /* rank-skew:0.9 at EP8: rank 0 owns 32 experts and gets >= 85% of the choices */
    generate("rank-skew:0.9", &c, 8, 0, 2000, &b);
    int rank0 = 0;
    for (int i = 0; i < 2000 * 6; i++) rank0 += b.ids[i] < 32;
    assert_true(rank0 > 0.85 * 2000 * 6);
    /* zipf:1.2: the hottest expert gets far more than a uniform share (6/256 of tokens) */
    generate("zipf:1.2", &c, 2, 0, 4096, &b);
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < 4096 * 6; i++) counts[b.ids[i]]++;
    int top = 0;
    for (int e = 0; e < 256; e++) top = counts[e] > top ? counts[e] : top;
    assert_true(top > 10 * 96);
}

/* The same global tokens come out at any EP size: EP1's 256 tokens are EP2's two slices of 128
 * and EP4/EP8's slices too; x likewise. */
static void ep_invariance(void **state)
{
    (void)state;
    mm_config c = shape(64, 6);
    const char *specs[] = {"uniform", "zipf:1.1", "deepseek", "masked:0.5", "balanced"};
    static routing_buf whole, part;
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        generate(specs[s], &c, 1, 0, 256, &whole);
        for (int ranks = 2; ranks <= 8; ranks *= 2) {
            int per = 256 / ranks;
            for (int r = 0; r < ranks; r++) {
                generate(specs[s], &c, ranks, (uint64_t)r * per, per, &part);
                assert_memory_equal(part.ids, whole.ids + r * per * 6, (size_t)per * 6 * 4);
                assert_memory_equal(part.w, whole.w + r * per * 6, (size_t)per * 6 * 4);
            }
        }
    }
    uint16_t a[4 * 256], b[2 * 256];
    host_gen_x(x_params_default(5), 0, 4, 256, a);
    host_gen_x(x_params_default(5), 2, 2, 256, b);
    assert_memory_equal(a + 2 * 256, b, sizeof b);
}

static void realistic_data(void **state)
{
    (void)state;
    enum { T = 64, H = 512 };
    static uint16_t x[T * H];
    host_gen_x(x_params_default(1), 0, T, H, x);
    double row_rms[T];
    for (int t = 0; t < T; t++) {
        double ss = 0;
        int distinct = 0;
        for (int c = 0; c < H; c++) {
            double v = mm_bf16_decode(x[t * H + c]);
            assert_true(isfinite(v));
            ss += v * v;
            distinct += c > 0 && x[t * H + c] != x[t * H + c - 1];
        }
        row_rms[t] = sqrt(ss / H);
        assert_true(row_rms[t] > 0.01);
        assert_true(distinct > H / 2); /* not a constant row */
    }
    double lo = row_rms[0], hi = row_rms[0];
    for (int t = 1; t < T; t++) { lo = fmin(lo, row_rms[t]); hi = fmax(hi, row_rms[t]); }
    assert_true(hi / lo > 8); /* rows differ in magnitude */
    /* same seed -> same bits; another seed -> other bits */
    static uint16_t y[T * H];
    host_gen_x(x_params_default(1), 0, T, H, y);
    assert_memory_equal(x, y, sizeof x);
    host_gen_x(x_params_default(2), 0, T, H, y);
    assert_memory_not_equal(x, y, sizeof x);
}

static void weights(void **state)
{
    (void)state;
    enum { H = 256, I = 128 };
    static uint8_t w1[2 * I * H], w2[H * I];
    float s1[(2 * I / 128) * (H / 128)], s2[(H / 128) * (I / 128)];
    host_gen_expert(3, 5, H, I, 0, w1, s1, w2, s2);
    /* each block's largest magnitude quantizes to 448 exactly (FP32 scale = amax / 448) */
    for (int br = 0; br < 2 * I / 128; br++)
        for (int bc = 0; bc < H / 128; bc++) {
            int has_max = 0;
            for (int r = 0; r < 128; r++)
                for (int c = 0; c < 128; c++)
                    has_max |= (w1[(br * 128 + r) * H + bc * 128 + c] & 0x7f) == 0x7e;
            assert_true(has_max);
            assert_true(s1[br * (H / 128) + bc] > 0.0f);
        }
    /* block scales differ (blocks have their own magnitude) */
    int differ = 0;
    for (int i = 1; i < 4; i++) differ |= s1[i] != s1[0];
    assert_true(differ);
    /* ue8m0 scales are powers of two */
    host_gen_expert(3, 5, H, I, 1, w1, s1, w2, s2);
    for (int i = 0; i < 4; i++) {
        int e;
        assert_true(frexpf(s1[i], &e) == 0.5f);
    }
}

/* --ep-slice: rank 0's share of EP N. A hand-made case, then the generator's: every kept token
 * has a local pick, its local picks keep id and weight, the others are masked, no token that
 * picks a local expert is dropped, and the kept rows equal rank 0's rows of a real EP N. */
static void ep_slice(void **state)
{
    (void)state;
    int32_t ids[4 * 2] = {5, 1, 7, 6, 0, 2, 3, 4};
    float w[4 * 2] = {0.5f, 0.25f, 1, 2, 3, 4, 5, 6};
    assert_int_equal(ep_slice_select(ids, w, 4, 2, 4), 3); /* token 1 picks 7 and 6: not rank 0's */
    const int32_t want_ids[] = {-1, 1, 0, 2, 3, -1};
    const float want_w[] = {0, 0.25f, 3, 4, 5, 0};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(ids[i], want_ids[i]);
        assert_true(w[i] == want_w[i]);
    }
    static routing_buf all, kept;
    mm_config c = shape(256, 6);
    const int ranks = 8, batch = 512, local = 256 / ranks, tokens = ranks * batch;
    generate("uniform", &c, ranks, 0, tokens, &all);
    memcpy(&kept, &all, sizeof all);
    const int n = ep_slice_select(kept.ids, kept.w, tokens, 6, local);
    long long rows = 0, real_rows = 0;
    int t = 0;
    for (int j = 0; j < n; j++, t++) {
        int local_picks;
        do { /* the next original token with a local pick */
            local_picks = 0;
            for (int k = 0; k < 6; k++) local_picks += all.ids[t * 6 + k] < local;
        } while (!local_picks && ++t < tokens);
        assert_true(t < tokens);
        int mine = 0;
        for (int k = 0; k < 6; k++) {
            const int32_t id = kept.ids[j * 6 + k];
            if (id >= 0) {
                assert_int_equal(id, all.ids[t * 6 + k]);
                assert_true(kept.w[j * 6 + k] == all.w[t * 6 + k]);
                mine++;
            } else {
                assert_true(all.ids[t * 6 + k] >= local && kept.w[j * 6 + k] == 0.0f);
            }
        }
        assert_int_equal(mine, local_picks);
        rows += mine;
    }
    for (int i = 0; i < tokens * 6; i++) real_rows += all.ids[i] < local; /* rank 0's rows at EP 8 */
    assert_true(rows == real_rows);
    /* about 1 - (7/8)^6 = 55% of the tokens touch rank 0, and rank 0 gets batch x topk rows */
    assert_true(n > tokens * 0.50 && n < tokens * 0.60);
    assert_true(rows > batch * 6 * 0.9 && rows < batch * 6 * 1.1);
}

int run_datagen_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(distinct_and_weighted),
        cmocka_unit_test(single_expert),
        cmocka_unit_test(distributions),
        cmocka_unit_test(ep_invariance),
        cmocka_unit_test(realistic_data),
        cmocka_unit_test(weights),
        cmocka_unit_test(ep_slice),
    };
    return cmocka_run_group_tests_name("datagen", tests, NULL, NULL);
}
