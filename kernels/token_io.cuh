/* Per-token quantization, dispatch and combine. The quantizer (every mode) and the combine sum
 * (fused, ll, normal) are shared so all modes quantize and sum exactly alike; the dispatch below
 * is ll's (fused sends a row per destination rank instead, fused.cu).
 *
 * ll's dispatch of one token (one CTA): quantize the BF16 row per 128 channels into shared memory
 * (recipe step 2), claim one slot per valid k at once (thread k does the atomic on the local
 * per-expert counter: one round trip per token, not one per k), then all threads copy the K wire
 * rows to the owners' receive regions over NVLink together; each row's 16-byte meta
 * {src rank, token, k, weight} is written from registers, so no k waits for another.
 * Wire row: H FP8 bytes, H/128 FP32 scales padded to 16 B, 16 B meta (layout.h mm_ll_row_bytes).
 *
 * Combine of one token: y = BF16 of the FP32 sum, in k order, of the token's valid BF16 expert
 * rows (recipe step 7); each thread owns 8 channels and reads them 16 bytes at a time. */
#ifndef MEGAMOE_TOKEN_IO_CUH
#define MEGAMOE_TOKEN_IO_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "types.h"
#include "recipe.h"

typedef struct {
    int32_t src_rank, token, k;
    float weight;
} mm_wire_meta;

/* Where ll's dispatched rows go: dispatch_recv at byte `recv_offset` of every rank's symmetric
 * buffer, [El][R][max_tokens] rows of row_bytes. */
typedef struct {
    const mm_peers *peers;
    uint64_t recv_offset, row_bytes;
    int max_tokens, local_experts;
} mm_dispatch_dest;

/* The max over the warp of each lane's absolute value (NaN ignored, as fmaxf does): one integer
 * reduction of mm_amax_key, the same float a butterfly of fmaxf shuffles gives. */
__device__ __forceinline__ float mm_warp_amax(float lane_amax)
{
    return mm_bits_f32(__reduce_max_sync(0xffffffffu, mm_amax_key(lane_amax)));
}

/* One warp quantizes U blocks of 128 BF16 values (recipe step 2): each block's amax over the
 * warp, its scale, each lane 4 FP8 values per block (returned packed; the caller stores them).
 * The U blocks' chains (shuffles, the scale's division, the conversions) are written interleaved,
 * step by step across the blocks, so a warp with several blocks does not wait out one chain
 * after another. Every mode's quantization comes here (below, normal's quantize stage, fused's
 * dispatch), so all quantize x with the same instructions. */
template <int U>
__device__ __forceinline__ void mm_quantize_held128(const uint2 raw[U], int ue8m0, uint32_t q[U], float scale[U])
{
    float v[U][4], amax[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        v[u][0] = mm_bf16_decode((uint16_t)(raw[u].x & 0xffff));
        v[u][1] = mm_bf16_decode((uint16_t)(raw[u].x >> 16));
        v[u][2] = mm_bf16_decode((uint16_t)(raw[u].y & 0xffff));
        v[u][3] = mm_bf16_decode((uint16_t)(raw[u].y >> 16));
        amax[u] = fmaxf(fmaxf(mm_fabs(v[u][0]), mm_fabs(v[u][1])), fmaxf(mm_fabs(v[u][2]), mm_fabs(v[u][3])));
    }
#pragma unroll
    for (int u = 0; u < U; u++) amax[u] = mm_warp_amax(amax[u]);
    /* the blocks' scales and inverses, then one test for all U (the scales are the warp's, so the
     * branch is uniform): per block, mm_quantize4's test kept each block's tail (scale, inverse,
     * multiplies, conversions) in a branch region of its own, one after another */
    float inv[U];
    bool multiply = true;
#pragma unroll
    for (int u = 0; u < U; u++) {
        scale[u] = mm_block_scale(amax[u], ue8m0);
        inv[u] = mm_scale_inverse(scale[u]);
        multiply = multiply && inv[u] != 0.0f;
    }
    if (multiply) {
#pragma unroll
        for (int u = 0; u < U; u++) q[u] = mm_quantize4_by(v[u], inv[u]);
    } else {
#pragma unroll
        for (int u = 0; u < U; u++) q[u] = mm_quantize4(v[u], scale[u]);
    }
}

/* The same, stored: lane l's 4 FP8 values at dst + 4 l, the scale by lane 0. */
__device__ __forceinline__ void mm_quantize_loaded128(uint2 raw, uint8_t *dst, float *scale_out, int ue8m0)
{
    const int lane = threadIdx.x % 32;
    float s[1];
    uint32_t q[1];
    mm_quantize_held128<1>(&raw, ue8m0, q, s);
    *(uint32_t *)(dst + lane * 4) = q[0];
    if (lane == 0) *scale_out = s[0];
}

