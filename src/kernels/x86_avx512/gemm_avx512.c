/* gemm_avx512.c — AVX-512 GEMM for the portable blocked driver: 12 x 32 microkernels (two zmm per
 * row, beta and bias in one shared fp32 epilogue) for fp32 (FMA) and bf16 (AVX512_BF16 vdpbf16ps on
 * k pairs), their twins that pack the next B micro-panel between their depths (from B's rows, or
 * transposing B^T's four columns at a time), and packers that transpose 16 x 16 tiles of 32-bit words
 * in registers (fp32 values, or pairs of bf16 values; each also from bf16 sources, for gemm_bf16_in16).
 * Without AVX512_BF16, gemm_bf16 is the fp32 kernel on bf16-rounded panels. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "kernels/gemm/gemm_driver.h"
#include "kernels/x86_avx512/avx512.h"
#include "kernels/x86_avx512/transpose16.h"

#define MR 12
#define NR 32

/* The epilogue of both microkernels: c (m,n) = beta*c + acc (+ bias (n) on every row), acc row i being
 * columns 0..15 in c0[i] and 16..31 in c1[i]; m <= MR, n <= NR; beta 0 overwrites. sumsq: NULL, or *sumsq =
 * the sum of squares of the values stored (gemm_driver.h), taken from the registers: the rows in order into
 * four float sums (even and odd rows, each half; lanes past n hold 0), then their lanes added. */
static inline __attribute__((always_inline)) void store_tile(__m512 c0[MR], __m512 c1[MR], float *restrict c,
                                                             int ldc, int m, int n, float beta,
                                                             const float *restrict bias, double *restrict sumsq,
                                                             const int R) {
    const __mmask16 m0 = n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1);
    const __mmask16 m1 = n >= 32 ? 0xFFFF : n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0;
    if (bias) {
        const __m512 bv0 = _mm512_maskz_loadu_ps(m0, bias), bv1 = _mm512_maskz_loadu_ps(m1, bias + 16);
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            c0[i] = _mm512_add_ps(c0[i], bv0);
            c1[i] = _mm512_add_ps(c1[i], bv1);
        }
    }
    if (beta == 0.0f) {
        for (int i = 0; i < m; i++) {
            float *r = c + (size_t)i * ldc;
            _mm512_mask_storeu_ps(r, m0, c0[i]);
            _mm512_mask_storeu_ps(r + 16, m1, c1[i]);
        }
    } else {
        const __m512 vb = _mm512_set1_ps(beta);
        for (int i = 0; i < m; i++) {
            float *r = c + (size_t)i * ldc;
            c0[i] = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, r), c0[i]);
            c1[i] = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, r + 16), c1[i]);
            _mm512_mask_storeu_ps(r, m0, c0[i]);
            _mm512_mask_storeu_ps(r + 16, m1, c1[i]);
        }
    }
    if (sumsq) {
        __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            if (i >= m) break;
            s[2 * (i & 1)] = _mm512_fmadd_ps(c0[i], c0[i], s[2 * (i & 1)]);
            s[2 * (i & 1) + 1] = _mm512_fmadd_ps(c1[i], c1[i], s[2 * (i & 1) + 1]);
        }
        *sumsq = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3])));
    }
}

/* Prefetch distance in k steps (pairs for bf16): ~16 x 12 cycles ahead of the FMAs, longer than an
 * L2 hit, so the streaming micro-panel arrives in L1 before it is read (gemm_driver.h: order). Prefetches
 * past a panel's end are harmless hints. */
#define PF_K 16

/* The lines of n elements of es bytes from element x of X on, asked for into L1 ahead of their reads */
static inline __attribute__((always_inline)) void prefetch_run(const void *X, size_t x, int es, int n) {
    const char *p = (const char *)X + x * es;
    for (int b = 0; b < n * es; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
}

/* The permutation that interleaves two runs of 16 bf16 values held in one vector's halves: word 2i <- word
 * i (depth k), word 2i+1 <- word 16+i (depth k+1): a packed depth pair (the packer's and the copying tile's) */
static inline __m512i pair_interleave(void) {
    return _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4,
                            19, 3, 18, 2, 17, 1, 16, 0);
}

/* The C tile's rows are read (beta) or written at the end of a call; asked for at its start, they are
 * in L1 by then. */
static inline __attribute__((always_inline)) void prefetch_c(const float *c, int ldc, int m) {
    for (int i = 0; i < m; i++) {
        _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (size_t)i * ldc + 16), _MM_HINT_T0);
    }
}

/* One depth k of the fp32 tile: rows 0..R-1 of c0/c1 += a[i] * the two vectors of b's row; a and b step
 * to the next depth. The micro-panels are asked for PF_K depths ahead. */
