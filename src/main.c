/* megamoe: benchmark and correctness CLI for the MoE layer of DeepSeek-class models under expert
 * parallelism. Data flows one way: config -> plan -> buffers -> run(mode) -> check -> report.
 * main() validates every flag and the config before any MPI or GPU work, then hands over. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "common.h"
#include "config.h"
#include "gate.h"
#include "launch.h"
#include "modes.h"
#include "plan.h"
#include "version.h"

/* The default config is found from the working directory, else next to the binary
 * (build/megamoe -> ../configs), so `make run` works from anywhere. */
static void resolve_default_config(mm_options *o)
{
    if (o->config_given || access(o->config_path, R_OK) == 0) return;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    *slash = '\0';
    char candidate[PATH_MAX + 64];
    mm_fmt(candidate, sizeof candidate, "%s/../%s", exe, MM_DEFAULT_CONFIG);
    if (access(candidate, R_OK) == 0 && strlen(candidate) < sizeof o->config_path)
        mm_fmt(o->config_path, sizeof o->config_path, "%s", candidate);
}

/* Batches: the flag, else the config's "bench" list, else 1, 2, 4, ..., 8192. */
static void resolve_batches(mm_options *o, const mm_config *cfg)
{
    if (o->n_batches > 0) return;
    if (cfg->n_batches > 0) {
        memcpy(o->batches, cfg->batches, sizeof(int) * (size_t)cfg->n_batches);
        o->n_batches = cfg->n_batches;
        return;
    }
    for (int b = 1; b <= 8192; b *= 2) o->batches[o->n_batches++] = b;
}

static int largest(const int *v, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

/* plan --ceilings FILE: the ceilings bench measured (meta.ceilings) in place of the constants,
 * but for those given on the command line. */
static mm_status plan_file_ceilings(mm_options *o, char *err, size_t len)
{
    mm_ceilings file;
    MM_TRY(report_read_ceilings(o->ceilings_path, &file, err, len));
    for (int k = 0; k < CEIL_COUNT; k++)
        if (!((o->ceilings_given >> k) & 1u))
            *ceiling_value(&o->ceilings, (mm_ceiling_kind)k) = ceiling_get(&file, (mm_ceiling_kind)k);
    return MM_OK;
}

static mm_status cmd_plan(mm_options *o, const mm_config *cfg)
{
    int world = 1, rank = 0;
    if (launched_by_mpi()) MM_TRY(mpi_start(&rank, &world));
    int ranks = o->ep_slice ? o->ep_slice : o->ranks ? o->ranks : world;
    char err[512];
    mm_status s = config_check_ranks(cfg, ranks, err, sizeof err);
    if (o->ep_slice && (o->ranks || world > 1)) {
        if (rank == 0)
            mm_error("plan: --ep-slice %d plans one rank of EP %d on one GPU: drop %s", o->ep_slice, o->ep_slice,
                     o->ranks ? "--ranks" : "mpirun");
        s = MM_USAGE;
    } else if (s != MM_OK) {
        if (rank == 0) mm_error("config %s", err);
    } else if (o->ceilings_path[0] && (s = plan_file_ceilings(o, err, sizeof err)) != MM_OK) {
        if (rank == 0) mm_error("plan: --ceilings %s", err);
    } else if (rank == 0) {
        int max_tokens = largest(o->batches, o->n_batches);
        if (o->max_tokens_per_rank && o->max_tokens_per_rank < max_tokens)
            max_tokens = o->max_tokens_per_rank;
        unsigned built = 0;
        for (int m = 0; m < MODE_COUNT; m++)
            if (!mode_ops((mm_mode)m)->missing) built |= 1u << m;
        s = plan_print(stdout, cfg, ranks, o->batches, o->n_batches, max_tokens, o->ll_max, &o->ceilings, built,
                       &o->routing, o->seed, o->ep_slice);
    }
    if (launched_by_mpi()) mpi_finish();
    return s;
}

int main(int argc, char **argv)
{
    /* Under mpirun every rank parses the same flags: only rank 0 reports usage errors. */
    log_quiet_unless_rank0();
    mm_options o;
    char err[1024];
    if (cli_parse(argc, argv, &o, err, sizeof err) != MM_OK) {
        mm_error("%s", err);
        return MM_USAGE;
    }
    if (o.help) {
        cli_usage(stdout, (int)o.cmd);
        return MM_OK;
    }
    if (o.version) {
        print_version(stdout);
        return MM_OK;
    }
    if (o.cmd == CMD_GATE) {
        mm_gate_opts g = {o.max_slowdown, o.min_gap, o.ignore_device, o.relative_to};
        return (int)gate_files(o.baseline_path, o.current_path, &g, stdout,
                               o.markdown_path[0] ? o.markdown_path : NULL);
    }
    resolve_default_config(&o);
    mm_config cfg;
    if (config_load(o.config_path, &cfg) != MM_OK) return MM_USAGE;
    if (!o.routing_given && cfg.routing[0]) {
        char sub[256];
        /* already validated when the config was parsed */
        if (parse_routing(cfg.routing, &o.routing, sub, sizeof sub) != MM_OK) return MM_USAGE;
    }
    if (o.weights >= 0) cfg.weights = (mm_weights_fmt)o.weights;
    resolve_batches(&o, &cfg);
    if (o.max_tokens_per_rank == 0 && cfg.max_tokens_per_rank > 0)
        o.max_tokens_per_rank = cfg.max_tokens_per_rank;

    mm_status s;
    switch (o.cmd) {
    case CMD_PLAN: s = cmd_plan(&o, &cfg); break;
    case CMD_BENCH: s = bench_main(&o, &cfg, argc, argv); break;
    case CMD_CHECK: s = check_main(&o, &cfg, argc, argv); break;
    case CMD_SELFTEST: s = selftest_main(&o, &cfg, argc, argv); break;
    case CMD_GEMM: s = gemm_main(&o, &cfg, argc, argv); break;
    default: s = MM_USAGE; break;
    }
    return (int)s;
}
