#define _POSIX_C_SOURCE 200809L
#include "launch.h"

#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < MM_ARRAY_LEN(vars); i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

mm_status mpi_start(int *rank, int *world)
{
    int inited = 0;
    MPI_TRY(MPI_Initialized(&inited));
    if (!inited) MPI_TRY(MPI_Init(NULL, NULL));
    /* Errors come back as codes so ranks can agree on them instead of aborting mid-way. */
    MPI_TRY(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_TRY(MPI_Comm_rank(MPI_COMM_WORLD, rank));
    MPI_TRY(MPI_Comm_size(MPI_COMM_WORLD, world));
    log_set_rank(*rank, *world);
    return MM_OK;
}

void mpi_finish(void)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Finalize();
}

mm_status mpi_agree(mm_status local, mm_status *global)
{
    int in = (int)local, out = 0;
    MPI_TRY(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    *global = (mm_status)out;
    return MM_OK;
}

mm_status mpi_agree_all(mm_status local, int ok, int *all_ok)
{
    int in[2] = {(int)local, ok ? 0 : 1}, out[2] = {0, 0}; /* the worst status, any "cannot" */
    MPI_TRY(MPI_Allreduce(in, out, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (out[0] != MM_OK) return (mm_status)out[0];
    *all_ok = !out[1];
    return MM_OK;
}

mm_status diff_acc_allreduce(mm_diff_acc *acc)
{
    double sums[2] = {acc->sum_ab, acc->sum_aa_bb}, maxes[2] = {acc->max_abs, acc->ref_max_abs};
    long long counts[2] = {acc->nonfinite, acc->count};
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, maxes, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
    acc->sum_ab = sums[0];
    acc->sum_aa_bb = sums[1];
    acc->max_abs = maxes[0];
    acc->ref_max_abs = maxes[1];
    acc->nonfinite = counts[0];
    acc->count = counts[1];
    return MM_OK;
}

static char watchdog_line[256];

static void watchdog_fire(int sig)
{
    (void)sig;
    /* async-signal-safe: write(2) and _exit(2) only */
    ssize_t n = write(STDERR_FILENO, watchdog_line, strlen(watchdog_line));
    (void)n;
    _exit(MM_TIMEOUT);
}

void watchdog_arm(unsigned seconds, const char *step)
{
    mm_fmt(watchdog_line, sizeof watchdog_line,
           "megamoe: error: %s did not finish within %u s (host-side watchdog); exiting\n", step,
           seconds);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = watchdog_fire;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(seconds);
}

void watchdog_disarm(void)
{
    alarm(0);
}
