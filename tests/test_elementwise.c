/* test_elementwise.c — the AVX2 and AVX-512 elementwise kernels against the reference (ragged and GPT-2
 * sizes, forward and accumulating backward), the fused residual + LayerNorm and cross-entropy ops at
 * every level against the reference's unfused pairs, 1-vs-2-thread bit identity, GELU/tanh error
 * bounds, timing. */
#include "test.h"

#include "core/core.h"
#include "kernels/gelu.h"
#include "kernels/kernels.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const k_levels[] = {"avx2", "avx512"};
#define NLEVELS 2
/* n not a multiple of 8/16, then a GPT-2 MLP activation (B=4, T=64, 4C=3072) */
static const size_t k_sizes[] = {1, 7, 15, 17, 33, 1000, 4097, 4 * 64 * 3072};
#define NSIZES (sizeof k_sizes / sizeof k_sizes[0])
/* (rows, columns): ragged, then GPT-2 small's C = 768 */
static const int k_shapes[][2] = {{1, 1}, {3, 7}, {5, 17}, {2, 33}, {9, 100}, {7, 767}, {256, 768}};
#define NSHAPES (sizeof k_shapes / sizeof k_shapes[0])

/* Tolerances, as max |a - ref| / max |ref| over the array (test_rel_err_f). 0 = bit-identical:
 * those kernels do the reference's IEEE operations in the reference's order. */
#define TOL_GELU 2e-6      /* fast exp inside (x sigmoid(2u) vs 0.5 x (1 + tanhf(u))) */
#define TOL_GELU_FORM 2e-6 /* erf form (A&S 7.1.26 erfc, 1.5e-7) and sigmoid form vs libm */
#define TOL_LN 1e-5        /* vector sums in another order */
/* Cross-entropy is checked against a double-precision softmax: over V = 50257 the reference's one
 * sequential float sum is off by ~5e-5 itself (the vector kernels' 8/16 partial sums do better). */
#define TOL_CE_PROBS 2e-5 /* vs double, relative to max prob: fast exp (~2 ulp) and the float sums (6e-6 at V = 50257) */
#define TOL_CE_LOSS 2e-5  /* absolute vs double, losses up to ~25 */
#define TOL_CE_REF 1e-4   /* vs the float reference, both probs (relative) and losses (absolute) */
/* The fused ops. Each SIMD fused op is also compared with the same level's unfused pair: the residual +
 * LayerNorm forward and the LayerNorm + residual backward do the same operations in the same order
 * (bit-identical, tolerance 0); so does the reference level's fused op against the reference pair. */
#define TOL_FUSED_LN TOL_LN       /* SIMD vs the float reference: out, mean, rstd, dinp (dw, db: 0) */
#define TOL_FUSED_CE TOL_CE_REF     /* SIMD vs the float reference: dlogits (relative to |dloss|, and the
                                     * non-target entries relative to their largest), losses absolute */
#define TOL_FUSED_CE_D TOL_CE_PROBS /* vs double: dlogits relative to |dloss| (every level), non-target
                                     * entries relative to their largest (SIMD; ref: TOL_CE_REF, as above) */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { return test_uniform(&g_rng); } /* uniform [-1, 1) */
static float *rnd(size_t n, float scale) {
    float *a = malloc((n ? n : 1) * sizeof *a);
    for (size_t i = 0; i < n; i++) a[i] = frand() * scale;
    return a;
}
static float *dup(const float *a, size_t n) {
    float *b = malloc((n ? n : 1) * sizeof *b);
    memcpy(b, a, n * sizeof *b);
    return b;
}
static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* the largest error seen per (op, level), printed at the end of each test */
typedef struct { const char *op, *lvl; double err; } note_t;
static note_t g_notes[64];
static int g_nnotes;
/* max |a - ref| / max(max |ref|, floor) */
static double err_floor(const float *a, const float *ref, size_t n, double floor) {
    double md = 0, mr = floor;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - ref[i]);
        if (!(d <= md)) md = d;
        if (fabs(ref[i]) > mr) mr = fabs(ref[i]);
    }
    return md / mr;
}
/* GELU outputs are compared with the scale floored at 1: on a single tiny output (x ~ -4) the
 * reference's 1 + tanhf(u) has itself lost most of its digits */
