/* The host reference on cases worked out by hand: one token, one expert, H = I = 128, every
 * weight code 0x38 (1.0) with chosen block scales, x = 1.0 everywhere.
 *   x: amax 1 -> scale 1/448 -> every code 448.
 *   gate[n] = (1/448 * s_gate) * 128 * 448 = 128 * s_gate; up[n] = 128 * s_up.
 *   h = silu(min(gate, L)) * clamp(up) * w; its block quantizes to 448 * (h/448) = h.
 *   y[n] = (h/448 * s_down) * 128 * 448 = 128 * s_down * h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/fp4.h"
#include "datagen_host.h"
#include "reference.h"
#include "test_util.h"

typedef struct {
    uint8_t w1[256 * 128], w2[128 * 128];
    float s1[2], s2[1];
    mm_expert_weights view;
} one_expert;

static const mm_expert_weights *get_one(void *ctx, int e)
{
    one_expert *o = ctx;
    return e == 0 ? &o->view : NULL;
}

static void setup(one_expert *o, float s_gate, float s_up, float s_down)
{
    memset(o->w1, 0x38, sizeof o->w1);
    memset(o->w2, 0x38, sizeof o->w2);
    o->s1[0] = s_gate;
    o->s1[1] = s_up;
    o->s2[0] = s_down;
    mm_expert_weights v = {o->w1, o->s1, o->w2, o->s2, NULL, NULL, NULL, NULL};
    o->view = v;
}

static mm_config tiny_cfg(int has_limit, double limit)
{
    mm_config c;
    memset(&c, 0, sizeof c);
    c.hidden = 128;
    c.inter = 128;
    c.experts = 1;
    c.topk = 1;
    c.has_swiglu_limit = has_limit;
    c.swiglu_limit = limit;
    return c;
}

static void run_case(mm_config *c, one_expert *o, int32_t id, float w, double *y)
{
    uint16_t x[128];
    for (int i = 0; i < 128; i++) x[i] = 0x3f80; /* BF16 1.0 */
    mm_expert_source src = {o, get_one};
    assert_int_equal(ref_host_layer(c, &src, x, &id, &w, 1, y), MM_OK);
}

static void silu_no_limit(void **state)
{
    (void)state;
    static one_expert o;
    setup(&o, 1.0f / 64, 1.0f / 128, 1.0f / 128); /* gate 2, up 1, y = h */
    mm_config c = tiny_cfg(0, 0);
    double y[128];
    run_case(&c, &o, 0, 1.0f, y);
    double want = 2.0 / (1.0 + exp(-2.0)); /* 1.7615941559557649 */
    for (int i = 0; i < 128; i++) assert_true(fabs(y[i] - want) < 1e-6);
}

static void limit_and_weight(void **state)
{
    (void)state;
    static one_expert o;
    setup(&o, 1.0f / 8, 1.0f / 128, 1.0f / 64); /* gate 16 -> clamped to 10, up 1, y = 2h */
    mm_config c = tiny_cfg(1, 10.0);
    double y[128];
    run_case(&c, &o, 0, 0.5f, y);
    double want = 2.0 * (10.0 / (1.0 + exp(-10.0)) * 1.0 * 0.5); /* 9.99954600 */
    for (int i = 0; i < 128; i++) assert_true(fabs(y[i] - want) < 1e-5);
    /* up clamps too: s_up 1/4 -> up 32 -> 10 */
    setup(&o, 1.0f / 64, 1.0f / 4, 1.0f / 128);
    run_case(&c, &o, 0, 1.0f, y);
    want = 2.0 / (1.0 + exp(-2.0)) * 10.0;
    assert_true(fabs(y[0] - want) < 1e-5);
}

static void masked_slot_gives_zeros(void **state)
{
    (void)state;
    static one_expert o;
    setup(&o, 1.0f / 64, 1.0f / 128, 1.0f / 128);
    mm_config c = tiny_cfg(0, 0);
    double y[128];
    run_case(&c, &o, -1, 0.0f, y);
    for (int i = 0; i < 128; i++) assert_true(y[i] == 0.0);
}

