/* MPI life cycle. Kept apart from the GPU runtime so `plan` can run under mpirun on machines
 * without GPUs. */
#ifndef MEGAMOE_LAUNCH_H
#define MEGAMOE_LAUNCH_H

#include "common.h"

/* True when started by mpirun/srun (a launcher's rank variable is set). */
int launched_by_mpi(void);
/* MPI_Init (idempotent) and the world's rank and size; sets the log's rank prefix. */
mm_status mpi_start(int *rank, int *world);
void mpi_finish(void);
/* Every rank learns the worst of all ranks' statuses (mm_worse order) before going on, so one
 * rank's failure never leaves the others waiting in a collective. */
mm_status mpi_agree(mm_status local, mm_status *global);
/* Whether every rank can do something (`ok`: this rank's answer): *all_ok 1 only when all can.
 * A failed `local` status on any rank is returned to every rank instead. */
mm_status mpi_agree_all(mm_status local, int ok, int *all_ok);

/* Every rank's comparison sums added (maxima maxed) into one, on every rank. */
#include "reference.h"
mm_status diff_acc_allreduce(mm_diff_acc *acc);

/* Last line of defence against a hang on the host side (device waits are bounded on their own):
 * if the armed step is not disarmed within `seconds`, the process prints one line naming the
 * step and exits with MM_TIMEOUT (mpirun then ends the other ranks). */
#define MM_WATCHDOG_SECONDS 600 /* far above any step's expected time; a hang, not a slow step */
void watchdog_arm(unsigned seconds, const char *step);
void watchdog_disarm(void);

#define MPI_TRY(call)                                                                      \
    do {                                                                                   \
        int mpi_rc_ = (call);                                                              \
        if (mpi_rc_ != MPI_SUCCESS) {                                                      \
            mm_error("MPI call failed (%d): %s at %s:%d", mpi_rc_, #call, __FILE__, __LINE__); \
            return MM_RUNTIME;                                                             \
        }                                                                                  \
    } while (0)

#endif
