/* FP4 tall-tile probe (a lab experiment, not part of the tool): before a third FP4 tile form is
 * built, can a tile that feeds each expanded weight to 256 token rows run FP4 experts near FP8's
 * rate at large row counts?
 *
 * Why it could: every FP4 form so far expands each weight once per 128 token rows (the
 * FP8-block form's 128-row tile, the swapped form's N = 128), and the math warps' issue bounds
 * them at 1.4-1.7x FP8's time (docs/performance.md). Here a CTA's tile is 256 rows x 64 columns:
 * each math warpgroup holds 128 token rows as wgmma's A in registers (two m64 slabs, ldmatrix
 * from the stage) against one 64-column weight block as B in shared memory (m64n64k32), so a
 * thread expands 32 weights a K block instead of 64 for the same MMAs, and shared memory moves as
 * many bytes per MMA as the 128 x 128 form's.
 *
 *   tall8  256 x 64, the weight block FP8 in the stage (no expansion): the skeleton's ceiling
 *   tall4  the same with the block's FP4 codes in the stage: all 256 math threads expand block
 *          kb + 1 (a 32-group each: one 16-byte code load, its table, 4 words, two 16-byte
 *          stores in the 128-byte swizzle) into one of three FP8 buffers while block kb's MMAs
 *          run, then a proxy fence and a barrier of the 256; three buffers, since a warpgroup
 *          may write block kb + 1's while the other still reads block kb - 1's
 *
 * Each runs with no loads (the producer only signals its stages, filled once with random bytes)
 * and with loads (thread 0 bulk-copies each stage's operand bytes, rows and weights, from an
 * L2-resident buffer). Timing only: the fragments' and codes' orders are the ones the real forms
 * read, the values are random, nothing is checked. Figures: TFLOP/s and the SM clock the CTAs
 * ran at; compare with rs_tile_probe's (the 128 x 128 and wide forms) and `gemm --weights fp4`.
 * Measured on an H100 (results/h100-ep1/fp4-swap56-ade394a): tall8 0.586 TFLOP/s a MHz with no
 * loads, tall4 0.44-0.45, so the form was not built (docs/performance.md, dropped ideas).
 *
 * Build and run on a GPU machine:
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -o build/fp4_tall_probe lab/probes/fp4_tall_probe.cu
 *   build/fp4_tall_probe [K blocks per CTA, default 40000] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fp4.h"
#include "gemm_tile.cuh"
#include "probe.cuh"

#define TALL_ROWS 256
#define TALL_COLS 64
#define TALL_A (TALL_ROWS * 128)       /* 32 KB of token rows a K block, at 0 */
#define TALL_B8 (TALL_COLS * 128)      /* 8 KB: the FP8 weight block, after the rows */
#define TALL_B4 (TALL_COLS * 64)       /* 4 KB: its FP4 codes, after the FP8 area */
#define TALL_EXPS (TALL_COLS * 4)      /* its group exponents, a word a row, after the codes */
#define TALL_SCALES 1280               /* 256 row scales, then the block's scale, after those */
#define TALL_CODES_AT (TALL_A + TALL_B8)
#define TALL_EXPS_AT (TALL_CODES_AT + TALL_B4)
#define TALL_SCALES_AT (TALL_EXPS_AT + TALL_EXPS)
/* room for either form, a multiple of 1024: the 128-byte swizzle's period, which the weight
 * block's descriptor and the rows' ldmatrix addresses assume */
#define TALL_STAGE ((TALL_SCALES_AT + TALL_SCALES + 1023) / 1024 * 1024)
#define TALL_STAGES 4
#define TALL_BUFS 3                    /* tall4's expanded blocks */
#define SRC_BYTES (24u << 20)

__global__ void fill_source(uint8_t *src, unsigned n)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) src[i] = probe_random_e4m3(i * 2654435761u);
}

/* the stages' bytes once: random operands, row scales 1/64, the block scale 1, exponents that
 * keep every group in the arithmetic table's range */
