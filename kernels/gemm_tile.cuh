/* The tile machinery of the grouped FP8 GEMM core, as device functions any kernel can drive with
 * its own schedule: the standalone grouped GEMM (gemm.cu) and the fused mega-MoE kernel
 * (fused.cu) both run one producer warpgroup and two consumer warpgroups over the same stage
 * ring and differ only in where a tile's rows come from and what the epilogue does. (gemm.cu's
 * wide form, 192 x 128 on three consumer warpgroups, has its own loops and shares the
 * barriers, descriptors, MMAs and promotion below.)
 *
 * Version 12: warp specialization; A by TMA for large tiles of contiguous rows; in large tiles
 * one block's MMAs in flight while the previous one is promoted; 2-CTA clusters that share A
 * blocks (standalone GEMM). A CTA has 384 threads (registers split 64 / 216 by setmaxnreg):
 *   warpgroup 0 (producer)   fills the stage ring: each stage holds one 128-wide K block of a
 *                            tile: the A rows (one TMA when the tile has more than 64 rows and
 *                            they are contiguous, else cp.async gathered through a row table from
 *                            wherever the rows live), their scales and the weight block's scale
 *                            (cp.async), and the weight block (one TMA). Its 128 threads report
 *                            their copies on the stage's `full` mbarrier (cp.async.mbarrier.arrive)
 *                            and thread 0 adds the TMA's byte count, so the consumers wait on one
 *                            barrier for everything. A dual pass (mm_tile_produce_dual, the
 *                            fused kernel) loads two weight blocks per A block, in two stages.
 *   warpgroups 1, 2 (math)   wait for `full`, run wgmma m64n128k32 (e4m3 x e4m3 -> f32, both
 *                            operands from shared memory) on rows 64g..64g+63, read the block's
 *                            scales, free the stage (`empty`, one arrival per warp) and promote.
 * In a pair (2-CTA cluster, mm_tile_a_map.pair): both CTAs run tiles on the same rows and
 * adjacent columns; each producer loads 64 of the A block's rows into both CTAs' stages (TMA
 * multicast), so `full` expects the whole A block in both, and a stage is free only once the
 * math warps of both CTAs released it (each arrives on both `empty` barriers). A and B traffic
 * from L2 per block drops from 32 to 24 KB.
 * The producer runs up to MM_TILE_STAGES blocks ahead, also across passes and tiles: it never
 * waits for the math of a block it loaded, and the math never waits for a refill it issued, so
 * the weight stream is not broken at tile boundaries (v6 drained and refilled the pipeline per
 * 128-column pass). No CTA-wide barrier per block.
 * Stage layout: A (128 x 128 B) and B (128 x 128 B) K-major with the 128-byte swizzle the
 * descriptors name (16-byte chunk c of row r at chunk c ^ (r % 8)), then 1 KB of scales.
 *
 * Tiles reach the math warpgroups through a two-slot item ring (mm_item_ring): the producer
 * publishes a tile's description and frees nothing until the consumers release the slot, so the
 * description can live in shared memory next to the stages.
 *
 * FP4 weights (gemm_fp4.cuh) reach the stages as codes and exponents, which the math warps
 * expand to an FP8 block and its scale as soon as the block is there (template parameter FP4 of
 * the consume paths: mm_tile_wait_full); from there on the FP8 path.
 *
 * Numerics (recipe.md step 3): per 128-wide K block four k32 wgmmas sum into fresh FP32
 * registers (scale-d 0 on the first), then the block sum is promoted into the accumulator with
 * one FMA by (a_scale * w_scale), K blocks in order. Every path that uses these functions
 * therefore produces the same FP32 bits per element. */
#ifndef MEGAMOE_GEMM_TILE_CUH
#define MEGAMOE_GEMM_TILE_CUH

#include <stdint.h>

#include "fused_schedule.h" /* the fused kernel's extra rows ride in the core's stages */
#include "ptx.cuh"
#include "types.h" /* mm_pipe_wait */

#define MM_WGMMA_WAIT(n, site)                                                   \
    do {                                                                         \
        MM_STEP(0x0400u | (site));                                               \
        asm volatile("wgmma.wait_group.sync.aligned " #n ";" ::: "memory");     \
        MM_STEP_PAST(0x0400u | (site));                                          \
    } while (0)

#define MM_TILE_THREADS 384
#define MM_PRODUCER_THREADS 128
#define MM_CONSUMER_THREADS 256
#define MM_CONSUMER_WARPS (MM_CONSUMER_THREADS / 32)
/* Five stages: both kernels have room for them (the standalone GEMM beside its 32 KB of epilogue
 * boxes, the fused kernel beside its 33 KB staging area); three against four cost 6-26% at large
 * row counts. */
#define MM_TILE_STAGES 5
#define MM_TILE_A_STAGE (MM_GEMM_BM * MM_GEMM_BK)
#define MM_TILE_B_STAGE (MM_GEMM_BN * MM_GEMM_BK)
/* per stage after A and B: the block's A scales [BM] and weight scale, padded to 1 KB so every
 * stage starts on a 1024-byte boundary (the swizzle pattern repeats every 8 rows of 128 B) */
#define MM_TILE_SCALE_BYTES 1024
/* then the rows of a tiny tile (one 8-row group of 128 B): a compact dual pass
 * (mm_tile_produce with `compact`) puts its second weight block in the A area and its rows here;
 * a full tile's extra rows (`extra`) come here too, their scales in the scale area from float
 * MM_TILE_EXTRA_SCALES */
#define MM_TILE_EXTRA_SCALES (MM_GEMM_BM + 8)
#define MM_TILE_TINY_A (MM_TILE_TINY_ROWS * MM_GEMM_BK)
#define MM_TILE_STAGE_BYTES (MM_TILE_A_STAGE + MM_TILE_B_STAGE + MM_TILE_SCALE_BYTES + MM_TILE_TINY_A)
/* + 1 KB: the stages start on a 1024-byte boundary */
#define MM_TILE_SMEM_BYTES (MM_TILE_STAGES * MM_TILE_STAGE_BYTES + 1024)
#define MM_TILE_ACC 64 /* FP32 accumulators per math thread: 64 x 128 per warpgroup / 128 threads */

#include "debug.cuh" /* the test and diagnostic builds' hooks (steps, ring audit, injected stalls) */

/* named barriers (0 is __syncthreads) */
#define MM_BAR_PRODUCER 1
#define MM_BAR_CONSUMER 2

/* Where a tile's A rows live: one FP8 row pointer and one scale pointer (K/128 floats) per row
 * of the tile, in shared memory, then those of its extra rows (the fused kernel's folded rows,
 * mm_tile_produce's `extra`). Rows past `rows` must still point at a readable row (the loader
 * clamps to row 0); their results are never stored. */
typedef struct {
    const uint8_t *row[MM_GEMM_BM + MM_TILE_TINY_ROWS];
    const float *scale[MM_GEMM_BM + MM_TILE_TINY_ROWS];
} mm_tile_rows;

/* The weight side of a tile: TMA copies its [BN][128] blocks. */
typedef struct {
    const void *map;     /* CUtensorMap over [rows][K] FP8, box 128 x 128, 128-byte swizzle (FP4:
                          * over the codes [rows][K / 2], box 64 B x 128 rows) */
    int row0;            /* the tile's first weight row in the map */
    const float *scale;  /* the tile's K/128 block scales (FP4: the blocks' words, fp4.h
                          * mm_fp4_block_word) */
    const uint8_t *exps; /* FP4: the exponents of the map's rows, [rows][K / 32] */
    int exp_row_bytes;   /* FP4: K / 32 */
} mm_tile_b;

/* FP4 weights' place in a weight block's 16 KB B area (gemm_fp4.cuh): the codes (64 B a row) and
 * the exponents (4 B a row) at its end, which the math's expansion overwrites with the FP8 block */
#define MM_FP4_CODE_BYTES (MM_GEMM_BK / 2)                      /* a row's codes in a K block */
#define MM_FP4_BLOCK_CODE_BYTES (MM_GEMM_BN * MM_FP4_CODE_BYTES) /* a block's codes: 8 KB */
#define MM_FP4_EXP_BYTES (MM_GEMM_BN * 4)                         /* a block's exponents: 512 B */
#define MM_FP4_EXPS_AT (MM_GEMM_BN * MM_GEMM_BK - MM_FP4_EXP_BYTES)
#define MM_FP4_CODES_AT (MM_FP4_EXPS_AT - MM_FP4_BLOCK_CODE_BYTES)

/* The A side of a tile when its rows are contiguous in memory: TMA copies its [128][128] blocks
 * (map NULL: the rows are gathered through the row table). */
typedef struct {
    const void *map; /* mm_rows_map_create's pair: box 128 x 128, then box 64 x 128; 128-byte swizzle */
    int row0;        /* the tile's first row in the map; rows past the tile's count are loaded too */
    int pair;        /* 1: a 2-CTA cluster on the same rows, each CTA loads 64 of them into both */
} mm_tile_a_map;

/* The stage ring's barriers. full[s]: 128 producer arrivals (each when its cp.asyncs of the
 * stage landed) + 1 arrival with the TMA's expected bytes (in a pair, half of A comes from the
 * other CTA's multicast). empty[s]: one arrival per math warp of every CTA of the pair. */
typedef struct {
    uint64_t full[MM_TILE_STAGES];
    uint64_t empty[MM_TILE_STAGES];
} mm_tile_pipe;

/* Position in the stage ring: both roles walk the same sequence of blocks, each with its own
 * copy of this. `phase` is the parity of the ring's current round; `depth` the stages it uses
 * (at most MM_TILE_STAGES). */
typedef struct {
    int stage;
    uint32_t phase;
    int depth;
} mm_ring;

/* `mm_ring ring = MM_RING_START(depth);`: a ring at its start. The depth must be a compile-time
 * constant where the ring is made (a kernel form's, fused.cu FUSED_RING_DEPTH): the ring is a
 * local that never leaves the inlined tile functions, so the compare in mm_ring_advance folds to
 * that constant. A depth held at run time (in a register or read from shared memory at each
 * advance) spilled the producer's 64 registers. */
#define MM_RING_START(depth) {0, 0u, (depth)}

__device__ __forceinline__ void mm_ring_advance(mm_ring &r)
{
    if (++r.stage == r.depth) {
        r.stage = 0;
        r.phase ^= 1u;
    }
}

/* The warpgroup of this thread, as a value ptxas knows is warp-uniform (a role branch on it does
 * not make ptxas serialize the wgmmas behind it). */
__device__ __forceinline__ int mm_warpgroup()
{
    return __shfl_sync(0xffffffffu, (int)(threadIdx.x / 128), 0);
}

/* The math warp index 0..7, read from the hardware each time (a value ptxas would otherwise keep
 * live across the whole mainloop, where registers are scarce). */
__device__ __forceinline__ int mm_math_warp()
{
    unsigned w;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(w));
    return (int)(w / 32) - MM_PRODUCER_THREADS / 32;
}

