/* gemm_amx.c — AMX-BF16 gemm_bf16 for the portable blocked driver: a 32 x 32 microkernel of four
 * 16 x 16 fp32 accumulator tiles, fed per 32 k by two A tiles and two B tiles through tdpbf16ps; its A
 * packer (rows of 32 consecutive k values, gemm_driver.h's layout with s = 32) and B packer (k pairs,
 * the vdpbf16ps layout padded to 32 k); the per-thread tile configuration; the tdpbf16ps peak probe.
 * Built with the AVX-512 flags and -mamx-tile -mamx-bf16 (the packers and the epilogue are AVX-512 and
 * AVX512_BF16); called only when gptc_cpu_amx_usable() (CPUID, XCR0 and Linux's permission).
 *
 * Built with GPTC_AMX_SOFT (gemm_amx_soft.c) the same code runs its tile instructions in C
 * (amx_soft.h), so that the tests check the packers, the tile plan and the epilogue on CPUs without
 * AMX; that build exports only gptc_amx_soft_gemm_bf16. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "kernels/gemm/gemm_driver.h"
#include "kernels/x86_amx/amx.h"
#include "kernels/x86_avx512/avx512.h"
#include "kernels/x86_avx512/transpose16.h"

#ifdef GPTC_AMX_SOFT
#include "kernels/x86_amx/amx_soft.h"
#else
#define TILE_LOADCONFIG(cfg) _tile_loadconfig(cfg)
#define TILE_RELEASE() _tile_release()
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_LOADD(t, base, stride) _tile_loadd(t, base, stride)
#define TILE_STORED(t, base, stride) _tile_stored(t, base, stride)
#define TILE_DPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)
#endif

#define MR 32
#define NR 32
#define KB 32 /* k values per tile row: 64 bytes of bf16 */

/* The tiles (fixed numbers: the instructions encode them). C (32,32) fp32 is four accumulators, C_ij
 * rows 16i.., columns 16j..; A_i is rows 16i..16i+15 of the A micro-panel for 32 k; B_j columns
 * 16j..16j+15 of the B micro-panel for the same 32 k (16 k pairs). Every tile: 16 rows x 64 bytes. */
#define T_C00 0
#define T_C01 1
#define T_C10 2
#define T_C11 3
#define T_A0 4
#define T_A1 5
#define T_B0 6
#define T_B1 7

/* LDTILECFG's 64-byte operand: palette 1, then per tile its bytes per row and rows (unused fields 0). */
typedef struct __attribute__((aligned(64))) tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16]; /* tiles 0..7; 8..15 reserved, 0 */
    uint8_t rows[16];   /* tiles 0..7; 8..15 reserved, 0 */
} tile_config;
_Static_assert(sizeof(tile_config) == 64, "LDTILECFG reads 64 bytes");

/* A static constant: gcc's _tile_loadconfig tells the compiler of only 8 of the 64 bytes it reads, so
 * a configuration built on the stack could lose the stores of the other 56. */
static const tile_config k_config = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

/* The driver's per-thread hooks: tile state is per thread, so every thread of a call configures its
 * tiles before its first microkernel and releases them after its last (TILERELEASE returns them to
 * the INIT state, which the OS need not save on a context switch). */
static void amx_thread_begin(void) { TILE_LOADCONFIG(&k_config); }
static void amx_thread_end(void) { TILE_RELEASE(); }

