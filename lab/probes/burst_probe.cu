/* Decode-burst probe (a lab experiment, not part of the tool): how fast do C persistent CTAs each
 * pull ONE item of weights (a few hundred KB to 1 MB, the fused kernel's decode GEMM1 item) from
 * HBM into shared memory, by box height, stage size and stages in flight? Nothing is computed: a
 * consumer warp waits on each stage's mbarrier and frees it. Each run reads rows no earlier run
 * read (a 4 GiB buffer walked forward), so nothing comes from L2.
 *
 * Question it answers: at 1 token the fused kernel's 96 GEMM1
 * items stream ~28-32 GB/s per SM whether 64 or 128 KB are in flight, and 132 CTAs reach the same
 * per-SM rate; is that the memory system's per-SM rate for this pattern, or the kernel's loop?
 *
 * Build and run on a GPU machine:
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -o build/burst_probe lab/probes/burst_probe.cu
 *   build/burst_probe */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "probe.cuh"

#define MAX_STAGES 12
#define K 4096

__device__ __forceinline__ unsigned long long now_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

/* CTA c streams rows [row0 + c * rows_per_cta, + rows_per_cta) x K, K-first within groups of
 * `boxes` x box_rows rows (one stage = one K block of such a group, like a GEMM1 item's gate and
 * up blocks); mode 1 reads the same byte count as contiguous blocks of box_rows x 128 bytes. */
