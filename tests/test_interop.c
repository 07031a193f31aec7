/* test_interop.c — Hugging Face and llm.c weights (train/weights.h): a tiny random GPT-2 written by
 * tools/make_interop_fixtures.py in each format loads to torch's logits; import -> export round
 * trips are bit-exact; mismatched flags and bad files are refused with one line naming both or the
 * reason; `gptc train --init` starts from the weights and `gptc sample --ckpt` reads them. */
#include "test.h"
#include "io/io.h"
#include "model/gpt2.h"
#include "train/weights.h"

#include <stdlib.h>
#include <string.h>

#define FIX "tests/fixtures/interop"
#define LOGITS_TOL 1e-5

/* the whole file into a malloc'd buffer; NULL if it cannot be read */
static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(len > 0 ? (size_t)len : 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

static bool same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* loads path into a fresh model (unfused, so the logits are kept) and checks its logits on the
 * reference inputs against torch's `which` logits */
static void check_logits(const char *path, gptc_weights_format want, const char *which) {
    gptc_st_file ref = {0};
    CHECK_OK(gptc_st_open(&ref, FIX "/reference.safetensors"));
    gptc_weights_info info;
    CHECK_OK(gptc_weights_find(path, &info));
    CHECK_MSG(info.format == want, "%s: format %s", path, gptc_weights_format_name(info.format));
    CHECK_EQ_INT(info.cfg.layers, atoi(gptc_st_meta(&ref, "layers")));
    CHECK_EQ_INT(info.cfg.channels, atoi(gptc_st_meta(&ref, "channels")));
    CHECK_EQ_INT(info.cfg.vocab, atoi(gptc_st_meta(&ref, "vocab")));
    const gptc_st_tensor *in = gptc_st_find(&ref, "inputs"), *lg = gptc_st_find(&ref, which);
    CHECK(in && lg);
    if (!in || !lg || info.format != want) {
        gptc_st_close(&ref);
        return;
    }
    int T = (int)in->numel, V = info.cfg.vocab;
    gptc_model m;
    CHECK_OK(gptc_model_init(&m, &info.cfg));
    m.fuse = false;
    CHECK_OK(gptc_model_alloc_train(&m, 1, T));
    CHECK_OK(gptc_weights_load(&info, &m));
    gptc_model_forward(&m, in->data, NULL, 1, T);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        double e = test_rel_err_f(m.a.logits + (size_t)t * m.Vp, (const float *)lg->data + (size_t)t * V, V);
        if (e > worst) worst = e;
    }
    printf("    %-40s %s: logits max rel err vs torch %.2e\n", path, gptc_weights_format_name(info.format), worst);
    CHECK_MSG(worst < LOGITS_TOL, "%s: logits rel err %g", path, worst);
    for (int r = V; r < m.Vp; r++) CHECK(m.w.wte[(size_t)r * info.cfg.channels] == 0); /* padding stays zero */
    gptc_model_free(&m);
    gptc_st_close(&ref);
}

TEST(interop_logits_match_torch) {
    check_logits(FIX "/hf", GPTC_WEIGHTS_HF, "logits");
    check_logits(FIX "/hf/model.safetensors", GPTC_WEIGHTS_HF, "logits"); /* the file alone: config.json beside it */
    check_logits(FIX "/hf_prefixed", GPTC_WEIGHTS_HF, "logits");         /* transformer., lm_head, buffers */
    check_logits(FIX "/hf_f16", GPTC_WEIGHTS_HF, "logits_f16");
    check_logits(FIX "/llmc_fp32.bin", GPTC_WEIGHTS_LLMC, "logits");
    check_logits(FIX "/llmc_bf16.bin", GPTC_WEIGHTS_LLMC, "logits_bf16");
}

