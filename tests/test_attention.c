/* test_attention.c — the flash attention kernels: the flash reference against the materialised
 * reference attention (through the (B,T,3C) layout and the conversion helpers), each SIMD variant
 * against the flash reference, the log-sum-exp, the Philox dropout mask (known answers, rate,
 * reproducibility, a direct evaluation), the backward under dropout against finite differences of
 * the forward, and bit-identical results with 1 and 2 threads.
 *
 * Tolerances (max |a-b| / max |b| over an array, test_rel_err_f): flash vs materialised reference
 * and SIMD vs flash reference 1e-5 (float, different summation orders and exp); lse 1e-5 absolute
 * against a double evaluation; finite differences (float forward, double loss, eps 1e-2) 5e-3. */
#include "test.h"
#include "test_attention.h"
#include "core/core.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REL_TOL 1e-5
#define LSE_TOL 1e-5
#define FD_TOL 5e-3

static gptc_rng g_rng;

/* The reference and every SIMD variant this CPU can run; returns the count. */
static int variants(variant v[3]) {
    int n = 0;
    v[n++] = (variant){"ref", gptc_flash_fwd_ref, gptc_flash_bwd_ref};
    if (gptc_kernels_level("avx2")) v[n++] = (variant){"avx2", gptc_flash_fwd_avx2, gptc_flash_bwd_avx2};
    if (gptc_kernels_level("avx512")) v[n++] = (variant){"avx512", gptc_flash_fwd_avx512, gptc_flash_bwd_avx512};
    return n;
}

/* lse of row (bh, i) in double: log sum_{j<=i} exp(q_i.k_j / sqrt(HS)) */
static double lse_direct(const float *q, const float *k, size_t bh, int i, int T, int HS) {
    double m = -INFINITY, s[1024];
    for (int j = 0; j <= i; j++) {
        double d = 0;
        for (int c = 0; c < HS; c++) d += (double)q[(bh * T + i) * HS + c] * k[(bh * T + j) * HS + c];
        s[j] = d / sqrt((double)HS);
        if (s[j] > m) m = s[j];
    }
    double sum = 0;
    for (int j = 0; j <= i; j++) sum += exp(s[j] - m);
    return m + log(sum);
}

TEST(attention_flash_ref_vs_reference) {
    gptc_rng_seed(&g_rng, 11);
    const gptc_kernels *ref = gptc_kernels_ref();
    const int Ts[] = {1, 7, 64, 65, 130}, HSs[] = {12, 64}, NHs[] = {1, 3}, B = 2;
    for (int ti = 0; ti < 5; ti++)
        for (int hi = 0; hi < 2; hi++)
            for (int ni = 0; ni < 2; ni++) {
                int T = Ts[ti], HS = HSs[hi], NH = NHs[ni], C = NH * HS;
                size_t nqkv = (size_t)B * T * 3 * C, nrow = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
                float *qkv = test_randn_f(&g_rng, nqkv, 1.0), *dout = test_randn_f(&g_rng, nrow, 1.0), *dqkv0 = test_randn_f(&g_rng, nqkv, 0.5);
                /* the materialised reference */
                float *out = test_zeros_f(nrow), *preatt = test_zeros_f(natt), *att = test_zeros_f(natt);
                float *dpre = test_zeros_f(natt), *datt = test_zeros_f(natt), *dqkv = test_copy_f(dqkv0, nqkv);
                ref->attention_fwd(out, preatt, att, qkv, B, T, C, NH);
                ref->attention_bwd(dqkv, dpre, datt, dout, qkv, att, B, T, C, NH);
                /* the flash reference through the conversions */
                float *q = test_zeros_f(nrow), *k = test_zeros_f(nrow), *v = test_zeros_f(nrow), *o = test_zeros_f(nrow);
                float *lse = test_zeros_f((size_t)B * NH * T), *out2 = test_zeros_f(nrow), *dO = test_zeros_f(nrow);
                float *dq = test_zeros_f(nrow), *dk = test_zeros_f(nrow), *dv = test_zeros_f(nrow), *dqkv2 = test_copy_f(dqkv0, nqkv);
                gptc_qkv_to_heads(q, k, v, qkv, B, T, C, NH);
                gptc_flash_fwd_ref(o, lse, q, k, v, B, NH, T, HS, 0.0f, 0);
                gptc_heads_to_rows(out2, o, B, T, C, NH);
                gptc_rows_to_heads(dO, dout, B, T, C, NH);
                gptc_flash_bwd_ref(dq, dk, dv, dO, q, k, v, o, lse, B, NH, T, HS, 0.0f, 0);
                gptc_heads_to_qkv_grad(dqkv2, dq, dk, dv, B, T, C, NH);

                double eo = test_rel_err_f(out2, out, nrow), eg = test_rel_err_f(dqkv2, dqkv, nqkv);
                CHECK_MSG(eo <= REL_TOL, "T=%d HS=%d NH=%d: out rel err %.3g", T, HS, NH, eo);
                CHECK_MSG(eg <= REL_TOL, "T=%d HS=%d NH=%d: dqkv rel err %.3g", T, HS, NH, eg);
                double el = 0;
                for (size_t bh = 0; bh < (size_t)B * NH; bh++)
                    for (int i = 0; i < T; i++) {
                        double d = fabs(lse[bh * T + i] - lse_direct(q, k, bh, i, T, HS));
                        if (!(d <= el)) el = d;
                    }
                CHECK_MSG(el <= LSE_TOL, "T=%d HS=%d NH=%d: lse abs err %.3g", T, HS, NH, el);
                float *bufs[] = {qkv, dout, dqkv0, out, preatt, att, dpre, datt, dqkv, q, k, v, o, lse, out2, dO,
                                 dq, dk, dv, dqkv2};
                for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) free(bufs[b]);
            }
}

