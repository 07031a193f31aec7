/* amx_soft.h — the tile instructions gemm_amx.c uses, carried out in C on a per-thread set of eight
 * tiles (the GPTC_AMX_SOFT build, gemm_amx_soft.c), after the pseudo-code of Intel's SDM:
 *   LDTILECFG   palette 1: per tile its rows and bytes per row (colsb); the tiles start zeroed;
 *   TILELOADD   row r of tile t <- colsb bytes at base + r*stride, for its rows;
 *   TILESTORED  the reverse;
 *   TILEZERO    the tile <- 0;
 *   TDPBF16PS   for each row m of C and column n: the products of A's row m and B's column n, pair
 *               by pair over k, summed in two fp32 FMA chains (first and second elements of the pairs),
 *               then both sums added to C(m,n): round to nearest even, bf16 subnormal inputs read as
 *               zero, subnormal results flushed to zero;
 *   TILERELEASE back to the INIT state (no configuration).
 * Every use checks what the hardware would fault on (no configuration in this thread, a tile shape
 * the instruction cannot take), so a missing per-thread configuration fails here too. */
#ifndef GPTC_KERNELS_AMX_SOFT_H
#define GPTC_KERNELS_AMX_SOFT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/core.h"

typedef struct soft_tiles {
    uint8_t cfg[64];
    uint8_t t[8][16 * 64];
} soft_tiles;
static _Thread_local soft_tiles tl_soft;

static int soft_rows(int t) { return tl_soft.cfg[48 + t]; }
static int soft_colsb(int t) { return tl_soft.cfg[16 + 2 * t] | tl_soft.cfg[17 + 2 * t] << 8; }
static void soft_check(int t) {
    GPTC_ASSERT(tl_soft.cfg[0] == 1); /* LDTILECFG ran in this thread */
    GPTC_ASSERT(t >= 0 && t < 8 && soft_rows(t) >= 1 && soft_rows(t) <= 16 && soft_colsb(t) >= 1 &&
                soft_colsb(t) <= 64);
}

static void soft_loadconfig(const void *cfg) {
    memcpy(tl_soft.cfg, cfg, 64);
    GPTC_ASSERT(tl_soft.cfg[0] == 1);
    memset(tl_soft.t, 0, sizeof tl_soft.t);
}
static void soft_release(void) { memset(&tl_soft, 0, sizeof tl_soft); }
static void soft_zero(int t) {
    soft_check(t);
    memset(tl_soft.t[t], 0, sizeof tl_soft.t[t]);
}
static void soft_loadd(int t, const void *base, long stride) {
    soft_check(t);
    memset(tl_soft.t[t], 0, sizeof tl_soft.t[t]);
    for (int r = 0; r < soft_rows(t); r++)
        memcpy(tl_soft.t[t] + r * 64, (const char *)base + r * stride, (size_t)soft_colsb(t));
}
static void soft_stored(int t, void *base, long stride) {
    soft_check(t);
    for (int r = 0; r < soft_rows(t); r++) memcpy((char *)base + r * stride, tl_soft.t[t] + r * 64, (size_t)soft_colsb(t));
}

/* a bf16 value as fp32, a subnormal read as a zero of its sign */
static float soft_bf16(const uint8_t *p) {
    uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static float soft_ftz(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }

static void soft_dpbf16ps(int c, int a, int b) {
    soft_check(c), soft_check(a), soft_check(b);
    const int K = soft_colsb(a) / 4, N = soft_colsb(c) / 4;
    /* the shapes TDPBF16PS takes (else #UD): A rows = C rows, A pairs = B rows, B bytes = C bytes */
    GPTC_ASSERT(soft_rows(a) == soft_rows(c) && K == soft_rows(b) && soft_colsb(b) == soft_colsb(c));
    for (int m = 0; m < soft_rows(c); m++) {
        float even[16] = {0}, odd[16] = {0}, cm[16];
        const uint8_t *ar = tl_soft.t[a] + m * 64;
        for (int k = 0; k < K; k++) {
            const uint8_t *br = tl_soft.t[b] + k * 64;
            for (int n = 0; n < N; n++) {
                even[n] = soft_ftz(fmaf(soft_bf16(ar + 4 * k), soft_bf16(br + 4 * n), even[n]));
                odd[n] = soft_ftz(fmaf(soft_bf16(ar + 4 * k + 2), soft_bf16(br + 4 * n + 2), odd[n]));
            }
        }
        memcpy(cm, tl_soft.t[c] + m * 64, (size_t)N * 4);
        for (int n = 0; n < N; n++) cm[n] = soft_ftz(cm[n] + soft_ftz(even[n] + odd[n]));
        memcpy(tl_soft.t[c] + m * 64, cm, (size_t)N * 4);
    }
}

#define TILE_LOADCONFIG(cfg) soft_loadconfig(cfg)
#define TILE_RELEASE() soft_release()
#define TILE_ZERO(t) soft_zero(t)
#define TILE_LOADD(t, base, stride) soft_loadd(t, base, stride)
#define TILE_STORED(t, base, stride) soft_stored(t, base, stride)
#define TILE_DPBF16PS(c, a, b) soft_dpbf16ps(c, a, b)

#endif
