/* RS-tile probe (a lab experiment, not part of the tool): before a third tile form is built, is a
 * 128 x 256 tile whose two math warpgroups take A from registers faster under the power cap than
 * the wide form's 192 x 128 tile on three warpgroups with A from shared memory?
 *
 * Why it could be: an m64 wgmma with both
 * operands in shared memory reads all of B for every 64 rows, so the wide tile asks ~150 B a clock
 * of shared memory at the tensor pipe's rate (wgmma reads 72 KB and the loads write 40 KB a K
 * block for 3.1 M MACs) against the SM's 128. A warpgroup holding its 64 x 256 output reads its A
 * block once into registers (ldmatrix) and B once: 80 KB of reads and 48 KB of writes for 4.2 M
 * MACs, ~125 B a clock. Its registers: 128 accumulators, the recipe's fresh block sum per K block
 * in 64-column quarters (m64n64k32, two in flight: 64), A's 16: what 232 a math thread holds.
 *
 *   wide   3 math warpgroups, 192 x 128, both operands from shared memory, each K block retired
 *          before the next (the wide form's step; 152 registers a math thread)
 *   rs256  2 math warpgroups, 128 x 256, A by ldmatrix, B from shared memory in four 64-column
 *          quarters, two block sums in flight, each promoted as soon as it is done
 *   ss256  the same with A from shared memory
 *   rspipe rs256 with A double-buffered, the next block's first quarter issued before this block's
 *          last is promoted (ptxas serializes its wgmmas, C7514: its figure is not the design's)
 *   quad   4 math warpgroups, 256 x 128 (112 registers a math thread), each warpgroup's two
 *          64-column halves retired in turn
 *
 * Each runs with no loads (the producer only signals its stages, filled once with random e4m3)
 * and with loads (thread 0 bulk-copies each stage's operand bytes from an L2-resident buffer of
 * random e4m3: the shared-memory writes of the real tile, without its multicast). The figures are
 * TFLOP/s and the SM clock the CTAs ran at (their cycles over their nanoseconds). Timing only: the
 * A fragment's ldmatrix order is the one wgmma's register layout asks for, but nothing is checked.
 *
 * Build and run on a GPU machine:
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -o build/rs_tile_probe lab/probes/rs_tile_probe.cu
 *   build/rs_tile_probe [K blocks per CTA, default 40000] [rs256 stages, default 4]
 *                       [1: only wide and quad, 2: only wide] [operand bytes: 0 modest, 1 any e4m3, 2 zeros]
 *                       [1: launched as 2-CTA clusters, as the wide GEMM is (each CTA still alone)]
 * The last asks whether the cluster launch itself costs the wide GEMM some of its ~18% a clock
 * below this step (its skeleton without loads, stores or pair
 * lockstep still runs as 2-CTA clusters). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gemm_tile.cuh"
#include "probe.cuh"

#define WIDE_STAGE 41984 /* 192 x 128 A + 128 x 128 B + 1 KB of scales */
#define RS_STAGE 50176   /* 128 x 128 A + 256 x 128 B + 1 KB of scales */
#define SRC_BYTES (24u << 20)

/* the operand bytes: 0 (default) random e4m3 with exponent field 5..9 (finite, modest), 1 any
 * e4m3 but NaN (every exponent: how quantized activations and weights spread), 2 zeros */
__constant__ int fill_mode;
static int launch_clusters = 0; /* host: launch as 2-CTA clusters (argv[5]) */

__device__ __forceinline__ uint8_t random_e4m3(uint32_t i)
{
    if (fill_mode == 2) return 0;
    if (fill_mode != 1) return probe_random_e4m3(i);
    const uint32_t h = probe_hash(i);
    return (h & 0x7fu) == 0x7fu ? (uint8_t)(h & 0xfeu) : (uint8_t)h;
}

__global__ void fill_source(uint8_t *src, unsigned n)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) src[i] = random_e4m3(i * 2654435761u);
}

