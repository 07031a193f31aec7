/* test_matvec.c — the small-M product of decoding (kernels.h matvec) at every level against a double
 * sum: both forms ((K,N) weights, the classifier's (N,K) rows), each also packed in panels, fp32
 * and bf16 weights, ragged
 * shapes (M 1..8, odd N and K, strides wider than the rows), nothing written outside out's rows; and
 * the properties the sampler relies on, bit for bit: a row of a batched call equals the same row
 * alone, the result does not depend on the thread count, the panel form gives the (K,N) form's, and the
 * shares of a call (matvec_part, attention_decode_part) give the whole call's. */
#include "test.h"

#include "core/core.h"
#include "kernels/kernels.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_levels[] = {"ref", "avx2", "avx512"};
#define NLEVELS 3

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { return test_uniform(&g_rng); } /* uniform [-1, 1) */

static const float k_sentinel = -7.25f;

/* One call of k->matvec on random data of (M,N,K), strides padded by pad; checks every element against
 * the double sum (tolerance relative to sum |x w|) and the sentinels in the padding. */
static bool check_shape(const gptc_kernels *k, int transW, int wfmt, int M, int N, int K, int pad, bool with_bias) {
    int ldx = K + pad, ldo = N + pad, ldw = (transW ? K : N) + pad, w16 = wfmt & GPTC_MV_BF16;
    size_t nw = (size_t)(transW ? N : K) * ldw;
    float *x = malloc(sizeof(float) * ((size_t)M * ldx + 1)), *wf = malloc(sizeof(float) * (nw + 1));
    uint16_t *wh = malloc(sizeof(uint16_t) * (nw + 1));
    float *bias = malloc(sizeof(float) * (N + 1)), *out = malloc(sizeof(float) * ((size_t)M * ldo + 1));
    for (size_t i = 0; i < (size_t)M * ldx; i++) x[i] = frand();
    for (size_t i = 0; i < nw; i++) {
        wf[i] = frand();
        wh[i] = gptc_f32_to_bf16(wf[i]);
        if (w16) wf[i] = gptc_bf16_to_f32(wh[i]); /* the values the bf16 call sees */
    }
    for (int n = 0; n < N; n++) bias[n] = frand();
    for (size_t i = 0; i < (size_t)M * ldo; i++) out[i] = k_sentinel;
    void *packed = NULL;
    if (wfmt & GPTC_MV_PANELS) { /* from the floats: gptc_matvec_pack rounds them as wh holds them */
        packed = malloc((w16 ? sizeof(uint16_t) : sizeof(float)) * (gptc_matvec_panel_elems(K, N) + 1));
        gptc_matvec_pack(packed, w16, wf, ldw, transW, K, N);
    }
    k->matvec(transW, wfmt, M, N, K, x, ldx, packed ? packed : w16 ? (const void *)wh : wf, ldw,
              with_bias ? bias : NULL, out, ldo);
    free(packed);
    bool ok = true;
    for (int m = 0; m < M && ok; m++)
        for (int n = 0; n < ldo && ok; n++) {
            float got = out[(size_t)m * ldo + n];
            if (n >= N) {
                if (got != k_sentinel) ok = false;
                continue;
            }
            double s = 0, mag = 0;
            for (int kk = 0; kk < K; kk++) {
                double w = transW ? wf[(size_t)n * ldw + kk] : wf[(size_t)kk * ldw + n];
                s += (double)x[(size_t)m * ldx + kk] * w;
                mag += fabs((double)x[(size_t)m * ldx + kk] * w);
            }
            if (with_bias) s += bias[n], mag += fabs(bias[n]);
            if (!(fabs(got - s) <= 1e-6 * mag + 1e-30)) {
                printf("    %s transW %d wfmt %d M %d N %d K %d pad %d: out[%d][%d] = %.9g, expected %.9g\n", k->variant,
                       transW, wfmt, M, N, K, pad, m, n, got, s);
                ok = false;
            }
        }
    free(x), free(wf), free(wh), free(bias), free(out);
    return ok;
}

