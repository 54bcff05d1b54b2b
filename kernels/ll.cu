/* Low-latency pipeline (`--modes ll`), DeepEP-style: fixed-size buffers, FP8 dispatch over NVLink,
 * masked grouped GEMMs, combine. No CPU sync anywhere; one call is a fixed sequence of launches on
 * one stream, so it can be captured in a CUDA graph.
 *
 * Launches of one call and their roles:
 *   begin          epoch += 1 (this rank's call counter; all ranks make the same calls)
 *   dispatch       CTA per token: quantize x (recipe step 2), then for each k store the FP8 row,
 *                  scales and meta {src rank, token, k, weight} into the owner's
 *                  dispatch_recv[le][src][slot] (slot from a local atomic per expert). The last CTA
 *                  to finish publishes every (expert, count) to its owner as (epoch << 32) | count
 *                  with st.release.sys, then clears the local counters.
 *   receive        CTA per (local expert, source): wait (bounded) for all sources' counts of its
 *                  expert, then pack its rows into the masked layout [le][R*T] (A, scales, meta) at
 *                  the prefix of the counts; CTA (le, 0) writes row_count[le].
 *   GEMM1          grouped GEMM core, masked form, FP32 out [rows][2I]
 *   act            (act.cu, shared with normal) warp per (valid row, 128 block of I): SwiGLU
 *                  with the limit, times the row's
 *                  top-k weight (mm_swiglu), quantized per 128 (recipe steps 4-5)
 *   GEMM2          grouped GEMM core, BF16 out [rows][H]
 *   combine_send   warp per valid row: store the BF16 row into its token's rank at
 *                  combine_recv[token][k]; the last CTA publishes epoch into every rank's
 *                  combine_flags[me] after a system fence.
 *   combine_recv   CTA per token: wait (bounded) for every rank's flag, then y = BF16 of the FP32
 *                  sum over valid k in k order (recipe step 7).
 * Why it cannot deadlock: each wait is on a slot that one specific launch of one peer writes
 * unconditionally (every rank publishes counts to every expert owner and flags to every rank, even
 * with 0 tokens), and launches on each stream only depend on earlier launches; every wait is
 * bounded anyway (mm_wait_geq), and a timeout records its phase, rank and peer.
 * Reuse across calls: slots are epoch-tagged, never cleared; a peer writes our dispatch_recv for
 * call c+1 only after it received our combine flag of call c, which we publish after packing. */
#include <cuda_bf16.h>
#include <stdint.h>

#include "comm.cuh"
#include "gemm_schedule.h"
#include "api.h"
#include "recipe.h"
#include "token_io.cuh"

typedef mm_wire_meta row_meta;

/* The state words (mm_xchg_*): counters at 8 are done[2]: dispatch, combine. */

__global__ void ll_begin_kernel(mm_ll_args a)
{
    *mm_xchg_epoch(a.comm, a.x) += 1;
}

__global__ void __launch_bounds__(128) ll_dispatch_kernel(mm_ll_args a)
{
    extern __shared__ __align__(16) uint8_t row[]; /* one wire row */
    __shared__ int slots[MM_KERNEL_MAX_TOPK];
    const int t = blockIdx.x;
    const int el = a.m.experts / a.comm.peers.ranks, me = a.comm.peers.rank;
    if (t < a.io.tokens) {
        mm_dispatch_dest d = {&a.comm.peers, a.x.mode_offset + a.x.off_recv, a.x.row_bytes, a.m.max_tokens, el};
        mm_dispatch_token(d, a.m.hidden, a.m.topk, a.m.ue8m0, a.io.x + (size_t)t * a.m.hidden, a.io.ids + (size_t)t * a.m.topk,
                          a.io.topk_w + (size_t)t * a.m.topk, t, mm_xchg_send_slots(a.comm, a.x), row, slots);
    }
    if (mm_last_cta(&mm_xchg_counters(a.comm, a.x)[0])) {
        uint64_t epoch = *mm_xchg_epoch(a.comm, a.x);
        for (int e = threadIdx.x; e < a.m.experts; e += blockDim.x) {
            uint32_t n = *(volatile uint32_t *)&mm_xchg_send_slots(a.comm, a.x)[e];
            uint64_t *slot_p = (uint64_t *)mm_xchg_at(a.comm, a.x, e / el, a.x.off_counts) +
                               (size_t)(e % el) * a.comm.peers.ranks + me;
            mm_st_release_sys(slot_p, (epoch << 32) | n);
            mm_xchg_send_slots(a.comm, a.x)[e] = 0;
        }
        if (threadIdx.x == 0) mm_xchg_counters(a.comm, a.x)[0] = 0;
    }
}

