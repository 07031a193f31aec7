/* test_plugin.c — custom operators (--op-plugin, kernels/plugin.h): the example plugin
 * (examples/op_plugin_gelu.c, built into build/examples/) is accepted, trains to the same losses (bit for
 * bit at the reference level, where it computes what the reference computes) and shows in the profile
 * under its name; gptc refuses, before training, a plugin that disagrees with the reference, one built
 * for another ABI version, one registering an unknown operator, a library without the entry symbol, a
 * missing file and a shape contract the run violates; the probe catches an operator that overwrites
 * where it must accumulate or writes past its output; the built-in kernels pass their tolerances (every
 * entry of the table, at every level); a GEMM and a flash attention replaced in-process are accepted, run
 * by the model to the reference's bits, and refused when wrong. */
#include "test.h"
#include "core/core.h"
#include "core/profile.h"
#include "io/io.h"
#include "kernels/plugin.h"
#include "model/gpt2.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>

/* build/examples/op_plugin_gelu<variant>.so, beside the gptc under test */
static const char *plugin(const char *variant, char *buf, size_t cap) {
    const char *bin = test_gptc_bin(), *slash = strrchr(bin, '/');
    int dir = slash ? (int)(slash - bin) : 1;
    snprintf(buf, cap, "%.*s/examples/op_plugin_gelu%s.so", dir, slash ? bin : ".", variant);
    CHECK_MSG(gptc_is_file(buf), "%s is missing: make builds it with gptc_tests", buf);
    return buf;
}

static gptc_op_run tiny_run(void) {
    return (gptc_op_run){.B = 4, .T = 32, .C = 64, .NH = 2, .gelu = GPTC_GELU_KIND_TANH, .fuse = true, .quiet = true};
}

static void tiny_options(gptc_train_options *o) {
    gptc_train_options_default(o);
    gptc_model_preset("tiny", &o->model);
    o->data = test_shakespeare_data();
    o->batch = 4;
    o->seq = 32;
    o->steps = 3;
    o->warmup = 1;
    o->eval_every = 0;
    o->ckpt_every = 0;
    o->threads = 2;
}

TEST(plugin_accepted_trains_close_and_profiles_by_name) {
    char so[1024], trace[512];
    gptc_op_plugins *s = NULL;
    gptc_op_run run = tiny_run();
    CHECK_OK(gptc_op_plugins_load(plugin("", so, sizeof so), gptc_kernels_get(), &run, &s));
    if (!s) return;
    const gptc_kernels *k = gptc_op_plugins_table(s);
    CHECK(k->gelu_fwd != gptc_kernels_get()->gelu_fwd && k->gelu_bwd != gptc_kernels_get()->gelu_bwd);
    CHECK(k->gemm == gptc_kernels_get()->gemm && k->layernorm_fwd == gptc_kernels_get()->layernorm_fwd);
    CHECK(strcmp(k->labels[GPTC_KERNEL_SLOT(gelu_fwd)], "gelu_fwd[plugin:plain_tanh]") == 0);
    CHECK(!k->labels[GPTC_KERNEL_SLOT(layernorm_fwd)] && !gptc_kernels_get()->labels);
    CHECK_MSG(strstr(gptc_op_plugins_summary(s), "gelu_bwd = example_gelu:plain_tanh"), "%s", gptc_op_plugins_summary(s));
    CHECK(strcmp(gptc_op_plugins_active(), gptc_op_plugins_summary(s)) == 0);
    gptc_op_plugins_free(s);
    CHECK(strcmp(gptc_op_plugins_active(), "") == 0);

    /* three steps without and with the plugin (the kernel level in use: close, not necessarily equal) */
    gptc_train_options o;
    gptc_train_result base, with;
    tiny_options(&o);
    CHECK_OK(gptc_train(&o, NULL, NULL, &base));
    o.op_plugins = so;
    o.profile = test_path(trace, sizeof trace, "%s/plugin-trace.json", test_tmpdir());
    CHECK_OK(gptc_train(&o, NULL, NULL, &with));
    CHECK_NEAR(with.first_loss, base.first_loss, 1e-4 * base.first_loss);
    CHECK_NEAR(with.last_loss, base.last_loss, 1e-4 * base.last_loss);
    gptc_prof_free();

    /* the trace names the plugin's operators, every layer of every step, and the built-in GELU nowhere */
    char *text = NULL;
    size_t len;
    CHECK_OK(gptc_file_read_all(trace, &text, &len));
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    gptc_free(text);
    CHECK_MSG(root, "the trace %s is not JSON", trace);
    if (!root) return;
    const cJSON *events = cJSON_IsArray(root) ? root : cJSON_GetObjectItem(root, "traceEvents"), *e;
    int fwd = 0, bwd = 0, builtin = 0;
    cJSON_ArrayForEach(e, events) {
        const cJSON *nm = cJSON_GetObjectItem(e, "name");
        if (!cJSON_IsString(nm)) continue;
        fwd += strcmp(nm->valuestring, "gelu_fwd[plugin:plain_tanh]") == 0;
        bwd += strcmp(nm->valuestring, "gelu_bwd[plugin:plain_tanh]") == 0;
        builtin += strcmp(nm->valuestring, "gelu.fwd") == 0 || strcmp(nm->valuestring, "gelu.bwd") == 0;
    }
    int layers = o.model.layers;
    CHECK_MSG(fwd >= 3 * layers && bwd == 3 * layers && builtin == 0, "fwd %d bwd %d builtin %d", fwd, bwd, builtin);
    cJSON_Delete(root);
}