/* A generated-experts source that counts its fetches. */
typedef struct {
    mm_expert_source inner;
    int fetches;
} counting_source;

static const mm_expert_weights *get_counted(void *ctx, int e)
{
    counting_source *c = ctx;
    c->fetches++;
    return c->inner.get(c->inner.ctx, e);
}

/* Balanced routing at EP4 (16 experts, top-2, 64 tokens: every 8 tokens cycle through all 16, twice
 * the source's cache): the layer fetches each expert once, and equals token-by-token calls bit for
 * bit (same rows, same k-order sums); masked slots add nothing. */
static void expert_major_pass(void **state)
{
    (void)state;
    enum { T = 64, K = 2, H = 256, I = 128, E = 16 };
    mm_config c;
    memset(&c, 0, sizeof c);
    c.hidden = H;
    c.inter = I;
    c.experts = E;
    c.topk = K;
    c.has_swiglu_limit = 1;
    c.swiglu_limit = 10.0;
    static uint16_t x[T * H];
    static int32_t ids[T * K];
    static float w[T * K];
    static double y_all[T * H], y_one[T * H];
    host_gen_x(x_params_default(7), 0, T, H, x);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            ids[t * K + k] = (t * K + k + 3) % E;
            w[t * K + k] = 0.25f + 0.5f * (float)k;
        }
    ids[5 * K + 1] = -1; /* a masked slot */
    mm_generated_experts *gen = generated_experts_new(&c, 7);
    assert_non_null(gen);
    counting_source cs = {generated_experts_source(gen), 0};
    mm_expert_source src = {&cs, get_counted};
    assert_int_equal(ref_host_layer(&c, &src, x, ids, w, T, y_all), MM_OK);
    assert_int_equal(cs.fetches, E);
    for (int t = 0; t < T; t++)
        assert_int_equal(ref_host_layer(&c, &src, x + (size_t)t * H, ids + t * K, w + t * K, 1,
                                        y_one + (size_t)t * H), MM_OK);
    assert_memory_equal(y_all, y_one, sizeof y_all);
    int nonzero = 0;
    for (int i = 0; i < T * H; i++) nonzero += y_all[i] != 0.0;
    assert_true(nonzero > T * H / 2); /* not a layer of zeros */
    ids[0] = E; /* an id beyond the experts is an error, not a read past the tables */
    assert_int_equal(ref_host_layer(&c, &src, x, ids, w, T, y_all), MM_RUNTIME);
    generated_experts_free(gen);
}

/* FP4 weights (docs/recipe.md): the host reference's GEMM rows against (a) the dot product with
 * the exactly dequantized weights, e2m1 * 2^(s - 127), and (b) kernels/fp4.h's expansion into e4m3
 * and the block's reference scale, the definition the GPU paths share; then groups past the
 * limit. Row n of a block whose rows' exponents start at `exps` (K / 32 a row). */
static double fp4_expanded_row(const uint8_t *qa, const float *sa, const uint8_t *codes, const uint8_t *exps, int n, int k)
{
    double acc = 0.0;
    for (int kb = 0; kb < k / 128; kb++) {
        uint8_t w8[128];
        const int ref = mm_fp4_block_ref(exps, k / 32, kb);
        mm_fp4_expand_row(codes + (size_t)n * (k / 2) + kb * 64, exps + (size_t)n * (k / 32) + kb * 4, ref, w8);
        double block = 0.0;
        for (int c = 0; c < 128; c++) block += (double)mm_fp8_decode(qa[kb * 128 + c]) * (double)mm_fp8_decode(w8[c]);
        acc += (double)sa[kb] * (double)mm_fp4_ref_scale(ref) * block;
    }
    return acc;
}

/* Byte i of one matrix as the GPU generator writes it (fp4.h mm_gen_fp4_word: little-endian
 * words), with fp4_gpu_pieces' seed and experts. */