/* Runs variant vr forward and backward; gradients start from g0 (3,n) (checks the accumulation). */
fb_out run_fb(const variant *vr, const float *q, const float *k, const float *v, const float *dO, const float *g0,
              int B, int NH, int T, int HS, float p, uint64_t seed) {
    size_t n = (size_t)B * NH * T * HS;
    fb_out r = {test_zeros_f(n), test_zeros_f((size_t)B * NH * T), test_copy_f(g0, n), test_copy_f(g0 + n, n),
                test_copy_f(g0 + 2 * n, n)};
    vr->fwd(r.o, r.lse, q, k, v, B, NH, T, HS, p, seed);
    vr->bwd(r.dq, r.dk, r.dv, dO, q, k, v, r.o, r.lse, B, NH, T, HS, p, seed);
    return r;
}
void fb_free(fb_out *r) {
    free(r->o), free(r->lse), free(r->dq), free(r->dk), free(r->dv);
}

TEST(attention_flash_simd_vs_ref) {
    variant vs[3];
    int nv = variants(vs);
    if (nv == 1) printf("    (no SIMD variant on this CPU)\n");
    gptc_rng_seed(&g_rng, 12);
    const int Ts[] = {1, 7, 16, 17, 64, 65, 130, 200}, HSs[] = {12, 16, 64, 80, 128}, NHs[] = {1, 3};
    const float ps[] = {0.0f, 0.2f};
    const int B = 2;
    for (int ti = 0; ti < 8; ti++)
        for (int hi = 0; hi < 5; hi++)
            for (int ni = 0; ni < 2; ni++)
                for (int pi = 0; pi < 2; pi++) {
                    int T = Ts[ti], HS = HSs[hi], NH = NHs[ni];
                    float p = ps[pi];
                    size_t n = (size_t)B * NH * T * HS, nl = (size_t)B * NH * T;
                    float *q = test_randn_f(&g_rng, n, 1.0), *k = test_randn_f(&g_rng, n, 1.0), *v = test_randn_f(&g_rng, n, 1.0), *dO = test_randn_f(&g_rng, n, 1.0);
                    float *g0 = test_randn_f(&g_rng, 3 * n, 0.5);
                    fb_out want = run_fb(&vs[0], q, k, v, dO, g0, B, NH, T, HS, p, 77);
                    for (int vi = 1; vi < nv; vi++) {
                        fb_out got = run_fb(&vs[vi], q, k, v, dO, g0, B, NH, T, HS, p, 77);
                        double e[5] = {test_rel_err_f(got.o, want.o, n), test_rel_err_f(got.lse, want.lse, nl),
                                       test_rel_err_f(got.dq, want.dq, n), test_rel_err_f(got.dk, want.dk, n),
                                       test_rel_err_f(got.dv, want.dv, n)};
                        const char *what[5] = {"o", "lse", "dq", "dk", "dv"};
                        for (int w = 0; w < 5; w++)
                            CHECK_MSG(e[w] <= REL_TOL, "%s T=%d HS=%d NH=%d p=%g: %s rel err %.3g", vs[vi].name,
                                      T, HS, NH, (double)p, what[w], e[w]);
                        fb_free(&got);
                    }
                    fb_free(&want);
                    free(q), free(k), free(v), free(dO), free(g0);
                }
}

