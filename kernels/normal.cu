/* Normal (high-throughput) pipeline (`--modes normal`), DeepEP-style: one launch per stage and one
 * CPU sync per call, as engines built on DeepEP's normal mode run it. Not graph-capturable.
 *
 * Launches of one call (marks for --breakdown between them):
 *   quantize      x -> FP8 + per-128 scales (recipe step 2), local
 *   layout        thread per token: its rank mask (once per rank however many of its experts live
 *                 there), a slot in each destination's block (atomic per rank), and the count per
 *                 expert (atomic)
 *   notify        one CTA writes this rank's row of counts {tokens, per local expert} into every
 *                 rank's counts[me] (plain NVLink stores)
 *   barrier A     the runtime's device barrier (release/acquire, bounded): every row is in
 *   offsets       one CTA: where each sender's block starts here (prefix of the counts), where this
 *                 rank's block starts at each receiver (read from the receiver's counts), each
 *                 local expert's rows and its segment padded to the tile height, and the totals
 *                 into host-mapped memory
 *   dispatch      CTA per token: its FP8 row, scales and header {ids as the receiver sees them
 *                 (local id or -1), weights, token} to each other destination at offset + slot;
 *                 at this rank's own slot the header only (the permute reads the row from xq)
 *   barrier B     every row has arrived (run by the dispatch's last CTA, no launch of its own)
 *   -- the host waits for the offsets kernel (an event; the dispatch is already queued and runs
 *      meanwhile) and reads the totals: the CPU sync this mode is known for
 *   permute       CTA per received row (own tokens' rows from xq): one copy per local expert into that expert's
 *                 segment (slot from an atomic per expert), with {row, token, k, weight} and the
 *                 position in perm_index[row][k]
 *   GEMM1         grouped GEMM core, contiguous form, FP32 out
 *   act           SwiGLU x weight + FP8 quantization (act.cu, shared with ll)
 *   GEMM2         grouped GEMM core, BF16 out
 *   reduce-send   a CTA per row received from another rank: the FP32 sum of its local experts'
 *                 BF16 rows in k order, rounded to BF16, stored at the sender's
 *                 combine_recv[me][token] (NVLink); several senders' rows interleaved
 *   barrier C     every partial row has arrived (run by the reduce-send's last CTA)
 *   combine       CTA per token: this rank's own partial formed in place (as reduce-send forms
 *                 the others'), then y = BF16 of the FP32 sum of the partials of the ranks it
 *                 went to, in rank order (combine_recv[me] is not used)
 * Buffers: layout.h mm_layout_normal_sym (counts, dispatch_recv, combine_recv) and _local.
 * Reuse across calls without clearing: a peer writes our counts for call c+1 after barrier C of
 * call c (we read ours before barrier B), our dispatch_recv after barrier A of c+1 (we read it
 * before C of c), our combine_recv after B of c+1 (we read it after C of c, before A of c+1).
 * Numerics: the recipe up to the combine; the per-rank BF16 partial sum is this pipeline's own
 * extra rounding (at EP1 it is the recipe exactly). */
#include <cuda_bf16.h>
#include <stdint.h>

#include "comm.cuh"
#include "gemm_schedule.h"
#include "layout.h"
#include "api.h"
#include "normal_layout.h"
#include "tile_prefix.cuh"
#include "token_io.cuh"

#define MAX_K MM_KERNEL_MAX_TOPK

__device__ __forceinline__ char *sym(const mm_normal_args &a, int rank, uint64_t off)
{
    return a.comm.peers.base[rank] + off;
}

/* Row `row` of rank `rank`'s dispatch_recv. */
__device__ __forceinline__ char *recv_row(const mm_normal_args &a, int rank, int row)
{
    return sym(a, rank, a.off_recv) + (size_t)row * a.row_bytes;
}

/* The header after a dispatched row's FP8 bytes and scales. */
__device__ __forceinline__ uint64_t header_offset(const mm_normal_args &a)
{
    return (uint64_t)a.m.hidden + (((uint64_t)a.m.hidden / 128 * 4 + 15) / 16) * 16;
}

/* x -> FP8 + per-128 scales: one warp per 128-channel block, with the dispatch's own quantizer
 * (token_io.cuh), so x is quantized exactly as in the fused and ll modes. */
