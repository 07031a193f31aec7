/* test_cuda.c — the CUDA backend (src/backend/cuda.h, make CUDA=1): every operator of its table against
 * the CPU reference table at ragged shapes, forward and backward; the bf16-storage twins and to_bf16 bit
 * for bit against rounding their fp32 entries; the dropout masks (residual and attention) identical to
 * the CPU's; the same bits run to run; a tiny GPT-2 training step on the device against the CPU's fp32
 * step; and `gptc train --device` refused with exit 2 where it cannot run (this one runs everywhere).
 * Compiled in every build: without a device (a CPU build, CI, this machine) each device test prints one
 * "SKIP ... no CUDA device" line and passes.
 *
 * Tolerances, relative to the largest reference value (test_rel_err_f): fp32 elementwise and row
 * operators 1e-5 to 1e-4 (the device's expf/tanhf/erff differ from glibc's by an ulp or two, and the
 * sums run in another order); fp32 GEMM 3e-3 (cuBLASLt runs it as TF32: 10-bit mantissas, fp32 sums);
 * bf16 GEMM 1e-4 against the CPU's bf16 contract (the same rounded operands, only the sum order differs);
 * bf16 flash attention 1e-2 (a sum-order difference can flip a bf16 rounding of P or dS); the training
 * step's loss 2e-3 and gradients 3e-2 (TF32 through every layer). */
#include "test.h"
#include "backend/cuda.h"
#include "core/core.h"
#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "model/gpt2.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Selects device 0; false (after one SKIP line) when there is none. */
static bool cuda_ready(const char *test) {
    if (gptc_cuda_device_count() == 0) {
        printf("    SKIP %s: no CUDA device%s\n", test, gptc_cuda_built() ? "" : " (built without CUDA)");
        return false;
    }
    if (gptc_cuda_select(0)) {
        printf("    SKIP %s: no CUDA device usable (%s)\n", test, gptc_last_error());
        return false;
    }
    return true;
}

/* device (managed) arrays: the host fills and reads them around a synchronize */
static float *dev_f(size_t n) { return gptc_cuda_memory()->alloc(n * sizeof(float) + 4, "test"); }
static float *dev_copy(const float *x, size_t n) {
    float *d = dev_f(n);
    memcpy(d, x, n * sizeof(float));
    return d;
}
static void dev_free(void *p) { gptc_cuda_memory()->free(p); }
/* a device array of N(0, scale^2) draws */
static float *dev_randn(gptc_rng *r, size_t n, double scale) {
    float *h = test_randn_f(r, n, scale), *d = dev_copy(h, n);
    free(h);
    return d;
}
static void sync(void) { gptc_cuda_memory()->synchronize(); }

#define REL(a, b, n, tol, what)                                                                   \
    do {                                                                                          \
        double e_ = test_rel_err_f((a), (b), (n));                                                \
        CHECK_MSG(e_ <= (tol), "%s: rel err %.3g > %.3g", (what), e_, (double)(tol));            \
    } while (0)

TEST(cuda_device_option_refused_exit_2) {
    const char *data = test_shakespeare_data();
    const char *bad[] = {"--device tpu", "--device cuda:x", "--device cuda:999"};
    for (int i = 0; i < 3; i++) {
        test_cli_result r = test_cli(NULL, "train --data %s --model tiny --steps 1 %s", data, bad[i]);
        CHECK_MSG(r.rc == 2, "%s: rc %d", bad[i], r.rc);
        CHECK_MSG(test_count_lines(r.err) == 1 && strstr(r.err, "--device"), "%s: %s", bad[i], r.err);
        test_cli_free(&r);
    }
    test_cli_result r = test_cli("GPTC_DEVICE=cuda:999", "train --data %s --model tiny --steps 1", data);
    CHECK_MSG(r.rc == 2 && strstr(r.err, "--device"), "GPTC_DEVICE: rc %d %s", r.rc, r.err);
    test_cli_free(&r);
    if (gptc_cuda_device_count() == 0) { /* plain cuda is refused too, saying why */
        r = test_cli(NULL, "train --data %s --model tiny --steps 1 --device cuda", data);
        CHECK_EQ_INT(r.rc, 2);
        CHECK_MSG(strstr(r.err, gptc_cuda_built() ? "no CUDA device" : "built without CUDA (make CUDA=1)"), "%s", r.err);
        test_cli_free(&r);
    }
    int dev;
    CHECK_OK(gptc_device_parse("cpu", &dev));
    CHECK_EQ_INT(dev, -1);
    CHECK_OK(gptc_device_parse(NULL, &dev));
    CHECK_EQ_INT(dev, -1);
    CHECK(gptc_device_parse("cuda:", &dev) == GPTC_ERR_ARG);
    CHECK(gptc_device_parse("cuda:1x", &dev) == GPTC_ERR_ARG);
    if (!gptc_cuda_built()) {
        CHECK(gptc_cuda_memory() == NULL && gptc_cuda_kernels() == NULL);
        CHECK(gptc_device_parse("cuda", &dev) == GPTC_ERR_ARG && strstr(gptc_last_error(), "built without CUDA"));
    }
}