static double g_floor;
static void expect(const char *lvl, const char *op, const float *a, const float *ref, size_t n, double tol, size_t size) {
    double e = g_floor > 0 ? err_floor(a, ref, n, g_floor) : test_rel_err_f(a, ref, n);
    CHECK_MSG(e <= tol, "%s %s (size %zu): rel err %.3g > tol %.3g", lvl, op, size, e, tol);
    int i = 0;
    while (i < g_nnotes && !(strcmp(g_notes[i].op, op) == 0 && strcmp(g_notes[i].lvl, lvl) == 0)) i++;
    if (i == g_nnotes && g_nnotes < 64) g_notes[g_nnotes++] = (note_t){op, lvl, 0};
    if (i < 64 && e > g_notes[i].err) g_notes[i].err = e;
}
static void print_notes(void) {
    for (int i = 0; i < g_nnotes; i++) printf("    %-7s %-24s max rel err %.3g\n", g_notes[i].lvl, g_notes[i].op, g_notes[i].err);
    g_nnotes = 0;
}

/* ---- GELU, residual, AdamW: flat arrays ---- */

TEST(elementwise_gelu_residual_adamw) {
    const gptc_kernels *r = gptc_kernels_ref();
    for (int l = 0; l < NLEVELS; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) {
            printf("    %s: not supported here, skipped\n", k_levels[l]);
            continue;
        }
        const char *lv = k_levels[l];
        for (size_t s = 0; s < NSIZES; s++) {
            size_t n = k_sizes[s];
            float *x = rnd(n, 6), *dout = rnd(n, 1), *g0 = rnd(n, 1);
            if (n > 10) x[3] = 20, x[4] = -20, x[5] = 0, x[6] = -100, x[7] = 100;
            float *o1 = rnd(n, 1), *o2 = dup(o1, n), *d1 = dup(g0, n), *d2 = dup(g0, n);
            g_floor = 1;
            k->gelu_fwd(o1, x, n);
            r->gelu_fwd(o2, x, n);
            expect(lv, "gelu_fwd", o1, o2, n, TOL_GELU, n);
            k->gelu_bwd(d1, x, dout, n);
            r->gelu_bwd(d2, x, dout, n);
            expect(lv, "gelu_bwd", d1, d2, n, TOL_GELU, n);
            for (int f = GPTC_GELU_KIND_ERF; f <= GPTC_GELU_KIND_SIGMOID; f++) {
                void (*fwd)(gptc_gelu_kind, float *, const float *, size_t) = l ? gptc_avx512_gelu_fwd : gptc_avx2_gelu_fwd;
                void (*bwd)(gptc_gelu_kind, float *, const float *, const float *, size_t) =
                    l ? gptc_avx512_gelu_bwd : gptc_avx2_gelu_bwd;
                fwd(f, o1, x, n);
                gptc_gelu_ref_fwd(f, o2, x, n);
                expect(lv, f == GPTC_GELU_KIND_ERF ? "gelu_erf_fwd" : "gelu_sigmoid_fwd", o1, o2, n, TOL_GELU_FORM, n);
                memcpy(d1, g0, n * sizeof *d1);
                memcpy(d2, g0, n * sizeof *d2);
                bwd(f, d1, x, dout, n);
                gptc_gelu_ref_bwd(f, d2, x, dout, n);
                expect(lv, f == GPTC_GELU_KIND_ERF ? "gelu_erf_bwd" : "gelu_sigmoid_bwd", d1, d2, n, TOL_GELU_FORM, n);
            }
            g_floor = 0;
            /* residual */
            k->residual_fwd(o1, x, dout, n);
            r->residual_fwd(o2, x, dout, n);
            expect(lv, "residual_fwd", o1, o2, n, 0, n);
            float *da1 = dup(g0, n), *da2 = dup(g0, n), *db1 = dup(dout, n), *db2 = dup(dout, n);
            k->residual_bwd(da1, db1, x, n);
            r->residual_bwd(da2, db2, x, n);
            expect(lv, "residual_bwd da", da1, da2, n, 0, n);
            expect(lv, "residual_bwd db", db1, db2, n, 0, n);
            /* AdamW, a few steps from nonzero moments */
            float *p1 = rnd(n, 1), *m1 = rnd(n, 0.01f), *v1 = rnd(n, 1e-4f);
            for (size_t i = 0; i < n; i++) v1[i] = fabsf(v1[i]);
            float *p2 = dup(p1, n), *m2 = dup(m1, n), *v2 = dup(v1, n);
            for (int t = 1; t <= 3; t++) {
                k->adamw(p1, x, m1, v1, n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
                r->adamw(p2, x, m2, v2, n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
            }
            expect(lv, "adamw p", p1, p2, n, 0, n);
            expect(lv, "adamw m", m1, m2, n, 0, n);
            expect(lv, "adamw v", v1, v2, n, 0, n);
            /* adamw16: the same update, and the bf16 copy of its p (to_bf16's rounding) in the same pass */
            uint16_t *h16 = malloc(n * sizeof(uint16_t));
            memset(h16, 0xA5, n * sizeof(uint16_t));
            k->adamw16(p1, h16, x, m1, v1, n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 4);
            r->adamw(p2, x, m2, v2, n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 4);
            expect(lv, "adamw16 p", p1, p2, n, 0, n);
            expect(lv, "adamw16 m", m1, m2, n, 0, n);
            expect(lv, "adamw16 v", v1, v2, n, 0, n);
            size_t bad16 = 0;
            for (size_t i = 0; i < n; i++) bad16 += h16[i] != gptc_f32_to_bf16(p2[i]);
            CHECK_MSG(bad16 == 0, "%s adamw16 (size %zu): %zu bf16 values differ from the rounded update", lv, n,
                      bad16);
            free(h16);
            free(p1), free(m1), free(v1), free(p2), free(m2), free(v2);
            free(da1), free(da2), free(db1), free(db2);
            free(x), free(dout), free(g0), free(o1), free(o2), free(d1), free(d2);
        }
    }
    print_notes();
}

/* ---- row/column kernels: bias, layernorm, encoder, cross-entropy ---- */

TEST(elementwise_rows) {
    const gptc_kernels *r = gptc_kernels_ref();
    for (int l = 0; l < NLEVELS; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        const char *lv = k_levels[l];
        for (size_t s = 0; s < NSHAPES; s++) {
            int N = k_shapes[s][0], C = k_shapes[s][1];
            size_t nc = (size_t)N * C;
            /* bias */
            float *o1 = rnd(nc, 1), *o2 = dup(o1, nc), *bias = rnd(C, 1), *d = rnd(nc, 1);
            k->bias_fwd(o1, bias, N, C);
            r->bias_fwd(o2, bias, N, C);
            expect(lv, "bias_fwd", o1, o2, nc, 0, nc);
            float *db1 = dup(bias, C), *db2 = dup(bias, C);
            k->bias_bwd(db1, d, N, C);
            r->bias_bwd(db2, d, N, C);
            expect(lv, "bias_bwd", db1, db2, C, 0, nc);
            /* layernorm: inputs with an offset, as activations have */
            float *x = rnd(nc, 2), *w = rnd(C, 1), *b = rnd(C, 1);
            for (size_t i = 0; i < nc; i++) x[i] += 0.5f;
            float *m1 = rnd(N, 1), *s1 = rnd(N, 1), *m2 = rnd(N, 1), *s2 = rnd(N, 1);
            k->layernorm_fwd(o1, m1, s1, x, w, b, N, C);
            r->layernorm_fwd(o2, m2, s2, x, w, b, N, C);
            expect(lv, "layernorm_fwd out", o1, o2, nc, TOL_LN, nc);
            expect(lv, "layernorm_fwd mean", m1, m2, N, TOL_LN, nc);
            expect(lv, "layernorm_fwd rstd", s1, s2, N, TOL_LN, nc);
            float *dx1 = rnd(nc, 1), *dx2 = dup(dx1, nc), *dw1 = rnd(C, 1), *dw2 = dup(dw1, C);
            memcpy(db1, bias, C * sizeof(float));
            memcpy(db2, bias, C * sizeof(float));
            k->layernorm_bwd(dx1, dw1, db1, d, x, w, m2, s2, N, C);
            r->layernorm_bwd(dx2, dw2, db2, d, x, w, m2, s2, N, C);
            expect(lv, "layernorm_bwd dinp", dx1, dx2, nc, TOL_LN, nc);
            expect(lv, "layernorm_bwd dw", dw1, dw2, C, 0, nc);
            expect(lv, "layernorm_bwd db", db1, db2, C, 0, nc);
            /* encoder: N = B*T tokens of a V-token table, B = 1 */
            int V = 50, T = N;
            int *tok = malloc(sizeof(int) * N);
            for (int i = 0; i < N; i++) tok[i] = (int)((frand() + 1) * 0.5f * V) % V;
            float *wte = rnd((size_t)V * C, 1), *wpe = rnd(nc, 1);
            k->encoder_fwd(o1, tok, wte, wpe, 1, T, C);
            r->encoder_fwd(o2, tok, wte, wpe, 1, T, C);
            expect(lv, "encoder_fwd", o1, o2, nc, 0, nc);
            float *dwte1 = rnd((size_t)V * C, 1), *dwte2 = dup(dwte1, (size_t)V * C);
            memcpy(dx1, x, nc * sizeof(float));
            memcpy(dx2, x, nc * sizeof(float));
            k->encoder_bwd(dwte1, dx1, d, tok, 1, T, C);
            r->encoder_bwd(dwte2, dx2, d, tok, 1, T, C);
            expect(lv, "encoder_bwd dwte", dwte1, dwte2, (size_t)V * C, 0, nc);
            expect(lv, "encoder_bwd dwpe", dx1, dx2, nc, 0, nc);
            free(tok), free(wte), free(wpe), free(dwte1), free(dwte2);
            free(o1), free(o2), free(bias), free(d), free(db1), free(db2), free(x), free(w), free(b);
            free(m1), free(s1), free(m2), free(s2), free(dx1), free(dx2), free(dw1), free(dw2);
        }
    }
    print_notes();
}

TEST(elementwise_crossentropy) {
    static const int shapes[][3] = {{1, 1, 1}, {3, 7, 16}, {2, 17, 17}, {4, 65, 80}, {3, 1000, 1024}, {8, 50257, 50304}};
    const gptc_kernels *r = gptc_kernels_ref();
    for (int l = 0; l < NLEVELS; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        const char *lv = k_levels[l];
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int N = shapes[s][0], V = shapes[s][1], Vp = shapes[s][2];
            size_t nv = (size_t)N * Vp;
            float *z = rnd(nv, 8), *p1 = rnd(nv, 1), *p2 = rnd(nv, 1), *l1 = rnd(N, 1), *l2 = rnd(N, 1);
            int *tg = malloc(sizeof(int) * N);
            for (int i = 0; i < N; i++) tg[i] = (int)((frand() + 1) * 0.5f * V) % V;
            k->crossentropy_fwd(l1, p1, z, tg, N, V, Vp);
            r->crossentropy_fwd(l2, p2, z, tg, N, V, Vp);
            float *pd = malloc(nv * sizeof(float));
            double *ld = malloc((N > 0 ? (size_t)N : 1) * sizeof(double));
            for (int i = 0; i < N; i++) { /* the double-precision truth */
                const float *zr = z + (size_t)i * Vp;
                double mx = -INFINITY, sum = 0;
                /* not fmax(mx, zr[v]): GCC 12's aarch64 -O3 vectoriser crashes on that reduction */
                for (int v = 0; v < V; v++) mx = mx > zr[v] ? mx : zr[v];
                for (int v = 0; v < V; v++) sum += exp(zr[v] - mx);
                for (int v = 0; v < Vp; v++) pd[(size_t)i * Vp + v] = v < V ? (float)(exp(zr[v] - mx) / sum) : 0;
                ld[i] = mx + log(sum) - zr[tg[i]];
            }
            expect(lv, "crossentropy_fwd probs", p1, pd, nv, TOL_CE_PROBS, nv);
            expect(lv, "crossentropy_fwd vs ref", p1, p2, nv, TOL_CE_REF, nv);
            for (int i = 0; i < N; i++) {
                CHECK_NEAR(l1[i], ld[i], TOL_CE_LOSS);
                CHECK_NEAR(l1[i], l2[i], TOL_CE_REF);
            }
            /* probs aliasing logits */
            float *za = dup(z, nv);
            k->crossentropy_fwd(l1, za, za, tg, N, V, Vp);
            expect(lv, "crossentropy_fwd aliased", za, pd, nv, TOL_CE_PROBS, nv);
            for (int i = 0; i < N; i++) CHECK_NEAR(l1[i], ld[i], TOL_CE_LOSS);
            free(pd), free(ld);
            float *g1 = rnd(nv, 1), *g2 = dup(g1, nv);
            k->crossentropy_bwd(g1, p2, tg, 0.37f, N, V, Vp);
            r->crossentropy_bwd(g2, p2, tg, 0.37f, N, V, Vp);
            expect(lv, "crossentropy_bwd", g1, g2, nv, 0, nv);
            free(z), free(p1), free(p2), free(l1), free(l2), free(tg), free(za), free(g1), free(g2);
        }
    }
    print_notes();
}