__global__ void __launch_bounds__(256) normal_quantize_kernel(mm_normal_args a)
{
    const int sblocks = a.m.hidden / 128, warps = blockDim.x / 32;
    const size_t total = (size_t)a.io.tokens * sblocks;
    for (size_t b = (size_t)blockIdx.x * warps + threadIdx.x / 32; b < total; b += (size_t)gridDim.x * warps) {
        size_t t = b / sblocks, blk = b % sblocks;
        mm_quantize_block128(a.io.x + t * a.m.hidden + blk * 128, a.xq + t * a.m.hidden + blk * 128,
                             a.xq_scales + t * sblocks + blk, a.m.ue8m0);
    }
}

__global__ void normal_layout_kernel(mm_normal_args a)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x, ranks = a.comm.peers.ranks;
    const int el = a.m.experts / ranks;
    if (t >= a.io.tokens) return;
    const int32_t *ids = a.io.ids + (size_t)t * a.m.topk;
    uint32_t mask = mm_token_rank_mask(ids, a.m.topk, el);
    for (int r = 0; r < ranks; r++)
        a.token_slot[(size_t)t * ranks + r] = (mask >> r) & 1u ? atomicAdd(&a.send_count[r], 1) : -1;
    for (int k = 0; k < a.m.topk; k++)
        if (ids[k] >= 0) atomicAdd(&a.expert_count[ids[k]], 1);
}

__global__ void normal_notify_kernel(mm_normal_args a)
{
    const int ranks = a.comm.peers.ranks, el = a.m.experts / ranks, me = a.comm.peers.rank;
    for (int i = threadIdx.x; i < ranks * (1 + el); i += blockDim.x) {
        int r = i / (1 + el), j = i % (1 + el);
        int32_t *row = (int32_t *)sym(a, r, a.off_counts) + (size_t)me * (1 + el);
        row[j] = j == 0 ? a.send_count[r] : a.expert_count[r * el + j - 1];
    }
}

#define OFFSETS_THREADS 256
__global__ void __launch_bounds__(OFFSETS_THREADS) normal_offsets_kernel(mm_normal_args a)
{
    const int ranks = a.comm.peers.ranks, el = a.m.experts / ranks, me = a.comm.peers.rank;
    const volatile int32_t *mine = (const volatile int32_t *)sym(a, me, a.off_counts);
    if (threadIdx.x < ranks) { /* my block's start at receiver r: rows senders before me send there */
        const volatile int32_t *theirs = (const volatile int32_t *)sym(a, threadIdx.x, a.off_counts);
        int off = 0;
        for (int s = 0; s < me; s++) off += theirs[(size_t)s * (1 + el)];
        /* the dispatch runs before the host checks the totals: it must not write past the region */
        const bool fits = off >= 0 && off + a.send_count[threadIdx.x] <= ranks * a.m.max_tokens;
        a.send_offset[threadIdx.x] = fits ? off : -1;
    }
    for (int e = threadIdx.x; e < el; e += blockDim.x) {
        int rows = 0;
        for (int s = 0; s < ranks; s++) rows += mine[(size_t)s * (1 + el) + 1 + e];
        a.f.row_count[e] = rows;
    }
    __syncthreads();
    /* each expert's segment padded to the tile height starts at its first tile's row (thread 0
     * walking the experts twice, the form before 604c7b0, cost ~10 us at 256 local experts) */
    __shared__ int warp_sums[OFFSETS_THREADS / 32];
    const int padded = mm_block_tile_prefix(a.f.row_count, el, MM_GEMM_BM, a.f.tile_start, warp_sums) * MM_GEMM_BM;
    for (int e = threadIdx.x; e <= el; e += blockDim.x) a.f.row_offset[e] = a.f.tile_start[e] * MM_GEMM_BM;
    if (threadIdx.x == 0) {
        int total = 0;
        for (int s = 0; s < ranks; s++) {
            a.recv_base[s] = total;
            total += mine[(size_t)s * (1 + el)];
        }
        a.recv_base[ranks] = total;
        volatile int32_t *host = a.host_totals;
        host[0] = total;
        host[1] = padded;
        __threadfence_system();
    }
}

/* DISPATCH_TOKEN_THREADS threads per token (the whole CTA, or a part of it so that more tokens are
 * in flight per SM): the row's 16-byte pieces are all loaded (up to PIECES_PER_THREAD each) before
 * any is stored, then each is stored to every destination rank, with no barrier inside: the
 * copies of consecutive pieces and destinations are all in flight together. The last CTA to
 * finish runs barrier B (every row has arrived everywhere), which saves the barrier's launch. */
