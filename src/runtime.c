#define _POSIX_C_SOURCE 200809L
#include "runtime.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datagen_host.h"
#include "launch.h"

/* The device API's structures come from the headers we were built with: a library older than
 * them, or older than the first release with symmetric windows, cannot be used. */
#define MM_NCCL_MIN_CODE 22800

const char *phase_name(uint32_t phase)
{
    static const char *const names[] = {"none", "barrier", "grid-sync", "ll-dispatch", "ll-combine",
                                        "fused-dispatch", "fused-gemm1", "fused-combine", "fused-pipeline",
                                        "gemm-pipeline"};
    /* a phase added without its name would print NULL */
    _Static_assert(sizeof names / sizeof names[0] == MM_PHASE_COUNT, "a name per mm_phase");
    return phase < MM_PHASE_COUNT ? names[phase] : "unknown";
}

const char *pipe_wait_name(uint64_t wait)
{
    static const char *const names[] = {"none", "stage full (math waiting for operands)",
                                        "stage empty (producer waiting for the math)",
                                        "item slot free (producer waiting for the math)",
                                        "item ready (math waiting for the producer)",
                                        "token rows (the dispatch waiting for its BF16 rows' bulk loads)",
                                        "GEMM1 block (a GEMM2 item waiting for an I block of its row tile)",
                                        "combine rows (the combine waiting for its rows' bulk loads)"};
    _Static_assert(sizeof names / sizeof names[0] == MM_PIPE_WAIT_COUNT, "a name per mm_pipe_wait");
    return wait < MM_PIPE_WAIT_COUNT ? names[wait] : "unknown";
}

static void version_string(int code, char *buf, size_t len)
{
    /* NCCL codes: 2.28.3 -> 22803 (>= 2.9 scheme: X*10000 + Y*100 + Z) */
    mm_fmt(buf, len, "%d.%d.%d", code / 10000, (code / 100) % 100, code % 100);
}

void runtime_driver_version(char *buf, size_t len)
{
    int v = 0;
    cudaDriverGetVersion(&v);
    mm_fmt(buf, len, "cuda-driver-%d.%d", v / 1000, (v % 1000) / 10);
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return;
    char line[256];
    if (fgets(line, sizeof line, f)) {
        /* "NVRM version: NVIDIA UNIX [Open ]Kernel Module [for x86_64]  580.159.04  ...": the
         * first word shaped like N.N.N is the driver version. */
        for (char *tok = strtok(line, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
            unsigned a, b, c;
            if (sscanf(tok, "%u.%u.%u", &a, &b, &c) == 3 && strlen(tok) < len) {
                mm_fmt(buf, len, "%s", tok);
                break;
            }
        }
    }
    fclose(f);
}

mm_status runtime_cuda_version(char *buf, size_t len)
{
    int rv = 0;
    CUDA_TRY(cudaRuntimeGetVersion(&rv));
    mm_fmt(buf, len, "%d.%d", rv / 1000, (rv % 1000) / 10);
    return MM_OK;
}

mm_status runtime_gpu_count(const char *host, const char *command, int *count)
{
    *count = 0;
    cudaError_t e = cudaGetDeviceCount(count);
    if (e == cudaSuccess && *count > 0) return MM_OK;
    /* CUDA names a missing driver "driver version is insufficient": tell the two cases apart by
     * the kernel module, so the user looks for the right thing. */
    char driver[64] = "";
    runtime_driver_version(driver, sizeof driver);
    const int module_loaded = access("/proc/driver/nvidia/version", R_OK) == 0;
    if (e == cudaSuccess || e == cudaErrorNoDevice)
        mm_error("%s: no NVIDIA GPU on host %s (the driver sees none): it needs one GPU per rank; plan "
                 "and gate run without one", command, host);
    else if (!module_loaded)
        mm_error("%s: no NVIDIA driver on host %s (no GPU, or its kernel module is not loaded): it needs "
                 "one GPU per rank; plan and gate run without one", command, host);
    else if (e == cudaErrorInsufficientDriver)
        mm_error("%s: the NVIDIA driver on host %s (%s) is older than this binary's CUDA runtime: update "
                 "the driver or build with an older CUDA", command, host, driver);
    else
        mm_error("%s: no usable NVIDIA GPU on host %s: %s", command, host, cudaGetErrorString(e));
    return MM_USAGE;
}

/* Device selection and the checks that must hold on every rank before NCCL starts. */
static mm_status pick_device(mm_runtime *rt)
{
    int count = 0;
    MM_TRY(runtime_gpu_count(rt->host, rt->command, &count));
    if (rt->local_size > count) {
        mm_error("%d ranks on host %s but it has %d GPU(s): start at most one rank per GPU",
                 rt->local_size, rt->host, count);
        return MM_USAGE;
    }
    rt->device = rt->local_rank;
    CUDA_TRY(cudaSetDevice(rt->device));
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, rt->device));
    if (prop.major != 9) {
        mm_error("GPU %d on %s is %s (sm_%d%d): the kernels are built for Hopper (sm_90a)",
                 rt->device, rt->host, prop.name, prop.major, prop.minor);
        return MM_USAGE;
    }
    mm_fmt(rt->gpu_name, sizeof rt->gpu_name, "%s", prop.name);
    rt->sm_count = prop.multiProcessorCount;
    rt->l2_bytes = (size_t)prop.l2CacheSize;
    CUDA_TRY(cudaDeviceGetPCIBusId(rt->bus_id, sizeof rt->bus_id, rt->device));
    return MM_OK;
}

