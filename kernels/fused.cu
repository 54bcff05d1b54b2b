/* The fused mega-MoE kernel (`--modes fused`): ONE persistent launch per call, from this rank's
 * BF16 tokens to its BF16 output, with no CPU sync and no other launch (docs/fused.md).
 *
 * Grid: every CTA resident at once (mm_fused_prepare gives the bound), 256 threads. Every CTA
 * goes through the same phases; the hand-offs between them are counters, not grid barriers, so a
 * CTA starts a phase's work as soon as what that work needs is there:
 *   1 dispatch      CTAs stride over tokens (token_io.cuh, shared with ll): quantize the row
 *                   (recipe step 2) in shared memory, then store FP8 row + scales + meta {src
 *                   rank, token, k, weight} for every k into the owner's dispatch_recv[le][me][slot]
 *                   over NVLink (slots from local atomics per expert). The last CTA out publishes
 *                   (epoch << 32) | count to each expert's owner with st.release.sys and clears
 *                   the send counters.
 *   2 counts        each CTA waits (bounded, acquire) for the El x R counts of this rank's
 *                   experts and builds the row-tile schedule in shared memory (tile_start).
 *   3 GEMM items    claimed one at a time from a local atomic (the next claim is issued while the
 *                   current item runs), in one order: all GEMM1 items (row tile of 128, 128-block
 *                   of I) first, then all GEMM2 items (row tile, 128-block of H). One call site
 *                   of the tile mainloop (gemm_tile.cuh) serves every pass.
 *                   GEMM1 item: reads its A rows in place from dispatch_recv (a row table in
 *                   shared memory points at each row, whichever source rank sent it), runs the
 *                   gate block then the up block through the GEMM core, and in the epilogue
 *                   applies SwiGLU with the limit and the row's top-k weight, quantizes per 128
 *                   (recipe steps 4-5) into act, then bumps gemm1_done[row tile].
 *                   GEMM2 item: waits (bounded) until gemm1_done[row tile] == I/128, runs the
 *                   tile over act, stages it as BF16 and stores each row's 256 bytes straight
 *                   into its token's rank at combine_recv[token][k] (NVLink).
 *   4 combine flag  the last CTA out of phase 3 publishes the epoch into every rank's
 *                   combine_flags[me] after a system fence.
 *   5 combine       CTAs stride over tokens: wait (bounded) for every rank's flag, then
 *                   y = BF16 of the FP32 sum over valid k in k order (recipe step 7).
 *   6 exit          the last CTA out clears the counters it owns and stores the epoch, so the
 *                   next call starts clean without a clean-up launch.
 * Buffers (layout.h mm_layout_fused_sym/local): state (epoch, counters, send slots,
 * gemm1_done[]), counts [El][R], combine_flags [R], dispatch_recv [El][R][T] wire rows,
 * combine_recv [T][K][H] BF16 (symmetric); act [El][R*T][I] FP8 + scales (local).
 * Why it cannot deadlock: all CTAs are resident; a GEMM2 item only waits for GEMM1 items, and
 * those were claimed before it (claims are in increasing order) by CTAs that wait for nothing
 * more once they have the counts; counts and flags are written unconditionally by every rank
 * (also with 0 tokens). Every wait is bounded anyway and records its phase on expiry; a CTA
 * whose wait fails returns, and the others' waits see the abort flag.
 * Reuse across calls: counts and flags are epoch-tagged; a peer writes our dispatch_recv for
 * call c+1 only after our combine flag of call c, which we publish after every GEMM1 tile (the
 * only reader of dispatch_recv) is done; it writes our combine_recv for c+1 only after we sent
 * it our counts of c+1, i.e. after our call c ended.
 * Numerics: the same tile mainloop, recipe functions and k-order sum as ll, so the two modes'
 * outputs are bit-identical. */
#include <cuda_bf16.h>
#include <stdint.h>

