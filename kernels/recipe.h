/* The numeric recipe's building blocks (../shared/reference/recipe.md), one definition for host C
 * and CUDA: FP8 e4m3 encode/decode, BF16 rounding, per-128 quantization scales.
 *
 * Every operation that rounds is written as an explicit IEEE round-to-nearest op (MM_ADD, MM_MUL,
 * MM_DIV), because nvcc would otherwise fuse a*b+c into one FMA on the device and the host and GPU
 * results would differ in the last bit. Host code is built with -ffp-contract=off for the same
 * reason. Encoders work on bit patterns, so they are exact by construction. */
#ifndef MEGAMOE_RECIPE_H
#define MEGAMOE_RECIPE_H

#include <stdint.h>
#include <string.h>
#ifdef __CUDACC__
#include <cuda_fp8.h> /* the hardware FP8 conversion */
#else
#include <math.h> /* expf */
#endif

#ifdef __CUDACC__
#define MM_HD __host__ __device__ __forceinline__
#else
#define MM_HD static inline
#endif

#if defined(__CUDA_ARCH__)
#define MM_ADD(a, b) __fadd_rn((a), (b))
#define MM_MUL(a, b) __fmul_rn((a), (b))
#define MM_DIV(a, b) __fdiv_rn((a), (b))
#define MM_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#else
#define MM_ADD(a, b) ((float)(a) + (float)(b))
#define MM_MUL(a, b) ((float)(a) * (float)(b))
#define MM_DIV(a, b) ((float)(a) / (float)(b))
#define MM_FMA(a, b, c) fmaf((a), (b), (c))
#endif

#define MM_FP8_MAX 448.0f
#define MM_SCALE_FLOOR 1e-4f /* amax below this still gets scale 1e-4/448: no division by 0 */

MM_HD uint32_t mm_f32_bits(float f)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}

MM_HD float mm_bits_f32(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

/* FP8 e4m3 (the "fn" variant: no infinities, 0x7F/0xFF are NaN, max 448), round to nearest even,
 * saturating to +-448; NaN in gives NaN out. */
/* The recipe's FP8 e4m3 encoder on the bit pattern: round to nearest even, saturate to +-448,
 * NaN to 0x7f with its sign. The host's, and the self-test's reference for the hardware's. */
MM_HD uint8_t mm_fp8_encode_sw(float x)
{
    uint32_t b = mm_f32_bits(x);
    uint8_t sign = (uint8_t)((b >> 24) & 0x80u);
    uint32_t a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu); /* NaN */
    if (a >= 0x43e00000u) return (uint8_t)(sign | 0x7eu); /* >= 448 (and inf): saturate */
    int e = (int)(a >> 23) - 127;
    if (e >= -6) {
        /* Normal in e4m3: keep 3 mantissa bits, round the 20 dropped bits to nearest even; a
         * carry out of the mantissa correctly bumps the exponent. */
        uint32_t q = a >> 20, rem = a & 0xfffffu;
        if (rem > 0x80000u || (rem == 0x80000u && (q & 1u))) q++;
        uint32_t exp8 = (q >> 3) - 127u + 7u;
        uint32_t code = (exp8 << 3) | (q & 7u);
        return (uint8_t)(sign | (code > 0x7eu ? 0x7eu : code));
    }
    /* Subnormal in e4m3: value = m * 2^-9, m = round(sig * 2^(e - 14)). */
    uint32_t sig = (a & 0x7fffffu) | 0x800000u;
    int s = 14 - e; /* >= 21 */
    if (s >= 32) return sign;
    uint32_t m = sig >> s, rem = sig & ((1u << s) - 1u), half = 1u << (s - 1);
    if (rem > half || (rem == half && (m & 1u))) m++;
    return (uint8_t)(sign | m); /* m == 8 is the smallest normal, code 0x08: still right */
}

/* On the GPU the hardware conversion (one instruction instead of ~20): the self-test (fp8-hw)
 * checks it against mm_fp8_encode_sw on every midpoint, special and random value; the two differ
 * only in the sign bit of a NaN. */
MM_HD uint8_t mm_fp8_encode(float x)
{
#if defined(__CUDA_ARCH__)
    return (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
#else
    return mm_fp8_encode_sw(x);
#endif
}

MM_HD float mm_fp8_decode(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80u) << 24;
    uint32_t e = (v >> 3) & 0xfu, m = v & 7u;
    if (e == 15u && m == 7u) return mm_bits_f32(sign | 0x7fc00000u);
    if (e == 0u) {
        /* m * 2^-9, exact in float */
        float f = (float)m * (1.0f / 512.0f);
        return mm_bits_f32(sign | mm_f32_bits(f));
    }
    return mm_bits_f32(sign | ((e - 7u + 127u) << 23) | (m << 20));
}