/* The math thread index 0..255 (warpgroups 1 and 2). */
__device__ __forceinline__ int mm_math_thread()
{
    return (int)threadIdx.x - MM_PRODUCER_THREADS;
}

__device__ __forceinline__ void mm_named_barrier(int id, int threads)
{
    MM_STEP(0x0100u | id);
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
    MM_STEP_PAST(0x0100u | id);
}

/* A named barrier that also ANDs a predicate over its `threads`: every one gets the same answer. */
__device__ __forceinline__ bool mm_named_barrier_and(int id, int threads, bool pred)
{
    uint32_t all;
    MM_STEP(0x0200u | id);
    asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.and.pred q, %2, %3, p;\n"
                 "selp.u32 %0, 1, 0, q;\n}\n"
                 : "=r"(all) : "r"((uint32_t)pred), "r"(id), "r"(threads) : "memory");
    MM_STEP_PAST(0x0200u | id);
    return all != 0;
}

/* Register split of the 384-thread CTA (168 per thread at launch; setmaxnreg moves registers
 * within the CTA's pool, so the split must fit 384 x 168 = 64512): the math warpgroups hold an
 * accumulator and two block sums (192 FP32 values) per thread, the producer its row pointers.
 * 128 x 64 + 256 x 216 = 63488; with less for the producer ptxas spills in the fused kernel.
 * Every warp of a warpgroup executes these together. */
#define MM_PRODUCER_REGS 64
#define MM_MATH_REGS 216
#define MM_LAUNCH_REGS 168
/* FP4 weights' producer (the exponents' addresses beside the row pointers) takes the rest of the
 * pool: 128 x 72 + 256 x 216 = 64512 (with 64, ptxas spilled in the fused kernel's FP4 form) */
#define MM_FP4_PRODUCER_REGS 72
static_assert(128 * MM_FP4_PRODUCER_REGS + 256 * MM_MATH_REGS <= 384 * MM_LAUNCH_REGS, "the FP4 split fits the pool");

#ifdef __CUDACC__
/* Host side: a kernel that uses the split must have been given exactly MM_LAUNCH_REGS per thread
 * by ptxas (fewer: the math warpgroups' setmaxnreg.inc would wait forever). */
static inline cudaError_t mm_regs_split_ok(const void *kernel, int launch_regs = MM_LAUNCH_REGS)
{
    cudaFuncAttributes fa;
    cudaError_t e = cudaFuncGetAttributes(&fa, kernel);
    if (e != cudaSuccess) return e;
    return fa.numRegs == launch_regs ? cudaSuccess : cudaErrorInvalidKernelImage;
}
#endif

template <int REGS = MM_PRODUCER_REGS>
__device__ __forceinline__ void mm_regs_producer()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}

template <int REGS = MM_MATH_REGS>
__device__ __forceinline__ void mm_regs_math()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}
/* Back to the launch split, for a kernel whose later phases run all 384 threads alike: the
 * producer's increase waits until the math warpgroups have given theirs back. Only after a
 * barrier of all 384 threads that follows every math warp's mm_regs_math: else a producer done
 * early can take the registers a late math warp's increase still waits for, and that warp never
 * reaches the math's barriers (a hang no clock bounds; fused.cu). */
__device__ __forceinline__ void mm_regs_restore(bool producer)
{
    if (producer) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(MM_LAUNCH_REGS));
    else asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(MM_LAUNCH_REGS));
}

/* The first 1024-byte boundary at or after `smem` (shared-window addresses). */
__device__ __forceinline__ uint8_t *mm_tile_stages(uint8_t *smem)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(smem);
    return smem + ((1024u - (a & 1023u)) & 1023u);
}

/* This math thread's place in the tile: accumulator i holds row mm_acc_row(i), column
 * mm_acc_col(i); i and i + 1 (i even) are adjacent columns of one row, and a thread holds two
 * rows (i & 2 picks the second). Warp w of math warpgroup g owns rows 64g + 16(w % 4) .. +15,
 * all 128 columns (the wgmma D fragment); the 4 lanes of a quad share their rows. */
__device__ __forceinline__ int mm_acc_row(int i)
{
    int t = mm_math_thread();
    return 64 * (t / 128) + mm_frag_row((t / 32) % 4, t % 32, i);
}

__device__ __forceinline__ int mm_acc_col(int i)
{
    return mm_frag_col(threadIdx.x % 32, i) + (i & 1);
}

/* Set once a pipeline wait of this CTA expired, to the mm_pipe_wait that did (mm_tile_pipe_init
 * clears it): the CTA's other waits then give up at their next clock check, so a broken pipeline
 * costs one expiry, not one per K block and item (a Flash item alone has 32 blocks: minutes,
 * i.e. a hang). The fused kernel and the grouped GEMM read it at their end and report it. */
static __shared__ uint32_t mm_stage_wait_expired;


/* The clock check of the CTA's bounded waits (mm_mbar_wait, mm_handoff_wait), made every so many
 * failed polls: true when the wait should give up, `limit` (1024-ns units) after its first check
 * or as soon as another wait of the CTA expired; the first to expire records `what`. start: 0
 * until the first check (a reading is never 0). Time in units of 1024 ns, 32 bits (4398 s;
 * --timeout-ms is at most 3600 s): one register less than a 64-bit start in every wait loop of
 * the producer's 64. */
