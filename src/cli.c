#define _GNU_SOURCE /* getopt_long */
#include "cli.h"
#include "gate.h"
#include "report.h"
#include "../kernels/gemm_schedule.h"

#include <getopt.h>
#include <string.h>

static const char *const command_names[CMD_COUNT] = {"bench", "check", "plan", "gate", "gemm",
                                                          "selftest"};
static const char *const command_help[CMD_COUNT] = {
    "sweep batch sizes and time the modes (fused, normal, ll) against each other",
    "run the correctness scenarios of every mode against the references",
    "print buffers, work and floor times per batch (no GPU, no MPI needed)",
    "compare two results files and fail on a slowdown or a wrong result",
    "time the grouped FP8 GEMM core against cuBLASLt on one GPU",
    "test the GPU runtime: NVLink round trip, barrier, stalled peer, generators",
};

const char *command_name(mm_command c)
{
    return (unsigned)c < CMD_COUNT ? command_names[c] : "?";
}

enum {
    OPT_HELP = 'h',
    OPT_CONFIG = 1000, OPT_BATCHES, OPT_MODES, OPT_WARMUP, OPT_ITERS, OPT_ROUTING, OPT_SEED,
    OPT_JSON, OPT_MARKDOWN, OPT_GRAPH, OPT_L2FLUSH, OPT_IDLE, OPT_CHECK, OPT_BREAKDOWN, OPT_MAXTOK,
    OPT_LLMAX, OPT_COMMSMS, OPT_TIMEOUT, OPT_RANKS, OPT_HBM, OPT_NVLINK, OPT_FP8, OPT_FILTER,
    OPT_TOL, OPT_BASELINE, OPT_CURRENT, OPT_MAXSLOW, OPT_MINGAP, OPT_IGNOREDEV, OPT_RELATIVE, OPT_EP, OPT_ROWS,
    OPT_SPREAD, OPT_TILE, OPT_WIDE_SCALES, OPT_SWEEPS, OPT_INTERLEAVE, OPT_ENERGY, OPT_VERSION, OPT_EP_SLICE, OPT_WEIGHTS, OPT_CEILINGS,
};

#define B (1u << CMD_BENCH)
#define C (1u << CMD_CHECK)
#define P (1u << CMD_PLAN)
#define S (1u << CMD_SELFTEST)
#define G (1u << CMD_GATE)
#define M (1u << CMD_GEMM)