__device__ void fill_stages(uint8_t *stages, int stages_n, int stage_bytes, int scale_at)
{
    for (int i = threadIdx.x; i < stages_n * stage_bytes; i += blockDim.x) {
        const int in_stage = i % stage_bytes;
        if (in_stage >= scale_at && in_stage < scale_at + 1024) {
            if ((in_stage - scale_at) % 4 == 0) *(float *)(stages + i) = 1.0f / 64.0f;
        } else {
            stages[i] = random_e4m3((uint32_t)(blockIdx.x * 977 + i));
        }
    }
}

/* the producer's thread 0: the operand bytes in one piece, by 8 KB copies */
__device__ void produce(mm_tile_pipe *p, uint8_t *stages, int stages_n, int stage_bytes, int op_bytes, int kblocks,
                        const uint8_t *src)
{
    probe_produce(p->full, p->empty, stages, stages_n, stage_bytes, op_bytes, op_bytes, op_bytes, 8192, kblocks, src,
                  SRC_BYTES);
}

/* ---- wide: 192 x 128, three warpgroups, SS, each block retired before the next ---- */
__device__ void wide_consume(uint8_t *stages, mm_tile_pipe *p, int kblocks, float acc[MM_TILE_ACC])
{
    const int g = mm_warpgroup() - 1, t = (threadIdx.x - 128) % 128;
    const int r_lo = 64 * g + mm_frag_row(t / 32, t % 32, 0), r_hi = 64 * g + mm_frag_row(t / 32, t % 32, 2);
    const uint64_t da = mm_wgmma_desc(stages + g * 64 * 128), db = mm_wgmma_desc(stages + 192 * 128);
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = 0.0f;
    int stage = 0;
    uint32_t phase = 0;
    for (int kb = 0; kb < kblocks; kb++) {
        bar_wait((unsigned)__cvta_generic_to_shared(&p->full[stage]), phase);
        const float *sc = (const float *)(stages + stage * WIDE_STAGE + 192 * 128 + 128 * 128);
        const float sw = sc[192], s_lo = sc[r_lo] * sw, s_hi = sc[r_hi] * sw;
        float blk[MM_TILE_ACC];
        mm_tile_issue_ab(da, stage, db, stage, blk, WIDE_STAGE);
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        __syncwarp();
        if (threadIdx.x % 32 == 0) mm_mbar_arrive(&p->empty[stage]);
        mm_tile_promote(s_lo, s_hi, blk, acc);
        if (++stage == 4) {
            stage = 0;
            phase ^= 1u;
        }
    }
}

/* ---- rs256: 128 x 256, two warpgroups, A in registers ---- */
#define RS_WGMMA(scale_d)                                                                            \
    "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "                                           \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                         \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "               \
    "{%32, %33, %34, %35}, %36, " scale_d ", 1, 1;\n"

/* d = A (this warpgroup's 64 rows, one K block, in registers) x B quarter^T: four k32 steps into
 * a fresh sum (scale-d 0), one commit group. d is tied in and out even where it is not read: the
 * next quarter into it then reuses its registers, so the promotion that reads it comes first (with
 * "=f" the compiler renamed it into a third and fourth block sum and spilled) */
__device__ __forceinline__ void rs_issue_quarter(float d[32], const uint32_t a[16], uint64_t db)
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile(RS_WGMMA("0") : MM_WGMMA_D32("+f") : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
#pragma unroll
    for (int ks = 1; ks < 4; ks++)
        asm volatile(RS_WGMMA("1")
                     : MM_WGMMA_D32("+f")
                     : "r"(a[4 * ks]), "r"(a[4 * ks + 1]), "r"(a[4 * ks + 2]), "r"(a[4 * ks + 3]), "l"(db + 2 * ks));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* acc += s * d; the empty asm after it holds the promoted accumulators in place, so the compiler
 * cannot sink these FMAs below the next quarter's issue into d (that renamed d into a third block
 * sum and spilled) */