__device__ __forceinline__ bool mm_wait_gives_up(uint32_t &start, uint32_t limit, uint32_t what)
{
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    const uint32_t t = (uint32_t)(now >> 10) | 1u;
    if (!start) {
        start = t;
        return false;
    }
    if (*(volatile uint32_t *)&mm_stage_wait_expired) return true;
    if (t - start > limit) {
        mm_stage_wait_expired = what;
        return true;
    }
    return false;
}

/* Waits until the barrier's phase with this parity completed; false after `limit_ns`, or soon
 * after another wait of the CTA expired. `what` (an mm_pipe_wait) names the wait in the report.
 * No trap here: a trap inside the MMA pipeline makes ptxas wait for every wgmma (C7518). A false
 * return is per thread: where it decides control flow, the threads must agree first
 * (mm_named_barrier_and), or those that go on hang at the next barrier of the ones that left.
 * cluster: acquire at cluster scope, for a barrier another CTA of the cluster arrives on after
 * writing shared memory this thread then reads (gemm.cu's pair claims). */
__device__ __forceinline__ bool mm_mbar_wait_at(unsigned a, uint32_t parity, uint64_t limit_ns, uint32_t what,
                                                bool cluster = false)
{
    const uint32_t limit = (uint32_t)(limit_ns >> 10); /* mm_wait_gives_up's units */
    uint32_t start = 0;
    MM_STEP(0x0300u | what);
    for (uint32_t spin = 0;; spin++) {
        uint32_t done;
        if (cluster)
            asm volatile("{\n.reg .pred q;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 q, [%1], %2;\n"
                         "selp.u32 %0, 1, 0, q;\n}\n"
                         : "=r"(done) : "r"(a), "r"(parity) : "memory");
        else
            asm volatile("{\n.reg .pred q;\nmbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2;\n"
                         "selp.u32 %0, 1, 0, q;\n}\n"
                         : "=r"(done) : "r"(a), "r"(parity) : "memory");
        if (done) {
            MM_STEP_PAST(0x0300u | what);
            return true;
        }
        if ((spin & 1023u) == 0 && mm_wait_gives_up(start, limit, what)) {
            MM_STEP(0x0390u | what);
            return false;
        }
    }
}

/* The same on the barrier's shared-window address (mm_mbar_wait_at: a loop that computed it once
 * keeps it in a register; from a generic pointer, each wait of a cluster launch reads the CTA's
 * cluster id again, S2UR SR_CgaCtaId, on the path from one K block to the next). */
__device__ __forceinline__ bool mm_mbar_wait(uint64_t *bar, uint32_t parity, uint64_t limit_ns, uint32_t what,
                                             bool cluster = false)
{
    return mm_mbar_wait_at((unsigned)__cvta_generic_to_shared(bar), parity, limit_ns, what, cluster);
}

/* A stage barrier that never completes is a kernel bug (the roles of one CTA wait for nothing
 * outside it while a tile runs): after 10 s the wait gives up rather than hang, and the block's
 * garbage fails every check. */
#define MM_STAGE_WAIT_NS 10000000000ull

#ifdef MM_TILE_HANDOFF
/* The fused kernel's per-I-block hand-off (fused.cu, its HANDOFF form): while the producer
 * streams a GEMM2 item whose row tile was not complete at its claim, mm_handoff_word_s points at
 * the tile's gemm1_done word, a bit per I block (else NULL), and each K block kb first waits
 * (producer thread 0, acquire, bounded: MM_HANDOFF_WAIT_NS) for I block kb's bit; then the proxy
 * fence for the rows' TMA, and the producer's barrier orders the gathering threads after it. In
 * shared memory, read again at each block: a register held for it spilled the producer. */
static __shared__ const uint32_t *mm_handoff_word_s;
/* 1 s longer than the stage waits: a GEMM1 item that stalls in another CTA is that CTA's stage wait
 * to report (the cause), not this one (its consequence); this loop also checks its clock far more
 * often than a stage wait, so with the same limit it expired first (the injected-stall test). */
#define MM_HANDOFF_WAIT_NS (MM_STAGE_WAIT_NS + 1000000000ull)
__device__ __forceinline__ void mm_handoff_wait(int kb, int pt)
{
    const uint32_t *w = *(const uint32_t *const volatile *)&mm_handoff_word_s;
    if (!w) return;
    if (pt == 0) {
        uint32_t start = 0;
        for (uint32_t spin = 0;; spin++) {
            uint32_t seen;
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(w) : "memory");
            if ((seen >> kb) & 1u) break;
            if ((spin & 63u) == 0 && mm_wait_gives_up(start, (uint32_t)(MM_HANDOFF_WAIT_NS >> 10), MM_PIPE_WAIT_GEMM1_BLOCK))
                break;
        }
        asm volatile("fence.proxy.async.global;" ::: "memory");
    }
    mm_named_barrier(MM_BAR_PRODUCER, MM_PRODUCER_THREADS);
}
#endif

/* Called by thread 0 once per kernel, before a __syncthreads (and, in a cluster, before the
 * cluster barrier that precedes any remote arrival). cluster: CTAs sharing the A blocks (1 or
 * 2); a stage is free once the math warps (consumer_warps a CTA) of all of them released it. */
__device__ __forceinline__ void mm_tile_pipe_init(mm_tile_pipe *p, int cluster, int consumer_warps = MM_CONSUMER_WARPS,
                                                  int full_arrivals = MM_PRODUCER_THREADS + 1)
{
    mm_stage_wait_expired = 0u;
#ifdef MM_RING_AUDIT
    for (int s = 0; s < MM_TILE_STAGES; s++) mm_ring_readers[s] = 0;
#endif
    for (int s = 0; s < MM_TILE_STAGES; s++) {
        mm_mbar_init(&p->full[s], full_arrivals);
        mm_mbar_init(&p->empty[s], consumer_warps * cluster);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* d = A[64 x 128] * B[64 x 128]^T for one K block, four k32 steps into a fresh sum, committed as
 * one group; desc_a / desc_b: the block's A rows and B rows in their stage. */
__device__ __forceinline__ void mm_tile_issue_n64(uint64_t desc_a, uint64_t desc_b, float d[MM_TILE_ACC / 2])
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile(MM_WGMMA_64x64x32("0") : MM_WGMMA_D32("=f") : "l"(desc_a), "l"(desc_b));
#pragma unroll
    for (int ks = 1; ks < MM_GEMM_BK / 32; ks++)
        asm volatile(MM_WGMMA_64x64x32("1") : MM_WGMMA_D32("+f") : "l"(desc_a + 2 * ks), "l"(desc_b + 2 * ks));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* Thread 0 of the producer: K block kb's weight block by one TMA into sb, its bytes counted on
 * the stage's `full` barrier. */
__device__ __forceinline__ void mm_tile_tma_b(uint8_t *sb, const mm_tile_b &b, int kb, unsigned full)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];" ::"r"((unsigned)__cvta_generic_to_shared(sb)),
                 "l"(b.map), "r"(kb * MM_GEMM_BK), "r"(b.row0), "r"(full)
                 : "memory");
}

/* Thread 0 of the producer: K block kb's weight block into the B area at sb, counted on `full`:
 * FP8 by mm_tile_tma_b, FP4 its codes (64 B x 128 rows) to MM_FP4_CODES_AT. */
template <bool FP4>
__device__ __forceinline__ void mm_tile_tma_w(uint8_t *sb, const mm_tile_b &b, int kb, unsigned full)
{
    if (!FP4) {
        mm_tile_tma_b(sb, b, kb, full);
        return;
    }
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];" ::"r"((unsigned)__cvta_generic_to_shared(sb + MM_FP4_CODES_AT)),
                 "l"(b.map), "r"(kb * MM_FP4_CODE_BYTES), "r"(b.row0), "r"(full)
                 : "memory");
}

/* Producer thread pt: its part of K block kb's weight scale for the B area at sb: the last
 * thread the block's scale (b.scale; FP4: the block's word, fp4.h mm_fp4_block_word, which the
 * math turns into the scale) into *sw (NULL: the compact second block's, loaded by the caller);
 * FP4 also every thread its row's 4 exponents to MM_FP4_EXPS_AT. */