static inline __mmask16 low_mask(int n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* c (m,n) = beta*c + a (MR,kc) b (kc,NR) [+ bias (n)], a and b packed by pack_a / pack_b below (kc
 * rounded up to 32 with zeros). Per 32 k: load A0, A1 (rows of 64 bytes, one after another) and B0,
 * B1 (16 k-pair rows of NR words: stride NR*4 bytes, B1 64 bytes in), four tdpbf16ps. A whole tile
 * (m = MR, n = NR) with beta 0 or 1 and no bias goes straight between C and the accumulators (loaded
 * for beta 1, zeroed for 0); any other through a 32 x 32 buffer and an AVX-512 epilogue with masked
 * stores, as the AVX-512 kernels do. Which way an element goes depends on M, N and K only, so the
 * result is the same for any thread count. */
static void kernel_amx(int kc, const void *a_, const void *b_, float *restrict c, int ldc, int m, int n, float beta,
                       const float *restrict bias, double *sumsq) { /* sumsq: not filled (kernel_sumsq 0) */
    const char *a = a_, *b = b_;
    const long cs = (long)ldc * (long)sizeof(float); /* C's row stride in bytes */
    const int direct = m == MR && n == NR && !bias && (beta == 0.0f || beta == 1.0f);
    if (direct && beta == 1.0f) {
        TILE_LOADD(T_C00, c, cs);
        TILE_LOADD(T_C01, c + 16, cs);
        TILE_LOADD(T_C10, c + (size_t)16 * ldc, cs);
        TILE_LOADD(T_C11, c + (size_t)16 * ldc + 16, cs);
    } else {
        TILE_ZERO(T_C00);
        TILE_ZERO(T_C01);
        TILE_ZERO(T_C10);
        TILE_ZERO(T_C11);
    }
    const int nkb = (kc + KB - 1) / KB;
    for (int q = 0; q < nkb; q++) {
        const char *aq = a + (size_t)q * MR * KB * 2;     /* MR rows of 64 bytes */
        const char *bq = b + (size_t)q * (KB / 2) * NR * 4; /* 16 k pairs of NR words */
        TILE_LOADD(T_A0, aq, 64);
        TILE_LOADD(T_A1, aq + 16 * 64, 64);
        TILE_LOADD(T_B0, bq, NR * 4);
        TILE_LOADD(T_B1, bq + 64, NR * 4);
        TILE_DPBF16PS(T_C00, T_A0, T_B0);
        TILE_DPBF16PS(T_C01, T_A0, T_B1);
        TILE_DPBF16PS(T_C10, T_A1, T_B0);
        TILE_DPBF16PS(T_C11, T_A1, T_B1);
    }
    if (direct) {
        TILE_STORED(T_C00, c, cs);
        TILE_STORED(T_C01, c + 16, cs);
        TILE_STORED(T_C10, c + (size_t)16 * ldc, cs);
        TILE_STORED(T_C11, c + (size_t)16 * ldc + 16, cs);
        return;
    }
    float acc[MR * NR] __attribute__((aligned(64)));
    TILE_STORED(T_C00, acc, NR * 4);
    TILE_STORED(T_C01, acc + 16, NR * 4);
    TILE_STORED(T_C10, acc + 16 * NR, NR * 4);
    TILE_STORED(T_C11, acc + 16 * NR + 16, NR * 4);
    const __mmask16 m0 = low_mask(n), m1 = low_mask(n - 16);
    const __m512 bv0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    const __m512 bv1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
    const __m512 vb = _mm512_set1_ps(beta);
    for (int i = 0; i < m; i++) {
        float *r = c + (size_t)i * ldc;
        __m512 v0 = _mm512_load_ps(acc + i * NR), v1 = _mm512_load_ps(acc + i * NR + 16);
        if (bias) v0 = _mm512_add_ps(v0, bv0), v1 = _mm512_add_ps(v1, bv1);
        if (beta != 0.0f) {
            v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, r), v0);
            v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, r + 16), v1);
        }
        _mm512_mask_storeu_ps(r, m0, v0);
        _mm512_mask_storeu_ps(r + 16, m1, v1);
    }
}

/* A's packer (the gptc_gemm_pack contract, r a multiple of 16; gemm_driver.h's layout with s = 32):
 * per micro-panel and block of 32 k, r rows of 64 bytes, row i's 32 k values in order, rounded to
 * bf16 (nearest even, vcvtne2ps2bf16). Not trans: a row's k values are contiguous, converted 32 at a
 * time. Trans (X stored (K, M)): rows k and k+1 are runs of the 16 rows' values; converted together and
 * interleaved into 16 words (row i's pair) as the AVX-512 bf16 packer does, 16 pairs make a 16 x 16
 * block of words that transpose16 turns into 16 rows of 32 k. Rows past m and k past kc are zero. */