/* same tensor names in the same data order, with the same dtype, shape and bytes */
static void check_same_tensors(const char *a, const char *b) {
    gptc_st_file x = {0}, y = {0};
    CHECK_OK(gptc_st_open(&x, a));
    CHECK_OK(gptc_st_open(&y, b));
    CHECK_MSG(x.ntensors == y.ntensors, "%s has %d tensors, %s %d", a, x.ntensors, b, y.ntensors);
    for (int i = 0; i < x.ntensors && i < y.ntensors; i++) {
        const gptc_st_tensor *s = &x.tensors[i], *t = gptc_st_find(&y, s->name);
        CHECK_MSG(t != NULL, "%s: tensor %s missing", b, s->name);
        if (!t) continue;
        CHECK_MSG(s->dtype == t->dtype && s->ndim == t->ndim && s->nbytes == t->nbytes &&
                      memcmp(s->shape, t->shape, sizeof s->shape) == 0 && memcmp(s->data, t->data, s->nbytes) == 0,
                  "%s: tensor %s differs from %s's", b, s->name, a);
        /* the data in the same order as the input's (name order, as the safetensors library writes) */
        CHECK_MSG((const char *)s->data - (const char *)x.tensors[0].data ==
                      (const char *)t->data - (const char *)y.tensors[0].data || i == 0,
                  "%s: tensor %s at another place", b, s->name);
    }
    gptc_st_close(&x);
    gptc_st_close(&y);
}

TEST(interop_round_trips_are_bit_exact) {
    char d[600], p[700], q[700];
    test_dir("interop-", "roundtrip", d, sizeof d);
    /* llm.c fp32 and bf16: the same file, byte for byte */
    CHECK_OK(gptc_weights_export(FIX "/llmc_fp32.bin", "llmc", GPTC_F32, test_path(p, sizeof p, "%s/a.bin", d), false));
    CHECK_MSG(same_file(p, FIX "/llmc_fp32.bin"), "llm.c fp32 round trip differs");
    CHECK_OK(gptc_weights_export(FIX "/llmc_bf16.bin", "llmc", GPTC_BF16, test_path(p, sizeof p, "%s/b.bin", d), false));
    CHECK_MSG(same_file(p, FIX "/llmc_bf16.bin"), "llm.c bf16 round trip differs");
    /* Hugging Face: the same tensors (names, dtype, shape, bytes, order); prefixed names come back canonical */
    CHECK_OK(gptc_weights_export(FIX "/hf", "hf", GPTC_F32, test_path(p, sizeof p, "%s/hf", d), false));
    check_same_tensors(FIX "/hf/model.safetensors", test_path(q, sizeof q, "%s/model.safetensors", p));
    CHECK_OK(gptc_weights_export(FIX "/hf_prefixed", "hf", GPTC_F32, test_path(p, sizeof p, "%s/hf2", d), false));
    check_same_tensors(FIX "/hf/model.safetensors", test_path(q, sizeof q, "%s/model.safetensors", p));
    /* gptc's own export: the whole file again; across formats: llm.c -> hf -> llm.c */
    CHECK_OK(gptc_weights_export(test_path(p, sizeof p, "%s/hf", d), "hf", GPTC_F32, test_path(q, sizeof q, "%s/hf3", d), false));
    char a[800], b[800];
    CHECK_MSG(same_file(test_path(a, sizeof a, "%s/model.safetensors", p), test_path(b, sizeof b, "%s/model.safetensors", q)),
              "hf export of an hf export differs");
    CHECK_MSG(same_file(test_path(a, sizeof a, "%s/config.json", p), test_path(b, sizeof b, "%s/config.json", q)),
              "config.json differs");
    CHECK_OK(gptc_weights_export(FIX "/llmc_fp32.bin", "hf", GPTC_F32, test_path(p, sizeof p, "%s/from-llmc", d), false));
    CHECK_OK(gptc_weights_export(p, "llmc", GPTC_F32, test_path(q, sizeof q, "%s/c.bin", d), false));
    CHECK_MSG(same_file(q, FIX "/llmc_fp32.bin"), "llm.c -> hf -> llm.c differs");
    /* bf16 via an fp32 model and a bf16 hf file: exact again */
    CHECK_OK(gptc_weights_export(FIX "/llmc_bf16.bin", "hf", GPTC_BF16, test_path(p, sizeof p, "%s/hf-bf16", d), false));
    CHECK_OK(gptc_weights_export(p, "llmc", GPTC_BF16, test_path(q, sizeof q, "%s/d.bin", d), false));
    CHECK_MSG(same_file(q, FIX "/llmc_bf16.bin"), "llm.c bf16 -> hf bf16 -> llm.c bf16 differs");
}