template <bool FP4>
__device__ __forceinline__ void mm_tile_load_w_scale(uint8_t *sb, float *sw, const mm_tile_b &b, int kb, int pt)
{
    if (FP4) mm_cp_async4(sb + MM_FP4_EXPS_AT + 4 * pt, b.exps + (size_t)(b.row0 + pt) * b.exp_row_bytes + kb * 4);
    if ((!FP4 || sw) && pt == MM_PRODUCER_THREADS - 1) mm_cp_async4(sw, b.scale + kb);
}

/* Thread 0 of a pair's producer: its share of K block kb's A rows (from `row`, the map's box)
 * into both CTAs' stages at the same offset `dst` (TMA multicast), counted on each CTA's `full`. */
__device__ __forceinline__ void mm_tile_tma_a_multicast(uint8_t *dst, const void *map, int kb, int row, unsigned full)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;"
                 ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(map), "r"(kb * MM_GEMM_BK), "r"(row), "r"(full),
                 "h"((uint16_t)3)
                 : "memory");
}

/* Whether a tile's A blocks come by TMA (async proxy) rather than gathered by cp.async (generic
 * proxy): tiles of more than 64 rows with a rows map. The producer loads by it and the math
 * decides by it whether a stage needs a proxy fence before its wgmmas read A. */
__device__ __forceinline__ bool mm_tile_a_by_tma(const void *a_map, int rows)
{
    return a_map != NULL && rows > 64;
}

/* Producer (the 128 threads of warpgroup 0): K blocks kb_begin..kb_end-1 of one pass,
 * A[rows][K] x W[BN][K]^T, into the ring. The row table must be complete for all producer
 * threads (a named barrier after writing it). Per block: wait until the math warps (of both CTAs
 * of a pair) freed the stage; the A block by TMA (a tile of more than 64 contiguous rows; in a
 * pair this CTA's 64-row half, multicast) or gathered by cp.async (rows past the last 8-row
 * group with a valid row are not loaded, the MMA's results for them are never stored); the
 * scales by cp.async; the weight block by one TMA (thread 0); then report on `full`. */
template <bool FP4>
__device__ __forceinline__ void mm_tile_produce_b(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring, const mm_tile_b &b,
                                                  int kb);

/* FP4: codes and exponents for each weight block (gemm_fp4.cuh); PASSES: the gather's passes of
 * 16 rows (a tile of at most 16 PASSES rows: the FP4 swapped form's producer takes 1, 2 or 4 by
 * its rows, so a decode tile issues no pass that loads nothing) */
template <bool FP4 = false, int PASSES = 8>
__device__ __forceinline__ void mm_tile_produce(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring,
                                                const mm_tile_rows *a, int rows, const mm_tile_a_map &am,
                                                const mm_tile_b &b, int kb_begin, int kb_end,
                                                int second_rows = 0, int second_scales = 0, bool compact = false,
                                                int extra = 0, bool tight = false, bool handoff = false,
                                                bool give_up = false, int row_off = 0)
{
    /* row_off: the pass's rows start at row row_off of the table (the FP4 swapped form's second
     * 64-row half of a tile, gemm_fp4.cuh) */
    /* give_up (the standalone GEMM): once a wait of the CTA expired, no more loads are issued (at
     * most one more block when another warp's wait expires while this thread's passes), so none
     * is still in flight into a CTA of the pair that has left (a stalled producer that wakes up
     * would otherwise stream the rest of its items unwaited: "unspecified launch failure") */
    /* handoff (a compile-time constant at every call): the fused kernel's hand-off form, whose
     * GEMM2 items may wait for each K block's I block (mm_handoff_wait) */
    /* a dual pass's second weight block: second_rows further in the same map (0: none); as two
     * offsets, not a second mm_tile_b, which the producer's 64 registers could not keep */
    /* tight (the fused kernel, whose producer keeps more across its loop): threadIdx.x read again
     * at each use rather than held (mm_tid) */
    const int pt = tight ? mm_tid() : (int)threadIdx.x;
    /* Tiles of more than 64 rows whose rows are contiguous take the A block by one TMA: the
     * gather costs ~20 instructions per 16-byte chunk, 1024 chunks a block, and at large row
     * counts those issue slots were what the math warps lacked (ncu: 1.9 IPC, 6.4 cycles per
     * issued instruction, tensor pipe 37%). Small tiles keep the gather: it loads only their
     * rows, not a 128-row box. */
    const bool a_tma = mm_tile_a_by_tma(am.map, rows);
    /* in a pair, this CTA loads rows 64 * rank .. + 63 of the block into both CTAs' stages (the
     * 64-row box of the map pair); the other CTA loads the other half, and each CTA's `full`
     * expects the whole block */
    const unsigned rank = am.pair ? mm_cluster_rank() : 0u;
    const void *half_map = am.map ? (const void *)((const uint8_t *)am.map + 128) : NULL;
    const unsigned w_bytes = FP4 ? MM_FP4_BLOCK_CODE_BYTES : MM_TILE_B_STAGE;
    const unsigned tx_bytes = compact ? 2 * w_bytes : w_bytes + (a_tma ? MM_TILE_A_STAGE : 0);
    /* The gather: thread pt copies 16-byte part pt % 8 of rows pt / 8 + 16 i (i < 8) in whole
     * 8-row groups (the MMAs read them; rows past `rows` repeat row 0). Row pointers and the
     * swizzled destination are worked out once per call, so a block costs each thread 8 copies
     * and their address adds, not a table lookup and swizzle per copy. */
    const int a_rows = a_tma ? 0 : ((rows + 7) / 8) * 8, r0 = pt / 8, part = pt % 8;
    const int dst0 = r0 * 128 + ((part ^ (r0 & 7)) * 16);
    static_assert(PASSES >= 1 && PASSES <= 8, "passes of 16 rows over at most 128");
    const uint8_t *src[PASSES];
#pragma unroll
    for (int i = 0; i < PASSES; i++) {
        const int r = r0 + 16 * i;
        src[i] = a->row[row_off + (r < rows ? r : 0)] + part * 16;
    }
    for (int kb = kb_begin; kb < kb_end; kb++) {
        const int s = ring.stage;
        uint8_t *stage = stages + s * MM_TILE_STAGE_BYTES;
        uint8_t *sa = stage, *sb = stage + MM_TILE_A_STAGE;
        float *sc = (float *)(sb + MM_TILE_B_STAGE); /* [BM] A scales, then the weight scale */
        /* compact (a dual pass over <= 8 rows): the second weight block in the A area, the rows in
         * the tiny area, one stage per K block: twice the weight bytes in flight of the two-stage
         * form, which a decode tile's latency-bound stream lacks */
        uint8_t *rows_at = compact ? (uint8_t *)sc + MM_TILE_SCALE_BYTES : sa;
        /* the flag read before the wait, so its latency is not between the stage coming free and
         * the loads refilling it (the standalone decode's stream is that latency-bound); an expiry
         * while this wait passed stops the loads one block later */
        const bool expired = give_up && *(volatile uint32_t *)&mm_stage_wait_expired;
        const bool freed = mm_mbar_wait(&p->empty[s], ring.phase ^ 1u, MM_STAGE_WAIT_NS,
                                        MM_PIPE_WAIT_STAGE_EMPTY); /* a fresh barrier passes parity 1 */
        MM_AUDIT_REFILL(s);
        if (give_up && (expired || !freed)) {
            mm_ring_advance(ring);
            continue;
        }
#ifdef MM_TILE_HANDOFF
        if (handoff) mm_handoff_wait(kb, pt);
#endif
        unsigned full = (unsigned)__cvta_generic_to_shared(&p->full[s]);
        if (pt == 0) {
            mm_mbar_expect_tx(full, tx_bytes);
            if (a_tma && am.pair)
                mm_tile_tma_a_multicast(sa + rank * 64 * 128, half_map, kb, am.row0 + 64 * (int)rank, full);
            else if (a_tma)
                asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                             "[%0], [%1, {%2, %3}], [%4];" ::"r"((unsigned)__cvta_generic_to_shared(sa)),
                             "l"(am.map), "r"(kb * MM_GEMM_BK), "r"(am.row0), "r"(full)
                             : "memory");
            mm_tile_tma_w<FP4>(sb, b, kb, full);
        }
        /* skipped by a branch when A came by TMA: predicated off, the gather's ~60 instructions
         * per warp and block still took issue slots from the math warps of the same SM
         * sub-partitions */
        if (a_rows > 0) {
#pragma unroll
            for (int i = 0; i < PASSES; i++)
                if (r0 + 16 * i < a_rows) mm_cp_async16(rows_at + dst0 + i * 16 * 128, src[i] + (size_t)kb * MM_GEMM_BK);
        }
        if (pt < rows) mm_cp_async4(sc + pt, a->scale[row_off + pt] + kb);
        mm_tile_load_w_scale<FP4>(sb, sc + MM_GEMM_BM, b, kb, pt);
        /* a full tile's extra rows (1..8): all 8 rows of the tiny area (rows past `extra` repeat
         * the first; never stored), their scales at MM_TILE_EXTRA_SCALES */
        if (extra > 0) {
            /* the row table read again per block (volatile): a pointer hoisted out of the loop
             * would hold registers the producer's 64 cannot spare */
            const int j = pt / 8, q = pt % 8, src_row = MM_GEMM_BM + (j < extra ? j : 0);
            if (pt < 8 * MM_TILE_TINY_ROWS)
                mm_cp_async16((uint8_t *)sc + MM_TILE_SCALE_BYTES + j * 128 + ((q ^ j) * 16),
                              *(const uint8_t *const volatile *)&a->row[src_row] + (size_t)kb * MM_GEMM_BK + q * 16);
            else if (pt - 8 * MM_TILE_TINY_ROWS < extra)
                mm_cp_async4(sc + MM_TILE_EXTRA_SCALES + (pt - 8 * MM_TILE_TINY_ROWS),
                             *(const float *const volatile *)&a->scale[MM_GEMM_BM + pt - 8 * MM_TILE_TINY_ROWS] + kb);
        }
        if (compact && FP4) /* the second block's exponents in the A area, beside its codes */
            mm_tile_load_w_scale<FP4>(sa, NULL, mm_tile_b{b.map, b.row0 + second_rows, NULL, b.exps, b.exp_row_bytes}, kb,
                                      pt);
        /* the second block's scale (FP4: its word) */
        if (compact && pt == MM_PRODUCER_THREADS - 2) mm_cp_async4(sc + MM_GEMM_BM + 1, b.scale + second_scales + kb);
        /* arrives on `full` when this thread's copies above have landed (noinc: counted in init) */
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(full) : "memory");
        mm_ring_advance(ring);
        /* a dual pass: the second weight block of this K block in the next stage, inside the same
         * loop so the row pointers above are read once per pass, not once per K block */
        /* compact: the second block into this stage's A area, after the arrivals (the expected
         * bytes above keep the phase open until it lands; issued here, the producer's registers
         * suffice) */
        if (compact && pt == 0)
            mm_tile_tma_w<FP4>(sa, mm_tile_b{b.map, b.row0 + second_rows, NULL, b.exps, b.exp_row_bytes}, kb, full);
        if (second_rows && !compact)
            mm_tile_produce_b<FP4>(stages, p, ring,
                                   mm_tile_b{b.map, b.row0 + second_rows, b.scale + second_scales, b.exps,
                                             b.exp_row_bytes},
                                   kb);
    }
}

