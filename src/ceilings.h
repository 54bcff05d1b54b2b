/* The ceilings bench's floors divide by, measured on the GPUs that run (see ceilings.c). */
#ifndef MEGAMOE_CEILINGS_H
#define MEGAMOE_CEILINGS_H

#include "plan.h"
#include "runtime.h"

typedef struct {
    const void *weights;   /* this rank's local experts' FP8 weights: the stream the floors count */
    uint64_t weight_bytes;
    uint64_t sym_offset;   /* a region of the symmetric buffer the NVLink write may overwrite */
    uint64_t sym_bytes;
} mm_ceiling_inputs;

/* Measures each ceiling not given (bit k of `given`), collectively (every rank calls it; the
 * slowest rank's value, since the slowest rank bounds a layer). A ceiling that cannot be measured
 * here keeps its value in `set` with the reason. The NVLink region is left zeroed, as runtime_init
 * leaves it. MM_RUNTIME on a CUDA or MPI error. */
mm_status ceilings_measure(mm_runtime *rt, const mm_ceiling_inputs *in, unsigned given, mm_ceiling_set *set);

#endif
