/* GPU reference of the MoE layer: deliberately simple kernels, one output element per thread or
 * per warp, double-precision sums, no shared-memory tricks beyond an FP8 decode table. It exists
 * to be obviously right at every size the sweep uses; the host reference checks it on small cases.
 *
 * Roles, in order on one stream (this rank's own tokens; every expert's weights resident, the
 * remote ones regenerated from the seed):
 *   quant_x   thread per (token, 128-block): recipe step 2 -> qx, sx
 *   gemm      warp per (pair, output row): sum over 128-blocks of sa * sw * (exact double sum of
 *             FP8 products); pair = (token, k), masked slots write nothing and are skipped later.
 *             FP4 experts: each 128-block's weights expanded to FP8 relative to the row's
 *             reference exponent R (fp4.h), promoted with sa * 2^(R - 127)
 *   act       thread per (pair, 128-block of I): step 4 in double, rounded to FP32, step 5
 *   combine   thread per (token, channel): step 7 in k order, kept in double
 *   compare   block-reduced sums for calc_diff, max |diff|, max |ref|, non-finite count
 * No synchronization beyond stream order; no communication. */
#include <stdint.h>

#include "api.h"
#include "fp4.h"
#include "recipe.h"

__device__ __forceinline__ void load_decode_table(double *table)
{
    for (int i = threadIdx.x; i < 256; i += blockDim.x) table[i] = (double)mm_fp8_decode((uint8_t)i);
    __syncthreads();
}

__global__ void ref_quant_kernel(const uint16_t *x, int tokens, int hidden, int ue8m0, uint8_t *q,
                                 float *scale)
{
    int blocks = hidden / 128;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)tokens * blocks) return;
    const uint16_t *row = x + i * 128; /* (token, block) is contiguous: t * H + b * 128 */
    float amax = 0.0f;
    for (int c = 0; c < 128; c++) amax = fmaxf(amax, mm_fabs(mm_bf16_decode(row[c])));
    float s = mm_block_scale(amax, ue8m0);
    scale[i] = s;
    for (int c = 0; c < 128; c++) q[i * 128 + c] = mm_quantize(mm_bf16_decode(row[c]), s);
}

/* The GEMM kernels' item: warp w of the grid takes output n of pair p (p * n_out + n = w); false
 * past the last item or for a masked pair (expert < 0). Activations of pair p are row *a_row of
 * qa/sa: for GEMM1 the token (p / topk), for GEMM2 the pair itself. */
__device__ __forceinline__ bool ref_gemm_item(const int32_t *ids, int pairs, int topk, int a_per_token_topk,
                                              int n_out, int *p, int *n, int *e, long long *a_row)
{
    const int warps = blockDim.x / 32;
    const long long item = (long long)blockIdx.x * warps + threadIdx.x / 32;
    if (item >= (long long)pairs * n_out) return false;
    *p = (int)(item / n_out);
    *n = (int)(item % n_out);
    *e = ids[*p];
    *a_row = a_per_token_topk ? *p / topk : *p;
    return *e >= 0;
}

/* The warp's 32 lane parts of a block sum, added in double (every lane gets the total). */
__device__ __forceinline__ double ref_warp_sum(double part)
{
    for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
    return part;
}

/* out[pair][n] for n < n_out (ref_gemm_item's pairs): per 128-block, sa * sw * the exact double sum
 * of its FP8 products. */
__global__ void ref_gemm_kernel(const uint8_t *qa, const float *sa, int a_per_token_topk,
                                const int32_t *ids, int pairs, int topk, const uint8_t *w,
                                const float *sw, int n_out, int k, double *out)
{
    __shared__ double table[256];
    load_decode_table(table);
    int p, n, e, lane = threadIdx.x % 32;
    long long a_row;
    if (!ref_gemm_item(ids, pairs, topk, a_per_token_topk, n_out, &p, &n, &e, &a_row)) return;
    int kb_count = k / 128;
    const uint8_t *arow = qa + a_row * k;
    const uint8_t *wrow = w + ((long long)e * n_out + n) * k;
    const float *wscale = sw + ((long long)e * (n_out / 128) + n / 128) * kb_count;
    double acc = 0.0;
    for (int kb = 0; kb < kb_count; kb++) {
        double part = 0.0;
        for (int j = 0; j < 4; j++) {
            int c = kb * 128 + lane * 4 + j;
            part += table[arow[c]] * table[wrow[c]];
        }
        acc += (double)sa[a_row * kb_count + kb] * (double)wscale[kb] * ref_warp_sum(part);
    }
    if (lane == 0) out[(long long)p * n_out + n] = acc;
}

