/* FP4 decode warps probe (a lab experiment, not part of the tool): before the swapped form gets
 * four math warpgroups, does a second pair of them lift the FP4 weight stream at decode?
 *
 * Why it could: at 8-64 token rows the swapped form (gemm_fp4.cuh) is bound by the math warps'
 * issue and their K block's chain, not by the copies: Nsight Compute of `gemm --weights fp4` at
 * 32 rows on an H100 has the issue slots 50% busy and DRAM 60% busy, ~173 instructions a math
 * warp and block (the expansion most of them), two math warps a scheduler. Four a scheduler
 * would hide more of each warp's chain. Processing two K blocks at once in one warp instead
 * (more independent words a thread) was slower: its MMAs' wait was no longer hidden
 * (docs/performance.md, dropped ideas).
 *
 * The probe streams FP4 weight blocks (codes and group exponents, 8.5 KB a 128 x 128 block) from
 * HBM through stage rings and runs the swapped form's math on them with the kernels' own
 * functions (mm_fp4_swap_expand, mm_wgmma_rs, mm_fp4_swap_factors): per K block each math
 * thread expands its 64 weights into wgmma's A registers, the MMAs take the stage's N token rows
 * as B, the block sum is promoted into the accumulators in K order; block kb + 1 is expanded
 * while block kb's MMAs run, as in mm_fp4_swap_consume.
 *   w2  2 math warpgroups and one ring (today's form: warpgroup g the weight rows 64 g ..)
 *   w4  4 math warpgroups as two pairs, each pair its own ring and its own blocks (the form
 *       performance.md's Next proposes); 640 threads, registers capped at 102 a thread
 *   w4s 4 math warpgroups on one ring, each stage one block for each pair (fused's GEMM1 as a
 *       swapped dual item: gate on one pair, up on the other, the rows gathered once); a stage
 *       freed when all 16 math warps are done with it
 * Each stage holds two K blocks, copied by one 17 KB bulk copy (stream_probe: one 8 KB copy a
 * stage streams at only ~2.3 TB/s on an H100), and the stages of both variants hold the same
 * bytes in all (6 stages: one ring of 6, or two of 3). The producer is one thread a ring (the
 * kernels' producers also gather the rows and the exponents: ~18% of the issued instructions at
 * decode, left out here in both variants). Timing only: random codes, nothing is checked.
 * Figures: the FP4 stream in TB/s (codes and exponents) and the SM clock the CTAs ran at.
 *
 * Not yet run on a GPU.
 *
 * Build and run on a GPU machine:
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -o build/fp4_warps_probe lab/probes/fp4_warps_probe.cu
 *   build/fp4_warps_probe [K blocks a CTA, default 2400] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fp4.h"
#include "gemm_fp4.cuh"
#include "probe.cuh"

#define BLOCK_BYTES (MM_FP4_BLOCK_CODE_BYTES + MM_FP4_EXP_BYTES) /* codes then exponents, as in a stage */
#define ROWS_AT 0                                                 /* N <= 32 token rows, 128 B each */
#define SCALES_AT 4096                                            /* their scales, the block word at [128] */
#define SCALES_BYTES 528
#define CODES_AT 5120                                             /* block 0's codes, exponents, block 1's */
#define STAGE_BYTES (CODES_AT + 2 * BLOCK_BYTES)                  /* 22 KB: a multiple of 1024 (the rows' swizzle) */
#define STAGES_ALL 6
#define ROWS_SRC_BYTES (1u << 20)
static_assert(STAGE_BYTES % 1024 == 0, "stages keep the 128-byte swizzle's period");
static_assert(MM_FP4_EXPS_AT - MM_FP4_CODES_AT == MM_FP4_BLOCK_CODE_BYTES, "a block's exponents follow its codes");

/* the base that gemm_fp4.cuh's readers take for block b of a stage (codes at MM_FP4_CODES_AT) */
__device__ __forceinline__ const uint8_t *block_base(const uint8_t *stage, int b)
{
    return stage + CODES_AT + b * BLOCK_BYTES - MM_FP4_CODES_AT;
}

