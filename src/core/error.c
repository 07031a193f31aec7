/* error.c — the status-and-message error model: a thread-local message set where a failure
 * is detected and shown by the CLI. */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char g_msg[1024];

gptc_status gptc_fail(gptc_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return st;
}

gptc_status gptc_fail_prefix(gptc_status st, const char *fmt, ...) {
    char prefix[512], old[sizeof g_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, g_msg, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof g_msg - 3) n = sizeof g_msg - 3;
    memcpy(g_msg, prefix, n);
    memcpy(g_msg + n, ": ", 2);
    size_t room = sizeof g_msg - n - 3, m = strnlen(old, room);
    memcpy(g_msg + n + 2, old, m);
    g_msg[n + 2 + m] = '\0';
    return st;
}

void gptc_clear_error(void) { g_msg[0] = '\0'; }

const char *gptc_last_error(void) { return g_msg; }

const char *gptc_status_name(gptc_status st) {
    switch (st) {
    case GPTC_OK: return "ok";
    case GPTC_ERR_ARG: return "bad argument";
    case GPTC_ERR_IO: return "i/o error";
    case GPTC_ERR_FORMAT: return "bad file format";
    case GPTC_ERR_NOMEM: return "out of memory";
    case GPTC_ERR_STATE: return "state mismatch";
    case GPTC_ERR_NUMERIC: return "numeric error";
    }
    return "unknown status";
}

void gptc_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "gptc: internal error: %s:%d: assertion `%s' failed\n", file, line, expr);
    abort();
}
