#include "common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int log_quiet;
static int log_rank = -1;

void log_quiet_unless_rank0(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < MM_ARRAY_LEN(vars); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            log_quiet = atoi(v) != 0;
            return;
        }
    }
}

void log_set_rank(int rank, int world)
{
    log_quiet = 0;
    log_rank = world > 1 ? rank : -1;
}

const char *mm_status_name(mm_status s)
{
    switch (s) {
    case MM_OK: return "OK";
    case MM_FAIL: return "FAIL";
    case MM_USAGE: return "USAGE";
    case MM_RUNTIME: return "ERROR";
    case MM_TIMEOUT: return "TIMEOUT";
    }
    return "?";
}

static void vmessage(const char *kind, const char *fmt, va_list ap)
{
    if (log_quiet) return;
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    if (log_rank >= 0)
        fprintf(stderr, "megamoe[rank %d]: %s: %s\n", log_rank, kind, line);
    else
        fprintf(stderr, "megamoe: %s: %s\n", kind, line);
}

void mm_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("error", fmt, ap);
    va_end(ap);
}

void mm_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("warning", fmt, ap);
    va_end(ap);
}

void mm_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("note", fmt, ap);
    va_end(ap);
}

void mm_fmt(char *buf, size_t len, const char *fmt, ...)
{
    if (len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

char *mm_read_file(const char *path, size_t *len, char *err, size_t errlen)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        mm_fmt(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *bigger = realloc(buf, cap * 2 + 1);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    const int failed = ferror(f);
    fclose(f);
    if (!buf || failed) {
        mm_fmt(err, errlen, "cannot read %s: %s", path, buf ? "read error" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}