template <int W, bool SHARED, int N>
__global__ void __launch_bounds__(128 * (W + 1), 1)
    warps_kernel(const uint8_t *codes, const uint8_t *rows_src, int kblocks, float *out, unsigned long long *clk)
{
    constexpr int RINGS = SHARED ? 1 : W / 2, S = STAGES_ALL / RINGS;
    /* a stage's two blocks: the next two K blocks of its pair, or (SHARED) block p of pair p */
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    uint8_t *stages = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    __shared__ __align__(8) uint64_t full[STAGES_ALL], empty[STAGES_ALL];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x < STAGES_ALL) {
        mm_mbar_init(&full[threadIdx.x], 1);
        mm_mbar_init(&empty[threadIdx.x], SHARED ? 16 : 8); /* the math warps that read the stage */
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) probe_clock_mark(clk, 0);
    const int kb_ring = kblocks / RINGS; /* even */
    if (warp < 4) {                      /* producer: thread 0 of warp r feeds ring r */
        if (warp < RINGS && lane == 0) {
            const int r = warp;
            const uint8_t *from = codes + ((size_t)blockIdx.x * kblocks + (size_t)r * kb_ring) * BLOCK_BYTES;
            for (int pos = 0; pos < kb_ring / 2; pos++) {
                const int s = r * S + pos % S;
                bar_wait((unsigned)__cvta_generic_to_shared(&empty[s]), ((pos / S) & 1u) ^ 1u);
                const unsigned f = (unsigned)__cvta_generic_to_shared(&full[s]);
                const unsigned to = (unsigned)__cvta_generic_to_shared(stages + s * STAGE_BYTES);
                asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(f),
                             "r"(2 * BLOCK_BYTES + SCALES_AT + SCALES_BYTES) : "memory");
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                                 to + CODES_AT), "l"(from + (size_t)pos * 2 * BLOCK_BYTES), "r"(2 * BLOCK_BYTES), "r"(f)
                             : "memory");
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                                 to), "l"(rows_src + (size_t)(pos % 64) * 8192), "r"(SCALES_AT + SCALES_BYTES), "r"(f)
                             : "memory");
            }
        }
    } else { /* math: warpgroup g of pair g / 2, weight rows 64 (g % 2) .. of each block */
        const int g = warp / 4 - 1, r = SHARED ? 0 : g / 2, pair = g / 2;
        const int kb_pair = SHARED ? kb_ring / 2 : kb_ring; /* the blocks this pair computes */
        const int c = 64 * (g % 2) + mm_frag_row(warp % 4, lane, 0);
        uint8_t *ring = stages + r * S * STAGE_BYTES;
        const uint64_t db0 = mm_wgmma_desc(ring);
        float acc[N / 2], blk[N / 2];
#pragma unroll
        for (int i = 0; i < N / 2; i++) acc[i] = 0.0f;
        uint32_t a[2][4][4];
        float sw[2];
        /* the pair's block kb: stage kb / 2 of the ring, its half kb % 2; SHARED: stage kb, half
         * `pair` */
        auto pos_of = [&](int kb) { return SHARED ? kb : kb / 2; };
        auto take = [&](int kb, uint32_t (&af)[4][4], float &swv) {
            const int pos = pos_of(kb), s = pos % S;
            if (SHARED || !(kb & 1)) bar_wait((unsigned)__cvta_generic_to_shared(&full[r * S + s]), (pos / S) & 1u);
            const uint8_t *st = ring + s * STAGE_BYTES;
            const uint32_t word = *(const uint32_t *)(st + SCALES_AT + 4 * MM_GEMM_BM);
            const int ref = (int)(word & 255u) - MM_FP4_D_MAX;
            mm_fp4_swap_expand(block_base(st, SHARED ? pair : kb & 1), c, lane % 4, ref, (word & MM_FP4_WORD_FAST) != 0,
                               af);
            swv = mm_fp4_ref_scale(ref);
        };
        auto issue = [&](int kb, const uint32_t (&af)[4][4]) {
            const uint64_t d = db0 + (uint64_t)(pos_of(kb) % S) * (STAGE_BYTES >> 4);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
            mm_wgmma_rs<N, false>(blk, af[0], d);
#pragma unroll
            for (int ks = 1; ks < MM_GEMM_BK / 32; ks++) mm_wgmma_rs<N, true>(blk, af[ks], d + 2 * ks);
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        };
        auto retire = [&](int kb, float swv) {
            const int s = pos_of(kb) % S;
            const float *sc = (const float *)(ring + s * STAGE_BYTES + SCALES_AT);
            float f[N / 4];
#pragma unroll
            for (int m = 0; m < N / 8; m++) {
                const float2 v = mm_fp4_swap_factors(sc, swv, lane, m);
                f[2 * m] = v.x, f[2 * m + 1] = v.y;
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            if ((SHARED || (kb & 1)) && lane == 0) mm_mbar_arrive(&empty[r * S + s]);
#pragma unroll
            for (int i = 0; i < N / 2; i++) acc[i] = fmaf(f[2 * (i / 4) + (i & 1)], blk[i], acc[i]);
        };
        take(0, a[0], sw[0]);
        issue(0, a[0]);
#pragma unroll 1
        for (int kb = 1; kb < kb_pair; kb += 2) {
            take(kb, a[1], sw[1]);
            retire(kb - 1, sw[0]);
            issue(kb, a[1]);
            if (kb + 1 >= kb_pair) {
                retire(kb, sw[1]);
                break;
            }
            take(kb + 1, a[0], sw[0]);
            retire(kb, sw[1]);
            issue(kb + 1, a[0]);
        }
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < N / 2; i++) sum += acc[i];
        out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
    }
    __syncthreads();
    if (threadIdx.x == 0) probe_clock_mark(clk, 1);
}

