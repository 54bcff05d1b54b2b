#include "version.h"

#include <cjson/cJSON.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <string.h>

#ifndef MM_GIT_REV
#define MM_GIT_REV "unknown"
#endif

/* CUDA's codes: 13000 -> 13.0; NCCL's: 22803 -> 2.28.3. */
static void cuda_text(int code, char *buf, size_t len)
{
    if (code <= 0) snprintf(buf, len, "none");
    else snprintf(buf, len, "%d.%d", code / 1000, (code % 1000) / 10);
}

void print_version(FILE *f)
{
    int runtime = 0, driver = 0, nccl = 0;
    cudaRuntimeGetVersion(&runtime); /* both work without a GPU; the driver's is 0 without one */
    cudaDriverGetVersion(&driver);
    ncclGetVersion(&nccl);
    char built_cuda[16], loaded_cuda[16], driver_cuda[16];
    cuda_text(CUDART_VERSION, built_cuda, sizeof built_cuda);
    cuda_text(runtime, loaded_cuda, sizeof loaded_cuda);
    cuda_text(driver, driver_cuda, sizeof driver_cuda);
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int mpi_len = 0;
    if (MPI_Get_library_version(mpi, &mpi_len) != MPI_SUCCESS) snprintf(mpi, sizeof mpi, "unknown");
    mpi[strcspn(mpi, ",\n")] = '\0'; /* "Open MPI v4.1.4, package: ..." -> its name and version */
    fprintf(f, "megamoe %s\n", MM_GIT_REV);
    fprintf(f, "CUDA   built %s, runtime %s, driver supports %s\n", built_cuda, loaded_cuda, driver_cuda);
    fprintf(f, "NCCL   built %d.%d.%d, loaded %d.%d.%d\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, nccl / 10000,
            (nccl / 100) % 100, nccl % 100);
    fprintf(f, "MPI    %s (MPI %d.%d)\n", mpi, MPI_VERSION, MPI_SUBVERSION);
    fprintf(f, "cJSON  %s\n", cJSON_Version());
}
