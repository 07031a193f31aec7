/* test_eval.c — `gptc eval` (train/eval.h): the sliding-window loss against a float64 forward written
 * here, the loss equal to the trainer's val loss on the same windows, and the CLI's refusals. */
#include "test.h"
#include "data/data.h"
#include "io/io.h"
#include "train/checkpoint.h"
#include "train/eval.h"
#include "train/weights.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* ---------------------------------------------------------------- a float64 GPT-2 forward */

static void ln_d(const double *x, const float *w, const float *b, int C, double *out) {
    double mean = 0, var = 0;
    for (int i = 0; i < C; i++) mean += x[i];
    mean /= C;
    for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= C;
    double rs = 1 / sqrt(var + 1e-5);
    for (int i = 0; i < C; i++) out[i] = (x[i] - mean) * rs * w[i] + b[i];
}

/* out (OC) = x (IC) @ w (IC,OC) + b (OC) */
static void lin_d(const double *x, const float *w, const float *b, int IC, int OC, double *out) {
    for (int o = 0; o < OC; o++) out[o] = b[o];
    for (int i = 0; i < IC; i++)
        for (int o = 0; o < OC; o++) out[o] += x[i] * w[(size_t)i * OC + o];
}

/* The summed loss of targets tg[j] for j in [from, n) given inputs in[0..n): the model's weights in
 * double, one sequence, naive causal attention. */
static double ref_loss(const gptc_model *m, const int *in, const int *tg, int n, int from) {
    int C = m->cfg.channels, NH = m->cfg.heads, HS = C / NH, V = m->cfg.vocab, L = m->cfg.layers;
    double *x = calloc((size_t)n * C, sizeof *x), *h = malloc(sizeof *h * 4 * C), *qkv = malloc(sizeof *qkv * (size_t)n * 3 * C);
    double *y = malloc(sizeof *y * C), *o = malloc(sizeof *o * C), *f = malloc(sizeof *f * 4 * C), *att = malloc(sizeof *att * n);
    for (int t = 0; t < n; t++)
        for (int c = 0; c < C; c++) x[(size_t)t * C + c] = (double)m->w.wte[(size_t)in[t] * C + c] + m->w.wpe[(size_t)t * C + c];
    for (int l = 0; l < L; l++) {
        const gptc_layer *w = &m->w.layer[l];
        for (int t = 0; t < n; t++) {
            ln_d(x + (size_t)t * C, w->ln1w, w->ln1b, C, h);
            lin_d(h, w->qkvw, w->qkvb, C, 3 * C, qkv + (size_t)t * 3 * C);
        }
        for (int t = 0; t < n; t++) {
            for (int hd = 0; hd < NH; hd++) {
                const double *q = qkv + (size_t)t * 3 * C + hd * HS;
                double mx = -1e300, z = 0;
                for (int u = 0; u <= t; u++) {
                    const double *k = qkv + (size_t)u * 3 * C + C + hd * HS;
                    double s = 0;
                    for (int i = 0; i < HS; i++) s += q[i] * k[i];
                    att[u] = s / sqrt((double)HS);
                    if (att[u] > mx) mx = att[u];
                }
                for (int u = 0; u <= t; u++) z += att[u] = exp(att[u] - mx);
                for (int i = 0; i < HS; i++) {
                    double s = 0;
                    for (int u = 0; u <= t; u++) s += att[u] / z * qkv[(size_t)u * 3 * C + 2 * C + hd * HS + i];
                    y[hd * HS + i] = s;
                }
            }
            lin_d(y, w->attprojw, w->attprojb, C, C, o);
            for (int c = 0; c < C; c++) x[(size_t)t * C + c] += o[c];
        }
        for (int t = 0; t < n; t++) {
            ln_d(x + (size_t)t * C, w->ln2w, w->ln2b, C, h);
            lin_d(h, w->fcw, w->fcb, C, 4 * C, f);
            for (int i = 0; i < 4 * C; i++)
                f[i] = 0.5 * f[i] * (1 + tanh(sqrt(2 / M_PI) * (f[i] + 0.044715 * f[i] * f[i] * f[i])));
            lin_d(f, w->fcprojw, w->fcprojb, 4 * C, C, o);
            for (int c = 0; c < C; c++) x[(size_t)t * C + c] += o[c];
        }
    }
    double sum = 0;
    double *logit = malloc(sizeof *logit * V);
    for (int t = from; t < n; t++) {
        ln_d(x + (size_t)t * C, m->w.lnfw, m->w.lnfb, C, h);
        double mx = -1e300, z = 0;
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int c = 0; c < C; c++) s += h[c] * m->w.wte[(size_t)v * C + c];
            logit[v] = s;
            if (s > mx) mx = s;
        }
        for (int v = 0; v < V; v++) z += exp(logit[v] - mx);
        sum += -(logit[tg[t]] - mx - log(z));
    }
    free(logit), free(x), free(h), free(qkv), free(y), free(o), free(f), free(att);
    return sum;
}