/* One table drives parsing, per-command validity and --help. */
static const struct {
    const char *name;
    int has_arg;
    int id;
    unsigned commands;
    const char *arg, *help;
} flags[] = {
    {"config", 1, OPT_CONFIG, B | C | P | S | M, "FILE", "model config JSON (default " MM_DEFAULT_CONFIG ")"},
    {"batches", 1, OPT_BATCHES, B | P, "LIST",
     "tokens per rank, each >= 1: 1,8,64 or 1:8192:x2 (geometric) or 16:64:+16 (arithmetic) (default: config's list, else 1:8192:x2)"},
    {"modes", 1, OPT_MODES, B | C, "LIST", "fused,normal,ll (default all)"},
    {"warmup", 1, OPT_WARMUP, B | M, "N", "untimed iterations before each timed row (default 5)"},
    {"iters", 1, OPT_ITERS, B | M, "N", "timed iterations of each row (default 30)"},
    {"routing", 1, OPT_ROUTING, B | P | M, "NAME[:P]",
     "uniform, balanced, zipf:S, hot, rank-skew:F, masked:F, deepseek (default: config's, else "
     "uniform)"},
    {"seed", 1, OPT_SEED, B | C | S | M | P, "N", "seed of all generated data (default 1)"},
    {"json", 1, OPT_JSON, B | C | M, "FILE",
     "write results as JSON (bench, gemm: " MM_RESULTS_SCHEMA ", which gate reads; check: megamoe.check/1)"},
    {"markdown", 1, OPT_MARKDOWN, B | C | G, "FILE", "write the tables as Markdown"},
    {"graph", 1, OPT_GRAPH, B, "on|off", "time CUDA-graph replays where a mode allows (default off)"},
    {"l2-flush", 1, OPT_L2FLUSH, B | M, "on|off|clean",
     "flush L2 before each timed iteration: on writes over 2.5x the L2 (as the peers' tests do; the "
     "dirty lines' write-back lands in the timed call), clean reads as much (default on)"},
    {"idle-ms", 1, OPT_IDLE, B, "MS",
     "the GPU idles MS ms (a one-thread sleep kernel) after each L2 flush, before the line-up and the timed "
     "call: the peer's own test sleeps ~10 ms before every call, so each starts below the power cap "
     "(default 0: calls back to back)"},
    {"interleave", 1, OPT_INTERLEAVE, B, "on|off",
     "time a batch's modes side by side, iteration by iteration, so they share the GPU's clock states (default on)"},
    {"check", 1, OPT_CHECK, B, "on|off", "check each (mode, batch) against the reference (default on)"},
    {"breakdown", 0, OPT_BREAKDOWN, B, NULL, "also time each stage of the modes that have stages"},
    {"sweeps", 1, OPT_SWEEPS, B, "N", "run the whole sweep N times in one process; reports hold the last (default 1)"},
    {"max-tokens-per-rank", 1, OPT_MAXTOK, B | P, "N",
     "size buffers for at most N tokens per rank (default: largest batch)"},
    {"ll-max", 1, OPT_LLMAX, B | C | P, "N", "ll mode's fixed max tokens per rank (default 1024)"},
    {"comm-sms", 1, OPT_COMMSMS, B | C, "N", "SMs for normal's communication kernels (4 CTAs of 128 threads each; default: all)"},
    {"timeout-ms", 1, OPT_TIMEOUT, B | C | S, "MS", "bound on every device-side wait (default 5000)"},
    {"ranks", 1, OPT_RANKS, P, "N", "EP size to plan for (default: MPI world size, else 1)"},
    {"weights", 1, OPT_WEIGHTS, B | C | P | M, "fp8|fp4",
     "the experts' weight format: FP8 with 128 x 128 block scales, or MXFP4 (docs/recipe.md; the GEMM core "
     "expands it to FP8: into wgmma's registers, and fused's larger tiles into shared memory); check --weights fp4 "
     "runs every scenario with FP4 experts (default: the config's quantization_config.quant_method, else fp8)"},
    {"ep-slice", 1, OPT_EP_SLICE, B | P, "N",
     "emulate one rank of EP N on this one GPU: it holds E / N experts and runs the rows rank 0 of EP N "
     "receives from N x batch tokens under --routing; dispatch and combine stay on the GPU (no NVLink traffic, "
     "no waits on other ranks); floors without NVLink (2..4096; without mpirun)"},
    {"hbm-gbps", 1, OPT_HBM, B | P, "X",
     "HBM read ceiling of the floors (plan's default 3900, an H200's; bench measures it unless given)"},
    {"nvlink-gbps", 1, OPT_NVLINK, B | P, "X",
     "NVLink one-direction ceiling (plan's default 370; bench measures it on 2+ GPUs unless given)"},
    {"fp8-tflops", 1, OPT_FP8, B | P, "X",
     "FP8 block-scaled GEMM ceiling (plan's default 1325; bench measures it with cuBLASLt unless given)"},
    {"ceilings", 1, OPT_CEILINGS, P, "FILE",
     "the ceilings a bench results file measured on its GPUs (meta.ceilings) instead of the constants; "
     "--hbm-gbps and the like still win"},
    {"filter", 1, OPT_FILTER, C, "STR", "run only scenarios whose name contains STR"},
    {"tol", 1, OPT_TOL, C | M, "X", "calc_diff pass bound, at most 1e-4 (default 1e-4)"},
    {"baseline", 1, OPT_BASELINE, G, "FILE", "results JSON to compare against (required)"},
    {"current", 1, OPT_CURRENT, G, "FILE", "results JSON of the run under test (required)"},
    {"max-slowdown", 1, OPT_MAXSLOW, G, "PCT", "fail on a SLOWER row slower by more, 0.1%..50% (default 5%)"},
    {"min-gap", 1, OPT_MINGAP, G, "PCT", "smaller differences are SAME, 0%..20% and at most --max-slowdown (default 1%)"},
    {"ignore-device", 0, OPT_IGNOREDEV, G, NULL, "compare across GPU models and EP sizes"},
    {"relative-to", 1, OPT_RELATIVE, G, "MODE",
     "judge the other modes by their time over MODE's at the same batch (machine drift cancels); "
     "cublaslt: gemm's rows over the cuBLASLt loop's beside them"},
    {"ep", 1, OPT_EP, M, "N", "EP size whose local experts the rows spread over (default 8)"},
    {"rows", 1, OPT_ROWS, M, "LIST", "total rows per GEMM (default 8,64,512,4096,49152)"},
    {"spread", 1, OPT_SPREAD, M, "uniform|skewed|routing",
     "rows per expert: even, ~1/(e+1), or as bench's --routing and --seed give rank 0's local experts for "
     "rows/top-k tokens per rank (the total is then the routing's) (default uniform)"},
    {"tile", 1, OPT_TILE, M, "auto|128|192",
     "tile height of our grouped GEMM: 128 x 128, the wide 192 x 128, or auto (192 where the experts average "
     ">= 384 rows and 192-row tiles pad them at most 2% more) (default auto)"},
    {"wide-scales", 1, OPT_WIDE_SCALES, M, "auto|group|block",
     "how the wide form copies the scales: 4 K blocks at a time into slots beside the ring, or each K "
     "block's into its stage (K / 128 not a multiple of 4: always block); auto: group where N <= 4096 and "
     "K >= 4096 (measured faster there), else block (default auto)"},
    {"energy-ms", 1, OPT_ENERGY, B | M, "MS",
     "once everything is timed, run each timed row's calls back to back (gemm: ours, then cuBLASLt's loop; "
     "bench: each mode, ranks lined up) for MS ms between two steps of the GPU's NVML energy counter and "
     "report joules a call, mean watts and the power cap's share (bench: summed over the ranks) (0 or "
     "200..600000: the counter steps every ~100 ms; default 0: off)"},
    {"help", 0, OPT_HELP, B | C | P | S | G | M, NULL, "this help"},
    {"version", 0, OPT_VERSION, B | C | P | S | G | M, NULL,
     "the revision this binary was built from, and its CUDA, NCCL and MPI versions"},
};