/* At the reference level the example computes what the reference computes: the same losses, bit for
 * bit, through the CLI (the flag, the header line and GPTC_OP_PLUGINS). */
TEST(plugin_cli_same_losses_at_ref_and_env_variable) {
    char so[1024], cmd[4096], l1[512], l2[512], *out = NULL, *a = NULL, *b = NULL;
    plugin("", so, sizeof so);
    const char *args = "train --model tiny --batch 2 --seq 16 --steps 3 --warmup 1 --eval-batches 1 --threads 2";
    snprintf(cmd, sizeof cmd, "GPTC_KERNELS=ref %s %s --data %s --log-losses %s", test_gptc_bin(), args,
             test_shakespeare_data(), test_path(l1, sizeof l1, "%s/plugin-l1.txt", test_tmpdir()));
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "GPTC_KERNELS=ref %s %s --data %s --log-losses %s --op-plugin %s", test_gptc_bin(), args,
             test_shakespeare_data(), test_path(l2, sizeof l2, "%s/plugin-l2.txt", test_tmpdir()), so);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK_MSG(strstr(out, "op plugins: gelu_fwd = example_gelu:plain_tanh (error 0,"), "%s", out);
    free(out);
    size_t na = 0, nb = 0;
    CHECK_OK(gptc_file_read_all(l1, &a, &na));
    CHECK_OK(gptc_file_read_all(l2, &b, &nb));
    CHECK_MSG(a && b && na > 0 && na == nb && memcmp(a, b, na) == 0, "losses differ:\n%s\nvs\n%s", a ? a : "",
              b ? b : "");
    gptc_free(a);
    gptc_free(b);

    /* the variable adds plugins after the flag's: the same one twice is refused */
    snprintf(cmd, sizeof cmd, "GPTC_OP_PLUGINS=%s %s %s --data %s --op-plugin %s", so, test_gptc_bin(), args,
             test_shakespeare_data(), so);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(strstr(out, "gelu_fwd is already replaced by") && !strstr(out, "step 1"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "GPTC_OP_PLUGINS=/nonexistent/a.so:%s %s %s --data %s", so, test_gptc_bin(), args,
             test_shakespeare_data());
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(strstr(out, "--op-plugin /nonexistent/a.so: cannot load it") && !strstr(out, "step 1"), "%s", out);
    free(out);
}

/* A plugin that disagrees is refused before training, exit 2, naming the library, the op, the error
 * and the tolerance. */
TEST(plugin_cli_refuses_a_wrong_plugin) {
    char so[1024], cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s train --data %s --model tiny --batch 2 --seq 16 --steps 2 --threads 2 --op-plugin %s",
             test_gptc_bin(), test_shakespeare_data(), plugin("_wrong", so, sizeof so));
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(strstr(out, so) && strstr(out, "gelu_fwd (plain_tanh) disagrees with the reference: max error") &&
                  strstr(out, "tolerance 1e-05") && !strstr(out, "step 1"),
              "%s", out);
    free(out);
}

