/* Wide-tile probe (a lab experiment, not part of the tool): how fast can a CTA's math warpgroups
 * run the GEMM core's K-block step (four k32 wgmmas into a fresh block sum, then the recipe's
 * promotion acc += s * sum) when nothing is loaded? The stages are filled once with random e4m3
 * bytes and the producer only signals them, so the figure is the MMA + promotion ceiling of a tile
 * shape, without the L2 -> SM traffic that a wider tile would cut (a 128 x 128 tile asks ~160 B
 * a clock of shared memory at the tensor cores' peak).
 *
 *   core  2 math warpgroups, 128 x 128, the core's own mm_tile_consume (one block in flight:
 *         216 registers a math thread)
 *   2wg   2 math warpgroups, 128 x 128, each block retired before the next (DeepGEMM's order)
 *   3wg   3 math warpgroups, 192 x 128, each block retired before the next (152 registers a
 *         math thread, 40 for the producer: what fits 512 threads)
 *
 * Build and run on a GPU machine:
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -o build/wide_tile_probe lab/probes/wide_tile_probe.cu
 *   build/wide_tile_probe [K blocks per CTA, default 4096] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gemm_tile.cuh"
#include "probe.cuh"

#define WIDE_STAGE_BYTES 41984 /* 192 x 128 A + 128 x 128 B + 1 KB of scales, a multiple of 1 KB */
#define WIDE_STAGES 4

__device__ void fill_stages(uint8_t *stages, int bytes, int stage_bytes, int scale_at)
{
    for (int i = threadIdx.x; i < bytes; i += blockDim.x) {
        const int in_stage = i % stage_bytes;
        if (in_stage >= scale_at && in_stage < scale_at + 1024) {
            if ((in_stage - scale_at) % 4 == 0) *(float *)(stages + i) = 1.0f / 64.0f;
        } else {
            stages[i] = probe_random_e4m3((uint32_t)(blockIdx.x * 977 + i));
        }
    }
}

/* four k32 wgmmas of one K block into a fresh sum, A and B from the same stage */
template <int STAGE_BYTES>
__device__ __forceinline__ void issue_block(uint64_t da, uint64_t db, int stage, float blk[MM_TILE_ACC])
{
    const uint64_t step = (uint64_t)stage * (STAGE_BYTES >> 4);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    mm_wgmma_64x128x32_fresh(blk, da + step, db + step);
#pragma unroll
    for (int ks = 1; ks < 4; ks++) mm_wgmma_64x128x32_acc(blk, da + step + 2 * ks, db + step + 2 * ks);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* the producer's part: signal each stage once it is free (128 arrivals + 1, as the core's `full`) */
template <int STAGES>
__device__ void signal_stages(mm_tile_pipe *p, int kblocks)
{
    mm_ring ring = MM_RING_START(STAGES);
    for (int kb = 0; kb < kblocks; kb++) {
        mm_mbar_wait(&p->empty[ring.stage], ring.phase ^ 1u, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_EMPTY);
        mm_mbar_arrive(&p->full[ring.stage]);
        if (threadIdx.x == 0) mm_mbar_arrive(&p->full[ring.stage]);
        mm_ring_advance(ring);
    }
}

