/* optimizer.c — the registry of optimizer kinds (optimizer.h): which --optimizer names exist, in the
 * order --help lists them (the first is the default), and the state each needs. Adding an optimizer
 * is its own file defining `const gptc_optimizer_kind gptc_optimizer_<name>` plus one line in
 * GPTC_OPTIMIZER_LIST below. */
#include "optim/optimizer.h"

#include <pthread.h>
#include <string.h>

/* X(name): one line per optimizer kind, defined in optim/<name>.c as gptc_optimizer_<name>. */
#define GPTC_OPTIMIZER_LIST(X) \
    X(adamw)                   \
    X(lion)

#define GPTC_OPTIMIZER_EXTERN(n) extern const gptc_optimizer_kind gptc_optimizer_##n;
GPTC_OPTIMIZER_LIST(GPTC_OPTIMIZER_EXTERN)
#define GPTC_OPTIMIZER_ENTRY(n) &gptc_optimizer_##n,

const gptc_optimizer_kind *const gptc_optimizers[] = {GPTC_OPTIMIZER_LIST(GPTC_OPTIMIZER_ENTRY)};
const int gptc_noptimizers = (int)(sizeof gptc_optimizers / sizeof gptc_optimizers[0]);

const gptc_optimizer_kind *gptc_optimizer_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < gptc_noptimizers; i++)
        if (strcmp(gptc_optimizers[i]->name, name) == 0) return gptc_optimizers[i];
    return NULL;
}

/* The names joined by ", ", built once (pthread_once: any thread may ask first). */
static char g_names[256];
static pthread_once_t g_names_once = PTHREAD_ONCE_INIT;

static void names_build(void) {
    size_t len = 0;
    for (int i = 0; i < gptc_noptimizers; i++) {
        const char *sep = i ? ", " : "", *name = gptc_optimizers[i]->name;
        size_t ls = strlen(sep), ln = strlen(name);
        if (len + ls + ln >= sizeof g_names) break; /* never overflow (names are a few letters) */
        memcpy(g_names + len, sep, ls);
        memcpy(g_names + len + ls, name, ln);
        len += ls + ln;
    }
    g_names[len] = '\0';
}

const char *gptc_optimizer_names(void) {
    pthread_once(&g_names_once, names_build);
    return g_names;
}

size_t gptc_optimizer_state_bytes(const gptc_optimizer_kind *k, size_t floats) {
    /* one allocation per state buffer, counted as gptc_alloc counts it (so `gptc plan` equals the live bytes) */
    return k && floats ? (size_t)k->nstates * gptc_alloc_block_bytes(floats * sizeof(float)) : 0;
}