#define PIECES_PER_THREAD 4
/* 16 tokens in flight per SM (8 CTAs of 2 x 64 threads; the other communication kernels run 4
 * CTAs of 128): the Flash dispatch at 4096 tokens took 66.3 us with 4 per SM, 63.6 with 8, 61.8
 * with 16. A build may set either (experiments). */
#ifndef DISPATCH_CTAS_PER_SM
#define DISPATCH_CTAS_PER_SM 8
#endif
#ifndef DISPATCH_TOKEN_THREADS
#define DISPATCH_TOKEN_THREADS 64
#endif
#define DISPATCH_TOKENS_PER_CTA (MM_COMM_THREADS / DISPATCH_TOKEN_THREADS)
static_assert(MM_COMM_THREADS % DISPATCH_TOKEN_THREADS == 0, "whole groups of threads per token");
__global__ void __launch_bounds__(MM_COMM_THREADS, DISPATCH_CTAS_PER_SM) normal_dispatch_kernel(mm_normal_args a)
{
    const int ranks = a.comm.peers.ranks, el = a.m.experts / ranks, me = a.comm.peers.rank;
    const int sblocks = a.m.hidden / 128, pieces = a.m.hidden / 16;
    const uint64_t hdr_off = header_offset(a);
    const int lane = threadIdx.x % DISPATCH_TOKEN_THREADS, group = threadIdx.x / DISPATCH_TOKEN_THREADS;
    for (int t = blockIdx.x * DISPATCH_TOKENS_PER_CTA + group; t < a.io.tokens; t += gridDim.x * DISPATCH_TOKENS_PER_CTA) {
        /* the destination row at each rank, -1 for none (row numbers, not pointers: registers) */
        int dst_row[MM_MAX_PEERS];
#pragma unroll
        for (int r = 0; r < MM_MAX_PEERS; r++) {
            const int slot = r < ranks ? a.token_slot[(size_t)t * ranks + r] : -1;
            const int off = r < ranks ? a.send_offset[r] : -1; /* -1: the offsets kernel found the counts broken */
            dst_row[r] = slot >= 0 && off >= 0 ? off + slot : -1;
        }
        /* this rank's own slot gets the header only (the permute reads the row from xq) */
        char *own = NULL;
#pragma unroll
        for (int r = 0; r < MM_MAX_PEERS; r++)
            if (r == me && dst_row[r] >= 0) own = recv_row(a, r, dst_row[r]);
        const uint4 *q = (const uint4 *)(a.xq + (size_t)t * a.m.hidden);
#pragma unroll 1
        for (int base = lane; base < pieces; base += PIECES_PER_THREAD * DISPATCH_TOKEN_THREADS) {
            uint4 v[PIECES_PER_THREAD];
#pragma unroll
            for (int u = 0; u < PIECES_PER_THREAD; u++) {
                int c = base + u * DISPATCH_TOKEN_THREADS;
                if (c < pieces) v[u] = __ldg(q + c);
            }
#pragma unroll
            for (int u = 0; u < PIECES_PER_THREAD; u++) {
                int c = base + u * DISPATCH_TOKEN_THREADS;
#pragma unroll
                for (int r = 0; r < MM_MAX_PEERS; r++)
                    if (c < pieces && r != me && dst_row[r] >= 0) ((uint4 *)recv_row(a, r, dst_row[r]))[c] = v[u];
            }
        }
#pragma unroll 1
        for (int c = lane; c < sblocks; c += DISPATCH_TOKEN_THREADS) {
            float sc = a.xq_scales[(size_t)t * sblocks + c];
#pragma unroll
            for (int r = 0; r < MM_MAX_PEERS; r++)
                if (r != me && dst_row[r] >= 0) ((float *)(recv_row(a, r, dst_row[r]) + a.m.hidden))[c] = sc;
        }
        /* the header's 2K + 1 words, a thread each, so each destination gets one coalesced store */
#pragma unroll 1
        for (int w = lane; w < 2 * a.m.topk + 1; w += DISPATCH_TOKEN_THREADS) {
            const size_t tk = (size_t)t * a.m.topk;
            const int32_t id = w < a.m.topk ? a.io.ids[tk + w] : -1;
            const int32_t word = w < a.m.topk ? 0 : w < 2 * a.m.topk ? __float_as_int(a.io.topk_w[tk + w - a.m.topk]) : t;
#pragma unroll
            for (int r = 0; r < MM_MAX_PEERS; r++)
                if (r != me && dst_row[r] >= 0) ((int32_t *)(recv_row(a, r, dst_row[r]) + hdr_off))[w] = w < a.m.topk ? mm_local_id(id, el, r) : word;
            if (own) ((int32_t *)(own + hdr_off))[w] = w < a.m.topk ? mm_local_id(id, el, me) : word;
        }
    }
    if (mm_last_cta(&a.done[0])) mm_cross_rank_barrier(a.comm);
}