#define TILE_F32_STEP(k)                                                                                           \
    do {                                                                                                           \
        const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);                                         \
        _mm_prefetch((const char *)(b + PF_K * NR), _MM_HINT_T0);                                                 \
        _mm_prefetch((const char *)(b + PF_K * NR + 16), _MM_HINT_T0);                                            \
        if (((k) & 3) == 0) _mm_prefetch((const char *)(a + PF_K * MR), _MM_HINT_T0);                             \
        _Pragma("GCC unroll 16") for (int i = 0; i < R; i++) {                                                    \
            const __m512 ai = _mm512_set1_ps(a[i]);                                                                \
            c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);                                                                \
            c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);                                                                \
        }                                                                                                          \
        a += MR;                                                                                                   \
        b += NR;                                                                                                   \
    } while (0)

/* Rows of the next B micro-panel asked for ahead of their copy (a row every kc/rows depths of the tile, so
 * 16 rows are a few hundred nanoseconds: a trip to memory) */
#define COPY_PF_ROWS 16

/* The transposed copy (GPTC_GEMM_COPY_T32) in units: unit u moves packed rows 16*(u/Q) .. +15 of the next B
 * micro-panel's four columns 4*(u%Q) .. +3 (Q = NR/4 units per block of 16 packed rows) — the 64 bytes at
 * 64*(u/Q) of each of those columns' source rows, ldsb bytes apart: fp32 values (a packed row a depth), or bf16
 * depth pairs (a packed row a pair: 16 pairs are 64 bytes of a bf16 row too) — through two stages of
 * in-lane interleaves, each 128-bit lane then holding the four columns' words of one packed row. Four rows at a
 * time keep the tile's accumulators in their registers (a 16 x 16 transpose needs 16 more and spilled them).
 * A packed row is NR words, at dst + row*NR*4 bytes. */
#define T32_Q (NR / 4)
#define T32_UNITS(rows) ((rows) / 16 * T32_Q)
static inline __attribute__((always_inline)) const char *t32_unit_src(const char *src, size_t ldsb, int u) {
    return src + (size_t)(u % T32_Q) * 4 * ldsb + (size_t)(u / T32_Q) * 64;
}
static inline __attribute__((always_inline)) void copy_t32_unit(const char *src, size_t ldsb, char *dst, int u) {
    const char *s = t32_unit_src(src, ldsb, u);
    const __m512 r0 = _mm512_loadu_ps((const float *)s), r1 = _mm512_loadu_ps((const float *)(s + ldsb));
    const __m512 r2 = _mm512_loadu_ps((const float *)(s + 2 * ldsb));
    const __m512 r3 = _mm512_loadu_ps((const float *)(s + 3 * ldsb));
    /* lane l of a0/a1: rows 0, 1 interleaved at words 4l, 4l+1 / 4l+2, 4l+3; a2/a3 the same of rows 2, 3 */
    const __m512d a0 = _mm512_castps_pd(_mm512_unpacklo_ps(r0, r1)), a1 = _mm512_castps_pd(_mm512_unpackhi_ps(r0, r1));
    const __m512d a2 = _mm512_castps_pd(_mm512_unpacklo_ps(r2, r3)), a3 = _mm512_castps_pd(_mm512_unpackhi_ps(r2, r3));
    /* lane l of b[q]: the four rows' word 4l+q — packed row 4l+q of the four columns */
    const __m512 b[4] = {_mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2)), _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2)),
                         _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3)), _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3))};
    char *d = dst + (size_t)(u / T32_Q) * 16 * NR * 4 + (size_t)(u % T32_Q) * 16;
    for (int q = 0; q < 4; q++) {
        _mm_store_ps((float *)(d + (size_t)q * NR * 4), _mm512_castps512_ps128(b[q]));
        _mm_store_ps((float *)(d + (size_t)(4 + q) * NR * 4), _mm512_extractf32x4_ps(b[q], 1));
        _mm_store_ps((float *)(d + (size_t)(8 + q) * NR * 4), _mm512_extractf32x4_ps(b[q], 2));
        _mm_store_ps((float *)(d + (size_t)(12 + q) * NR * 4), _mm512_extractf32x4_ps(b[q], 3));
    }
}
/* Units asked for ahead of their copy: two blocks of 16 packed rows, a few hundred nanoseconds of the tile (a
 * trip to memory: the weights of an input gradient come from there), into L2 (a weight's rows a multiple of
 * 4 KiB apart share an L1 set) */
#define T32_PF_UNITS (2 * T32_Q)
static inline __attribute__((always_inline)) void prefetch_t32_unit(const char *src, size_t ldsb, int u) {
    const char *s = t32_unit_src(src, ldsb, u);
    for (int i = 0; i < 4; i++) _mm_prefetch(s + (size_t)i * ldsb, _MM_HINT_T1);
}
/* The transposed copy inside a tile (tile_f32, tile_bf16): the units of `rows` packed rows spread over the
 * tile's n steps, STEP(i) one step (a depth, or a depth pair) with i the tile's step counter; each unit asked
 * for T32_PF_UNITS ahead (the first ones at the start; those past the last, the next tile's, by the last). */