#undef B
#undef C
#undef P
#undef S
#undef G
#undef M

void cli_usage(FILE *f, int cmd)
{
    if (cmd < 0 || cmd >= CMD_COUNT) {
        fprintf(f, "usage: megamoe <command> [options]   (mpirun -np N megamoe ... for N GPUs)\n\n"
                   "commands:\n");
        for (int c = 0; c < CMD_COUNT; c++)
            fprintf(f, "  %-6s %s\n", command_names[c], command_help[c]);
        fprintf(f, "\n'megamoe <command> --help' lists a command's options; 'megamoe --version' the build's versions.\n"
                   "exit codes: 0 ok, 1 check or gate failed, 2 usage or config error,\n"
                   "            3 CUDA/NCCL/MPI error, 4 timeout\n");
        return;
    }
    fprintf(f, "usage: megamoe %s [options]\n  %s\n\noptions:\n", command_names[cmd],
            command_help[cmd]);
    for (size_t i = 0; i < MM_ARRAY_LEN(flags); i++) {
        if (!(flags[i].commands & (1u << cmd))) continue;
        char left[48];
        mm_fmt(left, sizeof left, "--%s%s%s", flags[i].name, flags[i].arg ? " " : "",
               flags[i].arg ? flags[i].arg : "");
        fprintf(f, "  %-28s %s\n", left, flags[i].help);
    }
}