/* The sliding-window loss of the stream x[0..N) by the definition of eval.h, one window at a time in
 * float64: windows end at targets Te, Te+S, Te+2S, ... (the last at limit) and each scores the targets
 * after the previous end. *tokens and *bytes count the scored targets and their byte_len. */
static double ref_sliding(const gptc_model *m, const int *x, long N, int T, int S, long max_tokens, const int *byte_len,
                          long *tokens, long *bytes) {
    long limit = N - 1;
    if (max_tokens > 0 && max_tokens < limit) limit = max_tokens;
    int Te = limit < T ? (int)limit : T;
    double sum = 0;
    *tokens = *bytes = 0;
    for (long prev = 0, end = Te;; end += S) {
        if (end > limit) end = limit;
        long start = end - Te;
        sum += ref_loss(m, x + start, x + start + 1, Te, (int)(Te - (end - prev)));
        for (long p = prev + 1; p <= end; p++) {
            ++*tokens;
            *bytes += byte_len[x[p]];
        }
        prev = end;
        if (end == limit) break;
    }
    return sum;
}

/* A tiny model with weights large enough that the context changes the loss. */
static void tiny_model(gptc_model *m, int context, int vocab) {
    gptc_model_config cfg = {.layers = 2, .heads = 2, .channels = 32, .context = context, .vocab = vocab};
    CHECK_OK(gptc_model_init(m, &cfg));
    gptc_model_init_weights(m, 7);
    for (size_t i = 0; i < m->num_floats; i++) m->params[i] *= 6;
    m->fuse = true;
}

TEST(eval_sliding_window_matches_float64_reference) {
    gptc_set_threads(2);
    const int T = 16, V = 50;
    enum { N1 = 45, N2 = 38 }; /* two pieces: windows cross the boundary; 82 targets, not a multiple of S */
    uint16_t a[N1], b[N2];
    int x[N1 + N2], byte_len[V];
    gptc_rng r;
    gptc_rng_seed(&r, 3);
    for (int i = 0; i < N1 + N2; i++) x[i] = (int)(gptc_rng_next(&r) % V);
    for (int i = 0; i < N1; i++) a[i] = (uint16_t)x[i];
    for (int i = 0; i < N2; i++) b[i] = (uint16_t)x[N1 + i];
    for (int v = 0; v < V; v++) byte_len[v] = v % 4; /* some ids of 0 bytes, like end-of-text */
    const uint16_t *tok[] = {a, b};
    size_t n[] = {N1, N2};
    gptc_eval_stream s = {tok, n, 2, NULL};
    struct { int S, B; long max; } cases[] = {{5, 3, 0}, {1, 4, 0}, {16, 2, 0}, {7, 8, 30}, {3, 1, 10}};
    double loss_s5 = 0, loss_s16 = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gptc_model m;
        tiny_model(&m, T, V);
        gptc_eval_result res;
        CHECK_OK(gptc_eval_stream_run(&m, &s, T, cases[c].S, cases[c].B, cases[c].max, byte_len, &res));
        long tokens, bytes;
        double ref = ref_sliding(&m, x, N1 + N2, T, cases[c].S, cases[c].max, byte_len, &tokens, &bytes);
        long want = cases[c].max ? cases[c].max : N1 + N2 - 1;
        CHECK_EQ_INT(tokens, want);
        CHECK_EQ_INT(res.tokens, want);
        CHECK_EQ_INT(res.bytes, bytes);
        CHECK_EQ_INT(res.split_tokens, N1 + N2);
        CHECK_MSG(fabs(res.loss_sum - ref) <= 2e-5 * fabs(ref), "S=%d B=%d max=%ld: summed loss %.9g, float64 %.9g",
                  cases[c].S, cases[c].B, cases[c].max, res.loss_sum, ref);
        CHECK_NEAR(res.loss, ref / want, 2e-5 * ref / want);
        CHECK_NEAR(res.perplexity, exp(ref / want), 1e-4 * exp(ref / want));
        CHECK(res.has_bpb);
        CHECK_NEAR(res.bpb, ref / log(2.0) / bytes, 1e-4 * ref / bytes);
        if (cases[c].S == 5) loss_s5 = res.loss;
        if (cases[c].S == 16) loss_s16 = res.loss;
        gptc_model_free(&m);
    }
    /* overlapping windows give later targets more context: a different loss (the test sees context) */
    CHECK_MSG(fabs(loss_s5 - loss_s16) > 1e-3, "stride 5 and 16 give %g and %g", loss_s5, loss_s16);
}