/* copies src to dst, then overwrites n bytes at off with patch (n 0: none); cut > 0 drops the last cut bytes */
static void copy_patched(const char *src, const char *dst, long off, const void *patch, size_t n, size_t cut) {
    size_t len = 0;
    unsigned char *b = slurp(src, &len);
    CHECK(b != NULL);
    if (!b) return;
    if (n) memcpy(b + off, patch, n);
    test_write_file(dst, b, len - cut);
    free(b);
}

/* the call fails with code want and one line holding every needle */
static void check_refused(gptc_status st, gptc_status want, const char *what, const char *n1, const char *n2) {
    const char *msg = gptc_last_error();
    CHECK_MSG(st == want, "%s: %s, expected %s (%s)", what, gptc_status_name(st), gptc_status_name(want), msg);
    CHECK_MSG(strstr(msg, n1) && (!n2 || strstr(msg, n2)) && !strchr(msg, '\n'), "%s: message \"%s\" lacks %s / %s",
              what, msg, n1, n2 ? n2 : "");
    printf("    %s: %s\n", what, msg);
}

TEST(interop_refuses_bad_files) {
    char d[600], p[700], q[700];
    test_dir("interop-", "bad", d, sizeof d);
    gptc_weights_info info;
    /* llm.c: cut short, an unknown version, a header that is no GPT-2 */
    copy_patched(FIX "/llmc_fp32.bin", test_path(p, sizeof p, "%s/short.bin", d), 0, NULL, 0, 100);
    check_refused(gptc_weights_probe(p, &info), GPTC_ERR_FORMAT, "truncated llm.c", "truncated", "short.bin");
    int32_t v = 4;
    copy_patched(FIX "/llmc_fp32.bin", test_path(p, sizeof p, "%s/v4.bin", d), 4, &v, 4, 0);
    check_refused(gptc_weights_probe(p, &info), GPTC_ERR_FORMAT, "llm.c version 4", "version 4", "v4.bin");
    int32_t heads = 5;
    copy_patched(FIX "/llmc_fp32.bin", test_path(p, sizeof p, "%s/nh5.bin", d), 5 * 4, &heads, 4, 0);
    check_refused(gptc_weights_probe(p, &info), GPTC_ERR_FORMAT, "llm.c heads 5", "NH=5", NULL);
    /* something else entirely */
    test_write_file(test_path(p, sizeof p, "%s/notes.txt", d), "hello", 5);
    check_refused(gptc_weights_probe(p, &info), GPTC_ERR_FORMAT, "text file", "neither", "Hugging Face");
    check_refused(gptc_weights_find(test_path(p, sizeof p, "%s/missing", d), &info), GPTC_ERR_IO, "missing path",
                  "missing", NULL);
    /* Hugging Face: no config.json; a config for another architecture; an untied lm_head */
    char f[800];
    test_dir("interop-", "bad/noconfig", q, sizeof q);
    copy_patched(FIX "/hf/model.safetensors", test_path(f, sizeof f, "%s/model.safetensors", q), 0, NULL, 0, 0);
    check_refused(gptc_weights_probe(q, &info), GPTC_ERR_IO, "hf without config.json", "config.json", NULL);
    const char *llama = "{\"model_type\": \"llama\", \"n_layer\": 2, \"n_head\": 4, \"n_embd\": 64, "
                        "\"vocab_size\": 130, \"n_positions\": 32}";
    test_write_file(test_path(f, sizeof f, "%s/config.json", q), llama, strlen(llama));
    check_refused(gptc_weights_probe(q, &info), GPTC_ERR_FORMAT, "hf llama config", "llama", NULL);
    const char *relu = "{\"n_layer\": 2, \"n_head\": 4, \"n_embd\": 64, \"vocab_size\": 130, \"n_positions\": 32, "
                       "\"activation_function\": \"relu\"}";
    test_write_file(f, relu, strlen(relu));
    check_refused(gptc_weights_probe(q, &info), GPTC_ERR_FORMAT, "hf relu", "relu", NULL);
    /* lm_head.weight present but not wte: refused at load */
    gptc_st_file src = {0};
    CHECK_OK(gptc_st_open(&src, FIX "/hf_prefixed/model.safetensors"));
    long off = -1;
    const gptc_st_tensor *head = gptc_st_find(&src, "lm_head.weight");
    if (head) off = (long)((const char *)head->data - (const char *)src.map);
    gptc_st_close(&src);
    CHECK(off > 0);
    test_dir("interop-", "bad/untied", q, sizeof q);
    copy_patched(FIX "/hf/config.json", test_path(f, sizeof f, "%s/config.json", q), 0, NULL, 0, 0);
    float one = 1.0f;
    copy_patched(FIX "/hf_prefixed/model.safetensors", test_path(f, sizeof f, "%s/model.safetensors", q), off, &one, 4, 0);
    /* Hugging Face's files carry no checksums, so the patched one opens */
    CHECK_OK(gptc_weights_probe(q, &info));
    gptc_model m;
    CHECK_OK(gptc_model_init(&m, &info.cfg));
    check_refused(gptc_weights_load(&info, &m), GPTC_ERR_FORMAT, "untied lm_head", "lm_head.weight", "ties");
    /* weights for another model: both configs named */
    gptc_model_config other = info.cfg;
    other.layers = 3;
    gptc_model o;
    CHECK_OK(gptc_model_init(&o, &other));
    CHECK_OK(gptc_weights_find(FIX "/llmc_fp32.bin", &info));
    check_refused(gptc_weights_load(&info, &o), GPTC_ERR_STATE, "another shape", "layers=2", "layers=3");
    gptc_model_free(&o);
    gptc_model_free(&m);
}