TEST(cuda_table_has_every_entry) {
    if (!cuda_ready("cuda_table_has_every_entry")) return;
    const gptc_kernels *k = gptc_cuda_kernels();
    for (int i = 0; i < gptc_kernel_nops; i++) {
        void *p;
        memcpy(&p, (const char *)k + gptc_kernel_ops[i].offset, sizeof p);
        CHECK_MSG(p != NULL, "cuda: %s is NULL", gptc_kernel_ops[i].name);
    }
    gptc_cuda_device_info d;
    CHECK_OK(gptc_cuda_device_info_get(0, &d));
    CHECK(d.sms > 0 && d.mem_total > 0 && d.name[0]);
    printf("    cuda:0 %s, %d SMs, cc %d.%d\n", d.name, d.sms, d.cc_major, d.cc_minor);
}

TEST(cuda_rowwise_ops_match_reference) {
    if (!cuda_ready("cuda_rowwise_ops_match_reference")) return;
    const gptc_kernels *r = gptc_kernels_ref(), *g = gptc_cuda_kernels();
    gptc_rng rng;
    gptc_rng_seed(&rng, 11);
    const int shapes[][2] = {{1, 1}, {3, 7}, {5, 33}, {17, 257}, {9, 770}};
    for (int s = 0; s < 5; s++) {
        int N = shapes[s][0], C = shapes[s][1];
        size_t NC = (size_t)N * C;
        float *x = test_randn_f(&rng, NC, 1.5), *y = test_randn_f(&rng, NC, 1), *w = test_randn_f(&rng, C, 1);
        float *b = test_randn_f(&rng, C, 1), *dout = test_randn_f(&rng, NC, 1), *dbase = test_randn_f(&rng, NC, 1);
        float *dx = dev_copy(x, NC), *dy = dev_copy(y, NC), *dw = dev_copy(w, C), *db = dev_copy(b, C);
        float *ddout = dev_copy(dout, NC);
        /* layernorm fwd */
        float *o = test_zeros_f(NC), *mean = test_zeros_f(N), *rstd = test_zeros_f(N);
        float *go = dev_f(NC), *gmean = dev_f(N), *grstd = dev_f(N);
        r->layernorm_fwd(o, mean, rstd, x, w, b, N, C);
        g->layernorm_fwd(go, gmean, grstd, dx, dw, db, N, C);
        sync();
        REL(go, o, NC, 1e-5, "layernorm_fwd out");
        REL(gmean, mean, N, 1e-5, "layernorm_fwd mean");
        REL(grstd, rstd, N, 1e-5, "layernorm_fwd rstd");
        /* residual + layernorm fwd, res aliasing a */
        float *res = test_copy_f(x, NC), *gres = dev_copy(x, NC);
        r->residual_layernorm_fwd(res, o, mean, rstd, res, y, w, b, N, C);
        g->residual_layernorm_fwd(gres, go, gmean, grstd, gres, dy, dw, db, N, C);
        sync();
        REL(gres, res, NC, 1e-6, "residual_layernorm_fwd res");
        REL(go, o, NC, 1e-5, "residual_layernorm_fwd out");
        /* layernorm bwd (accumulates) and bwd_residual (overwrites; dskip aliasing dinp and NULL) */
        float *dinp = test_copy_f(dbase, NC), *gdinp = dev_copy(dbase, NC);
        float *dwr = test_copy_f(w, C), *dbr = test_copy_f(b, C), *gdw = dev_copy(w, C), *gdb = dev_copy(b, C);
        r->layernorm_bwd(dinp, dwr, dbr, dout, x, w, mean, rstd, N, C);
        g->layernorm_bwd(gdinp, gdw, gdb, ddout, dx, dw, gmean, grstd, N, C);
        sync();
        REL(gdinp, dinp, NC, 1e-4, "layernorm_bwd dinp");
        REL(gdw, dwr, C, 1e-4, "layernorm_bwd dw");
        REL(gdb, dbr, C, 1e-4, "layernorm_bwd db");
        r->layernorm_bwd_residual(dinp, dwr, dbr, dinp, dout, x, w, mean, rstd, N, C);
        g->layernorm_bwd_residual(gdinp, gdw, gdb, gdinp, ddout, dx, dw, gmean, grstd, N, C);
        sync();
        REL(gdinp, dinp, NC, 1e-4, "layernorm_bwd_residual (aliased dskip)");
        r->layernorm_bwd_residual(dinp, dwr, dbr, NULL, dout, x, w, mean, rstd, N, C);
        g->layernorm_bwd_residual(gdinp, gdw, gdb, NULL, ddout, dx, dw, gmean, grstd, N, C);
        sync();
        REL(gdinp, dinp, NC, 1e-4, "layernorm_bwd_residual (no dskip)");
        REL(gdw, dwr, C, 1e-4, "layernorm_bwd_residual dw");
        /* bias, residual */
        float *acc = test_copy_f(x, NC), *gacc = dev_copy(x, NC);
        r->bias_fwd(acc, b, N, C);
        g->bias_fwd(gacc, db, N, C);
        r->residual_bwd(acc, dinp, dout, NC);
        g->residual_bwd(gacc, gdinp, ddout, NC);
        r->bias_bwd(dbr, dout, N, C);
        g->bias_bwd(gdb, ddout, N, C);
        r->residual_fwd(res, x, y, NC);
        g->residual_fwd(gres, dx, dy, NC);
        sync();
        REL(gacc, acc, NC, 1e-6, "bias_fwd + residual_bwd");
        REL(gdinp, dinp, NC, 1e-4, "residual_bwd db");
        REL(gdb, dbr, C, 1e-5, "bias_bwd");
        REL(gres, res, NC, 0, "residual_fwd");
        /* GELU, three forms */
        const char *fn[] = {"tanh", "erf", "sigmoid"};
        void (*rf[])(float *, const float *, size_t) = {r->gelu_fwd, r->gelu_erf_fwd, r->gelu_sigmoid_fwd};
        void (*gf[])(float *, const float *, size_t) = {g->gelu_fwd, g->gelu_erf_fwd, g->gelu_sigmoid_fwd};
        void (*rb[])(float *, const float *, const float *, size_t) = {r->gelu_bwd, r->gelu_erf_bwd, r->gelu_sigmoid_bwd};
        void (*gb[])(float *, const float *, const float *, size_t) = {g->gelu_bwd, g->gelu_erf_bwd, g->gelu_sigmoid_bwd};
        for (int f = 0; f < 3; f++) {
            rf[f](o, x, NC);
            gf[f](go, dx, NC);
            rb[f](dinp, x, dout, NC);
            gb[f](gdinp, dx, ddout, NC);
            sync();
            CHECK_MSG(test_rel_err_f(go, o, NC) <= 1e-5, "gelu %s fwd", fn[f]);
            CHECK_MSG(test_rel_err_f(gdinp, dinp, NC) <= 1e-4, "gelu %s bwd", fn[f]);
        }
        free(x), free(y), free(w), free(b), free(dout), free(dbase), free(o), free(mean), free(rstd), free(res);
        free(dinp), free(dwr), free(dbr), free(acc);
        dev_free(dx), dev_free(dy), dev_free(dw), dev_free(db), dev_free(ddout), dev_free(go), dev_free(gmean);
        dev_free(grstd), dev_free(gres), dev_free(gdinp), dev_free(gdw), dev_free(gdb), dev_free(gacc);
    }
}

