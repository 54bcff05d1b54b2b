#include <math.h>
#include <string.h>

#include "../kernels/fp4.h"
#include "test_util.h"

/* Every code's value, and the storage order (fp4.h): word (j, q) of a K block at byte
 * 64 kb + 16 q + 4 j, lo i = K 32 j + 4 q + i (magnitude bits 4 i.., sign bit 8 i + 7), hi i
 * = lo i + 16 (bits 16 + 4 i.., sign 8 i + 3); set and read back every weight of two blocks, and
 * a checkpoint row's re-packing is a permutation of the weights. */
static void codes(void **state)
{
    (void)state;
    const float want[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int c = 0; c < 16; c++) assert_true(mm_e2m1_decode((uint8_t)c) == want[c]);
    uint8_t row[128] = {0};
    mm_fp4_set_code(row, 128 + 32 * 2 + 4 * 3 + 1, 0xB); /* block 1, j 2, q 3, lo 1: -1.5 */
    assert_int_equal(row[64 + 16 * 3 + 4 * 2 + 0], 0x30); /* magnitude 3 in bits 4-6 */
    assert_int_equal(row[64 + 16 * 3 + 4 * 2 + 1], 0x80); /* the sign in bit 15 */
    mm_fp4_set_code(row, 16 + 2, 0xF); /* block 0, j 0, q 0, hi 2: -6 */
    assert_int_equal(row[2], 0x08);                       /* the sign in bit 19 */
    assert_int_equal(row[3], 0x07);                       /* magnitude 7 in bits 24-26 */
    int set = 0;
    for (int i = 0; i < 128; i++) set += row[i] != 0;
    assert_int_equal(set, 4);
    /* a checkpoint's row (two codes a byte, the lower K in the low nibble) re-packed */
    uint8_t hf[128], packed[128] = {0}, seen[256] = {0};
    for (int i = 0; i < 128; i++) hf[i] = (uint8_t)(i * 37 + 11);
    for (int k = 0; k < 256; k++) mm_fp4_set_code(packed, k, (uint8_t)((hf[k / 2] >> (4 * (k % 2))) & 15u));
    for (int k = 0; k < 256; k++) {
        assert_int_equal(mm_fp4_code(packed, k), (hf[k / 2] >> (4 * (k % 2))) & 15u);
        const int at = mm_fp4_word_at(k) * 2 + mm_fp4_word_slot(k);
        seen[at]++; /* each weight its own place */
    }
    for (int i = 0; i < 256; i++) assert_int_equal(seen[i], 1);
    for (uint32_t w = 1; w; w <<= 1) { /* each bit belongs to one weight */
        int owners = 0;
        for (int n = 0; n < 8; n++) owners += mm_fp4_word_code(w, n) != 0;
        assert_int_equal(owners, 1);
    }
}

/* Within [D_MIN, D_MAX] every code times 2^d is exact in e4m3; one step below, some are not. */
static void exact_range(void **state)
{
    (void)state;
    for (int d = MM_FP4_D_MIN; d <= MM_FP4_D_MAX; d++)
        for (int c = 0; c < 16; c++) {
            const double want = (double)mm_e2m1_decode((uint8_t)c) * ldexp(1.0, d);
            assert_true((double)mm_fp8_decode(mm_fp4_to_fp8((uint8_t)c, d)) == want);
        }
    /* the largest: 6 * 2^6 = 384, inside e4m3's 448 */
    assert_true(mm_fp8_decode(mm_fp4_to_fp8(7, MM_FP4_D_MAX)) == 384.0f);
    assert_true(mm_fp8_decode(mm_fp4_to_fp8(15, MM_FP4_D_MAX)) == -384.0f);
    int inexact = 0;
    for (int c = 0; c < 16; c++) {
        const double want = (double)mm_e2m1_decode((uint8_t)c) * ldexp(1.0, MM_FP4_D_MIN - 1);
        inexact += (double)mm_fp8_decode(mm_fp4_to_fp8((uint8_t)c, MM_FP4_D_MIN - 1)) != want;
    }
    assert_true(inexact > 0);
    /* far below, everything rounds to zero */
    for (int c = 0; c < 16; c++) assert_true(mm_fp8_decode(mm_fp4_to_fp8((uint8_t)c, -40)) == 0.0f);
}