#include "comm.cuh"
#include "gemm_tile.cuh"
#include "layout.h"
#include "megamoe_kernels.h"
#include "recipe.h"
#include "token_io.cuh"

static_assert(MM_FUSED_TILE_ROWS == MM_GEMM_BM, "the layout's row tiles are the GEMM core's");

#define STAGING_BYTES (MM_GEMM_BM * MM_GEMM_BN * 4) /* gate block FP32, or the BF16 output tile */

typedef mm_wire_meta wire_meta;

enum { DONE_DISPATCH, DONE_GEMM2, DONE_EXIT, WORK_CLAIM };

__device__ __forceinline__ char *region(const mm_fused_args &a, int rank, uint64_t off)
{
    return a.comm.peers.base[rank] + a.mode_offset + off;
}

__device__ __forceinline__ char *state_base(const mm_fused_args &a)
{
    return region(a, a.comm.peers.rank, a.off_state);
}

__device__ __forceinline__ uint64_t *epoch_word(const mm_fused_args &a)
{
    return (uint64_t *)state_base(a);
}

__device__ __forceinline__ uint32_t *counters(const mm_fused_args &a)
{
    return (uint32_t *)(state_base(a) + 8);
}

__device__ __forceinline__ uint32_t *send_counters(const mm_fused_args &a)
{
    return (uint32_t *)(state_base(a) + 32);
}

__device__ __forceinline__ uint32_t *gemm1_done(const mm_fused_args &a)
{
    return send_counters(a) + a.experts;
}

/* Bounded wait on a local counter written by other CTAs of this launch. */
__device__ __forceinline__ bool wait_local(const mm_comm &c, const uint32_t *p, uint32_t target,
                                           uint32_t phase)
{
    uint64_t start = mm_globaltimer();
    for (uint32_t spin = 0;; spin++) {
        uint32_t seen = mm_ld_volatile_u32(p);
        if (seen >= target) {
            __threadfence();
            return true;
        }
        if ((spin & 31u) == 31u) {
            if (mm_aborted(c)) return false;
            if (mm_globaltimer() - start > c.timeout_ns) {
                mm_record_failure(c, phase, -1, target, seen);
                return false;
            }
        }
    }
}

/* --breakdown: this CTA's time at the end of a phase. */
__device__ __forceinline__ void stamp(const mm_fused_args &a, int i)
{
    if (a.stamps && threadIdx.x == 0) a.stamps[blockIdx.x * MM_FUSED_STAMPS + i] = mm_globaltimer();
}

/* Phase 1: this CTA's tokens, quantized and sent to their experts' owners. */
__device__ void dispatch_tokens(const mm_fused_args &a, uint8_t *row)
{
    const int el = a.experts / a.comm.peers.ranks, me = a.comm.peers.rank;
    __shared__ int slots[MM_KERNEL_MAX_TOPK];
    mm_dispatch_dest d = {&a.comm.peers, a.mode_offset + a.off_recv, a.row_bytes, a.max_tokens, el};
    for (int t = blockIdx.x; t < a.tokens; t += gridDim.x)
        mm_dispatch_token(d, a.hidden, a.topk, a.ue8m0, a.x + (size_t)t * a.hidden, a.ids + (size_t)t * a.topk,
                          a.topk_w + (size_t)t * a.topk, t, send_counters(a), row, slots);
    if (mm_last_cta(&counters(a)[DONE_DISPATCH])) {
        uint64_t epoch = *epoch_word(a) + 1;
        for (int e = threadIdx.x; e < a.experts; e += blockDim.x) {
            uint32_t n = mm_ld_volatile_u32(&send_counters(a)[e]);
            uint64_t *slot_p = (uint64_t *)region(a, e / el, a.off_counts) + (size_t)(e % el) * a.comm.peers.ranks + me;
            mm_st_release_sys(slot_p, (epoch << 32) | n);
            send_counters(a)[e] = 0;
        }
        if (threadIdx.x == 0) counters(a)[DONE_DISPATCH] = 0;
    }
}

