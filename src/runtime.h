/* GPU runtime shared by every mode: one MPI process per GPU, the NCCL communicator, a symmetric
 * buffer every rank can load from and store to over NVLink, the bounded-wait failure record,
 * and agreement between ranks on failures. */
#ifndef MEGAMOE_RUNTIME_H
#define MEGAMOE_RUNTIME_H

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include "../kernels/api.h"
#include "common.h"
#include "reference.h"
#include "report.h"

#define CUDA_TRY(call)                                                                     \
    do {                                                                                   \
        cudaError_t cuda_rc_ = (call);                                                     \
        if (cuda_rc_ != cudaSuccess) {                                                     \
            mm_error("CUDA %s (%s) in %s at %s:%d", cudaGetErrorName(cuda_rc_),            \
                     cudaGetErrorString(cuda_rc_), #call, __FILE__, __LINE__);             \
            return MM_RUNTIME;                                                             \
        }                                                                                  \
    } while (0)

#define NCCL_TRY(call)                                                                     \
    do {                                                                                   \
        ncclResult_t nccl_rc_ = (call);                                                    \
        if (nccl_rc_ != ncclSuccess) {                                                     \
            mm_error("NCCL error %d (%s) in %s at %s:%d", (int)nccl_rc_,                   \
                     ncclGetErrorString(nccl_rc_), #call, __FILE__, __LINE__);             \
            return MM_RUNTIME;                                                             \
        }                                                                                  \
    } while (0)

/* Symmetric buffer head: MM_SIGNAL_WORDS words of barrier slots, then a scratch area the
 * self-test uses, then the modes' regions. */
#define MM_SYM_HEAD_BYTES (64u << 10)

typedef struct {
    int rank, world, local_rank, local_size;
    int device;
    const char *command; /* the subcommand, for messages */
    char host[64];
    char gpu_name[96];
    char bus_id[32];
    int sm_count;
    int comm_sms; /* --comm-sms: SMs normal's communication kernels may use (0: all) */
    size_t l2_bytes;
    char driver[32];
    char cuda[32];
    char nccl[32];
    MPI_Comm node_comm;
    ncclComm_t nccl_comm;
    int nccl_up;
    cudaStream_t stream;
    /* symmetric memory */
    char *sym;
    size_t sym_bytes;
    ncclWindow_t window;
    int window_up;
    mm_comm comm;               /* handed to kernels by value */
    mm_wait_error *error_host;  /* the same record, host side */
    /* L2 flush target: a write over more than twice the L2 */
    void *flush;
    size_t flush_bytes;
    int flush_mode; /* how timing flushes (its mm_timing.l2_flush) */
    char rank_lines[MM_MAX_RANKS][160]; /* gathered on rank 0 */
} mm_runtime;

/* Brings up MPI (already started), the device, NCCL and a symmetric buffer of `sym_bytes` bytes
 * beyond the head. Ranks agree on the outcome: every rank returns the same status. */
mm_status runtime_init(mm_runtime *rt, const char *command, int timeout_ms, size_t sym_bytes);
void runtime_destroy(mm_runtime *rt);

/* After a synchronised stream: MM_TIMEOUT if a wait on this rank expired (detail into `what`). */
mm_status runtime_wait_status(mm_runtime *rt, char *what, size_t len);
/* Waits for the stream after a mode's call. A CUDA error (a fault in a kernel, which leaves the
 * context unusable) is named in `what` ("rank R: CUDA <name> (<text>) in LABEL") and on stderr,
 * and gives MM_RUNTIME. */
mm_status runtime_sync(mm_runtime *rt, const char *label, char *what, size_t len);
/* The same sentence for any failure record (`megamoe gemm` keeps its own, without a runtime):
 * MM_OK when it is empty, else MM_TIMEOUT. */
mm_status wait_error_describe(const volatile mm_wait_error *e, char *what, size_t len);

/* Gathers every rank's failure detail to rank 0 as one line in `note` (empty if none). */
mm_status runtime_failure_note(mm_runtime *rt, const char *local_what, char *note, size_t len);

/* After a failure on any rank: every rank stops, clears its signal words, epoch and failure
 * record, and meets again, so the next (mode, batch) starts clean. */
mm_status runtime_reset_comm(mm_runtime *rt);

/* Fails with a clear message if `bytes` more device memory would not fit (all ranks agree). */
mm_status runtime_check_fit(mm_runtime *rt, const char *what, size_t bytes);

/* Barrier among all ranks on the device (one CTA on the stream). */
mm_status runtime_device_barrier(mm_runtime *rt);
/* mode: MM_L2_FLUSH_ON (a write) or MM_L2_FLUSH_CLEAN (a read; sweep.h) */
mm_status runtime_flush_l2(mm_runtime *rt, int mode, int iteration);

void runtime_fill_meta(const mm_runtime *rt, mm_meta *m);
/* An EP slice's tokens (--ep-slice, check's slice scenarios): of `tokens` tokens' routing on the
 * device (ids, w: [tokens][topk], written on rt->stream), those that pick one of experts [0, local),
 * compacted in place with their other picks masked (datagen_host.h ep_slice_select); *kept of them. */
mm_status runtime_slice_select(mm_runtime *rt, int32_t *ids, float *w, int tokens, int topk, int local, int *kept);
/* The local GPUs; none (no GPU, no driver, a driver older than the runtime) is one line naming
 * which, as `command`'s error, and MM_USAGE. */
mm_status runtime_gpu_count(const char *host, const char *command, int *count);
/* The versions a results file names: the NVIDIA driver's (/proc/driver/nvidia/version, else the
 * CUDA driver API's) and the CUDA runtime's ("13.0"). */
void runtime_driver_version(char *buf, size_t len);
mm_status runtime_cuda_version(char *buf, size_t len);

/* This rank's comparison of a BF16 output [n] with the double reference, summed into `acc`
 * (read back on the compute stream, so it waits for the compare). `scratch`: device memory. */
mm_status runtime_compare(mm_runtime *rt, const uint16_t *out, const double *ref, long long n,
                          mm_device_diff *scratch, mm_diff_acc *acc);
const char *phase_name(uint32_t phase);
/* What a MM_PHASE_FUSED_PIPELINE failure waited for (its `expected`: an mm_pipe_wait). */
const char *pipe_wait_name(uint64_t wait);

#endif