/* `gptc train --init`: a shape flag that differs is refused naming both; a run at a negligible
 * learning rate leaves the weights it started from */
TEST(interop_train_init) {
    char d[600], data[700], ck[700], cmd[4096], *out = NULL;
    test_dir("interop-", "init", d, sizeof d);
    /* one shard of 2000 tokens below the fixture's vocabulary of 130, llm.c's token layout */
    enum { N = 2000 };
    static unsigned char shard[1024 + 2 * N];
    int32_t h[256] = {20240520, 1, N};
    memcpy(shard, h, sizeof h);
    for (int i = 0; i < N; i++) {
        uint16_t t = (uint16_t)((i * 37 + i / 7) % 130);
        memcpy(shard + 1024 + 2 * i, &t, 2);
    }
    test_write_file(test_path(data, sizeof data, "%s/train_000000.bin", d), shard, sizeof shard);

    snprintf(cmd, sizeof cmd, "%s train --init " FIX "/hf --layers 3 --data %s --steps 1 --threads 2", test_gptc_bin(), data);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "layers=2") && strstr(out, "--layers") && strstr(out, "layers=3"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s train --init " FIX "/llmc_fp32.bin --gelu erf --data %s --steps 1 --threads 2",
             test_gptc_bin(), data);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "--gelu tanh") && strstr(out, "--gelu erf"), "%s", out);
    free(out);

    snprintf(cmd, sizeof cmd, "%s train --init " FIX "/llmc_fp32.bin --model gpt2 --data %s --steps 1 --threads 2",
             test_gptc_bin(), data);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "--model gpt2"), "%s", out);
    free(out);

    /* a Hugging Face folder holds no training state: --ckpt on it is refused, pointing to --init */
    char hf[700], f[800];
    test_dir("interop-", "init/hf-copy", hf, sizeof hf);
    copy_patched(FIX "/hf/config.json", test_path(f, sizeof f, "%s/config.json", hf), 0, NULL, 0, 0);
    copy_patched(FIX "/hf/model.safetensors", test_path(f, sizeof f, "%s/model.safetensors", hf), 0, NULL, 0, 0);
    snprintf(cmd, sizeof cmd, "%s train --ckpt %s --layers 2 --heads 4 --channels 64 --context 32 --vocab 130 "
             "--data %s --steps 1 --threads 2", test_gptc_bin(), hf, data);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "--init"), "%s", out);
    free(out);

    snprintf(ck, sizeof ck, "%s/run", d);
    snprintf(cmd, sizeof cmd,
             "%s train --init " FIX "/hf_prefixed --data %s --batch 2 --seq 16 --steps 1 --lr 1e-12 --weight-decay 0 "
             "--threads 2 --ckpt %s --quiet", test_gptc_bin(), data, ck);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK_MSG(out && strstr(out, "train: median"), "%s", out);
    free(out);
    gptc_weights_info a, b;
    CHECK_OK(gptc_weights_find(ck, &a));
    CHECK_OK(gptc_weights_find(FIX "/hf", &b));
    CHECK(a.format == GPTC_WEIGHTS_GPTC && memcmp(&a.cfg, &b.cfg, sizeof a.cfg) == 0);
    gptc_model ma, mb;
    CHECK_OK(gptc_model_init(&ma, &a.cfg));
    CHECK_OK(gptc_model_init(&mb, &b.cfg));
    CHECK_OK(gptc_weights_load(&a, &ma));
    CHECK_OK(gptc_weights_load(&b, &mb));
    double e = test_rel_err_f(ma.params, mb.params, ma.num_floats);
    CHECK_MSG(e < 1e-6, "trained weights moved %g from the --init weights", e);
    gptc_model_free(&ma);
    gptc_model_free(&mb);
}

