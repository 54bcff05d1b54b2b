/* Stage-ring racecheck probe (a lab experiment, not part of the tool): does compute-sanitizer's
 * racecheck accept the GEMM core's stage-ring ordering when nothing else runs? racecheck reports
 * WAR hazards on the fused kernel's folding form (the math's reads of a stage's scales against the
 * producer's next cp.async into them) that the ring audit (`make audit`) shows never happen
 *. This kernel keeps only that protocol, with
 * gemm_tile.cuh's own functions: warpgroup 0 fills each stage's 129 scale words by 4-byte
 * cp.async (thread 127 the last word) after waiting for the stage's `empty`, then reports on
 * `full` with cp.async.mbarrier.arrive.noinc; the 8 math warps wait for `full`, read, and free
 * the stage (mm_tile_release: __syncwarp, one arrival a warp). `dual` takes two stages per step
 * and reads the first again after waiting for the second, as mm_tile_consume_dual's second half
 * does; `single` one stage a step. Every value read is summed and checked against the host's sum,
 * so a real race shows as a wrong sum even without the sanitizer.
 *
 * Build and run on a GPU machine:
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -lineinfo -Ikernels -o build/ring_race_probe lab/probes/ring_race_probe.cu
 *   build/ring_race_probe dual 64          (steps a CTA; then under the tool:)
 *   compute-sanitizer --tool racecheck build/ring_race_probe dual 64
 * Exit status: 0 the sums agree, 2 they do not, 1 a CUDA error or bad arguments. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_tile.cuh"
#include "probe.cuh"

#define CTAS 8
#define SCALES (MM_GEMM_BM + 1) /* a stage's A scales and its weight scale */
#define STAGE_FLOATS 256        /* 1 KB a stage */

/* the value of word w of step j's stage h (0: the first, 1: the second of a dual step) in CTA c */
__host__ __device__ inline float probe_value(int c, int j, int h, int w)
{
    return (float)(((c * 131 + j * 7 + h * 3 + w) % 97) + 1);
}

__global__ void __launch_bounds__(MM_TILE_THREADS, 1) ring_race_probe(int steps, int dual, const float *src, double *sums)
{
    __shared__ mm_tile_pipe pipe;
    __shared__ __align__(16) float stages[MM_TILE_STAGES][STAGE_FLOATS];
    if (threadIdx.x == 0) mm_tile_pipe_init(&pipe, 1);
    __syncthreads();
    const int per_step = dual ? 2 : 1, c = blockIdx.x;
    mm_ring ring = MM_RING_START(MM_TILE_STAGES);
    if (threadIdx.x < MM_PRODUCER_THREADS) {
        const int pt = threadIdx.x;
        for (int j = 0; j < steps; j++)
            for (int h = 0; h < per_step; h++) {
                const int s = ring.stage;
                mm_mbar_wait(&pipe.empty[s], ring.phase ^ 1u, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_EMPTY);
                const float *from = src + (((size_t)c * steps + j) * 2 + h) * SCALES;
                mm_cp_async4(&stages[s][pt], from + pt);
                if (pt == MM_PRODUCER_THREADS - 1) mm_cp_async4(&stages[s][MM_GEMM_BM], from + MM_GEMM_BM);
                /* `full` counts 129 arrivals in the core (the TMA's expect_tx is the 129th) */
                if (pt == 0) mm_mbar_arrive(&pipe.full[s]);
                unsigned full = (unsigned)__cvta_generic_to_shared(&pipe.full[s]);
                asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(full) : "memory");
                mm_ring_advance(ring);
            }
        asm volatile("cp.async.wait_all;" ::: "memory"); /* its copies landed before it leaves */
        return;
    }
    const int r = mm_acc_row(0); /* this math thread's row, as the core's */
    double sum = 0.0;
    for (int j = 0; j < steps; j++) {
        const int s0 = ring.stage;
        mm_mbar_wait(&pipe.full[s0], ring.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
        mm_ring_advance(ring);
        sum += stages[s0][r] * stages[s0][MM_GEMM_BM];
        if (dual) {
            const int s1 = ring.stage;
            mm_mbar_wait(&pipe.full[s1], ring.phase, MM_STAGE_WAIT_NS, MM_PIPE_WAIT_STAGE_FULL);
            mm_ring_advance(ring);
            /* the first stage's scale read again after the second stage's wait (consume_dual) */
            sum += stages[s0][r] * stages[s1][MM_GEMM_BM];
            mm_tile_release(&pipe, s0, false);
            mm_tile_release(&pipe, s1, false);
        } else {
            mm_tile_release(&pipe, s0, false);
        }
    }
    sums[(size_t)c * MM_CONSUMER_THREADS + threadIdx.x - MM_PRODUCER_THREADS] = sum;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "dual") && strcmp(argv[1], "single")) || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: ring_race_probe dual|single STEPS\n");
        return 1;
    }
    const int dual = !strcmp(argv[1], "dual"), steps = atoi(argv[2]);
    const size_t n_src = (size_t)CTAS * steps * 2 * SCALES, n_sums = (size_t)CTAS * MM_CONSUMER_THREADS;
    float *h_src = (float *)malloc(n_src * sizeof(float));
    double *h_sums = (double *)malloc(n_sums * sizeof(double));
    if (!h_src || !h_sums) return 1;
    for (int c = 0; c < CTAS; c++)
        for (int j = 0; j < steps; j++)
            for (int h = 0; h < 2; h++)
                for (int w = 0; w < SCALES; w++)
                    h_src[(((size_t)c * steps + j) * 2 + h) * SCALES + w] = probe_value(c, j, h, w);
    float *src;
    double *sums;
    CK(cudaMalloc(&src, n_src * sizeof(float)));
    CK(cudaMalloc(&sums, n_sums * sizeof(double)));
    CK(cudaMemcpy(src, h_src, n_src * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemset(sums, 0xff, n_sums * sizeof(double))); /* NaN: an unwritten sum fails */
    ring_race_probe<<<CTAS, MM_TILE_THREADS>>>(steps, dual, src, sums);
    CK(cudaGetLastError());
    CK(cudaMemcpy(h_sums, sums, n_sums * sizeof(double), cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int c = 0; c < CTAS; c++)
        for (int t = 0; t < MM_CONSUMER_THREADS; t++) {
            const int r = 64 * (t / 128) + mm_frag_row((t / 32) % 4, t % 32, 0);
            double want = 0.0;
            for (int j = 0; j < steps; j++) {
                want += (double)(probe_value(c, j, 0, r) * probe_value(c, j, 0, MM_GEMM_BM));
                if (dual) want += (double)(probe_value(c, j, 0, r) * probe_value(c, j, 1, MM_GEMM_BM));
            }
            if (h_sums[(size_t)c * MM_CONSUMER_THREADS + t] != want) wrong++;
        }
    printf("ring_race_probe: %s, %d steps, %d stages, %d CTAs: %d of %zu sums wrong\n", dual ? "dual" : "single",
           steps, MM_TILE_STAGES, CTAS, wrong, n_sums);
    CK(cudaFree(src));
    CK(cudaFree(sums));
    free(h_src);
    free(h_sums);
    return wrong ? 2 : 0;
}