TEST(cuda_encoder_crossentropy_adamw_match_reference) {
    if (!cuda_ready("cuda_encoder_crossentropy_adamw_match_reference")) return;
    const gptc_kernels *r = gptc_kernels_ref(), *g = gptc_cuda_kernels();
    gptc_rng rng;
    gptc_rng_seed(&rng, 12);
    int B = 3, T = 7, C = 37, V = 61, Vp = 64, maxT = 9, N = B * T;
    int *inp = gptc_cuda_memory()->alloc(sizeof(int) * N, "test"), *tg = gptc_cuda_memory()->alloc(sizeof(int) * N, "test");
    for (int i = 0; i < N; i++) inp[i] = (int)(gptc_rng_next(&rng) % 5), tg[i] = (int)(gptc_rng_next(&rng) % V); /* repeats */
    float *wte = test_randn_f(&rng, (size_t)Vp * C, 1), *wpe = test_randn_f(&rng, (size_t)maxT * C, 1);
    float *dout = test_randn_f(&rng, (size_t)N * C, 1), *out = test_zeros_f((size_t)N * C);
    float *gwte = dev_copy(wte, (size_t)Vp * C), *gwpe = dev_copy(wpe, (size_t)maxT * C), *gout = dev_f((size_t)N * C);
    float *gdout = dev_copy(dout, (size_t)N * C);
    r->encoder_fwd(out, inp, wte, wpe, B, T, C);
    g->encoder_fwd(gout, inp, gwte, gwpe, B, T, C);
    r->encoder_bwd(wte, wpe, dout, inp, B, T, C);
    g->encoder_bwd(gwte, gwpe, gdout, inp, B, T, C);
    sync();
    REL(gout, out, (size_t)N * C, 0, "encoder_fwd");
    REL(gwte, wte, (size_t)Vp * C, 0, "encoder_bwd dwte (the reference's order)");
    REL(gwpe, wpe, (size_t)maxT * C, 1e-6, "encoder_bwd dwpe");
    /* cross-entropy fwd / bwd / fused, padding columns */
    float *logits = test_randn_f(&rng, (size_t)N * Vp, 3), *probs = test_zeros_f((size_t)N * Vp);
    float *losses = test_zeros_f(N), *dl = test_randn_f(&rng, (size_t)N * Vp, 1);
    float *glogits = dev_copy(logits, (size_t)N * Vp), *gprobs = dev_f((size_t)N * Vp), *glosses = dev_f(N);
    float *gdl = dev_copy(dl, (size_t)N * Vp);
    r->crossentropy_fwd(losses, probs, logits, tg, N, V, Vp);
    g->crossentropy_fwd(glosses, gprobs, glogits, tg, N, V, Vp);
    r->crossentropy_bwd(dl, probs, tg, 0.37f, N, V, Vp);
    g->crossentropy_bwd(gdl, gprobs, tg, 0.37f, N, V, Vp);
    sync();
    REL(glosses, losses, N, 1e-5, "crossentropy_fwd losses");
    REL(gprobs, probs, (size_t)N * Vp, 1e-5, "crossentropy_fwd probs");
    REL(gdl, dl, (size_t)N * Vp, 1e-5, "crossentropy_bwd");
    r->crossentropy_fused(losses, logits, tg, 0.37f, N, V, Vp);
    g->crossentropy_fused(glosses, glogits, tg, 0.37f, N, V, Vp);
    sync();
    REL(glosses, losses, N, 1e-5, "crossentropy_fused losses");
    REL(glogits, logits, (size_t)N * Vp, 1e-5, "crossentropy_fused dlogits");
    for (int n = 0; n < N; n++)
        for (int v = V; v < Vp; v++) CHECK(glogits[(size_t)n * Vp + v] == 0 && gprobs[(size_t)n * Vp + v] == 0);
    /* AdamW, grad_sumsq, zero */
    size_t n = 1003;
    float *p = test_randn_f(&rng, n, 1), *gr = test_randn_f(&rng, n, 1), *m = test_randn_f(&rng, n, 0.1);
    float *v = test_randn_f(&rng, n, 0.1);
    for (size_t i = 0; i < n; i++) v[i] = v[i] * v[i];
    float *gp = dev_copy(p, n), *ggr = dev_copy(gr, n), *gm = dev_copy(m, n), *gv = dev_copy(v, n);
    r->adamw(p, gr, m, v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 3);
    g->adamw(gp, ggr, gm, gv, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 3);
    sync();
    REL(gp, p, n, 1e-6, "adamw p");
    REL(gm, m, n, 1e-6, "adamw m");
    REL(gv, v, n, 1e-6, "adamw v");
    double s1 = r->grad_sumsq(gr, n), s2 = g->grad_sumsq(ggr, n);
    CHECK_NEAR(s2, s1, 1e-12 * s1);
    g->zero(ggr, n);
    sync();
    for (size_t i = 0; i < n; i++) CHECK(ggr[i] == 0);
    free(wte), free(wpe), free(dout), free(out), free(logits), free(probs), free(losses), free(dl), free(p), free(gr);
    free(m), free(v);
    dev_free(inp), dev_free(tg), dev_free(gwte), dev_free(gwpe), dev_free(gout), dev_free(gdout), dev_free(glogits);
    dev_free(gprobs), dev_free(glosses), dev_free(gdl), dev_free(gp), dev_free(ggr), dev_free(gm), dev_free(gv);
}

