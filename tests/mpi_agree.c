/* Failure agreement under mpirun (no GPU): every rank proposes its own status and all must come
 * out with the worst one. Run as: mpirun -np 4 --oversubscribe build/mpi_agree */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "launch.h"

/* `mpi_agree watchdog`: arms a 1 s watchdog and sleeps; must exit 4 with one line. */
int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "watchdog") == 0) {
        watchdog_arm(1, "a step that hangs");
        sleep(5);
        return 0; /* not reached */
    }
    int rank, world, bad = 0;
    if (mpi_start(&rank, &world) != MM_OK) return 3;
    /* round 1: everyone OK; round 2: the last rank fails a check; round 3: rank 1 times out while
     * rank 0 reports a runtime error (TIMEOUT must win, mm_worse order) */
    mm_status rounds[3][2] = {{MM_OK, MM_OK}, {MM_OK, MM_FAIL}, {MM_RUNTIME, MM_TIMEOUT}};
    mm_status want[3] = {MM_OK, MM_FAIL, MM_TIMEOUT};
    for (int r = 0; r < 3; r++) {
        mm_status mine = MM_OK, got = MM_OK;
        if (r == 1 && rank == world - 1) mine = rounds[r][1];
        if (r == 2 && rank == 0) mine = rounds[r][0];
        if (r == 2 && rank == 1 % world) mine = world > 1 ? rounds[r][1] : MM_TIMEOUT;
        if (mpi_agree(mine, &got) != MM_OK || got != want[r]) {
            fprintf(stderr, "rank %d round %d: got %d want %d\n", rank, r, got, want[r]);
            bad = 1;
        }
    }
    /* comparison sums: rank r adds r + 1 to each sum, max |diff| r, one non-finite on the last */
    mm_diff_acc acc = {rank + 1.0, 2.0 * (rank + 1), (double)rank, 10.0 * rank, rank == world - 1, 5};
    if (diff_acc_allreduce(&acc) != MM_OK || acc.sum_ab != world * (world + 1) / 2.0 ||
        acc.sum_aa_bb != world * (world + 1.0) || acc.max_abs != world - 1.0 ||
        acc.ref_max_abs != 10.0 * (world - 1) || acc.nonfinite != 1 || acc.count != 5LL * world) {
        fprintf(stderr, "rank %d: diff_acc_allreduce gave wrong sums\n", rank);
        bad = 1;
    }
    /* "can every rank?": all can; the last cannot (everyone learns it); a failure beats a "cannot" */
    int all_ok = -1;
    if (mpi_agree_all(MM_OK, 1, &all_ok) != MM_OK || all_ok != 1) bad = 1, fprintf(stderr, "rank %d: all can\n", rank);
    all_ok = -1;
    if (mpi_agree_all(MM_OK, rank != world - 1, &all_ok) != MM_OK || all_ok != 0)
        bad = 1, fprintf(stderr, "rank %d: the last rank cannot, got %d\n", rank, all_ok);
    all_ok = -1;
    if (mpi_agree_all(rank == 0 ? MM_RUNTIME : MM_OK, rank != world - 1, &all_ok) != MM_RUNTIME || all_ok != -1)
        bad = 1, fprintf(stderr, "rank %d: a failed rank's status must come back\n", rank);
    if (rank == 0) printf("test_mpi_agree: %d ranks, %s\n", world, bad ? "FAILED" : "passed");
    mpi_finish();
    return bad;
}