static void defaults(mm_options *o)
{
    memset(o, 0, sizeof *o);
    mm_fmt(o->config_path, sizeof o->config_path, "%s", MM_DEFAULT_CONFIG);
    o->modes = (1u << MODE_COUNT) - 1;
    o->warmup = MM_DEFAULT_WARMUP;
    o->iters = MM_DEFAULT_ITERS;
    o->sweeps = 1;
    o->routing.kind = ROUTE_UNIFORM;
    o->seed = 1;
    o->l2_flush = 1;
    o->interleave = 1;
    o->check = 1;
    o->ll_max = MM_DEFAULT_LL_MAX;
    o->timeout_ms = MM_DEFAULT_TIMEOUT_MS;
    o->ceilings.hbm_gbps = MM_DEFAULT_HBM_GBPS;
    o->ceilings.nvlink_gbps = MM_DEFAULT_NVLINK_GBPS;
    o->ceilings.fp8_tflops = MM_DEFAULT_FP8_TFLOPS;
    o->tol = MM_DEFAULT_TOL;
    o->max_slowdown = 0.05;
    o->min_gap = 0.01;
    o->relative_to = -1;
    o->weights = -1;
    o->ep = 8;
    static const int default_rows[] = {8, 64, 512, 4096, 49152};
    o->n_rows = (int)MM_ARRAY_LEN(default_rows);
    memcpy(o->rows, default_rows, sizeof default_rows);
}

/* "5%", "5" (percent, in [lo, hi]) -> 0.05 */
static mm_status parse_percent(const char *v, double lo, double hi, double *out, char *err, size_t errlen)
{
    char tmp[64];
    size_t n = strlen(v);
    if (n == 0 || n >= sizeof tmp) {
        mm_fmt(err, errlen, "expected a percentage like 5%%, got '%s'", v);
        return MM_USAGE;
    }
    memcpy(tmp, v, n + 1);
    if (tmp[n - 1] == '%') tmp[n - 1] = '\0';
    double pct;
    MM_TRY(parse_double(tmp, lo, hi, &pct, err, errlen));
    *out = pct / 100.0;
    return MM_OK;
}