#define T32_COPY_OVER_STEPS(STEP, i, n, src, ldsb, dst, rows)                                                      \
    do {                                                                                                           \
        const int units_ = T32_UNITS(rows), every_ = units_ > 0 ? (n) / units_ : (n);                              \
        for (int u_ = 0; u_ < units_ && u_ < T32_PF_UNITS; u_++) prefetch_t32_unit((src), (ldsb), u_);            \
        for (int u_ = 0; u_ < units_; u_++) {                                                                      \
            for (int e_ = 0; e_ < every_; e_++, (i)++) STEP(i);                                                    \
            copy_t32_unit((src), (ldsb), (dst), u_);                                                               \
            prefetch_t32_unit((src), (ldsb), u_ + T32_PF_UNITS);                                                   \
        }                                                                                                          \
    } while (0)

/* fp32: c (m,n) = beta*c + a (MR,kc) b (kc,NR) [+ bias (n)]; a[k*MR+i], b[k*NR+j] packed floats,
 * m <= R <= MR: only the first R rows are computed (R a constant: the body for a whole tile, or for the
 * few rows of a matrix's ragged last one). Each element is the same sum in the same order whatever R.
 * Meanwhile (kernel_copy; rows 0, a constant, for the plain kernel: none) rows r = 0..rows-1 (rows <= kc)
 * of NR floats are copied from src + r*lds to dst + r*NR: one row after every kc/rows depths, each asked
 * for COPY_PF_ROWS rows ahead (the first ones at the start; those of the rows after the last, the next
 * tile's, by the last). tr (a constant): the transposed form instead, rows a multiple of 16, its units
 * (T32_UNITS) spread the same way over the depths and asked for T32_PF_UNITS ahead. */
static inline __attribute__((always_inline)) void tile_f32(int kc, const float *restrict a, const float *restrict b,
                                                           float *restrict c, int ldc, int m, int n, float beta,
                                                           const float *restrict bias, const float *restrict src,
                                                           size_t lds, float *restrict dst, int rows,
                                                           double *restrict sumsq, const int tr, const int R) {
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) c0[i] = c1[i] = _mm512_setzero_ps();
    prefetch_c(c, ldc, m);
    int k = 0;
    if (tr) {
        T32_COPY_OVER_STEPS(TILE_F32_STEP, k, kc, (const char *)src, lds * sizeof(float), (char *)dst, rows);
    } else {
        for (int r = 0; r < rows && r < COPY_PF_ROWS; r++) prefetch_run(src, r * lds, sizeof(float), NR);
        const int every = rows > 0 ? kc / rows : kc;
        for (int r = 0; r < rows; r++) {
            for (int e = 0; e < every; e++, k++) TILE_F32_STEP(k);
            const float *s = src + r * lds;
            _mm512_store_ps(dst + (size_t)r * NR, _mm512_loadu_ps(s));
            _mm512_store_ps(dst + (size_t)r * NR + 16, _mm512_loadu_ps(s + 16));
            prefetch_run(s, COPY_PF_ROWS * lds, sizeof(float), NR); /* past the last row: the next tile's first */
        }
    }
#pragma GCC unroll 4
    for (; k < kc; k++) TILE_F32_STEP(k);
    store_tile(c0, c1, c, ldc, m, n, beta, bias, sumsq, R);
}

/* Rows a ragged last tile computes: GPT-2's B*T = 256 is 21 tiles of 12 and one of 4, which as a whole
 * tile would spend 2/3 of its multiply-adds on zero padding (3 % of the product). */
#define KERNEL_BY_ROWS(tile, ...)                                                                                  \
    do {                                                                                                           \
        if (m > 8)                                                                                                 \
            tile(__VA_ARGS__, MR);                                                                                 \
        else if (m > 4)                                                                                            \
            tile(__VA_ARGS__, 8);                                                                                  \
        else                                                                                                       \
            tile(__VA_ARGS__, 4);                                                                                  \
    } while (0)

static void kernel_avx512(int kc, const void *a, const void *b, float *restrict c, int ldc, int m, int n,
                          float beta, const float *restrict bias, double *sumsq) {
    KERNEL_BY_ROWS(tile_f32, kc, a, b, c, ldc, m, n, beta, bias, NULL, 0, NULL, 0, sumsq, 0);
}

static void kernel_avx512_copy(int kc, const void *a, const void *b, float *restrict c, int ldc, int m, int n,
                               float beta, const float *restrict bias, double *sumsq, const void *src, size_t lds,
                               int form, void *dst, int rows) {
    GPTC_ASSERT(form == GPTC_GEMM_COPY_F32 || (form == GPTC_GEMM_COPY_T32 && rows % 16 == 0));
    if (form == GPTC_GEMM_COPY_T32)
        KERNEL_BY_ROWS(tile_f32, kc, a, b, c, ldc, m, n, beta, bias, src, lds, dst, rows, sumsq, 1);
    else
        KERNEL_BY_ROWS(tile_f32, kc, a, b, c, ldc, m, n, beta, bias, src, lds, dst, rows, sumsq, 0);
}

