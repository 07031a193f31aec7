/* memory.c — aligned, zeroed allocation with live/peak byte accounting, arena planning (sizes
 * first, one block, views), and this machine's usable memory.
 *
 * Every block from gptc_alloc carries a 64-byte header in front of it that records the block's
 * size, so gptc_free can subtract it from the live count; the block itself stays 64-byte aligned.
 * The counts are the bytes really taken: header plus the size rounded up to 64. */
#include "core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

/* Header: [0] the block's bytes (header included), [1] 1 when the block is its own mapping. */
enum { HEADER = 64 };
/* Blocks from this size up are fresh mappings zeroed by first touch when it is on (numa.c). */
#define FIRST_TOUCH_MIN ((size_t)1 << 20)
/* Blocks from this size up ask for transparent huge pages (2 MiB) over their whole 2 MiB-aligned
 * interior, before the zeroing faults the pages in: weights, caches and activations are streamed with
 * strides of kilobytes (a decode step's matvec walks a (K,N) matrix by columns), and with 4 KiB pages
 * nearly every row is a TLB miss and a new page the hardware prefetcher will not enter. Only a hint:
 * where THP is off (or "never") the pages stay 4 KiB. */
#define HUGE_MIN ((size_t)4 << 20)
#define HUGE_PAGE ((uintptr_t)2 << 20)

static void advise_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    if (bytes < HUGE_MIN) return;
    uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), hi = ((uintptr_t)p + bytes) & ~(HUGE_PAGE - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p, (void)bytes;
#endif
}

static atomic_size_t g_live, g_peak;

static void account(size_t add, size_t sub) {
    size_t now = atomic_fetch_add(&g_live, add) + add;
    if (sub) atomic_fetch_sub(&g_live, sub);
    size_t peak = atomic_load(&g_peak);
    while (now > peak && !atomic_compare_exchange_weak(&g_peak, &peak, now)) {
    }
}

/* the usable size of a block for a request of `bytes`: a whole number of 64-byte lines, at least one */
static size_t rounded_size(size_t bytes) { return bytes ? (bytes + 63) & ~(size_t)63 : 64; }

void *gptc_alloc(size_t bytes, const char *what) {
    size_t rounded = rounded_size(bytes);
    bool mapped = gptc_alloc_first_touch() && rounded >= FIRST_TOUCH_MIN && rounded <= SIZE_MAX - HEADER;
    char *p = NULL;
    if (mapped) {
        p = mmap(NULL, rounded + HEADER, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) p = NULL;
    } else if (rounded <= SIZE_MAX - HEADER) {
        p = aligned_alloc(64, rounded + HEADER);
    }
    if (!p) {
        gptc_fail(GPTC_ERR_NOMEM, "cannot allocate %.1f MiB for %s; use a smaller model, batch or sequence",
                  bytes / 1048576.0, what);
        return NULL;
    }
    advise_huge(p + HEADER, rounded);
    if (mapped) gptc_first_touch_zero(p + HEADER, rounded); /* the pages land where their parts are used */
    else memset(p + HEADER, 0, rounded);
    ((size_t *)p)[0] = rounded + HEADER;
    ((size_t *)p)[1] = mapped;
    account(rounded + HEADER, 0);
    return p + HEADER;
}

void gptc_free(void *p) {
    if (!p) return;
    char *block = (char *)p - HEADER;
    const size_t size = ((size_t *)block)[0];
    account(0, size);
    if (((size_t *)block)[1]) munmap(block, size);
    else free(block);
}

void gptc_alloc_stats(size_t *live, size_t *peak) {
    if (live) *live = atomic_load(&g_live);
    if (peak) *peak = atomic_load(&g_peak);
}

void gptc_alloc_reset_peak(void) { atomic_store(&g_peak, atomic_load(&g_live)); }

size_t gptc_alloc_block_bytes(size_t bytes) { return rounded_size(bytes) + HEADER; }

/* The workspaces a thread has allocated, freed when it exits: an OpenMP team that shrinks ends the
 * threads it no longer needs (and a later, larger one starts new ones), and a thread's
 * _Thread_local buffers would otherwise stay allocated with nothing pointing at them
 * (found by LeakSanitizer, `make test-sanitize`). The main thread's last until the process ends. */
enum { MAX_THREAD_WORKSPACES = 64 };
typedef struct workspace_list {
    gptc_workspace *ws[MAX_THREAD_WORKSPACES];
    int n;
} workspace_list;
static _Thread_local workspace_list tl_workspaces;
static pthread_key_t g_workspace_key;
static pthread_once_t g_workspace_once = PTHREAD_ONCE_INIT;

static void workspaces_release(void *arg) {
    workspace_list *l = arg;
    for (int i = 0; i < l->n; i++) {
        gptc_free(l->ws[i]->buf);
        l->ws[i]->buf = NULL;
        l->ws[i]->cap = 0;
    }
    l->n = 0;
}

static void workspace_key_make(void) { GPTC_ASSERT(pthread_key_create(&g_workspace_key, workspaces_release) == 0); }

/* Records w (a _Thread_local of this thread) for release at thread exit. */
static void workspace_register(gptc_workspace *w) {
    pthread_once(&g_workspace_once, workspace_key_make);
    workspace_list *l = &tl_workspaces;
    GPTC_ASSERT(l->n < MAX_THREAD_WORKSPACES);
    l->ws[l->n++] = w;
    if (l->n == 1) GPTC_ASSERT(pthread_setspecific(g_workspace_key, l) == 0);
}

float *gptc_workspace_get(gptc_workspace *w, size_t nfloats) {
    if (nfloats > w->cap) {
        if (!w->buf) workspace_register(w);
        gptc_free(w->buf);
        w->buf = gptc_alloc(nfloats * sizeof(float), "kernel workspace");
        GPTC_ASSERT(w->buf != NULL);
        w->cap = nfloats;
    }
    return w->buf;
}

size_t gptc_plan_take(gptc_plan *p, size_t nfloats) {
    size_t off = p->used;
    p->used += (nfloats + 15) & ~(size_t)15;
    return off;
}

/* the first number in a file (e.g. cgroup's memory.max), 0 if none or "max" */
static unsigned long long read_number(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    unsigned long long v = 0;
    while (fgets(line, sizeof line, f)) {
        if (key && strncmp(line, key, strlen(key)) != 0) continue;
        const char *s = line + (key ? strlen(key) : 0);
        unsigned long long x;
        if (sscanf(s, " %llu", &x) == 1) v = x;
        break;
    }
    fclose(f);
    return v;
}

size_t gptc_machine_memory(void) {
    unsigned long long total = read_number("/proc/meminfo", "MemTotal:") * 1024ull;
    unsigned long long limit = read_number("/sys/fs/cgroup/memory.max", NULL);
    if (limit && (!total || limit < total)) total = limit;
    return (size_t)total;
}

size_t gptc_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}
