/* `megamoe --version`: what a bug report needs to name the build. */
#ifndef MEGAMOE_VERSION_H
#define MEGAMOE_VERSION_H

#include <stdio.h>

/* The revision, and CUDA, NCCL and MPI as built against and as loaded (no GPU needed). */
void print_version(FILE *f);

#endif