/* ref_gemm_kernel with FP4 weights: codes [E][n_out][k / 2], exponents [E][n_out][k / 32]. Lane l
 * takes weights 4l .. 4l + 3 of each block, all in group l / 8 (fp4.h mm_fp4_ref_lane_part); the
 * block's reference exponent comes from its 128 rows' exponents (n_out a multiple of 128). */
__global__ void ref_gemm_fp4_kernel(const uint8_t *qa, const float *sa, int a_per_token_topk, const int32_t *ids,
                                    int pairs, int topk, const uint8_t *codes, const uint8_t *exps, int n_out, int k,
                                    double *out)
{
    __shared__ double table[256];
    load_decode_table(table);
    int p, n, e, lane = threadIdx.x % 32;
    long long a_row;
    if (!ref_gemm_item(ids, pairs, topk, a_per_token_topk, n_out, &p, &n, &e, &a_row)) return;
    int kb_count = k / 128;
    const uint8_t *arow = qa + a_row * k;
    const long long wrow = (long long)e * n_out + n;
    const uint8_t *crow = codes + wrow * (k / 2), *erow = exps + wrow * (k / MM_FP4_GROUP);
    /* the exponents of row n's weight block: lane l takes its rows 4l .. 4l + 3 for the reference */
    const uint8_t *eblock = exps + ((long long)e * n_out + n / MM_FP4_BLOCK_ROWS * MM_FP4_BLOCK_ROWS) * (k / MM_FP4_GROUP);
    double acc = 0.0;
    for (int kb = 0; kb < kb_count; kb++) {
        int top = 0;
        for (int r = 4 * lane; r < 4 * lane + 4; r++)
            top = max(top, mm_fp4_row_top(eblock + (long long)r * (k / MM_FP4_GROUP) + kb * MM_FP4_GROUPS));
        top = __reduce_max_sync(0xffffffffu, (unsigned)top);
        const int ref = top - MM_FP4_D_MAX;
        const double part = ref_warp_sum(mm_fp4_ref_lane_part(table, arow, crow, erow, kb, ref, lane));
        acc += (double)sa[a_row * kb_count + kb] * ldexp(1.0, ref - 127) * part;
    }
    if (lane == 0) out[(long long)p * n_out + n] = acc;
}

__global__ void ref_act_kernel(const double *g1, const int32_t *ids, const float *topk_w,
                               int pairs, int inter, int has_limit, double limit, int ue8m0,
                               uint8_t *q, float *scale)
{
    int blocks = inter / 128;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)pairs * blocks) return;
    int p = (int)(i / blocks), b = (int)(i % blocks);
    if (ids[p] < 0) return;
    const double *gate = g1 + (long long)p * 2 * inter, *up = gate + inter;
    float h[128];
    float amax = 0.0f;
    for (int c = 0; c < 128; c++) {
        double g = gate[b * 128 + c], u = up[b * 128 + c];
        if (has_limit) {
            g = g < limit ? g : limit;
            u = u < -limit ? -limit : (u > limit ? limit : u);
        }
        h[c] = (float)(g / (1.0 + exp(-g)) * u * (double)topk_w[p]);
        amax = fmaxf(amax, mm_fabs(h[c]));
    }
    float s = mm_block_scale(amax, ue8m0);
    scale[i] = s;
    for (int c = 0; c < 128; c++) q[i * 128 + c] = mm_quantize(h[c], s);
}

__global__ void ref_combine_kernel(const double *yk, const int32_t *ids, int tokens, int topk,
                                   int hidden, double *y)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)tokens * hidden) return;
    long long t = i / hidden, c = i % hidden;
    double sum = 0.0;
    for (int k = 0; k < topk; k++)
        if (ids[t * topk + k] >= 0) sum += yk[(t * topk + k) * hidden + c];
    y[i] = sum;
}

