/* The ceilings of bench's floors, measured where the run happens rather than assumed.
 *
 * HBM: a read of the local experts' weights (the stream a decode call is bound by), at least 32
 *   L2s long (a scratch buffer that long when they are fewer); eight 16-byte loads per thread in
 *   flight, the best of five after two untimed. A copy (the usual figure) reads and writes,
 *   and reads slower than a pure read stream, so the floors of a weight stream need the read.
 * FP8: cuBLASLt's block-scaled FP8 matmul at 8192^3 (gemm_cublaslt.c lt_square_tflops), the best
 *   of ten.
 * NVLink: every rank writes into every peer's window at once (the pattern of a dispatch), 16-byte
 *   stores; bytes each rank sent per second, the best of five, the slowest rank's. One GPU has no
 *   link, so its constant stays, and a slice (--ep-slice) has no NVLink term at all.
 * Each value is the slowest rank's (MPI_MIN), and every rank reaches every reduction even after a
 * CUDA error, so no rank waits alone. */
#include "ceilings.h"

#include <stdlib.h>
#include <string.h>

#include "gemm_cublaslt.h"
#include "launch.h"

#define CEIL_HBM_READ_L2 32      /* the read's length in L2s */
#define CEIL_HBM_MIN_L2 8        /* the least: a read of fewer L2s counts their hits */
#define CEIL_FP8_N 8192
#define CEIL_NVLINK_MAX_BYTES (64ull << 20) /* per peer */
#define CEIL_NVLINK_MIN_BYTES (4ull << 20)

/* Times `fn` (one call of it on rt->stream per timing), two untimed then `timed`; the best ms. */
typedef cudaError_t (*timed_fn)(mm_runtime *rt, void *ctx);

static cudaError_t best_ms(mm_runtime *rt, timed_fn fn, void *ctx, int timed, int device_barrier, float *best)
{
    cudaEvent_t t0 = NULL, t1 = NULL;
    *best = 0;
    cudaError_t e = cudaEventCreate(&t0);
    if (e == cudaSuccess) e = cudaEventCreate(&t1);
    for (int i = 0; i < 2 + timed && e == cudaSuccess; i++) {
        float ms = 0;
        /* a device barrier first, so the ranks' timed writes overlap */
        if (device_barrier) e = mm_launch_barrier(rt->comm, rt->stream);
        if (e == cudaSuccess) e = cudaEventRecord(t0, rt->stream);
        if (e == cudaSuccess) e = fn(rt, ctx);
        if (e == cudaSuccess) e = cudaEventRecord(t1, rt->stream);
        if (e == cudaSuccess) e = cudaEventSynchronize(t1);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, t0, t1);
        if (e == cudaSuccess && i >= 2 && (*best == 0 || ms < *best)) *best = ms;
    }
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    return e;
}

typedef struct {
    const void *buf;
    uint64_t bytes;
    uint32_t *sink;
} hbm_ctx;

static cudaError_t hbm_once(mm_runtime *rt, void *ctx)
{
    const hbm_ctx *c = ctx;
    return mm_launch_hbm_read(c->buf, c->bytes, c->sink, rt->stream);
}

typedef struct {
    uint64_t offset, bytes_per_peer;
    int ctas;
} nvlink_ctx;

static cudaError_t nvlink_once(mm_runtime *rt, void *ctx)
{
    const nvlink_ctx *c = ctx;
    return mm_launch_nvlink_write(rt->comm, c->offset, c->bytes_per_peer, c->ctas, rt->stream);
}