static void pack_a_amx(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out_) {
    uint16_t *out = out_;
    const int kcp = (kc + KB - 1) / KB * KB;
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                                22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    GPTC_ASSERT(r % 16 == 0);
    for (int p = 0; p < m; p += r) {
        const int rows = m - p < r ? m - p : r;
        uint16_t *o = out + (size_t)p * kcp;
        for (int kb = 0; kb < kcp; kb += KB) {
            uint16_t *ob = o + (size_t)kb * r; /* this block: r rows of KB values */
            const int kk = kc - kb;            /* >= 1 valid k values here */
            if (!trans) {
                const __mmask16 k0m = low_mask(kk), k1m = low_mask(kk - 16);
                for (int i = 0; i < r; i++) {
                    __m512i v = _mm512_setzero_si512();
                    if (i < rows) {
                        const float *x = X + (size_t)(i0 + p + i) * ldx + k0 + kb;
                        v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(k1m, x + 16), _mm512_maskz_loadu_ps(k0m, x));
                    }
                    _mm512_storeu_si512(ob + (size_t)i * KB, v);
                }
                continue;
            }
            for (int g = 0; g < r; g += 16) {
                const __mmask16 rm = low_mask(rows - g);
                const float *x = X + (size_t)(k0 + kb) * ldx + i0 + p + g;
                __m512 t[16];
                for (int q = 0; q < 16; q++) {
                    const __m512 lo = 2 * q < kk ? _mm512_maskz_loadu_ps(rm, x + (size_t)(2 * q) * ldx) : _mm512_setzero_ps();
                    const __m512 hi =
                        2 * q + 1 < kk ? _mm512_maskz_loadu_ps(rm, x + (size_t)(2 * q + 1) * ldx) : _mm512_setzero_ps();
                    t[q] = (__m512)_mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
                }
                transpose16(t);
                for (int i = 0; i < 16; i++) _mm512_storeu_si512(ob + (size_t)(g + i) * KB, (__m512i)t[i]);
            }
        }
    }
}

/* B's packer: per micro-panel of r columns (rows of op(B)^T), the AVX-512 bf16 packer's k-pair layout
 * (gemm_driver.h, s = 2: per pair, r words of (k, k+1)), which is tdpbf16ps's B operand: 16 pairs of
 * NR words are 16 tile rows, B0 the first 64 bytes of each, B1 the next. Each panel then holds kcp (kc
 * rounded up to 32) depths, the pairs past the packer's (kc rounded up to 2) zero. */
static void pack_b_amx(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out_) {
    uint16_t *out = out_;
    const int kcp = (kc + KB - 1) / KB * KB, kc2 = (kc + 1) & ~1;
    for (int p = 0; p < m; p += r) {
        uint16_t *o = out + (size_t)p * kcp;
        gptc_avx512_gemm_pack_bf16(trans, X, ldx, i0 + p, k0, m - p < r ? m - p : r, kc, r, o);
        memset(o + (size_t)r * kc2, 0, (size_t)r * (kcp - kc2) * sizeof(uint16_t));
    }
}

/* From bf16 sources (gemm_bf16_in16): the rows i0.. x depths k0.. of op(X) widened to fp32 in a
 * thread-local block (exact), then the packers above (whose rounding leaves bf16 values unchanged), so
 * the panels are the bits the fp32-source packers give for the widened operand. The block is m x kc
 * floats (at most MC x KC = 1 MiB): scratch the planner does not count. */
static _Thread_local gptc_workspace tl_widen;
static const float *widen16(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc) {
    float *w = gptc_workspace_get(&tl_widen, (size_t)m * kc);
    for (int i = 0; i < m; i++)
        for (int k = 0; k < kc; k++) {
            const uint32_t bits = (uint32_t)(trans ? X[(size_t)(k0 + k) * ldx + i0 + i] : X[(size_t)(i0 + i) * ldx + k0 + k]) << 16;
            memcpy(w + (size_t)i * kc + k, &bits, sizeof bits); /* row-major m x kc: op(X) as stored untransposed */
        }
    return w;
}
static void pack16_a_amx(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    pack_a_amx(0, widen16(trans, X, ldx, i0, k0, m, kc), kc, 0, 0, m, kc, r, out);
}
static void pack16_b_amx(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    pack_b_amx(0, widen16(trans, X, ldx, i0, k0, m, kc), kc, 0, 0, m, kc, r, out);
}

