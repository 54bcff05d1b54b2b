/* FP4 expert weights (MXFP4: the values and exponents of Hugging Face MXFP4 MoE checkpoints, the
 * codes re-packed into the order the GEMM core reads them) and how they enter the FP8 tensor-core
 * product: one definition for host C and CUDA (docs/recipe.md, "FP4 weights").
 *
 * Storage, per weight matrix row (W1 [2I][H] or W2 [H][I], K the row's length, a multiple of 128):
 *   codes  [K / 2] bytes: E2M1 values, 4 bits each, in the order the GEMM core's expansion reads
 *          them (below: a checkpoint's two codes a byte are re-packed once, when loaded, by
 *          mm_fp4_set_code; the same bytes, the same count);
 *   scales [K / 32] bytes: one UE8M0 exponent per 32 weights (value 2^(s - 127); 255 is NaN and is
 *          never generated).
 * The codes' order: each 128-wide K block of a row is 64 bytes, four 16-byte chunks q = 0..3 of
 * four 32-bit little-endian words j = 0..3; word (j, q) holds the 8 weights one thread of the
 * swapped form feeds wgmma for its k32 step j (gemm_fp4.cuh): "lo" i = K 32 j + 4 q + i and "hi"
 * i = K 32 j + 16 + 4 q + i (i = 0..3). Lo i's 3 magnitude bits are bits 4 i .. 4 i + 2 and its
 * sign bit 8 i + 7; hi i's magnitude bits 16 + 4 i .. 16 + 4 i + 2 and its sign bit 8 i + 3. So
 * a thread loads its 32 weights of a block row with one 16-byte load, the magnitudes of lo and of
 * hi are each four consecutive nibbles (a permute's selector), and the signs sit at bit 7 of each
 * byte as they are (lo) or after one shift (hi): mm_fp4_expand_word.
 * A weight is e2m1(code) * 2^(s - 127). E2M1: sign, 2 exponent bits, 1 mantissa bit: magnitudes
 * 0, 0.5, 1, 1.5, 2, 3, 4, 6.
 *
 * Into the FP8 product, per 128 x 128 weight block (rows 128 b .. 128 b + 127, 128-wide K block kb:
 * the FP8 recipe's weight block, its 512 group exponents s):
 *   R = max(s) - MM_FP4_D_MAX, the block's reference exponent;
 *   d = s_g - R (<= MM_FP4_D_MAX) for each group; w8 = e4m3(e2m1(code) * 2^d);
 *   2^(R - 127) is the block's weight scale: the FP8 recipe from there on (scale_w[b][kb]).
 * For d in [MM_FP4_D_MIN, MM_FP4_D_MAX] every E2M1 value is exact in e4m3 (6 * 2^6 = 384 <= 448;
 * 0.5 * 2^-8 = 2^-9 is e4m3's smallest subnormal and 1.5 * 2^-8 = 3 * 2^-9 is one): the product
 * equals the exact dequantized weight's. A group whose exponent sits more than
 * MM_FP4_D_MAX - MM_FP4_D_MIN = 14 below its block's largest is "past the limit": its values go
 * through the recipe's e4m3 rounding (round to nearest even; the smallest ones become 0), the same
 * on every path, and each such group is counted (mm_fp4_past_groups), never silent. */
#ifndef MEGAMOE_FP4_H
#define MEGAMOE_FP4_H

#include <stdint.h>

#include "datagen.h"
#include "recipe.h"

#define MM_FP4_GROUP 32                                   /* weights a UE8M0 exponent covers */
#define MM_FP4_GROUPS (128 / MM_FP4_GROUP)                /* groups in a 128-wide K block */
#define MM_FP4_D_MAX 6                                    /* the block's largest group: 6 * 2^6 = 384 */
#define MM_FP4_D_MIN (-8)                                 /* 0.5 * 2^-8 = 2^-9, e4m3's least subnormal */