static mm_status start_nccl(mm_runtime *rt)
{
    int lib = 0;
    NCCL_TRY(ncclGetVersion(&lib));
    version_string(lib, rt->nccl, sizeof rt->nccl);
    if (lib < MM_NCCL_MIN_CODE || lib < NCCL_VERSION_CODE) {
        char built[32];
        version_string(NCCL_VERSION_CODE, built, sizeof built);
        mm_error("NCCL library %s is older than %s (built against %s; symmetric windows and the "
                 "device API need >= 2.28): rebuild against the NCCL the machine has",
                 rt->nccl, lib < MM_NCCL_MIN_CODE ? "2.28.0" : built, built);
        return MM_USAGE;
    }
    ncclUniqueId id;
    if (rt->rank == 0) NCCL_TRY(ncclGetUniqueId(&id));
    MPI_TRY(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    NCCL_TRY(ncclCommInitRank(&rt->nccl_comm, rt->world, id, rt->rank));
    rt->nccl_up = 1;
    int lsa_ranks = mm_nccl_lsa_ranks(rt->nccl_comm);
    if (lsa_ranks != rt->world) {
        mm_error("only %d of %d ranks share this rank's NVLink domain: every rank must reach "
                 "every other by load/store (multi-node EP is not supported yet)",
                 lsa_ranks, rt->world);
        return MM_USAGE;
    }
    return MM_OK;
}

static mm_status start_symmetric(mm_runtime *rt, int timeout_ms, size_t sym_bytes)
{
    rt->sym_bytes = MM_SYM_HEAD_BYTES + sym_bytes;
    rt->sym_bytes = (rt->sym_bytes + NCCL_WIN_REQUIRED_ALIGNMENT - 1) /
                    NCCL_WIN_REQUIRED_ALIGNMENT * NCCL_WIN_REQUIRED_ALIGNMENT;
    MM_TRY(runtime_check_fit(rt, "symmetric buffer", rt->sym_bytes));
    NCCL_TRY(ncclMemAlloc((void **)&rt->sym, rt->sym_bytes));
    CUDA_TRY(cudaMemset(rt->sym, 0, rt->sym_bytes));
    mm_peers *peers = &rt->comm.peers;
    memset(peers, 0, sizeof *peers);
    peers->rank = rt->rank;
    peers->ranks = rt->world;
    if (rt->world == 1) {
        /* NCCL builds no load/store team for a single rank (its window's LSA pointer faults):
         * our own allocation is the whole table. */
        peers->base[0] = rt->sym;
    } else {
        NCCL_TRY(ncclCommWindowRegister(rt->nccl_comm, rt->sym, rt->sym_bytes, &rt->window,
                                        NCCL_WIN_COLL_SYMMETRIC));
        rt->window_up = 1;
        /* Peer base pointers: read once through the device API, then a plain table. Our own
         * entry is NCCL's mapping of our buffer (another virtual address for the same memory);
         * kernels use the table for every rank, ourselves included. */
        char **dev_table = NULL;
        CUDA_TRY(cudaMalloc((void **)&dev_table, sizeof(char *) * MM_MAX_PEERS));
        CUDA_TRY(mm_launch_peer_pointers(rt->window, rt->world, dev_table, rt->stream));
        CUDA_TRY(cudaStreamSynchronize(rt->stream));
        CUDA_TRY(cudaMemcpy(peers->base, dev_table, sizeof(char *) * (size_t)rt->world,
                            cudaMemcpyDeviceToHost));
        CUDA_TRY(cudaFree(dev_table));
    }

    CUDA_TRY(cudaMalloc((void **)&rt->comm.epoch, 64));
    CUDA_TRY(cudaMemset(rt->comm.epoch, 0, 64));
    rt->comm.abort_flag = (uint32_t *)((char *)rt->comm.epoch + 32);
    CUDA_TRY(cudaHostAlloc((void **)&rt->error_host, sizeof(mm_wait_error), cudaHostAllocMapped));
    memset(rt->error_host, 0, sizeof *rt->error_host);
    CUDA_TRY(cudaHostGetDevicePointer((void **)&rt->comm.error, rt->error_host, 0));
    rt->comm.timeout_ns = (uint64_t)timeout_ms * 1000000ull;
    return MM_OK;
}

static mm_status init_local(mm_runtime *rt, int timeout_ms, size_t sym_bytes)
{
    MM_TRY(pick_device(rt));
    CUDA_TRY(cudaStreamCreateWithFlags(&rt->stream, cudaStreamNonBlocking));
    MM_TRY(runtime_cuda_version(rt->cuda, sizeof rt->cuda));
    runtime_driver_version(rt->driver, sizeof rt->driver);
    rt->flush_bytes = mm_l2_flush_bytes(rt->l2_bytes);
    CUDA_TRY(cudaMalloc(&rt->flush, rt->flush_bytes));
    (void)timeout_ms;
    (void)sym_bytes;
    return MM_OK;
}

mm_status runtime_init(mm_runtime *rt, const char *command, int timeout_ms, size_t sym_bytes)
{
    memset(rt, 0, sizeof *rt);
    rt->command = command;
    MM_TRY(mpi_start(&rt->rank, &rt->world));
    if (gethostname(rt->host, sizeof rt->host) != 0) mm_fmt(rt->host, sizeof rt->host, "?");
    rt->host[sizeof rt->host - 1] = '\0';
    if (rt->world > MM_MAX_PEERS) {
        if (rt->rank == 0)
            mm_error("%d ranks: at most %d GPUs of one node are supported", rt->world, MM_MAX_PEERS);
        return MM_USAGE;
    }
    MPI_TRY(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rt->rank, MPI_INFO_NULL,
                                &rt->node_comm));
    MPI_TRY(MPI_Comm_rank(rt->node_comm, &rt->local_rank));
    MPI_TRY(MPI_Comm_size(rt->node_comm, &rt->local_size));
    /* The host's OpenMP work (check's host reference regenerates experts) shares the node's cores
     * with the other ranks: one team of cores / ranks each, unless OMP_NUM_THREADS says otherwise
     * (a full team per rank made check 2.2x slower at EP2 and stall for minutes at EP4). */
    if (!getenv("OMP_NUM_THREADS")) {
        int threads = omp_get_num_procs() / rt->local_size;
        omp_set_num_threads(threads < 1 ? 1 : threads);
    }
    mm_status agreed;
    if (rt->local_size != rt->world) {
        if (rt->rank == 0)
            mm_error("ranks span several nodes (%d of %d on %s): multi-node EP is not supported "
                     "yet; run all ranks on one node",
                     rt->local_size, rt->world, rt->host);
        return MM_USAGE;
    }
    /* Every rank must pass the local checks before any collective that could wait forever. */
    mm_status local = init_local(rt, timeout_ms, sym_bytes);
    MM_TRY(mpi_agree(local, &agreed));
    if (agreed != MM_OK) {
        if (local == MM_OK && rt->rank == 0) mm_error("another rank failed to start (see above)");
        return agreed;
    }
    local = start_nccl(rt);
    MM_TRY(mpi_agree(local, &agreed));
    if (agreed != MM_OK) return agreed;
    local = start_symmetric(rt, timeout_ms, sym_bytes);
    MM_TRY(mpi_agree(local, &agreed));
    if (agreed != MM_OK) return agreed;

    char line[160];
    mm_fmt(line, sizeof line, "rank %d: host %s, device %d (%s), bus %s", rt->rank, rt->host,
           rt->device, rt->gpu_name, rt->bus_id);
    MPI_TRY(MPI_Gather(line, sizeof line, MPI_CHAR, rt->rank_lines, sizeof line, MPI_CHAR, 0,
                       MPI_COMM_WORLD));
    return MM_OK;
}