/* Blocking, for Sapphire Rapids (48 KiB L1D, 2 MiB L2 per core, 1.875 MiB L3 per core), not measured
 * (no machine with AMX was at hand): per 32 k the four tdpbf16ps (16 cycles each) read 2 KiB of A and
 * 2 KiB of B. The B micro-panel (KC x 32 bf16 = 64 KC bytes) serves every A micro-panel of the block,
 * so it should stay in L1: KC = 512 makes it 32 KiB. The A block (MC x KC x 2 B = 512 KiB at MC = 512)
 * stays in L2 and streams 32 KiB per microkernel call, 32 bytes a cycle, within L2's bandwidth. The B
 * panel (KC x NC x 2 B = 2 MiB at NC = 2048) in L2/L3. One call's 16 k blocks (~1000 cycles of tdpbf16ps)
 * amortise the C tile's load and store. MC, NC are multiples of MR, NR. */
static const gptc_gemm_isa k_isa_amx = {
    .mr = MR, .nr = NR, .mc = 512, .kc = 512, .nc = 2048, .esize = 2, .kstep = KB,
    .kernel = kernel_amx, .pack = pack_a_amx, .pack_b = pack_b_amx, .pack16 = pack16_a_amx, .pack16_b = pack16_b_amx,
    .thread_begin = amx_thread_begin, .thread_end = amx_thread_end,
};

#ifdef GPTC_AMX_SOFT
void gptc_amx_soft_gemm_bf16(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                             int ldb, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked(&k_isa_amx, transA, transB, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
}
void gptc_amx_soft_gemm_bf16_in16(int transA, int transB, int M, int N, int K, const void *A, int lda, const void *B,
                                  int ldb, int in16, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked_in16(&k_isa_amx, transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C, ldc);
}
#else
static void gemm_bf16_in16_amx(int transA, int transB, int M, int N, int K, const void *A, int lda, const void *B,
                               int ldb, int in16, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked_in16(&k_isa_amx, transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C, ldc);
}

static void gemm_bf16_amx(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                          int ldb, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked(&k_isa_amx, transA, transB, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
}

void gptc_kernels_overlay_amx(gptc_kernels *k) {
    k->gemm_bf16 = gemm_bf16_amx;
    k->gemm_bf16_in16 = gemm_bf16_in16_amx;
    k->gemm_bf16_isa = &k_isa_amx;
}

void gptc_amx_gemm_pack_a(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    pack_a_amx(trans, X, ldx, i0, k0, m, kc, r, out);
}

void gptc_amx_gemm_pack_b(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r, void *out) {
    pack_b_amx(trans, X, ldx, i0, k0, m, kc, r, out);
}

/* Runs iters x 6 tdpbf16ps into six independent accumulator tiles (the two operand tiles loaded once),
 * enough chains to cover its latency; each does 16 x 16 x 32 multiply-adds, FLOPs = iters * 6 * 16384.
 * The operands are small (2^-10) so the sums stay finite; returns a value that depends on every tile. */
float gptc_amx_bf16_probe(long iters) {
    /* initialised at compile time: gcc's _tile_loadd does not tell the compiler it reads memory, so
     * stores into a buffer just before it could be dropped */
    static const uint16_t ops[16 * 32] __attribute__((aligned(64))) = {[0 ... 16 * 32 - 1] = 0x3a80}; /* 2^-10 */
    float out[16 * 16] __attribute__((aligned(64)));
    amx_thread_begin();
    TILE_LOADD(T_A0, ops, 64);
    TILE_LOADD(T_B0, ops, 64);
    TILE_ZERO(0);
    TILE_ZERO(1);
    TILE_ZERO(2);
    TILE_ZERO(3);
    TILE_ZERO(5);
    TILE_ZERO(7);
    for (long it = 0; it < iters; it++) {
        TILE_DPBF16PS(0, T_A0, T_B0);
        TILE_DPBF16PS(1, T_A0, T_B0);
        TILE_DPBF16PS(2, T_A0, T_B0);
        TILE_DPBF16PS(3, T_A0, T_B0);
        TILE_DPBF16PS(5, T_A0, T_B0);
        TILE_DPBF16PS(7, T_A0, T_B0);
    }
    float s = 0;
    TILE_STORED(0, out, 64);
    s += out[0];
    TILE_STORED(1, out, 64);
    s += out[1];
    TILE_STORED(2, out, 64);
    s += out[2];
    TILE_STORED(3, out, 64);
    s += out[3];
    TILE_STORED(5, out, 64);
    s += out[5];
    TILE_STORED(7, out, 64);
    s += out[7];
    amx_thread_end();
    return s;
}
#endif
