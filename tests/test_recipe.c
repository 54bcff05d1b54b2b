/* The recipe's encoders, checked against an independent brute-force definition: the nearest of
 * all 254 finite e4m3 values, ties to the even code, computed in double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/recipe.h"
#include "reference.h"
#include "test_util.h"

static double code_value(int code)
{
    int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
    double v = e == 0 ? m / 512.0 : (1.0 + m / 8.0) * ldexp(1.0, e - 7);
    return s ? -v : v;
}

/* Brute force: nearest finite code (0x7F excluded), ties to even mantissa; beyond 448 saturate. */
static uint8_t reference_encode(float x)
{
    if (isnan(x)) return signbit(x) ? 0xff : 0x7f;
    double ax = fabs((double)x);
    int best = 0;
    double best_d = INFINITY;
    for (int c = 0; c < 0x7f; c++) {
        double d = fabs(code_value(c) - ax);
        if (d < best_d || (d == best_d && (c & 1) == 0)) {
            best = c;
            best_d = d;
        }
    }
    if (ax >= 448.0) best = 0x7e;
    return (uint8_t)(best | (signbit(x) ? 0x80 : 0));
}

static void all_codes_round_trip(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        float v = mm_fp8_decode((uint8_t)c);
        if ((c & 0x7f) == 0x7f) {
            assert_true(isnan(v));
            assert_int_equal(mm_fp8_encode(v) & 0x7f, 0x7f);
            continue;
        }
        assert_true((double)v == code_value(c));
        assert_int_equal(mm_fp8_encode(v), c);
    }
}

static void midpoints_and_random_values(void **state)
{
    (void)state;
    /* every midpoint between neighbours, and points just either side of it */
    for (int c = 0; c < 0x7e; c++) {
        double mid = (code_value(c) + code_value(c + 1)) / 2;
        float xs[3] = {(float)mid, nextafterf((float)mid, 0.0f), nextafterf((float)mid, 1000.0f)};
        for (int i = 0; i < 3; i++) {
            assert_int_equal(mm_fp8_encode(xs[i]), reference_encode(xs[i]));
            assert_int_equal(mm_fp8_encode(-xs[i]), reference_encode(-xs[i]));
        }
    }
    srand(7);
    for (int i = 0; i < 200000; i++) {
        float x = (float)((rand() / (double)RAND_MAX - 0.5) * ldexp(1.0, rand() % 30 - 16));
        if (mm_fp8_encode(x) != reference_encode(x)) fail_msg("x = %a", (double)x);
    }
    assert_int_equal(mm_fp8_encode(1e9f), 0x7e);
    assert_int_equal(mm_fp8_encode(-INFINITY), 0xfe);
    assert_int_equal(mm_fp8_encode(1e-30f), 0x00);
    assert_int_equal(mm_fp8_encode(-0.0f), 0x80);
}

static void bf16_and_scales(void **state)
{
    (void)state;
    assert_int_equal(mm_bf16_encode(1.0f), 0x3f80);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 1.0 */
    assert_int_equal(mm_bf16_encode(1.00390625f), 0x3f80);
    assert_int_equal(mm_bf16_encode(1.01171875f), 0x3f82); /* 1 + 3 * 2^-8 -> up to even */
    assert_true(isnan(mm_bf16_decode(mm_bf16_encode(NAN))));
    assert_true(mm_ue8m0_round_up(0.3f) == 0.5f);
    assert_true(mm_ue8m0_round_up(0.25f) == 0.25f);
    assert_true(mm_block_scale(0.0f, 0) == 1e-4f / 448.0f);
    assert_true(mm_block_scale(448.0f, 0) == 1.0f);
    assert_true(mm_block_scale(300.0f, 1) == 1.0f);
    /* the block's amax always lands on +-448 with an FP32 scale */
    assert_int_equal(mm_quantize(3.5f, mm_block_scale(3.5f, 0)), 0x7e);
}

/* mm_div_fp8_max is x / 448 for every x from the scale floor up: every 61st float of that range
 * (~19 million; the whole range, 1,185,827,049 floats, was compared once on the host), the
 * range's ends, the float before each power of two and infinity. */
static void div_fp8_max_is_division(void **state)
{
    (void)state;
    uint32_t lo, hi = 0x7f7fffffu;
    const float floor_ = MM_SCALE_FLOOR;
    memcpy(&lo, &floor_, 4);
    long long bad = 0;
    for (uint32_t b = lo; b <= hi; b += 61) {
        float x;
        memcpy(&x, &b, 4);
        if (mm_f32_bits(mm_div_fp8_max(x)) != mm_f32_bits(x / 448.0f)) bad++;
        if (hi - b < 61) break;
    }
    for (uint32_t e = lo >> 23; e <= 254u; e++)
        for (uint32_t m = 0; m < 3; m++) {
            const uint32_t b = (e << 23) - m + (e == 254u ? 0x7fffffu : 0u);
            float x;
            memcpy(&x, &b, 4);
            if (x >= MM_SCALE_FLOOR && mm_f32_bits(mm_div_fp8_max(x)) != mm_f32_bits(x / 448.0f)) bad++;
        }
    assert_int_equal(bad, 0);
    assert_true(mm_div_fp8_max(MM_SCALE_FLOOR) == MM_SCALE_FLOOR / 448.0f);
    assert_true(isinf(mm_div_fp8_max(INFINITY)));
}