/* The E2M1 value of a 4-bit code (bit 3 the sign). */
MM_HD float mm_e2m1_decode(uint8_t code)
{
    /* exponent field e, mantissa bit m: 0.5 m if e = 0, else (2 + m) 2^(e - 1) / 2 (no table, which
     * a kernel would keep in local memory) */
    const int e = (code >> 1) & 3, m = code & 1;
    const float v = 0.5f * (float)(e == 0 ? m : (2 + m) << (e - 1));
    return (code & 8u) ? -v : v;
}

/* Where weight k of a row sits (the order above): the byte offset of its word in the row, and
 * which of the word's 8 weights it is (0-3 lo i, 4-7 hi i). */
MM_HD int mm_fp4_word_at(int k)
{
    const int kk = k & 127, j = kk >> 5, q = (kk >> 2) & 3;
    return (k >> 7) * 64 + q * 16 + j * 4;
}

MM_HD int mm_fp4_word_slot(int k)
{
    return ((k >> 4) & 1) * 4 + (k & 3);
}

/* Weight n (0-3 lo, 4-7 hi) of a codes word. */
MM_HD uint8_t mm_fp4_word_code(uint32_t w, int n)
{
    const int i = n & 3, hi = n >> 2;
    const uint32_t mag = (w >> (16 * hi + 4 * i)) & 7u, sign = (w >> (8 * i + (hi ? 3 : 7))) & 1u;
    return (uint8_t)(sign << 3 | mag);
}

/* A codes word from its 8 weights (0-3 lo, 4-7 hi). */
MM_HD uint32_t mm_fp4_pack_word(const uint8_t c[8])
{
    uint32_t w = 0;
    for (int i = 0; i < 4; i++) {
        w |= (uint32_t)(c[i] & 7u) << (4 * i) | (uint32_t)(c[i] >> 3 & 1u) << (8 * i + 7);
        w |= (uint32_t)(c[4 + i] & 7u) << (16 + 4 * i) | (uint32_t)(c[4 + i] >> 3 & 1u) << (8 * i + 3);
    }
    return w;
}