static unsigned grid_for(long long items, int per_block)
{
    return (unsigned)((items + per_block - 1) / per_block);
}

extern "C" size_t mm_reference_workspace_bytes(int tokens, int hidden, int inter, int topk)
{
    size_t t = (size_t)tokens, pairs = t * topk;
    return t * hidden + t * (hidden / 128) * 4 + pairs * 2 * inter * 8 + pairs * inter +
           pairs * (inter / 128) * 4 + pairs * hidden * 8 + 6 * 256;
}

extern "C" cudaError_t mm_launch_reference(mm_reference_args a, cudaStream_t stream)
{
    if (a.tokens == 0) return cudaSuccess;
    size_t t = (size_t)a.tokens, pairs = t * a.topk;
    char *ws = (char *)a.workspace;
    uint8_t *qx = (uint8_t *)ws;
    ws += (t * a.hidden + 255) / 256 * 256;
    float *sx = (float *)ws;
    ws += (t * (a.hidden / 128) * 4 + 255) / 256 * 256;
    double *g1 = (double *)ws;
    ws += pairs * 2 * a.inter * 8;
    uint8_t *qh = (uint8_t *)ws;
    ws += (pairs * a.inter + 255) / 256 * 256;
    float *sh = (float *)ws;
    ws += (pairs * (a.inter / 128) * 4 + 255) / 256 * 256;
    double *yk = (double *)ws;

    ref_quant_kernel<<<grid_for((long long)t * (a.hidden / 128), 128), 128, 0, stream>>>(
        a.x, a.tokens, a.hidden, a.ue8m0, qx, sx);
    if (a.c1)
        ref_gemm_fp4_kernel<<<grid_for((long long)pairs * 2 * a.inter, 8), 256, 0, stream>>>(
            qx, sx, 1, a.ids, (int)pairs, a.topk, a.c1, a.e1, 2 * a.inter, a.hidden, g1);
    else
        ref_gemm_kernel<<<grid_for((long long)pairs * 2 * a.inter, 8), 256, 0, stream>>>(
            qx, sx, 1, a.ids, (int)pairs, a.topk, a.w1, a.s1, 2 * a.inter, a.hidden, g1);
    ref_act_kernel<<<grid_for((long long)pairs * (a.inter / 128), 128), 128, 0, stream>>>(
        g1, a.ids, a.topk_w, (int)pairs, a.inter, a.has_limit, a.limit, a.ue8m0, qh, sh);
    if (a.c1)
        ref_gemm_fp4_kernel<<<grid_for((long long)pairs * a.hidden, 8), 256, 0, stream>>>(
            qh, sh, 0, a.ids, (int)pairs, a.topk, a.c2, a.e2, a.hidden, a.inter, yk);
    else
        ref_gemm_kernel<<<grid_for((long long)pairs * a.hidden, 8), 256, 0, stream>>>(
            qh, sh, 0, a.ids, (int)pairs, a.topk, a.w2, a.s2, a.hidden, a.inter, yk);
    ref_combine_kernel<<<grid_for((long long)t * a.hidden, 256), 256, 0, stream>>>(
        yk, a.ids, a.tokens, a.topk, a.hidden, a.y);
    return cudaGetLastError();
}

extern "C" cudaError_t mm_launch_quantize_rows(const uint16_t *x, int rows, int width, int ue8m0,
                                               uint8_t *q, float *scale, cudaStream_t stream)
{
    if (rows <= 0) return cudaSuccess;
    ref_quant_kernel<<<grid_for((long long)rows * (width / 128), 128), 128, 0, stream>>>(
        x, rows, width, ue8m0, q, scale);
    return cudaGetLastError();
}

extern "C" cudaError_t mm_launch_ref_gemm(const uint8_t *qa, const float *sa,
                                          const int32_t *expert_of_row, int rows, const uint8_t *w,
                                          const float *sw, int n, int k, double *out,
                                          cudaStream_t stream)
{
    if (rows <= 0) return cudaSuccess;
    ref_gemm_kernel<<<grid_for((long long)rows * n, 8), 256, 0, stream>>>(
        qa, sa, 0, expert_of_row, rows, 1, w, sw, n, k, out);
    return cudaGetLastError();
}