/* The row table of row tile `rt` of local expert `le`: logical row r of the expert is the
 * (r - prefix)-th row that source rank s sent, s the first with prefix + cnt[s] > r. Thread r
 * (< BM) also gets its row's meta into `m`, a register: the epilogue needs it, the mainloop does
 * not, so its load latency hides behind the mainloop (store_meta publishes it). */
__device__ __forceinline__ void recv_rows(const mm_fused_args &a, const int *cnt, int le, int rt, int rows,
                                          mm_tile_rows *tab, bool set_table, int4 *m)
{
    const int ranks = a.comm.peers.ranks;
    if (threadIdx.x < MM_GEMM_BM) {
        int r = rt * MM_GEMM_BM + (threadIdx.x < rows ? threadIdx.x : 0), s = 0;
        while (s < ranks - 1 && r >= cnt[le * ranks + s]) r -= cnt[le * ranks + s++];
        const uint8_t *p = (const uint8_t *)region(a, a.comm.peers.rank, a.off_recv) +
                           ((size_t)(le * ranks + s) * a.max_tokens + r) * a.row_bytes;
        if (set_table) {
            tab->row[threadIdx.x] = p;
            tab->scale[threadIdx.x] = (const float *)(p + a.hidden);
        }
        *m = __ldcg((const int4 *)(p + a.row_bytes - 16));
    }
}

/* Publishes the metas recv_rows fetched; the caller syncs before reading other rows'. */
__device__ __forceinline__ void store_meta(wire_meta *meta, int4 m)
{
    if (threadIdx.x < MM_GEMM_BM) meta[threadIdx.x] = *(const wire_meta *)&m;
}

