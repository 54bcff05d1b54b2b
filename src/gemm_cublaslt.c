/* The cuBLASLt comparison of `megamoe gemm` (see gemm_cublaslt.h).
 *
 * Per active expert e: D_e[n][rows_e] (column-major, = row-major [rows_e][n]) = W_e x X_e^T as
 * cuBLASLt's TN FP8 matmul: A = W_e stored [n][k] (k fastest) with op T, scales per 128x128 block;
 * B = X_e stored [rows_e][k] with op N, one scale per 128 values of a row; FP32 compute, BF16 D.
 * Each expert's rows are padded to 16 (lt_layout.h). Descriptors, padded operands and one
 * heuristic algorithm per expert are prepared once; the timed part is only the loop of
 * cublasLtMatmul calls.
 *
 * Which dimension of each scale tensor runs fastest is established, not assumed: the first
 * layout whose output matches the exact reference (calc_diff <= 1e-4) is kept, and none matching
 * is reported instead of a number. */
#include "gemm_cublaslt.h"

#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

#include "lt_layout.h"
#include "runtime.h"

#define LT_WORKSPACE (32u << 20)
#define LT_MATCH 1e-4

struct lt_runner {
    cublasLtHandle_t handle;
    lt_layout lay;
    int experts, n, k, rows;
    const int32_t *count, *offset; /* host copies */
    uint8_t *x_pad;                /* [rows_total][k] */
    float *sa_pad[2];              /* activation scales: [0] rows fastest, [1] k-blocks fastest */
    float *ws_t;                   /* weight scales with n-blocks fastest */
    const uint8_t *w;
    const float *ws;
    uint16_t *d_pad;               /* [rows_total][n] */
    uint16_t *out;                 /* [rows][n] compact */
    void *workspace;
    cublasLtMatmulDesc_t *op;      /* [E] */
    cublasLtMatrixLayout_t la, *lb, *ld; /* [E] */
    cublasLtMatmulAlgo_t *algo;    /* [E] */
    int layout;                    /* bit 0: activation scales k-fastest; bit 1: weight scales n-fastest */
    mm_device_diff *diff;
};

static const char *const layout_names[4] = {
    "act scales rows-fastest, weight scales k-fastest", "act scales k-fastest, weight scales k-fastest",
    "act scales rows-fastest, weight scales n-fastest", "act scales k-fastest, weight scales n-fastest"};

#define LT_TRY(call, what)                                                                          \
    do {                                                                                            \
        cublasStatus_t lt_rc_ = (call);                                                             \
        if (lt_rc_ != CUBLAS_STATUS_SUCCESS) {                                                      \
            mm_fmt(why, why_len, "cuBLASLt %s: status %d", what, (int)lt_rc_);                      \
            return MM_OK;                                                                           \
        }                                                                                           \
    } while (0)

/* A CUDA call whose failure is named on stderr and ends the function at its `done` with status
 * `s` MM_RUNTIME (the functions below that allocate). */