void runtime_destroy(mm_runtime *rt)
{
    /* Teardown tolerates a half-built runtime: each piece is released only if it was made. */
    if (rt->stream) cudaStreamSynchronize(rt->stream);
    if (rt->window_up) ncclCommWindowDeregister(rt->nccl_comm, rt->window);
    if (rt->sym) ncclMemFree(rt->sym);
    if (rt->comm.epoch) cudaFree(rt->comm.epoch);
    if (rt->error_host) cudaFreeHost(rt->error_host);
    if (rt->flush) cudaFree(rt->flush);
    if (rt->nccl_up) ncclCommDestroy(rt->nccl_comm);
    if (rt->stream) cudaStreamDestroy(rt->stream);
    if (rt->node_comm) MPI_Comm_free(&rt->node_comm);
    memset(rt, 0, sizeof *rt);
}

mm_status runtime_sync(mm_runtime *rt, const char *label, char *what, size_t len)
{
    const cudaError_t e = cudaStreamSynchronize(rt->stream);
    if (e == cudaSuccess) return MM_OK;
    mm_fmt(what, len, "rank %d: CUDA %s (%s) in %s", rt->rank, cudaGetErrorName(e), cudaGetErrorString(e), label);
    mm_error("%s", what);
    return MM_RUNTIME;
}

