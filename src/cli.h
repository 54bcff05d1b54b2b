/* Command line: subcommands and their flags, parsed and validated before any GPU or MPI work. */
#ifndef MEGAMOE_CLI_H
#define MEGAMOE_CLI_H

#include <stdio.h>

#include "config.h"
#include "plan.h"
#include "sweep.h"

typedef enum { CMD_BENCH, CMD_CHECK, CMD_PLAN, CMD_GATE, CMD_GEMM, CMD_SELFTEST, CMD_COUNT } mm_command;

#define MM_DEFAULT_CONFIG "configs/deepseek-v4-flash.json"
#define MM_DEFAULT_WARMUP 5
#define MM_DEFAULT_ITERS 30
#define MM_DEFAULT_TIMEOUT_MS 5000
#define MM_DEFAULT_LL_MAX 1024
#define MM_DEFAULT_TOL 1e-4

/* gemm --spread: how a total row count is spread over the local experts */
typedef enum {
    MM_SPREAD_UNIFORM, /* even */
    MM_SPREAD_SKEWED,  /* expert e a share ~1 / (e + 1) */
    MM_SPREAD_ROUTING, /* rank 0's local experts under bench's routing (plan_rank_rows) */
} mm_gemm_spread;

typedef struct {
    mm_command cmd;
    int help; /* --help given: print usage, exit 0 */
    int version; /* --version given: print the build's versions, exit 0 */
    char config_path[512];
    int config_given;
    int batches[MM_MAX_BATCHES];
    int n_batches; /* 0 = not given */
    unsigned modes;
    int warmup, iters;
    mm_routing routing;
    int routing_given;
    unsigned long long seed;
    char json_path[512];
    char markdown_path[512];
    int graph, l2_flush, check, breakdown;
    int idle_ms; /* bench: the GPU idles this long before each timed call (0: back to back) */
    int interleave; /* bench: a batch's modes timed side by side */
    int sweeps; /* bench: complete sweeps in one process */
    int max_tokens_per_rank; /* 0 = not given */
    int ll_max;
    int comm_sms; /* 0 = default */
    int timeout_ms;
    int ranks; /* plan: 0 = from MPI or 1 */
    int ep_slice; /* bench, plan: emulate one rank of EP N on one GPU (0: off) */
    int weights;  /* --weights: -1 the config's, else an mm_weights_fmt */
    mm_ceilings ceilings;
    unsigned ceilings_given; /* bit mm_ceiling_kind: given on the command line (bench measures the others) */
    char ceilings_path[512]; /* plan --ceilings: a bench results file whose meta.ceilings to use */
    char filter[128];
    double tol;
    /* gate */
    char baseline_path[512];
    char current_path[512];
    double max_slowdown; /* fraction */
    double min_gap;      /* fraction */
    int ignore_device;
    int relative_to; /* -1, or the mm_mode the others are judged against */
    /* gemm */
    int ep;
    int rows[MM_MAX_BATCHES];
    int n_rows;
    int spread; /* mm_gemm_spread */
    int tile;   /* --tile: 0 auto, or 128 / 192 rows */
    int wide_scales; /* --wide-scales: MM_WIDE_SCALES_AUTO / GROUP / BLOCK (gemm_schedule.h) */
    int energy_ms; /* --energy-ms: each kernel's back-to-back window for its joules (0: not measured) */
} mm_options;

/* argv[1] is the subcommand. Errors: one line into err, MM_USAGE. */
mm_status cli_parse(int argc, char **argv, mm_options *o, char *err, size_t errlen);
void cli_usage(FILE *f, int cmd); /* cmd = CMD_COUNT: the top-level usage */
const char *command_name(mm_command c);

#endif