/* A block's expansion: the reference is the largest exponent of its 128 rows - 6; the product
 * with the reference scale is the exact weight while the spread is <= 14, and each group past it
 * is counted (here row 5 carries the block's largest exponent, row 9 the lowered group). */
static void expand(void **state)
{
    (void)state;
    enum { G = 8 }; /* K = 256: two K blocks a row, the second one's exponents */
    uint8_t codes[64], fp8[128], exps[128 * G];
    for (int i = 0; i < 64; i++) codes[i] = (uint8_t)(i * 37 + 11); /* every code, in every place */
    for (int spread = 0; spread <= 16; spread++) {
        for (int r = 0; r < 128; r++)
            for (int g = 0; g < G; g++) exps[r * G + g] = (uint8_t)(112 + (r + g) % 3);
        exps[5 * G + 4 + 2] = 120;
        exps[9 * G + 4 + 1] = (uint8_t)(120 - spread);
        const int ref = mm_fp4_block_ref(exps, G, 1);
        assert_int_equal(ref, 120 - MM_FP4_D_MAX);
        assert_int_equal(mm_fp4_block_ref(exps, G, 0), 114 - MM_FP4_D_MAX);
        assert_int_equal(mm_fp4_past_groups(exps, G, 1), spread > MM_FP4_D_MAX - MM_FP4_D_MIN ? 1 : 0);
        assert_int_equal(mm_fp4_past_groups(exps, G, 0), 0);
        /* the block's word: its largest exponent, and the fast table's range for every group
         * (the lowered group at 6 - spread from the reference: in it while spread <= 11) */
        assert_int_equal(mm_fp4_block_word(exps, G, 0), 114u | MM_FP4_WORD_FAST);
        assert_int_equal(mm_fp4_block_word(exps, G, 1), 120u | (6 - spread >= MM_FP4_D_FAST ? MM_FP4_WORD_FAST : 0u));
        const uint8_t *s = exps + 9 * G + 4;
        const int past = mm_fp4_expand_row(codes, s, ref, fp8);
        assert_int_equal(past, spread > MM_FP4_D_MAX - MM_FP4_D_MIN ? 1 : 0);
        int exact = 1;
        for (int k = 0; k < 128; k++) {
            const double w = (double)mm_e2m1_decode(mm_fp4_code(codes, k)) * ldexp(1.0, s[k / 32] - 127);
            const double got = (double)mm_fp8_decode(fp8[k]) * (double)mm_fp4_ref_scale(ref);
            if (got != w) exact = 0;
            if (k / 32 != 1) assert_true(got == w); /* the other groups stay exact */
        }
        assert_int_equal(exact, past == 0);
    }
    /* the reference scale is exact across UE8M0's range, subnormal FP32 included */
    assert_true(mm_fp4_ref_scale(127) == 1.0f);
    assert_true((double)mm_fp4_ref_scale(0 - MM_FP4_D_MAX) == ldexp(1.0, -133));
    assert_true((double)mm_fp4_ref_scale(254 - MM_FP4_D_MAX) == ldexp(1.0, 121));
}

/* The generator: every code, magnitudes weighted to the small ones, exponents that differ across
 * rows and drift along K, a few outlier groups, and blocks well inside the exact range. */
