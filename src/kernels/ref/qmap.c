/* qmap.c — the two dynamic-tree quantisation maps of the 8-bit optimizer state and their nearest-code
 * lookup tables (kernels/ostate.h has the definition), built once from the bit layout. */
#include "kernels/ostate.h"
#include "core/core.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

static gptc_qmap g_maps[2]; /* [0] unsigned, [1] signed */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* the value of `bits` magnitude bits m (most significant first): E leading zeros, the indicator, then
 * F = bits - E - 1 fraction bits k: 10^-E (0.1 + 0.9 (k + 1) / 2^F); 0 when m is 0 */
static double tree_value(unsigned m, int bits) {
    if (!m) return 0;
    int E = 0;
    while (!(m & (1u << (bits - 1 - E)))) E++;
    int F = bits - E - 1;
    unsigned k = m & ((1u << F) - 1);
    return pow(10.0, -E) * (0.1 + 0.9 * (k + 1) / (double)(1u << F));
}

static int by_value(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* index of the code nearest to x by a binary search of the sorted codes, ties to the lower index */
static unsigned nearest_search(const float *code, float x) {
    unsigned lo = 0, hi = 255; /* the largest code <= x, or 0 */
    if (!(x > code[0])) return 0;
    if (x >= code[255]) return 255;
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (code[mid] <= x) lo = mid;
        else hi = mid;
    }
    return (x - code[lo] <= code[hi] - x) ? lo : hi;
}

static void build(gptc_qmap *q, int is_signed) {
    for (unsigned p = 0; p < 256; p++) {
        double v;
        if (!is_signed) v = tree_value(p, 8);
        else if (p == 0x80) v = 1e-7; /* "-0", unused by the tree: one more decade */
        else v = (p & 0x80 ? -1 : 1) * tree_value(p & 0x7f, 7);
        q->code[p] = (float)v;
    }
    qsort(q->code, 256, sizeof(float), by_value);
    q->code[256] = INFINITY;
    for (unsigned b = 0; b < 2 * GPTC_QMAP_HALF; b++) {
        /* the bucket's smallest value x and largest y: positive magnitudes grow with the bits, negative
         * values shrink; the first bucket of each sign also holds every smaller magnitude (down to 0) */
        unsigned neg = b >= GPTC_QMAP_HALF, h = GPTC_QMAP_LO + (b - neg * GPTC_QMAP_HALF);
        uint32_t top = h << 16, bottom = h == GPTC_QMAP_LO ? 0 : top;
        uint32_t lo_u = neg ? 0x80000000u | top | 0xffffu : bottom, hi_u = neg ? 0x80000000u | bottom : top | 0xffffu;
        if (h == GPTC_QMAP_HI) hi_u = neg ? 0x80000000u | top : top; /* the last bucket ends at 1.0 exactly */
        float x, y;
        memcpy(&x, &lo_u, 4);
        memcpy(&y, &hi_u, 4);
        q->lut[b] = (uint8_t)nearest_search(q->code, x);
        /* the bucket's other end is at most two codes further (gptc_qmap_nearest's two steps) */
        GPTC_ASSERT(nearest_search(q->code, y) <= q->lut[b] + 2u);
    }
}

static void build_all(void) {
    build(&g_maps[0], 0);
    build(&g_maps[1], 1);
}

const gptc_qmap *gptc_qmap_get(int is_signed) {
    pthread_once(&g_once, build_all);
    return &g_maps[is_signed ? 1 : 0];
}