/* Each refusal through the library: one line naming what is wrong, and no set. */
TEST(plugin_refusals_name_the_cause) {
    struct {
        const char *variant, *want;
    } cases[] = {
        {"_bad_abi", "built for operator ABI version 3, but this gptc speaks versions 1 to 2"},
        {"_unknown_op", "registers operator 'softmax_fwd', which a plugin cannot replace"},
        {"_no_entry", "not a gptc operator plugin (no gptc_op_plugin_entry symbol)"},
        {"_contract", "gelu_fwd (plain_tanh) takes N at most 4096, but the training step calls it with N = B*T*4C = 32768"},
        {"_wrong", "gelu_fwd (plain_tanh) disagrees with the reference"},
    };
    gptc_op_run run = tiny_run();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char so[1024];
        gptc_op_plugins *s = (gptc_op_plugins *)&run;
        gptc_status st = gptc_op_plugins_load(plugin(cases[i].variant, so, sizeof so), gptc_kernels_get(), &run, &s);
        CHECK_EQ_INT(st, GPTC_ERR_ARG);
        CHECK(s == NULL);
        CHECK_MSG(strstr(gptc_last_error(), cases[i].want) && strstr(gptc_last_error(), so), "%s: %s", cases[i].variant,
                  gptc_last_error());
    }
    /* the same contract on a run whose calls fit it (B*T*4C = 4096; sampling's 4C = 1024) */
    gptc_op_plugins *s = NULL;
    char so[1024];
    run.B = 1, run.T = 4, run.C = 256, run.decode = true;
    CHECK_OK(gptc_op_plugins_load(plugin("_contract", so, sizeof so), gptc_kernels_get(), &run, &s));
    CHECK(s && strstr(gptc_op_plugins_summary(s), "gelu_fwd = example_gelu:plain_tanh"));
    gptc_op_plugins_free(s);
    /* missing files and empty lists */
    CHECK_EQ_INT(gptc_op_plugins_load("/nonexistent/p.so", gptc_kernels_get(), &run, &s), GPTC_ERR_ARG);
    CHECK_MSG(strstr(gptc_last_error(), "'op_plugins' /nonexistent/p.so: cannot load it"), "%s", gptc_last_error());
    CHECK_OK(gptc_op_plugins_load(",", gptc_kernels_get(), &run, &s));
    CHECK(s && gptc_op_plugins_table(s)->gelu_fwd == gptc_kernels_get()->gelu_fwd);
    gptc_op_plugins_free(s);
}

/* An operator the run does not call is skipped (not installed), so a replaced operator is always
 * one the training step runs: gelu_fwd is the tanh form's, a run with --gelu erf never calls it. */
TEST(plugin_ops_the_run_does_not_call_are_skipped) {
    char so[1024];
    gptc_op_run run = tiny_run();
    run.gelu = GPTC_GELU_KIND_ERF;
    gptc_op_plugins *s = NULL;
    CHECK_OK(gptc_op_plugins_load(plugin("", so, sizeof so), gptc_kernels_get(), &run, &s));
    if (!s) return;
    CHECK(gptc_op_plugins_table(s)->gelu_fwd == gptc_kernels_get()->gelu_fwd);
    CHECK(strcmp(gptc_op_plugins_summary(s), "") == 0);
    gptc_op_plugins_free(s);
}

/* ---- the probe on its own */

static void ln_bwd_overwrites(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                              const float *mean, const float *rstd, int N, int C) {
    memset(dinp, 0, sizeof(float) * (size_t)N * C); /* must accumulate */
    gptc_kernels_ref()->layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}

static void gelu_overruns(float *out, const float *inp, size_t N) {
    gptc_kernels_ref()->gelu_fwd(out, inp, N + 1);
}

static void ln_fwd_eps(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int N,
                       int C) { /* eps 1e-2 instead of 1e-5: off by about 1e-3 on rows of unit spread */
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        float s = (float)(1 / sqrt(v / C + 1e-2));
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (float)((x[c] - m) * s) * w[c] + b[c];
        mean[n] = (float)m;
        rstd[n] = s;
    }
}