/* The block's 128 BF16 values as mm_quantize_loaded128 takes them: lane l's 4 (8 bytes). Split
 * from the quantization so a warp can have several blocks' loads in flight before it needs the
 * first (fused's dispatch). */
__device__ __forceinline__ uint2 mm_load_block128(const uint16_t *src)
{
    return *(const uint2 *)(src + (threadIdx.x % 32) * 4);
}

__device__ __forceinline__ void mm_quantize_block128(const uint16_t *src, uint8_t *dst, float *scale_out, int ue8m0)
{
    mm_quantize_loaded128(mm_load_block128(src), dst, scale_out, ue8m0);
}

/* Called by every thread of the CTA; `row` holds row_bytes of shared memory, `slots` topk ints.
 * Starts and ends with a __syncthreads (row and slots are free again afterwards). */
__device__ __forceinline__ void mm_dispatch_token(const mm_dispatch_dest &d, int hidden, int topk, int ue8m0,
                                                  const uint16_t *x_row, const int32_t *ids_row,
                                                  const float *w_row, int t, uint32_t *send_counters,
                                                  uint8_t *row, int *slots)
{
    const int warp = threadIdx.x / 32, warps = blockDim.x / 32, me = d.peers->rank;
    __syncthreads(); /* the previous token's copies are done with row and slots */
    float *scales = (float *)(row + hidden);
    for (int b = warp; b < hidden / 128; b += warps)
        mm_quantize_block128(x_row + b * 128, row + b * 128, &scales[b], ue8m0);
    if (threadIdx.x < topk) {
        int e = ids_row[threadIdx.x];
        slots[threadIdx.x] = e >= 0 ? (int)atomicAdd(&send_counters[e], 1u) : -1;
    }
    __syncthreads();
    const int body = (int)(d.row_bytes / 16) - 1; /* 16-byte chunks before the meta */
    for (int c = threadIdx.x; c < topk * (body + 1); c += blockDim.x) {
        int k = c / (body + 1), part = c % (body + 1);
        if (slots[k] < 0) continue;
        int e = ids_row[k], dest = e / d.local_experts, le = e % d.local_experts;
        uint4 *dst = (uint4 *)(d.peers->base[dest] + d.recv_offset +
                               ((size_t)(le * d.peers->ranks + me) * d.max_tokens + slots[k]) * d.row_bytes);
        if (part < body) {
            dst[part] = ((const uint4 *)row)[part];
        } else {
            mm_wire_meta m = {me, t, k, w_row[k]};
            dst[part] = *(const uint4 *)&m;
        }
    }
    __syncthreads();
}

/* The FP32 running sum of 8 BF16 channels (one 16-byte group) and its rounding back to BF16:
 * every combine adds its rows through these, so all of them sum alike. */
__device__ __forceinline__ void mm_add_bf16x8(float s[8], uint4 v)
{
    const __nv_bfloat162 *p = (const __nv_bfloat162 *)&v;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        s[2 * j] = __fadd_rn(s[2 * j], __bfloat162float(p[j].x));
        s[2 * j + 1] = __fadd_rn(s[2 * j + 1], __bfloat162float(p[j].y));
    }
}

__device__ __forceinline__ uint4 mm_round_bf16x8(const float s[8])
{
    uint4 out;
    __nv_bfloat162 *o = (__nv_bfloat162 *)&out;
#pragma unroll
    for (int j = 0; j < 4; j++) o[j] = __floats2bfloat162_rn(s[2 * j], s[2 * j + 1]);
    return out;
}

/* 8 channels (16 bytes) at column c of up to MM_KERNEL_MAX_TOPK BF16 rows, summed in FP32 in
 * list order (recipe step 7's k order; normal's rank order), NULL rows skipped, rounded to BF16.
 * Every row's load is issued before the first add, so a token's rows are in flight together
 * (a load, its adds, then the next load cost one memory latency per row). Shared by the fused and
 * ll combines and normal's reduce-send. */
__device__ __forceinline__ uint4 mm_sum_rows8(const __nv_bfloat16 *const rows[MM_KERNEL_MAX_TOPK], int n, int c)
{
    uint4 v[MM_KERNEL_MAX_TOPK];
#pragma unroll
    for (int i = 0; i < MM_KERNEL_MAX_TOPK; i++)
        if (i < n && rows[i]) v[i] = *(const uint4 *)(rows[i] + c);
    float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < MM_KERNEL_MAX_TOPK; i++)
        if (i < n && rows[i]) mm_add_bf16x8(s, v[i]);
    return mm_round_bf16x8(s);
}