extern "C" cudaError_t mm_launch_ref_gemm_fp4(const uint8_t *qa, const float *sa, const int32_t *expert_of_row,
                                              int rows, const uint8_t *codes, const uint8_t *exps, int n, int k,
                                              double *out, cudaStream_t stream)
{
    if (rows <= 0) return cudaSuccess;
    ref_gemm_fp4_kernel<<<grid_for((long long)rows * n, 8), 256, 0, stream>>>(qa, sa, 0, expert_of_row, rows, 1, codes,
                                                                              exps, n, k, out);
    return cudaGetLastError();
}

/* ---- compare --------------------------------------------------------------------------- */

__device__ __forceinline__ void atomic_max_nonneg(double *addr, double v)
{
    /* non-negative doubles order like their bit patterns */
    atomicMax((unsigned long long *)addr, (unsigned long long)__double_as_longlong(v));
}

__device__ __forceinline__ double out_value(const uint16_t *p, long long i)
{
    return (double)mm_bf16_decode(p[i]);
}

__device__ __forceinline__ double out_value(const float *p, long long i)
{
    return (double)p[i];
}

template <typename T>
__global__ void compare_kernel(const T *out, const double *ref, long long n, mm_device_diff *acc)
{
    __shared__ double s_ab[256], s_aabb[256], s_max[256], s_ref[256];
    __shared__ unsigned long long s_bad[256];
    double ab = 0, aabb = 0, mx = 0, rmax = 0;
    unsigned long long bad = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        double a = out_value(out, i), b = ref[i];
        if (!isfinite(a)) { bad++; continue; }
        ab += a * b;
        aabb += a * a + b * b;
        mx = fmax(mx, fabs(a - b));
        rmax = fmax(rmax, fabs(b));
    }
    int tid = threadIdx.x;
    s_ab[tid] = ab; s_aabb[tid] = aabb; s_max[tid] = mx; s_ref[tid] = rmax; s_bad[tid] = bad;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            s_ab[tid] += s_ab[tid + s];
            s_aabb[tid] += s_aabb[tid + s];
            s_max[tid] = fmax(s_max[tid], s_max[tid + s]);
            s_ref[tid] = fmax(s_ref[tid], s_ref[tid + s]);
            s_bad[tid] += s_bad[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) {
        atomicAdd(&acc->sum_ab, s_ab[0]);
        atomicAdd(&acc->sum_aa_bb, s_aabb[0]);
        atomic_max_nonneg(&acc->max_abs, s_max[0]);
        atomic_max_nonneg(&acc->ref_max_abs, s_ref[0]);
        atomicAdd(&acc->nonfinite, s_bad[0]);
    }
}

template <typename T>
static cudaError_t launch_compare(const T *out, const double *ref, long long n, mm_device_diff *acc,
                                  cudaStream_t stream)
{
    cudaError_t e = cudaMemsetAsync(acc, 0, sizeof *acc, stream);
    if (e != cudaSuccess || n == 0) return e;
    compare_kernel<<<264, 256, 0, stream>>>(out, ref, n, acc);
    return cudaGetLastError();
}

extern "C" cudaError_t mm_launch_compare(const uint16_t *out, const double *ref, long long n,
                                         mm_device_diff *acc, cudaStream_t stream)
{
    return launch_compare(out, ref, n, acc, stream);
}

extern "C" cudaError_t mm_launch_compare_f32(const float *out, const double *ref, long long n,
                                             mm_device_diff *acc, cudaStream_t stream)
{
    return launch_compare(out, ref, n, acc, stream);
}

/* A BF16 output widened to double, so another output can be compared against it with
 * mm_launch_compare (the `gemm` lab compares ours against cuBLASLt's this way). */
__global__ void bf16_to_f64_kernel(const uint16_t *in, long long n, double *out)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = (double)mm_bf16_decode(in[i]);
}

extern "C" cudaError_t mm_launch_bf16_to_f64(const uint16_t *in, long long n, double *out, cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    bf16_to_f64_kernel<<<264, 256, 0, stream>>>(in, n, out);
    return cudaGetLastError();
}