TEST(eval_refuses_ids_outside_the_vocabulary_and_bad_strides) {
    gptc_model m;
    tiny_model(&m, 16, 50);
    uint16_t a[40];
    for (int i = 0; i < 40; i++) a[i] = (uint16_t)(i % 50);
    a[33] = 50;
    const uint16_t *tok[] = {a};
    size_t n[] = {40};
    gptc_eval_stream s = {tok, n, 1, NULL};
    gptc_eval_result res;
    CHECK_EQ_INT(gptc_eval_stream_run(&m, &s, 16, 4, 2, 0, NULL, &res), GPTC_ERR_FORMAT);
    CHECK(strstr(gptc_last_error(), "token 33") && strstr(gptc_last_error(), "id 50"));
    a[33] = 0;
    CHECK_EQ_INT(gptc_eval_stream_run(&m, &s, 16, 0, 2, 0, NULL, &res), GPTC_ERR_ARG);
    CHECK_EQ_INT(gptc_eval_stream_run(&m, &s, 16, 17, 2, 0, NULL, &res), GPTC_ERR_ARG);
    CHECK_EQ_INT(gptc_eval_stream_run(&m, &s, 17, 4, 2, 0, NULL, &res), GPTC_ERR_ARG);
    CHECK_OK(gptc_eval_stream_run(&m, &s, 16, 4, 2, 0, NULL, &res));
    CHECK(!res.has_bpb);
    gptc_model_free(&m);
}

/* ---------------------------------------------------------------- against the trainer */

/* A tiny byte-token model trained by the library with a checkpoint at the end; its last val loss. */
static const char *trained_ckpt(float *val_loss) {
    static char dir[600];
    static float val = NAN;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/eval-ckpt", test_tmpdir());
        gptc_train_options o;
        test_tiny_train_options(&o, test_shakespeare_data());
        o.steps = 6;
        o.warmup = 2;
        o.ckpt_dir = dir;
        gptc_train_result r;
        CHECK_OK(gptc_train(&o, NULL, NULL, &r));
        val = r.last_val_loss;
    }
    if (val_loss) *val_loss = val;
    return dir;
}