/* ---- the fused ops, at every level (ref included), against the reference's unfused pairs ---- */

static const char *const k_all_levels[] = {"ref", "avx2", "avx512"};
#define NALL 3
/* (N, C): ragged C (1, 7, 33, 100, 767), GPT-2's 768; small N, then N large enough that the LayerNorm
 * backward runs several row chunks with a ragged last one */
static const int k_fused_shapes[][2] = {{1, 1},   {3, 7},    {5, 17},  {2, 33},   {9, 100},  {7, 767},
                                        {1, 768}, {64, 768}, {300, 768}, {2000, 33}, {40000, 1}, {700, 100}};
#define NFUSED (sizeof k_fused_shapes / sizeof k_fused_shapes[0])

TEST(elementwise_fused_residual_layernorm) {
    const gptc_kernels *r = gptc_kernels_ref();
    for (int l = 0; l < NALL; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_all_levels[l]);
        if (!k) {
            printf("    %s: not supported here, skipped\n", k_all_levels[l]);
            continue;
        }
        const char *lv = k_all_levels[l];
        double tol = l == 0 ? 0 : TOL_FUSED_LN;
        for (size_t s = 0; s < NFUSED; s++) {
            int N = k_fused_shapes[s][0], C = k_fused_shapes[s][1];
            size_t nc = (size_t)N * C;
            /* forward: a + b with an offset, as the residual stream has */
            float *a = rnd(nc, 2), *b = rnd(nc, 1), *w = rnd(C, 1), *bias = rnd(C, 1);
            for (size_t i = 0; i < nc; i++) a[i] += 0.5f;
            float *res1 = rnd(nc, 1), *out1 = rnd(nc, 1), *m1 = rnd(N, 1), *s1 = rnd(N, 1);
            float *res2 = rnd(nc, 1), *out2 = rnd(nc, 1), *m2 = rnd(N, 1), *s2 = rnd(N, 1);
            float *res3 = rnd(nc, 1), *out3 = rnd(nc, 1), *m3 = rnd(N, 1), *s3 = rnd(N, 1);
            k->residual_layernorm_fwd(res1, out1, m1, s1, a, b, w, bias, N, C);
            r->residual_fwd(res2, a, b, nc);
            r->layernorm_fwd(out2, m2, s2, res2, w, bias, N, C);
            expect(lv, "res_ln_fwd res", res1, res2, nc, 0, nc);
            expect(lv, "res_ln_fwd out", out1, out2, nc, tol, nc);
            expect(lv, "res_ln_fwd mean", m1, m2, N, tol, nc);
            expect(lv, "res_ln_fwd rstd", s1, s2, N, tol, nc);
            k->residual_fwd(res3, a, b, nc); /* the same level's unfused pair: bit for bit */
            k->layernorm_fwd(out3, m3, s3, res3, w, bias, N, C);
            expect(lv, "res_ln_fwd = own pair out", out1, out3, nc, 0, nc);
            expect(lv, "res_ln_fwd = own pair mean", m1, m3, N, 0, nc);
            expect(lv, "res_ln_fwd = own pair rstd", s1, s3, N, 0, nc);
            /* in place: res over a */
            float *ai = dup(a, nc);
            k->residual_layernorm_fwd(ai, out3, m3, s3, ai, b, w, bias, N, C);
            expect(lv, "res_ln_fwd in place res", ai, res1, nc, 0, nc);
            expect(lv, "res_ln_fwd in place out", out3, out1, nc, 0, nc);
            /* backward, on the reference's mean/rstd; three ways of passing dskip */
            float *d = rnd(nc, 1), *skip = rnd(nc, 1), *dw0 = rnd(C, 1), *db0 = rnd(C, 1);
            for (int mode = 0; mode < 3; mode++) { /* 0: dskip separate, 1: NULL, 2: dskip aliasing dinp */
                static const char *const dname[] = {"ln_bwd_res dinp (dskip)", "ln_bwd_res dinp (dskip NULL)",
                                                    "ln_bwd_res dinp (dskip = dinp)"};
                float *dx1 = mode == 2 ? dup(skip, nc) : rnd(nc, 1000); /* garbage must be overwritten */
                float *dx2 = mode == 1 ? calloc(nc ? nc : 1, sizeof(float)) : dup(skip, nc);
                float *dx3 = dup(dx2, nc);
                float *dw1 = dup(dw0, C), *db1 = dup(db0, C), *dw2 = dup(dw0, C), *db2 = dup(db0, C);
                float *dw3 = dup(dw0, C), *db3 = dup(db0, C);
                const float *ds = mode == 0 ? skip : mode == 1 ? NULL : dx1;
                k->layernorm_bwd_residual(dx1, dw1, db1, ds, d, res2, w, m2, s2, N, C);
                r->layernorm_bwd(dx2, dw2, db2, d, res2, w, m2, s2, N, C);
                k->layernorm_bwd(dx3, dw3, db3, d, res2, w, m2, s2, N, C);
                expect(lv, dname[mode], dx1, dx2, nc, tol, nc);
                expect(lv, "ln_bwd_res dw", dw1, dw2, C, 0, nc);
                expect(lv, "ln_bwd_res db", db1, db2, C, 0, nc);
                expect(lv, "ln_bwd_res = own pair dinp", dx1, dx3, nc, 0, nc);
                expect(lv, "ln_bwd_res = own pair dw", dw1, dw3, C, 0, nc);
                expect(lv, "ln_bwd_res = own pair db", db1, db3, C, 0, nc);
                free(dx1), free(dx2), free(dx3), free(dw1), free(db1), free(dw2), free(db2), free(dw3), free(db3);
            }
            free(a), free(b), free(w), free(bias), free(ai), free(d), free(skip), free(dw0), free(db0);
            free(res1), free(out1), free(m1), free(s1), free(res2), free(out2), free(m2), free(s2);
            free(res3), free(out3), free(m3), free(s3);
        }
    }
    print_notes();
}