__device__ __forceinline__ void rs_promote(float *acc, const float d[32], float s_lo, float s_hi)
{
#pragma unroll
    for (int i = 0; i < 32; i++) acc[i] = fmaf((i & 2) ? s_hi : s_lo, d[i], acc[i]);
#pragma unroll
    for (int i = 0; i < 32; i++) asm volatile("" : "+f"(acc[i])::"memory");
}

/* the same quarter with A from shared memory */
__device__ __forceinline__ void ss_issue_quarter(float d[32], uint64_t da, uint64_t db)
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile(MM_WGMMA_64x64x32("0") : MM_WGMMA_D32("+f") : "l"(da), "l"(db));
#pragma unroll
    for (int ks = 1; ks < 4; ks++) asm volatile(MM_WGMMA_64x64x32("1") : MM_WGMMA_D32("+f") : "l"(da + 2 * ks), "l"(db + 2 * ks));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* rs256 (A_REGS: A by ldmatrix into registers) and ss256 (A from shared memory: is it the register
 * operand that costs?): each K block's four 64-column quarters, two block sums in flight */
template <bool A_REGS>
__device__ __forceinline__ void issue_quarter(float d[32], const uint32_t a[16], uint64_t da, uint64_t db)
{
    if (A_REGS) rs_issue_quarter(d, a, db);
    else ss_issue_quarter(d, da, db);
}

template <int STAGES, bool A_REGS>
__device__ void quarters_consume(uint8_t *stages, mm_tile_pipe *p, int kblocks, float acc[128])
{
    const int g = mm_warpgroup() - 1, t = (threadIdx.x - 128) % 128, w = t / 32, lane = t % 32;
    const int r_lo = 64 * g + mm_frag_row(w, lane, 0), r_hi = 64 * g + mm_frag_row(w, lane, 2);
    /* ldmatrix x4, k32 step ks: matrices (rows +0..7, bytes 0..15), (+8..15, 0..15), (+0..7, 16..31),
     * (+8..15, 16..31) of this warp's 16 rows; lane l gives a row of matrix l / 8; 128-byte swizzle */
    const int a_row = 64 * g + 16 * w + (lane % 8) + 8 * ((lane / 8) % 2), a_half = lane / 16;
    const unsigned a_base = (unsigned)__cvta_generic_to_shared(stages) + a_row * 128;
    const uint64_t da0 = mm_wgmma_desc(stages + g * 64 * 128), db0 = mm_wgmma_desc(stages + 128 * 128);
#pragma unroll
    for (int i = 0; i < 128; i++) acc[i] = 0.0f;
    int stage = 0;
    uint32_t phase = 0;
    for (int kb = 0; kb < kblocks; kb++) {
        bar_wait((unsigned)__cvta_generic_to_shared(&p->full[stage]), phase);
        uint32_t a[16];
        if (A_REGS) {
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                const unsigned at = a_base + stage * RS_STAGE + (((2 * ks + a_half) ^ (a_row % 8)) * 16);
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                             : "=r"(a[4 * ks]), "=r"(a[4 * ks + 1]), "=r"(a[4 * ks + 2]), "=r"(a[4 * ks + 3])
                             : "r"(at)
                             : "memory");
            }
        }
        const float *sc = (const float *)(stages + stage * RS_STAGE + 128 * 128 + 256 * 128);
        const float sa_lo = sc[r_lo], sa_hi = sc[r_hi], sw0 = sc[128], sw1 = sc[129];
        const uint64_t db = db0 + (uint64_t)stage * (RS_STAGE >> 4), da = da0 + (uint64_t)stage * (RS_STAGE >> 4);
        float d0[32], d1[32];
        issue_quarter<A_REGS>(d0, a, da, db);
        issue_quarter<A_REGS>(d1, a, da, db + (8192 >> 4));
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        rs_promote(acc, d0, sa_lo * sw0, sa_hi * sw0);
        issue_quarter<A_REGS>(d0, a, da, db + (2 * 8192 >> 4));
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        rs_promote(acc + 32, d1, sa_lo * sw0, sa_hi * sw0);
        issue_quarter<A_REGS>(d1, a, da, db + (3 * 8192 >> 4));
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        rs_promote(acc + 64, d0, sa_lo * sw1, sa_hi * sw1);
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        __syncwarp();
        if (lane == 0) mm_mbar_arrive(&p->empty[stage]);
        rs_promote(acc + 96, d1, sa_lo * sw1, sa_hi * sw1);
        if (++stage == STAGES) {
            stage = 0;
            phase ^= 1u;
        }
    }
}