__global__ void fill_codes(uint8_t *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (uint8_t)probe_hash((uint32_t)i * 2654435761u + (uint32_t)(i >> 32));
}

/* token rows as random e4m3, each stage's scales 1.0 and the block word (reference 127: a block
 * scale of 1, every group on the arithmetic table) */
__global__ void fill_rows(uint8_t *p)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < ROWS_SRC_BYTES; i += gridDim.x * blockDim.x) {
        const unsigned at = i % 8192;
        if (at < SCALES_AT) p[i] = probe_random_e4m3(i);
        else if (at >= SCALES_AT && at < SCALES_AT + 4 * MM_GEMM_BM) ((float *)(p + i - i % 4))[0] = 1.0f;
        else if (at == SCALES_AT + 4 * MM_GEMM_BM) *(uint32_t *)(p + i) = (uint32_t)(127 + MM_FP4_D_MAX) | MM_FP4_WORD_FAST;
    }
}

template <int W, bool SHARED, int N>
static int run(const uint8_t *codes, const uint8_t *rows, int sms, int kblocks, float *out, unsigned long long *clk)
{
    const size_t smem = STAGES_ALL * STAGE_BYTES + 1024;
    CK(cudaFuncSetAttribute(warps_kernel<W, SHARED, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    float best = 1e30f, ms_all[5];
    double mhz = 0.0;
    for (int rep = 0; rep < 5; rep++) {
        CK(cudaMemset(clk, 0, (2 + 2 * sms) * sizeof(unsigned long long)));
        CK(cudaEventRecord(t0));
        warps_kernel<W, SHARED, N><<<sms, 128 * (W + 1), smem>>>(codes, rows, kblocks, out, clk);
        CK(cudaEventRecord(t1));
        CK(cudaEventSynchronize(t1));
        CK(cudaGetLastError());
        float ms = 0.0f;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        ms_all[rep] = ms;
        if (ms < best) best = ms;
        unsigned long long h[2];
        CK(cudaMemcpy(h, clk, sizeof h, cudaMemcpyDeviceToHost));
        mhz = h[1] ? 1e3 * (double)h[0] / (double)h[1] : 0.0;
    }
    for (int i = 0; i < 5; i++) /* the median of the five */
        for (int j = i + 1; j < 5; j++)
            if (ms_all[j] < ms_all[i]) {
                const float t = ms_all[i];
                ms_all[i] = ms_all[j], ms_all[j] = t;
            }
    const double bytes = (double)sms * kblocks * BLOCK_BYTES;
    printf("w%d%s N=%-3d %8.3f ms (best %.3f)  FP4 stream %.2f TB/s  %4.0f MHz  (%d threads)\n", W, SHARED ? "s" : " ", N,
           ms_all[2], best,
           bytes / (ms_all[2] * 1e-3) / 1e12, mhz, 128 * (W + 1));
    return 0;
}

int main(int argc, char **argv)
{
    int kblocks = argc > 1 ? atoi(argv[1]) : 2400;
    kblocks = (kblocks + 3) / 4 * 4; /* two rings, two blocks a stage */
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const size_t code_bytes = (size_t)sms * kblocks * BLOCK_BYTES;
    uint8_t *codes = NULL, *rows = NULL;
    float *out = NULL;
    unsigned long long *clk = NULL;
    CK(cudaMalloc(&codes, code_bytes));
    CK(cudaMalloc(&rows, ROWS_SRC_BYTES));
    CK(cudaMalloc(&out, (size_t)sms * 640 * sizeof(float)));
    CK(cudaMalloc(&clk, (2 + 2 * sms) * sizeof(unsigned long long)));
    fill_codes<<<1024, 256>>>(codes, code_bytes);
    fill_rows<<<256, 256>>>(rows);
    CK(cudaDeviceSynchronize());
    printf("%d SMs, %d K blocks a CTA, %.2f GB of FP4 blocks a run (HBM), %d stages of %d B\n", sms, kblocks,
           code_bytes / 1e9, STAGES_ALL, STAGE_BYTES);
    if (run<2, false, 8>(codes, rows, sms, kblocks, out, clk) || run<4, false, 8>(codes, rows, sms, kblocks, out, clk) ||
        run<4, true, 8>(codes, rows, sms, kblocks, out, clk) || run<2, false, 16>(codes, rows, sms, kblocks, out, clk) ||
        run<4, false, 16>(codes, rows, sms, kblocks, out, clk) || run<4, true, 16>(codes, rows, sms, kblocks, out, clk) ||
        run<2, false, 32>(codes, rows, sms, kblocks, out, clk) || run<4, false, 32>(codes, rows, sms, kblocks, out, clk) ||
        run<4, true, 32>(codes, rows, sms, kblocks, out, clk) || run<2, false, 8>(codes, rows, sms, kblocks, out, clk) ||
        run<4, false, 8>(codes, rows, sms, kblocks, out, clk))
        return 1;
    return 0;
}