/* y[t] from the token's K expert rows at `in` ([K][H] BF16); called by every thread of the CTA. */
__device__ __forceinline__ void mm_combine_token(const __nv_bfloat16 *in, const int32_t *ids_row, int topk,
                                                 int hidden, __nv_bfloat16 *y_row)
{
    const __nv_bfloat16 *rows[MM_KERNEL_MAX_TOPK];
#pragma unroll
    for (int k = 0; k < MM_KERNEL_MAX_TOPK; k++) rows[k] = k < topk && ids_row[k] >= 0 ? in + (size_t)k * hidden : NULL;
    for (int c = threadIdx.x * 8; c < hidden; c += blockDim.x * 8) *(uint4 *)(y_row + c) = mm_sum_rows8(rows, topk, c);
}

/* Rows of one combine item that mm_combine_flat keeps in registers: every shipped model has top-k
 * <= 8 (a larger top-k takes mm_combine_token). */
#define MM_COMBINE_ROWS 8
/* Items per thread whose rows are in flight together: 2 x 8 x 16 bytes is 64 registers. */
#define MM_COMBINE_UNROLL 2

/* Which of item f's k slots hold a row (bit k: ids[t][k] >= 0); 0 past the last item. */
__device__ __forceinline__ unsigned mm_combine_valid(const int32_t *ids, int f, int total, int cols, int topk)
{
    unsigned valid = 0;
    if (f < total) {
        const int32_t *id = ids + (size_t)(f / cols) * topk;
#pragma unroll
        for (int k = 0; k < MM_COMBINE_ROWS; k++)
            if (k < topk) valid |= (id[k] >= 0 ? 1u : 0u) << k;
    }
    return valid;
}

/* y for tokens [0, tokens) as one flat space of (token, 16-byte column) items, item f = token *
 * hidden / 8 + column, each thread taking items first, first + stride, ... with the rows of
 * MM_COMBINE_UNROLL items in flight at once. One token per CTA (mm_combine_token) keeps a CTA's
 * 384 threads on 512 columns (Flash) in two rounds of one memory latency each, a latency per
 * round and token: at 8192 tokens per rank the fused combine read its rows at ~1.5 TB/s. Only
 * the rows of valid k are loaded: where routing leaves slots empty (an EP slice, whose tokens'
 * picks on other ranks are masked, keeps ~1.4 of 6 at Flash EP8) a load of every slot read ~4x
 * the bytes. The ids of the next round are loaded while this round's rows are in flight, so the
 * rows' loads do not wait for them. The sum per column is mm_sum_rows8's: FP32 in k order,
 * invalid k skipped, so the bits do not depend on the item split. */
__device__ __forceinline__ void mm_combine_flat(const __nv_bfloat16 *in, const int32_t *ids, int tokens, int topk,
                                                int hidden, __nv_bfloat16 *y, int first, int stride)
{
    const int cols = hidden / 8, total = tokens * cols; /* < 2^31 for any token count a rank takes */
    unsigned next[MM_COMBINE_UNROLL];
#pragma unroll
    for (int u = 0; u < MM_COMBINE_UNROLL; u++) next[u] = mm_combine_valid(ids, first + u * stride, total, cols, topk);
    for (int f0 = first; f0 < total; f0 += MM_COMBINE_UNROLL * stride) {
        uint4 v[MM_COMBINE_UNROLL][MM_COMBINE_ROWS];
        unsigned valid[MM_COMBINE_UNROLL];
#pragma unroll
        for (int u = 0; u < MM_COMBINE_UNROLL; u++) {
            const int f = f0 + u * stride, t = f / cols, c = f - t * cols;
            valid[u] = next[u];
            const __nv_bfloat16 *row = in + (size_t)t * topk * hidden + (size_t)c * 8;
#pragma unroll
            for (int k = 0; k < MM_COMBINE_ROWS; k++)
                if ((valid[u] >> k) & 1u) v[u][k] = *(const uint4 *)(row + (size_t)k * hidden);
        }
#pragma unroll
        for (int u = 0; u < MM_COMBINE_UNROLL; u++)
            next[u] = mm_combine_valid(ids, f0 + (MM_COMBINE_UNROLL + u) * stride, total, cols, topk);
#pragma unroll
        for (int u = 0; u < MM_COMBINE_UNROLL; u++) {
            const int f = f0 + u * stride, t = f / cols, c = f - t * cols;
            if (f >= total) continue;
            float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int k = 0; k < MM_COMBINE_ROWS; k++)
                if ((valid[u] >> k) & 1u) mm_add_bf16x8(s, v[u][k]);
            *(uint4 *)(y + (size_t)t * hidden + (size_t)c * 8) = mm_round_bf16x8(s);
        }
    }
}

#endif