TEST(attention_flash_philox_mask) {
    /* Random123's known answers for philox4x32_10 */
    uint32_t w[4];
    gptc_philox4x32(w, 0, 0, 0, 0, 0);
    CHECK(w[0] == 0x6627e8d5u && w[1] == 0xe169c58du && w[2] == 0xbc57ac4cu && w[3] == 0x9b00dbd8u);
    gptc_philox4x32(w, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffffffffffull);
    CHECK(w[0] == 0x408f276du && w[1] == 0x41c83b0eu && w[2] == 0xa20bc7c6u && w[3] == 0x6d5451fdu);
    gptc_philox4x32(w, 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0x299f31d0a4093822ull);
    CHECK(w[0] == 0xd16cfe09u && w[1] == 0x94fdccebu && w[2] == 0x5001e420u && w[3] == 0x24126ea1u);
    /* the kept fraction is 1 - p; p = 0 keeps all */
    const float ps[] = {0.0f, 0.1f, 0.5f};
    for (int pi = 0; pi < 3; pi++) {
        uint32_t thr = gptc_flash_threshold(ps[pi]);
        long kept = 0, n = 1L << 20;
        for (long e = 0; e < n; e++) kept += gptc_flash_keep(1234, (uint64_t)(e >> 8), (uint32_t)(e & 255), thr);
        double frac = (double)kept / n;
        if (ps[pi] == 0.0f)
            CHECK_EQ_INT(kept, n);
        else
            CHECK_MSG(fabs(frac - (1 - ps[pi])) < 3e-3, "p=%g: kept %.5f", (double)ps[pi], frac);
    }
}

/* o under dropout evaluated directly in double from the header's mask definition */
TEST(attention_flash_dropout_direct) {
    variant vs[3];
    int nv = variants(vs);
    gptc_rng_seed(&g_rng, 13);
    const int B = 2, NH = 3, T = 37, HS = 20;
    const float p = 0.25f;
    const uint64_t seed = 0x5eed;
    size_t n = (size_t)B * NH * T * HS;
    float *q = test_randn_f(&g_rng, n, 1.0), *k = test_randn_f(&g_rng, n, 1.0), *v = test_randn_f(&g_rng, n, 1.0), *want = test_zeros_f(n);
    uint32_t thr = gptc_flash_threshold(p);
    for (size_t bh = 0; bh < (size_t)B * NH; bh++)
        for (int i = 0; i < T; i++) {
            double lse = lse_direct(q, k, bh, i, T, HS), acc[64] = {0};
            for (int j = 0; j <= i; j++) {
                double s = 0;
                for (int c = 0; c < HS; c++) s += (double)q[(bh * T + i) * HS + c] * k[(bh * T + j) * HS + c];
                double pr = exp(s / sqrt((double)HS) - lse);
                double z = gptc_flash_keep(seed, bh * T + i, (uint32_t)j, thr) ? 1.0 / (1.0 - p) : 0.0;
                for (int c = 0; c < HS; c++) acc[c] += pr * z * v[(bh * T + j) * HS + c];
            }
            for (int c = 0; c < HS; c++) want[(bh * T + i) * HS + c] = (float)acc[c];
        }
    for (int vi = 0; vi < nv; vi++) {
        float *o = test_zeros_f(n), *o2 = test_zeros_f(n), *o0 = test_zeros_f(n), *o0b = test_zeros_f(n), *lse = test_zeros_f((size_t)B * NH * T);
        vs[vi].fwd(o, lse, q, k, v, B, NH, T, HS, p, seed);
        double e = test_rel_err_f(o, want, n);
        CHECK_MSG(e <= REL_TOL, "%s: dropout o vs direct rel err %.3g", vs[vi].name, e);
        vs[vi].fwd(o2, lse, q, k, v, B, NH, T, HS, p, seed); /* same seed: the same mask, bit for bit */
        CHECK_MSG(memcmp(o, o2, n * sizeof *o) == 0, "%s: two calls differ", vs[vi].name);
        vs[vi].fwd(o2, lse, q, k, v, B, NH, T, HS, p, seed + 1); /* another seed: another mask */
        CHECK_MSG(memcmp(o, o2, n * sizeof *o) != 0, "%s: seed has no effect", vs[vi].name);
        /* p = 0 is no dropout: the seed is never used */
        vs[vi].fwd(o0, lse, q, k, v, B, NH, T, HS, 0.0f, 1);
        vs[vi].fwd(o0b, lse, q, k, v, B, NH, T, HS, 0.0f, 999);
        CHECK_MSG(memcmp(o0, o0b, n * sizeof *o) == 0, "%s: p=0 depends on the seed", vs[vi].name);
        free(o), free(o2), free(o0), free(o0b), free(lse);
    }
    free(q), free(k), free(v), free(want);
}