TEST(matvec_ragged_shapes) {
    static const int Ns[] = {1, 5, 16, 17, 33, 63, 64, 65, 129, 300};
    static const int Ks[] = {0, 1, 3, 16, 17, 31, 40, 100};
    for (int l = 0; l < NLEVELS; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) {
            printf("    %s: not supported here, skipped\n", k_levels[l]);
            continue;
        }
        int bad = 0;
        for (int transW = 0; transW < 2; transW++)
            for (int wfmt = 0; wfmt < 4; wfmt++)
                for (int M = 1; M <= 8; M++)
                    for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++)
                        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
                            if (!check_shape(k, transW, wfmt, M, Ns[ni], Ks[ki], (M + ni + ki) % 3 == 0 ? 0 : 3,
                                             (ni + ki) % 2 == 0))
                                bad++;
        CHECK_MSG(bad == 0, "%s: %d shapes wrong", k_levels[l], bad);
        /* one shape large enough to run on the OpenMP team: GPT-2 124M's qkv and its classifier's rows */
        CHECK(check_shape(k, 0, 0, 3, 2304, 768, 0, true));
        CHECK(check_shape(k, 0, 1, 5, 2304, 768, 1, true));
        CHECK(check_shape(k, 1, 0, 2, 3001, 768, 0, false));
        CHECK(check_shape(k, 1, 1, 4, 3001, 768, 0, false));
        CHECK(check_shape(k, 0, GPTC_MV_PANELS, 1, 2304, 768, 0, true));
        CHECK(check_shape(k, 0, GPTC_MV_PANELS | GPTC_MV_BF16, 6, 3072 + 7, 768, 0, true));
        CHECK(check_shape(k, 1, GPTC_MV_PANELS | GPTC_MV_BF16, 4, 3001, 768, 0, false));
    }
}

/* rows of a batched call equal the same rows alone, 1, 2, 3 threads give the same bits, and so does the
 * panel form of the same (K,N) matrix */
TEST(matvec_rows_and_threads_bitwise) {
    int M = 7, N = 2304 + 5, K = 769;
    float *x = malloc(sizeof(float) * M * K), *wf = malloc(sizeof(float) * (size_t)N * K);
    uint16_t *wh = malloc(sizeof(uint16_t) * (size_t)N * K);
    float *bias = malloc(sizeof(float) * N), *all = malloc(sizeof(float) * M * N), *one = malloc(sizeof(float) * N);
    float *one_panels = malloc(sizeof(float) * M * N), *packed = malloc(sizeof(float) * gptc_matvec_panel_elems(K, N));
    for (int i = 0; i < M * K; i++) x[i] = frand();
    for (size_t i = 0; i < (size_t)N * K; i++) wf[i] = frand(), wh[i] = gptc_f32_to_bf16(wf[i]);
    for (int n = 0; n < N; n++) bias[n] = frand();
    int saved = omp_get_max_threads();
    for (int l = 0; l < NLEVELS; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        for (int transW = 0; transW < 2; transW++)
            for (int w16 = 0; w16 < 2; w16++) {
                const void *W = w16 ? (const void *)wh : wf;
                int ldw = transW ? K : N;
                omp_set_num_threads(2);
                k->matvec(transW, w16, M, N, K, x, K, W, ldw, bias, all, N);
                bool same = true;
                for (int m = 0; m < M; m++) {
                    omp_set_num_threads(1 + m % 3);
                    k->matvec(transW, w16, 1, N, K, x + (size_t)m * K, K, W, ldw, bias, one, N);
                    if (memcmp(one, all + (size_t)m * N, sizeof(float) * N)) same = false;
                }
                CHECK_MSG(same, "%s transW %d w16 %d: a row of the batch differs from the row alone", k_levels[l],
                          transW, w16);
                if (transW) continue;
                gptc_matvec_pack(packed, w16, wf, N, 0, K, N); /* the same values as W: wh is wf rounded */
                omp_set_num_threads(2 + w16);
                k->matvec(0, GPTC_MV_PANELS | w16, M, N, K, x, K, packed, 0, bias, one_panels, N);
                CHECK_MSG(!memcmp(one_panels, all, sizeof(float) * M * N),
                          "%s w16 %d: the panel form differs from the (K,N) form", k_levels[l], w16);
            }
    }
    omp_set_num_threads(saved);
    free(x), free(wf), free(wh), free(bias), free(all), free(one), free(packed), free(one_panels);
}