TEST(cuda_gemm_matches_reference) {
    if (!cuda_ready("cuda_gemm_matches_reference")) return;
    const gptc_kernels *r = gptc_kernels_ref(), *g = gptc_cuda_kernels();
    gptc_rng rng;
    gptc_rng_seed(&rng, 13);
    const int shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 65, 17}, {64, 96, 128}, {130, 47, 259}, {5, 9, 0}};
    for (int s = 0; s < 6; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int v = 0; v < 4; v++) { /* beta 0/1 x bias or not */
                    float beta = (float)(v & 1);
                    int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
                    size_t na = (size_t)(ta ? K : M) * lda + 1, nb = (size_t)(tb ? N : K) * ldb + 1, nc = (size_t)M * ldc;
                    float *A = test_randn_f(&rng, na, 1), *B = test_randn_f(&rng, nb, 1), *C0 = test_randn_f(&rng, nc, 1);
                    float *bias = v & 2 ? test_randn_f(&rng, N, 1) : NULL;
                    float *gA = dev_copy(A, na), *gB = dev_copy(B, nb), *gbias = bias ? dev_copy(bias, N) : NULL;
                    for (int prec = 0; prec < 3; prec++) { /* fp32 (TF32), bf16, bf16 with A stored in bf16 */
                        float *C = test_copy_f(C0, nc), *gC = dev_copy(C0, nc);
                        uint16_t *A16 = NULL;
                        if (prec == 0) {
                            r->gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
                            g->gemm(ta, tb, M, N, K, gA, lda, gB, ldb, beta, gbias, gC, ldc);
                        } else if (prec == 1) {
                            r->gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
                            g->gemm_bf16(ta, tb, M, N, K, gA, lda, gB, ldb, beta, gbias, gC, ldc);
                        } else {
                            A16 = gptc_cuda_memory()->alloc(na * sizeof(uint16_t), "test");
                            for (size_t i = 0; i < na; i++) A16[i] = gptc_f32_to_bf16(A[i]);
                            r->gemm_bf16_in16(ta, tb, M, N, K, A16, lda, B, ldb, GPTC_GEMM_A16, beta, bias, C, ldc);
                            g->gemm_bf16_in16(ta, tb, M, N, K, A16, lda, gB, ldb, GPTC_GEMM_A16, beta, gbias, gC, ldc);
                        }
                        sync();
                        /* TF32 against fp32; the bf16 entries against the same bf16 contract */
                        double tol = prec == 0 ? 3e-3 : 1e-4, e = test_rel_err_f(gC, C, nc);
                        CHECK_MSG(e <= tol, "gemm %s M%d N%d K%d ta%d tb%d beta%g bias%d: rel err %.3g",
                                  prec == 0 ? "fp32" : prec == 1 ? "bf16" : "bf16_in16", M, N, K, ta, tb, beta,
                                  bias != NULL, e);
                        free(C), dev_free(gC), dev_free(A16);
                    }
                    free(A), free(B), free(C0), free(bias), dev_free(gA), dev_free(gB), dev_free(gbias);
                }
    }
}