/* loss = sum W * o, in double, from a float forward */
static double fd_loss(const variant *vr, float *o, float *lse, const float *q, const float *k, const float *v,
                      const float *W, int NH, int T, int HS, float p, uint64_t seed) {
    vr->fwd(o, lse, q, k, v, 1, NH, T, HS, p, seed);
    double s = 0;
    for (size_t i = 0; i < (size_t)NH * T * HS; i++) s += (double)W[i] * o[i];
    return s;
}

TEST(attention_flash_dropout_gradcheck) {
    variant vs[3];
    int nv = variants(vs);
    gptc_rng_seed(&g_rng, 14);
    const int NH = 2, T = 21, HS = 12; /* T crosses a 16-key tile */
    const float p = 0.3f, eps = 1e-2f;
    const uint64_t seed = 42;
    size_t n = (size_t)NH * T * HS;
    for (int vi = 0; vi < nv; vi++) {
        float *x[3] = {test_randn_f(&g_rng, n, 1.0), test_randn_f(&g_rng, n, 1.0), test_randn_f(&g_rng, n, 1.0)}, *W = test_randn_f(&g_rng, n, 1.0);
        float *o = test_zeros_f(n), *lse = test_zeros_f((size_t)NH * T), *g[3] = {test_zeros_f(n), test_zeros_f(n), test_zeros_f(n)};
        float *num = test_zeros_f(n);
        vs[vi].fwd(o, lse, x[0], x[1], x[2], 1, NH, T, HS, p, seed);
        vs[vi].bwd(g[0], g[1], g[2], W, x[0], x[1], x[2], o, lse, 1, NH, T, HS, p, seed);
        const char *what[3] = {"dq", "dk", "dv"};
        for (int a = 0; a < 3; a++) {
            for (size_t i = 0; i < n; i++) {
                float keep = x[a][i];
                x[a][i] = keep + eps;
                double lp = fd_loss(&vs[vi], o, lse, x[0], x[1], x[2], W, NH, T, HS, p, seed);
                x[a][i] = keep - eps;
                double lm = fd_loss(&vs[vi], o, lse, x[0], x[1], x[2], W, NH, T, HS, p, seed);
                x[a][i] = keep;
                num[i] = (float)((lp - lm) / (2.0 * ((double)(keep + eps) - (double)keep)));
            }
            double e = test_rel_err_f(g[a], num, n);
            CHECK_MSG(e <= FD_TOL, "%s p=%g: %s vs finite differences rel err %.3g", vs[vi].name, (double)p,
                      what[a], e);
        }
        for (int a = 0; a < 3; a++) free(x[a]), free(g[a]);
        free(W), free(o), free(lse), free(num);
    }
}