/* A 32-bit word that may alias the bf16 pairs the packers write. */
typedef uint32_t bf16_pair __attribute__((may_alias));

/* One depth pair q of the bf16 tile (tile_bf16): rows 0..R-1 of c0/c1 += a's pair of row i . b's pairs */
#define TILE_BF16_STEP(q)                                                                                          \
    do {                                                                                                           \
        const __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 1);             \
        _mm_prefetch((const char *)(b + 2 * PF_K), _MM_HINT_T0);                                                  \
        _mm_prefetch((const char *)(b + 2 * PF_K + 1), _MM_HINT_T0);                                              \
        if (((q) & 3) == 0) _mm_prefetch((const char *)(a + PF_K * MR), _MM_HINT_T0);                             \
        _Pragma("GCC unroll 16") for (int i = 0; i < R; i++) {                                                    \
            const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);                                            \
            c0[i] = _mm512_dpbf16_ps(c0[i], ai, b0);                                                               \
            c1[i] = _mm512_dpbf16_ps(c1[i], ai, b1);                                                               \
        }                                                                                                          \
        a += MR;                                                                                                   \
        b += 2;                                                                                                    \
    } while (0)

/* depths per block of the copying packers: each micro-panel's rows of a block are written together */
#define PACK_KB 8 /* even: the bf16 packer's blocks are whole pairs */
/* values ahead in a row that the transposing packers ask for (four lines of floats) */
#define PACK_PF_AHEAD 64

/* Whether rows ldx elements apart (bf16 values if x16, else floats) all fall in one set of a 4 KiB-way L1 */
static inline int rows_in_one_l1_set(int ldx, int x16) { return (size_t)ldx * (x16 ? 2 : 4) % 4096 == 0; }

static inline __mmask16 low_mask(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* The 16 values (lanes of m, the others 0) at X + idx as fp32: floats, or bf16 values (x16) widened. */
static inline __attribute__((always_inline)) __m512 load_f32(const void *X, int x16, size_t idx, __mmask16 m) {
    if (!x16) return _mm512_maskz_loadu_ps(m, (const float *)X + idx);
    const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)X + idx);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The packer contract of gemm_driver.h, for fp32 sources or (x16) bf16 ones widened. trans: each k is
 * a contiguous run of r values (a masked copy); not trans: each row is a contiguous run of k values,
 * moved 16 x 16 at a time through transpose16. Rows past m and k past kc read as zero. */
static inline __attribute__((always_inline)) void pack_f32_any(int trans, const void *X, int x16, int ldx, int i0,
                                                               int k0, int m, int kc, int r, void *out_) {
    float *out = out_;
    int p = 0;
    if (trans && r % 16 == 0) {
        /* whole micro-panels of a multiple of 16 rows, PACK_KB depths at a time: the block's runs are read
         * from the start (the prefetchers follow them), then each micro-panel's rows of the block written
         * in one go. Writing every micro-panel's row k before the next k (the micro-panels kc x r x 4 bytes
         * apart, so in one L1 set) was 7-12% slower on GPT-2's forward products at B.T = 256 (Zen 5). */
        const int whole = m / r * r;
        for (int kb = 0; kb < kc; kb += PACK_KB) {
            const int ke = kc - kb < PACK_KB ? kc : kb + PACK_KB;
            for (int q = 0; q < whole; q += r)
                for (int k = kb; k < ke; k++) {
                    const size_t x = (size_t)(k0 + k) * ldx + i0 + q;
                    float *o = out + (size_t)q * kc + (size_t)k * r;
                    for (int g = 0; g < r; g += 16) _mm512_storeu_ps(o + g, load_f32(X, x16, x + g, 0xFFFF));
                }
        }
        p = whole;
    } else if (trans && r < 16 && rows_in_one_l1_set(ldx, x16)) {
        /* A's micro-panels (r = 12: a weight gradient's dout^T) from rows a multiple of 4 KiB apart: one depth
         * at a time across all of them, so that each source line is used whole when read. One micro-panel at a
         * time down all kc depths (below), a line's other values waited kc depths, its rows all in one L1 set:
         * a weight gradient with dout rows of 12 KiB (3072 x 768 x 1024, 2 threads, twelve rotating operand
         * sets) ran at 0.90-0.91 of its speed with A left as packed, 0.95 in this order. With rows 3 or 9 KiB
         * apart this order was 0.5-1.5 % slower than the one below (docs/performance.md, sixteenth session). */
        const int whole = m / r * r;
        const __mmask16 wm = low_mask(r);
        for (int k = 0; k < kc; k++) {
            const size_t x = (size_t)(k0 + k) * ldx + i0;
            for (int q = 0; q < whole; q += r)
                _mm512_mask_storeu_ps(out + (size_t)q * kc + (size_t)k * r, wm, load_f32(X, x16, x + q, wm));
        }
        p = whole;
    }
    for (; p < m; p += r) {
        const int rows = m - p < r ? m - p : r;
        float *o = out + (size_t)p * kc;
        for (int g = 0; g < r; g += 16) {
            const int w = r - g < 16 ? r - g : 16, nrow = rows - g < 0 ? 0 : rows - g < w ? rows - g : w;
            const __mmask16 wm = low_mask(w), rm = low_mask(nrow);
            if (trans) {
                size_t x = (size_t)k0 * ldx + i0 + p + g;
                for (int k = 0; k < kc; k++, x += ldx)
                    _mm512_mask_storeu_ps(o + (size_t)k * r + g, wm, load_f32(X, x16, x, rm));
                continue;
            }
            for (int k = 0; k < kc; k += 16) {
                const int kk = kc - k < 16 ? kc - k : 16;
                const __mmask16 km = low_mask(kk);
                __m512 t[16];
                for (int i = 0; i < 16; i++) {
                    const size_t x = (size_t)(i0 + p + g + i) * ldx + k0 + k;
                    t[i] = _mm512_setzero_ps();
                    if (i >= nrow) continue;
                    prefetch_run(X, x + PACK_PF_AHEAD, x16 ? 2 : 4, 1);
                    t[i] = load_f32(X, x16, x, km);
                }
                transpose16(t);
                for (int j = 0; j < kk; j++) _mm512_mask_storeu_ps(o + (size_t)(k + j) * r + g, wm, t[j]);
            }
        }
    }
}