TEST(cuda_attention_matches_reference) {
    if (!cuda_ready("cuda_attention_matches_reference")) return;
    const gptc_kernels *r = gptc_kernels_ref(), *g = gptc_cuda_kernels();
    gptc_rng rng;
    gptc_rng_seed(&rng, 14);
    const int shapes[][4] = {{1, 1, 1, 1}, {2, 3, 19, 8}, {1, 2, 40, 64}, {2, 1, 33, 72}, {1, 2, 70, 128}}; /* B NH T HS */
    for (int s = 0; s < 5; s++) {
        int B = shapes[s][0], NH = shapes[s][1], T = shapes[s][2], HS = shapes[s][3], C = NH * HS;
        size_t n = (size_t)B * NH * T * HS, rows = (size_t)B * NH * T, TT = rows * T, n3 = (size_t)B * T * 3 * C;
        float *qkv = test_randn_f(&rng, n3, 1), *dout = test_randn_f(&rng, (size_t)B * T * C, 1);
        float *gqkv = dev_copy(qkv, n3), *gdout = dev_copy(dout, (size_t)B * T * C);
        /* naive attention fwd / bwd */
        float *out = test_zeros_f((size_t)B * T * C), *pre = test_zeros_f(TT), *att = test_zeros_f(TT);
        float *gout = dev_f((size_t)B * T * C), *gpre = dev_f(TT), *gatt = dev_f(TT);
        float *dqkv = test_randn_f(&rng, n3, 1), *gdqkv = dev_copy(dqkv, n3), *s1 = test_zeros_f(TT), *s2 = test_zeros_f(TT);
        float *gs1 = dev_f(TT), *gs2 = dev_f(TT);
        r->attention_fwd(out, pre, att, qkv, B, T, C, NH);
        g->attention_fwd(gout, gpre, gatt, gqkv, B, T, C, NH);
        r->attention_bwd(dqkv, s1, s2, dout, qkv, att, B, T, C, NH);
        g->attention_bwd(gdqkv, gs1, gs2, gdout, gqkv, gatt, B, T, C, NH);
        sync();
        REL(gout, out, (size_t)B * T * C, 1e-5, "attention_fwd");
        REL(gdqkv, dqkv, n3, 1e-4, "attention_bwd");
        /* head reshapes */
        float *q = test_zeros_f(n), *k = test_zeros_f(n), *v = test_zeros_f(n), *gq = dev_f(n), *gk = dev_f(n), *gv = dev_f(n);
        r->qkv_to_heads(q, k, v, qkv, B, T, C, NH);
        g->qkv_to_heads(gq, gk, gv, gqkv, B, T, C, NH);
        r->heads_to_qkv_grad(dqkv, q, k, v, B, T, C, NH);
        g->heads_to_qkv_grad(gdqkv, gq, gk, gv, B, T, C, NH);
        r->heads_to_rows(out, q, B, T, C, NH);
        g->heads_to_rows(gout, gq, B, T, C, NH);
        float *dh = test_zeros_f(n), *gdh = dev_f(n);
        r->rows_to_heads(dh, dout, B, T, C, NH);
        g->rows_to_heads(gdh, gdout, B, T, C, NH);
        sync();
        REL(gq, q, n, 0, "qkv_to_heads q");
        REL(gv, v, n, 0, "qkv_to_heads v");
        REL(gdqkv, dqkv, n3, 1e-4, "heads_to_qkv_grad");
        REL(gout, out, (size_t)B * T * C, 0, "heads_to_rows");
        REL(gdh, dh, n, 0, "rows_to_heads");
        /* flash fwd / bwd: fp32 and bf16, without and with dropout (the same Philox mask) */
        for (int bf = 0; bf < 2; bf++)
            for (int dr = 0; dr < 2; dr++) {
                float p = dr ? 0.2f : 0.0f;
                uint64_t seed = 0x1234567890abcdefull + (uint64_t)s;
                float *o = test_zeros_f(n), *lse = test_zeros_f(rows), *go = dev_f(n), *glse = dev_f(rows);
                float *dq = test_randn_f(&rng, n, 1), *dk = test_randn_f(&rng, n, 1), *dv = test_randn_f(&rng, n, 1);
                float *gdq = dev_copy(dq, n), *gdk = dev_copy(dk, n), *gdv = dev_copy(dv, n);
                gptc_flash_fwd_fn rfw = bf ? r->flash_fwd_bf16 : r->flash_fwd, gfw = bf ? g->flash_fwd_bf16 : g->flash_fwd;
                gptc_flash_bwd_fn rbw = bf ? r->flash_bwd_bf16 : r->flash_bwd, gbw = bf ? g->flash_bwd_bf16 : g->flash_bwd;
                rfw(o, lse, q, k, v, B, NH, T, HS, p, seed);
                gfw(go, glse, gq, gk, gv, B, NH, T, HS, p, seed);
                rbw(dq, dk, dv, dh, q, k, v, o, lse, B, NH, T, HS, p, seed);
                gbw(gdq, gdk, gdv, gdh, gq, gk, gv, go, glse, B, NH, T, HS, p, seed);
                sync();
                double tf = bf ? 1e-2 : 1e-4, tb = bf ? 2e-2 : 1e-4;
                const char *w = bf ? (dr ? "flash bf16 dropout" : "flash bf16") : (dr ? "flash dropout" : "flash");
                CHECK_MSG(test_rel_err_f(go, o, n) <= tf, "%s o (B%d NH%d T%d HS%d): %.3g", w, B, NH, T, HS, test_rel_err_f(go, o, n));
                CHECK_MSG(test_rel_err_f(glse, lse, rows) <= tf, "%s lse", w);
                CHECK_MSG(test_rel_err_f(gdq, dq, n) <= tb, "%s dq: %.3g", w, test_rel_err_f(gdq, dq, n));
                CHECK_MSG(test_rel_err_f(gdk, dk, n) <= tb, "%s dk: %.3g", w, test_rel_err_f(gdk, dk, n));
                CHECK_MSG(test_rel_err_f(gdv, dv, n) <= tb, "%s dv: %.3g", w, test_rel_err_f(gdv, dv, n));
                free(o), free(lse), free(dq), free(dk), free(dv);
                dev_free(go), dev_free(glse), dev_free(gdq), dev_free(gdk), dev_free(gdv);
            }
        /* decoding: the last row's query against all T keys */
        float *dec = test_zeros_f(C), *gdec = dev_f(C), *da = test_zeros_f((size_t)NH * T), *gda = dev_f((size_t)NH * T);
        float *kc = test_zeros_f((size_t)T * C), *vc = test_zeros_f((size_t)T * C);
        for (int t = 0; t < T; t++)
            memcpy(kc + (size_t)t * C, qkv + (size_t)t * 3 * C + C, sizeof(float) * C),
                memcpy(vc + (size_t)t * C, qkv + (size_t)t * 3 * C + 2 * C, sizeof(float) * C);
        float *gkc = dev_copy(kc, (size_t)T * C), *gvc = dev_copy(vc, (size_t)T * C), *gqd = dev_copy(qkv, C);
        r->attention_decode(dec, da, qkv, kc, vc, T, C, NH);
        g->attention_decode(gdec, gda, gqd, gkc, gvc, T, C, NH);
        sync();
        REL(gdec, dec, C, 1e-5, "attention_decode");
        free(qkv), free(dout), free(out), free(pre), free(att), free(dqkv), free(s1), free(s2), free(q), free(k), free(v);
        free(dh), free(dec), free(da), free(kc), free(vc);
        dev_free(gqkv), dev_free(gdout), dev_free(gout), dev_free(gpre), dev_free(gatt), dev_free(gdqkv), dev_free(gs1);
        dev_free(gs2), dev_free(gq), dev_free(gk), dev_free(gv), dev_free(gdh), dev_free(gdec), dev_free(gda);
        dev_free(gkc), dev_free(gvc), dev_free(gqd);
    }
}

