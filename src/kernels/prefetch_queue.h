/* prefetch_queue.h — spans of memory asked for into L2 a few cache lines at a time, between the tiles
 * of a kernel whose next task's operands are known: the flash attention's next head (or query block).
 * At T = 64 a head's task lasts a few microseconds, too short for the hardware's prefetchers to get
 * ahead of its first reads: with its operands in memory rather than the caches, flash_fwd took about 2.1x and
 * flash_bwd 2x as long (B=4, NH=12, HS=64, 2 threads, Zen 5; docs/performance.md, seventeenth session).
 * Header-only; x86 (_mm_prefetch with the T1 hint: into L2, not L1, which holds the current tiles). */
#ifndef GPTC_KERNELS_PREFETCH_QUEUE_H
#define GPTC_KERNELS_PREFETCH_QUEUE_H

#include <immintrin.h>
#include <stddef.h>

enum { GPTC_PF_SPANS = 12,  /* spans a queue holds */
       GPTC_PF_LINES = 64 }; /* lines asked for per call between tiles (64: the bench's best of 8 to 64) */

typedef struct {
    const char *p[GPTC_PF_SPANS]; /* each span's next line */
    size_t left[GPTC_PF_SPANS];   /* its lines not yet asked for */
    int cur, n;                   /* the span being asked for; spans held */
} gptc_pf_queue;

static inline void gptc_pf_reset(gptc_pf_queue *q) { q->cur = q->n = 0; }

/* queues the lines of n floats at p (ignored once the queue is full) */
static inline void gptc_pf_add(gptc_pf_queue *q, const float *p, size_t n) {
    if (q->n < GPTC_PF_SPANS && n) q->p[q->n] = (const char *)p, q->left[q->n++] = (n * sizeof(float) + 63) / 64;
}

/* asks for the queue's next `lines` lines (fewer where it runs out) */
static inline void gptc_pf_some(gptc_pf_queue *q, int lines) {
    while (lines > 0 && q->cur < q->n) {
        const size_t take = q->left[q->cur] < (size_t)lines ? q->left[q->cur] : (size_t)lines;
        const char *p = q->p[q->cur];
        for (size_t i = 0; i < take; i++) _mm_prefetch(p + 64 * i, _MM_HINT_T1);
        q->p[q->cur] = p + 64 * take;
        q->left[q->cur] -= take;
        lines -= (int)take;
        if (q->left[q->cur] == 0) q->cur++;
    }
}

#endif
