/* GPU data generators: the same pure functions as the host's (datagen.h), evaluated in parallel.
 *
 * gen_x: one thread per (token, 8 channels), 16-byte stores.
 * gen_routing: one thread per token (top-k selection is sequential per token).
 * gen_weights: one CTA per 128x128 block: every thread keeps its 64 values in registers, the CTA
 *   reduces the block's amax in shared memory, then quantizes with the block's scale.
 * gen_fp4: grid-stride, one thread per code byte (two weights) or per exponent. */
#include "datagen.h"
#include "fp4.h"
#include "api.h"

__global__ void gen_x_kernel(mm_x_params seed, uint64_t first_token, int tokens, int hidden,
                             uint16_t *x)
{
    uint64_t groups = (uint64_t)tokens * (uint64_t)(hidden / 8);
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < groups;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t t = i / (uint64_t)(hidden / 8);
        uint32_t c0 = (uint32_t)(i % (uint64_t)(hidden / 8)) * 8u;
        uint16_t v[8];
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = mm_gen_x(seed, first_token + t, c0 + j);
        uint4 packed;
        packed.x = v[0] | ((uint32_t)v[1] << 16);
        packed.y = v[2] | ((uint32_t)v[3] << 16);
        packed.z = v[4] | ((uint32_t)v[5] << 16);
        packed.w = v[6] | ((uint32_t)v[7] << 16);
        *(uint4 *)(x + t * (uint64_t)hidden + c0) = packed;
    }
}

extern "C" cudaError_t mm_launch_gen_x(mm_x_params seed, uint64_t first_token, int tokens, int hidden,
                                       uint16_t *x, cudaStream_t stream)
{
    if (tokens <= 0) return cudaSuccess;
    uint64_t groups = (uint64_t)tokens * (uint64_t)(hidden / 8);
    unsigned blocks = (unsigned)((groups + 255) / 256);
    if (blocks > 65535u * 8u) blocks = 65535u * 8u;
    gen_x_kernel<<<blocks, 256, 0, stream>>>(seed, first_token, tokens, hidden, x);
    return cudaGetLastError();
}

__global__ void gen_routing_kernel(mm_route_params p, uint64_t first_token, int tokens,
                                   int32_t *ids, float *weights)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= tokens) return;
    int id[16];
    float w[16];
    mm_route_token(&p, first_token + (uint64_t)t, id, w);
    for (int k = 0; k < p.topk; k++) {
        ids[(uint64_t)t * p.topk + k] = id[k];
        weights[(uint64_t)t * p.topk + k] = w[k];
    }
}

extern "C" cudaError_t mm_launch_gen_routing(mm_route_params params, uint64_t first_token,
                                             int tokens, int32_t *ids, float *weights,
                                             cudaStream_t stream)
{
    if (tokens <= 0) return cudaSuccess;
    gen_routing_kernel<<<(tokens + 127) / 128, 128, 0, stream>>>(params, first_token, tokens, ids,
                                                                 weights);
    return cudaGetLastError();
}

/* One 128x128 block of one matrix of one expert. */
__global__ void __launch_bounds__(256) gen_weights_kernel(uint64_t seed, int matrix,
                                                          int first_expert, int rows, int cols,
                                                          int ue8m0, uint8_t *w, float *scale)
{
    int blocks_c = cols / 128, blocks_r = rows / 128;
    int per_expert = blocks_r * blocks_c;
    int e = blockIdx.x / per_expert;
    int br = (blockIdx.x % per_expert) / blocks_c, bc = blockIdx.x % blocks_c;
    uint64_t expert = (uint64_t)(first_expert + e);
    /* thread -> 64 values: column (threadIdx.x % 32) * 4 .. +3, rows threadIdx.x / 32 + 8 j */
    int c4 = (threadIdx.x % 32) * 4, r0 = threadIdx.x / 32;
    float v[64];
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 16; j++) {
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float x = mm_gen_w(seed, matrix, expert, (uint64_t)(br * 128 + r0 + 8 * j),
                               (uint64_t)(bc * 128 + c4 + q));
            v[j * 4 + q] = x;
            amax = fmaxf(amax, mm_fabs(x));
        }
    }
    __shared__ float warp_max[8];
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
    __syncthreads();
    float block_amax = warp_max[0];
    for (int i = 1; i < 8; i++) block_amax = fmaxf(block_amax, warp_max[i]);
    float s = mm_block_scale(block_amax, ue8m0);
    uint8_t *mat = w + (uint64_t)e * (uint64_t)rows * cols;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        uint32_t packed = 0;
#pragma unroll
        for (int q = 0; q < 4; q++) packed |= (uint32_t)mm_quantize(v[j * 4 + q], s) << (8 * q);
        uint64_t row = (uint64_t)(br * 128 + r0 + 8 * j);
        *(uint32_t *)(mat + row * cols + bc * 128 + c4) = packed;
    }
    if (threadIdx.x == 0) scale[(uint64_t)e * per_expert + br * blocks_c + bc] = s;
}