/* The table the H200 produced with __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)
 * (selftest, MEGAMOE_FP8_TABLE): our encoder must give the same code for every input. */
static void hardware_table(void **state)
{
    (void)state;
    FILE *f = fopen("tests/data/fp8_e4m3_hw.txt", "r");
    assert_non_null(f);
    char line[256];
    int n = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned bits, code;
        if (line[0] == '#' || sscanf(line, "%x %x", &bits, &code) != 2) continue;
        float x = mm_bits_f32(bits);
        uint8_t ours = mm_fp8_encode(x);
        int same = isnan(x) ? (ours & 0x7f) == 0x7f && (code & 0x7f) == 0x7f : ours == code;
        if (!same && bad++ < 5) print_error("input %08x: hardware %02x, ours %02x\n", bits, code, ours);
        n++;
    }
    fclose(f);
    assert_true(n >= 1000);
    assert_int_equal(bad, 0);
}

/* SwiGLU with the limit (recipe step 4, as the kernels call it: mm_swiglu_gate, then
 * mm_swiglu_apply) against the formula in double: within a few float roundings everywhere; the
 * limit clamps the gate from above only and the up value on both sides. */
static void swiglu_against_double(void **state)
{
    (void)state;
    uint64_t rng = 99;
    const float limit = 7.0f;
    for (int n = 0; n < 200000; n++) {
        float g, u, w;
        ref_swiglu_input(&rng, &g, &u, &w);
        for (int has_limit = 0; has_limit < 2; has_limit++) {
            float h = mm_swiglu_apply(mm_swiglu_gate(g, has_limit, limit), u, w, has_limit, limit);
            double ref = ref_swiglu(g, u, w, has_limit, limit);
            if (!ref_swiglu_close(h, ref)) {
                printf("swiglu(%a, %a, %a, limit %d) = %a, double %a\n", g, u, w, has_limit, h, ref);
                fail();
            }
        }
    }
}

/* The GPU's shortcuts are the same floats as the plain operations: x * mm_scale_inverse(s) ==
 * x / s for power-of-two scales (subnormal and overflowing results included), 0 (divide) for
 * other scales. */
static void shortcuts_are_exact(void **state)
{
    (void)state;
    uint64_t rng = 7;
    assert_true(mm_scale_inverse(3.0f) == 0.0f);
    assert_true(mm_scale_inverse(-2.0f) == 0.0f);
    assert_true(mm_scale_inverse(0.0f) == 0.0f);
    assert_true(mm_scale_inverse(0x1p-127f) == 0.0f); /* subnormal scale */
    assert_true(mm_scale_inverse(0x1p127f) == 0.0f);  /* 1/scale would be subnormal */
    assert_true(mm_scale_inverse(0x1p-8f) == 256.0f);
    for (int n = 0; n < 400000; n++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        float x = mm_bits_f32((uint32_t)(rng >> 32));
        if (isnan(x)) continue;
        int k = (int)((rng >> 8) % 252) - 125; /* scales 2^-125 .. 2^126 */
        float scale = ldexpf(1.0f, k), inv = mm_scale_inverse(scale);
        assert_true(inv != 0.0f);
        float a = x * inv, b = x / scale;
        if (mm_f32_bits(a) != mm_f32_bits(b)) fail_msg("x %a scale 2^%d: %a vs %a", (double)x, k, (double)a, (double)b);
        assert_int_equal(mm_quantize(x, scale), mm_fp8_encode(b));
    }
}

/* mm_quantize4 gives the bytes of four mm_quantize calls, value i in byte i, for power-of-two
 * scales (one multiply each), any other scale (divisions), and values that saturate, round to
 * zero or are not finite. */