__global__ void __launch_bounds__(64) burst(const CUtensorMap *maps, const uint8_t *w, long row0, int rows_per_cta,
                                            int box_rows, int boxes, int stages, int mode,
                                            unsigned long long *times)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    __shared__ __align__(8) uint64_t full[MAX_STAGES], empty[MAX_STAGES];
    uint8_t *st = smem + ((1024 - ((unsigned)__cvta_generic_to_shared(smem) & 1023)) & 1023);
    const CUtensorMap *map = maps + (box_rows == 128 ? 0 : box_rows == 64 ? 1 : 2);
    const int box_bytes = box_rows * 128, stage_bytes = boxes * box_bytes;
    if (threadIdx.x == 0)
        for (int s = 0; s < stages; s++) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"((unsigned)__cvta_generic_to_shared(&full[s])));
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"((unsigned)__cvta_generic_to_shared(&empty[s])));
        }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
    const unsigned long long t0 = now_ns();
    const int groups = rows_per_cta / (boxes * box_rows), loads = groups * (K / 128);
    const long base = row0 + (long)blockIdx.x * rows_per_cta;
    unsigned long long acc = 0;
    if (threadIdx.x == 0) { /* producer */
        for (int i = 0; i < loads; i++) {
            const int s = i % stages;
            if (i >= stages) bar_wait((unsigned)__cvta_generic_to_shared(&empty[s]), ((i / stages) - 1) & 1);
            const unsigned f = (unsigned)__cvta_generic_to_shared(&full[s]);
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(f), "r"(stage_bytes) : "memory");
            const int g = i / (K / 128), kb = i % (K / 128);
            for (int b = 0; b < boxes; b++) {
                const unsigned dst = (unsigned)__cvta_generic_to_shared(st + s * stage_bytes + b * box_bytes);
                const long r = base + (long)(g * boxes + b) * box_rows;
                if (mode == 0)
                    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                                 "[%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
                                 "l"(map), "r"(kb * 128), "r"((int)r), "r"(f)
                                 : "memory");
                else
                    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                                 "[%0], [%1], %2, [%3];" ::"r"(dst),
                                 "l"(w + r * K + (long)kb * box_bytes), "r"(box_bytes), "r"(f)
                                 : "memory");
            }
        }
    } else if (threadIdx.x == 32) { /* consumer */
        for (int i = 0; i < loads; i++) {
            const int s = i % stages;
            bar_wait((unsigned)__cvta_generic_to_shared(&full[s]), (i / stages) & 1);
            acc += st[s * stage_bytes + (i & 127) * 8];
            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"((unsigned)__cvta_generic_to_shared(&empty[s]))
                         : "memory");
        }
        times[2 * blockIdx.x] = t0;
        times[2 * blockIdx.x + 1] = now_ns() + (acc == 0x123456789ull);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    const long rows = 1L << 20; /* x 4096 bytes = 4 GiB */
    uint8_t *w;
    CK(cudaMalloc(&w, (size_t)rows * K));
    CK(cudaMemset(w, 0x11, (size_t)rows * K));
    PFN_cuTensorMapEncodeTiled_v12000 encode;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&encode, 12000, cudaEnableDefault, &q));
    CUtensorMap maps[3];
    const int box_h[3] = {128, 64, 32};
    for (int m = 0; m < 3; m++) {
        cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)K};
        cuuint32_t box[2] = {128, (cuuint32_t)box_h[m]}, elem[2] = {1, 1};
        if (encode(&maps[m], CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, w, dims, strides, box, elem,
                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
            fprintf(stderr, "encode failed\n");
            return 1;
        }
    }
    CUtensorMap *dmaps;
    CK(cudaMalloc(&dmaps, sizeof maps));
    CK(cudaMemcpy(dmaps, maps, sizeof maps, cudaMemcpyHostToDevice));
    unsigned long long *dtimes, htimes[2 * 264];
    CK(cudaMalloc(&dtimes, sizeof htimes));
    CK(cudaFuncSetAttribute(burst, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    /* box rows, boxes per stage, stages, mode, CTAs, KB per CTA */
    static const int cfg[][6] = {
        /* the fused decode item today: 2 x 128-row boxes (gate, up) per stage, 4 stages */
        {128, 2, 4, 0, 96, 1024}, {128, 2, 4, 0, 132, 1024}, {128, 2, 4, 0, 32, 1024},
        /* bytes in flight */
        {128, 2, 2, 0, 96, 1024}, {128, 2, 5, 0, 96, 1024}, {128, 1, 4, 0, 96, 1024}, {128, 1, 8, 0, 96, 1024},
        {128, 1, 12, 0, 96, 1024}, {128, 1, 2, 0, 96, 1024},
        /* narrower items: half (64-row boxes) and quarter (32-row) of the I block */
        {64, 2, 4, 0, 132, 512}, {64, 2, 8, 0, 132, 512}, {64, 2, 12, 0, 132, 512},
        {32, 2, 4, 0, 132, 256}, {32, 2, 8, 0, 132, 256}, {32, 2, 12, 0, 132, 256},
        {64, 2, 4, 0, 96, 512}, {32, 2, 8, 0, 96, 256},
        /* contiguous blocks of the same sizes (a pre-tiled layout) */
        {128, 2, 4, 1, 96, 1024}, {128, 2, 4, 1, 132, 1024}, {64, 2, 8, 1, 132, 512}, {32, 2, 12, 1, 132, 256},
    };
    long next_row = 0;
    printf("box_rows boxes stages mode ctas KB/cta inflightKB | makespan_us (median of 7)  total_GB/s  per_cta_GB/s(mean)\n");
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        const int br = cfg[c][0], nb = cfg[c][1], ns = cfg[c][2], mode = cfg[c][3], ctas = cfg[c][4], kb = cfg[c][5];
        const int rpc = kb * 1024 / K;
        double span[7], mean_rate[7];
        for (int rep = 0; rep < 7; rep++) {
            if (next_row + (long)ctas * rpc > rows) next_row = 0;
            burst<<<ctas, 64, ns * nb * br * 128 + 1024>>>(dmaps, w, next_row, rpc, br, nb, ns, mode, dtimes);
            next_row += (long)ctas * rpc;
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(htimes, dtimes, 2 * ctas * sizeof htimes[0], cudaMemcpyDeviceToHost));
            unsigned long long lo = ~0ull, hi = 0;
            double sum = 0;
            for (int i = 0; i < ctas; i++) {
                lo = htimes[2 * i] < lo ? htimes[2 * i] : lo;
                hi = htimes[2 * i + 1] > hi ? htimes[2 * i + 1] : hi;
                sum += (double)(htimes[2 * i + 1] - htimes[2 * i]);
            }
            span[rep] = (double)(hi - lo) / 1e3;
            mean_rate[rep] = (double)kb * 1024 / (sum / ctas); /* bytes per ns = GB/s */
        }
        qsort(span, 7, sizeof span[0], cmp_double);
        qsort(mean_rate, 7, sizeof mean_rate[0], cmp_double);
        printf("%8d %5d %6d %4d %4d %6d %10d | %8.1f  %8.0f  %6.1f\n", br, nb, ns, mode, ctas, kb, br * nb * ns / 8,
               span[3], (double)ctas * kb * 1024 / span[3] / 1e3, mean_rate[3]);
    }
    return 0;
}
