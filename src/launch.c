#include "launch.h"

#include <mpi.h>
#include <stdlib.h>

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