__global__ void __launch_bounds__(MM_TILE_THREADS, 1) fused_moe_kernel(mm_fused_args a)
{
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ mm_tile_rows tab;
    __shared__ __align__(8) mm_tile_pipe pipe;
    __shared__ wire_meta meta[MM_GEMM_BM];
    __shared__ int item_s, ok_s;
    uint8_t *stages = mm_tile_stages(smem);
    float *staging = (float *)(smem + MM_TILE_SMEM_BYTES); /* after the stages and their slack */
    const int ranks = a.comm.peers.ranks, me = a.comm.peers.rank, el = a.experts / ranks;
    int *cnt = (int *)(smem + MM_TILE_SMEM_BYTES + STAGING_BYTES); /* [El][R] */
    int *tile_start = cnt + a.experts;                              /* [El + 1] */
    const uint64_t epoch = *epoch_word(a) + 1;
    uint32_t phase = 0; /* parity bits of the stage barriers */
    if (threadIdx.x == 0) mm_tile_pipe_init(&pipe);
    stamp(a, 0);

    /* 1: dispatch (the stages hold the row being sent) */
    dispatch_tokens(a, stages);
    /* the row buffer's generic writes are ordered before the TMA (async proxy) refills it */
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    stamp(a, 1);

    /* 2: counts of this rank's experts, then the row-tile schedule */
    {
        const uint64_t *slots = (const uint64_t *)region(a, me, a.off_counts);
        int good = 1;
        for (int i = threadIdx.x; i < el * ranks; i += blockDim.x) {
            if (!mm_wait_geq(a.comm, slots + i, epoch << 32, MM_PHASE_FUSED_DISPATCH, i % ranks)) {
                good = 0;
                break;
            }
            cnt[i] = (int)(mm_ld_acquire_sys(slots + i) & 0xffffffffu);
        }
        if (!__syncthreads_and(good)) return;
        if (threadIdx.x == 0) {
            int total = 0;
            for (int e = 0; e < el; e++) {
                int rows = 0;
                for (int s = 0; s < ranks; s++) rows += cnt[e * ranks + s];
                tile_start[e] = total;
                total += mm_row_tiles(rows);
            }
            tile_start[el] = total;
        }
        __syncthreads();
    }
    stamp(a, 2);
    const int tiles = tile_start[el], ib_count = a.inter / 128, hb_count = a.hidden / 128;
    const int gemm1_items = tiles * ib_count, items = gemm1_items + tiles * hb_count;
    const size_t rows_per_expert = (size_t)ranks * a.max_tokens;

    /* 3: GEMM items, claimed in increasing order. Thread 0 claims the next item as soon as it has
     * the current one, so the atomic's round trip hides behind the current item's work. */
    int claimed = 0;
    if (threadIdx.x == 0) claimed = mm_aborted(a.comm) ? items : (int)atomicAdd(&counters(a)[WORK_CLAIM], 1u);
    for (;;) {
        __syncthreads(); /* everyone has read the previous item_s */
        if (threadIdx.x == 0) item_s = claimed;
        __syncthreads();
        const int item = item_s;
        if (item >= items) break;
        if (threadIdx.x == 0) claimed = mm_aborted(a.comm) ? items : (int)atomicAdd(&counters(a)[WORK_CLAIM], 1u);
        const bool is_gemm1 = item < gemm1_items;
        const int tile = is_gemm1 ? item / ib_count : (item - gemm1_items) / hb_count;
        const int block = is_gemm1 ? item % ib_count : (item - gemm1_items) % hb_count;
        mm_tile t = mm_tile_locate(tile_start, el, 1, tile);
        const int le = t.expert;
        int expert_rows = 0;
        for (int s = 0; s < ranks; s++) expert_rows += cnt[le * ranks + s];
        int rows = expert_rows - t.row_tile * MM_GEMM_BM;
        rows = rows < MM_GEMM_BM ? rows : MM_GEMM_BM;
        const size_t act_row0 = (size_t)le * rows_per_expert + (size_t)t.row_tile * MM_GEMM_BM;
        float acc[MM_TILE_ACC];
        int4 row_meta = make_int4(0, 0, 0, 0);

        if (!is_gemm1) { /* GEMM2 reads what the row tile's GEMM1 items wrote */
            if (threadIdx.x == 0)
                ok_s = wait_local(a.comm, &gemm1_done(a)[tile], (uint32_t)ib_count, MM_PHASE_FUSED_GEMM1);
            __syncthreads();
            if (!ok_s) return;
        }
        /* GEMM1 reads its rows in place from dispatch_recv; GEMM2 from act. Either way the
         * row metas (for the epilogue) come from the wire rows. */
        recv_rows(a, cnt, le, t.row_tile, rows, &tab, is_gemm1, &row_meta);
        if (!is_gemm1 && threadIdx.x < MM_GEMM_BM) {
            size_t r = act_row0 + (threadIdx.x < rows ? threadIdx.x : 0);
            tab.row[threadIdx.x] = a.act + r * a.inter;
            tab.scale[threadIdx.x] = a.act_scales + r * ib_count;
        }
        /* One call site of the mainloop for every pass (GEMM1: gate then up; GEMM2: down), so
         * the kernel holds one copy of it. The gate block is parked in shared memory in a
         * per-thread layout (no sync needed) while the up block runs. */
        const int passes = is_gemm1 ? 2 : 1, kb_h = a.hidden / 128, n_blocks = 2 * ib_count;
        for (int pass = 0; pass < passes; pass++) {
            mm_tile_b b;
            int k;
            if (is_gemm1) {
                b.map = a.w1_map;
                b.row0 = le * 2 * a.inter + pass * a.inter + block * 128;
                b.scale = a.s1 + ((size_t)le * n_blocks + pass * ib_count + block) * kb_h;
                k = a.hidden;
            } else {
                b.map = a.w2_map;
                b.row0 = le * a.hidden + block * 128;
                b.scale = a.s2 + ((size_t)le * hb_count + block) * ib_count;
                k = a.inter;
            }
            mm_tile_mainloop(stages, &pipe, phase, &tab, rows, b, k, acc);
            if (is_gemm1 && pass == 0) {
#pragma unroll
                for (int i = 0; i < MM_TILE_ACC; i++) staging[i * MM_TILE_THREADS + threadIdx.x] = acc[i];
            }
        }

        if (is_gemm1) {
            /* the epilogue: h = swiglu(gate, up) * w, per-row amax over the 128 */
            store_meta(meta, row_meta);
            __syncthreads();
            /* a quad holds all 128 columns of its two rows: the row amax is 2 shuffles away */
            const int quad = threadIdx.x % 4;
            float amax[2] = {0.0f, 0.0f};
            const int r_lo = mm_acc_row(0), r_hi = mm_acc_row(2);
            const bool ok_lo = r_lo < rows, ok_hi = r_hi < rows;
            const float w_lo = ok_lo ? meta[r_lo].weight : 0.0f, w_hi = ok_hi ? meta[r_hi].weight : 0.0f;
            /* SwiGLU only on valid rows: at decode sizes most of the tile is padding, and this
             * math (exp, division) over all 128 rows cost more than the row's GEMM */
            if (ok_lo || ok_hi) {
#pragma unroll
                for (int i = 0; i < MM_TILE_ACC; i++) {
                    int hi = (i >> 1) & 1;
                    if (!(hi ? ok_hi : ok_lo)) continue;
                    float hv = mm_swiglu(staging[i * MM_TILE_THREADS + threadIdx.x], acc[i], hi ? w_hi : w_lo,
                                         a.has_limit, a.limit);
                    acc[i] = hv;
                    amax[hi] = fmaxf(amax[hi], mm_fabs(hv));
                }
            }
            float scale[2];
#pragma unroll
            for (int hi = 0; hi < 2; hi++) {
                amax[hi] = fmaxf(amax[hi], __shfl_xor_sync(0xffffffffu, amax[hi], 1));
                amax[hi] = fmaxf(amax[hi], __shfl_xor_sync(0xffffffffu, amax[hi], 2));
                scale[hi] = mm_block_scale(amax[hi], a.ue8m0);
            }
#pragma unroll
            for (int i = 0; i < MM_TILE_ACC; i += 2) {
                int hi = (i >> 1) & 1, r = hi ? r_hi : r_lo;
                if (r >= rows) continue;
                uint16_t q = (uint16_t)mm_quantize(acc[i], scale[hi]) |
                             (uint16_t)((uint16_t)mm_quantize(acc[i + 1], scale[hi]) << 8);
                *(uint16_t *)(a.act + (act_row0 + r) * a.inter + block * 128 + mm_acc_col(i)) = q;
            }
            if (quad == 0) {
                if (r_lo < rows) a.act_scales[(act_row0 + r_lo) * ib_count + block] = scale[0];
                if (r_hi < rows) a.act_scales[(act_row0 + r_hi) * ib_count + block] = scale[1];
            }
            __threadfence();
            __syncthreads();
            if (threadIdx.x == 0) atomicAdd(&gemm1_done(a)[tile], 1u);
        } else {
            /* stage the BF16 tile, then each row's 256 bytes go home in 16-byte stores */
            __nv_bfloat16 *out_tile = (__nv_bfloat16 *)staging; /* [BM][BN] */
#pragma unroll
            for (int i = 0; i < MM_TILE_ACC; i += 2)
                *(__nv_bfloat162 *)(out_tile + mm_acc_row(i) * MM_GEMM_BN + mm_acc_col(i)) =
                    __floats2bfloat162_rn(acc[i], acc[i + 1]);
            store_meta(meta, row_meta);
            __syncthreads();
            const int lane = threadIdx.x % 32;
            for (int r = threadIdx.x / 32; r < rows; r += MM_TILE_THREADS / 32) {
                if (lane >= MM_GEMM_BN * 2 / 16) continue;
                wire_meta m = meta[r];
                uint4 *dst = (uint4 *)(region(a, m.src_rank, a.off_combine) +
                                       (((size_t)m.token * a.topk + m.k) * a.hidden + block * 128) * 2u);
                dst[lane] = ((const uint4 *)(out_tile + r * MM_GEMM_BN))[lane];
            }
        }
    }

    stamp(a, 3);
    /* 4: the last CTA out of the GEMMs tells every rank its combine rows are there */
    if (mm_last_cta(&counters(a)[DONE_GEMM2])) {
        for (int r = threadIdx.x; r < ranks; r += blockDim.x)
            mm_st_release_sys((uint64_t *)region(a, r, a.off_flags) + me, epoch);
        if (threadIdx.x == 0) counters(a)[DONE_GEMM2] = 0;
    }

    /* 5: combine this CTA's tokens */
    if (blockIdx.x < a.tokens) {
        if (threadIdx.x == 0) {
            const uint64_t *flags = (const uint64_t *)region(a, me, a.off_flags);
            int good = 1;
            for (int r = 0; r < ranks && good; r++)
                good = mm_wait_geq(a.comm, flags + r, epoch, MM_PHASE_FUSED_COMBINE, r);
            ok_s = good;
        }
        __syncthreads();
        if (!ok_s) return;
        const __nv_bfloat16 *home = (const __nv_bfloat16 *)region(a, me, a.off_combine);
        for (int t = blockIdx.x; t < a.tokens; t += gridDim.x)
            mm_combine_token(home + (size_t)t * a.topk * a.hidden, a.ids + (size_t)t * a.topk, a.topk, a.hidden,
                             (__nv_bfloat16 *)a.y + (size_t)t * a.hidden);
    }

    stamp(a, 4);
    /* 6: the last CTA out leaves the state clean for the next call */
    if (mm_last_cta(&counters(a)[DONE_EXIT])) {
        for (int i = threadIdx.x; i < tiles; i += blockDim.x) gemm1_done(a)[i] = 0;
        if (threadIdx.x == 0) {
            counters(a)[WORK_CLAIM] = 0;
            *epoch_word(a) = epoch;
            __threadfence();
            counters(a)[DONE_EXIT] = 0;
        }
    }
}