TEST(elementwise_fused_crossentropy) {
    static const int shapes[][3] = {{1, 1, 1}, {3, 7, 16}, {2, 17, 17}, {4, 65, 80}, {3, 1000, 1024}, {8, 50257, 50304}};
    const gptc_kernels *r = gptc_kernels_ref();
    for (int l = 0; l < NALL; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_all_levels[l]);
        if (!k) continue;
        const char *lv = k_all_levels[l];
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int N = shapes[s][0], V = shapes[s][1], Vp = shapes[s][2];
            size_t nv = (size_t)N * Vp;
            float dloss = s % 2 ? 1.0f / N : -0.37f;
            float *z = rnd(nv, 8), *g1 = dup(z, nv), *p2 = rnd(nv, 1), *l1 = rnd(N, 1), *l2 = rnd(N, 1);
            for (int i = 0; i < N; i++) /* padding columns hold garbage on entry */
                for (int v = V; v < Vp; v++) g1[(size_t)i * Vp + v] = 1e30f;
            int *tg = malloc(sizeof(int) * N);
            for (int i = 0; i < N; i++) tg[i] = (int)((frand() + 1) * 0.5f * V) % V;
            k->crossentropy_fused(l1, g1, tg, dloss, N, V, Vp);
            /* the reference pair: crossentropy_fwd, then (probs - onehot) * dloss over the probs */
            r->crossentropy_fwd(l2, p2, z, tg, N, V, Vp);
            float *g2 = malloc(nv * sizeof(float)), *gd = malloc(nv * sizeof(float));
            for (int i = 0; i < N; i++)
                for (int v = 0; v < Vp; v++) {
                    size_t j = (size_t)i * Vp + v;
                    g2[j] = v < V ? (p2[j] - (v == tg[i] ? 1.0f : 0.0f)) * dloss : 0.0f;
                }
            double *ld = malloc((size_t)N * sizeof(double));
            for (int i = 0; i < N; i++) { /* the double-precision truth */
                const float *zr = z + (size_t)i * Vp;
                double mx = -INFINITY, sum = 0;
                /* not fmax(mx, zr[v]): GCC 12's aarch64 -O3 vectoriser crashes on that reduction */
                for (int v = 0; v < V; v++) mx = mx > zr[v] ? mx : zr[v];
                for (int v = 0; v < V; v++) sum += exp(zr[v] - mx);
                for (int v = 0; v < Vp; v++)
                    gd[(size_t)i * Vp + v] = v < V ? (float)((exp(zr[v] - mx) / sum - (v == tg[i])) * dloss) : 0;
                ld[i] = mx + log(sum) - zr[tg[i]];
            }
            g_floor = fabs(dloss); /* the whole gradient, on the scale of dloss (its target entries) */
            expect(lv, "ce_fused dlogits vs ref", g1, g2, nv, l == 0 ? 0 : TOL_FUSED_CE, nv);
            expect(lv, "ce_fused dlogits vs double", g1, gd, nv, TOL_FUSED_CE_D, nv);
            g_floor = 0;
            /* the softmax part alone (target entries zeroed), relative to its own largest entry: at
             * V = 50257 the probabilities are ~1e-4, far below dloss, and get their own check */
            for (int i = 0; i < N; i++) {
                size_t j = (size_t)i * Vp + tg[i];
                g1[j] = g2[j] = gd[j] = 0;
            }
            expect(lv, "ce_fused dlogits non-target vs ref", g1, g2, nv, l == 0 ? 0 : TOL_FUSED_CE, nv);
            expect(lv, "ce_fused dlogits non-target vs double", g1, gd, nv, l == 0 ? TOL_CE_REF : TOL_FUSED_CE_D, nv);
            for (int i = 0; i < N; i++) {
                CHECK_NEAR(l1[i], l2[i], l == 0 ? 0 : TOL_FUSED_CE);
                CHECK_NEAR(l1[i], ld[i], l == 0 ? TOL_CE_REF : TOL_CE_LOSS); /* ref: one sequential float sum */
                for (int v = V; v < Vp; v++) CHECK(g1[(size_t)i * Vp + v] == 0);
            }
            free(z), free(g1), free(p2), free(l1), free(l2), free(tg), free(g2), free(gd), free(ld);
        }
    }
    print_notes();
}