/* `gptc export` and `gptc sample --ckpt` on foreign files: a GPT-2-vocabulary model (so the gpt2
 * tokenizer applies) exported as llm.c and as Hugging Face samples the same greedy text from both */
TEST(interop_cli_export_and_sample) {
    char d[600], p[700], cmd[4096], *out = NULL, *out2 = NULL;
    test_dir("interop-", "cli", d, sizeof d);
    snprintf(cmd, sizeof cmd, "%s export --help", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK(out && strstr(out, "--format") && strstr(out, "--dtype"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s export --ckpt " FIX "/hf --format onnx --out %s/x", test_gptc_bin(), d);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "--format onnx"), "%s", out);
    free(out);

    gptc_model_config cfg = {2, 2, 32, 64, 50257, GPTC_GELU_KIND_TANH};
    gptc_model m;
    CHECK_OK(gptc_model_init(&m, &cfg));
    gptc_model_init_weights(&m, 7);
    CHECK_OK(gptc_weights_write_llmc(test_path(p, sizeof p, "%s/gpt2ish.bin", d), &m, GPTC_F32));
    gptc_model_free(&m);
    snprintf(cmd, sizeof cmd, "%s export --ckpt %s --format hf --out %s/gpt2ish", test_gptc_bin(), p, d);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "%s sample --ckpt %s --prompt Hello --tokens 8 --temperature 0 --threads 2", test_gptc_bin(), p);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    snprintf(cmd, sizeof cmd, "%s sample --ckpt %s/gpt2ish --prompt Hello --tokens 8 --temperature 0 --threads 2",
             test_gptc_bin(), d);
    CHECK_EQ_INT(test_run(cmd, &out2), 0);
    /* the texts, without the speed lines (stderr, which test_run collects too) */
    char *speed = out ? strstr(out, "speed: ") : NULL, *speed2 = out2 ? strstr(out2, "speed: ") : NULL;
    CHECK(speed && speed2);
    if (speed) *speed = '\0';
    if (speed2) *speed2 = '\0';
    CHECK_MSG(out && out2 && strncmp(out, "Hello", 5) == 0 && strcmp(out, out2) == 0, "llm.c: %s\nhf: %s", out, out2);
    free(out);
    free(out2);
    /* a vocabulary that is not GPT-2's names no tokenizer: sample says so */
    snprintf(cmd, sizeof cmd, "%s sample --ckpt " FIX "/llmc_fp32.bin --tokens 4", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "tokenizer"), "%s", out);
    free(out);
}
