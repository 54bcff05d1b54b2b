/* PTX wrappers the kernels share: thread and cluster ids, cp.async, bulk copies into shared
 * memory, mbarriers (init, arrive, arrive armed for a copy's bytes, the peer's arrive across a
 * 2-CTA cluster), wgmma descriptors and the wgmma instructions of the
 * tile shapes the GEMM core issues (m64n128k32, m64n64k32, m64n8k32, and m64n{8,16,32,64,128}k32 with A
 * from registers; all FP8 e4m3 into FP32).
 * One instruction each, no policy: what a stage, a ring or a tile does with them lives in
 * gemm_tile.cuh. */
#ifndef MEGAMOE_PTX_CUH
#define MEGAMOE_PTX_CUH

#include <stdint.h>

/* threadIdx.x read again at each use: the producer's 64 registers cannot keep it live across a
 * whole kernel (ptxas spilled it, kernel-wide, once the producer's loop grew) */
__device__ __forceinline__ int mm_tid()
{
    int t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return t;
}

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

__device__ __forceinline__ void mm_mbar_init(uint64_t *bar, unsigned count)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(a), "r"(count) : "memory");
}

__device__ __forceinline__ void mm_mbar_arrive(uint64_t *bar)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(a) : "memory");
}

/* Arms the barrier at shared address `bar` for `bytes` more bytes of asynchronous copies and
 * arrives on it (one arrival). */
__device__ __forceinline__ void mm_mbar_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

/* One bulk copy of `bytes` (a multiple of 16) from global memory to shared address `dst`, its
 * completion counted on the barrier at shared address `bar` (armed by mm_mbar_expect_tx). */
__device__ __forceinline__ void mm_bulk_load(unsigned dst, const void *src, unsigned bytes, unsigned bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

/* This CTA's rank in its cluster, and the cluster's size (1 when launched without one). */
__device__ __forceinline__ unsigned mm_cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ unsigned mm_cluster_size()
{
    unsigned n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return n;
}

/* Every thread of every CTA of the cluster: arrive (release) and wait (acquire). */
__device__ __forceinline__ void mm_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* Arrival on the barrier at the same shared-memory offset in the other CTA of a 2-CTA cluster. */
__device__ __forceinline__ void mm_mbar_arrive_peer(uint64_t *bar)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(bar), remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(a), "r"(mm_cluster_rank() ^ 1u));
    /* default (CTA-scope) release, as for the local arrival: what it orders are this warp's
     * wgmma reads of the stage, complete before the arrival; a cluster-scope release would add a
     * GPU-wide fence per warp and block */
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

/* wgmma shared-memory descriptor: K-major, 128-byte swizzle, 8-row groups 1024 bytes apart. */
__device__ __forceinline__ uint64_t mm_wgmma_desc(const uint8_t *p)
{
    uint64_t a = (uint64_t)__cvta_generic_to_shared(p);
    return ((a & 0x3ffffu) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

/* The same for a tiny tile's A: one 8-row group, its stride 0, so the wgmma's 64 rows read rows
 * 0..7 eight times and never leave the 1 KB (rows past the tile's are never stored anyway). */
__device__ __forceinline__ uint64_t mm_wgmma_desc_tiny(const uint8_t *p)
{
    uint64_t a = (uint64_t)__cvta_generic_to_shared(p);
    return ((a & 0x3ffffu) >> 4) | (1ull << 16) | (1ull << 62);
}

/* The instruction and its 64 accumulator operands, written once for both forms below; C is the
 * operands' constraint ("=f": written only, "+f": read and written). */
#define MM_WGMMA_64x128x32(scale_d) \
    "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
    "%64, %65, " scale_d ", 1, 1;\n"
#define MM_WGMMA_D64(C) \
    C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), \
    C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]), \
    C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]), \
    C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31]), \
    C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), C(d[38]), C(d[39]), \
    C(d[40]), C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), C(d[46]), C(d[47]), \
    C(d[48]), C(d[49]), C(d[50]), C(d[51]), C(d[52]), C(d[53]), C(d[54]), C(d[55]), \
    C(d[56]), C(d[57]), C(d[58]), C(d[59]), C(d[60]), C(d[61]), C(d[62]), C(d[63])