extern "C" cudaError_t mm_launch_gen_weights(uint64_t seed, int first_expert, int count, int hidden,
                                             int inter, int ue8m0, uint8_t *w1, float *w1_scale,
                                             uint8_t *w2, float *w2_scale, cudaStream_t stream)
{
    if (count <= 0) return cudaSuccess;
    /* W1 [2I][H] (gate rows then up rows), W2 [H][I]; one launch per matrix. */
    unsigned b1 = (unsigned)count * (unsigned)((2 * inter / 128) * (hidden / 128));
    gen_weights_kernel<<<b1, 256, 0, stream>>>(seed, 0, first_expert, 2 * inter, hidden, ue8m0, w1,
                                               w1_scale);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    unsigned b2 = (unsigned)count * (unsigned)((hidden / 128) * (inter / 128));
    gen_weights_kernel<<<b2, 256, 0, stream>>>(seed, 1, first_expert, hidden, inter, ue8m0, w2,
                                               w2_scale);
    return cudaGetLastError();
}

/* One matrix of `count` experts: codes [count][rows][cols / 2] and exponents [count][rows][cols / 32]
 * (fp4.h mm_gen_fp4_word: word i of the two, back to back; each part is a whole number of words,
 * cols being a multiple of 128, and cudaMalloc'ed). */
__global__ void gen_fp4_kernel(uint64_t seed, int pattern, int matrix, int first_expert, int count, int rows, int cols,
                               uint32_t *codes, uint32_t *exps)
{
    const uint64_t words = (uint64_t)count * rows * (cols / 8), groups = (uint64_t)count * rows * (cols / MM_FP4_GROUP) / 4;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words + groups;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t v = mm_gen_fp4_word(seed, pattern, matrix, first_expert, count, rows, cols, i);
        if (i < words) codes[i] = v;
        else exps[i - words] = v;
    }
}

/* one thread a weight block (128 rows, 128-wide K block) */
__global__ void fp4_past_kernel(const uint8_t *exps, long long rows, int k, unsigned long long *past)
{
    const int kblocks = k / 128, row_groups = k / MM_FP4_GROUP;
    const long long blocks = rows / MM_FP4_BLOCK_ROWS * kblocks;
    unsigned long long mine = 0;
    for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; b < blocks; b += (long long)gridDim.x * blockDim.x)
        mine += (unsigned long long)mm_fp4_past_groups(exps + b / kblocks * MM_FP4_BLOCK_ROWS * row_groups, row_groups,
                                                       (int)(b % kblocks));
    if (mine) atomicAdd(past, mine);
}

/* one thread a weight block, its word at [row block][kb] */
__global__ void fp4_words_kernel(const uint8_t *exps, long long rows, int k, uint32_t *words)
{
    const int kblocks = k / 128, row_groups = k / MM_FP4_GROUP;
    const long long blocks = rows / MM_FP4_BLOCK_ROWS * kblocks;
    for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; b < blocks; b += (long long)gridDim.x * blockDim.x)
        words[b] = mm_fp4_block_word(exps + b / kblocks * MM_FP4_BLOCK_ROWS * row_groups, row_groups, (int)(b % kblocks));
}

extern "C" cudaError_t mm_launch_fp4_block_words(const uint8_t *exps, long long rows, int k, uint32_t *words,
                                                 cudaStream_t stream)
{
    if (rows <= 0) return cudaSuccess;
    if (rows % MM_FP4_BLOCK_ROWS || k % 128) return cudaErrorInvalidValue;
    fp4_words_kernel<<<264, 256, 0, stream>>>(exps, rows, k, words);
    return cudaGetLastError();
}

extern "C" cudaError_t mm_launch_gen_fp4_weights(uint64_t seed, int pattern, int first_expert, int count, int hidden,
                                                 int inter, uint8_t *c1, uint8_t *e1, uint32_t *words1, uint8_t *c2,
                                                 uint8_t *e2, uint32_t *words2, cudaStream_t stream)
{
    if (count <= 0) return cudaSuccess;
    gen_fp4_kernel<<<1024, 256, 0, stream>>>(seed, pattern, 0, first_expert, count, 2 * inter, hidden, (uint32_t *)c1,
                                              (uint32_t *)e1);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    gen_fp4_kernel<<<1024, 256, 0, stream>>>(seed, pattern, 1, first_expert, count, hidden, inter, (uint32_t *)c2,
                                              (uint32_t *)e2);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    e = mm_launch_fp4_block_words(e1, (long long)count * 2 * inter, hidden, words1, stream);
    if (e != cudaSuccess) return e;
    return mm_launch_fp4_block_words(e2, (long long)count * hidden, inter, words2, stream);
}

extern "C" cudaError_t mm_launch_fp4_past_groups(const uint8_t *exps, long long rows, int k, unsigned long long *past,
                                                 cudaStream_t stream)
{
    if (rows <= 0) return cudaSuccess;
    if (rows % MM_FP4_BLOCK_ROWS) return cudaErrorInvalidValue;
    fp4_past_kernel<<<264, 256, 0, stream>>>(exps, rows, k, past);
    return cudaGetLastError();
}