/* BF16 by round to nearest even on the bit pattern (NaN stays a quiet NaN). */
MM_HD uint16_t mm_bf16_encode(float x)
{
    uint32_t b = mm_f32_bits(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40u);
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

MM_HD float mm_bf16_decode(uint16_t v)
{
    return mm_bits_f32((uint32_t)v << 16);
}

/* Round a positive scale up to a power of two (UE8M0). */
MM_HD float mm_ue8m0_round_up(float s)
{
    uint32_t b = mm_f32_bits(s);
    if (b & 0x7fffffu) b = (b & 0xff800000u) + 0x800000u;
    return mm_bits_f32(b);
}

/* x / 448 rounded to nearest, for x >= MM_SCALE_FLOOR (infinity included), without a division:
 * the product by fl(1/448) and one FMA correction. The same float as MM_DIV(x, 448) for every
 * such x (all 1,185,827,049 finite ones compared on the host, and test_recipe.c samples them);
 * on the GPU a division is a call behind a range check (FCHK), a branch, and a warp quantizing
 * several blocks (mm_quantize_held128) then ran each block's scale one after another. */
MM_HD float mm_div_fp8_max(float x)
{
    const float r = 1.0f / MM_FP8_MAX; /* fl(1/448), folded by the compiler */
    const float q = MM_MUL(x, r);
    const float q1 = MM_FMA(MM_FMA(-q, MM_FP8_MAX, x), r, q);
    return x <= 3.40282347e38f ? q1 : x; /* inf / 448 = inf (the correction would make NaN) */
}

/* Scale of a 128-wide (or 128x128) block from its amax: max(amax, 1e-4) / 448, optionally
 * rounded up to a power of two. */
MM_HD float mm_block_scale(float amax, int ue8m0)
{
    float s = mm_div_fp8_max(amax > MM_SCALE_FLOOR ? amax : MM_SCALE_FLOOR);
    return ue8m0 ? mm_ue8m0_round_up(s) : s;
}

/* 1 / scale when scale is a positive power of two (then x * (1 / scale) and x / scale round the
 * same real number, so they are the same float, subnormal results included), else 0. */
MM_HD float mm_scale_inverse(float scale)
{
    uint32_t b = mm_f32_bits(scale), e = b >> 23;
    if ((b & 0x7fffffu) || e == 0u || e > 253u) return 0.0f; /* not 2^k, negative, or 1/scale not normal */
    return mm_bits_f32((254u - e) << 23);
}

/* x / scale in FP8; a UE8M0 scale multiplies by its exact inverse instead of dividing. */
MM_HD uint8_t mm_quantize(float x, float scale)
{
    const float inv = mm_scale_inverse(scale);
    return mm_fp8_encode(inv != 0.0f ? MM_MUL(x, inv) : MM_DIV(x, scale));
}

/* An absolute value (sign bit clear) as an unsigned key ordered as the floats are, NaN as 0: the
 * max of the keys is the value fmaxf's max gives (fmaxf ignores a NaN), so a warp's amax is one
 * integer reduction (redux.sync) instead of five shuffle-and-max steps. A block of NaNs only
 * reads 0 instead of NaN, and both give mm_block_scale's floor. */
MM_HD uint32_t mm_amax_key(float abs_value)
{
    const uint32_t b = mm_f32_bits(abs_value);
    return b > 0x7f800000u ? 0u : b;
}

/* Four values of one block in FP8, value i in byte i, by the block scale's exact inverse
 * (mm_scale_inverse, nonzero): mm_quantize's multiply. */
MM_HD uint32_t mm_quantize4_by(const float v[4], float inv)
{
    uint32_t q = 0;
    for (int i = 0; i < 4; i++) q |= (uint32_t)mm_fp8_encode(MM_MUL(v[i], inv)) << (8 * i);
    return q;
}

/* Four values of one block in FP8, value i in byte i: mm_quantize of each, its multiply-or-divide
 * decided once for the four (they share the block's scale), so a GPU warp takes one branch per
 * block instead of one per value (UE8M0 scales always multiply). */
MM_HD uint32_t mm_quantize4(const float v[4], float scale)
{
    const float inv = mm_scale_inverse(scale);
    if (inv != 0.0f) return mm_quantize4_by(v, inv);
    uint32_t q = 0;
    for (int i = 0; i < 4; i++) q |= (uint32_t)mm_fp8_encode(MM_DIV(v[i], scale)) << (8 * i);
    return q;
}

/* Recipe step 4 in FP32: g = min(gate, L), u = clamp(up, -L, L), h = g / (1 + exp(-g)) * u * w.
 * In two halves, so a kernel can work out the gate's half (the exp and the division) while the up
 * block is still being computed; mm_swiglu is the two in a row. Every GPU path calls these, so
 * their h agree bit for bit. On the GPU SiLU takes the hardware's approximate exp2 and reciprocal
 * (__expf, __fdividef: two MUFU operations and two multiplies): the accurate expf and IEEE
 * division cost fused GEMM1's epilogue 17% of the phase at Flash 4096 tokens. Worst relative error of SiLU on |g| <= 20 about 1.4e-6 (ex2's argument rounding
 * dominates), far below FP8's step; the selftest `swiglu-gpu` bounds h against double, and `check`
 * every path against the double reference. Past 2^126 the reciprocal flushes to 0, so SiLU of
 * g < -87 is -0 instead of a few 1e-37. The host keeps expf and IEEE division. */
MM_HD float mm_swiglu_gate(float gate, int has_limit, float limit)
{
    if (has_limit) gate = gate < limit ? gate : limit;
#if defined(__CUDA_ARCH__)
    return __fdividef(gate, MM_ADD(1.0f, __expf(-gate)));
#else
    return MM_DIV(gate, MM_ADD(1.0f, expf(-gate)));
#endif
}

MM_HD float mm_swiglu_apply(float silu, float up, float w, int has_limit, float limit)
{
    if (has_limit) up = up < -limit ? -limit : (up > limit ? limit : up);
    return MM_MUL(MM_MUL(silu, up), w);
}

MM_HD float mm_swiglu(float gate, float up, float w, int has_limit, float limit)
{
    return mm_swiglu_apply(mm_swiglu_gate(gate, has_limit, limit), up, w, has_limit, limit);
}

MM_HD float mm_fabs(float x)
{
    return mm_bits_f32(mm_f32_bits(x) & 0x7fffffffu);
}

#endif