void check_flash_threads_bitwise(const variant *vs, int nv, int HS, uint64_t seed) {
    int saved = gptc_threads();
    gptc_rng_seed(&g_rng, seed);
    const int B = 2, NH = 3, T = 130;
    size_t n = (size_t)B * NH * T * HS, nl = (size_t)B * NH * T;
    float *q = test_randn_f(&g_rng, n, 1.0), *k = test_randn_f(&g_rng, n, 1.0), *v = test_randn_f(&g_rng, n, 1.0);
    float *dO = test_randn_f(&g_rng, n, 1.0), *g0 = test_randn_f(&g_rng, 3 * n, 0.5);
    for (int vi = 0; vi < nv; vi++)
        for (int pi = 0; pi < 2; pi++) {
            float p = pi ? 0.1f : 0.0f;
            gptc_set_threads(1);
            fb_out a = run_fb(&vs[vi], q, k, v, dO, g0, B, NH, T, HS, p, 5);
            gptc_set_threads(2);
            fb_out b = run_fb(&vs[vi], q, k, v, dO, g0, B, NH, T, HS, p, 5);
            CHECK_MSG(memcmp(a.o, b.o, n * 4) == 0 && memcmp(a.lse, b.lse, nl * 4) == 0 &&
                          memcmp(a.dq, b.dq, n * 4) == 0 && memcmp(a.dk, b.dk, n * 4) == 0 &&
                          memcmp(a.dv, b.dv, n * 4) == 0,
                      "%s p=%g: 1 and 2 threads differ", vs[vi].name, (double)p);
            fb_free(&a), fb_free(&b);
        }
    gptc_set_threads(saved);
    free(q), free(k), free(v), free(dO), free(g0);
}

TEST(attention_flash_threads_bitwise) {
    variant vs[3];
    check_flash_threads_bitwise(vs, variants(vs), 64, 15);
}

TEST(attention_flash_dispatch) {
    const char *want = gptc_kernels_get()->variant;
    if (strcmp(want, "amx") == 0) want = "avx512"; /* the amx level adds gemm_bf16 only */
    CHECK_MSG(strcmp(gptc_flash_variant(), want) == 0, "flash %s, table %s", gptc_flash_variant(), want);
    CHECK(gptc_flash_fwd() != NULL && gptc_flash_bwd() != NULL);
    if (strcmp(want, "ref") == 0) CHECK(gptc_flash_fwd() == gptc_flash_fwd_ref);
}

#if defined(__x86_64__) || defined(__i386__)
#include "kernels/prefetch_queue.h"

/* The flash kernels' prefetch queue (kernels/prefetch_queue.h) asks for every line of each span once, in
 * order, a call's worth at a time, and nothing past the spans or past its capacity. Its prefetches are
 * not observable, so the test follows its cursor: each call's lines are the ones its counts lose. */
TEST(attention_prefetch_queue_asks_for_each_line_once) {
    static float buf[4096] __attribute__((aligned(64)));
    const size_t sizes[] = {1, 16, 17, 33, 1000, 0, 2000}; /* floats: 1, 1, 2, 3, 63, none, 125 lines */
    const size_t want_lines[] = {1, 1, 2, 3, 63, 0, 125};
    gptc_pf_queue q;
    gptc_pf_reset(&q);
    size_t total = 0;
    for (int i = 0; i < 7; i++) {
        gptc_pf_add(&q, buf + 64 * i, sizes[i]);
        total += want_lines[i];
    }
    CHECK(q.n == 6); /* the empty span is not held */
    for (int i = 0, h = 0; i < 7; i++)
        if (sizes[i]) {
            CHECK(q.p[h] == (const char *)(buf + 64 * i) && q.left[h] == want_lines[i]);
            h++;
        }
    const int calls[] = {0, 1, 3, 64, 2, 64, 64, 64};
    size_t asked = 0;
    for (int c = 0; c < 8; c++) {
        size_t before = 0, after = 0;
        for (int h = 0; h < q.n; h++) before += q.left[h];
        gptc_pf_some(&q, calls[c]);
        for (int h = 0; h < q.n; h++) after += q.left[h];
        const size_t want = (size_t)calls[c] < before ? (size_t)calls[c] : before;
        CHECK_MSG(before - after == want, "call %d of %d lines asked for %zu, want %zu", c, calls[c], before - after,
                  want);
        asked += before - after;
    }
    CHECK(asked == total && q.cur == q.n);
    /* each span's cursor ended one line past its last */
    for (int i = 0, h = 0; i < 7; i++)
        if (sizes[i]) {
            CHECK(q.p[h] == (const char *)(buf + 64 * i) + 64 * want_lines[i]);
            h++;
        }
    gptc_pf_reset(&q);
    for (int i = 0; i < GPTC_PF_SPANS + 3; i++) gptc_pf_add(&q, buf, 16);
    CHECK(q.n == GPTC_PF_SPANS); /* spans past its capacity dropped */
    gptc_pf_some(&q, 1000);
    CHECK(q.cur == GPTC_PF_SPANS);
}
#endif
