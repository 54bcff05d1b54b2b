/* Kernels of the GPU runtime: peer pointers from NCCL's window, the line-up barrier, the
 * symmetric-memory round trip of the self-test, and poisoning of outputs.
 *
 * peer_pointers: one thread per rank reads ncclGetLsaPointer once at start-up; nothing else in
 *   the project includes NCCL's device headers.
 * barrier: one CTA; thread 0 publishes its epoch to every rank and waits (bounded) for theirs.
 * roundtrip_write/verify: grid-stride over `words` 64-bit words; writer stores to every peer's
 *   buffer at offset + src_rank * words, verifier checks its own buffer after a barrier. */
#include <cuda_fp8.h>
#include <nccl.h>
#include <nccl_device.h>

#include "comm.cuh"
#include "api.h"
#include "recipe.h"

extern "C" int mm_nccl_lsa_ranks(void *nccl_comm)
{
    return ncclTeamLsa((ncclComm_t)nccl_comm).nRanks;
}

__global__ void peer_pointers_kernel(ncclWindow_t window, int ranks, char **out)
{
    int p = threadIdx.x;
    if (p < ranks) out[p] = (char *)ncclGetLsaPointer(window, 0, p);
}

extern "C" cudaError_t mm_launch_peer_pointers(void *nccl_window, int ranks, char **out_device,
                                               cudaStream_t stream)
{
    peer_pointers_kernel<<<1, MM_MAX_PEERS, 0, stream>>>((ncclWindow_t)nccl_window, ranks,
                                                         out_device);
    return cudaGetLastError();
}

__global__ void barrier_kernel(mm_comm comm)
{
    mm_cross_rank_barrier(comm);
}

extern "C" cudaError_t mm_launch_barrier(mm_comm comm, cudaStream_t stream)
{
    barrier_kernel<<<1, 32, 0, stream>>>(comm);
    return cudaGetLastError();
}

/* Tag of word i written by rank src: distinct per (src, i), never zero, never NaN-like. */
__device__ __forceinline__ uint64_t roundtrip_tag(int src, uint64_t i)
{
    return ((uint64_t)(src + 1) << 48) ^ (i * 0x9e3779b97f4a7c15ull >> 16) ^ 0x5a5a;
}

__global__ void roundtrip_write_kernel(mm_comm comm, uint64_t offset, uint64_t words)
{
    int me = comm.peers.rank;
    for (int dst = 0; dst < comm.peers.ranks; dst++) {
        uint64_t *region = (uint64_t *)(comm.peers.base[dst] + offset) + (uint64_t)me * words;
        for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words;
             i += (uint64_t)gridDim.x * blockDim.x)
            region[i] = roundtrip_tag(me, i);
    }
}

__global__ void roundtrip_verify_kernel(mm_comm comm, uint64_t offset, uint64_t words,
                                        unsigned long long *bad)
{
    const uint64_t *mine = (const uint64_t *)(comm.peers.base[comm.peers.rank] + offset);
    unsigned long long local = 0;
    for (int src = 0; src < comm.peers.ranks; src++)
        for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words;
             i += (uint64_t)gridDim.x * blockDim.x)
            local += mine[(uint64_t)src * words + i] != roundtrip_tag(src, i);
    if (local) atomicAdd(bad, local);
}

extern "C" cudaError_t mm_launch_roundtrip_write(mm_comm comm, uint64_t offset, uint64_t words,
                                                 cudaStream_t stream)
{
    roundtrip_write_kernel<<<64, 256, 0, stream>>>(comm, offset, words);
    return cudaGetLastError();
}

extern "C" cudaError_t mm_launch_roundtrip_verify(mm_comm comm, uint64_t offset, uint64_t words,
                                                  unsigned long long *bad, cudaStream_t stream)
{
    roundtrip_verify_kernel<<<64, 256, 0, stream>>>(comm, offset, words, bad);
    return cudaGetLastError();
}

/* 0xFFFF halves are NaN in BF16 and 0xFFFFFFFF is NaN in FP32: any unwritten output fails. */
__global__ void poison_kernel(uint32_t *p, uint64_t words)
{
    for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words;
         i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = 0xffffffffu;
}