TEST(cuda_dropout_masks_equal_cpu) {
    if (!cuda_ready("cuda_dropout_masks_equal_cpu")) return;
    const gptc_kernels *g = gptc_cuda_kernels();
    gptc_rng rng;
    gptc_rng_seed(&rng, 15);
    const size_t ns[] = {1, 3, 4, 1001, 65539};
    for (int i = 0; i < 5; i++) {
        size_t n = ns[i];
        float *x = test_randn_f(&rng, n, 1), *y = test_zeros_f(n), *gx = dev_copy(x, n);
        gptc_dropout_apply(y, x, n, 0.3f, 0xfeedull, 77);
        g->dropout(gx, gx, n, 0.3f, 0xfeedull, 77); /* in place */
        sync();
        CHECK_MSG(memcmp(gx, y, n * sizeof(float)) == 0, "dropout n=%zu: the device's mask differs", n);
        free(x), free(y), dev_free(gx);
    }
}

TEST(cuda_bf16_twins_bitwise) {
    if (!cuda_ready("cuda_bf16_twins_bitwise")) return;
    const gptc_kernels *g = gptc_cuda_kernels();
    gptc_rng rng;
    gptc_rng_seed(&rng, 16);
    int N = 7, C = 96, NH = 3, B = 1, T = 7;
    size_t NC = (size_t)N * C;
    float *x = dev_randn(&rng, NC, 2), *y = dev_randn(&rng, NC, 1);
    float *w = dev_randn(&rng, C, 1), *b = dev_randn(&rng, C, 1);
    float *o = dev_f(NC), *mean = dev_f(N), *rstd = dev_f(N), *res = dev_f(NC), *res16 = dev_f(NC);
    uint16_t *o16 = gptc_cuda_memory()->alloc(NC * 2, "test");
    g->layernorm_fwd(o, mean, rstd, x, w, b, N, C);
    g->layernorm_fwd_bf16(o16, mean, rstd, x, w, b, N, C);
    sync();
    for (size_t i = 0; i < NC; i++) CHECK(o16[i] == gptc_f32_to_bf16(o[i]));
    g->residual_layernorm_fwd(res, o, mean, rstd, x, y, w, b, N, C);
    g->residual_layernorm_fwd_bf16(res16, o16, mean, rstd, x, y, w, b, N, C);
    sync();
    for (size_t i = 0; i < NC; i++) CHECK(o16[i] == gptc_f32_to_bf16(o[i]) && res16[i] == res[i]);
    void (*f32[])(float *, const float *, size_t) = {g->gelu_fwd, g->gelu_erf_fwd, g->gelu_sigmoid_fwd};
    void (*f16[])(uint16_t *, const float *, size_t) = {g->gelu_fwd_bf16, g->gelu_erf_fwd_bf16, g->gelu_sigmoid_fwd_bf16};
    for (int f = 0; f < 3; f++) {
        f32[f](o, x, NC);
        f16[f](o16, x, NC);
        sync();
        for (size_t i = 0; i < NC; i++) CHECK(o16[i] == gptc_f32_to_bf16(o[i]));
    }
    g->heads_to_rows(o, x, B, T, C, NH);
    g->heads_to_rows_bf16(o16, x, B, T, C, NH);
    sync();
    for (size_t i = 0; i < NC; i++) CHECK(o16[i] == gptc_f32_to_bf16(o[i]));
    /* to_bf16: ties to even, NaN quiet, infinities, subnormals */
    union { uint32_t u; float f; } special[] = {{0x3f808000u}, {0x3f818000u}, {0x7fc00001u}, {0x7f800001u}, {0x7f800000u},
                                                {0x00000001u}, {0x80008000u}, {0x7f7fffffu}};
    float *sx = dev_f(8);
    for (int i = 0; i < 8; i++) sx[i] = special[i].f;
    g->to_bf16(o16, sx, 8);
    g->to_bf16(o16 + 8, x, NC - 8);
    sync();
    for (int i = 0; i < 8; i++) CHECK_MSG(o16[i] == gptc_f32_to_bf16(special[i].f), "to_bf16 of %08x", special[i].u);
    for (size_t i = 8; i < NC; i++) CHECK(o16[i] == gptc_f32_to_bf16(x[i - 8]));
    dev_free(x), dev_free(y), dev_free(w), dev_free(b), dev_free(o), dev_free(mean), dev_free(rstd), dev_free(res);
    dev_free(res16), dev_free(o16), dev_free(sx);
}