/* Applies one flag's value; `name` is for messages. */
static mm_status apply(mm_options *o, int id, const char *name, const char *v, char *err,
                       size_t errlen)
{
    char sub[256];
    long n = 0;
    double d = 0;
    mm_status s = MM_OK;
    switch (id) {
    case OPT_CONFIG:
        if (strlen(v) >= sizeof o->config_path) {
            mm_fmt(err, errlen, "--config: path too long");
            return MM_USAGE;
        }
        mm_fmt(o->config_path, sizeof o->config_path, "%s", v);
        o->config_given = 1;
        return MM_OK;
    case OPT_BATCHES:
        s = parse_batch_list(v, 1, o->batches, MM_MAX_BATCHES, &o->n_batches, sub, sizeof sub);
        break;
    case OPT_MODES: s = parse_mode_list(v, &o->modes, sub, sizeof sub); break;
    case OPT_WARMUP:
        s = parse_int(v, 0, 100000, &n, sub, sizeof sub);
        o->warmup = (int)n;
        break;
    case OPT_ITERS:
        s = parse_int(v, 1, 100000, &n, sub, sizeof sub);
        o->iters = (int)n;
        break;
    case OPT_ROUTING:
        s = parse_routing(v, &o->routing, sub, sizeof sub);
        o->routing_given = 1;
        break;
    case OPT_SEED:
        s = parse_int(v, 0, 0x7fffffffffffffffL, &n, sub, sizeof sub);
        o->seed = (unsigned long long)n;
        break;
    case OPT_JSON:
    case OPT_MARKDOWN:
    case OPT_BASELINE:
    case OPT_CURRENT:
    case OPT_CEILINGS: {
        char *dst = id == OPT_JSON       ? o->json_path
                    : id == OPT_MARKDOWN ? o->markdown_path
                    : id == OPT_BASELINE ? o->baseline_path
                    : id == OPT_CURRENT  ? o->current_path
                                         : o->ceilings_path;
        if (!*v || strlen(v) >= sizeof o->json_path) {
            mm_fmt(err, errlen, "--%s: empty or too long path", name);
            return MM_USAGE;
        }
        mm_fmt(dst, sizeof o->json_path, "%s", v);
        return MM_OK;
    }
    case OPT_GRAPH: s = parse_on_off(v, &o->graph, sub, sizeof sub); break;
    case OPT_L2FLUSH: s = parse_l2_flush(v, &o->l2_flush, sub, sizeof sub); break;
    case OPT_IDLE:
        s = parse_int(v, 0, 1000, &n, sub, sizeof sub);
        o->idle_ms = (int)n;
        break;
    case OPT_INTERLEAVE: s = parse_on_off(v, &o->interleave, sub, sizeof sub); break;
    case OPT_CHECK: s = parse_on_off(v, &o->check, sub, sizeof sub); break;
    case OPT_BREAKDOWN: o->breakdown = 1; return MM_OK;
    case OPT_MAXTOK:
        s = parse_int(v, 1, MM_MAX_BATCH_VALUE, &n, sub, sizeof sub);
        o->max_tokens_per_rank = (int)n;
        break;
    case OPT_LLMAX:
        s = parse_int(v, 1, MM_MAX_BATCH_VALUE, &n, sub, sizeof sub);
        o->ll_max = (int)n;
        break;
    case OPT_COMMSMS:
        s = parse_int(v, 1, 1024, &n, sub, sizeof sub);
        o->comm_sms = (int)n;
        break;
    case OPT_TIMEOUT:
        s = parse_int(v, 1, 3600 * 1000, &n, sub, sizeof sub);
        o->timeout_ms = (int)n;
        break;
    case OPT_RANKS:
        s = parse_int(v, 1, 4096, &n, sub, sizeof sub);
        o->ranks = (int)n;
        break;
    case OPT_HBM:
        s = parse_double(v, 1e-3, 1e9, &o->ceilings.hbm_gbps, sub, sizeof sub);
        o->ceilings_given |= 1u << CEIL_HBM;
        break;
    case OPT_NVLINK:
        s = parse_double(v, 1e-3, 1e9, &o->ceilings.nvlink_gbps, sub, sizeof sub);
        o->ceilings_given |= 1u << CEIL_NVLINK;
        break;
    case OPT_FP8:
        s = parse_double(v, 1e-3, 1e9, &o->ceilings.fp8_tflops, sub, sizeof sub);
        o->ceilings_given |= 1u << CEIL_FP8;
        break;
    case OPT_FILTER:
        if (strlen(v) >= sizeof o->filter) {
            mm_fmt(err, errlen, "--filter: too long");
            return MM_USAGE;
        }
        mm_fmt(o->filter, sizeof o->filter, "%s", v);
        return MM_OK;
    case OPT_TOL:
        /* Only tighter than the documented bound: CI may demand more, never accept less. */
        s = parse_double(v, 0.0, MM_DEFAULT_TOL, &d, sub, sizeof sub);
        o->tol = d;
        break;
    /* Past these a gate passes what it exists to catch (a 30% slowdown under --min-gap 200%). */
    case OPT_MAXSLOW: s = parse_percent(v, 0.1, 50.0, &o->max_slowdown, sub, sizeof sub); break;
    case OPT_MINGAP: s = parse_percent(v, 0.0, 20.0, &o->min_gap, sub, sizeof sub); break;
    case OPT_IGNOREDEV: o->ignore_device = 1; return MM_OK;
    case OPT_RELATIVE: {
        if (strcmp(v, "cublaslt") == 0) {
            o->relative_to = MM_GATE_RELATIVE_CUBLASLT;
            return MM_OK;
        }
        unsigned mask = 0;
        s = parse_mode_list(v, &mask, sub, sizeof sub);
        if (s != MM_OK && !strchr(v, ',')) /* gate also judges gemm's rows against cuBLASLt's */
            mm_fmt(sub, sizeof sub, "unknown reference '%s' (choose from fused, normal, ll, cublaslt)", v);
        if (s == MM_OK && (mask & (mask - 1))) {
            mm_fmt(sub, sizeof sub, "one mode, not a list ('%s')", v);
            s = MM_USAGE;
        }
        for (int m = 0; s == MM_OK && m < MODE_COUNT; m++)
            if (mask >> m & 1u) o->relative_to = m;
        break;
    }
    case OPT_EP:
        s = parse_int(v, 1, 4096, &n, sub, sizeof sub);
        o->ep = (int)n;
        break;
    case OPT_WEIGHTS:
        if (strcmp(v, "fp8") == 0) o->weights = MM_WEIGHTS_FP8;
        else if (strcmp(v, "fp4") == 0) o->weights = MM_WEIGHTS_FP4;
        else {
            mm_fmt(sub, sizeof sub, "expected fp8 or fp4, got '%s'", v);
            s = MM_USAGE;
        }
        break;
    case OPT_EP_SLICE:
        s = parse_int(v, 2, 4096, &n, sub, sizeof sub);
        o->ep_slice = (int)n;
        break;
    case OPT_ROWS:
        s = parse_batch_list(v, 1, o->rows, MM_MAX_BATCHES, &o->n_rows, sub, sizeof sub);
        break;
    case OPT_ENERGY:
        s = parse_int(v, 0, 600000, &n, sub, sizeof sub);
        if (s == MM_OK && n > 0 && n < 200) {
            mm_fmt(sub, sizeof sub, "%ld ms is too short for NVML's energy counter, which steps every ~100 ms (0 or 200..600000)", n);
            s = MM_USAGE;
        }
        o->energy_ms = (int)n;
        break;
    case OPT_SWEEPS:
        s = parse_int(v, 1, 1000, &n, sub, sizeof sub);
        o->sweeps = (int)n;
        break;
    case OPT_TILE:
        if (strcmp(v, "auto") == 0) o->tile = 0;
        else if (strcmp(v, "128") == 0) o->tile = 128;
        else if (strcmp(v, "192") == 0) o->tile = 192;
        else {
            mm_fmt(sub, sizeof sub, "expected auto, 128 or 192, got '%s'", v);
            s = MM_USAGE;
        }
        break;
    case OPT_WIDE_SCALES:
        if (strcmp(v, "auto") == 0) o->wide_scales = MM_WIDE_SCALES_AUTO;
        else if (strcmp(v, "group") == 0) o->wide_scales = MM_WIDE_SCALES_GROUP;
        else if (strcmp(v, "block") == 0) o->wide_scales = MM_WIDE_SCALES_BLOCK;
        else {
            mm_fmt(sub, sizeof sub, "expected auto, group or block, got '%s'", v);
            s = MM_USAGE;
        }
        break;
    case OPT_SPREAD:
        if (strcmp(v, "uniform") == 0) o->spread = MM_SPREAD_UNIFORM;
        else if (strcmp(v, "skewed") == 0) o->spread = MM_SPREAD_SKEWED;
        else if (strcmp(v, "routing") == 0) o->spread = MM_SPREAD_ROUTING;
        else {
            mm_fmt(sub, sizeof sub, "expected uniform, skewed or routing, got '%s'", v);
            s = MM_USAGE;
        }
        break;
    default:
        mm_fmt(err, errlen, "internal: unhandled option --%s", name);
        return MM_USAGE;
    }
    if (s != MM_OK) mm_fmt(err, errlen, "--%s: %s", name, sub);
    return s;
}

