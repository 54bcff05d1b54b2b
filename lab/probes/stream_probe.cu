/* Weight-streaming probe (a lab experiment, not part of the tool): how fast can 132 persistent
 * CTAs pull FP8 weights from HBM into shared memory, by access pattern?
 *   tile2d  TMA boxes of 128 rows x 128 bytes, K-first within a 128-row tile (the GEMM core's
 *           pattern: 128 separate 128-byte pieces per box, rows K bytes apart)
 *   block1d 16 KB contiguous blocks by cp.async.bulk (a pre-tiled weight layout)
 * Both with 4 stages on mbarriers and nothing computed. Build and run on a GPU machine:
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -o build/stream_probe lab/probes/stream_probe.cu
 *   build/stream_probe */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <stdio.h>

#include "probe.cuh"

#define STAGES 4
#define BLOCK 16384

/* mode 0: tile2d over [rows][k]; mode 1: block1d over the same bytes as 16 KB blocks */
__global__ void __launch_bounds__(128) probe(const CUtensorMap *map, const uint8_t *w, long rows, int k,
                                             int mode, unsigned long long *sink)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    __shared__ __align__(8) uint64_t bars[STAGES];
    uint8_t *st = smem + ((1024 - ((unsigned)__cvta_generic_to_shared(smem) & 1023)) & 1023);
    if (threadIdx.x == 0)
        for (int s = 0; s < STAGES; s++) {
            unsigned a = (unsigned)__cvta_generic_to_shared(&bars[s]);
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(a));
        }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
    const int kblocks = k / 128;
    const long tiles = rows / 128, blocks = tiles * kblocks;
    /* this CTA's blocks: tile2d walks whole tiles K-first; block1d takes every gridDim-th block */
    long my = 0;
    for (long t = blockIdx.x; t < tiles; t += gridDim.x) my += kblocks;
    unsigned phase = 0;
    unsigned long long acc = 0;
    for (long i = 0; i < my + STAGES - 1; i++) {
        if (i < my && threadIdx.x == 0) {
            int s = i % STAGES;
            unsigned a = (unsigned)__cvta_generic_to_shared(&bars[s]);
            unsigned dst = (unsigned)__cvta_generic_to_shared(st + s * BLOCK);
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(a), "n"(BLOCK) : "memory");
            long tile = blockIdx.x + (i / kblocks) * gridDim.x;
            int kb = (int)(i % kblocks);
            if (mode == 0) {
                asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                             "[%0], [%1, {%2, %3}], [%4];" ::"r"(dst), "l"(map), "r"(kb * 128),
                             "r"((int)(tile * 128)), "r"(a) : "memory");
            } else {
                long b = tile * kblocks + kb; /* the same count of blocks, contiguous 16 KB each */
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                             "[%0], [%1], %2, [%3];" ::"r"(dst), "l"(w + b * BLOCK), "n"(BLOCK), "r"(a)
                             : "memory");
            }
        }
        long j = i - (STAGES - 1);
        if (j >= 0) {
            int s = j % STAGES;
            bar_wait((unsigned)__cvta_generic_to_shared(&bars[s]), (phase >> s) & 1);
            phase ^= 1u << s;
            acc += st[s * BLOCK + threadIdx.x * 128];
            __syncthreads();
        }
    }
    (void)blocks;
    if (acc == 0xfffffffffull) *sink = acc;
}

int main(void)
{
    const long rows = 1L << 20; /* x 4096 bytes = 4 GiB */
    const int k = 4096;
    uint8_t *w;
    CK(cudaMalloc(&w, (size_t)rows * k));
    CK(cudaMemset(w, 1, (size_t)rows * k));
    unsigned long long *sink;
    CK(cudaMalloc(&sink, 8));
    PFN_cuTensorMapEncodeTiled_v12000 encode;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&encode, 12000, cudaEnableDefault, &q));
    CUtensorMap map;
    cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)k};
    cuuint32_t box[2] = {128, 128}, elem[2] = {1, 1};
    if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, w, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) !=
        CUDA_SUCCESS) {
        fprintf(stderr, "encode failed\n");
        return 1;
    }
    CUtensorMap *dmap;
    CK(cudaMalloc(&dmap, sizeof map));
    CK(cudaMemcpy(dmap, &map, sizeof map, cudaMemcpyHostToDevice));
    int smem = STAGES * BLOCK + 1024;
    CK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    const char *names[2] = {"tile2d 128x128B", "block1d 16KB"};
    for (int mode = 0; mode < 2; mode++)
        for (int rep = 0; rep < 3; rep++) {
            CK(cudaEventRecord(a));
            probe<<<sms, 128, smem>>>(dmap, w, rows, k, mode, sink);
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            CK(cudaGetLastError());
            float ms;
            CK(cudaEventElapsedTime(&ms, a, b));
            printf("%-16s rep %d: %.3f ms, %.0f GB/s\n", names[mode], rep, ms, (double)rows * k / ms / 1e6);
        }
    return 0;
}