/* ---- 1 vs 2 threads: every entry, bit for bit, at sizes large enough to run in parallel ---- */

static int g_nthreads_run;
#define NOUT 17
static void run_all(const gptc_kernels *k, int nth, float *out[NOUT], const float *x, const float *d, const int *tok) {
    int saved = omp_get_max_threads();
    omp_set_num_threads(nth);
    g_nthreads_run = nth;
    const size_t n = 1u << 20;
    const int N = 256, C = 768, V = 50, NV = 4, Vv = 50257, Vp = 50304;
    k->gelu_fwd(out[0], x, n);
    k->gelu_bwd(out[1], x, d, n);
    k->residual_bwd(out[2], out[1], d, n);
    k->adamw(out[3], d, out[4], out[5], n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 2);
    k->layernorm_fwd(out[6], out[7], out[7] + N, x, d, d + C, N, C);
    k->layernorm_bwd(out[8], out[9], out[9] + C, d, x, d + 5, out[7], out[7] + N, N, C);
    k->bias_bwd(out[9] + 2 * C, d, N, C);
    k->encoder_bwd(out[10], out[10] + V * C, d, tok, 1, N, C);
    k->crossentropy_fwd(out[7] + 2 * N, out[11], x, tok, NV, Vv, Vp);
    k->crossentropy_bwd(out[11], out[11], tok, 0.5f, NV, Vv, Vp);
    /* the fused ops: NF = 1024 rows of C = 768 run the LayerNorm backward in several row chunks */
    const int NF = 1024;
    k->residual_layernorm_fwd(out[12], out[13], out[14], out[14] + NF, x, d, d + 7, d + 9, NF, C);
    k->layernorm_bwd_residual(out[15], out[14] + 2 * NF, out[14] + 2 * NF + C, d + 3, x + 1, out[12], d + 11,
                              out[14], out[14] + NF, NF, C);
    k->crossentropy_fused(out[14] + 2 * NF + 2 * C, out[16], tok, 0.5f, NV, Vv, Vp);
    omp_set_num_threads(saved);
}