static void generator(void **state)
{
    (void)state;
    int seen[16] = {0};
    for (int k = 0; k < 8192; k++) seen[mm_gen_fp4_code(1, MM_FP4_REAL, 0, 3, 7, (uint64_t)k)]++;
    for (int c = 0; c < 16; c++) assert_true(seen[c] > 0);
    assert_true(seen[1] + seen[9] > seen[7] + seen[15]); /* 0.5 more common than 6 */
    enum { G = 128 }; /* K = 4096 */
    static uint8_t exps[128 * G];
    int rows_differ = 0, drifts = 0, outliers = 0, widest = 0;
    for (uint64_t row = 0; row < 128; row++) {
        rows_differ += mm_gen_fp4_scale(1, MM_FP4_REAL, 0, 3, row, 0) != mm_gen_fp4_scale(1, MM_FP4_REAL, 0, 3, 0, 0);
        for (uint64_t g = 0; g < G; g++) exps[row * G + g] = mm_gen_fp4_scale(1, MM_FP4_REAL, 1, 3, row, g);
        for (uint64_t g = 0; g < G; g += 4) {
            drifts += exps[row * G + g] != exps[row * G];
            for (int j = 0; j < 4; j++) outliers += exps[row * G + g + (uint64_t)j] >= exps[row * G + g] + 3;
        }
    }
    for (int kb = 0; kb < G / 4; kb++) { /* each 128 x 128 block's span */
        int lo = 255, hi = 0;
        for (int i = 0; i < 128 * 4; i++) {
            const int v = exps[(i / 4) * G + kb * 4 + i % 4];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        widest = hi - lo > widest ? hi - lo : widest;
        assert_int_equal(mm_fp4_past_groups(exps, G, kb), 0);
        /* realistic blocks take the swapped form's fast expansion (their word's bit), which its
         * speed counts on; the word carries the block's largest exponent */
        assert_int_equal(mm_fp4_block_word(exps, G, kb), (uint32_t)hi | MM_FP4_WORD_FAST);
    }
    assert_true(rows_differ > 40);
    assert_true(drifts > 200);
    assert_true(outliers > 10 && outliers < 400);
    /* rows' bases, drift, a lowered group and an outlier together: inside the exact range */
    assert_true(widest >= 6 && widest <= 9);
    /* the same bits for the same indices */
    assert_int_equal(mm_gen_fp4_scale(9, MM_FP4_REAL, 0, 1, 2, 3), mm_gen_fp4_scale(9, MM_FP4_REAL, 0, 1, 2, 3));
    assert_int_equal(mm_gen_fp4_code(9, MM_FP4_REAL, 1, 1, 2, 3), mm_gen_fp4_code(9, MM_FP4_REAL, 1, 1, 2, 3));
}

/* check's patterns: the spread at the limit stays exact, one group past it per block is counted,
 * the zero rows and the largest codes are what they say. */
static void patterns(void **state)
{
    (void)state;
    enum { K = 512, G = K / 32 };
    static uint8_t exps[128 * G], past_exps[128 * G];
    uint8_t codes[K / 2], fp8[128];
    for (uint64_t row = 0; row < 128; row++)
        for (int g = 0; g < G; g++) {
            exps[row * G + g] = mm_gen_fp4_scale(5, MM_FP4_SPREAD_LIMIT, 0, 2, row, (uint64_t)g);
            past_exps[row * G + g] = mm_gen_fp4_scale(5, MM_FP4_SPREAD_PAST, 1, 2, row, (uint64_t)g);
        }
    for (int kb = 0; kb < K / 128; kb++) {
        assert_int_equal(mm_fp4_past_groups(exps, G, kb), 0);
        assert_int_equal(mm_fp4_past_groups(past_exps, G, kb), 128); /* one a row */
        /* both spread past the arithmetic table: their blocks take the tables code by code */
        assert_int_equal(mm_fp4_block_word(exps, G, kb) & MM_FP4_WORD_FAST, 0u);
        assert_int_equal(mm_fp4_block_word(past_exps, G, kb) & MM_FP4_WORD_FAST, 0u);
    }
    for (uint64_t row = 0; row < 128; row += 7) {
        const uint8_t *e = exps + row * G;
        for (int kb = 0; kb < K / 128; kb++) {
            int lo = 255, hi = 0, slot_lo = -1;
            for (int g = 0; g < 4; g++) {
                const int v = e[kb * 4 + g];
                if (v < lo) { lo = v; slot_lo = g; }
                hi = v > hi ? v : hi;
            }
            assert_int_equal(hi - lo, MM_FP4_D_MAX - MM_FP4_D_MIN);
            assert_int_equal(slot_lo, (1 - kb % 4 + 4) % 4); /* the offsets rotate with the block */
        }
        for (int c = 0; c < K; c++) mm_fp4_set_code(codes, c, mm_gen_fp4_code(5, MM_FP4_SPREAD_LIMIT, 0, 2, row, (uint64_t)c));
        for (int kb = 0; kb < K / 128; kb++) { /* at the limit every weight is still exact */
            const int ref = mm_fp4_block_ref(exps, G, kb);
            assert_int_equal(mm_fp4_expand_row(codes + kb * 64, e + kb * 4, ref, fp8), 0);
            for (int j = 0; j < 128; j++)
                assert_true(ldexp((double)mm_fp8_decode(fp8[j]), ref - 127) ==
                            ldexp((double)mm_e2m1_decode(mm_fp4_code(codes + kb * 64, j)), e[kb * 4 + j / 32] - 127));
        }
        for (int c = 0; c < 64; c++) {
            const uint8_t z = mm_gen_fp4_code(5, MM_FP4_ZEROS, 0, 2, row, (uint64_t)c);
            if (row % 4 == 0) assert_int_equal(z & 7, 0);
            assert_int_equal(mm_gen_fp4_code(5, MM_FP4_LARGEST, 0, 2, row, (uint64_t)c) & 7, 7);
        }
        /* the largest sit 3 steps above their row's base (the real pattern's group 0 without its
         * drift, lowering or outlier lies within one step of it) */
        const int largest = mm_gen_fp4_scale(5, MM_FP4_LARGEST, 0, 2, row, 0);
        assert_true(largest >= 127 - 11 - 3 + 3 && largest <= 127 - 11 + 3);
    }
    /* real experts never pass the limit */
    for (uint64_t row = 0; row < 128; row++)
        for (int g = 0; g < G; g++) exps[row * G + g] = mm_gen_fp4_scale(5, MM_FP4_REAL, 0, 2, row, (uint64_t)g);
    for (int kb = 0; kb < K / 128; kb++) assert_int_equal(mm_fp4_past_groups(exps, G, kb), 0);
}

/* The GEMM core's expansion (byte permutes, eight codes a word) against the per-code definition:
 * every 16-bit half of a word at every fast offset, and whole groups at every offset the
 * exponents allow, past the limit included; and the host's permute against PTX's rules. */
static void expand_fast(void **state)
{
    (void)state;
    assert_int_equal(mm_prmt(0x33221100u, 0x77665544u, 0x7531u), 0x77553311u);
    assert_int_equal(mm_prmt(0x00007f80u, 0u, 0x0809u), 0x80ff8000u);
    for (int d = MM_FP4_D_FAST; d <= MM_FP4_D_MAX; d++)
        for (uint32_t half = 0; half < 65536u; half++) {
            const uint32_t w = half | (0xffffu - half) << 16;
            uint32_t t0, t1, lo, hi;
            mm_fp4_table(d, &t0, &t1);
            mm_fp4_expand_word(w, t0, t1, &lo, &hi);
            for (int j = 0; j < 8; j++) {
                const uint8_t want = mm_fp4_to_fp8(mm_fp4_word_code(w, j), d);
                const uint8_t got = (uint8_t)(((j < 4 ? lo : hi) >> (8 * (j % 4))) & 0xffu);
                if (got != want) fail_msg("d %d word %08x weight %d: %02x, want %02x", d, w, j, got, want);
            }
        }
    uint64_t h = 12345;
    for (int d = -40; d <= MM_FP4_D_MAX; d++)
        for (int rep = 0; rep < 64; rep++) {
            uint32_t c[4], out[8];
            for (int i = 0; i < 4; i++) {
                h = h * 6364136223846793005ull + 1442695040888963407ull;
                c[i] = (uint32_t)(h >> 32);
            }
            mm_fp4_expand_group(c, d, out);
            for (int k = 0; k < 32; k++) { /* K k of the group: word q = (k % 16) / 4, lo or hi by k / 16 */
                const uint8_t want = mm_fp4_to_fp8(mm_fp4_word_code(c[(k % 16) / 4], (k / 16) * 4 + k % 4), d);
                assert_int_equal((out[k / 4] >> (8 * (k % 4))) & 0xffu, want);
            }
        }
}

int run_fp4_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(codes),
        cmocka_unit_test(exact_range),
        cmocka_unit_test(expand),
        cmocka_unit_test(expand_fast),
        cmocka_unit_test(generator),
        cmocka_unit_test(patterns),
    };
    return cmocka_run_group_tests_name("fp4", tests, NULL, NULL);
}
