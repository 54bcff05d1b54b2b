/* The tile machinery of the grouped FP8 GEMM core, as device functions any kernel can drive with
 * its own schedule: the standalone grouped GEMM (gemm.cu) and the fused mega-MoE kernel
 * (fused.cu) both call mm_tile_mainloop() and differ only in where a tile's rows come from and
 * what the epilogue does with the accumulators.
 *
 * Version 5: Hopper warpgroup MMA (wgmma.mma_async m64n128k32, e4m3 x e4m3 -> f32, both
 * operands from shared memory through descriptors) fed by a 4-stage pipeline: the weight block
 * of a stage by one TMA (cp.async.bulk.tensor, completion on the stage's mbarrier), the
 * activation rows and every scale the block's promotion needs by cp.async (rows are gathered
 * through a row table, from wherever the dispatch left them). The MMAs of block kb run
 * asynchronously while the threads wait for block kb+1's data, so at decode sizes (bound by
 * HBM, measured) the tensor cores and the scale loads stay off the critical path. A tile is BM (128) rows x BN
 * (128) columns; warpgroup g owns rows 64g..64g+63. Every thread loads; the stage's A (128 x 128 B) and B (128 x 128 B) are stored K-major
 * with the 128-byte swizzle that the descriptors name (16-byte chunk c of row r at chunk
 * c ^ (r % 8)), so the tensor cores read them without bank conflicts.
 *
 * Numerics (recipe.md step 3): per 128-wide K block four k32 wgmmas sum into fresh FP32
 * registers (scale-d 0 on the first), then the block sum is promoted into the accumulator with
 * one FMA by (a_scale * w_scale), K blocks in order. Every path that uses this function
 * therefore produces the same FP32 bits per element. */
#ifndef MEGAMOE_GEMM_TILE_CUH
#define MEGAMOE_GEMM_TILE_CUH

#include <stdint.h>

#include "gemm_schedule.h"

#define MM_TILE_THREADS 256
#ifndef MM_TILE_STAGES /* overridable for experiments (-DMM_TILE_STAGES=...) */
#define MM_TILE_STAGES 4
#endif
#define MM_TILE_A_STAGE (MM_GEMM_BM * MM_GEMM_BK)
#define MM_TILE_B_STAGE (MM_GEMM_BN * MM_GEMM_BK)
/* per stage after A and B: the block's A scales [BM] and weight scale, padded to 1 KB so every
 * stage starts on a 1024-byte boundary (the swizzle pattern repeats every 8 rows of 128 B) */
#define MM_TILE_SCALE_BYTES 1024
#define MM_TILE_STAGE_BYTES (MM_TILE_A_STAGE + MM_TILE_B_STAGE + MM_TILE_SCALE_BYTES)
/* + 1 KB: the stages start on a 1024-byte boundary */
#define MM_TILE_SMEM_BYTES (MM_TILE_STAGES * MM_TILE_STAGE_BYTES + 1024)
#define MM_TILE_ACC 64 /* FP32 accumulators per thread: 64 x 128 per warpgroup / 128 threads */

/* Where a tile's A rows live: one FP8 row pointer and one scale pointer (K/128 floats) per row
 * of the tile, in shared memory. Rows past `rows` must still point at a readable row (the loader
 * clamps to row 0); their results are never stored. */
typedef struct {
    const uint8_t *row[MM_GEMM_BM];
    const float *scale[MM_GEMM_BM];
} mm_tile_rows;

/* The first 1024-byte boundary at or after `smem` (shared-window addresses). */
__device__ __forceinline__ uint8_t *mm_tile_stages(uint8_t *smem)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(smem);
    return smem + ((1024u - (a & 1023u)) & 1023u);
}

/* This thread's place in the tile: accumulator i holds row mm_acc_row(i), column mm_acc_col(i);
 * i and i + 1 (i even) are adjacent columns of one row, and a thread holds two rows (i & 2 picks
 * the second). Warp w of warpgroup g owns rows 64g + 16(w % 4) .. +15, all 128 columns (the
 * wgmma D fragment); the 4 lanes of a quad share their rows. */
__device__ __forceinline__ int mm_acc_row(int i)
{
    int lane = threadIdx.x % 32, w = (threadIdx.x / 32) % 4, g = threadIdx.x / 128;
    return 64 * g + 16 * w + lane / 4 + 8 * ((i >> 1) & 1);
}

__device__ __forceinline__ int mm_acc_col(int i)
{
    int lane = threadIdx.x % 32;
    return 8 * (i >> 2) + 2 * (lane % 4) + (i & 1);
}

/* 4-byte copy (scales), tracked by the same cp.async groups as the rows. */
__device__ __forceinline__ void mm_cp_async4(void *smem, const void *gmem)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(gmem) : "memory");
}