#define LT_CUDA(call)                                                                               \
    do {                                                                                            \
        cudaError_t c_ = (call);                                                                    \
        if (c_ != cudaSuccess) {                                                                    \
            mm_error("CUDA %s in %s", cudaGetErrorName(c_), #call);                                 \
            s = MM_RUNTIME;                                                                         \
            goto done;                                                                              \
        }                                                                                           \
    } while (0)

/* The per-expert descriptors for scale layout `layout`, and an algorithm for each. */
static mm_status describe(lt_runner *r, int layout, char *why, size_t why_len)
{
    const int nb = r->n / 128, kb = r->k / 128;
    int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtMatmulPreference_t pref;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref), "preference");
    uint64_t ws_bytes = LT_WORKSPACE;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
    for (int e = 0; e < r->experts; e++) {
        if (r->lay.n_pad[e] == 0) continue;
        if (r->op[e]) cublasLtMatmulDescDestroy(r->op[e]);
        r->op[e] = NULL;
        cublasStatus_t st = cublasLtMatmulDescCreate(&r->op[e], CUBLAS_COMPUTE_32F, CUDA_R_32F);
        const float *a_scale = (layout & 2) ? r->ws_t + (size_t)e * nb * kb : r->ws + (size_t)e * nb * kb;
        const float *b_scale = r->sa_pad[layout & 1] + r->lay.scale0[e];
        if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(r->op[e], CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
        if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(r->op[e], CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
        if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(r->op[e], CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof a_mode);
        if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(r->op[e], CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof b_mode);
        if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(r->op[e], CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale);
        if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(r->op[e], CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale);
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        if (st == CUBLAS_STATUS_SUCCESS)
            st = cublasLtMatmulAlgoGetHeuristic(r->handle, r->op[e], r->la, r->lb[e], r->ld[e], r->ld[e], pref, 1, &res,
                                                &found);
        if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
            mm_fmt(why, why_len, "cuBLASLt: no algorithm for %d x %d x %d (status %d)", r->n, r->lay.n_pad[e], r->k,
                   (int)st);
            cublasLtMatmulPreferenceDestroy(pref);
            return MM_OK;
        }
        r->algo[e] = res.algo;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    return MM_OK;
}

/* One matmul per active expert; the first cuBLAS status that is not success (or success). */
static cublasStatus_t enqueue_matmuls(lt_runner *r, cudaStream_t st, int *expert)
{
    const float alpha = 1.0f, beta = 0.0f;
    for (int e = 0; e < r->experts; e++) {
        if (r->lay.n_pad[e] == 0) continue;
        cublasStatus_t rc = cublasLtMatmul(r->handle, r->op[e], &alpha, r->w + (size_t)e * r->n * r->k, r->la,
                                           r->x_pad + r->lay.row0[e] * r->k, r->lb[e], &beta,
                                           r->d_pad + r->lay.row0[e] * r->n, r->ld[e],
                                           r->d_pad + r->lay.row0[e] * r->n, r->ld[e], &r->algo[e], r->workspace,
                                           LT_WORKSPACE, st);
        if (rc != CUBLAS_STATUS_SUCCESS) {
            *expert = e;
            return rc;
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}

mm_status lt_runner_enqueue(lt_runner *r, cudaStream_t st)
{
    int e = -1;
    cublasStatus_t rc = enqueue_matmuls(r, st, &e);
    if (rc != CUBLAS_STATUS_SUCCESS) {
        mm_error("cublasLtMatmul failed for expert %d: status %d", e, (int)rc);
        return MM_RUNTIME;
    }
    return MM_OK;
}

mm_status lt_runner_output(lt_runner *r, cudaStream_t st, const uint16_t **out)
{
    for (int e = 0; e < r->experts; e++)
        if (r->count[e] > 0)
            CUDA_TRY(cudaMemcpyAsync(r->out + (size_t)r->offset[e] * r->n, r->d_pad + r->lay.row0[e] * r->n,
                                     (size_t)r->count[e] * r->n * 2, cudaMemcpyDeviceToDevice, st));
    *out = r->out;
    return MM_OK;
}

const char *lt_runner_layout(const lt_runner *r)
{
    return layout_names[r->layout];
}

/* calc_diff of cuBLASLt's output against the exact reference; *rc: the status of a matmul
 * cuBLASLt refused at run time (the heuristic offered an algorithm the shape cannot use). */
static mm_status match(lt_runner *r, const double *ref, cudaStream_t st, double *calc, cublasStatus_t *rc)
{
    const uint16_t *out;
    int e = -1;
    CUDA_TRY(mm_launch_poison(r->d_pad, r->lay.rows_total * (size_t)r->n * 2, st));
    if ((*rc = enqueue_matmuls(r, st, &e)) != CUBLAS_STATUS_SUCCESS) return MM_OK;
    MM_TRY(lt_runner_output(r, st, &out));
    CUDA_TRY(mm_launch_compare(out, ref, (long long)r->rows * r->n, r->diff, st));
    mm_device_diff d;
    CUDA_TRY(cudaMemcpyAsync(&d, r->diff, sizeof d, cudaMemcpyDeviceToHost, st));
    CUDA_TRY(cudaStreamSynchronize(st));
    *calc = d.nonfinite ? 1.0 : (d.sum_aa_bb > 0 ? 1.0 - 2.0 * d.sum_ab / d.sum_aa_bb : 0.0);
    return MM_OK;
}

mm_status lt_runner_create(const lt_problem *p, const double *ref, cudaStream_t st, lt_runner **out, char *why,
                           size_t why_len)
{
    *out = NULL;
    mm_fmt(why, why_len, "cuBLASLt: setup failed");
    lt_runner *r = calloc(1, sizeof *r);
    if (!r) return MM_RUNTIME;
    mm_status s = MM_OK;
    const int kb = p->k / 128, nb = p->n / 128;
    r->experts = p->experts;
    r->n = p->n;
    r->k = p->k;
    r->rows = p->rows;
    r->count = p->count;
    r->offset = p->offset;
    r->w = p->w;
    r->ws = p->ws;
    float *sa_host = NULL, *pack = NULL, *ws_host = NULL;
    if (lt_layout_plan(p->count, p->experts, kb, &r->lay) != 0) goto oom;
    r->op = calloc((size_t)p->experts, sizeof *r->op);
    r->lb = calloc((size_t)p->experts, sizeof *r->lb);
    r->ld = calloc((size_t)p->experts, sizeof *r->ld);
    r->algo = calloc((size_t)p->experts, sizeof *r->algo);
    sa_host = malloc((size_t)p->rows * kb * sizeof(float) + 4);
    pack = calloc(r->lay.scales_total + 4, sizeof(float));
    ws_host = malloc((size_t)p->experts * nb * kb * 2 * sizeof(float));
    if (!r->op || !r->lb || !r->ld || !r->algo || !sa_host || !pack || !ws_host) goto oom;

    LT_CUDA(cudaMalloc((void **)&r->x_pad, r->lay.rows_total * (size_t)p->k + 16));
    LT_CUDA(cudaMalloc((void **)&r->sa_pad[0], (r->lay.scales_total + 4) * sizeof(float)));
    LT_CUDA(cudaMalloc((void **)&r->sa_pad[1], (r->lay.scales_total + 4) * sizeof(float)));
    LT_CUDA(cudaMalloc((void **)&r->ws_t, (size_t)p->experts * nb * kb * sizeof(float)));
    LT_CUDA(cudaMalloc((void **)&r->d_pad, r->lay.rows_total * (size_t)p->n * 2 + 16));
    LT_CUDA(cudaMalloc((void **)&r->out, (size_t)p->rows * p->n * 2 + 16));
    LT_CUDA(cudaMalloc(&r->workspace, LT_WORKSPACE));
    LT_CUDA(cudaMalloc((void **)&r->diff, sizeof(mm_device_diff)));
    /* padded activations: each expert's rows, then its first row again */
    for (int e = 0; e < p->experts; e++)
        for (int rr = 0; rr < r->lay.n_pad[e]; rr++)
            LT_CUDA(cudaMemcpyAsync(r->x_pad + (r->lay.row0[e] + rr) * (size_t)p->k,
                                    p->qa + lt_source_row(p->count, p->offset, e, rr) * (size_t)p->k, (size_t)p->k,
                                    cudaMemcpyDeviceToDevice, st));
    LT_CUDA(cudaMemcpyAsync(sa_host, p->sa, (size_t)p->rows * kb * sizeof(float), cudaMemcpyDeviceToHost, st));
    LT_CUDA(cudaMemcpyAsync(ws_host, p->ws, (size_t)p->experts * nb * kb * sizeof(float), cudaMemcpyDeviceToHost, st));
    LT_CUDA(cudaStreamSynchronize(st));
    for (int order = 0; order < 2; order++) {
        lt_pack_act_scales(&r->lay, p->count, p->offset, sa_host, order == 0, pack);
        LT_CUDA(cudaMemcpy(r->sa_pad[order], pack, r->lay.scales_total * sizeof(float), cudaMemcpyHostToDevice));
    }
    lt_transpose_weight_scales(ws_host, p->experts, nb, kb, ws_host + (size_t)p->experts * nb * kb);
    LT_CUDA(cudaMemcpy(r->ws_t, ws_host + (size_t)p->experts * nb * kb, (size_t)p->experts * nb * kb * sizeof(float),
                       cudaMemcpyHostToDevice));

    if (cublasLtCreate(&r->handle) != CUBLAS_STATUS_SUCCESS) {
        mm_fmt(why, why_len, "cuBLASLt: cannot create a handle");
        goto unsupported;
    }
    if (cublasLtMatrixLayoutCreate(&r->la, CUDA_R_8F_E4M3, (uint64_t)p->k, (uint64_t)p->n, p->k) != CUBLAS_STATUS_SUCCESS)
        goto unsupported;
    for (int e = 0; e < p->experts; e++) {
        if (r->lay.n_pad[e] == 0) continue;
        if (cublasLtMatrixLayoutCreate(&r->lb[e], CUDA_R_8F_E4M3, (uint64_t)p->k, (uint64_t)r->lay.n_pad[e], p->k) !=
                CUBLAS_STATUS_SUCCESS ||
            cublasLtMatrixLayoutCreate(&r->ld[e], CUDA_R_16BF, (uint64_t)p->n, (uint64_t)r->lay.n_pad[e], p->n) !=
                CUBLAS_STATUS_SUCCESS)
            goto unsupported;
    }
    /* the scale layout: the first that reproduces the reference */
    char tried[256] = "";
    for (int layout = 0; layout < 4; layout++) {
        char why_layout[160] = "";
        s = describe(r, layout, why_layout, sizeof why_layout);
        if (s != MM_OK) goto done;
        if (why_layout[0]) {
            mm_fmt(why, why_len, "%s", why_layout);
            continue;
        }
        double calc = 1.0;
        cublasStatus_t rc = CUBLAS_STATUS_SUCCESS;
        s = match(r, ref, st, &calc, &rc);
        if (s != MM_OK) goto done;
        if (rc != CUBLAS_STATUS_SUCCESS) {
            mm_fmt(why, why_len, "cuBLASLt: cublasLtMatmul refused %d x %zu x %d (status %d)", r->n,
                   r->lay.rows_total, r->k, (int)rc);
            goto unsupported;
        }
        size_t used = strlen(tried);
        mm_fmt(tried + used, sizeof tried - used, "%s%.1e", layout ? "/" : "", calc);
        if (calc <= LT_MATCH) {
            r->layout = layout;
            *out = r;
            why[0] = '\0';
            goto cleanup;
        }
        mm_fmt(why, why_len, "cuBLASLt: no scale layout reproduces the reference (calc_diff %s)", tried);
    }
unsupported:
    lt_runner_destroy(r);
    r = NULL;
    goto cleanup;
oom:
    s = MM_RUNTIME;
done:
    lt_runner_destroy(r);
    r = NULL;
cleanup:
    free(sa_host);
    free(pack);
    free(ws_host);
    return s;
}

void lt_runner_destroy(lt_runner *r)
{
    if (!r) return;
    for (int e = 0; e < r->experts; e++) {
        if (r->op && r->op[e]) cublasLtMatmulDescDestroy(r->op[e]);
        if (r->lb && r->lb[e]) cublasLtMatrixLayoutDestroy(r->lb[e]);
        if (r->ld && r->ld[e]) cublasLtMatrixLayoutDestroy(r->ld[e]);
    }
    if (r->la) cublasLtMatrixLayoutDestroy(r->la);
    if (r->handle) cublasLtDestroy(r->handle);
    free(r->op);
    free(r->lb);
    free(r->ld);
    free(r->algo);
    cudaFree(r->x_pad);
    cudaFree(r->sa_pad[0]);
    cudaFree(r->sa_pad[1]);
    cudaFree(r->ws_t);
    cudaFree(r->d_pad);
    cudaFree(r->out);
    cudaFree(r->workspace);
    cudaFree(r->diff);
    lt_layout_free(&r->lay);
    free(r);
}

/* The FP8 tensor-core ceiling: one n x n x n block-scaled matmul (the layout of the expert loop:
 * weights with 128x128 block scales, activations with 1x128 scales, FP32 compute, BF16 out) on
 * finite FP8 operands, the best of ten timed calls after two untimed. Only its time is used, so
 * every scale is 1 and no scale layout needs establishing. */
mm_status lt_square_tflops(int n, cudaStream_t st, double *tflops, char *why, size_t why_len)
{
    *tflops = 0;
    why[0] = '\0';
    mm_status s = MM_OK;
    const size_t nb = (size_t)n / 128, bytes = (size_t)n * n;
    uint8_t *a = NULL, *b = NULL;
    uint16_t *d = NULL;
    float *sa = NULL, *sb = NULL, *ones = NULL;
    void *workspace = NULL;
    cublasLtHandle_t h = NULL;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    float best_ms = 0;
/* a cuBLASLt status other than success: said in `why` (cuBLASLt cannot run it), to `done` */
#define LT_OR_DONE(call, what)                                                                      \
    do {                                                                                            \
        cublasStatus_t r_ = (call);                                                                 \
        if (r_ != CUBLAS_STATUS_SUCCESS) {                                                          \
            mm_fmt(why, why_len, "cuBLASLt %s: status %d", what, (int)r_);                          \
            goto done;                                                                              \
        }                                                                                           \
    } while (0)
    ones = malloc(bytes / 128 * sizeof(float));
    if (!ones) return MM_RUNTIME;
    for (size_t i = 0; i < bytes / 128; i++) ones[i] = 1.0f;
    LT_CUDA(cudaMalloc((void **)&a, bytes));
    LT_CUDA(cudaMalloc((void **)&b, bytes));
    LT_CUDA(cudaMalloc((void **)&d, bytes * 2));
    LT_CUDA(cudaMalloc((void **)&sa, nb * nb * sizeof(float)));
    LT_CUDA(cudaMalloc((void **)&sb, bytes / 128 * sizeof(float)));
    LT_CUDA(cudaMalloc(&workspace, LT_WORKSPACE));
    LT_CUDA(mm_launch_fill_fp8(a, bytes, 1, st));
    LT_CUDA(mm_launch_fill_fp8(b, bytes, 2, st));
    LT_CUDA(cudaMemcpyAsync(sa, ones, nb * nb * sizeof(float), cudaMemcpyHostToDevice, st));
    LT_CUDA(cudaMemcpyAsync(sb, ones, bytes / 128 * sizeof(float), cudaMemcpyHostToDevice, st));
    LT_CUDA(cudaEventCreate(&t0));
    LT_CUDA(cudaEventCreate(&t1));
    LT_OR_DONE(cublasLtCreate(&h), "handle");
    LT_OR_DONE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
    {
        int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
        cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        LT_OR_DONE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
        LT_OR_DONE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
        LT_OR_DONE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof a_mode), "A scale mode");
        LT_OR_DONE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof b_mode), "B scale mode");
        LT_OR_DONE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa), "A scales");
        LT_OR_DONE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb), "B scales");
    }
    LT_OR_DONE(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, (uint64_t)n, (uint64_t)n, n), "A layout");
    LT_OR_DONE(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, (uint64_t)n, (uint64_t)n, n), "B layout");
    LT_OR_DONE(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, (uint64_t)n, (uint64_t)n, n), "D layout");
    LT_OR_DONE(cublasLtMatmulPreferenceCreate(&pref), "preference");
    {
        uint64_t ws_bytes = LT_WORKSPACE;
        LT_OR_DONE(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                   sizeof ws_bytes),
              "workspace");
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        LT_OR_DONE(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &res, &found), "heuristic");
        if (found == 0) {
            mm_fmt(why, why_len, "cuBLASLt: no algorithm for a %d^3 block-scaled FP8 matmul", n);
            goto done;
        }
        const float alpha = 1.0f, beta = 0.0f;
        for (int i = 0; i < 12; i++) {
            float ms = 0;
            LT_CUDA(cudaEventRecord(t0, st));
            LT_OR_DONE(cublasLtMatmul(h, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &res.algo, workspace, LT_WORKSPACE,
                                 st),
                  "matmul");
            LT_CUDA(cudaEventRecord(t1, st));
            LT_CUDA(cudaEventSynchronize(t1));
            LT_CUDA(cudaEventElapsedTime(&ms, t0, t1));
            if (i >= 2 && (best_ms == 0 || ms < best_ms)) best_ms = ms;
        }
    }
    if (best_ms > 0) *tflops = 2.0 * n * (double)n * n / (best_ms * 1e-3) / 1e12;
done:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (op) cublasLtMatmulDescDestroy(op);
    if (h) cublasLtDestroy(h);
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    cudaFree(a);
    cudaFree(b);
    cudaFree(d);
    cudaFree(sa);
    cudaFree(sb);
    cudaFree(workspace);
    free(ones);
    return s;
#undef LT_OR_DONE
}
