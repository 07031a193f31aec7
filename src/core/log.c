/* log.c — diagnostics on stderr, one line each. */
#include "core.h"

#include <stdio.h>

void gptc_log(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void gptc_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("gptc: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
