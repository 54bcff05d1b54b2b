/* Device-side communication primitives every mode uses: system-scope release/acquire accesses,
 * the bounded wait, the cross-rank barrier and a grid-wide sync for persistent kernels.
 *
 * Rule of the project: no wait is unbounded. A wait that expires records what it waited for in
 * the host-mapped mm_wait_error (first failure wins, elected by CAS on the local abort flag),
 * and returns false; callers return from the kernel without trapping so the context survives.
 * Every other wait polls the abort flag and gives up at once once it is set. */
#ifndef MEGAMOE_COMM_CUH
#define MEGAMOE_COMM_CUH

#include <stdint.h>

#include "api.h"

__device__ __forceinline__ uint64_t mm_globaltimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ uint64_t mm_ld_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void mm_st_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* A word that carries its own epoch needs no ordering of its own, only to arrive whole. */
__device__ __forceinline__ void mm_st_relaxed_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void mm_st_release_sys_u32(uint32_t *p, uint32_t v)
{
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t mm_ld_acquire_sys_u32(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* GPU-scope release add and acquire load: a counter that hands data from CTAs of this launch to
 * other CTAs. After a CTA barrier, one thread's release covers every thread's earlier stores
 * (release is cumulative), without the full fence (MEMBAR.SC) a __threadfence costs. */
__device__ __forceinline__ void mm_red_add_release_gpu(uint32_t *p, uint32_t v)
{
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t mm_ld_acquire_gpu_u32(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ uint32_t mm_ld_volatile_u32(const uint32_t *p)
{
    return *(const volatile uint32_t *)p;
}

/* This thread sleeps `ns` by the global timer, in naps of `nap_ns`: the test builds' injected
 * stalls (`make inject`, so that a wait elsewhere expires on purpose) and bench's --idle-ms. */
__device__ __forceinline__ void mm_sleep_ns(uint64_t ns, unsigned nap_ns)
{
    const uint64_t start = mm_globaltimer();
    while (mm_globaltimer() - start < ns) __nanosleep(nap_ns);
}


/* Records the first failure of this rank (the abort flag elects it). */
__device__ __forceinline__ void mm_record_failure_to(uint32_t *abort_flag, mm_wait_error *error, int rank,
                                                     uint32_t phase, int peer, uint64_t expected, uint64_t seen)
{
    if (atomicCAS(abort_flag, 0u, 1u) != 0u) return;
    volatile mm_wait_error *e = error;
    e->phase = phase;
    e->rank = rank;
    e->peer = peer;
    e->expected = expected;
    e->seen = seen;
    __threadfence_system();
    e->code = MM_WAIT_TIMEOUT;
    __threadfence_system();
}

__device__ __forceinline__ void mm_record_failure(const mm_comm &c, uint32_t phase, int peer, uint64_t expected,
                                                  uint64_t seen)
{
    mm_record_failure_to(c.abort_flag, c.error, c.peers.rank, phase, peer, expected, seen);
}

__device__ __forceinline__ bool mm_aborted(const mm_comm &c)
{
    return mm_ld_volatile_u32(c.abort_flag) != 0u;
}

/* Waits until *p >= target (acquire). False on expiry or when another wait already failed. */
__device__ __forceinline__ bool mm_wait_geq(const mm_comm &c, const uint64_t *p, uint64_t target,
                                            uint32_t phase, int peer)
{
    uint64_t start = mm_globaltimer();
    for (uint32_t spin = 0;; spin++) {
        uint64_t seen = mm_ld_acquire_sys(p);
        if (seen >= target) return true;
        if ((spin & 31u) == 31u) {
            if (mm_aborted(c)) return false;
            if (mm_globaltimer() - start > c.timeout_ns) {
                mm_record_failure(c, phase, peer, target, seen);
                return false;
            }
        }
    }
}

/* Last-CTA election over a local counter: every thread fences its (possibly remote) writes, then
 * the CTA counts itself in; the winner fences again, so what it reads next is what the others
 * wrote (and resets the counter for the next launch). Called by every thread. */
__device__ __forceinline__ bool mm_last_cta(uint32_t *counter)
{
    int last = 0;
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(counter, 1u) == gridDim.x - 1;
        if (last) __threadfence_system();
    }
    /* the barrier's reduction carries thread 0's answer: no shared variable to reuse */
    return __syncthreads_or(last) != 0;
}

/* The barrier slot that rank `src` writes in rank `dst`'s symmetric buffer. */
__device__ __forceinline__ uint64_t *mm_barrier_slot(const mm_comm &c, int dst, int src)
{
    return (uint64_t *)(c.peers.base[dst] + MM_SIGNAL_BARRIER_OFFSET) + src;
}

/* Cross-rank barrier, called by every thread of ONE CTA per rank. Epochs only grow, and each slot
 * has a single writer, so no slot is ever cleared between uses. Orders everything this CTA wrote
 * before it (to any rank) before everything it reads after it. Returns false on timeout. */
__device__ __forceinline__ bool mm_cross_rank_barrier(const mm_comm &c)
{
    __shared__ int ok;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint64_t epoch = ++(*c.epoch);
        __threadfence_system();
        for (int p = 0; p < c.peers.ranks; p++)
            mm_st_release_sys(mm_barrier_slot(c, p, c.peers.rank), epoch);
        int good = 1;
        for (int p = 0; p < c.peers.ranks && good; p++)
            good = mm_wait_geq(c, mm_barrier_slot(c, c.peers.rank, p), epoch, MM_PHASE_BARRIER, p);
        ok = good;
    }
    __syncthreads();
    return ok != 0;
}

/* Grid-wide sync for persistent kernels (all CTAs resident). `counter` is zero before the first
 * use and grows by gridDim.x per sync; `generation` counts completed syncs. */
__device__ __forceinline__ bool mm_grid_sync(const mm_comm &c, unsigned int *counter,
                                             unsigned int generation)
{
    __shared__ int ok;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        unsigned int target = (generation + 1u) * gridDim.x;
        atomicAdd(counter, 1u);
        uint64_t start = mm_globaltimer();
        int good = 1;
        for (uint32_t spin = 0;; spin++) {
            unsigned int seen = mm_ld_volatile_u32(counter);
            if (seen >= target) break;
            if ((spin & 31u) == 31u) {
                if (mm_aborted(c)) { good = 0; break; }
                if (mm_globaltimer() - start > c.timeout_ns) {
                    mm_record_failure(c, MM_PHASE_GRID_SYNC, -1, target, seen);
                    good = 0;
                    break;
                }
            }
        }
        __threadfence();
        ok = good;
    }
    __syncthreads();
    return ok != 0;
}

/* A mode's exchange region (mm_exchange: ll, fused) in rank `rank`'s symmetric buffer, at offset
 * `off` within it. */
__device__ __forceinline__ char *mm_xchg_at(const mm_comm &c, const mm_exchange &x, int rank, uint64_t off)
{
    return c.peers.base[rank] + x.mode_offset + off;
}

/* This rank's state words (layout.h mm_layout_exchange_sym): the epoch (u64) at 0, the mode's
 * counters (u32) at 8, the send slots [E] (u32) at 32. */
__device__ __forceinline__ uint64_t *mm_xchg_epoch(const mm_comm &c, const mm_exchange &x)
{
    return (uint64_t *)mm_xchg_at(c, x, c.peers.rank, x.off_state);
}

__device__ __forceinline__ uint32_t *mm_xchg_counters(const mm_comm &c, const mm_exchange &x)
{
    return (uint32_t *)((char *)mm_xchg_epoch(c, x) + 8);
}

__device__ __forceinline__ uint32_t *mm_xchg_send_slots(const mm_comm &c, const mm_exchange &x)
{
    return (uint32_t *)((char *)mm_xchg_epoch(c, x) + 32);
}

#endif
