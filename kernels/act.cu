/* The expert FFN of the pipelines that run GEMM1 and GEMM2 as their own launches (ll, normal):
 * GEMM1, this file's activation stage, GEMM2 (mm_launch_expert_ffn). The activation stage: for every valid row of the grouped layout (found through the GEMM's row-tile
 * schedule), h = SwiGLU(gate, up) with the limit, times the row's top-k weight (mm_swiglu), then
 * FP8 quantization per 128 (recipe steps 4-5). The fused kernel does the same in GEMM1's epilogue
 * with the same functions, so all three agree bit for bit.
 * Roles: a CTA per (row tile, 128-block of I), a warp per ACT_ROWS valid rows of it at a time;
 * each lane 4 channels; amax by warp shuffles.
 * Buffers: gemm1_out [rows][2I] FP32 (gate, then up); meta [rows] mm_wire_meta (the weight);
 * act [rows][I] FP8, act_scales [rows][I/128]. No synchronization beyond the launch. */
#include <stdint.h>

#include "gemm_schedule.h"
#include "api.h"
#include "recipe.h"
#include "token_io.cuh"

/* One row's 128 channels of block b (4 per lane) from its gate and up values: SwiGLU x weight,
 * the block's scale from the warp's amax, FP8 stores. */
__device__ __forceinline__ void act_row_block(const mm_act_args &a, size_t row, int b, int lane, float4 gate, float4 up,
                                              float weight)
{
    const int blocks = a.inter / 128;
    float hv[4] = {mm_swiglu(gate.x, up.x, weight, a.has_limit, a.limit), mm_swiglu(gate.y, up.y, weight, a.has_limit, a.limit),
                   mm_swiglu(gate.z, up.z, weight, a.has_limit, a.limit), mm_swiglu(gate.w, up.w, weight, a.has_limit, a.limit)};
    const float amax = mm_warp_amax(fmaxf(fmaxf(mm_fabs(hv[0]), mm_fabs(hv[1])), fmaxf(mm_fabs(hv[2]), mm_fabs(hv[3]))));
    float s = mm_block_scale(amax, a.ue8m0);
    *(uint32_t *)(a.act + row * a.inter + b * 128 + lane * 4) = mm_quantize4(hv, s);
    if (lane == 0) a.act_scales[row * blocks + b] = s;
}

/* The stage streams FP32 (8 bytes in per FP8 byte out): it is bound by the bytes in flight, so a
 * warp loads ACT_ROWS rows before computing any, with ACT_CTAS_PER_SM CTAs per SM (a warp per row
 * and 2 CTAs per SM ran at 1.7 TB/s, 2.3x the HBM floor at Flash 4096 tokens). */
#ifndef ACT_ROWS /* a build may set either (experiments) */
#define ACT_ROWS 2
#endif
#ifndef ACT_CTAS_PER_SM
#define ACT_CTAS_PER_SM 4
#endif
__global__ void __launch_bounds__(256, ACT_CTAS_PER_SM) swiglu_quant_kernel(mm_act_args a)
{
    const int blocks = a.inter / 128, lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const int items = a.tile_start[a.experts] * blocks;
    /* a CTA per (row tile, 128-block): the tile is located once, and only its valid rows are
     * visited (at decode sizes most of a tile is padding) */
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
        const int tile_flat = item / blocks, b = item % blocks;
        mm_tile t = mm_tile_locate(a.tile_start, a.experts, 1, tile_flat);
        int rows = a.row_count[t.expert] - t.row_tile * MM_GEMM_BM;
        rows = rows < MM_GEMM_BM ? rows : MM_GEMM_BM;
        const size_t first = (size_t)a.row_offset[t.expert] + t.row_tile * MM_GEMM_BM;
        for (int r0 = warp; r0 < rows; r0 += ACT_ROWS * warps) {
            float4 gate[ACT_ROWS], up[ACT_ROWS];
            float weight[ACT_ROWS];
#pragma unroll
            for (int i = 0; i < ACT_ROWS; i++) {
                const int r = r0 + i * warps;
                if (r >= rows) continue;
                const float *g = a.gemm1_out + (first + r) * 2 * a.inter + b * 128 + lane * 4;
                gate[i] = *(const float4 *)g;
                up[i] = *(const float4 *)(g + a.inter);
                weight[i] = ((const mm_wire_meta *)a.meta)[first + r].weight;
            }
#pragma unroll
            for (int i = 0; i < ACT_ROWS; i++)
                if (r0 + i * warps < rows) act_row_block(a, first + r0 + i * warps, b, lane, gate[i], up[i], weight[i]);
        }
    }
}

extern "C" cudaError_t mm_launch_swiglu_quant(mm_act_args a, int ctas, cudaStream_t stream)
{
    swiglu_quant_kernel<<<ctas, 256, 0, stream>>>(a);
    return cudaGetLastError();
}

/* One of the FFN's grouped GEMMs, on the FP8 or the FP4 core as the experts are stored. */
static cudaError_t launch_expert_gemm(const mm_grouped_gemm_args &g, bool fp4, int sm_count, int max_rows,
                                      cudaStream_t stream)
{
    return fp4 ? mm_launch_grouped_gemm_fp4(g, sm_count, stream) : mm_launch_grouped_gemm(g, sm_count, max_rows, NULL, stream);
}

extern "C" cudaError_t mm_launch_expert_ffn(const mm_model_args *m, const mm_expert_args *w, const mm_ffn_buffers *f,
                                            int local_experts, int max_rows, int sm_count, const mm_comm *comm,
                                            cudaEvent_t *marks, cudaStream_t stream)
{
    cudaError_t e;
    /* FP4 experts: the GEMMs' weights are the exponents, their maps over the codes (gemm_fp4.cuh) */
    mm_grouped_gemm_args g1 = {f->packed_x, f->packed_scales, w->fp4 ? w->e1 : w->w1, w->w1_map, w->s1, f->row_offset,
                               f->row_count, f->tile_start, local_experts, 2 * m->inter, m->hidden, 1, f->gemm1_out,
                               f->x_map, comm->error, comm->abort_flag, comm->peers.rank};
    if ((e = launch_expert_gemm(g1, w->fp4, sm_count, max_rows, stream)) != cudaSuccess) return e;
    MM_MARK(0);
    mm_act_args act = {local_experts, m->inter, m->has_limit, m->ue8m0, m->limit, f->tile_start, f->row_offset,
                       f->row_count, f->packed_meta, f->gemm1_out, f->act, f->act_scales};
    if ((e = mm_launch_swiglu_quant(act, sm_count * ACT_CTAS_PER_SM, stream)) != cudaSuccess) return e;
    MM_MARK(1);
    mm_grouped_gemm_args g2 = {f->act, f->act_scales, w->fp4 ? w->e2 : w->w2, w->w2_map, w->s2, f->row_offset,
                               f->row_count, f->tile_start, local_experts, m->hidden, m->inter, 0, f->gemm2_out,
                               f->act_map, comm->error, comm->abort_flag, comm->peers.rank, f->out2_map};
    return launch_expert_gemm(g2, w->fp4, sm_count, max_rows, stream);
}