static void pack_avx512(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    pack_f32_any(trans, X, 0, ldx, i0, k0, m, kc, r, out);
}
static void pack16_avx512(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    pack_f32_any(trans, X, 1, ldx, i0, k0, m, kc, r, out);
}

/* Two runs of 16 values at X + lo (lanes of mlo) and X + hi (lanes of mhi; the others 0, and nothing
 * read where a mask is 0) as 32 bf16 words, lo's in words 0..15 and hi's in 16..31: floats rounded to
 * nearest even by vcvtne2ps2bf16, or (x16) bf16 values as they are. */
static inline __attribute__((always_inline)) __m512i load_bf16_runs(const void *X, int x16, size_t lo, size_t hi,
                                                                      __mmask16 mlo, __mmask16 mhi) {
    if (x16) {
        const uint16_t *x = X;
        const __m256i l = _mm256_maskz_loadu_epi16(mlo, x + lo), h = _mm256_maskz_loadu_epi16(mhi, x + hi);
        return _mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1);
    }
    const float *x = X;
    return (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(mhi, x + hi), _mm512_maskz_loadu_ps(mlo, x + lo));
}

/* The bf16 packer (gemm_driver.h layout with s = 2, kcp = kc rounded up to even), for fp32 sources
 * rounded to bf16 or (x16) bf16 ones. trans: rows k and k+1 are two runs of r values; loaded together
 * (k's 16 values in words 0..15, k+1's in 16..31), one word permute interleaves them into 16 pairs. Not
 * trans: each row's run of 32 k values is already 16 pairs; 16 rows of pairs go through transpose16.
 * Rows past m and k past kc read as zero. */