TEST(elementwise_threads_deterministic) {
    const size_t n = 1u << 20;
    float *x = rnd(n, 4), *d = rnd(n, 1);
    int *tok = malloc(sizeof(int) * 256);
    for (int i = 0; i < 256; i++) tok[i] = i % 50;
    for (int l = 0; l < NLEVELS; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        float *a[NOUT], *b[NOUT];
        for (int i = 0; i < NOUT; i++) {
            a[i] = rnd(n, 1);
            b[i] = dup(a[i], n);
        }
        for (size_t i = 0; i < n; i++) a[5][i] = b[5][i] = fabsf(a[5][i]);
        run_all(k, 1, a, x, d, tok);
        run_all(k, 2, b, x, d, tok);
        for (int i = 0; i < NOUT; i++) {
            CHECK_MSG(memcmp(a[i], b[i], n * sizeof(float)) == 0, "%s: output %d differs between 1 and 2 threads", k_levels[l], i);
            free(a[i]), free(b[i]);
        }
    }
    free(x), free(d), free(tok);
}

/* ---- error statements: the fast tanh against tanhf, each GELU form against the exact erf form ---- */

#define SWEEP_N 2000001 /* [-10, 10] in steps of 1e-5 */
#define TANH_BOUND 3e-7
static double gelu_exact(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double gelu_exact_d(double x) { return 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI); }

