/* test_memops.c — the streaming kernels (zero, grad_sumsq, the head reshapes) at the AVX2 and
 * AVX-512 levels against the reference, bit for bit: ragged sizes and misaligned starts, nothing
 * written outside the range, the non-temporal zeroing path, the same sums for 1, 2 and 3 threads. */
#include "test.h"

#include "kernels/kernels.h"
#include "kernels/x86_avx2/avx2.h"
#include "kernels/x86_avx512/avx512.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_levels[] = {"avx2", "avx512"};
#define NLEVELS 2

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static float frand(void) { /* uniform [-1, 1) */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / (1ull << 23)) - 1.0);
}
static float *rnd(size_t n) {
    float *a = malloc((n ? n : 1) * sizeof *a);
    for (size_t i = 0; i < n; i++) a[i] = frand();
    return a;
}

/* ---- zero: n floats from a start `off` floats past a 64-byte boundary, a guard of sentinels around */

#define GUARD 64
static const float k_sentinel = -7.25f;

static bool zeroed_exactly(void (*zero)(float *, size_t), size_t n, int off) {
    float *buf = aligned_alloc(64, ((n + 2 * GUARD + 64) * sizeof(float) + 63) / 64 * 64);
    size_t total = n + 2 * GUARD + off;
    for (size_t i = 0; i < total; i++) buf[i] = k_sentinel;
    float *x = buf + GUARD + off;
    zero(x, n);
    bool ok = true;
    for (size_t i = 0; i < total; i++) {
        bool inside = i >= (size_t)GUARD + off && i < (size_t)GUARD + off + n;
        uint32_t bits;
        memcpy(&bits, &buf[i], sizeof bits);
        if (inside ? bits != 0 : buf[i] != k_sentinel) ok = false; /* +0.0f exactly inside */
    }
    free(buf);
    return ok;
}

TEST(memops_zero) {
    static const size_t sizes[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 100, 1000, 4097, 65536, 65536 + 5, 300007, 600001};
    for (int l = -1; l < NLEVELS; l++) {
        const gptc_kernels *k = l < 0 ? gptc_kernels_ref() : gptc_kernels_level(k_levels[l]);
        if (!k) {
            printf("    %s: not supported here, skipped\n", k_levels[l]);
            continue;
        }
        void (*stream)(float *, size_t) = l == 0 ? gptc_avx2_zero_stream : l == 1 ? gptc_avx512_zero_stream : NULL;
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (int off = 0; off < 17; off += (off < 4 ? 1 : 6)) {
                CHECK_MSG(zeroed_exactly(k->zero, sizes[s], off), "%s zero: n %zu, offset %d floats",
                          l < 0 ? "ref" : k_levels[l], sizes[s], off);
                if (stream)
                    CHECK_MSG(zeroed_exactly(stream, sizes[s], off), "%s zero_stream: n %zu, offset %d floats",
                              k_levels[l], sizes[s], off);
            }
    }
}

/* ---- grad_sumsq: the reference's double, bit for bit, at every level and thread count */

static double sumsq_threads(const gptc_kernels *k, const float *x, size_t n, int threads) {
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    double s = k->grad_sumsq(x, n);
    omp_set_num_threads(saved);
    return s;
}

TEST(memops_grad_sumsq) {
    /* around the chunk layout: fewer floats than chunks, empty last chunks, whole groups of four
     * chunks and not, and sizes that run on several threads */
    static const size_t sizes[] = {0,   1,   5,    8,    9,     63,    64,    65,     511,           512,
                                   513, 777, 2048, 2049, 32771, 65536, 65541, 262144, 262144 + 8 * 3, 1000003};
    const size_t nmax = 1000003;
    float *x = rnd(nmax);
    /* magnitudes far apart, so that the order of the adds shows in the bits */
    for (size_t i = 0; i < nmax; i += 97) x[i] *= 1e4f;
    for (size_t i = 5; i < nmax; i += 89) x[i] *= 1e-5f;
    const gptc_kernels *r = gptc_kernels_ref();
    for (int l = 0; l < NLEVELS; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) {
            printf("    %s: not supported here, skipped\n", k_levels[l]);
            continue;
        }
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (int off = 0; off < 3; off++) {
                size_t n = sizes[s] + off <= nmax ? sizes[s] : nmax - off;
                double want = sumsq_threads(r, x + off, n, 2);
                for (int th = 1; th <= 3; th++) {
                    double got = sumsq_threads(k, x + off, n, th);
                    CHECK_MSG(memcmp(&got, &want, sizeof got) == 0, "%s grad_sumsq n %zu off %d, %d threads: %.17g vs ref %.17g",
                              k_levels[l], n, off, th, got, want);
                }
            }
    }
    /* the reference itself is the same for any thread count */
    CHECK(sumsq_threads(r, x, nmax, 1) == sumsq_threads(r, x, nmax, 3));
    free(x);
}

