/* log.c — diagnostics on stderr, one line each. In a job of many ranks only rank 0 prints normal
 * lines; warnings come from every rank and carry a "[rank r] " prefix. */
#include "core.h"

#include <stdio.h>

static int g_rank = 0, g_world = 1;
static void (*g_rewrite)(const char *msg, char *out, size_t cap);

void gptc_log_set_rewrite(void (*fn)(const char *msg, char *out, size_t cap)) { g_rewrite = fn; }

/* prints fmt's text to stderr, through the rewrite if one is set, and a newline */
static void emit(const char *fmt, va_list ap) {
    char msg[2048], out[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (g_rewrite) g_rewrite(msg, out, sizeof out);
    fputs(g_rewrite ? out : msg, stderr);
    fputc('\n', stderr);
}

void gptc_log_set_rank(int rank, int world) {
    g_rank = rank;
    g_world = world;
}

void gptc_log_rank_prefix(FILE *f) {
    if (g_world > 1) fprintf(f, "[rank %d] ", g_rank);
}

void gptc_log(const char *fmt, ...) {
    if (g_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    emit(fmt, ap);
    va_end(ap);
}

void gptc_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gptc_log_rank_prefix(stderr);
    fputs("gptc: warning: ", stderr);
    emit(fmt, ap);
    va_end(ap);
}