__global__ void __launch_bounds__(MM_COMM_THREADS, MM_COMM_CTAS_PER_SM) normal_permute_kernel(mm_normal_args a)
{
    const int sblocks = a.m.hidden / 128, me = a.comm.peers.rank;
    __shared__ int dst_row[MAX_K];
    for (int j = blockIdx.x; j < a.recv_rows; j += gridDim.x) {
        const char *src = sym(a, me, a.off_recv) + (size_t)j * a.row_bytes;
        const int32_t *hdr = (const int32_t *)(src + header_offset(a));
        /* this rank's own tokens were not copied by the dispatch: their rows are read in place */
        const bool own = j >= a.recv_base[me] && j < a.recv_base[me + 1];
        const int token = own ? hdr[2 * a.m.topk] : 0;
        const uint4 *row = own ? (const uint4 *)(a.xq + (size_t)token * a.m.hidden) : (const uint4 *)src;
        const float *scales = own ? a.xq_scales + (size_t)token * sblocks : (const float *)(src + a.m.hidden);
        __syncthreads(); /* the previous row's copies are done with dst_row */
        if (threadIdx.x < a.m.topk) {
            int lid = hdr[threadIdx.x], at = -1;
            if (lid >= 0) {
                at = a.f.row_offset[lid] + atomicAdd(&a.fill[lid], 1);
                mm_wire_meta m = {j, hdr[2 * a.m.topk], (int)threadIdx.x, ((const float *)hdr)[a.m.topk + threadIdx.x]};
                ((mm_wire_meta *)a.f.packed_meta)[at] = m;
            }
            dst_row[threadIdx.x] = at;
            a.perm_index[(size_t)j * a.m.topk + threadIdx.x] = at;
        }
        __syncthreads();
        for (int k = 0; k < a.m.topk; k++) {
            int at = dst_row[k];
            if (at < 0) continue;
            for (int c = threadIdx.x; c < a.m.hidden / 16; c += blockDim.x)
                ((uint4 *)(a.f.packed_x + (size_t)at * a.m.hidden))[c] = row[c];
            for (int c = threadIdx.x; c < sblocks; c += blockDim.x) a.f.packed_scales[(size_t)at * sblocks + c] = scales[c];
        }
    }
}

/* 8 channels at column c of one received row's partial: its local experts' GEMM2 rows (`rows`,
 * in shared memory, -1 where the expert is not here) summed in FP32 in k order, rounded to BF16.
 * Rows addressed from their indices, not a pointer array, and at most 8 loads in flight, to stay
 * within the 128 registers of four CTAs per SM. reduce-send forms the other ranks' partials and
 * the combine this rank's own with it, so both are the same numbers. (The same sum as
 * mm_sum_rows8, which fused and ll keep: their SASS was not to change without a GPU run.) */
__device__ __forceinline__ uint4 local_partial8(const mm_normal_args &a, const int *rows, int c)
{
    const __nv_bfloat16 *g2 = (const __nv_bfloat16 *)a.f.gemm2_out;
    float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    /* up to 8 rows' loads in flight, then their adds (top-k <= 8 is one round) */
#pragma unroll
    for (int k0 = 0; k0 < MAX_K; k0 += 8) {
        if (k0 >= a.m.topk) break;
        uint4 v[8];
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (k0 + k < a.m.topk && rows[k0 + k] >= 0) v[k] = *(const uint4 *)(g2 + (size_t)rows[k0 + k] * a.m.hidden + c);
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (k0 + k < a.m.topk && rows[k0 + k] >= 0) mm_add_bf16x8(s, v[k]);
    }
    return mm_round_bf16x8(s);
}

/* One received row: the FP32 sum of its local experts' BF16 rows in k order, rounded to BF16,
 * stored at the sender's combine_recv[me][token]. Two 16-byte column groups per thread are summed
 * before either is stored, so their loads are in flight together. */