/* A codes word at any byte address (little-endian, as the GEMM core's loads read it). */
MM_HD uint32_t mm_fp4_load_word(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

MM_HD void mm_fp4_store_word(uint8_t *b, uint32_t w)
{
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(w >> (8 * i));
}

/* Weight k of a row's codes. */
MM_HD uint8_t mm_fp4_code(const uint8_t *codes, int k)
{
    return mm_fp4_word_code(mm_fp4_load_word(codes + mm_fp4_word_at(k)), mm_fp4_word_slot(k));
}

/* Weight k of a row's codes set to `code` (the re-packing of a checkpoint's row). */
MM_HD void mm_fp4_set_code(uint8_t *codes, int k, uint8_t code)
{
    uint8_t *b = codes + mm_fp4_word_at(k);
    const uint32_t w = mm_fp4_load_word(b);
    uint8_t c[8];
    for (int n = 0; n < 8; n++) c[n] = mm_fp4_word_code(w, n);
    c[mm_fp4_word_slot(k)] = (uint8_t)(code & 15u);
    mm_fp4_store_word(b, mm_fp4_pack_word(c));
}

#define MM_FP4_BLOCK_ROWS 128 /* weight rows that share a reference exponent (the FP8 weight block's) */

/* The largest of a row's four group exponents in a K block. */
MM_HD int mm_fp4_row_top(const uint8_t *s)
{
    int top = s[0];
    for (int g = 1; g < MM_FP4_GROUPS; g++) top = s[g] > top ? s[g] : top;
    return top;
}

/* The reference exponent R of the weight block whose first row's exponents start at `exps` (rows
 * `row_groups` = K / 32 bytes apart), K block kb. */
MM_HD int mm_fp4_block_ref(const uint8_t *exps, int row_groups, int kb)
{
    int top = 0;
    for (int r = 0; r < MM_FP4_BLOCK_ROWS; r++) {
        const int t = mm_fp4_row_top(exps + (long long)r * row_groups + kb * MM_FP4_GROUPS);
        top = t > top ? t : top;
    }
    return top - MM_FP4_D_MAX;
}

/* The promotion's factor for the block: 2^(R - 127), exact in FP32 (normal or subnormal) for
 * every R the UE8M0 exponents 0..254 give (-133..121). */
MM_HD float mm_fp4_ref_scale(int r)
{
    const int e = r - 127;
    if (e >= -126) return mm_pow2(e);
    return MM_MUL(mm_pow2(e + 64), mm_pow2(-64)); /* a subnormal: one exact scaling */
}

/* One weight in the FP8 product: e4m3(e2m1(code) * 2^d), exact for d in [MM_FP4_D_MIN, MM_FP4_D_MAX];
 * below it, the recipe's e4m3 rounding of the (exact) FP32 product. */
MM_HD uint8_t mm_fp4_to_fp8(uint8_t code, int d)
{
    const int e = d < -100 ? -100 : d; /* anything smaller rounds to 0 anyway */
    return mm_fp8_encode(MM_MUL(mm_e2m1_decode(code), MM_MUL(mm_pow2(e / 2), mm_pow2(e - e / 2))));
}

/* One row's part of a weight block: its 64 code bytes and 4 exponents into 128 FP8 weights
 * relative to the block's reference exponent `ref`. Returns how many of its groups are past the
 * limit. */
MM_HD int mm_fp4_expand_row(const uint8_t *codes, const uint8_t *s, int ref, uint8_t *fp8)
{
    int past = 0;
    for (int g = 0; g < MM_FP4_GROUPS; g++) {
        const int d = (int)s[g] - ref;
        past += d < MM_FP4_D_MIN;
        for (int j = 0; j < MM_FP4_GROUP; j++) {
            const int k = g * MM_FP4_GROUP + j;
            fp8[k] = mm_fp4_to_fp8(mm_fp4_code(codes, k), d);
        }
    }
    return past;
}

/* ---- the expansion in the GEMM core: eight codes at a time by byte permutes ---------------- */

/* The smallest offset whose eight magnitudes times 2^d are all normal e4m3 (0.5 * 2^-5 = 2^-6):
 * from it up to MM_FP4_D_MAX a group's table is arithmetic (mm_fp4_table); below it each
 * magnitude goes through mm_fp4_to_fp8 (mm_fp4_table_any). */
#define MM_FP4_D_FAST (-5)

/* PTX prmt.b32 in its default mode: byte i of the result is byte (sel >> 4i) & 7 of the pair
 * {a (bytes 0-3), b (bytes 4-7)}, its top bit copied over the whole byte where bit 3 of that
 * nibble is set. The host's copy lets the CPU tests run the GEMM core's expansion bit for bit. */
MM_HD uint32_t mm_prmt(uint32_t a, uint32_t b, uint32_t sel)
{
#ifdef __CUDA_ARCH__
    return __byte_perm(a, b, sel);
#else
    const uint64_t pair = (uint64_t)a | (uint64_t)b << 32;
    uint32_t out = 0;
    for (int i = 0; i < 4; i++) {
        const uint32_t n = (sel >> (4 * i)) & 15u;
        uint32_t byte = (uint32_t)(pair >> (8 * (n & 7u))) & 0xffu;
        if (n & 8u) byte = (byte & 0x80u) ? 0xffu : 0u;
        out |= byte << (8 * i);
    }
    return out;
#endif
}

/* The permute table of a group at offset d in [MM_FP4_D_FAST, MM_FP4_D_MAX]: the magnitudes
 * 0, 0.5, .., 6 are the e4m3 bytes 00 30 38 3C 40 44 48 4C; times 2^d each nonzero one gains d in
 * its exponent field (8 d on the byte; no byte leaves 08..7C, so no carry crosses bytes), eight
 * bytes in two registers that one permute reads for four codes at once. */
MM_HD void mm_fp4_table(int d, uint32_t *t0, uint32_t *t1)
{
    *t0 = 0x3C383000u + (uint32_t)(d * 0x08080800);
    *t1 = 0x4C484440u + (uint32_t)(d * 0x08080808);
}

/* A codes word (the storage order above) into eight e4m3 bytes (lo: weights lo 0-3, hi: hi 0-3)
 * through a group's table: eight integer instructions in the SASS (the two halves' selectors
 * masked apart, then one shift). The magnitudes by one permute each (a selector nibble is a code's
 * 3 magnitude bits, its top bit masked off; a permute reads only the low four nibbles of its
 * selector); the signs are already bit 7 of each byte (lo) or bit 3 (hi, one shift). */
MM_HD void mm_fp4_expand_word(uint32_t w, uint32_t t0, uint32_t t1, uint32_t *lo, uint32_t *hi)
{
    const uint32_t mag = w & 0x77777777u;
    *lo = (w & 0x80808080u) | mm_prmt(t0, t1, mag);
    *hi = ((w << 4) & 0x80808080u) | mm_prmt(t0, t1, mag >> 16);
}

/* The table of any offset d <= MM_FP4_D_MAX: mm_fp4_table from MM_FP4_D_FAST up, below it each
 * magnitude through mm_fp4_to_fp8 (subnormals, and past the limit its rounding). A negative
 * code's byte is its magnitude's with bit 7 set at every offset (e4m3 is sign and magnitude, and
 * the rounding is symmetric), so mm_fp4_expand_word applies to both (tests/test_fp4.c checks
 * every code at every offset against mm_fp4_to_fp8). */
MM_HD void mm_fp4_table_any(int d, uint32_t *t0, uint32_t *t1)
{
    if (d >= MM_FP4_D_FAST) {
        mm_fp4_table(d, t0, t1);
        return;
    }
    /* below -12, 6 * 2^d is under half of e4m3's least subnormal (2^-10): every byte 0 */
    uint64_t t = 0;
    if (d >= -12) {
        const float p = mm_pow2(d); /* exact and normal, so each product is mm_fp4_to_fp8's */
        for (int m = 1; m < 8; m++) t |= (uint64_t)mm_fp8_encode(MM_MUL(mm_e2m1_decode((uint8_t)m), p)) << (8 * m);
    }
    *t0 = (uint32_t)t;
    *t1 = (uint32_t)(t >> 32);
}

/* One 32-group at any offset d <= MM_FP4_D_MAX through mm_fp4_table_any, from its four words
 * c[q] (word (j, q) of a block row) to its 32 e4m3 bytes in K order (out[q]: K 4q .. 4q + 3 of
 * the group, out[4 + q]: K 16 + 4q ..): the same bytes as mm_fp4_expand_row (the GEMM core's
 * expansion of a block below the arithmetic table, gemm_fp4.cuh, and the CPU tests' view of
 * every expansion). */
MM_HD void mm_fp4_expand_group(const uint32_t c[4], int d, uint32_t out[8])
{
    uint32_t t0, t1;
    mm_fp4_table_any(d, &t0, &t1);
    for (int q = 0; q < 4; q++) mm_fp4_expand_word(c[q], t0, t1, &out[q], &out[4 + q]);
}

/* ---- the generator: MXFP4 experts as real checkpoints look, and the patterns check adds ------ */

/* What the generator draws. bench and gemm draw MM_FP4_REAL; check's FP4 scenarios the others. */
typedef enum {
    MM_FP4_REAL = 0,     /* as checkpoints: every code, a block's exponents within 9 steps, outliers */
    MM_FP4_SPREAD_LIMIT, /* every block's exponents span exactly 14 steps: the widest exact spread */
    MM_FP4_SPREAD_PAST,  /* one group of every row of a block 15..20 steps below the block's largest */
    MM_FP4_ZEROS,        /* every code +-0 in one row of four */
    MM_FP4_LARGEST,      /* every code +-6 (the largest E2M1 magnitude), the row's exponent 3 steps up */
    MM_FP4_PATTERNS
} mm_fp4_pattern;

/* Code of weight (row, k) of an expert's matrix (0 = W1, 1 = W2). Real: every one of the 16 codes,
 * magnitudes weighted towards the small ones as trained weights are (and +-0 rare), signs even. */
MM_HD uint8_t mm_gen_fp4_code(uint64_t seed, int pattern, int matrix, uint64_t expert, uint64_t row, uint64_t k)
{
    const uint64_t h = mm_hash(seed, matrix == 0 ? MM_STREAM_W1 : MM_STREAM_W2, expert, row * 65536u + k);
    const uint8_t sign = (uint8_t)((h & 1u) << 3);
    if (pattern == MM_FP4_ZEROS && row % 4u == 0u) return sign;
    if (pattern == MM_FP4_LARGEST) return (uint8_t)(7u | sign);
    /* magnitude codes 0..7 with weights 1, 6, 6, 5, 4, 3, 2, 1 of 28 */
    const uint32_t u = (uint32_t)(h >> 40) % 28u;
    const uint8_t mag = u < 1 ? 0 : u < 7 ? 1 : u < 13 ? 2 : u < 18 ? 3 : u < 22 ? 4 : u < 25 ? 5 : u < 27 ? 6 : 7;
    return (uint8_t)(mag | sign);
}

/* UE8M0 exponent of group g (weights 32g .. 32g + 31) of a row. Real: a per-row base (the row's
 * magnitude, 4 values), a slow drift along K (every 8 groups), a group in 3 one step lower, and
 * one group in 64 an outlier 2^3 above its row, as checkpoints' exponents spread: a 128 x 128
 * block spans at most 9 steps, well inside the exact range. The spread patterns hold every row at
 * one base and set each row's four groups of a block below it by {0, 14, 7, 3} (exactly the
 * limit) or {0, 3, 15..20, 1} (one past it), rotated by the block so every group position takes
 * each offset. */
MM_HD uint8_t mm_gen_fp4_scale(uint64_t seed, int pattern, int matrix, uint64_t expert, uint64_t row, uint64_t g)
{
    const uint64_t stream = MM_STREAM_BLOCK + 16u * (matrix == 0 ? MM_STREAM_W1 : MM_STREAM_W2);
    const int base = 127 - 11 - (int)(mm_hash(seed, stream, expert, row) % 4u);
    const uint64_t h = mm_hash(seed, stream + 2u, expert, row * 65536u + g);
    const int slot = (int)((g + g / MM_FP4_GROUPS) % MM_FP4_GROUPS);
    if (pattern == MM_FP4_SPREAD_LIMIT) {
        const int below[MM_FP4_GROUPS] = {0, MM_FP4_D_MAX - MM_FP4_D_MIN, 7, 3};
        return (uint8_t)(127 - 11 - below[slot]);
    }
    if (pattern == MM_FP4_SPREAD_PAST) {
        const int below[MM_FP4_GROUPS] = {0, 3, MM_FP4_D_MAX - MM_FP4_D_MIN + 1 + (int)(h % 6u), 1};
        return (uint8_t)(127 - 11 - below[slot]);
    }
    if (pattern == MM_FP4_LARGEST) return (uint8_t)(base + 3);
    const int drift = (int)(mm_hash(seed, stream + 1u, expert, row * 4096u + g / 8u) % 3u) - 1;
    const int outlier = (h & 63u) == 0u ? 3 : 0;
    const int jitter = ((h >> 8) % 3u) == 0u ? -1 : 0;
    return (uint8_t)(base + drift + outlier + jitter);
}

/* Codes word w of a row (the storage order above: K block w / 16, chunk q = (w / 4) % 4, word
 * j = w % 4) of an expert's matrix, as the generator draws it. */
MM_HD uint32_t mm_gen_fp4_row_word(uint64_t seed, int pattern, int matrix, uint64_t expert, uint64_t row, uint64_t w)
{
    const uint64_t k0 = (w >> 4) * 128 + (w & 3u) * 32 + ((w >> 2) & 3u) * 4;
    uint8_t c[8];
    for (int n = 0; n < 8; n++) c[n] = mm_gen_fp4_code(seed, pattern, matrix, expert, row, k0 + (uint64_t)(n >> 2) * 16 + (n & 3));
    return mm_fp4_pack_word(c);
}

/* 32-bit word i of one matrix of `count` experts from `first_expert` as the GPU generator lays it
 * out: the codes [count][rows][cols / 2 bytes] (the storage order above) for i below
 * count * rows * cols / 8, then the exponents [count][rows][cols / 32], four a word, the lower
 * group in the low byte (datagen.cu gen_fp4_kernel writes word i; the CPU tests compare it with
 * the host's experts). */
MM_HD uint32_t mm_gen_fp4_word(uint64_t seed, int pattern, int matrix, int first_expert, int count, int rows, int cols,
                               uint64_t i)
{
    const uint64_t per_row_w = (uint64_t)cols / 8, per_row_g = (uint64_t)cols / MM_FP4_GROUP;
    const uint64_t words = (uint64_t)count * rows * per_row_w;
    if (i < words) {
        const uint64_t r = i / per_row_w, w = i % per_row_w;
        return mm_gen_fp4_row_word(seed, pattern, matrix, (uint64_t)first_expert + r / (uint64_t)rows, r % (uint64_t)rows, w);
    }
    const uint64_t j = 4 * (i - words), r = j / per_row_g, g = j % per_row_g;
    const uint64_t e = (uint64_t)first_expert + r / (uint64_t)rows, row = r % (uint64_t)rows;
    uint32_t v = 0;
    for (int b = 0; b < 4; b++) v |= (uint32_t)mm_gen_fp4_scale(seed, pattern, matrix, e, row, g + b) << (8 * b);
    return v;
}

/* The GPU reference's share of one FP4 block sum on lane `lane` of 32 (reference.cu): weights
 * 4 lane .. 4 lane + 3 of K block kb of a row (codes `crow`, exponents `erow`), all in group
 * lane / 8, expanded to FP8 relative to the block's reference exponent `ref`, times the
 * activations `arow` (FP8), in double through `fp8` (the 256 FP8 values as doubles). The lanes'
 * sum times sa * 2^(ref - 127) is the block's term. */
MM_HD double mm_fp4_ref_lane_part(const double *fp8, const uint8_t *arow, const uint8_t *crow, const uint8_t *erow,
                                  int kb, int ref, int lane)
{
    const int d = (int)erow[kb * MM_FP4_GROUPS + lane / 8] - ref;
    double part = 0.0;
    for (int j = 0; j < 4; j++) {
        const int c = kb * 128 + lane * 4 + j;
        part += fp8[arow[c]] * fp8[mm_fp4_to_fp8(mm_fp4_code(crow, c), d)];
    }
    return part;
}

/* A weight block's word, worked out once when the experts are made (mm_launch_fp4_block_words)
 * so that a decode tile's math need not reduce the block's 512 exponents at every block: bits
 * 0-7 the largest group exponent R + MM_FP4_D_MAX (0..255), bit 8 set when every group lies in
 * the arithmetic table's range (exponent - R >= MM_FP4_D_FAST), so a warp takes the fast
 * expansion on the block's word alone. */
#define MM_FP4_WORD_FAST 0x100u
MM_HD uint32_t mm_fp4_block_word(const uint8_t *exps, int row_groups, int kb)
{
    const int ref = mm_fp4_block_ref(exps, row_groups, kb);
    int fast = 1;
    for (int r = 0; r < MM_FP4_BLOCK_ROWS; r++)
        for (int g = 0; g < MM_FP4_GROUPS; g++)
            fast &= (int)exps[(long long)r * row_groups + kb * MM_FP4_GROUPS + g] - ref >= MM_FP4_D_FAST;
    return (uint32_t)(ref + MM_FP4_D_MAX) | (fast ? MM_FP4_WORD_FAST : 0u);
}

/* Groups of one weight block (as mm_fp4_block_ref names it) that lie past the exact range: the
 * count check reports, never silent. */
MM_HD int mm_fp4_past_groups(const uint8_t *exps, int row_groups, int kb)
{
    const int ref = mm_fp4_block_ref(exps, row_groups, kb);
    int past = 0;
    for (int r = 0; r < MM_FP4_BLOCK_ROWS; r++)
        for (int g = 0; g < MM_FP4_GROUPS; g++)
            past += (int)exps[(long long)r * row_groups + kb * MM_FP4_GROUPS + g] - ref < MM_FP4_D_MIN;
    return past;
}

#endif
