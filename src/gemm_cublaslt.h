/* The cuBLASLt side of `megamoe gemm`: the same grouped problem as our kernel, run as a loop of
 * one block-scaled FP8 cublasLtMatmul per active expert (weights with 128x128 block scales,
 * activations with 1x128 scales, BF16 out), the way a framework without a grouped FP8 kernel runs
 * it. See gemm_cublaslt.c. */
#ifndef MEGAMOE_GEMM_CUBLASLT_H
#define MEGAMOE_GEMM_CUBLASLT_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "common.h"

typedef struct lt_runner lt_runner;

/* One expert-loop problem: weights w [E][n][k] FP8 with scales ws [E][n/128][k/128]; activations
 * qa [rows][k] FP8 with scales sa [rows][k/128], expert e owning rows offset[e] .. + count[e]
 * (host arrays). */
typedef struct {
    const uint8_t *w;
    const float *ws;
    const uint8_t *qa;
    const float *sa;
    const int32_t *count, *offset;
    int experts, n, k, rows;
} lt_problem;

/* Sets up the loop (padded operands, descriptors, one algorithm per expert, and the scale layout
 * whose output matches `ref`, the exact double reference of the whole problem [rows][n]).
 * MM_OK with *r set; MM_OK with *r NULL and `why` filled when cuBLASLt cannot run it (an error
 * status, no algorithm, no scale layout that reproduces the reference); MM_RUNTIME on a CUDA
 * error. */
mm_status lt_runner_create(const lt_problem *p, const double *ref, cudaStream_t st, lt_runner **r, char *why,
                           size_t why_len);
/* Enqueues the expert loop (the timed part). */
mm_status lt_runner_enqueue(lt_runner *r, cudaStream_t st);
/* cuBLASLt's output, compact [rows][n] BF16, after a run (device pointer owned by the runner). */
mm_status lt_runner_output(lt_runner *r, cudaStream_t st, const uint16_t **out);
/* The scale layout in use, for the report. */
const char *lt_runner_layout(const lt_runner *r);
void lt_runner_destroy(lt_runner *r);

/* The FP8 tensor-core ceiling: TFLOP/s of cuBLASLt's best n x n x n block-scaled FP8 matmul (n a
 * multiple of 128). MM_OK with *tflops 0 and `why` filled when cuBLASLt cannot run it; MM_RUNTIME
 * on a CUDA error. */
mm_status lt_square_tflops(int n, cudaStream_t st, double *tflops, char *why, size_t why_len);

#endif