__device__ __forceinline__ void reduce_send_row(const mm_normal_args &a, int j, int sender, int *rows)
{
    const int me = a.comm.peers.rank;
    const char *src = sym(a, me, a.off_recv) + (size_t)j * a.row_bytes;
    const int token = ((const int32_t *)(src + header_offset(a)))[2 * a.m.topk];
    __syncthreads(); /* the previous row is done with rows[] */
    if (threadIdx.x < a.m.topk) rows[threadIdx.x] = a.perm_index[(size_t)j * a.m.topk + threadIdx.x];
    __syncthreads();
    __nv_bfloat16 *out = (__nv_bfloat16 *)sym(a, sender, a.off_combine) + ((size_t)me * a.m.max_tokens + token) * a.m.hidden;
    const int step = blockDim.x * 8;
    for (int c = threadIdx.x * 8; c < a.m.hidden; c += 2 * step) {
        uint4 s0 = local_partial8(a, rows, c), s1;
        if (c + step < a.m.hidden) s1 = local_partial8(a, rows, c + step);
        *(uint4 *)(out + c) = s0;
        if (c + step < a.m.hidden) *(uint4 *)(out + c + step) = s1;
    }
}

/* Received rows are grouped by sender, and only the other senders' rows cross NVLink; walking
 * them in order would send nothing for one part of the stage and only remote rows in another
 * (each direction of a link busy half the time). So the rows are walked in `most` steps (the
 * largest sender's count), step s taking sender r's rows [s*n_r/most, (s+1)*n_r/most): every
 * sender's rows, remote or not, spread evenly over the stage. The last CTA runs barrier C. */
__global__ void __launch_bounds__(MM_COMM_THREADS, MM_COMM_CTAS_PER_SM) normal_reduce_send_kernel(mm_normal_args a)
{
    const int ranks = a.comm.peers.ranks, me = a.comm.peers.rank;
    __shared__ int rows[MAX_K];
    int most = 0;
    for (int r = 0; r < ranks; r++)
        if (r != me) most = max(most, a.recv_base[r + 1] - a.recv_base[r]);
    for (int s = blockIdx.x; s < most; s += gridDim.x) {
        for (int i = 0; i + 1 < ranks; i++) { /* the other ranks only: the combine sums our own tokens' rows */
            const int sender = (me + 1 + i) % ranks, n = a.recv_base[sender + 1] - a.recv_base[sender];
            const int lo = (int)(((int64_t)s * n + most - 1) / most);
            const int hi = (int)(((int64_t)(s + 1) * n + most - 1) / most);
            for (int j = a.recv_base[sender] + lo; j < a.recv_base[sender] + hi; j++) reduce_send_row(a, j, sender, rows);
        }
    }
    if (mm_last_cta(&a.done[1])) mm_cross_rank_barrier(a.comm);
}

__global__ void __launch_bounds__(MM_COMM_THREADS, MM_COMM_CTAS_PER_SM) normal_combine_kernel(mm_normal_args a)
{
    const int ranks = a.comm.peers.ranks, el = a.m.experts / ranks, me = a.comm.peers.rank;
    const __nv_bfloat16 *home = (const __nv_bfloat16 *)sym(a, me, a.off_combine);
    __shared__ int own_rows[MAX_K];
    for (int t = blockIdx.x; t < a.io.tokens; t += gridDim.x) {
        uint32_t mask = mm_token_rank_mask(a.io.ids + (size_t)t * a.m.topk, a.m.topk, el);
        const bool own = (mask >> me) & 1u;
        __syncthreads(); /* the previous token is done with own_rows */
        if (own && threadIdx.x < a.m.topk) {
            const int j = a.send_offset[me] + a.token_slot[(size_t)t * ranks + me];
            own_rows[threadIdx.x] = a.perm_index[(size_t)j * a.m.topk + threadIdx.x];
        }
        __syncthreads();
        for (int c = threadIdx.x * 8; c < a.m.hidden; c += blockDim.x * 8) {
            /* this rank's partial, formed as reduce-send forms the other ranks', then the partials in rank order */
            const uint4 mine = own ? local_partial8(a, own_rows, c) : make_uint4(0, 0, 0, 0);
            uint4 v[MM_MAX_PEERS];
#pragma unroll
            for (int r = 0; r < MM_MAX_PEERS; r++)
                if (r < ranks && r != me && ((mask >> r) & 1u)) v[r] = *(const uint4 *)(home + ((size_t)r * a.m.max_tokens + t) * a.m.hidden + c);
            float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int r = 0; r < MM_MAX_PEERS; r++)
                if (r < ranks && ((mask >> r) & 1u)) mm_add_bf16x8(s, r == me ? mine : v[r]);
            *(uint4 *)((__nv_bfloat16 *)a.io.y + (size_t)t * a.m.hidden + c) = mm_round_bf16x8(s);
        }
    }
}