/* matvec_part and attention_decode_part: every share of a call, run one after the other (last first) on
 * one thread, gives the whole operation's result bit for bit at each level, for 1 to 4 parts (more parts
 * than panels, heads or columns included): each form of W, fp32 and bf16, 1 to 5 rows (the panel pairs
 * of 1 and 2 rows), ragged N; the attention with shared and own positions, fp32 and bf16 caches. */
TEST(matvec_and_attention_shares_equal_the_whole) {
    static const int Ns[] = {1, 63, 129, 1000};
    int K = 70, maxM = 5, maxN = 1000;
    float *x = malloc(sizeof(float) * maxM * K), *wf = malloc(sizeof(float) * (size_t)maxN * K);
    uint16_t *wh = malloc(sizeof(uint16_t) * (size_t)maxN * K);
    float *packed = malloc(sizeof(float) * gptc_matvec_panel_elems(K, maxN)), *bias = malloc(sizeof(float) * maxN);
    float *whole = malloc(sizeof(float) * maxM * maxN), *shares = malloc(sizeof(float) * maxM * maxN);
    for (int i = 0; i < maxM * K; i++) x[i] = frand();
    for (size_t i = 0; i < (size_t)maxN * K; i++) wf[i] = frand(), wh[i] = gptc_f32_to_bf16(wf[i]);
    for (int n = 0; n < maxN; n++) bias[n] = frand();
    for (int l = 0; l < NLEVELS; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        int bad = 0;
        for (int transW = 0; transW < 2; transW++)
            for (int wfmt = 0; wfmt < 4; wfmt++)
                for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++)
                    for (int M = 1; M <= maxM; M++) {
                        int N = Ns[ni], w16 = wfmt & GPTC_MV_BF16, ldw = transW ? K : N;
                        const void *W = w16 ? (const void *)wh : wf;
                        if (wfmt & GPTC_MV_PANELS) {
                            gptc_matvec_pack(packed, w16, wf, ldw, transW, K, N);
                            W = packed;
                        }
                        k->matvec(transW, wfmt, M, N, K, x, K, W, ldw, bias, whole, N);
                        for (int parts = 1; parts <= 4; parts++) {
                            for (int i = 0; i < M * N; i++) shares[i] = k_sentinel;
                            for (int p = parts - 1; p >= 0; p--)
                                k->matvec_part(p, parts, transW, wfmt, M, N, K, x, K, W, ldw, bias, shares, N);
                            if (memcmp(shares, whole, sizeof(float) * M * N)) bad++;
                        }
                    }
        CHECK_MSG(bad == 0, "%s: %d matvec calls whose shares differ from the whole", k_levels[l], bad);
        /* the attention: C 128, NH 4 (HS 32) and C 256, NH 4 (HS 64: the fast path), S 3 with P shared */
        for (int c = 0; c < 2; c++)
            for (int kv16 = 0; kv16 < 2; kv16++) {
                int C = c ? 256 : 128, NH = 4, S = 3, P = 9, Tc = 23, ldq = 3 * C, lds = 30 * C;
                size_t es = kv16 ? sizeof(uint16_t) : sizeof(float), n = (size_t)S * lds;
                float *q = malloc(sizeof(float) * S * ldq), *att = malloc(sizeof(float) * S * NH * Tc);
                float *o1 = malloc(sizeof(float) * S * C), *o2 = malloc(sizeof(float) * S * C);
                char *kc = malloc(es * n), *vc = malloc(es * n);
                for (int i = 0; i < S * ldq; i++) q[i] = 3 * frand();
                for (size_t i = 0; i < n; i++) {
                    float a = frand(), b = frand();
                    if (kv16)
                        ((uint16_t *)kc)[i] = gptc_f32_to_bf16(a), ((uint16_t *)vc)[i] = gptc_f32_to_bf16(b);
                    else
                        ((float *)kc)[i] = a, ((float *)vc)[i] = b;
                }
                k->attention_decode_shared(o1, C, att, q, ldq, kc, vc, P, kc, vc, lds, Tc, S, C, NH, kv16);
                for (int parts = 1; parts <= 5; parts++) {
                    for (int i = 0; i < S * C; i++) o2[i] = k_sentinel;
                    for (int p = parts - 1; p >= 0; p--)
                        k->attention_decode_part(p, parts, o2, C, att, q, ldq, kc, vc, P, kc, vc, lds, Tc, S, C, NH,
                                                 kv16);
                    CHECK_MSG(!memcmp(o1, o2, sizeof(float) * S * C), "%s C %d kv16 %d: %d attention shares differ",
                              k_levels[l], C, kv16, parts);
                }
                free(q), free(att), free(o1), free(o2), free(kc), free(vc);
            }
    }
    free(x), free(wf), free(wh), free(packed), free(bias), free(whole), free(shares);
}