/* rs256 with A double-buffered in registers, so a warpgroup never drains at a K block's end: the
 * next block's first quarter is issued before the last one of this block is promoted (rspipe) */
typedef struct {
    float lo0, hi0, lo1, hi1; /* a_scale * w_scale: rows lo / hi, weight blocks 0 / 1 */
} rs_scales;

__device__ __forceinline__ rs_scales rs_block_start(uint8_t *stages, mm_tile_pipe *p, int stage, uint32_t phase,
                                                    unsigned a_at, int r_lo, int r_hi, uint32_t a[16])
{
    bar_wait((unsigned)__cvta_generic_to_shared(&p->full[stage]), phase);
#pragma unroll
    for (int ks = 0; ks < 4; ks++)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(a[4 * ks]), "=r"(a[4 * ks + 1]), "=r"(a[4 * ks + 2]), "=r"(a[4 * ks + 3])
                     : "r"(a_at + stage * RS_STAGE + ((ks * 32) ^ 0)) /* ks chunk offset folded below */
                     : "memory");
    const float *sc = (const float *)(stages + stage * RS_STAGE + 128 * 128 + 256 * 128);
    const float sa_lo = sc[r_lo], sa_hi = sc[r_hi], sw0 = sc[128], sw1 = sc[129];
    rs_scales s = {sa_lo * sw0, sa_hi * sw0, sa_lo * sw1, sa_hi * sw1};
    return s;
}

template <int STAGES>
__device__ void rspipe_consume(uint8_t *stages, mm_tile_pipe *p, int kblocks, float acc[128])
{
    const int g = mm_warpgroup() - 1, t = (threadIdx.x - 128) % 128, w = t / 32, lane = t % 32;
    const int r_lo = 64 * g + mm_frag_row(w, lane, 0), r_hi = 64 * g + mm_frag_row(w, lane, 2);
    const int a_row = 64 * g + 16 * w + (lane % 8) + 8 * ((lane / 8) % 2), a_half = lane / 16;
    /* timing only: the swizzled chunk of k32 step ks would be ((2 ks + a_half) ^ (a_row % 8)); the
     * probe reads chunk (a_half ^ (a_row % 8)) + 2 ks, the same banks a step (no conflicts) */
    const unsigned a_at = (unsigned)__cvta_generic_to_shared(stages) + a_row * 128 + ((a_half ^ (a_row % 8)) * 16) % 128;
    const uint64_t db0 = mm_wgmma_desc(stages + 128 * 128);
#pragma unroll
    for (int i = 0; i < 128; i++) acc[i] = 0.0f;
    int stage = 0;
    uint32_t phase = 0;
    uint32_t a0[16], a1[16];
    float d0[32], d1[32];
    rs_scales s = rs_block_start(stages, p, stage, phase, a_at, r_lo, r_hi, a0);
    uint64_t db = db0;
    rs_issue_quarter(d0, a0, db);
    for (int kb = 0; kb < kblocks; kb += 2) {
#pragma unroll
        for (int half = 0; half < 2; half++) {
            uint32_t *a = half ? a1 : a0, *an = half ? a0 : a1;
            rs_issue_quarter(d1, a, db + (8192 >> 4));
            asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
            rs_promote(acc, d0, s.lo0, s.hi0);
            rs_issue_quarter(d0, a, db + (2 * 8192 >> 4));
            asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
            rs_promote(acc + 32, d1, s.lo0, s.hi0);
            rs_issue_quarter(d1, a, db + (3 * 8192 >> 4));
            asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
            rs_promote(acc + 64, d0, s.lo1, s.hi1);
            const int done = stage;
            if (++stage == STAGES) {
                stage = 0;
                phase ^= 1u;
            }
            rs_scales next = s;
            if (kb + half + 1 < kblocks) {
                next = rs_block_start(stages, p, stage, phase, a_at, r_lo, r_hi, an);
                db = db0 + (uint64_t)stage * (RS_STAGE >> 4);
                rs_issue_quarter(d0, an, db);
                asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
            } else {
                asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            }
            __syncwarp();
            if (lane == 0) mm_mbar_arrive(&p->empty[done]);
            rs_promote(acc + 96, d1, s.lo1, s.hi1);
            s = next;
        }
    }
}