static inline __attribute__((always_inline)) void pack_pairs_any(int trans, const void *X, int x16, int ldx, int i0,
                                                                 int k0, int m, int kc, int r, void *out_) {
    uint16_t *out = out_;
    const int kcp = (kc + 1) & ~1;
    const __m512i interleave = pair_interleave();
    int p = 0;
    if (trans && r % 16 == 0) {
        /* whole micro-panels of a multiple of 16 rows, PACK_KB depths (pairs of runs) at a time, as
         * pack_f32_any */
        const int whole = m / r * r;
        for (int kb = 0; kb < kc; kb += PACK_KB) {
            const int ke = kc - kb < PACK_KB ? kc : kb + PACK_KB;
            for (int q = 0; q < whole; q += r)
                for (int k = kb; k < ke; k += 2) {
                    const size_t x = (size_t)(k0 + k) * ldx + i0 + q;
                    const __mmask16 m1 = k + 1 < kc ? 0xFFFF : 0;
                    uint16_t *o = out + (size_t)q * kcp + (size_t)k * r;
                    for (int g = 0; g < r; g += 16) {
                        const __m512i t = load_bf16_runs(X, x16, x + g, x + ldx + g, 0xFFFF, m1);
                        _mm512_storeu_si512(o + 2 * g, _mm512_permutexvar_epi16(interleave, t));
                    }
                }
        }
        p = whole;
    } else if (trans && r < 16 && rows_in_one_l1_set(ldx, x16)) {
        /* A's micro-panels from rows a multiple of 4 KiB apart, one depth pair at a time across all of them, as
         * pack_f32_any */
        const int whole = m / r * r;
        const __mmask16 wm = low_mask(r);
        for (int k = 0; k < kc; k += 2) {
            const size_t x = (size_t)(k0 + k) * ldx + i0;
            for (int q = 0; q < whole; q += r) {
                const __m512i t = load_bf16_runs(X, x16, x + q, x + ldx + q, wm, k + 1 < kc ? wm : 0);
                _mm512_mask_storeu_epi32(out + (size_t)q * kcp + (size_t)k * r, wm,
                                         _mm512_permutexvar_epi16(interleave, t));
            }
        }
        p = whole;
    }
    for (; p < m; p += r) {
        const int rows = m - p < r ? m - p : r;
        uint16_t *o = out + (size_t)p * kcp;
        for (int g = 0; g < r; g += 16) {
            const int w = r - g < 16 ? r - g : 16, nrow = rows - g < 0 ? 0 : rows - g < w ? rows - g : w;
            const __mmask16 wm = low_mask(w), rm = low_mask(nrow);
            if (trans) {
                size_t x = (size_t)k0 * ldx + i0 + p + g;
                for (int k = 0; k < kc; k += 2, x += 2 * (size_t)ldx) {
                    const __m512i t = load_bf16_runs(X, x16, x, x + ldx, rm, k + 1 < kc ? rm : 0);
                    _mm512_mask_storeu_epi32(o + (size_t)k * r + 2 * g, wm, _mm512_permutexvar_epi16(interleave, t));
                }
                continue;
            }
            for (int k = 0; k < kc; k += 32) {
                const int kk = kc - k < 32 ? kc - k : 32;
                const __mmask16 k0m = low_mask(kk), k1m = low_mask(kk > 16 ? kk - 16 : 0);
                __m512 t[16];
                for (int i = 0; i < 16; i++) {
                    const size_t x = (size_t)(i0 + p + g + i) * ldx + k0 + k;
                    t[i] = _mm512_setzero_ps();
                    if (i >= nrow) continue;
                    /* as pack_f32_any, the 32 values this step reads */
                    prefetch_run(X, x + PACK_PF_AHEAD, x16 ? 2 : 4, 32);
                    /* k..k+15 in words 0..15, k+16..k+31 in 16..31: already 16 pairs in order */
                    t[i] = (__m512)load_bf16_runs(X, x16, x, x + 16, k0m, k1m);
                }
                transpose16(t);
                for (int j = 0; j < (kk + 1) / 2; j++)
                    _mm512_mask_storeu_epi32(o + (size_t)(k + 2 * j) * r + 2 * g, wm, (__m512i)t[j]);
            }
        }
    }
}

/* bf16: the same tile from k-pair panels (gemm_driver.h layout with s = 2): per pair q, a holds MR
 * words (row i's bf16 values at k = 2q, 2q+1) and b holds NR words (column j's two values), 64 bytes
 * per 16 columns. Each vdpbf16ps adds a0*b0 + a1*b1 to 16 fp32 sums; the zero-padded second value of
 * an odd kc's last pair contributes 0. R as tile_f32. Meanwhile (kernel_copy; rows 0, a constant, for the
 * plain kernel: none; kc even) packed rows (depth pairs) r = 0..rows-1 of the next B micro-panel are
 * written: pair r from bf16 source rows 2r and 2r + 1 (lds elements apart) interleaved as pack_pairs_any
 * interleaves them, to dst + r*NR words — rows of values in order, or (panels) runs of matvec's bf16 panel
 * form, word i holding columns i and 16 + i; one pair after every pairs/rows depth pairs, each asked for
 * COPY_PF_ROWS pairs ahead. tr (a constant): the transposed form of bf16 rows instead, as tile_f32's. */
