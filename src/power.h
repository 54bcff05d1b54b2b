/* The GPU's energy counter and power-cap time, read through NVML, for `gemm --energy-ms`.
 *
 * A long GEMM on an H200 runs at the board's power cap: the SM clock, and so the time, is what the
 * cap leaves. Time alone then cannot rank two kernels that do
 * the same work; joules a call can. NVML comes with the driver, not the toolkit, so it is loaded
 * at run time (dlopen): the tool builds and runs where it is missing, and says so.
 *
 * NVML's counters move in steps (the energy counter every ~100 ms on an H200), so a window must be long: the
 * caller runs its kernel back to back for hundreds of ms between two samples. */
#ifndef MEGAMOE_POWER_H
#define MEGAMOE_POWER_H

#include "common.h"

#define MM_NVML_LIBRARY "libnvidia-ml.so.1"
/* The environment variable that names another NVML library to load (a path, or a name the
 * loader finds): NVML installed at an odd place, or tests' stand-in (tests/fake_nvml.c). */
#define MM_NVML_LIBRARY_ENV "MEGAMOE_NVML_LIBRARY"

typedef struct mm_power mm_power;

/* One reading of the device's counters and the host's monotonic clock. */
typedef struct {
    unsigned long long energy_mj;     /* total energy since the driver loaded, mJ */
    unsigned long long power_capped_ns; /* total time held below its clocks by the power cap, ns */
    int have_capped;                  /* 0: this GPU's NVML does not report that time */
    double wall_s;                    /* CLOCK_MONOTONIC */
} mm_power_sample;

/* What two samples taken at two steps of the energy counter say about a kernel that ran back to back
 * through them and beyond: calls in loop_s seconds of the whole loop. */
typedef struct {
    int valid;           /* 0: the counter did not move forward, or no call or no time passed */
    double window_s;     /* wall time between the two samples */
    double watts;        /* the energy between them over window_s */
    double capped_frac;  /* the power cap's share of the window, 0..1 (-1: not reported) */
    int calls;
    double loop_s;
    double joules_per_call; /* watts x loop_s / calls */
    double sm_mhz;       /* the kernel's own clock over the loop (0: not measured); set by the caller */
    int steps;           /* the counter's steps after a's up to b's, b's included; set by the caller */
    int nvml_failed;     /* NVML failed during the loop (valid 0); set by the caller */
} mm_power_window;

/* Opens NVML from `library` (MM_NVML_LIBRARY) for the GPU at `pci_bus_id` (as
 * cudaDeviceGetPCIBusId writes it). MM_OK, or MM_RUNTIME with the reason in `why` (no library,
 * no such device, no energy counter); nothing is printed. */
mm_status mm_power_open(const char *library, const char *pci_bus_id, mm_power **out, char *why, size_t why_len);
/* The library --energy-ms opens: $MEGAMOE_NVML_LIBRARY where set and not empty, else MM_NVML_LIBRARY. */
const char *mm_power_library(void);
/* s->wall_s is set even where the read fails (MM_RUNTIME, the reason in `why`). */
mm_status mm_power_read(mm_power *p, mm_power_sample *s, char *why, size_t why_len);
void mm_power_close(mm_power *p);

/* "0.1234 J/call 702 W capped 98%", or why there is no reading. Pure. */
void mm_power_format(const mm_power_window *w, char *buf, size_t len);

/* The window from a to b, for `calls` calls in `loop_s` seconds. Pure: tested on the CPU. */
mm_power_window mm_power_between(const mm_power_sample *a, const mm_power_sample *b, int calls, double loop_s);

#endif