TEST(elementwise_gelu_errors) {
    float *x = malloc(SWEEP_N * sizeof(float)), *y = malloc(SWEEP_N * sizeof(float));
    float *one = malloc(SWEEP_N * sizeof(float)), *g = malloc(SWEEP_N * sizeof(float));
    for (int i = 0; i < SWEEP_N; i++) x[i] = (float)(-10 + 20.0 * i / (SWEEP_N - 1)), one[i] = 1;
    /* fast tanh */
    for (int l = 0; l < NLEVELS; l++) {
        if (!gptc_kernels_level(k_levels[l])) continue;
        (l ? gptc_avx512_tanh : gptc_avx2_tanh)(y, x, SWEEP_N);
        double e = 0, ed = 0;
        for (int i = 0; i < SWEEP_N; i++) {
            e = fmax(e, fabs((double)y[i] - tanhf(x[i])));
            ed = fmax(ed, fabs((double)y[i] - tanh(x[i])));
        }
        printf("    %-7s fast tanh on [-10,10]: max abs err %.3g vs tanhf, %.3g vs double tanh (bound %g)\n",
               k_levels[l], e, ed, TANH_BOUND);
        CHECK_MSG(e <= TANH_BOUND, "%s tanh err %.3g", k_levels[l], e);
    }
    /* GELU forms vs the exact erf form, forward and derivative (bwd with dout = 1 into zeros).
     * Bounds: tanh form ~4.7e-4 (fwd) / ~2e-3 (d) is the approximation itself; sigmoid form ~2e-2 / ~0.1;
     * erf form 2e-6: float rounding of outputs up to 10 (half an ulp of 10 is 4.8e-7) plus erfc's 1.5e-7. */
    static const char *const fname[] = {"tanh", "erf", "sigmoid"};
    static const double fbound[] = {5e-4, 2e-6, 2.1e-2}, dbound[] = {2.5e-3, 4e-6, 0.11};
    for (int impl = 0; impl <= NLEVELS; impl++) {
        const char *iname = impl == 0 ? "ref" : k_levels[impl - 1];
        if (impl && !gptc_kernels_level(iname)) continue;
        for (int f = 0; f < 3; f++) {
            if (impl == 0) gptc_gelu_ref_fwd(f, y, x, SWEEP_N);
            else (impl == 2 ? gptc_avx512_gelu_fwd : gptc_avx2_gelu_fwd)(f, y, x, SWEEP_N);
            memset(g, 0, SWEEP_N * sizeof(float));
            if (impl == 0) gptc_gelu_ref_bwd(f, g, x, one, SWEEP_N);
            else (impl == 2 ? gptc_avx512_gelu_bwd : gptc_avx2_gelu_bwd)(f, g, x, one, SWEEP_N);
            double e = 0, ed = 0;
            for (int i = 0; i < SWEEP_N; i++) {
                e = fmax(e, fabs(y[i] - gelu_exact(x[i])));
                ed = fmax(ed, fabs(g[i] - gelu_exact_d(x[i])));
            }
            printf("    %-7s gelu %-7s vs exact erf GELU on [-10,10]: fwd max abs err %.3g (bound %g), "
                   "derivative %.3g (bound %g)\n", iname, fname[f], e, fbound[f], ed, dbound[f]);
            CHECK_MSG(e <= fbound[f] && ed <= dbound[f], "%s gelu %s: %.3g %.3g", iname, fname[f], e, ed);
        }
    }
    /* the dispatcher at the level in use agrees with the reference */
    for (int f = 0; f < 3; f++) {
        gptc_gelu_fwd_form(f, y, x, SWEEP_N);
        gptc_gelu_ref_fwd(f, g, x, SWEEP_N);
        CHECK_MSG(test_rel_err_f(y, g, SWEEP_N) <= TOL_GELU_FORM, "gptc_gelu_fwd_form %s", fname[f]);
        memset(y, 0, SWEEP_N * sizeof(float));
        memset(g, 0, SWEEP_N * sizeof(float));
        gptc_gelu_bwd_form(f, y, x, one, SWEEP_N);
        gptc_gelu_ref_bwd(f, g, x, one, SWEEP_N);
        CHECK_MSG(test_rel_err_f(y, g, SWEEP_N) <= TOL_GELU_FORM, "gptc_gelu_bwd_form %s", fname[f]);
    }
    free(x), free(y), free(one), free(g);
}