/* ---- quad: 256 x 128, four math warpgroups (0-3) and a producer warpgroup (4), 640 threads: 96
 * registers at launch (registers go to warps in fours: a lone producer warp costs a warpgroup's),
 * the producer down to 24 and the math up to 112 (an increase only takes what the CTA's own
 * decreases freed: 120 waited forever); a warpgroup's block sum in two 64-column halves, each
 * retired before the next is issued (64 accumulators + 32 of block sum) ---- */
#define QUAD_STAGE 50176 /* 256 x 128 A + 128 x 128 B + 1 KB of scales */
template <int STAGES>
__device__ void quad_consume(uint8_t *stages, mm_tile_pipe *p, int kblocks, float acc[MM_TILE_ACC])
{
    const int g = threadIdx.x / 128, t = threadIdx.x % 128, w = t / 32, lane = t % 32;
    const int r_lo = 64 * g + mm_frag_row(w, lane, 0), r_hi = 64 * g + mm_frag_row(w, lane, 2);
    const uint64_t da0 = mm_wgmma_desc(stages + g * 64 * 128), db0 = mm_wgmma_desc(stages + 256 * 128);
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = 0.0f;
    int stage = 0;
    uint32_t phase = 0;
    for (int kb = 0; kb < kblocks; kb++) {
        bar_wait((unsigned)__cvta_generic_to_shared(&p->full[stage]), phase);
        const float *sc = (const float *)(stages + stage * QUAD_STAGE + 256 * 128 + 128 * 128);
        const float sw = sc[256], s_lo = sc[r_lo] * sw, s_hi = sc[r_hi] * sw;
        const uint64_t step = (uint64_t)stage * (QUAD_STAGE >> 4);
        float d[32];
        ss_issue_quarter(d, da0 + step, db0 + step);
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        rs_promote(acc, d, s_lo, s_hi);
        ss_issue_quarter(d, da0 + step, db0 + step + (8192 >> 4));
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        __syncwarp();
        if (lane == 0) mm_mbar_arrive(&p->empty[stage]);
        rs_promote(acc + 32, d, s_lo, s_hi);
        if (++stage == STAGES) {
            stage = 0;
            phase ^= 1u;
        }
    }
}

