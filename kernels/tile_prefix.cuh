/* The grouped GEMM's row-tile prefix computed by one thread block, for the kernels that build it
 * on the device before a GEMM (gemm.cu tile_prefix_kernel, normal.cu's offsets kernel).
 *
 * Thread t of the block takes a contiguous chunk of the experts (mm_prefix_chunk) and sums its
 * tiles with its loads in flight together; a warp scan and the warps' sums give each chunk's
 * first tile; the chunk is walked again to write it (its own counts again, from L1). One thread
 * walking every count with a store between loads cost ~15 us at 256 experts. */
#pragma once

#include <stdint.h>

#include "gemm_schedule.h"

/* out[0..experts) = the exclusive prefix of the experts' tiles of `bm` rows (or the wide form's
 * units: mm_prefix_tiles), out[experts] the total, which it also returns to every calling thread.
 * Called by threads 0..threads-1 of the block (threads a multiple of 32), which meet at barrier `bar` twice (0 with every thread of the
 * block: __syncthreads' barrier; or a named one for a warpgroup); warp_sums: threads / 32 ints of
 * shared memory. row_count may have been written by these threads before a barrier. */
__device__ __forceinline__ int mm_group_tile_prefix(const int32_t *row_count, int experts, int bm, int32_t *out,
                                                    int *warp_sums, int threads, int bar)
{
    const int t = threadIdx.x, lane = t % 32, warp = t / 32, warps = threads / 32;
    int e0, e1, sum = 0;
    mm_prefix_chunk(experts, threads, t, &e0, &e1);
#pragma unroll 8
    for (int e = e0; e < e1; e++) sum += mm_prefix_tiles(row_count[e], bm);
    int incl = sum;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += v;
    }
    if (lane == 31) warp_sums[warp] = incl;
    asm volatile("bar.sync %0, %1;" ::"r"(bar), "r"(threads) : "memory");
    int base = incl - sum, total = 0;
    for (int w = 0; w < warps; w++) {
        const int v = warp_sums[w];
        if (w < warp) base += v;
        total += v;
    }
    for (int e = e0; e < e1; e++) {
        out[e] = base;
        base += mm_prefix_tiles(row_count[e], bm);
    }
    if (t == 0) out[experts] = total;
    asm volatile("bar.sync %0, %1;" ::"r"(bar), "r"(threads) : "memory"); /* out complete; warp_sums free */
    return total;
}

/* The same by the whole block. */
__device__ __forceinline__ int mm_block_tile_prefix(const int32_t *row_count, int experts, int bm, int32_t *out,
                                                    int *warp_sums)
{
    return mm_group_tile_prefix(row_count, experts, bm, out, warp_sums, blockDim.x, 0);
}