extern "C" cudaError_t mm_launch_poison(void *ptr, uint64_t bytes, cudaStream_t stream)
{
    if (bytes % 4u) return cudaMemsetAsync(ptr, 0xff, bytes, stream);
    poison_kernel<<<256, 256, 0, stream>>>((uint32_t *)ptr, bytes / 4u);
    return cudaGetLastError();
}

/* bench --idle-ms: the GPU idles (one thread in 10 us naps) in stream order, so the call after it
 * starts from a cooler, unthrottled state, as the peer's test's sleep before each call gives it. */
__global__ void idle_kernel(uint64_t ns)
{
    mm_sleep_ns(ns, 10000);
}

extern "C" cudaError_t mm_launch_idle(uint64_t ns, cudaStream_t stream)
{
    idle_kernel<<<1, 1, 0, stream>>>(ns);
    return cudaGetLastError();
}

/* A clean L2 flush: reads `words` 16-byte words through L2 (ld.global.cg: not kept in L1), so
 * the L2 ends up holding clean lines of this buffer and whatever was dirty in it was written back
 * here, not in the timed call that follows. The sum is stored only if it equals `key`, so the
 * loads are not dead code (a match writes into the buffer itself, harmlessly). */
__global__ void l2_read_kernel(const uint4 *p, uint64_t words, uint32_t key)
{
    uint32_t acc = 0;
    for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += (uint64_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == key) ((uint32_t *)p)[0] = acc;
}

extern "C" cudaError_t mm_launch_l2_flush(void *ptr, uint64_t bytes, int clean, int iteration, cudaStream_t stream)
{
    if (!clean) return cudaMemsetAsync(ptr, iteration & 0xff, bytes, stream);
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    l2_read_kernel<<<4 * sms, 256, 0, stream>>>((const uint4 *)ptr, bytes / 16u, 0x9e3779b9u);
    return cudaGetLastError();
}

/* The HBM read ceiling: every 16-byte word of [p, p + words) read once, eight loads a thread in
 * flight (one in flight left ~2 MB outstanding on an H100, short of its latency-bandwidth
 * product), XORed into a value written to `sink` only if it matches a key, so no load is dead. */