TEST(eval_equals_the_trainers_val_loss_on_the_same_windows) {
    float val;
    const char *ckpt = trained_ckpt(&val);
    CHECK(isfinite(val));
    gptc_train_options t;
    test_tiny_train_options(&t, test_shakespeare_data());
    /* the trainer read eval_batches micro-batches of B windows of T at stride T from the val split's
     * start: the first eval_batches*B*T targets, which stride T scores in the same windows */
    gptc_eval_options o;
    gptc_eval_options_default(&o);
    o.ckpt = ckpt;
    o.data = test_shakespeare_data();
    o.seq = t.seq;
    o.batch = t.batch;
    o.max_tokens = (long)t.eval_batches * t.batch * t.seq;
    o.threads = 2;
    gptc_eval_result r;
    CHECK_OK(gptc_eval(&o, &r));
    CHECK_EQ_INT(r.tokens, o.max_tokens);
    CHECK_EQ_INT(r.windows, (long)t.eval_batches * t.batch);
    CHECK_EQ_INT(r.S, t.seq);
    CHECK_NEAR(r.loss, val, 1e-5 * val);
    CHECK(r.has_bpb); /* byte tokens: one byte each (the folder has no end-of-text) */
    CHECK_EQ_INT(r.bytes, r.tokens);
    CHECK_NEAR(r.bpb, r.loss / log(2.0), 1e-9);
    CHECK(!strcmp(r.tokenizer, "byte"));
    /* the whole split, stride T/2 */
    o.max_tokens = 0;
    o.stride = t.seq / 2;
    CHECK_OK(gptc_eval(&o, &r));
    CHECK(r.tokens > 1000 && r.tokens == r.split_tokens - 1);
    CHECK(isfinite(r.loss) && r.loss > 0);
}

/* ---------------------------------------------------------------- the CLI */

/* exit 2, one line on stderr holding needle, nothing on stdout */
static void refused(const char *what, test_cli_result r, const char *needle) {
    CHECK_MSG(r.rc == 2, "%s: exit %d, want 2; stderr: %s", what, r.rc, r.err);
    CHECK_MSG(test_count_lines(r.err) == 1, "%s: want one line on stderr, got: %s", what, r.err);
    CHECK_MSG(strstr(r.err, needle), "%s: stderr lacks \"%s\": %s", what, needle, r.err);
    CHECK_MSG(!*r.out, "%s: printed %s", what, r.out);
    test_cli_free(&r);
}

TEST(eval_cli_prints_the_summary_and_json) {
    const char *ckpt = trained_ckpt(NULL), *data = test_shakespeare_data();
    test_cli_result r = test_cli(NULL, "eval --ckpt %s --data %s --seq 32 --stride 16 --max-tokens 500 --threads 2 --json", ckpt, data);
    CHECK_MSG(r.rc == 0, "exit %d: %s", r.rc, r.err);
    cJSON *j = cJSON_Parse(r.out);
    CHECK(j != NULL);
    if (j) {
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "tokens")->valuedouble, 500);
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "stride")->valuedouble, 16);
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "threads")->valuedouble, 2);
        double loss = cJSON_GetObjectItem(j, "loss")->valuedouble;
        CHECK_NEAR(cJSON_GetObjectItem(j, "perplexity")->valuedouble, exp(loss), 1e-9 * exp(loss));
        CHECK(cJSON_IsNumber(cJSON_GetObjectItem(j, "bpb")));
        CHECK(cJSON_GetObjectItem(j, "tokens_per_s")->valuedouble > 0);
        cJSON_Delete(j);
    }
    free(r.out), free(r.err);
    r = test_cli(NULL, "eval --ckpt %s --data %s --seq 32 --max-tokens 64", ckpt, data);
    CHECK_MSG(r.rc == 0, "exit %d: %s", r.rc, r.err);
    CHECK(strstr(r.out, "64 tokens scored") && strstr(r.out, "perplexity") && strstr(r.out, "bpb") &&
          strstr(r.out, "threads") && strstr(r.out, "tokens/s"));
    free(r.out), free(r.err);
}