/* attention_decode (one query against a cache) at each level against the reference: ragged cache
 * lengths and head sizes (HS not a multiple of the vector width), within float rounding */
TEST(attention_decode_levels_match_reference) {
    static const int Tcs[] = {1, 2, 7, 16, 17, 33, 100, 700};
    static const int shapes[][2] = {{64, 4}, {36, 3}, {768, 12}, {40, 1}}; /* C, NH: HS 16, 12, 64, 40 */
    const gptc_kernels *r = gptc_kernels_ref();
    for (int l = 1; l < NLEVELS; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (size_t ti = 0; ti < sizeof Tcs / sizeof Tcs[0]; ti++) {
                int C = shapes[si][0], NH = shapes[si][1], Tc = Tcs[ti];
                float *q = malloc(sizeof(float) * C), *kc = malloc(sizeof(float) * (size_t)Tc * C);
                float *vc = malloc(sizeof(float) * (size_t)Tc * C), *att = malloc(sizeof(float) * (size_t)NH * Tc);
                float *o1 = malloc(sizeof(float) * C), *o2 = malloc(sizeof(float) * C);
                for (int i = 0; i < C; i++) q[i] = 3 * frand();
                for (size_t i = 0; i < (size_t)Tc * C; i++) kc[i] = frand(), vc[i] = frand();
                r->attention_decode(o1, att, q, kc, vc, Tc, C, NH);
                k->attention_decode(o2, att, q, kc, vc, Tc, C, NH);
                double e = test_rel_err_f(o2, o1, (size_t)C);
                CHECK_MSG(e < 1e-5, "%s: C %d NH %d Tc %d: rel err %g", k_levels[l], C, NH, Tc, e);
                free(q), free(kc), free(vc), free(att), free(o1), free(o2);
            }
    }
}

/* attention_decode_shared (S samples against caches sharing P positions) at every level, with fp32 and
 * bf16 caches: each sample within float rounding of attention_decode on that sample's whole cache (the
 * shared rows then its own; bf16: widened); at the SIMD levels each sample equal, bit for bit, to the
 * same sample alone (S 1, any P), and the output's padding (ldo wider than C) untouched. Ragged: S 1..6
 * (over the 4 of a group), P 0..Tc, HS not a multiple of the vector width; and heads of 4 or 8 whole
 * vectors (the kernels' fast path). */