TEST(plugin_probe_catches_accumulate_overrun_and_accuracy) {
    gptc_op_run run = tiny_run();
    double err, tol;
    const char *what;
    CHECK_OK(gptc_op_probe("layernorm_bwd", (gptc_op_fn){.layernorm_bwd = ln_bwd_overwrites}, &run, NULL, &err, &tol, &what));
    CHECK_MSG(err > 0.1 && strcmp(what, "dinp") == 0, "%g %s", err, what);
    CHECK_EQ_INT(gptc_op_probe("gelu_fwd", (gptc_op_fn){.gelu_fwd = gelu_overruns}, &run, NULL, &err, &tol, &what),
                 GPTC_ERR_STATE);
    CHECK_MSG(strstr(gptc_last_error(), "wrote past the end of its output out"), "%s", gptc_last_error());
    CHECK_OK(gptc_op_probe("layernorm_fwd", (gptc_op_fn){.layernorm_fwd = ln_fwd_eps}, &run, NULL, &err, &tol, &what));
    CHECK_MSG(err > tol && err < 0.1, "%g (tolerance %g) in %s", err, tol, what);
    CHECK_EQ_INT(gptc_op_probe("softmax_fwd", (gptc_op_fn){.any = NULL}, &run, NULL, &err, &tol, &what), GPTC_ERR_ARG);
}

/* The tolerances admit every built-in optimised kernel (the same operator computed another way), at
 * small shapes and at shapes large enough that the probe is cut to its cap. */
TEST(plugin_builtin_kernels_pass_their_tolerance) {
    gptc_op_run runs[] = {
        {.B = 3, .T = 37, .C = 96, .NH = 4},   /* odd rows: the vector loops' tails */
        {.B = 8, .T = 256, .C = 768, .NH = 12}, /* GPT-2 124M widths: probes cut to the cap */
    };
    const char *levels[] = {"ref", "avx2", "avx512"};
    for (size_t l = 0; l < 3; l++) {
        const gptc_kernels *k = gptc_kernels_level(levels[l]);
        if (!k) continue;
        for (size_t r = 0; r < 2; r++)
            for (int i = 0; i < gptc_op_ninfos; i++) {
                const char *op = gptc_op_infos[i].name;
                size_t off = 0;
                for (int j = 0; j < gptc_kernel_nops; j++)
                    if (strcmp(gptc_kernel_ops[j].name, op) == 0) off = gptc_kernel_ops[j].offset;
                CHECK_MSG(off, "%s is not in the kernel table", op);
                gptc_op_fn fn;
                memcpy(&fn.any, (const char *)k + off, sizeof fn.any);
                double err, tol;
                const char *what;
                CHECK_OK(gptc_op_probe(op, fn, &runs[r], NULL, &err, &tol, &what));
                CHECK_MSG(err <= tol, "%s %s (C %d): error %g in %s, tolerance %g", levels[l], op, runs[r].C, err, what,
                          tol);
                if (l == 0) CHECK_MSG(err == 0, "the reference against itself: %s error %g", op, err);
            }
    }
}

/* ---- the GEMM and the flash attention replaced in-process (gptc_op_plugins_link: the loader's checks and
 * probes without the dlopen) */

static int g_gemm_calls, g_flash_calls;
static void gemm_counted(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                         float beta, const float *bias, float *C, int ldc) {
    g_gemm_calls++;
    gptc_kernels_ref()->gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
}
static void gemm_no_bias(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                         float beta, const float *bias, float *C, int ldc) { /* drops the epilogue's bias */
    gptc_kernels_ref()->gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, NULL, C, ldc);
}
static void flash_counted(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH, int T,
                          int HS, float dropout, uint64_t seed) {
    g_flash_calls++;
    gptc_flash_fwd_ref(o, lse, q, k, v, B, NH, T, HS, dropout, seed);
}
static void flash_no_dropout(float *o, float *lse, const float *q, const float *k, const float *v, int B, int NH,
                             int T, int HS, float dropout, uint64_t seed) { /* ignores the dropout mask */
    gptc_flash_fwd_ref(o, lse, q, k, v, B, NH, T, HS, 0.0f, seed);
}

/* One fused fp32 training step of a 2-layer model of tiny_run()'s shapes on table k: its loss. */
static float one_step(const gptc_kernels *k, float dropout) {
    const gptc_model_config cfg = {.layers = 2, .heads = 2, .channels = 64, .context = 32, .vocab = 300};
    gptc_model m;
    if (gptc_model_init(&m, &cfg)) return -1;
    gptc_model_init_weights(&m, 3);
    m.k = k;
    m.fuse = true;
    if (gptc_model_alloc_train(&m, 4, 32)) return -1;
    m.attn_dropout = dropout;
    m.dropout_seed = 99;
    int in[4 * 32], tg[4 * 32];
    for (int i = 0; i < 4 * 32; i++) in[i] = (i * 7) % 300, tg[i] = (i * 13 + 5) % 300;
    gptc_model_zero_grad(&m);
    float loss = gptc_model_forward_backward(&m, in, tg, 4, 32, 1.0f);
    gptc_model_free(&m);
    return loss;
}