TEST(eval_cli_refuses_bad_input) {
    const char *ckpt = trained_ckpt(NULL), *data = test_shakespeare_data();
    char dir[600], path[700];
    refused("no --ckpt", test_cli(NULL, "eval --data %s", data), "--ckpt");
    refused("no --data", test_cli(NULL, "eval --ckpt %s", ckpt), "--data");
    refused("--stride 0", test_cli(NULL, "eval --ckpt %s --data %s --stride 0", ckpt, data), "--stride");
    refused("--stride > T", test_cli(NULL, "eval --ckpt %s --data %s --seq 32 --stride 33", ckpt, data), "--stride 33");
    refused("--stride > context", test_cli(NULL, "eval --ckpt %s --data %s --stride 65", ckpt, data), "--stride 65");
    refused("--seq > context", test_cli(NULL, "eval --ckpt %s --data %s --seq 65", ckpt, data), "--seq 65");
    refused("--split", test_cli(NULL, "eval --ckpt %s --data %s --split test", ckpt, data), "--split test");
    refused("missing ckpt", test_cli(NULL, "eval --ckpt %s/nothing-here --data %s", test_tmpdir(), data), "nothing-here");
    /* another vocabulary: GPT-2 ids in a bare shard, and a folder whose manifest says gpt2 */
    test_dir("eval-", "gpt2-shard", dir, sizeof dir);
    uint16_t ids[300];
    for (int i = 0; i < 300; i++) ids[i] = (uint16_t)(i % 2 ? 50256 : 464);
    test_path(path, sizeof path, "%s/val_000000.bin", dir);
    CHECK_OK(gptc_shard_write(path, ids, 300));
    refused("gpt2 ids", test_cli(NULL, "eval --ckpt %s --data %s", ckpt, path), "another tokenizer");
    test_dir("eval-", "gpt2-folder", dir, sizeof dir);
    test_path(path, sizeof path, "%s/in.txt", dir);
    const char *text = "It was the best of times, it was the worst of times, it was the age of wisdom.\n";
    char big[4000] = "";
    for (int i = 0; i < 40; i++) strcat(big, text);
    test_write_file(path, big, strlen(big));
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "%s prepare --tokenizer gpt2 %s --out %s/prep >/dev/null 2>&1", test_gptc_bin(), path, dir);
    if (test_run(cmd, NULL) == 0)
        refused("gpt2 folder", test_cli(NULL, "eval --ckpt %s --data %s/prep", ckpt, dir), "gpt2 tokens");
    else
        printf("    (GPT-2's vocabulary files not found: the manifest case is skipped)\n");
}

/* ---------------------------------------------------------------- gptc export --format hf: the whole folder */

static char *read_text(const char *path, size_t *len) {
    char *text = NULL;
    size_t n = 0;
    if (gptc_file_read_all(path, &text, &n) != GPTC_OK) return NULL;
    char *copy = malloc(n + 1);
    memcpy(copy, text, n);
    copy[n] = '\0';
    gptc_free(text);
    if (len) *len = n;
    return copy;
}

static cJSON *read_json(const char *dir, const char *name) {
    char path[1200];
    char *text = read_text(test_path(path, sizeof path, "%s/%s", dir, name), NULL);
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    CHECK_MSG(o != NULL, "%s/%s: missing or not JSON", dir, name);
    free(text);
    return o;
}

static bool same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = read_text(a, &na), *y = read_text(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x), free(y);
    return same;
}

static int json_int(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valueint : -1;
}