#define HBM_READ_UNROLL 8
__global__ void hbm_read_kernel(const uint4 *p, uint64_t words, uint32_t *sink)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint32_t acc = 0;
    uint64_t i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (HBM_READ_UNROLL - 1) * stride < words; i += HBM_READ_UNROLL * stride) {
        uint4 v[HBM_READ_UNROLL];
#pragma unroll
        for (int u = 0; u < HBM_READ_UNROLL; u++) v[u] = __ldcs(p + i + u * stride);
#pragma unroll
        for (int u = 0; u < HBM_READ_UNROLL; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < words; i += stride) {
        const uint4 a = __ldcs(p + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc;
}

extern "C" cudaError_t mm_launch_hbm_read(const void *ptr, uint64_t bytes, uint32_t *sink, cudaStream_t stream)
{
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    hbm_read_kernel<<<4 * sms, 256, 0, stream>>>((const uint4 *)ptr, bytes / 16u, sink);
    return cudaGetLastError();
}

/* Bytes that are finite e4m3 values of every magnitude (0x7f and 0xff, the NaNs, never occur:
 * bits 3 and 7 of the pattern's mask are clear), from a hash of the index and `seed`. */
__global__ void fill_fp8_kernel(uint32_t *p, uint64_t words, uint32_t seed)
{
    for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t h = (i + seed) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
        p[i] = (uint32_t)(h >> 16) & 0x77777777u;
    }
}

extern "C" cudaError_t mm_launch_fill_fp8(void *ptr, uint64_t bytes, uint32_t seed, cudaStream_t stream)
{
    fill_fp8_kernel<<<1024, 256, 0, stream>>>((uint32_t *)ptr, bytes / 4u, seed);
    return cudaGetLastError();
}

/* The NVLink write ceiling: this rank stores `bytes_per_peer` (a multiple of 16) into every other
 * rank's window at offset + me * bytes_per_peer, 16-byte stores, the CTAs dealt round-robin over
 * the peers so all links carry traffic at once (the pattern of a dispatch). */
__global__ void nvlink_write_kernel(mm_comm comm, uint64_t offset, uint64_t bytes_per_peer)
{
    const int me = comm.peers.rank, others = comm.peers.ranks - 1;
    const int peer_slot = blockIdx.x % others, ctas_per_peer = gridDim.x / others;
    const int dst = (me + 1 + peer_slot) % comm.peers.ranks;
    if (blockIdx.x >= ctas_per_peer * others) return;
    uint4 *region = (uint4 *)(comm.peers.base[dst] + offset + (uint64_t)me * bytes_per_peer);
    const uint64_t words = bytes_per_peer / 16u, stride = (uint64_t)ctas_per_peer * blockDim.x;
    const uint4 v = make_uint4(me + 1u, 0x9e3779b9u, (uint32_t)offset, 0x5a5a5a5au);
    for (uint64_t i = (uint64_t)(blockIdx.x / others) * blockDim.x + threadIdx.x; i < words; i += stride)
        region[i] = v;
}

extern "C" cudaError_t mm_launch_nvlink_write(mm_comm comm, uint64_t offset, uint64_t bytes_per_peer, int ctas,
                                              cudaStream_t stream)
{
    if (comm.peers.ranks < 2) return cudaErrorInvalidValue;
    nvlink_write_kernel<<<ctas, 512, 0, stream>>>(comm, offset, bytes_per_peer);
    return cudaGetLastError();
}

/* Self-test of the grid-wide sync: every CTA adds 1 to `arrivals` per round, syncs, and checks
 * that all gridDim.x arrivals of the round are visible; `missing_cta` (-1: none) leaves at once,
 * as a CTA that never arrives would, so the others must time out. */
__global__ void grid_sync_test_kernel(mm_comm comm, unsigned int *sync_counter,
                                      unsigned int *arrivals, int rounds, int missing_cta,
                                      unsigned int *errors)
{
    if ((int)blockIdx.x == missing_cta) return;
    for (int r = 0; r < rounds; r++) {
        if (threadIdx.x == 0) atomicAdd(arrivals, 1u);
        if (!mm_grid_sync(comm, sync_counter, (unsigned int)r)) return;
        if (threadIdx.x == 0 && mm_ld_volatile_u32(arrivals) < (unsigned int)(r + 1) * gridDim.x)
            atomicAdd(errors, 1u);
    }
}

extern "C" cudaError_t mm_launch_grid_sync_test(mm_comm comm, int ctas, unsigned int *scratch,
                                                int rounds, int missing_cta, cudaStream_t stream)
{
    cudaError_t e = cudaMemsetAsync(scratch, 0, 3 * sizeof(unsigned int), stream);
    if (e != cudaSuccess) return e;
    grid_sync_test_kernel<<<ctas, 128, 0, stream>>>(comm, scratch, scratch + 1, rounds,
                                                    missing_cta, scratch + 2);
    return cudaGetLastError();
}

/* The GPU's SwiGLU (recipe.h, the kernels' own function) on n inputs, for the self-test. */
__global__ void swiglu_eval_kernel(const float *g, const float *u, const float *w, int n, int has_limit,
                                   float limit, float *h)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) h[i] = mm_swiglu(g[i], u[i], w[i], has_limit, limit);
}

extern "C" cudaError_t mm_launch_swiglu_eval(const float *g, const float *u, const float *w, int n, int has_limit,
                                             float limit, float *h, cudaStream_t stream)
{
    if (n <= 0) return cudaSuccess;
    swiglu_eval_kernel<<<(n + 255) / 256, 256, 0, stream>>>(g, u, w, n, has_limit, limit, h);
    return cudaGetLastError();
}

/* The hardware's FP8 e4m3 conversion (round to nearest even, saturating to finite) next to the
 * recipe's encoder, for the self-test and the committed test table. */
__global__ void fp8_compare_kernel(const float *in, int n, uint8_t *hw, uint8_t *ours)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    hw[i] = (uint8_t)__nv_cvt_float_to_fp8(in[i], __NV_SATFINITE, __NV_E4M3);
    ours[i] = mm_fp8_encode_sw(in[i]);
}

extern "C" cudaError_t mm_launch_fp8_compare(const float *in, int n, uint8_t *hw, uint8_t *ours,
                                             cudaStream_t stream)
{
    if (n <= 0) return cudaSuccess;
    fp8_compare_kernel<<<(n + 255) / 256, 256, 0, stream>>>(in, n, hw, ours);
    return cudaGetLastError();
}