/* A stage's scales: [BM] A scales, then the weight block's scale at [BM]. */
__device__ __forceinline__ const float *mm_tile_stage_scales(const uint8_t *stages, int stage)
{
    return (const float *)(stages + stage * MM_TILE_STAGE_BYTES + MM_TILE_A_STAGE + MM_TILE_B_STAGE);
}

/* The recipe's promotion of one block sum: acc += (a_scale * w_scale) * blk, the scale of this
 * thread's first row for i & 2 == 0, of its second otherwise. */
__device__ __forceinline__ void mm_tile_promote(float s_lo, float s_hi, const float blk[MM_TILE_ACC], float acc[MM_TILE_ACC])
{
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = fmaf((i & 2) ? s_hi : s_lo, blk[i], acc[i]);
}

/* A stage's tiny area, after its scales: a compact pass's rows or a tile's extra rows. */
__device__ __forceinline__ uint8_t *mm_tile_stage_tiny(uint8_t *stages, int stage)
{
    return stages + stage * MM_TILE_STAGE_BYTES + MM_TILE_A_STAGE + MM_TILE_B_STAGE + MM_TILE_SCALE_BYTES;
}

/* One K block in the ring as the math sees it: its stage and, read as soon as the stage is
 * full (so the loads are long done when the promotion needs them), the weight block's scale
 * and this thread's two rows' activation scales. */
typedef struct {
    int stage;
    float s_lo, s_hi; /* a_scale * w_scale of this thread's two rows (0 for rows past the tile's) */
} mm_block;

/* FP4 weights: the math warps expand each block as it arrives (gemm_fp4.cuh): a stage's B area
 * by all 256, or a compact stage's two blocks (B area and A area) by warpgroup g each */
__device__ __forceinline__ void mm_fp4_expand_stage(uint8_t *stages, int s);
__device__ __forceinline__ void mm_fp4_expand_compact(uint8_t *stages, int s, int g);

/* Waits for the block's `full` barrier, reads the block's scales and, when A was gathered by
 * cp.async (generic proxy), makes those writes visible to wgmma's async-proxy reads. Blocks that
 * came by TMA need no fence (TMA and wgmma are both the async proxy, ordered by the barrier; the
 * scales are read by ordinary loads), and the fence is not free: it is a MEMBAR.ALL.CTA per math
 * warp and block (measured in the GEMM lab). */