static inline __attribute__((always_inline)) void tile_bf16(int kc, const bf16_pair *restrict a,
                                                                 const __m512i *restrict b, float *restrict c,
                                                                 int ldc, int m, int n, float beta,
                                                                 const float *restrict bias, const void *src,
                                                                 size_t lds, int panels, void *dst_, int rows,
                                                                 double *restrict sumsq, const int tr, const int R) {
    uint16_t *dst = dst_;
    const __m512i interleave = pair_interleave();
    /* from a panel run a (row 2r) and b (row 2r + 1), halfwords 2i = column i, 2i + 1 = column 16 + i: the
     * pairs of columns 0..15 take a's and b's even halfwords, those of 16..31 their odd ones */
    const __m512i even = _mm512_set_epi16(62, 30, 60, 28, 58, 26, 56, 24, 54, 22, 52, 20, 50, 18, 48, 16, 46, 14, 44,
                                          12, 42, 10, 40, 8, 38, 6, 36, 4, 34, 2, 32, 0);
    const __m512i odd = _mm512_add_epi16(even, _mm512_set1_epi16(1));
    const int es = sizeof(uint16_t);
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) c0[i] = c1[i] = _mm512_setzero_ps();
    prefetch_c(c, ldc, m);
    const int pairs = (kc + 1) / 2;
    int q = 0;
    if (tr) {
        T32_COPY_OVER_STEPS(TILE_BF16_STEP, q, pairs, (const char *)src, lds * es, (char *)dst, rows);
    } else {
        for (int r = 0; r < 2 * rows && r < 2 * COPY_PF_ROWS; r++) prefetch_run(src, (size_t)r * lds, es, NR);
        const int every = rows > 0 ? pairs / rows : pairs;
        for (int r = 0; r < rows; r++) {
            for (int e = 0; e < every; e++, q++) TILE_BF16_STEP(q);
            const size_t x = (size_t)2 * r * lds;
            if (panels) {
                const __m512i ra = _mm512_loadu_si512((const uint16_t *)src + x);
                const __m512i rb = _mm512_loadu_si512((const uint16_t *)src + x + lds);
                _mm512_store_si512(dst + (size_t)r * 2 * NR, _mm512_permutex2var_epi16(ra, even, rb));
                _mm512_store_si512(dst + (size_t)r * 2 * NR + NR, _mm512_permutex2var_epi16(ra, odd, rb));
            } else {
                for (int g = 0; g < NR; g += 16) {
                    const __m512i t = load_bf16_runs(src, 1, x + g, x + lds + g, 0xFFFF, 0xFFFF);
                    _mm512_store_si512(dst + (size_t)r * 2 * NR + 2 * g, _mm512_permutexvar_epi16(interleave, t));
                }
            }
            /* past the last pair: the next tile's first (a hint never faults) */
            prefetch_run(src, x + (size_t)2 * COPY_PF_ROWS * lds, es, NR);
            prefetch_run(src, x + (size_t)(2 * COPY_PF_ROWS + 1) * lds, es, NR);
        }
    }
#pragma GCC unroll 4
    for (; q < pairs; q++) TILE_BF16_STEP(q);
    store_tile(c0, c1, c, ldc, m, n, beta, bias, sumsq, R);
}

static void kernel_avx512_bf16(int kc, const void *a, const void *b, float *restrict c, int ldc, int m, int n,
                               float beta, const float *restrict bias, double *sumsq) {
    KERNEL_BY_ROWS(tile_bf16, kc, a, b, c, ldc, m, n, beta, bias, NULL, 0, 0, NULL, 0, sumsq, 0);
}

static void kernel_avx512_bf16_copy(int kc, const void *a, const void *b, float *restrict c, int ldc, int m, int n,
                                    float beta, const float *restrict bias, double *sumsq, const void *src, size_t lds,
                                    int form, void *dst, int rows) {
    GPTC_ASSERT(kc % 2 == 0 && (form == GPTC_GEMM_COPY_BF16 || form == GPTC_GEMM_COPY_PANELS16 ||
                                (form == GPTC_GEMM_COPY_T32 && rows % 16 == 0)));
    if (form == GPTC_GEMM_COPY_T32)
        KERNEL_BY_ROWS(tile_bf16, kc, a, b, c, ldc, m, n, beta, bias, src, lds, 0, dst, rows, sumsq, 1);
    else
        KERNEL_BY_ROWS(tile_bf16, kc, a, b, c, ldc, m, n, beta, bias, src, lds, form == GPTC_GEMM_COPY_PANELS16, dst,
                       rows, sumsq, 0);
}

static void pack_avx512_bf16(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    pack_pairs_any(trans, X, 0, ldx, i0, k0, m, kc, r, out);
}
static void pack16_avx512_bf16(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r,
                               void *out) {
    pack_pairs_any(trans, X, 1, ldx, i0, k0, m, kc, r, out);
}

/* Blocking: gptc_gemm_block_for_caches sets mc, kc, nc and the loop order from this CPU's caches when
 * the overlay is installed (gemm_driver.c gives the rules and the measurements). The values below are
 * the fallback when the cache sizes are unknown: Zen 4's (1 MiB L2, 32 MiB L3), where KC = 768 covers
 * GPT-2's C in one pass. bf16 panels are half the bytes per element, so KC doubles at the same bytes.
 * Workspace bound: per thread the driver packs round_up(min(kc, K), kstep) x esize bytes per row, which
 * for bf16 (kc twice fp32's, 2 bytes) is <= fp32's min(kc, K) x 4 for every K >= 1, with the same rows
 * and columns — so gemm_bf16 never needs more packing bytes than the fp32 gemm on the same shape. */
static gptc_gemm_isa k_isa = {
    .mr = MR, .nr = NR, .mc = 144, .kc = 768, .nc = 3072, .esize = 4, .kstep = 1,
    .kernel = kernel_avx512, .kernel_copy = kernel_avx512_copy, .copy_t32 = 1, .pack = pack_avx512,
    .pack16 = pack16_avx512, .kernel_sumsq = 1,
};

static gptc_gemm_isa k_isa_bf16 = {
    .mr = MR, .nr = NR, .mc = 144, .kc = 1536, .nc = 3072, .esize = 2, .kstep = 2,
    .kernel = kernel_avx512_bf16, .kernel_copy = kernel_avx512_bf16_copy, .copy_t32 = 1,
    .pack = pack_avx512_bf16, .pack16 = pack16_avx512_bf16, .kernel_sumsq = 1,
};