__device__ __forceinline__ void mm_cp_async16(void *smem, const void *gmem)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}

__device__ __forceinline__ void mm_cp_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N> __device__ __forceinline__ void mm_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* wgmma shared-memory descriptor: K-major, 128-byte swizzle, 8-row groups 1024 bytes apart. */
__device__ __forceinline__ uint64_t mm_wgmma_desc(const uint8_t *p)
{
    uint64_t a = (uint64_t)__cvta_generic_to_shared(p);
    return ((a & 0x3ffffu) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

/* d (+)= A[64 x 32] * B[128 x 32]^T for this warpgroup; scale_d 0 starts a fresh sum. */
__device__ __forceinline__ void mm_wgmma_64x128x32(float *d, uint64_t a, uint64_t b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(a), "l"(b), "r"(scale_d));
}

/* The weight side of a tile: TMA copies its [BN][128] blocks. */
typedef struct {
    const void *map;     /* CUtensorMap over [rows][K] FP8, box 128 x 128, 128-byte swizzle */
    int row0;            /* the tile's first weight row in the map */
    const float *scale;  /* the tile's K/128 block scales */
} mm_tile_b;

/* One mbarrier per stage, completed by the TMA of that stage's weight block. */
typedef struct {
    uint64_t full[MM_TILE_STAGES];
} mm_tile_pipe;

/* Called by thread 0 once per kernel, before a __syncthreads. */
__device__ __forceinline__ void mm_tile_pipe_init(mm_tile_pipe *p)
{
    for (int s = 0; s < MM_TILE_STAGES; s++) {
        unsigned a = (unsigned)__cvta_generic_to_shared(&p->full[s]);
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(a) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* Waits for a stage's weight block. A TMA that never lands is a kernel bug, not a peer stall:
 * after 10 s the wait gives up rather than hang (the block's garbage fails every check). No
 * trap here: a trap inside the MMA pipeline makes ptxas wait for every wgmma (C7518). */
__device__ __forceinline__ void mm_tile_wait_full(mm_tile_pipe *p, int s, uint32_t parity)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(&p->full[s]);
    uint64_t start = 0;
    for (uint32_t spin = 0;; spin++) {
        uint32_t done;
        asm volatile("{\n.reg .pred q;\nmbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, q;\n}\n"
                     : "=r"(done) : "r"(a), "r"(parity) : "memory");
        if (done) return;
        if ((spin & 1023u) == 0) {
            uint64_t now;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
            if (!start) start = now;
            else if (now - start > 10000000000ull) return;
        }
    }
}

/* One K block (128 columns) into a stage: the tile's A rows and the block's scales by cp.async
 * (every thread; rows are gathered through the row table), the weight block by one TMA
 * (thread 0), both swizzled. */
__device__ __forceinline__ void mm_tile_load_stage(uint8_t *stage, mm_tile_pipe *p, int s,
                                                   const mm_tile_rows *a, int rows, const mm_tile_b &b, int kb)
{
    uint8_t *sa = stage, *sb = stage + MM_TILE_A_STAGE;
    float *sc = (float *)(sb + MM_TILE_B_STAGE); /* [BM] A scales, then the weight scale */
    int a_chunks = ((rows + 7) / 8) * 8 * 8; /* rows past the last 8-row group are never stored */
    for (int c = threadIdx.x; c < a_chunks; c += MM_TILE_THREADS) {
        int r = c / 8, part = c % 8;
        const uint8_t *src = a->row[r < rows ? r : 0];
        mm_cp_async16(sa + r * 128 + ((part ^ (r & 7)) * 16), src + (size_t)kb * MM_GEMM_BK + part * 16);
    }
    if (threadIdx.x < rows) mm_cp_async4(sc + threadIdx.x, a->scale[threadIdx.x] + kb);
    if (threadIdx.x == MM_TILE_THREADS - 1) mm_cp_async4(sc + MM_GEMM_BM, b.scale + kb);
    if (threadIdx.x == 0) {
        unsigned bar = (unsigned)__cvta_generic_to_shared(&p->full[s]);
        unsigned dst = (unsigned)__cvta_generic_to_shared(sb);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "n"(MM_TILE_B_STAGE)
                     : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                     "[%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
                     "l"(b.map), "r"(kb * MM_GEMM_BK), "r"(b.row0), "r"(bar)
                     : "memory");
    }
}

/* Block kb is in its stage for every thread: this thread's cp.async group of it is complete
 * (at most `pending` newer groups in flight), then the weight block's barrier. */
template <int pending>
__device__ __forceinline__ void mm_tile_wait_block(mm_tile_pipe *pipe, uint32_t &phase, int s)
{
    mm_cp_async_wait<pending>();
    /* the generic-proxy writes of cp.async, made visible to wgmma's async-proxy reads */
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    mm_tile_wait_full(pipe, s, (phase >> s) & 1u);
    phase ^= 1u << s;
}

/* Issues (does not wait for) the four k32 MMAs of one stage into blk, a fresh block sum. */
__device__ __forceinline__ void mm_tile_issue_mma(const uint8_t *stage, float blk[MM_TILE_ACC])
{
    const int g = threadIdx.x / 128;
    const uint8_t *sa = stage + g * 64 * 128, *sb = stage + MM_TILE_A_STAGE;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int ks = 0; ks < MM_GEMM_BK / 32; ks++)
        mm_wgmma_64x128x32(blk, mm_wgmma_desc(sa + ks * 32), mm_wgmma_desc(sb + ks * 32), ks > 0);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* acc = A[rows][K] x W[BN][K]^T with the recipe's per-block promotion. `stages` is
 * mm_tile_stages() of the kernel's dynamic shared memory, `pipe` its stage barriers and `phase`
 * their parity bits (kept by the caller across calls, starting at 0). Called by all 256 threads
 * after they wrote `a`; begins with a __syncthreads (publishes `a`; the stages may still hold
 * the previous tile) and leaves every stage free. Rows past `rows` hold garbage in the
 * accumulators and must not be stored.
 * Iteration kb: wait for block kb+1's data while block kb's MMAs run; then promote block kb;
 * one barrier (everyone is done with stage kb and sees block kb+1); issue block kb+1's MMAs and
 * refill stage kb with block kb+S. */
__device__ __forceinline__ void mm_tile_mainloop(uint8_t *stages, mm_tile_pipe *pipe, uint32_t &phase,
                                                 const mm_tile_rows *a, int rows, const mm_tile_b &b, int k,
                                                 float acc[MM_TILE_ACC])
{
    const int kblocks = k / MM_GEMM_BK;
    /* Both warpgroups always issue their MMAs, also one that holds no valid row: a branch
     * around wgmma that ptxas cannot prove warpgroup-uniform makes it serialize every wgmma
     * (C7518, measured: a wait after each one), which costs far more than the idle MMAs. */
    float blk[MM_TILE_ACC];
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = blk[i] = 0.0f;
    const int r_lo = mm_acc_row(0), r_hi = mm_acc_row(2);
    const bool valid_lo = r_lo < rows, valid_hi = r_hi < rows;

    __syncthreads(); /* the caller's row table is written; the previous tile is done with the stages */
#pragma unroll
    for (int s = 0; s < MM_TILE_STAGES - 1; s++) {
        if (s < kblocks) mm_tile_load_stage(stages + s * MM_TILE_STAGE_BYTES, pipe, s, a, rows, b, s);
        mm_cp_async_commit();
    }
    mm_tile_wait_block<MM_TILE_STAGES - 2>(pipe, phase, 0);
    __syncthreads();
    mm_tile_issue_mma(stages, blk);
    if (MM_TILE_STAGES - 1 < kblocks)
        mm_tile_load_stage(stages + (MM_TILE_STAGES - 1) * MM_TILE_STAGE_BYTES, pipe, MM_TILE_STAGES - 1, a,
                           rows, b, MM_TILE_STAGES - 1);
    mm_cp_async_commit();

    for (int kb = 0; kb < kblocks; kb++) {
        const int s = kb % MM_TILE_STAGES, s_next = (kb + 1) % MM_TILE_STAGES;
        if (kb + 1 < kblocks) mm_tile_wait_block<MM_TILE_STAGES - 2>(pipe, phase, s_next);
        {
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            /* promotion: (sa * sw) * block sum, in K order; invalid rows get 0 */
            const float *sc = (const float *)(stages + s * MM_TILE_STAGE_BYTES + MM_TILE_A_STAGE + MM_TILE_B_STAGE);
            float sw = sc[MM_GEMM_BM];
            float s_lo = valid_lo ? sc[r_lo] * sw : 0.0f, s_hi = valid_hi ? sc[r_hi] * sw : 0.0f;
#pragma unroll
            for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = fmaf((i & 2) ? s_hi : s_lo, blk[i], acc[i]);
        }
        __syncthreads(); /* stage kb is free; block kb+1 is visible to every thread */
        if (kb + 1 < kblocks) mm_tile_issue_mma(stages + s_next * MM_TILE_STAGE_BYTES, blk);
        if (kb + MM_TILE_STAGES < kblocks)
            mm_tile_load_stage(stages + s * MM_TILE_STAGE_BYTES, pipe, s, a, rows, b, kb + MM_TILE_STAGES);
        mm_cp_async_commit();
    }
    /* nothing is in flight here; said explicitly so ptxas need not add waits of its own */
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

#endif