__device__ void store_sum(float *out, const float *acc, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += acc[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

/* MODE 0: wide (512 threads), 1: rs256, 2: ss256, 3: rspipe (384), 4: quad (640). Until out held 640
 * floats a CTA, quad's sums ran past its end, most likely into the clock counters allocated after
 * it: quad clock readings taken without it were garbage (their times were not) */
#define PROBE_THREADS(mode) ((mode) == 0 ? 512 : (mode) == 4 ? 640 : 384)
template <int MODE, int STAGES>
__global__ void __launch_bounds__(PROBE_THREADS(MODE), 1)
    rs_probe_kernel(int kblocks, const uint8_t *src, float *out, unsigned long long *clk)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    __shared__ __align__(8) mm_tile_pipe pipe;
    uint8_t *stages = mm_tile_stages(smem);
    constexpr int stage_bytes = MODE == 0 ? WIDE_STAGE : MODE == 4 ? QUAD_STAGE : RS_STAGE;
    constexpr int op_bytes = MODE == 0 ? 192 * 128 + 128 * 128 : 128 * 128 + 256 * 128; /* quad: 256 x 128 + 128 x 128, the same */
    constexpr int math_warps = MODE == 0 ? 12 : MODE == 4 ? 16 : 8;
    fill_stages(stages, STAGES, stage_bytes, op_bytes);
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mm_mbar_init(&pipe.full[s], 1);
            mm_mbar_init(&pipe.empty[s], math_warps);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* the random bytes before wgmma reads them */
    __syncthreads();
    if (threadIdx.x == 0) probe_clock_mark(clk, 0);
    if (MODE == 4) {
        if (threadIdx.x >= 512) {
            asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
            if (threadIdx.x == 512) produce(&pipe, stages, STAGES, stage_bytes, op_bytes, kblocks, src);
        } else {
            asm volatile("setmaxnreg.inc.sync.aligned.u32 112;");
            float acc[MM_TILE_ACC];
            quad_consume<STAGES>(stages, &pipe, kblocks, acc);
            store_sum(out, acc, MM_TILE_ACC);
        }
        if (threadIdx.x == 0) probe_clock_mark(clk, 1);
        return;
    }
    if (mm_warpgroup() == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(MODE == 0 ? 40 : 24));
        if (threadIdx.x == 0) produce(&pipe, stages, STAGES, stage_bytes, op_bytes, kblocks, src);
        return;
    }
    if (MODE == 0) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 152;");
        float acc[MM_TILE_ACC];
        wide_consume(stages, &pipe, kblocks, acc);
        store_sum(out, acc, MM_TILE_ACC);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
        float acc[128];
        if (MODE == 1) quarters_consume<STAGES, true>(stages, &pipe, kblocks, acc);
        else if (MODE == 2) quarters_consume<STAGES, false>(stages, &pipe, kblocks, acc);
        else rspipe_consume<STAGES>(stages, &pipe, kblocks, acc);
        store_sum(out, acc, 128);
    }
    if (threadIdx.x == 128) probe_clock_mark(clk, 1);
}