__global__ void __launch_bounds__(256) ll_receive_kernel(mm_ll_args a)
{
    const int le = blockIdx.x, src = blockIdx.y, ranks = a.comm.peers.ranks;
    const uint64_t row_bytes = a.x.row_bytes;
    __shared__ int count, offset, ok;
    if (threadIdx.x == 0) {
        uint64_t target = *mm_xchg_epoch(a.comm, a.x) << 32;
        const uint64_t *counts = (const uint64_t *)mm_xchg_at(a.comm, a.x, a.comm.peers.rank, a.x.off_counts) + (size_t)le * ranks;
        int off = 0, total = 0, good = 1;
        for (int s = 0; s < ranks && good; s++) {
            good = mm_wait_geq(a.comm, counts + s, target, MM_PHASE_LL_DISPATCH, s);
            int n = (int)(mm_ld_acquire_sys(counts + s) & 0xffffffffu);
            if (s < src) off += n;
            if (s == src) count = n;
            total += n;
        }
        offset = off;
        ok = good;
        if (good && src == 0) a.f.row_count[le] = total;
    }
    __syncthreads();
    if (!ok) return;
    const char *recv = mm_xchg_at(a.comm, a.x, a.comm.peers.rank, a.x.off_recv) +
                       (size_t)(le * ranks + src) * a.m.max_tokens * row_bytes;
    const size_t base = (size_t)le * ranks * a.m.max_tokens + offset;
    const int qchunks = a.m.hidden / 16;
    for (int i = 0; i < count; i++) {
        const char *r = recv + (size_t)i * row_bytes;
        size_t j = base + i;
        for (int c = threadIdx.x; c < qchunks; c += blockDim.x)
            ((uint4 *)(a.f.packed_x + j * a.m.hidden))[c] = ((const uint4 *)r)[c];
        /* scales: H/128 floats (the wire pads them to 16 B; the packed layout does not) */
        for (int c = threadIdx.x; c < a.m.hidden / 128; c += blockDim.x)
            a.f.packed_scales[j * (a.m.hidden / 128) + c] = ((const float *)(r + a.m.hidden))[c];
        if (threadIdx.x == 0)
            ((uint4 *)a.f.packed_meta)[j] = *(const uint4 *)(r + row_bytes - 16);
    }
}

__global__ void __launch_bounds__(256) ll_combine_send_kernel(mm_ll_args a)
{
    const int el = a.m.experts / a.comm.peers.ranks, lane = threadIdx.x % 32;
    const long long items = (long long)a.f.tile_start[el] * MM_GEMM_BM;
    const long long warps = (long long)gridDim.x * (blockDim.x / 32);
    for (long long w = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; w < items; w += warps) {
        size_t row;
        if (!mm_tile_row_index(a.f.tile_start, a.f.row_offset, a.f.row_count, el, (int)(w / MM_GEMM_BM),
                               (int)(w % MM_GEMM_BM), &row))
            continue;
        row_meta m = ((const row_meta *)a.f.packed_meta)[row];
        uint4 *dst = (uint4 *)(mm_xchg_at(a.comm, a.x, m.src_rank, a.x.off_combine) +
                               ((size_t)m.token * a.m.topk + m.k) * a.m.hidden * 2u);
        const uint4 *src = (const uint4 *)(a.f.gemm2_out + row * a.m.hidden);
        for (int c = lane; c < a.m.hidden / 8; c += 32) dst[c] = src[c];
    }
    if (mm_last_cta(&mm_xchg_counters(a.comm, a.x)[1])) {
        uint64_t epoch = *mm_xchg_epoch(a.comm, a.x);
        for (int r = threadIdx.x; r < a.comm.peers.ranks; r += blockDim.x)
            mm_st_release_sys((uint64_t *)mm_xchg_at(a.comm, a.x, r, a.x.off_flags) + a.comm.peers.rank, epoch);
        if (threadIdx.x == 0) mm_xchg_counters(a.comm, a.x)[1] = 0;
    }
}

__global__ void __launch_bounds__(128) ll_combine_recv_kernel(mm_ll_args a)
{
    const int t = blockIdx.x;
    __shared__ int ok;
    if (threadIdx.x == 0) {
        uint64_t epoch = *mm_xchg_epoch(a.comm, a.x);
        const uint64_t *flags = (const uint64_t *)mm_xchg_at(a.comm, a.x, a.comm.peers.rank, a.x.off_flags);
        int good = 1;
        for (int r = 0; r < a.comm.peers.ranks && good; r++)
            good = mm_wait_geq(a.comm, flags + r, epoch, MM_PHASE_LL_COMBINE, r);
        ok = good;
    }
    __syncthreads();
    if (!ok) return;
    const __nv_bfloat16 *in = (const __nv_bfloat16 *)mm_xchg_at(a.comm, a.x, a.comm.peers.rank, a.x.off_combine) +
                              (size_t)t * a.m.topk * a.m.hidden;
    mm_combine_token(in, a.io.ids + (size_t)t * a.m.topk, a.m.topk, a.m.hidden, (__nv_bfloat16 *)a.io.y + (size_t)t * a.m.hidden);
}

extern "C" cudaError_t mm_launch_ll(mm_ll_args a, cudaEvent_t *marks, cudaStream_t stream)
{
    const int el = a.m.experts / a.comm.peers.ranks;
    cudaError_t e = cudaSuccess;
    MM_MARK(0);
    ll_begin_kernel<<<1, 1, 0, stream>>>(a);
    ll_dispatch_kernel<<<a.io.tokens > 0 ? a.io.tokens : 1, 128, (size_t)a.x.row_bytes, stream>>>(a);
    MM_MARK(1);
    dim3 recv_grid((unsigned)el, (unsigned)a.comm.peers.ranks);
    ll_receive_kernel<<<recv_grid, 256, 0, stream>>>(a);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    MM_MARK(2);
    /* the masked layout's bound: every sender's max_tokens on one expert (no host sync here) */
    if ((e = mm_launch_expert_ffn(&a.m, &a.w, &a.f, el, a.comm.peers.ranks * a.m.max_tokens, a.sm_count, &a.comm,
                                  marks ? marks + 3 : NULL, stream)) != cudaSuccess)
        return e;
    MM_MARK(5);
    ll_combine_send_kernel<<<a.sm_count * 2, 256, 0, stream>>>(a);
    MM_MARK(6);
    if (a.io.tokens > 0) ll_combine_recv_kernel<<<a.io.tokens, 128, 0, stream>>>(a);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    MM_MARK(7);
    return cudaSuccess;
}