/* ---- head reshapes: every level against the reference, any HS (vector tails), accumulate included */

TEST(memops_head_reshapes) {
    /* (B, T, C, NH): HS 2, 4, 50 (a masked tail at both widths), 40, 64; the last ones run in parallel */
    static const int shapes[][4] = {{1, 1, 4, 2}, {2, 5, 12, 3}, {2, 7, 100, 2}, {1, 3, 40, 1}, {3, 17, 768, 12},
                                    {4, 64, 768, 12}, {2, 33, 400, 8}};
    const gptc_kernels *r = gptc_kernels_ref();
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int B = shapes[s][0], T = shapes[s][1], C = shapes[s][2], NH = shapes[s][3];
        size_t btc = (size_t)B * T * C;
        float *qkv = rnd(3 * btc), *rows = rnd(btc), *heads = rnd(btc), *dq = rnd(btc), *dk = rnd(btc), *dv = rnd(btc);
        float *dqkv0 = rnd(3 * btc);
        /* the reference's outputs */
        float *rq = rnd(btc), *rk = rnd(btc), *rv = rnd(btc), *rrows = rnd(btc), *rheads = rnd(btc);
        float *rdqkv = malloc(3 * btc * sizeof(float));
        memcpy(rdqkv, dqkv0, 3 * btc * sizeof(float));
        r->qkv_to_heads(rq, rk, rv, qkv, B, T, C, NH);
        r->heads_to_qkv_grad(rdqkv, dq, dk, dv, B, T, C, NH);
        r->heads_to_rows(rrows, heads, B, T, C, NH);
        r->rows_to_heads(rheads, rows, B, T, C, NH);
        for (int l = 0; l < NLEVELS; l++) {
            const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
            if (!k) continue;
            float *q = rnd(btc), *kk = rnd(btc), *v = rnd(btc), *orows = rnd(btc), *oheads = rnd(btc);
            float *dqkv = malloc(3 * btc * sizeof(float));
            memcpy(dqkv, dqkv0, 3 * btc * sizeof(float));
            k->qkv_to_heads(q, kk, v, qkv, B, T, C, NH);
            k->heads_to_qkv_grad(dqkv, dq, dk, dv, B, T, C, NH);
            k->heads_to_rows(orows, heads, B, T, C, NH);
            k->rows_to_heads(oheads, rows, B, T, C, NH);
            size_t fb = btc * sizeof(float);
            const char *lv = k_levels[l];
            CHECK_MSG(memcmp(q, rq, fb) == 0 && memcmp(kk, rk, fb) == 0 && memcmp(v, rv, fb) == 0,
                      "%s qkv_to_heads (%d,%d,%d,%d)", lv, B, T, C, NH);
            CHECK_MSG(memcmp(dqkv, rdqkv, 3 * fb) == 0, "%s heads_to_qkv_grad (%d,%d,%d,%d)", lv, B, T, C, NH);
            CHECK_MSG(memcmp(orows, rrows, fb) == 0, "%s heads_to_rows (%d,%d,%d,%d)", lv, B, T, C, NH);
            CHECK_MSG(memcmp(oheads, rheads, fb) == 0, "%s rows_to_heads (%d,%d,%d,%d)", lv, B, T, C, NH);
            free(q), free(kk), free(v), free(orows), free(oheads), free(dqkv);
        }
        free(qkv), free(rows), free(heads), free(dq), free(dk), free(dv), free(dqkv0);
        free(rq), free(rk), free(rv), free(rrows), free(rheads), free(rdqkv);
    }
}