__device__ void fill_stages(uint8_t *stages)
{
    for (int i = threadIdx.x; i < TALL_STAGES * TALL_STAGE; i += blockDim.x) {
        const int at = i % TALL_STAGE;
        if (at >= TALL_SCALES_AT) {
            if (at % 4 == 0) *(float *)(stages + i) = at == TALL_SCALES_AT + 4 * TALL_ROWS ? 1.0f : 1.0f / 64.0f;
        } else if (at >= TALL_EXPS_AT) {
            stages[i] = (uint8_t)(127 + (i % 5));
        } else {
            stages[i] = probe_random_e4m3((uint32_t)(blockIdx.x * 977 + i));
        }
    }
}

/* the producer's thread 0: the rows, then the weight block where the math reads it (FP8 right
 * after the rows, codes after the FP8 area), by 4 KB copies */
template <bool FP4>
__device__ void produce(mm_tile_pipe *p, uint8_t *stages, int kblocks, const uint8_t *src)
{
    constexpr int w_bytes = FP4 ? TALL_B4 : TALL_B8, w_at = FP4 ? TALL_CODES_AT : TALL_A;
    probe_produce(p->full, p->empty, stages, TALL_STAGES, TALL_STAGE, TALL_A + w_bytes, TALL_A, w_at, 4096, kblocks, src,
                  SRC_BYTES);
}

#define TALL_WGMMA(scale_d)                                                                          \
    "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "                                           \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                         \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "               \
    "{%32, %33, %34, %35}, %36, " scale_d ", 1, 1;\n"

/* one slab's K block: A (64 rows, registers) x the weight block^T into a fresh sum d (tied in and
 * out, so the promotion that reads it comes before the next block's MMAs reuse its registers) */