static uint8_t gen_byte(int pattern, int matrix, int rows, int cols, uint64_t i)
{
    return (uint8_t)(mm_gen_fp4_word(11, pattern, matrix, 3, 2, rows, cols, i / 4) >> (8 * (i % 4)));
}

/* The GPU's FP4 pieces, checked here through the functions its kernels call: the generator's byte
 * layout (gen_fp4_kernel) against the host's experts, and the reference's lane split of a block
 * (ref_gemm_fp4_kernel) against the host reference rows, past-limit groups included. */
static void fp4_gpu_pieces(void **state)
{
    (void)state;
    enum { H = 256, I = 128, FIRST = 3, COUNT = 2 };
    static uint8_t c1[2 * I * H / 2], e1[2 * I * H / 32], c2[H * I / 2], e2[H * I / 32];
    for (int pattern = 0; pattern < MM_FP4_PATTERNS; pattern++) {
        const uint64_t codes1 = (uint64_t)COUNT * 2 * I * (H / 2), codes2 = (uint64_t)COUNT * H * (I / 2);
        for (int e = 0; e < COUNT; e++) {
            host_gen_fp4_expert(11, pattern, FIRST + e, H, I, c1, e1, c2, e2);
            for (size_t i = 0; i < sizeof c1; i++)
                assert_int_equal(gen_byte(pattern, 0, 2 * I, H, e * sizeof c1 + i), c1[i]);
            for (size_t i = 0; i < sizeof e1; i++)
                assert_int_equal(gen_byte(pattern, 0, 2 * I, H, codes1 + e * sizeof e1 + i), e1[i]);
            for (size_t i = 0; i < sizeof c2; i++) assert_int_equal(gen_byte(pattern, 1, H, I, e * sizeof c2 + i), c2[i]);
            for (size_t i = 0; i < sizeof e2; i++)
                assert_int_equal(gen_byte(pattern, 1, H, I, codes2 + e * sizeof e2 + i), e2[i]);
        }
    }
    enum { K = 512, N = 128 };
    static uint8_t qa[K], codes[N * K / 2], exps[N * K / 32];
    static double host[N];
    float sa[K / 128];
    double fp8[256];
    for (int v = 0; v < 256; v++) fp8[v] = (double)mm_fp8_decode((uint8_t)v);
    for (int c = 0; c < K; c++) qa[c] = (uint8_t)((c * 37 + 11) % 0x7e) | (c % 5 == 0 ? 0x80 : 0);
    for (int b = 0; b < K / 128; b++) sa[b] = (float)(0.02 * (b + 1));
    for (int pattern = 0; pattern < MM_FP4_PATTERNS; pattern++) {
        for (uint64_t row = 0; row < N; row++) {
            for (int c = 0; c < K; c++) mm_fp4_set_code(codes + row * K / 2, c, mm_gen_fp4_code(5, pattern, 1, 4, row, (uint64_t)c));
            for (int g = 0; g < K / 32; g++) exps[row * K / 32 + g] = mm_gen_fp4_scale(5, pattern, 1, 4, row, (uint64_t)g);
        }
        int refs[K / 128];
        ref_fp4_block_refs(exps, N, K, refs);
        for (int kb = 0; kb < K / 128; kb++) assert_int_equal(refs[kb], mm_fp4_block_ref(exps, K / 32, kb));
        const long long past = ref_gemm_row_fp4(qa, sa, codes, exps, refs, N, K, host);
        assert_int_equal(past, pattern == MM_FP4_SPREAD_PAST ? N * (K / 128) : 0);
        for (int n = 0; n < N; n++) {
            double gpu = 0.0;
            for (int kb = 0; kb < K / 128; kb++) {
                const int ref = mm_fp4_block_ref(exps, K / 32, kb);
                double part = 0.0;
                for (int lane = 0; lane < 32; lane++)
                    part += mm_fp4_ref_lane_part(fp8, qa, codes + n * K / 2, exps + n * K / 32, kb, ref, lane);
                gpu += (double)sa[kb] * ldexp(1.0, ref - 127) * part;
            }
            assert_true(fabs(gpu - host[n]) <= 1e-12 * fabs(host[n]) + 1e-300);
        }
    }
}