mm_status runtime_wait_status(mm_runtime *rt, char *what, size_t len)
{
    return wait_error_describe(rt->error_host, what, len);
}

mm_status wait_error_describe(const volatile mm_wait_error *e, char *what, size_t len)
{
    if (what && len) what[0] = '\0';
    if (e->code == 0) return MM_OK;
    if (e->phase == MM_PHASE_FUSED_PIPELINE || e->phase == MM_PHASE_GEMM_PIPELINE)
        mm_fmt(what, len, "rank %d timed out in %s: CTA %llu's %s wait expired (a kernel bug, or a stalled GPU)",
               e->rank, phase_name(e->phase), (unsigned long long)e->seen, pipe_wait_name(e->expected));
    else if (e->peer >= 0)
        mm_fmt(what, len, "rank %d timed out in %s waiting for rank %d: expected %llu, saw %llu",
               e->rank, phase_name(e->phase), e->peer, (unsigned long long)e->expected,
               (unsigned long long)e->seen);
    else
        mm_fmt(what, len, "rank %d timed out in %s: expected %llu, saw %llu", e->rank,
               phase_name(e->phase), (unsigned long long)e->expected, (unsigned long long)e->seen);
    return MM_TIMEOUT;
}

mm_status runtime_failure_note(mm_runtime *rt, const char *local_what, char *note, size_t len)
{
    char mine[256] = "", all[MM_MAX_PEERS][256];
    if (local_what) mm_fmt(mine, sizeof mine, "%s", local_what);
    MPI_TRY(MPI_Gather(mine, sizeof mine, MPI_CHAR, all, sizeof mine, MPI_CHAR, 0, MPI_COMM_WORLD));
    if (note && len) note[0] = '\0';
    if (rt->rank != 0) return MM_OK;
    for (int r = 0; r < rt->world; r++) {
        if (!all[r][0]) continue;
        size_t used = strlen(note);
        mm_fmt(note + used, len - used, "%s%s", used ? "; " : "", all[r]);
    }
    return MM_OK;
}

mm_status runtime_reset_comm(mm_runtime *rt)
{
    /* The stream drains first: every bounded wait has returned, so no store is in flight. */
    cudaError_t sync = cudaStreamSynchronize(rt->stream);
    MPI_TRY(MPI_Barrier(MPI_COMM_WORLD));
    CUDA_TRY(sync);
    /* the whole buffer: modes keep epoch-tagged slots and counters there too */
    CUDA_TRY(cudaMemset(rt->sym, 0, rt->sym_bytes));
    CUDA_TRY(cudaMemset(rt->comm.epoch, 0, 64));
    CUDA_TRY(cudaDeviceSynchronize());
    memset(rt->error_host, 0, sizeof *rt->error_host);
    MPI_TRY(MPI_Barrier(MPI_COMM_WORLD));
    return MM_OK;
}