template <bool FP4 = false> /* FP4: all 256 math threads expand the block first, which fences too */
__device__ __forceinline__ mm_block mm_tile_wait_full(const uint8_t *stages, mm_tile_pipe *p, const mm_ring &r,
                                                      int r_lo, int r_hi, bool valid_lo, bool valid_hi,
                                                      bool a_gathered)
{
    mm_mbar_wait(&p->full[r.stage], r.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
    MM_AUDIT_ENTER(r.stage);
    if (FP4) mm_fp4_expand_stage((uint8_t *)stages, r.stage);
    else if (a_gathered) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const float *sc = mm_tile_stage_scales(stages, r.stage);
    const float sw = sc[MM_GEMM_BM];
    mm_block b = {r.stage, valid_lo ? sc[r_lo] * sw : 0.0f, valid_hi ? sc[r_hi] * sw : 0.0f};
    return b;
}

/* Issues one K block's four k32 wgmmas for this warpgroup's 64 rows into `blk` (a fresh sum),
 * A from stage sa and B from stage sb, and commits them as one group. desc_a0 / desc_b0: the
 * descriptors of stage 0's A rows of this warpgroup and of its B block; a stage, and a k32 step
 * (32 bytes), are constant offsets from them (the descriptors hold the address >> 4 in their low
 * 14 bits, which shared memory never overflows). */
__device__ __forceinline__ void mm_tile_issue_ab(uint64_t desc_a0, int sa, uint64_t desc_b0, int sb, float blk[MM_TILE_ACC],
                                                 int stage_bytes = MM_TILE_STAGE_BYTES)
{
    const uint64_t step_a = (uint64_t)sa * (stage_bytes >> 4), step_b = (uint64_t)sb * (stage_bytes >> 4);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    mm_wgmma_64x128x32_fresh(blk, desc_a0 + step_a, desc_b0 + step_b);
#pragma unroll
    for (int ks = 1; ks < MM_GEMM_BK / 32; ks++)
        mm_wgmma_64x128x32_acc(blk, desc_a0 + step_a + 2 * ks, desc_b0 + step_b + 2 * ks);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* The same with A and B from one stage. */
__device__ __forceinline__ void mm_tile_issue(uint64_t desc_a0, uint64_t desc_b0, int stage, float blk[MM_TILE_ACC])
{
    mm_tile_issue_ab(desc_a0, stage, desc_b0, stage, blk);
}

/* The next block in the ring: waits for its data, issues its MMAs into `blk`, moves the ring on. */
template <bool FP4 = false>
__device__ __forceinline__ mm_block mm_tile_issue_next(const uint8_t *stages, mm_tile_pipe *p, mm_ring &ring,
                                                       uint64_t da, uint64_t db, int r_lo, int r_hi, bool valid_lo,
                                                       bool valid_hi, bool a_gathered, float blk[MM_TILE_ACC])
{
    const mm_block b = mm_tile_wait_full<FP4>(stages, p, ring, r_lo, r_hi, valid_lo, valid_hi, a_gathered);
    mm_tile_issue(da, db, b.stage, blk);
    mm_ring_advance(ring);
    return b;
}

/* Frees a stage: one arrival per math warp, also on the other CTA's barrier in a pair (its
 * producer multicasts into this CTA's stage too). Lane 0 arrives under an `if`: where ptxas keeps
 * it as a branch, each K block pays a reconvergence (BSSY/BSYNC) and the address arithmetic
 * inside it between its wgmma wait and its promotion, so the math paths take mm_tile_release
 * (below) instead. This form stays for the ring audit (its hooks) and for every release of the
 * wide kernel, whose main K loop ptxas predicates by itself and
 * whose SASS is kept as measured. */
__device__ __forceinline__ void mm_tile_release_branch(mm_tile_pipe *p, int stage, bool pair)
{
#ifdef MM_RING_AUDIT
    /* a quarter of the releases 1-2 us late, so a refill that did not wait for every warp finds one */
    if (threadIdx.x % 32 == 0) {
        const uint32_t t = (uint32_t)clock();
        if (((t >> 4) & 3u) == 0u) __nanosleep(1000u + (t & 1023u));
    }
#endif
    __syncwarp();
    if (threadIdx.x % 32 == 0) {
#ifdef MM_RING_AUDIT
        mm_audit_leave(stage);
#endif
        mm_mbar_arrive(&p->empty[stage]);
#ifdef MM_RING_AUDIT_BREAK /* the audit's own test (`make audit-break`): math warp 0 arrives twice, so `empty` completes early */
        if (threadIdx.x == MM_PRODUCER_THREADS) mm_mbar_arrive(&p->empty[stage]);
#endif
        if (pair) mm_mbar_arrive_peer(&p->empty[stage]);
    }
}

/* Lane 0's arrivals on `empty`'s addresses in this CTA and (pair) in the peer's window, as
 * predicated instructions in one asm statement. */
__device__ __forceinline__ void mm_tile_release_at(unsigned local, unsigned remote, bool pair)
{
    __syncwarp();
    asm volatile("{\n\t.reg .pred lane0, peer;\n\t"
                 "setp.eq.u32 lane0, %0, 0;\n\t"
                 "setp.ne.and.u32 peer, %1, 0, lane0;\n\t"
                 "@lane0 mbarrier.arrive.shared::cta.b64 _, [%2];\n\t"
                 "@peer mbarrier.arrive.shared::cluster.b64 _, [%3];\n\t}"
                 ::"r"(threadIdx.x % 32), "r"((unsigned)pair), "r"(local), "r"(remote) : "memory");
}

/* The same as mm_tile_release_branch, the arrivals predicated (every lane computes the addresses:
 * uniform and cheap). Measured against the branch on one H200:
 * decode 1% faster (Flash GEMM1 512 rows 149.1 -> 147.4 us, Pro GEMM1 / GEMM2 64 rows 508 -> 503 /
 * 274 -> 270), bench's modes equal. */
__device__ __forceinline__ void mm_tile_release(mm_tile_pipe *p, int stage, bool pair)
{
#ifdef MM_RING_AUDIT
    mm_tile_release_branch(p, stage, pair);
#else
    const unsigned local = (unsigned)__cvta_generic_to_shared(&p->empty[stage]);
    unsigned remote = local;
    if (pair) asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(mm_cluster_rank() ^ 1u));
    mm_tile_release_at(local, remote, pair);
#endif
}

/* The end of one K block whose MMAs completed: free its stage and promote the block sum into
 * acc ((a_scale * w_scale) * sum, in K order; invalid rows get 0). */
__device__ __forceinline__ void mm_tile_retire(const mm_block &b, mm_tile_pipe *p, bool pair,
                                               const float blk[MM_TILE_ACC], float acc[MM_TILE_ACC])
{
    mm_tile_release(p, b.stage, pair);
    mm_tile_promote(b.s_lo, b.s_hi, blk, acc);
}

/* Math (warpgroups 1 and 2): acc = the pass's A[rows][K] x W[BN][K]^T with the recipe's
 * per-block promotion, from the blocks the producer put in the ring. In a tile of more than 64
 * rows, one block's MMAs stay in flight while the previous block is promoted (two block sums,
 * `wgmma.wait_group 1`), so the tensor cores do not idle through each block's stage release and
 * 64 FMAs; this needs 192 accumulator registers per thread, hence the math warpgroups'
 * setmaxnreg. A smaller tile retires each block before waiting for the next (see below).
 * A warpgroup whose 64 rows are all past `rows` skips its MMAs (decode: most tiles hold a few
 * rows) but still frees each stage; its accumulators are then garbage, like every row past
 * `rows`, and must not be stored. pair: the stages are shared with the other CTA of a 2-CTA
 * cluster (mm_tile_release). FP4: every block expanded by both warpgroups (mm_tile_wait_full),
 * also by one without rows. */
template <bool FP4 = false, bool RETIRE_EACH = false> /* RETIRE_EACH: every tile as a small one */
__device__ __forceinline__ void mm_tile_consume(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring, int rows,
                                                int k, bool pair, bool gathered, float acc[MM_TILE_ACC])
{
    const int kblocks = k / MM_GEMM_BK, g = mm_warpgroup() - 1;
    const int r_lo = mm_acc_row(0), r_hi = mm_acc_row(2);
    const bool valid_lo = r_lo < rows, valid_hi = r_hi < rows;
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = 0.0f;
    if (rows <= 64 * g) { /* uniform over the warpgroup: no rows here, only free the stages */
        for (int kb = 0; kb < kblocks; kb++) {
            mm_tile_wait_full<FP4>(stages, p, ring, r_lo, r_hi, valid_lo, valid_hi, false); /* no wgmma reads here */
            mm_tile_release(p, ring.stage, pair);
            mm_ring_advance(ring);
        }
        return;
    }
    const uint64_t da = mm_wgmma_desc(stages + g * 64 * 128), db = mm_wgmma_desc(stages + MM_TILE_A_STAGE);
    float blk0[MM_TILE_ACC], blk1[MM_TILE_ACC];
    if (RETIRE_EACH || rows <= 64) {
        /* A small tile (decode) is bound by its loads, not by the tensor cores: retire each block
         * as soon as its MMAs are done, so its stage goes back to the producer without waiting
         * for the next block's data and the ring keeps its full depth of loads in flight (with
         * the next block issued first, decode ran 2-4% slower). */
        for (int kb = 0; kb < kblocks; kb++) {
            const mm_block b = mm_tile_issue_next<FP4>(stages, p, ring, da, db, r_lo, r_hi, valid_lo, valid_hi, gathered, blk0);
            MM_WGMMA_WAIT(0, 1);
            mm_tile_retire(b, p, pair, blk0, acc);
        }
        return;
    }
    /* A large tile: block kb + 1's MMAs are issued before block kb is retired, so the tensor
     * cores work through each block's stage release and promotion. b0 / b1: the blocks whose
     * sums are in blk0 / blk1. */
    mm_block b0 = mm_tile_issue_next<FP4>(stages, p, ring, da, db, r_lo, r_hi, valid_lo, valid_hi, gathered, blk0), b1;
    int kb = 0;
    for (; kb + 2 < kblocks; kb += 2) { /* blk0 holds block kb in flight */
        b1 = mm_tile_issue_next<FP4>(stages, p, ring, da, db, r_lo, r_hi, valid_lo, valid_hi, gathered, blk1);
        MM_WGMMA_WAIT(1, 2);
        mm_tile_retire(b0, p, pair, blk0, acc);
        b0 = mm_tile_issue_next<FP4>(stages, p, ring, da, db, r_lo, r_hi, valid_lo, valid_hi, gathered, blk0);
        MM_WGMMA_WAIT(1, 3);
        mm_tile_retire(b1, p, pair, blk1, acc);
    }
    if (kb + 1 < kblocks) { /* two blocks left: kb in flight, kb + 1 still to issue */
        b1 = mm_tile_issue_next<FP4>(stages, p, ring, da, db, r_lo, r_hi, valid_lo, valid_hi, gathered, blk1);
        MM_WGMMA_WAIT(1, 4);
        mm_tile_retire(b0, p, pair, blk0, acc);
        MM_WGMMA_WAIT(0, 5);
        mm_tile_retire(b1, p, pair, blk1, acc);
    } else {
        MM_WGMMA_WAIT(0, 6);
        mm_tile_retire(b0, p, pair, blk0, acc);
    }
}

/* A dual pass (the fused kernel: a large GEMM1 tile's gate and up blocks, or a GEMM2 item's two
 * adjacent H blocks): two 128-column weight blocks over one A block. Each K block takes two
 * consecutive stages: the first A, B0 and their scales as mm_tile_produce loads them, the second
 * only B1 and its weight scale (its A slot unused). The math computes both halves from the first
 * stage's A into two accumulators, one block sum at a time (192 FP32 registers, as the in-flight
 * form), and frees both stages after the second half's MMAs. A crosses from L2 once per 256
 * columns: 48 KB per 8.4 MFLOP instead of 64 KB. (The standalone GEMM gains nothing from it: its
 * 2-CTA clusters already share A, and it would lose its in-flight block.) */
template <bool FP4>
__device__ __forceinline__ void mm_tile_produce_b(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring, const mm_tile_b &b,
                                                  int kb)
{
    const int pt = threadIdx.x, s = ring.stage;
    uint8_t *sb = stages + s * MM_TILE_STAGE_BYTES + MM_TILE_A_STAGE;
    float *sc = (float *)(sb + MM_TILE_B_STAGE);
    mm_mbar_wait(&p->empty[s], ring.phase ^ 1u, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_EMPTY);
    MM_AUDIT_REFILL(s);
    unsigned full = (unsigned)__cvta_generic_to_shared(&p->full[s]);
    if (pt == 0) {
        mm_mbar_expect_tx(full, FP4 ? MM_FP4_BLOCK_CODE_BYTES : MM_TILE_B_STAGE);
        mm_tile_tma_w<FP4>(sb, b, kb, full);
    }
    mm_tile_load_w_scale<FP4>(sb, sc + MM_GEMM_BM, b, kb, pt);
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(full) : "memory");
    mm_ring_advance(ring);
}

