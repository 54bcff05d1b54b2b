/* NVML's energy counter and power-cap time, loaded at run time (power.h says why). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "power.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

/* The few NVML declarations used here, as nvml.h declares them (its ABI is stable across
 * drivers); the toolkit on our build machines does not ship nvml.h. */
typedef int nvml_return;
typedef struct nvml_device_opaque *nvml_device;
typedef struct {
    unsigned long long reference_time_us;
    unsigned long long violation_time_ns;
} nvml_violation_time;
enum { NVML_SUCCESS_ = 0, NVML_PERF_POLICY_POWER_ = 0 };

struct mm_power {
    void *lib;
    nvml_device dev;
    nvml_return (*shutdown)(void);
    const char *(*error_string)(nvml_return);
    nvml_return (*energy)(nvml_device, unsigned long long *);
    nvml_return (*violation)(nvml_device, int, nvml_violation_time *);
    int have_capped;
};

static const char *nvml_error(const mm_power *p, nvml_return r)
{
    const char *s = p->error_string ? p->error_string(r) : NULL;
    return s ? s : "unknown NVML error";
}

mm_status mm_power_open(const char *library, const char *pci_bus_id, mm_power **out, char *why, size_t why_len)
{
    *out = NULL;
    mm_power *p = calloc(1, sizeof *p);
    if (!p) {
        mm_fmt(why, why_len, "out of memory");
        return MM_RUNTIME;
    }
    p->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!p->lib) {
        const char *e = dlerror();
        mm_fmt(why, why_len, "cannot load %s (%s)", library, e ? e : "no reason given");
        free(p);
        return MM_RUNTIME;
    }
    nvml_return (*init)(void) = (nvml_return(*)(void))dlsym(p->lib, "nvmlInit_v2");
    nvml_return (*by_bus)(const char *, nvml_device *) =
        (nvml_return(*)(const char *, nvml_device *))dlsym(p->lib, "nvmlDeviceGetHandleByPciBusId_v2");
    p->shutdown = (nvml_return(*)(void))dlsym(p->lib, "nvmlShutdown");
    p->error_string = (const char *(*)(nvml_return))dlsym(p->lib, "nvmlErrorString");
    p->energy = (nvml_return(*)(nvml_device, unsigned long long *))dlsym(p->lib, "nvmlDeviceGetTotalEnergyConsumption");
    p->violation =
        (nvml_return(*)(nvml_device, int, nvml_violation_time *))dlsym(p->lib, "nvmlDeviceGetViolationStatus");
    if (!init || !by_bus || !p->shutdown || !p->energy) {
        mm_fmt(why, why_len, "%s lacks the NVML functions used here", library);
        dlclose(p->lib);
        free(p);
        return MM_RUNTIME;
    }
    nvml_return r = init();
    if (r != NVML_SUCCESS_) {
        mm_fmt(why, why_len, "nvmlInit: %s", nvml_error(p, r));
        dlclose(p->lib);
        free(p);
        return MM_RUNTIME;
    }
    unsigned long long probe = 0;
    if ((r = by_bus(pci_bus_id, &p->dev)) != NVML_SUCCESS_)
        mm_fmt(why, why_len, "no NVML device at PCI bus id %s: %s", pci_bus_id, nvml_error(p, r));
    else if ((r = p->energy(p->dev, &probe)) != NVML_SUCCESS_)
        mm_fmt(why, why_len, "the GPU's energy counter: %s", nvml_error(p, r));
    if (r != NVML_SUCCESS_) {
        mm_power_close(p);
        return MM_RUNTIME;
    }
    nvml_violation_time v;
    p->have_capped = p->violation && p->violation(p->dev, NVML_PERF_POLICY_POWER_, &v) == NVML_SUCCESS_;
    *out = p;
    return MM_OK;
}

const char *mm_power_library(void)
{
    const char *env = getenv(MM_NVML_LIBRARY_ENV);
    return env && env[0] ? env : MM_NVML_LIBRARY;
}

mm_status mm_power_read(mm_power *p, mm_power_sample *s, char *why, size_t why_len)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s->wall_s = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    nvml_return r = p->energy(p->dev, &s->energy_mj);
    if (r != NVML_SUCCESS_) {
        mm_fmt(why, why_len, "the GPU's energy counter: %s", nvml_error(p, r));
        return MM_RUNTIME;
    }
    nvml_violation_time v = {0, 0};
    s->have_capped = p->have_capped && p->violation(p->dev, NVML_PERF_POLICY_POWER_, &v) == NVML_SUCCESS_;
    s->power_capped_ns = s->have_capped ? v.violation_time_ns : 0;
    return MM_OK;
}

void mm_power_close(mm_power *p)
{
    if (!p) return;
    if (p->shutdown) p->shutdown();
    dlclose(p->lib);
    free(p);
}

mm_power_window mm_power_between(const mm_power_sample *a, const mm_power_sample *b, int calls, double loop_s)
{
    mm_power_window w = {0};
    w.calls = calls;
    w.loop_s = loop_s;
    w.window_s = b->wall_s - a->wall_s;
    w.capped_frac = -1;
    /* A counter that went backwards (a driver reload) or a window with nothing in it says nothing. */
    if (calls <= 0 || loop_s <= 0 || w.window_s <= 0 || b->energy_mj < a->energy_mj) return w;
    w.watts = (double)(b->energy_mj - a->energy_mj) * 1e-3 / w.window_s;
    w.joules_per_call = w.watts * loop_s / calls;
    if (a->have_capped && b->have_capped && b->power_capped_ns >= a->power_capped_ns) {
        const double f = (double)(b->power_capped_ns - a->power_capped_ns) * 1e-9 / w.window_s;
        w.capped_frac = f > 1.0 ? 1.0 : f; /* the driver's and the host's clocks differ a little */
    }
    w.valid = 1;
    return w;
}

void mm_power_format(const mm_power_window *w, char *buf, size_t len)
{
    char capped[32] = "capped ?";
    if (!w->valid && w->nvml_failed) {
        mm_fmt(buf, len, "no reading (NVML failed during the loop)");
        return;
    }
    if (!w->valid) {
        mm_fmt(buf, len, "no reading (the energy counter did not step twice in %.2f s)", w->window_s);
        return;
    }
    if (w->capped_frac >= 0) mm_fmt(capped, sizeof capped, "capped %.0f%%", 100.0 * w->capped_frac);
    mm_fmt(buf, len, "%.4f J/call %.0f W %s", w->joules_per_call, w->watts, capped);
}