extern "C" size_t mm_fused_smem_bytes(int hidden, int experts, int ranks)
{
    (void)hidden; /* the dispatch row (<= H + H/32 + 16 bytes) lives in the stages: checked below */
    return (size_t)MM_TILE_SMEM_BYTES + STAGING_BYTES + (size_t)experts * 4 + ((size_t)experts / ranks + 1) * 4;
}

extern "C" cudaError_t mm_fused_prepare(int hidden, int experts, int ranks, int *max_ctas)
{
    *max_ctas = 0;
    size_t wire = (size_t)hidden + ((size_t)hidden / 128 * 4 + 15) / 16 * 16 + 16;
    if (wire > MM_TILE_STAGES * MM_TILE_STAGE_BYTES || ranks < 1 || experts % ranks) return cudaErrorInvalidValue;
    size_t smem = mm_fused_smem_bytes(hidden, experts, ranks);
    cudaError_t e = cudaFuncSetAttribute(fused_moe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    int per_sm = 0, dev = 0, sms = 0;
    if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_moe_kernel, MM_TILE_THREADS, smem)) != cudaSuccess)
        return e;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) return e;
    *max_ctas = per_sm * sms;
    return cudaSuccess;
}

extern "C" cudaError_t mm_launch_fused(mm_fused_args a, int ctas, cudaStream_t stream)
{
    size_t smem = mm_fused_smem_bytes(a.hidden, a.experts, a.comm.peers.ranks);
    fused_moe_kernel<<<ctas, MM_TILE_THREADS, smem, stream>>>(a);
    return cudaGetLastError();
}