/* The weight-gradient reductions and the flash backward twice from the same inputs: the same bits. */
TEST(cuda_deterministic_bits) {
    if (!cuda_ready("cuda_deterministic_bits")) return;
    const gptc_kernels *g = gptc_cuda_kernels();
    gptc_rng rng;
    gptc_rng_seed(&rng, 17);
    int N = 4099, C = 200, B = 2, NH = 2, T = 129, HS = 64;
    size_t NC = (size_t)N * C, n = (size_t)B * NH * T * HS;
    float *x = dev_randn(&rng, NC, 1), *d = dev_randn(&rng, NC, 1);
    float *w = dev_randn(&rng, C, 1), *mean = dev_f(N), *rstd = dev_f(N), *o = dev_f(NC);
    float *q = dev_randn(&rng, n, 1), *k = dev_randn(&rng, n, 1);
    float *v = dev_randn(&rng, n, 1), *dq0 = dev_randn(&rng, n, 1);
    float *fo = dev_f(n), *lse = dev_f((size_t)B * NH * T);
    int *tok = gptc_cuda_memory()->alloc(sizeof(int) * N, "test");
    for (int i = 0; i < N; i++) tok[i] = (int)(gptc_rng_next(&rng) % 13);
    g->layernorm_fwd(o, mean, rstd, x, w, w, N, C);
    g->flash_fwd(fo, lse, q, k, v, B, NH, T, HS, 0.1f, 99);
    /* per run: dw (C), db (C), dwte (13,C), dq, dk, dv (n), dinp (N,C), dwpe (C: B = N rows of T = 1) */
    size_t sizes[8] = {C, C, 13 * (size_t)C, n, n, n, NC, C};
    float *out[2][8];
    for (int run = 0; run < 2; run++) {
        float **r = out[run];
        for (int j = 0; j < 8; j++) r[j] = dev_f(sizes[j]);
        g->layernorm_bwd(r[6], r[0], r[1], d, x, w, mean, rstd, N, C);
        g->bias_bwd(r[1], d, N, C);
        g->encoder_bwd(r[2], r[7], d, tok, N, 1, C);
        g->flash_bwd(r[3], r[4], r[5], dq0, q, k, v, fo, lse, B, NH, T, HS, 0.1f, 99);
    }
    sync();
    for (int j = 0; j < 8; j++)
        CHECK_MSG(memcmp(out[0][j], out[1][j], sizes[j] * sizeof(float)) == 0, "output %d differs run to run", j);
    CHECK(g->grad_sumsq(d, NC) == g->grad_sumsq(d, NC));
    for (int run = 0; run < 2; run++)
        for (int j = 0; j < 8; j++) dev_free(out[run][j]);
    dev_free(x), dev_free(d), dev_free(w), dev_free(mean), dev_free(rstd), dev_free(o), dev_free(q), dev_free(k);
    dev_free(v), dev_free(dq0), dev_free(fo), dev_free(lse), dev_free(tok);
}