mm_status cli_parse(int argc, char **argv, mm_options *o, char *err, size_t errlen)
{
    defaults(o);
    if (argc < 2) {
        mm_fmt(err, errlen, "no command given (bench, check, plan, gate, gemm, selftest; try --help)");
        return MM_USAGE;
    }
    int cmd = -1;
    for (int c = 0; c < CMD_COUNT; c++)
        if (strcmp(argv[1], command_names[c]) == 0) cmd = c;
    if (cmd < 0) {
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
            strcmp(argv[1], "help") == 0) {
            o->help = 1;
            o->cmd = CMD_COUNT;
            return MM_OK;
        }
        if (strcmp(argv[1], "--version") == 0) {
            o->version = 1;
            o->cmd = CMD_COUNT;
            return MM_OK;
        }
        mm_fmt(err, errlen, "unknown command '%s' (bench, check, plan, gate, gemm, selftest; try --help)",
               argv[1]);
        return MM_USAGE;
    }
    o->cmd = (mm_command)cmd;

    struct option longopts[MM_ARRAY_LEN(flags) + 1];
    for (size_t i = 0; i < MM_ARRAY_LEN(flags); i++) {
        longopts[i].name = flags[i].name;
        longopts[i].has_arg = flags[i].has_arg ? required_argument : no_argument;
        longopts[i].flag = NULL;
        longopts[i].val = flags[i].id;
    }
    memset(&longopts[MM_ARRAY_LEN(flags)], 0, sizeof longopts[0]);

    /* getopt keeps global state: reset it so tests can parse many command lines. */
    optind = 0;
    opterr = 0;
    int sub_argc = argc - 1;
    char **sub_argv = argv + 1;
    for (;;) {
        int longidx = -1;
        int id = getopt_long(sub_argc, sub_argv, "+:h", longopts, &longidx);
        if (id == -1) break;
        if (id == ':') {
            mm_fmt(err, errlen, "%s: option '%s' needs a value", command_names[cmd],
                   sub_argv[optind - 1]);
            return MM_USAGE;
        }
        if (id == '?') {
            mm_fmt(err, errlen, "%s: unknown option '%s' (try --help)", command_names[cmd],
                   sub_argv[optind - 1]);
            return MM_USAGE;
        }
        size_t fi = 0;
        while (fi < MM_ARRAY_LEN(flags) && flags[fi].id != id) fi++;
        if (fi == MM_ARRAY_LEN(flags)) {
            mm_fmt(err, errlen, "%s: unknown option", command_names[cmd]);
            return MM_USAGE;
        }
        if (id == OPT_HELP) {
            o->help = 1;
            return MM_OK;
        }
        if (id == OPT_VERSION) {
            o->version = 1;
            return MM_OK;
        }
        if (!(flags[fi].commands & (1u << cmd))) {
            mm_fmt(err, errlen, "%s: option --%s does not apply to this command",
                   command_names[cmd], flags[fi].name);
            return MM_USAGE;
        }
        MM_TRY(apply(o, id, flags[fi].name, optarg, err, errlen));
    }
    if (optind < sub_argc) {
        mm_fmt(err, errlen, "%s: unexpected argument '%s'", command_names[cmd], sub_argv[optind]);
        return MM_USAGE;
    }
    if (cmd == CMD_GATE && (!o->baseline_path[0] || !o->current_path[0])) {
        mm_fmt(err, errlen, "gate: --baseline FILE and --current FILE are both required");
        return MM_USAGE;
    }
    if (cmd == CMD_GATE && o->min_gap > o->max_slowdown) { /* a slowdown between the two would pass as SAME */
        mm_fmt(err, errlen, "gate: --min-gap %g%% is above --max-slowdown %g%%: lower --min-gap", o->min_gap * 100,
               o->max_slowdown * 100);
        return MM_USAGE;
    }
    return MM_OK;
}