template <bool FP4 = false>
__device__ __forceinline__ void mm_tile_produce_dual(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring,
                                                     const mm_tile_rows *a, int rows, const mm_tile_a_map &am,
                                                     const mm_tile_b &b0, int second_rows, int second_scales,
                                                     int kb_begin, int kb_end, bool compact = false, int extra = 0,
                                                     bool tight = false, bool handoff = false)
{
    mm_tile_produce<FP4>(stages, p, ring, a, rows, am, b0, kb_begin, kb_end, second_rows, second_scales, compact, extra,
                         tight, handoff);
}

/* Math of a compact dual pass (mm_tile_produce with compact): warpgroup g computes weight block g on
 * the tiny tile's rows, one stage per K block, as mm_tile_consume_split computes half g (the same
 * MMAs and promotions, so the same bits); acc's rows are mm_acc_row(i) - 64 g, valid below rows. */
template <bool FP4 = false>
__device__ __forceinline__ void mm_tile_consume_compact(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring, int rows,
                                                        int k, float acc[MM_TILE_ACC])
{
    const int kblocks = k / MM_GEMM_BK, g = mm_warpgroup() - 1;
    const int rl = mm_acc_row(0) - 64 * g, rh = mm_acc_row(2) - 64 * g;
    const bool vl = rl < rows, vh = rh < rows;
    const uint64_t da = mm_wgmma_desc_tiny(stages + MM_TILE_A_STAGE + MM_TILE_B_STAGE + MM_TILE_SCALE_BYTES);
    const uint64_t db = mm_wgmma_desc(g ? stages : stages + MM_TILE_A_STAGE);
    float blk[MM_TILE_ACC];
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = 0.0f;
    for (int kb = 0; kb < kblocks; kb++) {
        const int s = ring.stage;
        mm_mbar_wait(&p->full[s], ring.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
        MM_AUDIT_ENTER(s);
        mm_ring_advance(ring);
        if (FP4) mm_fp4_expand_compact(stages, s, g); /* fences too */
        else asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        const float *sc = mm_tile_stage_scales(stages, s);
        const float sw = sc[MM_GEMM_BM + g];
        const float t_lo = vl ? sc[rl] * sw : 0.0f, t_hi = vh ? sc[rh] * sw : 0.0f;
        mm_tile_issue_ab(da, s, db, s, blk);
        MM_WGMMA_WAIT(0, 7);
        mm_tile_release(p, s, false);
        mm_tile_promote(t_lo, t_hi, blk, acc);
    }
}

/* Math of a dual pass over a tile of <= 64 rows, split by halves: warpgroup g computes half g
 * (B0 or B1) on rows 0..63 into acc, so both halves run at once instead of one warpgroup idling
 * through them; acc's rows are mm_acc_row(i) - 64 g. Both stages of a K block are freed after
 * the MMAs that read them. */
template <bool FP4 = false>
__device__ __forceinline__ void mm_tile_consume_split(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring, int rows, int k,
                                                      bool pair, float acc[MM_TILE_ACC])
{
    const int kblocks = k / MM_GEMM_BK, g = mm_warpgroup() - 1;
    const int rl = mm_acc_row(0) - 64 * g, rh = mm_acc_row(2) - 64 * g;
    const bool vl = rl < rows, vh = rh < rows;
    const uint64_t da = mm_wgmma_desc(stages), db = mm_wgmma_desc(stages + MM_TILE_A_STAGE);
    float blk[MM_TILE_ACC];
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i++) acc[i] = 0.0f;
    for (int kb = 0; kb < kblocks; kb++) {
        const int s0 = ring.stage;
        mm_mbar_wait(&p->full[s0], ring.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
        MM_AUDIT_ENTER(s0);
        if (FP4) mm_fp4_expand_stage(stages, s0); /* both warpgroups expand both blocks */
        mm_ring_advance(ring);
        const int s1 = ring.stage;
        mm_mbar_wait(&p->full[s1], ring.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
        MM_AUDIT_ENTER(s1);
        if (FP4) mm_fp4_expand_stage(stages, s1);
        mm_ring_advance(ring);
        if (!FP4) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        const float *sc0 = mm_tile_stage_scales(stages, s0);
        const float sw = mm_tile_stage_scales(stages, g ? s1 : s0)[MM_GEMM_BM];
        const float t_lo = vl ? sc0[rl] * sw : 0.0f, t_hi = vh ? sc0[rh] * sw : 0.0f;
        mm_tile_issue_ab(da, s0, db, g ? s1 : s0, blk);
        MM_WGMMA_WAIT(0, 8);
        mm_tile_release(p, s0, pair);
        mm_tile_release(p, s1, pair);
        mm_tile_promote(t_lo, t_hi, blk, acc);
    }
}

/* A tile's extra rows (1..8, the fused kernel's folded rows: gemm_schedule.h mm_fused_extra_rows)
 * ride in each K block's first stage, in its tiny area (mm_tile_produce's `extra`), and the math
 * computes them as the narrow side of swapped MMAs: warpgroup g's 64 rows of a weight block as A
 * (m64n8k32), the same block sums as the core's form (lab/probes/swap_probe.cu) and the same
 * promotion. Their 8 accumulators per thread live in shared memory (math thread t's accumulator i
 * at xacc_all[i * MM_CONSUMER_THREADS + t]): in registers they cost spills, since the math's 216
 * hold two accumulators and a block sum and the CTA's pool of 384 x 168 allows no more. */
#define MM_XACC_BYTES (8 * MM_CONSUMER_THREADS * 4)

/* One half of a K block for the extra rows: the weight block in stage stage_w (its scale sw), the
 * extra rows and their scales in stage stage_x; accumulators 4 half .. 4 half + 3 of the math
 * threads' xacc area (xacc_all: thread t's accumulator i at xacc_all[i * MM_CONSUMER_THREADS + t]),
 * element i at weight column 64g + mm_frag_row(warp, lane, i), extra row mm_frag_col(lane, i) +
 * (i & 1). */
__device__ __forceinline__ void mm_tile_consume_extra(const uint8_t *stages, int g, int stage_w, int stage_x, float sw,
                                                      int extra, float *xacc_all, int half)
{
    /* everything derived here, not kept across the loop */
    const int tid = mm_tid(), x0 = mm_frag_col(tid % 32, 0); /* this thread's first extra row */
    float *xacc = xacc_all + (4 * half) * MM_CONSUMER_THREADS + (tid - MM_PRODUCER_THREADS);
    const float *sc = mm_tile_stage_scales(stages, stage_x);
    const float s_lo = x0 < extra ? sc[MM_TILE_EXTRA_SCALES + x0] * sw : 0.0f;
    const float s_hi = x0 + 1 < extra ? sc[MM_TILE_EXTRA_SCALES + x0 + 1] * sw : 0.0f;
    const uint64_t w = mm_wgmma_desc(stages + stage_w * MM_TILE_STAGE_BYTES + MM_TILE_A_STAGE + g * 64 * 128);
    const uint64_t x = mm_wgmma_desc(stages + stage_x * MM_TILE_STAGE_BYTES + MM_TILE_A_STAGE + MM_TILE_B_STAGE +
                                     MM_TILE_SCALE_BYTES);
    float blk[4];
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    mm_wgmma_64x8x32(blk, w, x, false);
#pragma unroll
    for (int ks = 1; ks < MM_GEMM_BK / 32; ks++) mm_wgmma_64x8x32(blk, w + 2 * ks, x + 2 * ks, true);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    MM_WGMMA_WAIT(0, 11);
#pragma unroll
    for (int i = 0; i < 4; i++)
        xacc[i * MM_CONSUMER_THREADS] = fmaf((i & 1) ? s_hi : s_lo, blk[i], xacc[i * MM_CONSUMER_THREADS]);
}

/* Math of a dual pass over a tile of more than 64 rows (both warpgroups hold rows; smaller tiles
 * take mm_tile_consume_split): acc0 / acc1 = A x B0 / A x B1 with the recipe's promotion, both
 * halves in each warpgroup's 64 rows. extra > 0 (the fused kernel's folding form only; 0
 * compiles the branch away): the tile's extra rows against both halves (mm_tile_consume_extra)
 * after the K block's MMAs, before its stages go back. */
template <bool FP4 = false>
__device__ __forceinline__ void mm_tile_consume_dual(uint8_t *stages, mm_tile_pipe *p, mm_ring &ring, int rows, int k,
                                                     bool pair, bool gathered, float acc0[MM_TILE_ACC],
                                                     float acc1[MM_TILE_ACC], int extra = 0, float *xacc_all = NULL)
{
    const int kblocks = k / MM_GEMM_BK, g = mm_warpgroup() - 1;
    const int r_lo = mm_acc_row(0), r_hi = mm_acc_row(2);
    const bool valid_lo = r_lo < rows, valid_hi = r_hi < rows;
#pragma unroll
    for (int i = 0; i < MM_TILE_ACC; i++) acc0[i] = acc1[i] = 0.0f;
    if (extra > 0)
#pragma unroll
        for (int i = 0; i < 8; i++) xacc_all[i * MM_CONSUMER_THREADS + mm_math_thread()] = 0.0f;
    const uint64_t da = mm_wgmma_desc(stages + g * 64 * 128), db = mm_wgmma_desc(stages + MM_TILE_A_STAGE);
    float blk[MM_TILE_ACC];
    for (int kb = 0; kb < kblocks; kb++) {
        /* extra rows come by cp.async (generic proxy) even when A came by TMA */
        const mm_block b = mm_tile_wait_full<FP4>(stages, p, ring, r_lo, r_hi, valid_lo, valid_hi, gathered || extra > 0);
        mm_ring_advance(ring);
        mm_tile_issue_ab(da, b.stage, db, b.stage, blk);
        MM_WGMMA_WAIT(0, 9);
        mm_tile_promote(b.s_lo, b.s_hi, blk, acc0);
        /* the second half: its stage holds B1 (by TMA: no proxy fence) and w1's scale; the A
         * scales are the first stage's */
        const int s1 = ring.stage;
        mm_mbar_wait(&p->full[s1], ring.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
        MM_AUDIT_ENTER(s1);
        if (FP4) mm_fp4_expand_stage(stages, s1);
        const float *sc0 = mm_tile_stage_scales(stages, b.stage);
        const float sw1 = mm_tile_stage_scales(stages, s1)[MM_GEMM_BM];
        const float t_lo = valid_lo ? sc0[r_lo] * sw1 : 0.0f, t_hi = valid_hi ? sc0[r_hi] * sw1 : 0.0f;
        mm_ring_advance(ring);
        mm_tile_issue_ab(da, b.stage, db, s1, blk);
        MM_WGMMA_WAIT(0, 10);
        if (extra > 0) { /* one branch, after both halves' MMAs: the path of every other tile keeps its order */
            mm_tile_promote(t_lo, t_hi, blk, acc1);
            mm_tile_consume_extra(stages, g, b.stage, b.stage, sc0[MM_GEMM_BM], extra, xacc_all, 0);
            mm_tile_consume_extra(stages, g, s1, b.stage, sw1, extra, xacc_all, 1);
            mm_tile_release(p, b.stage, pair);
            mm_tile_release(p, s1, pair);
            continue;
        }
        mm_tile_release(p, b.stage, pair);
        mm_tile_release(p, s1, pair);
        mm_tile_promote(t_lo, t_hi, blk, acc1);
    }
}

/* The two-slot ring that hands tile descriptions from the producer to the math warpgroups.
 * ready[j]: 128 producer arrivals (the slot is written); free[j]: one arrival per math warp (the
 * math is done with the slot, including its epilogue). Item n uses slot n % 2 in round n / 2. */
typedef struct {
    uint64_t ready[2];
    uint64_t free_[2];
} mm_item_ring;

__device__ __forceinline__ void mm_item_ring_init(mm_item_ring *r, int consumer_warps = MM_CONSUMER_WARPS)
{
    for (int j = 0; j < 2; j++) {
        mm_mbar_init(&r->ready[j], MM_PRODUCER_THREADS);
        mm_mbar_init(&r->free_[j], consumer_warps);
    }
}

/* producer: wait until slot n % 2 may be rewritten */
__device__ __forceinline__ void mm_item_wait_free(mm_item_ring *r, uint32_t n)
{
    mm_mbar_wait(&r->free_[n & 1], ((n >> 1) & 1u) ^ 1u, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_ITEM_FREE);
}

/* producer, every thread, after its writes to the slot */
__device__ __forceinline__ void mm_item_publish(mm_item_ring *r, uint32_t n)
{
    mm_mbar_arrive(&r->ready[n & 1]);
}

/* math: wait for item n's slot; false after limit_ns */
__device__ __forceinline__ bool mm_item_wait_ready(mm_item_ring *r, uint32_t n, uint64_t limit_ns)
{
    return mm_mbar_wait(&r->ready[n & 1], (n >> 1) & 1u, limit_ns, MM_PIPE_WAIT_ITEM_READY);
}

/* math, every thread, when done with the slot */
__device__ __forceinline__ void mm_item_release(mm_item_ring *r, uint32_t n)
{
    __syncwarp();
    if (threadIdx.x % 32 == 0) mm_mbar_arrive(&r->free_[n & 1]);
}

#endif