__device__ __forceinline__ void issue_slab(float d[32], const uint32_t a[16], uint64_t db)
{
    asm volatile(TALL_WGMMA("0") : MM_WGMMA_D32("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
#pragma unroll
    for (int ks = 1; ks < 4; ks++)
        asm volatile(TALL_WGMMA("1")
                     : MM_WGMMA_D32("+f")
                     : "r"(a[4 * ks]), "r"(a[4 * ks + 1]), "r"(a[4 * ks + 2]), "r"(a[4 * ks + 3]), "l"(db + 2 * ks));
}

/* this thread's A fragments of slab j for the stage's K block (ldmatrix x4 a k32 step: matrices
 * rows +0..7 / +8..15 of the warp's 16, bytes 0..15 / 16..31 of the step; 128-byte swizzle) */
__device__ __forceinline__ void load_slab(unsigned stage_at, int row, int half, uint32_t a[16])
{
#pragma unroll
    for (int ks = 0; ks < 4; ks++) {
        const unsigned at = stage_at + row * 128 + (((2 * ks + half) ^ (row % 8)) * 16);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(a[4 * ks]), "=r"(a[4 * ks + 1]), "=r"(a[4 * ks + 2]), "=r"(a[4 * ks + 3])
                     : "r"(at)
                     : "memory");
    }
}

/* tall4: math thread t (0..255) expands group t % 4 of weight row t / 4 of the stage's codes into
 * the FP8 buffer `out` (row r's 128 bytes, chunk c at c ^ (r % 8)): the real forms' instructions
 * for a group (fp4.h), then its fence; the caller's barrier follows */
__device__ __forceinline__ void expand_group(const uint8_t *stage, uint8_t *out, int t)
{
    const int row = t / 4, g = t % 4;
    const uint4 c = *(const uint4 *)(stage + TALL_CODES_AT + row * 64 + g * 16);
    const uint32_t ex = *(const uint32_t *)(stage + TALL_EXPS_AT + 4 * row);
    uint32_t t0, t1, w[8];
    mm_fp4_table((int)((ex >> (8 * g)) & 255u) - 131, &t0, &t1);
    mm_fp4_expand_word(c.x, t0, t1, &w[0], &w[4]);
    mm_fp4_expand_word(c.y, t0, t1, &w[1], &w[5]);
    mm_fp4_expand_word(c.z, t0, t1, &w[2], &w[6]);
    mm_fp4_expand_word(c.w, t0, t1, &w[3], &w[7]);
    const unsigned row_sw = (unsigned)__cvta_generic_to_shared(out + row * 128) | (unsigned)((row & 7) << 4);
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(row_sw ^ ((2 * g) << 4)), "r"(w[0]), "r"(w[1]), "r"(w[2]),
                 "r"(w[3]) : "memory");
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(row_sw ^ ((2 * g + 1) << 4)), "r"(w[4]), "r"(w[5]), "r"(w[6]),
                 "r"(w[7]) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void promote(float *acc, const float d[32], float s_lo, float s_hi)
{
#pragma unroll
    for (int i = 0; i < 32; i++) acc[i] = fmaf((i & 2) ? s_hi : s_lo, d[i], acc[i]);
}

/* the math (256 threads): K blocks through the ring; FP4 expands each block one ahead of its MMAs */
template <bool FP4>
__device__ void tall_consume(uint8_t *stages, uint8_t *bufs, mm_tile_pipe *p, int kblocks, float acc[64])
{
    const int t = threadIdx.x - 128, g = t / 128, w = (t / 32) % 4, lane = t % 32;
    /* slab j of warpgroup g: rows 128 g + 64 j .. + 63; this thread's fragment rows and ldmatrix row */
    const int r0 = 128 * g + mm_frag_row(w, lane, 0), r1 = 128 * g + mm_frag_row(w, lane, 2);
    const int a_row = 128 * g + 16 * w + (lane % 8) + 8 * ((lane / 8) % 2), a_half = lane / 16;
    const unsigned stages_at = (unsigned)__cvta_generic_to_shared(stages);
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f;
    int stage = 0;
    uint32_t phase = 0;
    if (FP4) { /* block 0 expanded before the loop */
        bar_wait((unsigned)__cvta_generic_to_shared(&p->full[0]), 0);
        expand_group(stages, bufs, t);
        mm_named_barrier(1, 256);
    }
    for (int kb = 0; kb < kblocks; kb++) {
        uint8_t *stage_p = stages + stage * TALL_STAGE;
        if (!FP4) bar_wait((unsigned)__cvta_generic_to_shared(&p->full[stage]), phase);
        const uint64_t db = mm_wgmma_desc(FP4 ? bufs + (kb % TALL_BUFS) * TALL_B8 : stage_p + TALL_A);
        uint32_t a0[16], a1[16]; /* one a slab: the wgmmas read them until the wait */
        float d0[32], d1[32];
        load_slab(stages_at + stage * TALL_STAGE, a_row, a_half, a0);
        load_slab(stages_at + stage * TALL_STAGE, a_row + 64, a_half, a1);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        issue_slab(d0, a0, db);
        issue_slab(d1, a1, db);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        int next = stage + 1;
        uint32_t next_phase = phase;
        if (next == TALL_STAGES) {
            next = 0;
            next_phase ^= 1u;
        }
        if (FP4 && kb + 1 < kblocks) { /* block kb + 1 expanded under block kb's MMAs */
            bar_wait((unsigned)__cvta_generic_to_shared(&p->full[next]), next_phase);
            expand_group(stages + next * TALL_STAGE, bufs + ((kb + 1) % TALL_BUFS) * TALL_B8, t);
            mm_named_barrier(1, 256);
        }
        const float *sc = (const float *)(stage_p + TALL_SCALES_AT);
        const float sw = sc[TALL_ROWS];
        const float s00 = sc[r0] * sw, s01 = sc[r1] * sw, s10 = sc[r0 + 64] * sw, s11 = sc[r1 + 64] * sw;
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        __syncwarp();
        if (lane == 0) mm_mbar_arrive(&p->empty[stage]);
        promote(acc, d0, s00, s01);
        promote(acc + 32, d1, s10, s11);
        stage = next;
        phase = next_phase;
    }
}

#define TALL_SMEM (TALL_STAGES * TALL_STAGE + TALL_BUFS * TALL_B8 + 1024)

template <bool FP4>
__global__ void __launch_bounds__(384, 1) tall_probe_kernel(int kblocks, const uint8_t *src, float *out, unsigned long long *clk)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    __shared__ __align__(8) mm_tile_pipe pipe;
    uint8_t *stages = mm_tile_stages(smem), *bufs = stages + TALL_STAGES * TALL_STAGE;
    fill_stages(stages);
    if (threadIdx.x == 0) {
        for (int s = 0; s < TALL_STAGES; s++) {
            mm_mbar_init(&pipe.full[s], 1);
            mm_mbar_init(&pipe.empty[s], 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) probe_clock_mark(clk, 0);
    if (mm_warpgroup() == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
        if (threadIdx.x == 0) produce<FP4>(&pipe, stages, kblocks, src);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
    float acc[64];
    tall_consume<FP4>(stages, bufs, &pipe, kblocks, acc);
    float s = 0.0f;
    for (int i = 0; i < 64; i++) s += acc[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 128) probe_clock_mark(clk, 1);
}

template <bool FP4>
static int run(const char *name, int ctas, int kblocks, const uint8_t *src, float *out, unsigned long long *clk)
{
    CK(cudaFuncSetAttribute(tall_probe_kernel<FP4>, cudaFuncAttributeMaxDynamicSharedMemorySize, TALL_SMEM));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, tall_probe_kernel<FP4>));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int rep = 0; rep < 4; rep++) {
        CK(cudaMemset(clk, 0, (2 + 2 * (size_t)ctas) * sizeof(unsigned long long)));
        CK(cudaEventRecord(a));
        tall_probe_kernel<FP4><<<ctas, 384, TALL_SMEM>>>(kblocks, src, out, clk);
        CK(cudaGetLastError());
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0.0f;
        CK(cudaEventElapsedTime(&ms, a, b));
        unsigned long long h[2];
        CK(cudaMemcpy(h, clk, sizeof h, cudaMemcpyDeviceToHost));
        const double flop = 2.0 * ctas * (double)kblocks * TALL_ROWS * TALL_COLS * 128.0;
        const double mhz = h[1] ? 1e3 * (double)h[0] / (double)h[1] : 0.0;
        if (rep > 0)
            printf("%-6s %-8s rep %d: %8.3f ms %7.1f TFLOP/s at %5.0f MHz (%5.3f TFLOP/s a MHz) regs %d\n", name,
                   src ? "loads" : "no-loads", rep, ms, flop / (ms * 1e-3) / 1e12, mhz,
                   flop / (ms * 1e-3) / 1e12 / (mhz > 0 ? mhz : 1.0), fa.numRegs);
    }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* a run killed by its time limit keeps its lines */
    const int kblocks = argc > 1 ? atoi(argv[1]) : 40000;
    if (kblocks < 2) return 1;
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    float *out;
    uint8_t *src;
    unsigned long long *clk;
    CK(cudaMalloc(&out, (size_t)sms * 384 * sizeof(float)));
    CK(cudaMalloc(&src, SRC_BYTES));
    CK(cudaMalloc(&clk, (2 + 2 * (size_t)sms) * sizeof(unsigned long long)));
    fill_source<<<264, 256>>>(src, SRC_BYTES);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    for (int round = 0; round < 2; round++) {
        if (run<false>("tall8", sms, kblocks, NULL, out, clk) || run<false>("tall8", sms, kblocks, src, out, clk) ||
            run<true>("tall4", sms, kblocks, NULL, out, clk) || run<true>("tall4", sms, kblocks, src, out, clk))
            return 1;
    }
    printf("fp4_tall_probe: %d CTAs, %d K blocks each\n", sms, kblocks);
    return 0;
}
