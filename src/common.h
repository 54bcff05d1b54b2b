/* Shared result codes and error reporting for the host code.
 *
 * Every function that can fail returns an mm_status; callers pass it up with MM_TRY so a failure
 * leaves a short trace on stderr (file:line per level) and reaches main(), which turns it into the
 * process exit code. Nothing below main() calls exit(): MPI ranks must first agree on the outcome. */
#ifndef MEGAMOE_COMMON_H
#define MEGAMOE_COMMON_H

#include <stddef.h>
#include <stdio.h>

/* Documented exit codes (README "Exit codes"). Ordered by severity so the worst of several
 * outcomes is simply the largest value, except that TIMEOUT outranks RUNTIME. */
typedef enum {
    MM_OK = 0,      /* everything ran and passed */
    MM_FAIL = 1,    /* a correctness check or a performance gate failed */
    MM_USAGE = 2,   /* bad flag, bad config, rank/GPU mismatch */
    MM_RUNTIME = 3, /* CUDA, NCCL or MPI error */
    MM_TIMEOUT = 4, /* a bounded wait expired */
} mm_status;

/* The more serious of two outcomes: TIMEOUT > RUNTIME > USAGE > FAIL > OK. */
static inline mm_status mm_worse(mm_status a, mm_status b)
{
    return a > b ? a : b;
}

const char *mm_status_name(mm_status s);

/* Logging context: under MPI, messages carry the rank; before the rank is known, ranks other than
 * 0 (from the launcher's environment) stay quiet so a usage error prints once. */
void log_quiet_unless_rank0(void);
void log_set_rank(int rank, int world);

/* One-line messages on stderr, prefixed "megamoe: error: " / "megamoe: warning: ". */
void mm_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mm_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "megamoe: note: ", for what the user should know but need not act on. */
void mm_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Format into a caller's buffer (truncating, always NUL-terminated). */
void mm_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A whole file, NUL-terminated (the caller frees it), its length in *len; NULL with `err` set to
 * "cannot read PATH: REASON". */
char *mm_read_file(const char *path, size_t *len, char *err, size_t errlen);

/* Runtime failures (CUDA/NCCL/MPI, timeouts) leave a file:line trace as they travel up; usage
 * errors and check failures stay one line, as promised to users. */
#define MM_TRY(expr)                                                                       \
    do {                                                                                   \
        mm_status mm_try_s_ = (expr);                                                      \
        if (mm_try_s_ != MM_OK) {                                                          \
            if (mm_try_s_ >= MM_RUNTIME)                                                   \
                fprintf(stderr, "megamoe:   from %s:%d\n", __FILE__, __LINE__);            \
            return mm_try_s_;                                                              \
        }                                                                                  \
    } while (0)

#define MM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