template <int MODE, int STAGES>
static int run(const char *name, int ctas, int kblocks, const uint8_t *src, float *out, unsigned long long *clk)
{
    const int threads = PROBE_THREADS(MODE), rows = MODE == 0 ? 192 : MODE == 4 ? 256 : 128, cols = MODE == 0 || MODE == 4 ? 128 : 256;
    const int smem = STAGES * (MODE == 0 ? WIDE_STAGE : MODE == 4 ? QUAD_STAGE : RS_STAGE) + 1024;
    CK(cudaFuncSetAttribute(rs_probe_kernel<MODE, STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, rs_probe_kernel<MODE, STAGES>));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int rep = 0; rep < 4; rep++) {
        CK(cudaMemset(clk, 0, (2 + 2 * (size_t)ctas) * sizeof(unsigned long long)));
        CK(cudaEventRecord(a));
        if (launch_clusters) {
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute attr[1];
            cfg.gridDim = dim3(ctas);
            cfg.blockDim = dim3(threads);
            cfg.dynamicSmemBytes = smem;
            attr[0].id = cudaLaunchAttributeClusterDimension;
            attr[0].val.clusterDim.x = 2;
            attr[0].val.clusterDim.y = 1;
            attr[0].val.clusterDim.z = 1;
            cfg.attrs = attr;
            cfg.numAttrs = 1;
            CK(cudaLaunchKernelEx(&cfg, rs_probe_kernel<MODE, STAGES>, kblocks, src, out, clk));
        } else {
            rs_probe_kernel<MODE, STAGES><<<ctas, threads, smem>>>(kblocks, src, out, clk);
        }
        CK(cudaGetLastError());
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0.0f;
        CK(cudaEventElapsedTime(&ms, a, b));
        unsigned long long h[2];
        CK(cudaMemcpy(h, clk, sizeof h, cudaMemcpyDeviceToHost));
        const double flop = 2.0 * ctas * (double)kblocks * rows * cols * 128.0;
        if (rep > 0)
            printf("%-6s %-8s stages %d rep %d: %8.3f ms %7.1f TFLOP/s at %5.0f MHz (%5.3f TFLOP/s a MHz) regs %d\n", name,
                   src ? "loads" : "no-loads", STAGES, rep, ms, flop / (ms * 1e-3) / 1e12, h[1] ? 1e3 * h[0] / h[1] : 0.0,
                   flop / (ms * 1e-3) / 1e12 / (h[1] ? 1e3 * h[0] / h[1] : 1.0), fa.numRegs);
    }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* a run killed by its time limit keeps its lines */
    const int kblocks = argc > 1 ? atoi(argv[1]) : 40000;
    const int rs_stages = argc > 2 ? atoi(argv[2]) : 4;
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    float *out;
    uint8_t *src;
    unsigned long long *clk;
    CK(cudaMalloc(&out, (size_t)sms * PROBE_THREADS(4) * sizeof(float))); /* a float per thread of the widest CTA */
    CK(cudaMalloc(&src, SRC_BYTES));
    CK(cudaMalloc(&clk, (2 + 2 * (size_t)sms) * sizeof(unsigned long long)));
    if (kblocks < 2 || kblocks % 2 || (rs_stages != 3 && rs_stages != 4)) return 1;
    const int only_quad = argc > 3 && atoi(argv[3]) == 1, only_wide = argc > 3 && atoi(argv[3]) == 2;
    const int fill = argc > 4 ? atoi(argv[4]) : 0;
    launch_clusters = argc > 5 && atoi(argv[5]) == 1;
    if (launch_clusters && sms % 2) return 1;
    CK(cudaMemcpyToSymbol(fill_mode, &fill, sizeof fill));
    fill_source<<<264, 256>>>(src, SRC_BYTES);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    for (int round = 0; round < 2; round++) {
        if (run<0, 4>("wide", sms, kblocks, NULL, out, clk) || run<0, 4>("wide", sms, kblocks, src, out, clk)) return 1;
        if (only_wide) continue;
        if (run<4, 3>("quad", sms, kblocks, NULL, out, clk) || run<4, 3>("quad", sms, kblocks, src, out, clk) ||
            run<4, 4>("quad", sms, kblocks, src, out, clk))
            return 1;
        if (only_quad) continue;
        if (rs_stages == 4 ? (run<1, 4>("rs256", sms, kblocks, NULL, out, clk) || run<1, 4>("rs256", sms, kblocks, src, out, clk) ||
                              run<2, 4>("ss256", sms, kblocks, NULL, out, clk) || run<3, 4>("rspipe", sms, kblocks, NULL, out, clk) ||
                              run<3, 4>("rspipe", sms, kblocks, src, out, clk))
                           : (run<1, 3>("rs256", sms, kblocks, NULL, out, clk) || run<1, 3>("rs256", sms, kblocks, src, out, clk) ||
                              run<3, 3>("rspipe", sms, kblocks, src, out, clk)))
            return 1;
    }
    printf("rs_tile_probe: %d CTAs%s, %d K blocks each\n", sms, launch_clusters ? " in 2-CTA clusters" : "", kblocks);
    return 0;
}