/* p[0..n) rounded to bf16 in place, 16 at a time: gptc_gemm_round_bf16's bits (ties to even, NaNs kept
 * quiet). The emulated gemm_bf16 rounds every packed panel; the portable pass costs ~4 % of a 512-row
 * product (measured on GPT-2's prefill shapes), this one a fraction of that. */
static void round_bf16_avx512(float *p, size_t n) {
    const __m512i lsb = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff), top = _mm512_set1_epi32((int)0xffff0000u);
    const __m512i quiet = _mm512_set1_epi32(0x00400000), mag = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i x = _mm512_loadu_si512(p + i);
        __m512i rne = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(x, half), _mm512_and_si512(_mm512_srli_epi32(x, 16), lsb)), top);
        __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, mag), inf);
        _mm512_storeu_si512(p + i, _mm512_mask_blend_epi32(nan, rne, _mm512_and_si512(_mm512_or_si512(x, quiet), top)));
    }
    gptc_gemm_round_bf16(p + i, n - i);
}

/* No AVX512_BF16, or an Intel core, where vdpbf16ps issues at half the FMA rate (measured on a Xeon,
 * family 6 model 207: 86.6 against 176.4 GFLOP/s fp32 on 1 thread): the fp32 kernel and blocking on
 * panels rounded to bf16 (same workspace as gemm); products of bf16 values are exact in fp32. */
static gptc_gemm_isa k_isa_bf16_emulated = {
    .mr = MR, .nr = NR, .mc = 144, .kc = 768, .nc = 3072, .esize = 4, .kstep = 1, .round_bf16 = 1,
    .round = round_bf16_avx512, .kernel = kernel_avx512, .pack = pack_avx512, .pack16 = pack16_avx512,
    .kernel_sumsq = 1,
};

static void gemm_avx512(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                        int ldb, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked(&k_isa, transA, transB, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
}

void gptc_avx512_gemm_bf16_dp(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                              int ldb, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked(&k_isa_bf16, transA, transB, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
}

void gptc_avx512_gemm_bf16_emulated(int transA, int transB, int M, int N, int K, const float *A, int lda,
                                    const float *B, int ldb, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked(&k_isa_bf16_emulated, transA, transB, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
}

void gptc_avx512_gemm_bf16_dp_in16(int transA, int transB, int M, int N, int K, const void *A, int lda,
                                   const void *B, int ldb, int in16, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked_in16(&k_isa_bf16, transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C, ldc);
}

void gptc_avx512_gemm_bf16_emulated_in16(int transA, int transB, int M, int N, int K, const void *A, int lda,
                                         const void *B, int ldb, int in16, float beta, const float *bias, float *C,
                                         int ldc) {
    gptc_gemm_blocked_in16(&k_isa_bf16_emulated, transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C, ldc);
}

/* Whether gemm_bf16 runs vdpbf16ps: where the CPU has it and it is not slower than fp32 FMAs on
 * rounded operands (Intel cores issue it at half the FMA rate; AMD's Zen 4 and 5 at twice). */
bool gptc_avx512_bf16_native(void) {
    const gptc_cpu_info *c = gptc_cpu();
    return c->avx512bf16 && strcmp(c->vendor, "GenuineIntel") != 0;
}

void gptc_avx512_overlay_gemm(gptc_kernels *k) {
    const gptc_cpu_info *c = gptc_cpu();
    gptc_gemm_block_for_caches(&k_isa, c);
    gptc_gemm_block_for_caches(&k_isa_bf16, c);
    gptc_gemm_block_for_caches(&k_isa_bf16_emulated, c);
    k->gemm = gemm_avx512;
    k->gemm_isa = &k_isa;
    bool native = gptc_avx512_bf16_native();
    k->gemm_bf16 = native ? gptc_avx512_gemm_bf16_dp : gptc_avx512_gemm_bf16_emulated;
    k->gemm_bf16_in16 = native ? gptc_avx512_gemm_bf16_dp_in16 : gptc_avx512_gemm_bf16_emulated_in16;
    k->gemm_bf16_isa = native ? &k_isa_bf16 : &k_isa_bf16_emulated;
}

void gptc_avx512_gemm_pack(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    pack_avx512(trans, X, ldx, i0, k0, m, kc, r, out);
}

void gptc_avx512_gemm_pack16(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    pack16_avx512(trans, X, ldx, i0, k0, m, kc, r, out);
}

void gptc_avx512_gemm_pack16_bf16(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r,
                                  void *out) {
    pack16_avx512_bf16(trans, X, ldx, i0, k0, m, kc, r, out);
}

void gptc_avx512_gemm_pack_bf16(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    pack_avx512_bf16(trans, X, ldx, i0, k0, m, kc, r, out);
}