TEST(export_hf_writes_the_tokenizer_files_of_a_gpt2_vocabulary_model) {
    char dir[600], bin[700], out[700], cmd[3000], vocab_dir[4096];
    if (gptc_tokenizer_gpt2_dir(vocab_dir, sizeof vocab_dir) != GPTC_OK) {
        printf("    SKIP: GPT-2's encoder.json and vocab.bpe not found\n");
        return;
    }
    test_dir("eval-", "export-gpt2", dir, sizeof dir);
    gptc_model_config cfg = {2, 2, 32, 64, 50257, GPTC_GELU_KIND_TANH};
    gptc_model m;
    CHECK_OK(gptc_model_init(&m, &cfg));
    gptc_model_init_weights(&m, 11);
    CHECK_OK(gptc_weights_write_llmc(test_path(bin, sizeof bin, "%s/model.bin", dir), &m, GPTC_F32));
    gptc_model_free(&m);
    test_path(out, sizeof out, "%s/hf", dir);
    snprintf(cmd, sizeof cmd, "%s export --ckpt %s --format hf --out %s", test_gptc_bin(), bin, out);
    CHECK_EQ_INT(test_run(cmd, NULL), 0);
    const char *json_files[] = {"config.json", "generation_config.json", "vocab.json", "tokenizer_config.json",
                                "special_tokens_map.json"};
    cJSON *j[5];
    for (int i = 0; i < 5; i++) j[i] = read_json(out, json_files[i]);
    char a[4300], b[4300];
    CHECK_MSG(same_file(test_path(a, sizeof a, "%s/vocab.json", out), test_path(b, sizeof b, "%s/encoder.json", vocab_dir)),
              "vocab.json is not encoder.json");
    CHECK_MSG(same_file(test_path(a, sizeof a, "%s/merges.txt", out), test_path(b, sizeof b, "%s/vocab.bpe", vocab_dir)),
              "merges.txt is not vocab.bpe");
    if (j[0]) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j[0], "gptc_tokenizer");
        CHECK(cJSON_IsString(t) && !strcmp(t->valuestring, "gpt2"));
        CHECK_EQ_INT(json_int(j[0], "eos_token_id"), 50256);
    }
    if (j[1]) CHECK_EQ_INT(json_int(j[1], "eos_token_id"), 50256);
    if (j[1]) CHECK_EQ_INT(json_int(j[1], "bos_token_id"), 50256);
    if (j[2]) CHECK_EQ_INT(cJSON_GetArraySize(j[2]), 50257);
    if (j[3]) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(j[3], "tokenizer_class");
        CHECK(cJSON_IsString(c) && !strcmp(c->valuestring, "GPT2Tokenizer"));
        CHECK_EQ_INT(json_int(j[3], "model_max_length"), 64);
    }
    if (j[4]) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j[4], "eos_token");
        CHECK(cJSON_IsString(e) && !strcmp(e->valuestring, "<|endoftext|>"));
    }
    /* eval reads the llm.c file and the exported folder alike: the same loss, GPT-2's bytes per token */
    uint16_t ids[301];
    gptc_rng r;
    gptc_rng_seed(&r, 5);
    for (int i = 0; i < 301; i++) ids[i] = (uint16_t)(gptc_rng_next(&r) % 50257);
    CHECK_OK(gptc_shard_write(test_path(a, sizeof a, "%s/val_000000.bin", dir), ids, 301));
    gptc_eval_options eo;
    gptc_eval_options_default(&eo);
    eo.data = a;
    eo.seq = 32;
    eo.stride = 8;
    eo.threads = 2;
    gptc_eval_result r1, r2;
    eo.ckpt = bin;
    CHECK_OK(gptc_eval(&eo, &r1));
    eo.ckpt = out;
    CHECK_OK(gptc_eval(&eo, &r2));
    CHECK_EQ_INT(r2.tokens, 300);
    CHECK(r1.has_bpb && r2.has_bpb && r2.bytes > r2.tokens && !strcmp(r2.tokenizer, "gpt2"));
    CHECK_NEAR(r2.loss, r1.loss, 1e-7);
    /* the folder's own vocabulary is what readers use: swap the ids of "!" and "\"" in its vocab.json */
    if (j[2]) {
        cJSON *x = cJSON_GetObjectItemCaseSensitive(j[2], "!"), *y = cJSON_GetObjectItemCaseSensitive(j[2], "\"");
        CHECK(x && y && x->valueint == 0 && y->valueint == 1);
        if (x && y) {
            cJSON_SetNumberValue(x, 1);
            cJSON_SetNumberValue(y, 0);
            char *text = cJSON_PrintUnformatted(j[2]);
            test_write_file(test_path(a, sizeof a, "%s/vocab.json", out), text, strlen(text));
            free(text);
        }
        gptc_tokenizer *t = NULL;
        CHECK_OK(gptc_tokenizer_open_for_model("gpt2", out, &t));
        int *ids = NULL;
        size_t n = 0, cap = 0;
        if (t) CHECK_OK(t->encode(t, NULL, "!", 1, false, &ids, &n, &cap));
        CHECK_MSG(n == 1 && ids && ids[0] == 1, "\"!\" encodes to %d with the folder's vocab.json", n ? ids[0] : -1);
        free(ids);
        gptc_tokenizer_free(t);
        /* a broken merges.txt in the folder: sample and eval read it, and say so */
        const char *bad = "#version: 0.2\nnot a merge at all\n";
        test_write_file(test_path(a, sizeof a, "%s/merges.txt", out), bad, strlen(bad));
        char *o = NULL;
        snprintf(cmd, sizeof cmd, "%s sample --ckpt %s --tokens 2 2>&1", test_gptc_bin(), out);
        CHECK_EQ_INT(test_run(cmd, &o), 2);
        CHECK_MSG(o && strstr(o, "merges.txt"), "%s", o);
        free(o);
    }
    for (int i = 0; i < 5; i++) cJSON_Delete(j[i]);
}