/* d = A[64 x 32] * B[128 x 32]^T for this warpgroup (scale-d 0: a fresh sum; d is written, not
 * read, so a block sum in flight is a new value, not a copy of the previous one). */
__device__ __forceinline__ void mm_wgmma_64x128x32_fresh(float *d, uint64_t a, uint64_t b)
{
    asm volatile(MM_WGMMA_64x128x32("0") : MM_WGMMA_D64("=f") : "l"(a), "l"(b));
}

/* d += A[64 x 32] * B[128 x 32]^T for this warpgroup. */
__device__ __forceinline__ void mm_wgmma_64x128x32_acc(float *d, uint64_t a, uint64_t b)
{
    asm volatile(MM_WGMMA_64x128x32("1") : MM_WGMMA_D64("+f") : "l"(a), "l"(b));
}

/* The same instruction with N = 64 (32 accumulators): the wide form's tiles of <= 64 rows split
 * their 128 columns over two warpgroups (gemm.cu). An element's bits are the m64n128k32 form's
 * (the same k32 products into the same sum; the lab's calc_diff against cuBLASLt checks it). */
#define MM_WGMMA_64x64x32(scale_d) \
    "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
    "%32, %33, " scale_d ", 1, 1;\n"
#define MM_WGMMA_D32(C) \
    C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), \
    C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]), \
    C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]), \
    C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31])

/* d = A[64 x 32] * B[8 x 32]^T: the swapped form for a tile's extra rows, the weight block's 64
 * rows as A and the 8 rows of the tiny area as B; each element's bits equal the m64n128k32 form's
 * with the roles the other way round (lab/probes/swap_probe.cu). The fragment: row (weight column)
 * mm_frag_row(warp, lane, i), column (extra row) mm_frag_col(lane, i) + (i & 1), i < 4. */
__device__ __forceinline__ void mm_wgmma_64x8x32(float d[4], uint64_t a, uint64_t b, bool acc)
{
    if (acc)
        asm volatile("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, 1, 1, 1;\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(a), "l"(b));
    else
        asm volatile("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, 0, 1, 1;\n"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]) : "l"(a), "l"(b));
}

/* wgmma m64nNk32 (e4m3 x e4m3 -> FP32) with A from registers, four per thread in the register
 * layout of an 8-bit A operand (thread (warp w, lane l) holds rows 16 w + l / 4 and + 8, K
 * 4 (l % 4) .. + 3 and 16 + 4 (l % 4) .. + 3: regs {row lo k 0-15 part, row hi, row lo k 16-31
 * part, row hi}) and B (N rows x 32 bytes, K-major) by descriptor; ACC: accumulate into d, else
 * overwrite it. The FP4 swapped form's MMAs (gemm_fp4.cuh): a weight block's rows as A, a
 * decode tile's N rows as B. */

template <bool ACC>
__device__ __forceinline__ void mm_wgmma_64x8x32_rs(float d[4], const uint32_t a[4], uint64_t b)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, %9, 1, 1;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(ACC ? 1 : 0));
}

template <bool ACC>
__device__ __forceinline__ void mm_wgmma_64x16x32_rs(float d[8], const uint32_t a[4], uint64_t b)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, %13, 1, 1;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(ACC ? 1 : 0));
}

template <bool ACC>
__device__ __forceinline__ void mm_wgmma_64x32x32_rs(float d[16], const uint32_t a[4], uint64_t b)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, %21, 1, 1;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(ACC ? 1 : 0));
}

template <bool ACC>
__device__ __forceinline__ void mm_wgmma_64x64x32_rs(float d[32], const uint32_t a[4], uint64_t b)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, %37, 1, 1;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(ACC ? 1 : 0));
}

/* m64n128k32 with A from registers: the swapped form's 65-128-row tiles (64 accumulators). d is
 * read and written with either ACC (scale-d 0 only ignores it), as in the forms above, so a block
 * sum keeps its registers: as a fresh output ptxas gave the next block's sum other registers to
 * promote the previous one under its MMAs, two 64-value sums beside the accumulators, and
 * spilled. */
template <bool ACC>
__device__ __forceinline__ void mm_wgmma_64x128x32_rs(float d[64], const uint32_t a[4], uint64_t b)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "{%64, %65, %66, %67}, %68, %69, 1, 1;"
                 : MM_WGMMA_D64("+f")
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(ACC ? 1 : 0));
}

#endif