static int grid_for(int items, int cap)
{
    return items < 1 ? 1 : (items < cap ? items : cap);
}

extern "C" cudaError_t mm_launch_normal_front(mm_normal_args a, cudaEvent_t *marks, cudaEvent_t offsets_done,
                                              cudaStream_t stream)
{
    const int el = a.m.experts / a.comm.peers.ranks;
    cudaError_t e = cudaSuccess;
    MM_MARK(0);
    /* send count [R], expert count [E], fill [El], done [2] are contiguous */
    if ((e = cudaMemsetAsync(a.send_count, 0, (size_t)(a.comm.peers.ranks + a.m.experts + el + 2) * 4, stream)) != cudaSuccess)
        return e;
    if (a.io.tokens > 0) {
        normal_quantize_kernel<<<grid_for((int)(((size_t)a.io.tokens * (a.m.hidden / 128) + 7) / 8), a.sm_count * 8), 256, 0,
                                 stream>>>(a);
        normal_layout_kernel<<<(a.io.tokens + 255) / 256, 256, 0, stream>>>(a);
    }
    MM_MARK(1);
    normal_notify_kernel<<<1, 256, 0, stream>>>(a);
    if ((e = mm_launch_barrier(a.comm, stream)) != cudaSuccess) return e;
    normal_offsets_kernel<<<1, OFFSETS_THREADS, 0, stream>>>(a);
    if ((e = cudaGetLastError()) != cudaSuccess || (e = cudaEventRecord(offsets_done, stream)) != cudaSuccess) return e;
    /* The dispatch needs only device-side offsets, so it runs while the host waits for
     * offsets_done and reads the totals. The instrumented call lines the ranks up before each
     * NVLink stage, so that stage times its own traffic and not a later rank (the wait shows in
     * the stage before: notify, gemm2). */
    if (marks && (e = mm_launch_barrier(a.comm, stream)) != cudaSuccess) return e;
    MM_MARK(2);
    const int dispatch_ctas = a.comm_ctas / MM_COMM_CTAS_PER_SM * DISPATCH_CTAS_PER_SM;
    normal_dispatch_kernel<<<grid_for((a.io.tokens + DISPATCH_TOKENS_PER_CTA - 1) / DISPATCH_TOKENS_PER_CTA, dispatch_ctas),
                             MM_COMM_THREADS, 0, stream>>>(a); /* with barrier B */
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    MM_MARK(3);
    return cudaSuccess;
}

extern "C" cudaError_t mm_launch_normal_rest(mm_normal_args a, cudaEvent_t *marks, cudaStream_t stream)
{
    const int el = a.m.experts / a.comm.peers.ranks, comm_ctas = a.comm_ctas;
    cudaError_t e = cudaSuccess;
    normal_permute_kernel<<<grid_for(a.recv_rows, comm_ctas), MM_COMM_THREADS, 0, stream>>>(a);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    MM_MARK(4);
    /* an expert has at most one row per received token */
    if ((e = mm_launch_expert_ffn(&a.m, &a.w, &a.f, el, a.recv_rows, a.sm_count, &a.comm, marks ? marks + 5 : NULL,
                                  stream)) != cudaSuccess)
        return e;
    if (marks && (e = mm_launch_barrier(a.comm, stream)) != cudaSuccess) return e;
    MM_MARK(7);
    normal_reduce_send_kernel<<<grid_for(a.recv_rows, comm_ctas), MM_COMM_THREADS, 0, stream>>>(a); /* with barrier C */
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    MM_MARK(8); /* reduce-send: the partial rows' NVLink traffic (and barrier C) */
    normal_combine_kernel<<<grid_for(a.io.tokens, comm_ctas), MM_COMM_THREADS, 0, stream>>>(a);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    MM_MARK(9);
    return cudaSuccess;
}
