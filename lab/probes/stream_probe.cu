/* Weight-streaming probe (a lab experiment, not part of the tool): how fast can 132 persistent
 * CTAs pull weights from HBM into shared memory, by access pattern?
 *   tile2d  TMA boxes of 128 rows x W bytes, K-first within a 128-row tile (the GEMM core's
 *           pattern: 128 separate W-byte pieces per box, rows a weight row's bytes apart);
 *           W = 128 for FP8 (rows of 4096 bytes), W = 64 for FP4's codes (rows of 2048 bytes,
 *           the 64-byte swizzle), as the core's weight maps
 *   block1d blocks of 128 x W contiguous bytes by cp.async.bulk (a pre-tiled weight layout)
 * Each with 4 or 8 stages on mbarriers and nothing computed: FP4's 8 KB blocks at 8 stages hold
 * FP8's bytes in flight at 4, so the access shape and the bytes in flight are told apart.
 * Build and run on a GPU machine:
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -o build/stream_probe lab/probes/stream_probe.cu
 *   build/stream_probe */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <stdio.h>

#include "probe.cuh"

#define MAX_STAGES 8

/* mode 0: tile2d over [rows][k] (k bytes a row, boxes of bw bytes); mode 1: block1d over the same
 * bytes as blocks of 128 x bw */
__global__ void __launch_bounds__(128) probe(const CUtensorMap *map, const uint8_t *w, long rows, int k, int bw,
                                             int STAGES, int mode, unsigned long long *sink)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    __shared__ __align__(8) uint64_t bars[MAX_STAGES];
    const int BLOCK = 128 * bw;
    uint8_t *st = smem + ((1024 - ((unsigned)__cvta_generic_to_shared(smem) & 1023)) & 1023);
    if (threadIdx.x == 0)
        for (int s = 0; s < STAGES; s++) {
            unsigned a = (unsigned)__cvta_generic_to_shared(&bars[s]);
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(a));
        }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
    const int kblocks = k / bw;
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
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(a), "r"(BLOCK) : "memory");
            long tile = blockIdx.x + (i / kblocks) * gridDim.x;
            int kb = (int)(i % kblocks);
            if (mode == 0) {
                asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                             "[%0], [%1, {%2, %3}], [%4];" ::"r"(dst), "l"(map), "r"(kb * bw),
                             "r"((int)(tile * 128)), "r"(a) : "memory");
            } else {
                long b = tile * kblocks + kb; /* the same count of blocks, contiguous 16 KB each */
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                             "[%0], [%1], %2, [%3];" ::"r"(dst), "l"(w + b * BLOCK), "r"(BLOCK), "r"(a)
                             : "memory");
            }
        }
        long j = i - (STAGES - 1);
        if (j >= 0) {
            int s = j % STAGES;
            bar_wait((unsigned)__cvta_generic_to_shared(&bars[s]), (phase >> s) & 1);
            phase ^= 1u << s;
            acc += st[s * BLOCK + threadIdx.x * bw];
            __syncthreads();
        }
    }
    (void)blocks;
    if (acc == 0xfffffffffull) *sink = acc;
}

static int encode_map(PFN_cuTensorMapEncodeTiled_v12000 encode, CUtensorMap *map, uint8_t *w, long rows, int k,
                      int bw)
{
    cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)k};
    cuuint32_t box[2] = {(cuuint32_t)bw, 128}, elem[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, w, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  bw == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS;
}

int main(void)
{
    const size_t bytes = (size_t)4 << 30; /* 4 GiB: FP8 rows of 4096 bytes, FP4 rows of 2048 */
    uint8_t *w;
    CK(cudaMalloc(&w, bytes));
    CK(cudaMemset(w, 1, bytes));
    unsigned long long *sink;
    CK(cudaMalloc(&sink, 8));
    PFN_cuTensorMapEncodeTiled_v12000 encode;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&encode, 12000, cudaEnableDefault, &q));
    CUtensorMap maps[2];
    if (encode_map(encode, &maps[0], w, (long)(bytes / 4096), 4096, 128) ||
        encode_map(encode, &maps[1], w, (long)(bytes / 2048), 2048, 64)) {
        fprintf(stderr, "encode failed\n");
        return 1;
    }
    CUtensorMap *dmap;
    CK(cudaMalloc(&dmap, sizeof maps));
    CK(cudaMemcpy(dmap, maps, sizeof maps, cudaMemcpyHostToDevice));
    CK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, MAX_STAGES * 16384 + 1024));
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    const struct {
        int fp4, mode, stages;
    } runs[] = {{0, 0, 4}, {0, 1, 4}, {1, 0, 4}, {1, 1, 4}, {1, 0, 8}, {1, 1, 8}, {0, 0, 5}, {1, 0, 5}};
    for (int r = 0; r < (int)(sizeof runs / sizeof runs[0]); r++) {
        const int bw = runs[r].fp4 ? 64 : 128, k = runs[r].fp4 ? 2048 : 4096;
        const long rows = (long)(bytes / k);
        for (int rep = 0; rep < 3; rep++) {
            CK(cudaEventRecord(a));
            probe<<<sms, 128, runs[r].stages * 128 * bw + 1024>>>(dmap + runs[r].fp4, w, rows, k, bw, runs[r].stages,
                                                                  runs[r].mode, sink);
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            CK(cudaGetLastError());
            float ms;
            CK(cudaEventElapsedTime(&ms, a, b));
            printf("%s %s %d B blocks, %d stages, rep %d: %.3f ms, %.0f GB/s\n", runs[r].fp4 ? "fp4" : "fp8",
                   runs[r].mode ? "block1d" : "tile2d ", 128 * bw, runs[r].stages, rep, ms, (double)bytes / ms / 1e6);
        }
    }
    return 0;
}