/* ---- timing (printed, not asserted): gelu_fwd and adamw on 10M floats ---- */

TEST(elementwise_timing) {
    const size_t n = 10u * 1000 * 1000;
    float *x = rnd(n, 4), *y = rnd(n, 1), *m = rnd(n, 0.01f), *v = rnd(n, 1e-4f), *p = rnd(n, 1);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    double tref[2] = {0};
    for (int l = -1; l < NLEVELS; l++) {
        const gptc_kernels *k = l < 0 ? gptc_kernels_ref() : gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        double best[2] = {1e9, 1e9};
        for (int rep = 0; rep < 3; rep++) {
            double t0 = now_s();
            for (int i = 0; i < 4; i++) k->gelu_fwd(y, x, n);
            double t1 = now_s();
            for (int i = 0; i < 4; i++) k->adamw(p, y, m, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 4 * rep + i + 1);
            double t2 = now_s();
            best[0] = fmin(best[0], (t1 - t0) / 4);
            best[1] = fmin(best[1], (t2 - t1) / 4);
        }
        if (l < 0) tref[0] = best[0], tref[1] = best[1];
        printf("    %-7s 10M floats, %d threads: gelu_fwd %.2f ms (x%.1f vs ref), adamw %.2f ms (x%.1f vs ref)\n",
               l < 0 ? "ref" : k_levels[l], omp_get_max_threads(), best[0] * 1e3, tref[0] / best[0], best[1] * 1e3,
               tref[1] / best[1]);
    }
    free(x), free(y), free(m), free(v), free(p);
}