/* math warpgroup g of a tile with `groups` of them: each block retired before the next is issued */
template <int STAGE_BYTES, int STAGES, int A_ROWS>
__device__ void retire_each(uint8_t *stages, mm_tile_pipe *p, int kblocks, float acc[MM_TILE_ACC])
{
    const int g = mm_warpgroup() - 1, t = mm_math_thread() % 128;
    const int r_lo = 64 * g + mm_frag_row(t / 32, t % 32, 0), r_hi = 64 * g + mm_frag_row(t / 32, t % 32, 2);
    const uint64_t da = mm_wgmma_desc(stages + g * 64 * 128), db = mm_wgmma_desc(stages + A_ROWS * 128);
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = 0.0f;
    mm_ring ring = MM_RING_START(STAGES);
    for (int kb = 0; kb < kblocks; kb++) {
        const int stage = ring.stage;
        mm_mbar_wait(&p->full[stage], ring.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
        const float *sc = (const float *)(stages + stage * STAGE_BYTES + A_ROWS * 128 + 128 * 128);
        const float sw = sc[A_ROWS], s_lo = sc[r_lo] * sw, s_hi = sc[r_hi] * sw;
        float blk[MM_TILE_ACC];
        issue_block<STAGE_BYTES>(da, db, stage, blk);
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        __syncwarp();
        if (threadIdx.x % 32 == 0) mm_mbar_arrive(&p->empty[stage]);
        mm_tile_promote(s_lo, s_hi, blk, acc);
        mm_ring_advance(ring);
    }
}

__device__ void store_sum(float *out, const float acc[MM_TILE_ACC])
{
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i++) s += acc[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

/* MODE 0: core (384 threads), 1: 2wg (384), 2: 3wg (512) */
template <int MODE>
__global__ void __launch_bounds__(MODE == 2 ? 512 : 384, 1) wide_probe_kernel(int kblocks, float *out)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    __shared__ __align__(8) mm_tile_pipe pipe;
    uint8_t *stages = mm_tile_stages(smem);
    constexpr int stage_bytes = MODE == 2 ? WIDE_STAGE_BYTES : MM_TILE_STAGE_BYTES;
    constexpr int nstages = MODE == 2 ? WIDE_STAGES : MM_TILE_STAGES;
    constexpr int a_rows = MODE == 2 ? 192 : 128, math_warps = MODE == 2 ? 12 : 8;
    fill_stages(stages, nstages * stage_bytes, stage_bytes, a_rows * 128 + 128 * 128);
    if (threadIdx.x == 0) {
        mm_tile_pipe_init(&pipe, 1);
        for (int s = 0; s < nstages; s++) mm_mbar_init(&pipe.empty[s], math_warps); /* the 3wg form's 12 warps */
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    /* the random bytes (generic proxy) before the wgmmas read them (async proxy) */
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (mm_warpgroup() == 0) {
        if (MODE == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        else mm_regs_producer();
        signal_stages<nstages>(&pipe, kblocks);
        return;
    }
    float acc[MM_TILE_ACC];
    if (MODE == 2) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 152;");
        retire_each<WIDE_STAGE_BYTES, WIDE_STAGES, 192>(stages, &pipe, kblocks, acc);
    } else if (MODE == 1) {
        mm_regs_math();
        retire_each<MM_TILE_STAGE_BYTES, MM_TILE_STAGES, 128>(stages, &pipe, kblocks, acc);
    } else {
        mm_regs_math();
        mm_ring ring = MM_RING_START(MM_TILE_STAGES);
        mm_tile_consume(stages, &pipe, ring, 128, kblocks * MM_GEMM_BK, false, false, acc);
    }
    store_sum(out, acc);
}

template <int MODE>
static int run(const char *name, int ctas, int kblocks, float *out)
{
    const int threads = MODE == 2 ? 512 : 384, rows = MODE == 2 ? 192 : 128;
    const int smem = (MODE == 2 ? WIDE_STAGES * WIDE_STAGE_BYTES : MM_TILE_STAGES * MM_TILE_STAGE_BYTES) + 1024;
    CK(cudaFuncSetAttribute(wide_probe_kernel<MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int rep = 0; rep < 4; rep++) {
        CK(cudaEventRecord(a));
        wide_probe_kernel<MODE><<<ctas, threads, smem>>>(kblocks, out);
        CK(cudaGetLastError());
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0.0f;
        CK(cudaEventElapsedTime(&ms, a, b));
        const double flop = 2.0 * ctas * (double)kblocks * rows * 128.0 * 128.0;
        if (rep > 0) /* the first launch pays the set-up */
            printf("%-5s rep %d: %8.3f ms  %7.1f TFLOP/s (MMA + promotion only, no loads)\n", name, rep, ms,
                   flop / (ms * 1e-3) / 1e12);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const int kblocks = argc > 1 ? atoi(argv[1]) : 4096;
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    float *out;
    CK(cudaMalloc(&out, (size_t)sms * 512 * sizeof(float)));
    if (kblocks < 1 || run<0>("core", sms, kblocks, out) || run<1>("2wg", sms, kblocks, out) ||
        run<2>("3wg", sms, kblocks, out) || run<0>("core", sms, kblocks, out))
        return 1;
    printf("wide_tile_probe: %d CTAs, %d K blocks each\n", sms, kblocks);
    return 0;
}