mm_status runtime_check_fit(mm_runtime *rt, const char *what, size_t bytes)
{
    size_t free_b = 0, total_b = 0;
    CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
    /* Keep 1 GiB for the CUDA context, cuBLASLt workspaces and NCCL's own buffers. */
    size_t reserve = (size_t)1 << 30;
    if (bytes + reserve > free_b) {
        mm_error("%s needs %.2f GiB on GPU %d of %s but only %.2f GiB are free (lower "
                 "--max-tokens-per-rank, run fewer --modes, or use more ranks)",
                 what, bytes / 1073741824.0, rt->device, rt->host, free_b / 1073741824.0);
        return MM_USAGE;
    }
    return MM_OK;
}

mm_status runtime_device_barrier(mm_runtime *rt)
{
    CUDA_TRY(mm_launch_barrier(rt->comm, rt->stream));
    return MM_OK;
}

mm_status runtime_flush_l2(mm_runtime *rt, int mode, int iteration)
{
    CUDA_TRY(mm_launch_l2_flush(rt->flush, rt->flush_bytes, mode == MM_L2_FLUSH_CLEAN, iteration, rt->stream));
    return MM_OK;
}

mm_status runtime_slice_select(mm_runtime *rt, int32_t *ids, float *w, int tokens, int topk, int local, int *kept)
{
    const size_t n = (size_t)tokens * topk;
    int32_t *h_ids = malloc(n * sizeof *h_ids + 4);
    float *h_w = malloc(n * sizeof *h_w + 4);
    cudaError_t e = h_ids && h_w ? cudaSuccess : cudaErrorMemoryAllocation;
    *kept = 0;
    /* in the stream's order (it does not wait for the legacy stream), then waited for */
    if (e == cudaSuccess) e = cudaMemcpyAsync(h_ids, ids, n * sizeof *h_ids, cudaMemcpyDeviceToHost, rt->stream);
    if (e == cudaSuccess) e = cudaMemcpyAsync(h_w, w, n * sizeof *h_w, cudaMemcpyDeviceToHost, rt->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(rt->stream);
    if (e == cudaSuccess) *kept = ep_slice_select(h_ids, h_w, tokens, topk, local);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(ids, h_ids, (size_t)*kept * topk * sizeof *h_ids, cudaMemcpyHostToDevice, rt->stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(w, h_w, (size_t)*kept * topk * sizeof *h_w, cudaMemcpyHostToDevice, rt->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(rt->stream);
    free(h_ids);
    free(h_w);
    if (e != cudaSuccess) {
        mm_error("CUDA %s (%s) selecting an EP slice's tokens", cudaGetErrorName(e), cudaGetErrorString(e));
        return MM_RUNTIME;
    }
    return MM_OK;
}

void runtime_fill_meta(const mm_runtime *rt, mm_meta *m)
{
    mm_fmt(m->gpu, sizeof m->gpu, "%s", rt->gpu_name);
    mm_fmt(m->driver, sizeof m->driver, "%s", rt->driver);
    mm_fmt(m->cuda, sizeof m->cuda, "%s", rt->cuda);
    mm_fmt(m->nccl, sizeof m->nccl, "%s", rt->nccl);
    m->ep = rt->world;
    mm_fmt(m->host, sizeof m->host, "%s", rt->host);
    m->n_rank_lines = rt->world < MM_MAX_RANKS ? rt->world : MM_MAX_RANKS;
    for (int i = 0; i < m->n_rank_lines; i++)
        mm_fmt(m->rank_lines[i], sizeof m->rank_lines[i], "%s", rt->rank_lines[i]);
}

mm_status runtime_compare(mm_runtime *rt, const uint16_t *out, const double *ref, long long n,
                          mm_device_diff *scratch, mm_diff_acc *acc)
{
    memset(acc, 0, sizeof *acc);
    if (n <= 0) return MM_OK;
    mm_device_diff d;
    /* the stream is non-blocking: a plain cudaMemcpy would not wait for the compare */
    CUDA_TRY(mm_launch_compare(out, ref, n, scratch, rt->stream));
    CUDA_TRY(cudaMemcpyAsync(&d, scratch, sizeof d, cudaMemcpyDeviceToHost, rt->stream));
    CUDA_TRY(cudaStreamSynchronize(rt->stream));
    acc->sum_ab = d.sum_ab;
    acc->sum_aa_bb = d.sum_aa_bb;
    acc->max_abs = d.max_abs;
    acc->ref_max_abs = d.ref_max_abs;
    acc->nonfinite = (long long)d.nonfinite;
    acc->count = n;
    return MM_OK;
}