/* GPT-2 tiny (2 layers): one forward+backward on the device against the CPU's fp32 step, flash and
 * fused (the trainer's defaults), then an AdamW update through the optimizer's backend call. */
TEST(cuda_gpt2_tiny_step_matches_cpu) {
    if (!cuda_ready("cuda_gpt2_tiny_step_matches_cpu")) return;
    gptc_model_config cfg = {2, 4, 64, 32, 70, GPTC_GELU_KIND_TANH};
    int B = 3, T = 32;
    for (int bf = 0; bf < 2; bf++) {
        gptc_model cpu, gpu;
        CHECK_OK(gptc_model_init(&cpu, &cfg));
        CHECK_OK(gptc_model_init_on(&gpu, &cfg, 0));
        CHECK(gpu.cuda && strcmp(gpu.be.mem->name, "cuda") == 0 && strcmp(gpu.k->variant, "cuda") == 0);
        gptc_model_init_weights(&cpu, 5);
        gptc_model_init_weights(&gpu, 5);
        cpu.fuse = gpu.fuse = true;
        cpu.precision = gpu.precision = bf ? GPTC_PRECISION_BF16 : GPTC_PRECISION_FP32;
        CHECK_OK(gptc_model_alloc_train(&cpu, B, T));
        CHECK_OK(gptc_model_alloc_train(&gpu, B, T));
        int x[3 * 32], y[3 * 32];
        gptc_rng r;
        gptc_rng_seed(&r, 3);
        for (int i = 0; i < B * T; i++) x[i] = (int)(gptc_rng_next(&r) % 70), y[i] = (int)(gptc_rng_next(&r) % 70);
        gptc_model_zero_grad(&cpu);
        gptc_model_zero_grad(&gpu);
        float lc = gptc_model_forward_backward(&cpu, x, y, B, T, 1.0f);
        float lg = gptc_model_forward_backward(&gpu, x, y, B, T, 1.0f);
        gpu.be.mem->synchronize();
        CHECK_MSG(fabs(lg - lc) <= 2e-3 * fabs(lc), "%s loss: cuda %.6f cpu %.6f", bf ? "bf16" : "fp32", lg, lc);
        double e = test_rel_err_f(gpu.grads, cpu.grads, cpu.num_floats);
        CHECK_MSG(e <= 3e-2, "%s gradients: rel err %.3g", bf ? "bf16" : "fp32", e);
        /* the same step again on the device: the same bits */
        float *g0 = test_copy_f(gpu.grads, gpu.num_floats);
        gptc_model_zero_grad(&gpu);
        float lg2 = gptc_model_forward_backward(&gpu, x, y, B, T, 1.0f);
        gpu.be.mem->synchronize();
        CHECK(lg2 == lg && memcmp(g0, gpu.grads, gpu.num_floats * sizeof(float)) == 0);
        free(g0);
        gptc_model_free(&cpu);
        gptc_model_free(&gpu);
    }
}

/* gptc train --device cuda end to end: a few steps of the tiny model, the loss close to the CPU run's. */
TEST(cuda_train_cli_runs) {
    if (!cuda_ready("cuda_train_cli_runs")) return;
    const char *data = test_shakespeare_data();
    char dir[4096];
    test_dir("cuda_", "train", dir, sizeof dir);
    const char *args = "--model tiny --steps 4 --batch 4 --seq 32 --eval-every 0 --ckpt-every 0 --sample-every 2 "
                       "--sample-tokens 8";
    test_cli_result a = test_cli(NULL, "train --data %s %s --ckpt %s/cpu", data, args, dir);
    test_cli_result g = test_cli(NULL, "train --data %s %s --ckpt %s/gpu --device cuda", data, args, dir);
    CHECK_MSG(a.rc == 0 && g.rc == 0, "rc cpu %d cuda %d: %s", a.rc, g.rc, g.err);
    test_cli_free(&a);
    test_cli_free(&g);
}