static void fp4_gemm_row(void **state)
{
    (void)state;
    enum { K = 512, N = 128 };
    static uint8_t qa[K], codes[N * K / 2], exps[N * K / 32];
    static double got[N];
    float sa[K / 128];
    for (int c = 0; c < K; c++) qa[c] = (uint8_t)((c * 73 + 5) % 0x7e) | (c % 3 == 0 ? 0x80 : 0); /* no NaN */
    for (int b = 0; b < K / 128; b++) sa[b] = (float)(0.01 * (b + 1));
    for (int n = 0; n < N; n++) { /* the generator's rows: every code, exponents drifting, outliers */
        for (int c = 0; c < K; c++) mm_fp4_set_code(codes + n * K / 2, c, mm_gen_fp4_code(7, MM_FP4_REAL, 0, 2, (uint64_t)n, (uint64_t)c));
        for (int g = 0; g < K / 32; g++) exps[n * K / 32 + g] = mm_gen_fp4_scale(7, MM_FP4_REAL, 0, 2, (uint64_t)n, (uint64_t)g);
    }
    int refs[K / 128];
    ref_fp4_block_refs(exps, N, K, refs);
    assert_true(ref_gemm_row_fp4(qa, sa, codes, exps, refs, N, K, got) == 0); /* generated blocks are inside the range */
    for (int n = 0; n < N; n++) {
        double exact = 0.0;
        for (int c = 0; c < K; c++) {
            const double w = (double)mm_e2m1_decode(mm_fp4_code(codes + n * K / 2, c)) * ldexp(1.0, exps[n * K / 32 + c / 32] - 127);
            exact += (double)sa[c / 128] * (double)mm_fp8_decode(qa[c]) * w;
        }
        assert_true(fabs(got[n] - exact) <= 1e-12 * fabs(exact) + 1e-300);
        assert_true(got[n] == fp4_expanded_row(qa, sa, codes, exps, n, K));
    }
    /* row 5, block 1, groups 2 and 3 sixteen steps below their block's largest: rounded, and
     * counted; the block's other rows keep their reference and stay exact */
    const int top = mm_fp4_block_ref(exps, K / 32, 1) + MM_FP4_D_MAX;
    exps[5 * K / 32 + 1 * 4 + 2] = exps[5 * K / 32 + 1 * 4 + 3] = (uint8_t)(top - 16);
    ref_fp4_block_refs(exps, N, K, refs);
    assert_true(ref_gemm_row_fp4(qa, sa, codes, exps, refs, N, K, got) == 2);
    for (int n = 0; n < N; n++) assert_true(got[n] == fp4_expanded_row(qa, sa, codes, exps, n, K));
}

/* An FP4 layer is the FP8 recipe with each 128 x 128 block expanded to e4m3 relative to its
 * reference exponent R and block scale 2^(R - 127): the host reference gives the same bits both
 * ways (the generator's exponents: rows differ, groups drift, outliers). */