static void quantize4_is_quantize(void **state)
{
    (void)state;
    uint64_t rng = 11;
    for (int n = 0; n < 200000; n++) {
        float v[4], scale;
        for (int i = 0; i < 4; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            v[i] = mm_bits_f32((uint32_t)(rng >> 32));
        }
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        const int kind = (int)((rng >> 20) % 4), k = (int)((rng >> 8) % 252) - 125;
        if (kind == 0) scale = ldexpf(1.0f, k);                                   /* UE8M0 */
        else if (kind == 1) scale = mm_block_scale(fabsf(v[(rng >> 40) % 4]), 0); /* FP32 amax / 448 */
        else if (kind == 2) scale = mm_block_scale(fabsf(v[0]) + 1.0f, 1);
        else scale = (float)((rng >> 33) % 1000 + 1) * 1e-3f;
        if (!(scale > 0.0f) || isinf(scale)) continue;
        const uint32_t q = mm_quantize4(v, scale);
        for (int i = 0; i < 4; i++) {
            const uint8_t want = mm_quantize(v[i], scale), got = (uint8_t)(q >> (8 * i));
            if (got != want) fail_msg("v %a scale %a: byte %d %#x vs %#x", (double)v[i], (double)scale, i, got, want);
        }
    }
    /* values whose quotient lies at an FP8 rounding midpoint, where a multiply by a rounded
     * inverse and the division can round apart */
    const float scales[] = {3.0f, 0.1f, 1.7f, 1e-3f, 37.0f};
    for (int c = 0; c < 126; c++)
        for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
            const float mid = 0.5f * (mm_fp8_decode((uint8_t)c) + mm_fp8_decode((uint8_t)(c + 1)));
            const float x = mid * scales[si];
            float v[4] = {x, nextafterf(x, INFINITY), nextafterf(x, -INFINITY), -x};
            const uint32_t q = mm_quantize4(v, scales[si]);
            for (int i = 0; i < 4; i++)
                assert_int_equal((q >> (8 * i)) & 0xff, mm_quantize(v[i], scales[si]));
        }
    const float big[4] = {1e30f, -1e30f, 0.0f, -0.0f};
    const uint32_t q = mm_quantize4(big, 1.0f);
    assert_int_equal(q & 0xff, 0x7e);         /* saturates to 448 */
    assert_int_equal((q >> 8) & 0xff, 0xfe);  /* and to -448 */
    assert_int_equal((q >> 16) & 0xff, 0x00); /* zero */
    assert_int_equal((q >> 24) & 0xff, 0x80); /* negative zero */
}

/* The GPU's fmaxf (FMNMX, PTX max.f32): a NaN operand, quiet or signaling, gives the other one.
 * (The host's fmaxf turns a signaling NaN into a NaN result, as IEEE 754-2008 maxNum says.) */
static float gpu_fmaxf(float a, float b)
{
    return isnan(a) ? b : isnan(b) ? a : fmaxf(a, b);
}

/* A warp's amax as the max of mm_amax_key over its lanes' maxima gives the scale a butterfly of
 * the GPU's fmaxf gives (the kernels' old reduction), over blocks with zeros, subnormals,
 * infinities and NaNs (the max ignores a NaN; the keys read it as 0; a block of NaNs reads NaN
 * one way and 0 the other, and both get the floor scale). */
static void amax_key_is_fmaxf(void **state)
{
    (void)state;
    uint64_t rng = 5;
    for (int n = 0; n < 20000; n++) {
        float lane[32];
        const int kind = n % 5;
        for (int l = 0; l < 32; l++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t bits = (uint32_t)(rng >> 32);
            if (kind == 1) bits &= 0x807fffffu;                                      /* subnormals, zeros */
            if (kind == 2 && (rng >> 20) % 7 == 0) bits = 0x7f800000u | (bits >> 31 << 31); /* infinities */
            if (kind == 3 && (rng >> 20) % 3 == 0) bits = 0x7fc00000u | (bits & 0x803fffffu); /* NaNs */
            if (kind == 4) bits = 0x7fc00001u;                                         /* all NaN */
            lane[l] = mm_fabs(mm_bits_f32(bits));
        }
        float butterfly[32];
        memcpy(butterfly, lane, sizeof lane);
        for (int o = 16; o > 0; o >>= 1) {
            float next[32];
            for (int l = 0; l < 32; l++) next[l] = gpu_fmaxf(butterfly[l], butterfly[l ^ o]);
            memcpy(butterfly, next, sizeof next);
        }
        uint32_t key = 0;
        for (int l = 0; l < 32; l++) key = mm_amax_key(lane[l]) > key ? mm_amax_key(lane[l]) : key;
        const float by_key = mm_bits_f32(key);
        if (!isnan(butterfly[0])) assert_int_equal(mm_f32_bits(by_key), mm_f32_bits(butterfly[0]));
        for (int ue8m0 = 0; ue8m0 < 2; ue8m0++)
            assert_int_equal(mm_f32_bits(mm_block_scale(by_key, ue8m0)), mm_f32_bits(mm_block_scale(butterfly[0], ue8m0)));
    }
}

int run_recipe_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_codes_round_trip),
        cmocka_unit_test(midpoints_and_random_values),
        cmocka_unit_test(bf16_and_scales),
        cmocka_unit_test(div_fp8_max_is_division),
        cmocka_unit_test(hardware_table),
        cmocka_unit_test(swiglu_against_double),
        cmocka_unit_test(shortcuts_are_exact),
        cmocka_unit_test(quantize4_is_quantize),
        cmocka_unit_test(amax_key_is_fmaxf),
    };
    return cmocka_run_group_tests_name("recipe", tests, NULL, NULL);
}