/* The slowest rank's value into *out (0 when any rank could not measure); every rank calls it. */
static mm_status agree_min(double mine, double *out)
{
    MPI_TRY(MPI_Allreduce(&mine, out, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    return MM_OK;
}

static mm_status measure_hbm(mm_runtime *rt, const mm_ceiling_inputs *in, double *gbps, char *how, size_t how_len)
{
    /* a long read, so its launch and tail do not count (on an H100 a read of 0.54 GB, 11 L2s,
     * gave 2948 GB/s, one of 4.29 GB 3091); fewer weights than that: a scratch buffer of that
     * size, or when it does not fit, the weights if they are still many L2s */
    const uint64_t want = CEIL_HBM_READ_L2 * (uint64_t)rt->l2_bytes, least = CEIL_HBM_MIN_L2 * (uint64_t)rt->l2_bytes;
    hbm_ctx c = {in->weights, in->weight_bytes & ~(uint64_t)15, NULL};
    void *scratch = NULL;
    cudaError_t e = cudaMalloc((void **)&c.sink, sizeof(uint32_t));
    if (e == cudaSuccess && c.bytes < want) {
        if (cudaMalloc(&scratch, want) == cudaSuccess) {
            c.buf = scratch;
            c.bytes = want;
            e = mm_launch_fill_fp8(scratch, want, 3, rt->stream);
        } else {
            (void)cudaGetLastError(); /* the failed allocation is not an error of the run */
            scratch = NULL;
        }
    }
    const int enough = c.bytes >= least;
    float ms = 0;
    if (e == cudaSuccess && enough) e = best_ms(rt, hbm_once, &c, 5, 0, &ms);
    const double mine = e == cudaSuccess && ms > 0 ? (double)c.bytes / (ms * 1e-3) / 1e9 : 0;
    const int used_scratch = scratch != NULL;
    cudaFree(scratch);
    cudaFree(c.sink);
    MM_TRY(agree_min(mine, gbps));
    if (e != cudaSuccess) {
        mm_error("CUDA %s (%s) measuring the HBM read ceiling", cudaGetErrorName(e), cudaGetErrorString(e));
        return MM_RUNTIME;
    }
    if (*gbps > 0)
        mm_fmt(how, how_len, "a read of %.2f GB of %s, 16-byte loads, best of 5", c.bytes / 1e9,
               used_scratch ? "scratch FP8 bytes" : "the local experts' weights");
    else
        mm_fmt(how, how_len, "no room for a read of %d L2s", CEIL_HBM_MIN_L2);
    return MM_OK;
}

static mm_status measure_fp8(mm_runtime *rt, double *tflops, char *how, size_t how_len)
{
    double mine = 0;
    char why[160] = "";
    mm_status s = lt_square_tflops(CEIL_FP8_N, rt->stream, &mine, why, sizeof why);
    MM_TRY(agree_min(s == MM_OK ? mine : 0, tflops));
    if (s != MM_OK) return s;
    if (*tflops > 0)
        mm_fmt(how, how_len, "cuBLASLt block-scaled FP8 matmul %d^3, best of 10", CEIL_FP8_N);
    else
        mm_fmt(how, how_len, "%s", why[0] ? why : "another rank could not run cuBLASLt");
    return MM_OK;
}

static mm_status measure_nvlink(mm_runtime *rt, const mm_ceiling_inputs *in, double *gbps, char *how, size_t how_len)
{
    uint64_t per_peer = in->sym_bytes / (uint64_t)rt->world / 16 * 16;
    if (per_peer > CEIL_NVLINK_MAX_BYTES) per_peer = CEIL_NVLINK_MAX_BYTES;
    double mine_in = (double)per_peer, smallest = 0;
    MM_TRY(agree_min(mine_in, &smallest));
    if (smallest < CEIL_NVLINK_MIN_BYTES) {
        *gbps = 0;
        mm_fmt(how, how_len, "the symmetric buffer is too small to time a write (%.1f MB a peer)", smallest / 1e6);
        return MM_OK;
    }
    nvlink_ctx c = {in->sym_offset, (uint64_t)smallest, rt->sm_count * 2};
    float ms = 0;
    cudaError_t e = best_ms(rt, nvlink_once, &c, 5, 1, &ms);
    /* every peer's writes into this rank's region are done before any rank clears its own */
    if (e == cudaSuccess) e = cudaStreamSynchronize(rt->stream);
    const double mine = e == cudaSuccess && ms > 0 ? (double)(rt->world - 1) * c.bytes_per_peer / (ms * 1e-3) / 1e9 : 0;
    MPI_TRY(MPI_Barrier(MPI_COMM_WORLD));
    if (e == cudaSuccess) e = cudaMemset(rt->sym + in->sym_offset, 0, (size_t)c.bytes_per_peer * rt->world);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    MPI_TRY(MPI_Barrier(MPI_COMM_WORLD));
    MM_TRY(agree_min(mine, gbps));
    if (e != cudaSuccess) {
        mm_error("CUDA %s (%s) measuring the NVLink write ceiling", cudaGetErrorName(e), cudaGetErrorString(e));
        return MM_RUNTIME;
    }
    mm_fmt(how, how_len, "writes of %.0f MB to each of %d peers at once, bytes sent per second, best of 5",
           c.bytes_per_peer / 1e6, rt->world - 1);
    return MM_OK;
}

/* A measurement's status, agreed: a rank that failed stops every rank before the next collective. */
static mm_status agreed(mm_status local)
{
    mm_status all;
    MM_TRY(mpi_agree(local, &all));
    return all;
}

mm_status ceilings_measure(mm_runtime *rt, const mm_ceiling_inputs *in, unsigned given, mm_ceiling_set *set)
{
    for (int k = 0; k < CEIL_COUNT; k++) {
        if ((given >> k) & 1u) continue;
        double v = 0;
        char how[112] = "";
        if (k == CEIL_HBM)
            MM_TRY(agreed(measure_hbm(rt, in, &v, how, sizeof how)));
        else if (k == CEIL_FP8)
            MM_TRY(agreed(measure_fp8(rt, &v, how, sizeof how)));
        else if (rt->world < 2)
            mm_fmt(how, sizeof how, "one GPU: no link to time");
        else
            MM_TRY(agreed(measure_nvlink(rt, in, &v, how, sizeof how)));
        if (v > 0) {
            *ceiling_value(&set->value, (mm_ceiling_kind)k) = v;
            set->source[k] = CEIL_MEASURED;
        }
        mm_fmt(set->how[k], sizeof set->how[k], "%s", how);
    }
    return MM_OK;
}
