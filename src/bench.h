/* The GPU subcommands. Each starts MPI and the runtime, runs, reports on rank 0, and returns the
 * exit status every rank agreed on. */
#ifndef MEGAMOE_BENCH_H
#define MEGAMOE_BENCH_H

#include "cli.h"
#include "config.h"
#include "report.h"

mm_status bench_main(const mm_options *o, const mm_config *cfg, int argc, char **argv);
mm_status check_main(const mm_options *o, const mm_config *cfg, int argc, char **argv);
mm_status gemm_main(const mm_options *o, const mm_config *cfg, int argc, char **argv);
mm_status selftest_main(const mm_options *o, const mm_config *cfg, int argc, char **argv);

/* Shared by the GPU subcommands: argv joined, date, git revision, config shape into meta. */
void meta_fill_common(mm_meta *m, const mm_options *o, const mm_config *cfg, int argc,
                      char **argv);

#endif