TEST(attention_decode_shared_matches_attention_decode) {
    static const int cases[][5] = {
        /* C, NH, S, P, Tc */
        {64, 4, 1, 0, 1},   {64, 4, 3, 5, 9},    {36, 3, 5, 17, 17}, {768, 12, 4, 40, 47},
        {40, 1, 6, 0, 33},  {768, 12, 2, 33, 100}, {36, 3, 1, 7, 20}, {64, 4, 6, 1, 2},
        /* heads of 64 and 128 (4 and 8 AVX-512 vectors: the fast path), with a partial sample group */
        {128, 2, 5, 21, 38}, {256, 2, 5, 20, 37}, {256, 2, 1, 0, 17},
    };
    const gptc_kernels *r = gptc_kernels_ref();
    for (int l = 0; l < NLEVELS; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        for (size_t ci = 0; ci < 2 * sizeof cases / sizeof cases[0]; ci++) {
            const int *c = cases[ci / 2], kv16 = ci % 2;
            int C = c[0], NH = c[1], S = c[2], P = c[3], Tc = c[4];
            int ldq = 3 * C + 5, ldo = C + 3, maxT = Tc + 2;
            size_t lds = (size_t)maxT * C, es = kv16 ? sizeof(uint16_t) : sizeof(float);
            float *q = malloc(sizeof(float) * (size_t)S * ldq), *kc = malloc(sizeof(float) * S * lds);
            float *vc = malloc(sizeof(float) * S * lds), *att = malloc(sizeof(float) * (size_t)S * NH * Tc);
            uint16_t *kh = malloc(sizeof(uint16_t) * S * lds), *vh = malloc(sizeof(uint16_t) * S * lds);
            float *out = malloc(sizeof(float) * (size_t)S * ldo), *one = malloc(sizeof(float) * ldo);
            float *want = malloc(sizeof(float) * C), *ks = malloc(sizeof(float) * lds), *vs = malloc(sizeof(float) * lds);
            void *kso = malloc(es * lds), *vso = malloc(es * lds); /* one sample's whole cache, as stored */
            for (size_t i = 0; i < (size_t)S * ldq; i++) q[i] = 3 * frand();
            for (size_t i = 0; i < S * lds; i++) {
                kc[i] = frand(), vc[i] = frand();
                kh[i] = gptc_f32_to_bf16(kc[i]), vh[i] = gptc_f32_to_bf16(vc[i]);
                if (kv16) kc[i] = gptc_bf16_to_f32(kh[i]), vc[i] = gptc_bf16_to_f32(vh[i]); /* the values seen */
            }
            const void *K = kv16 ? (const void *)kh : kc, *V = kv16 ? (const void *)vh : vc;
            for (size_t i = 0; i < (size_t)S * ldo; i++) out[i] = k_sentinel;
            /* the shared rows live in sample 0's cache, as the decoder keeps them */
            k->attention_decode_shared(out, ldo, att, q, ldq, K, V, P, K, V, lds, Tc, S, C, NH, kv16);
            bool pad_ok = true, same = true;
            double worst = 0;
            for (int s = 0; s < S; s++) {
                for (int i = C; i < ldo; i++) pad_ok &= out[(size_t)s * ldo + i] == k_sentinel;
                /* sample s's whole cache: the shared rows, then its own (floats for the reference, and as stored) */
                size_t sh = (size_t)P * C, own = (size_t)(Tc - P) * C, from = s * lds + sh;
                memcpy(ks, kc, sizeof(float) * sh), memcpy(vs, vc, sizeof(float) * sh);
                memcpy(ks + sh, kc + from, sizeof(float) * own), memcpy(vs + sh, vc + from, sizeof(float) * own);
                memcpy(kso, K, es * sh), memcpy(vso, V, es * sh);
                memcpy((char *)kso + es * sh, (const char *)K + es * from, es * own);
                memcpy((char *)vso + es * sh, (const char *)V + es * from, es * own);
                r->attention_decode(want, att, q + (size_t)s * ldq, ks, vs, Tc, C, NH);
                double e = test_rel_err_f(out + (size_t)s * ldo, want, (size_t)C);
                worst = e > worst ? e : worst;
                /* alone, its cache unshared (P = 0): the same bits */
                k->attention_decode_shared(one, ldo, att, q + (size_t)s * ldq, ldq, kso, vso, 0, kso, vso, lds, Tc, 1, C,
                                           NH, kv16);
                if (l > 0 && memcmp(one, out + (size_t)s * ldo, sizeof(float) * C)) same = false;
            }
            CHECK_MSG(worst < 1e-5, "%s kv16 %d: C %d NH %d S %d P %d Tc %d: rel err %g", k_levels[l], kv16, C, NH, S, P,
                      Tc, worst);
            CHECK_MSG(pad_ok, "%s: C %d S %d: written outside the output rows", k_levels[l], C, S);
            CHECK_MSG(same, "%s kv16 %d: C %d NH %d S %d P %d Tc %d: a sample of the batch differs from it alone",
                      k_levels[l], kv16, C, NH, S, P, Tc);
            free(q), free(kc), free(vc), free(kh), free(vh), free(att), free(out), free(one), free(want), free(ks);
            free(vs), free(kso), free(vso);
        }
    }
}