TEST(plugin_gemm_and_flash_replaced_accepted_when_right_refused_when_wrong) {
    gptc_op_run run = tiny_run();
    const gptc_op_impl right[] = {
        {.op = "gemm", .name = "counted", .fn = {.gemm = gemm_counted}},
        {.op = "flash_fwd", .name = "counted", .fn = {.flash_fwd = flash_counted}},
    };
    const gptc_op_plugin pr = {.abi_version = GPTC_OP_ABI_VERSION, .name = "right", .nimpls = 2, .impls = right};
    const gptc_op_plugin *list[] = {&pr};
    gptc_op_plugins *s = NULL;
    CHECK_OK(gptc_op_plugins_link(list, 1, gptc_kernels_ref(), &run, &s));
    if (!s) return;
    const gptc_kernels *k = gptc_op_plugins_table(s);
    CHECK(k->gemm == gemm_counted && k->flash_fwd == flash_counted && k->flash_bwd == gptc_kernels_ref()->flash_bwd);
    CHECK(strcmp(k->labels[GPTC_KERNEL_SLOT(gemm)], "gemm[plugin:counted]") == 0);
    CHECK(strcmp(k->labels[GPTC_KERNEL_SLOT(flash_fwd)], "flash_fwd[plugin:counted]") == 0);
    CHECK_MSG(strstr(gptc_op_plugins_summary(s), "gemm = right:counted (error 0,"), "%s", gptc_op_plugins_summary(s));
    /* the model runs them (every matrix product, every layer's flash forward), to the reference's bits */
    g_gemm_calls = g_flash_calls = 0;
    float with = one_step(k, 0.1f), ref = one_step(gptc_kernels_ref(), 0.1f);
    CHECK_MSG(g_gemm_calls >= 2 * 10 && g_flash_calls >= 2, "gemm %d flash %d calls", g_gemm_calls, g_flash_calls);
    CHECK_MSG(with == ref && ref > 0, "loss %.9g with the plugin, %.9g without", with, ref);
    gptc_op_plugins_free(s);

    /* wrong ones are refused, naming the operator and the output that disagrees */
    struct {
        gptc_op_impl impl;
        const char *want;
    } wrong[] = {
        {{.op = "gemm", .name = "no_bias", .fn = {.gemm = gemm_no_bias}}, "gemm (no_bias) disagrees with the reference"},
        {{.op = "flash_fwd", .name = "no_dropout", .fn = {.flash_fwd = flash_no_dropout}},
         "flash_fwd (no_dropout) disagrees with the reference"},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
        const gptc_op_plugin pw = {.abi_version = GPTC_OP_ABI_VERSION, .name = "wrong", .nimpls = 1, .impls = &wrong[i].impl};
        const gptc_op_plugin *lw[] = {&pw};
        s = (gptc_op_plugins *)&run;
        CHECK_EQ_INT(gptc_op_plugins_link(lw, 1, gptc_kernels_get(), &run, &s), GPTC_ERR_ARG);
        CHECK(s == NULL);
        CHECK_MSG(strstr(gptc_last_error(), wrong[i].want) && strstr(gptc_last_error(), "wrong (linked in)"), "%s",
                  gptc_last_error());
    }
    /* a version 1 plugin may replace only version 1's operators */
    const gptc_op_plugin p1 = {.abi_version = 1, .name = "old", .nimpls = 2, .impls = right};
    const gptc_op_plugin *l1[] = {&p1};
    CHECK_EQ_INT(gptc_op_plugins_link(l1, 1, gptc_kernels_get(), &run, &s), GPTC_ERR_ARG);
    CHECK_MSG(strstr(gptc_last_error(), "registers operator 'gemm', replaceable since operator ABI version 2, but "
                                        "declares version 1"), "%s", gptc_last_error());
    /* a bf16 run calls gemm_bf16 and the bf16 flash, not these: skipped, not installed */
    run.bf16 = true;
    CHECK_OK(gptc_op_plugins_link(list, 1, gptc_kernels_get(), &run, &s));
    CHECK(s && gptc_op_plugins_table(s)->gemm == gptc_kernels_get()->gemm && strcmp(gptc_op_plugins_summary(s), "") == 0);
    gptc_op_plugins_free(s);
}