TEST(export_hf_of_a_byte_model_names_its_tokenizer_and_reads_back) {
    const char *ckpt = trained_ckpt(NULL), *data = test_shakespeare_data();
    char dir[600], out[700], cmd[3000], a[1200];
    test_dir("eval-", "export-byte", dir, sizeof dir);
    test_path(out, sizeof out, "%s/hf", dir);
    snprintf(cmd, sizeof cmd, "%s export --ckpt %s --format hf --out %s", test_gptc_bin(), ckpt, out);
    CHECK_EQ_INT(test_run(cmd, NULL), 0);
    cJSON *c = read_json(out, "config.json"), *g = read_json(out, "generation_config.json");
    if (c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "gptc_tokenizer");
        CHECK(cJSON_IsString(t) && !strcmp(t->valuestring, "byte"));
    }
    if (g) CHECK_EQ_INT(json_int(g, "eos_token_id"), 256);
    cJSON_Delete(c);
    cJSON_Delete(g);
    CHECK(!gptc_is_file(test_path(a, sizeof a, "%s/vocab.json", out)));
    /* eval reads the folder as it reads the checkpoint: same loss, same tokenizer */
    gptc_eval_options o;
    gptc_eval_options_default(&o);
    o.data = data;
    o.seq = 32;
    o.max_tokens = 200;
    o.threads = 2;
    gptc_eval_result r1, r2;
    o.ckpt = ckpt;
    CHECK_OK(gptc_eval(&o, &r1));
    o.ckpt = out;
    CHECK_OK(gptc_eval(&o, &r2));
    CHECK(!strcmp(r2.tokenizer, "byte") && r2.has_bpb);
    CHECK_NEAR(r2.loss, r1.loss, 1e-7);
    char *so = NULL;
    snprintf(cmd, sizeof cmd, "%s sample --ckpt %s --prompt ROMEO --tokens 4 --threads 2 2>&1", test_gptc_bin(), out);
    CHECK_EQ_INT(test_run(cmd, &so), 0);
    CHECK_MSG(so && !strncmp(so, "ROMEO", 5), "%s", so);
    free(so);
}

/* A Hugging Face folder without gptc's metadata: config.json's gptc_tokenizer is the tokenizer. */
TEST(hf_folder_config_names_the_tokenizer) {
    char dir[600], a[1200], b[1200];
    test_dir("eval-", "hf-config-tok", dir, sizeof dir);
    size_t n;
    char *st = read_text("tests/fixtures/interop/hf/model.safetensors", &n), *cfg = read_text("tests/fixtures/interop/hf/config.json", NULL);
    CHECK(st && cfg);
    if (!st || !cfg) return;
    test_write_file(test_path(a, sizeof a, "%s/model.safetensors", dir), st, n);
    test_path(b, sizeof b, "%s/config.json", dir);
    test_write_file(b, cfg, strlen(cfg));
    gptc_weights_info info;
    CHECK_OK(gptc_weights_probe(dir, &info));
    CHECK(info.format == GPTC_WEIGHTS_HF && !info.tokenizer[0]); /* vocab 130: no tokenizer known */
    cJSON *o = cJSON_Parse(cfg);
    cJSON_AddStringToObject(o, "gptc_tokenizer", "byte");
    char *text = cJSON_Print(o);
    test_write_file(b, text, strlen(text));
    free(text);
    CHECK_OK(gptc_weights_probe(dir, &info));
    CHECK(!strcmp(info.tokenizer, "byte"));
    cJSON_ReplaceItemInObject(o, "gptc_tokenizer", cJSON_CreateNumber(3));
    text = cJSON_Print(o);
    test_write_file(b, text, strlen(text));
    free(text);
    CHECK_EQ_INT(gptc_weights_probe(dir, &info), GPTC_ERR_FORMAT);
    CHECK(strstr(gptc_last_error(), "gptc_tokenizer"));
    cJSON_Delete(o);
    free(st);
    free(cfg);
}
