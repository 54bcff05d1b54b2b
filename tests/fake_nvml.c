/* A stand-in for the few NVML functions src/power.c loads, so that --energy-ms's failure paths
 * can be tested where no GPU is (tests/test_power.c) and where NVML would never fail (gpu-check:
 * MEGAMOE_NVML_LIBRARY points the tool here).
 *
 * The energy counter steps every 100 ms, as an H200's does, at FAKE_NVML_WATTS (700 W where
 * unset); the power cap holds the clocks half the time. With FAKE_NVML_FAIL_AFTER_MS set, every
 * energy read from that many ms after nvmlInit on fails with NVML_ERROR_GPU_IS_LOST: a GPU that
 * fell off the bus in the middle of a loop. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdlib.h>
#include <time.h>

enum { FAKE_SUCCESS = 0, FAKE_ERROR_GPU_IS_LOST = 15 };

typedef struct {
    unsigned long long reference_time_us;
    unsigned long long violation_time_ns;
} fake_violation_time;

static double started_s;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double env_number(const char *name, double fallback)
{
    const char *v = getenv(name);
    return v && v[0] ? atof(v) : fallback;
}

int nvmlInit_v2(void)
{
    started_s = now_s();
    return FAKE_SUCCESS;
}

int nvmlShutdown(void)
{
    return FAKE_SUCCESS;
}

const char *nvmlErrorString(int r)
{
    return r == FAKE_ERROR_GPU_IS_LOST ? "GPU is lost (fake NVML)" : "Unknown Error (fake NVML)";
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, void **device)
{
    (void)bus_id;
    *device = &started_s;
    return FAKE_SUCCESS;
}

int nvmlDeviceGetTotalEnergyConsumption(void *device, unsigned long long *energy_mj)
{
    (void)device;
    const double elapsed_s = now_s() - started_s, fail_ms = env_number("FAKE_NVML_FAIL_AFTER_MS", -1);
    if (fail_ms >= 0 && elapsed_s * 1e3 >= fail_ms) return FAKE_ERROR_GPU_IS_LOST;
    const long long steps = (long long)(elapsed_s * 10.0);
    *energy_mj = 1000000ull + (unsigned long long)((double)steps * 0.1 * env_number("FAKE_NVML_WATTS", 700) * 1e3);
    return FAKE_SUCCESS;
}

int nvmlDeviceGetViolationStatus(void *device, int policy, fake_violation_time *v)
{
    (void)device;
    (void)policy;
    v->reference_time_us = 0;
    v->violation_time_ns = (unsigned long long)((now_s() - started_s) * 0.5e9);
    return FAKE_SUCCESS;
}