static void fp4_layer_equals_fp8(void **state)
{
    (void)state;
    static one_expert o;
    static uint8_t c1[256 * 64], e1[256 * 4], c2[128 * 64], e2[128 * 4];
    for (size_t i = 0; i < sizeof c1; i++) c1[i] = (uint8_t)(i * 29 + 3);
    for (size_t i = 0; i < sizeof c2; i++) c2[i] = (uint8_t)(i * 53 + 1);
    for (int r = 0; r < 256; r++)
        for (int g = 0; g < 4; g++) e1[r * 4 + g] = mm_gen_fp4_scale(3, MM_FP4_REAL, 0, 1, (uint64_t)r, (uint64_t)g);
    for (int r = 0; r < 128; r++)
        for (int g = 0; g < 4; g++) e2[r * 4 + g] = mm_gen_fp4_scale(3, MM_FP4_REAL, 1, 1, (uint64_t)r, (uint64_t)g);
    int refs1[2], ref2 = mm_fp4_block_ref(e2, 4, 0);
    for (int b = 0; b < 2; b++) {
        refs1[b] = mm_fp4_block_ref(e1 + b * 128 * 4, 4, 0);
        o.s1[b] = mm_fp4_ref_scale(refs1[b]);
    }
    o.s2[0] = mm_fp4_ref_scale(ref2);
    assert_true(refs1[0] != refs1[1] || refs1[0] != ref2); /* the blocks' references are their own */
    for (int r = 0; r < 256; r++) assert_int_equal(mm_fp4_expand_row(c1 + r * 64, e1 + r * 4, refs1[r / 128], o.w1 + r * 128), 0);
    for (int r = 0; r < 128; r++) assert_int_equal(mm_fp4_expand_row(c2 + r * 64, e2 + r * 4, ref2, o.w2 + r * 128), 0);
    mm_expert_weights v = {o.w1, o.s1, o.w2, o.s2, c1, e1, c2, e2};
    o.view = v;
    mm_config c = tiny_cfg(1, 10.0);
    double y8[128], y4[128];
    run_case(&c, &o, 0, 0.75f, y8);
    c.weights = MM_WEIGHTS_FP4;
    run_case(&c, &o, 0, 0.75f, y4);
    int nonzero = 0;
    for (int i = 0; i < 128; i++) {
        assert_true(y4[i] == y8[i]);
        nonzero += y8[i] != 0.0;
    }
    assert_true(nonzero > 64);
}

static void calc_diff_edges(void **state)
{
    (void)state;
    mm_diff_acc a = {0};
    assert_true(diff_acc_calc(&a) == 0.0); /* both empty / zero: identical */
    diff_acc_add(&a, 1.0, 1.0);
    diff_acc_add(&a, -2.0, -2.0);
    assert_true(diff_acc_calc(&a) == 0.0);
    mm_diff_acc b = {0};
    diff_acc_add(&b, 1.0, 0.0);
    diff_acc_add(&b, 0.0, 1.0);
    assert_true(diff_acc_calc(&b) == 1.0); /* orthogonal */
    mm_diff_acc c = {0};
    diff_acc_add(&c, 2.0, 1.0); /* 1 - 2*2/(4+1) */
    assert_true(fabs(diff_acc_calc(&c) - 0.2) < 1e-15);
    assert_true(c.max_abs == 1.0 && c.ref_max_abs == 1.0);
    mm_diff_acc d = {0};
    diff_acc_add(&d, NAN, 1.0);
    diff_acc_add(&d, INFINITY, 1.0);
    assert_int_equal(d.nonfinite, 2);
    diff_acc_merge(&c, &d);
    assert_int_equal(c.nonfinite, 2);
    assert_int_equal(c.count, 3);
    /* the pass rule */
    assert_true(diff_acc_passes(&a, 1e-4));
    assert_false(diff_acc_passes(&c, 1e-4)); /* non-finite outputs */
    mm_diff_acc e = {0};
    diff_acc_add(&e, 1.0 + 1e-3, 1.0); /* calc_diff ~ 2.5e-7 */
    assert_true(diff_acc_passes(&e, 1e-4));
    assert_false(diff_acc_passes(&e, 1e-8));
    mm_diff_acc torn = {.sum_ab = 3.0, .sum_aa_bb = 4.0}; /* 1 - 6/4 < 0: sums read half-made */
    assert_false(diff_acc_passes(&torn, 1e-4));
}

int run_reference_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(silu_no_limit),
        cmocka_unit_test(fp4_gemm_row),
        cmocka_unit_test(fp4_gpu_pieces),
        cmocka_unit_test(fp4_layer_equals_fp8),
        cmocka_unit_test(limit_and_weight),
        cmocka_unit_test(masked_slot_gives_zeros),
        cmocka_unit_test(expert_major_pass),
        cmocka_unit_test(calc_diff_edges),
    };
    return cmocka_run_group_tests_name("reference", tests, NULL, NULL);
}
