/* test_train.c — the training loop through the public API: bit-exact resume, determinism,
 * gradient accumulation, checkpoint files (round trip, pruning, refusal of damaged files with
 * fallback), an end-to-end run whose val loss falls, and sampling from its checkpoint; the GELU
 * form kept by checkpoints, required on resume and used by sampling. */
#include "test.h"
#include "data/data.h"
#include "io/io.h"
#include "train/checkpoint.h"
#include "train/sampler.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* prepares tiny Shakespeare (byte tokens) once into the test folder */
static const char *shakespeare(void) {
    static char dir[512];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/shakespeare", test_tmpdir());
        gptc_prepare_options p;
        gptc_prepare_options_default(&p);
        const char *in[] = {"data/tinyshakespeare.txt"};
        p.inputs = in;
        p.ninputs = 1;
        p.out = dir;
        size_t a, b;
        CHECK_OK(gptc_prepare(&p, &a, &b));
    }
    return dir;
}

static void tiny_options(gptc_train_options *o) { test_tiny_train_options(o, shakespeare()); }

typedef struct { float loss[256]; int n, stop_at; } recorder;
static int record(void *user, const gptc_step_info *in) {
    recorder *r = user;
    if (in->event != GPTC_EVENT_STEP) return 0;
    if (r->n < 256) r->loss[r->n++] = in->loss;
    return r->stop_at && in->step == r->stop_at;
}

/* every step's loss into the caller's array c->loss (room for the run's steps) */
typedef struct { float *loss; int n; } curve;
static int record_curve(void *user, const gptc_step_info *in) {
    curve *c = user;
    if (in->event == GPTC_EVENT_STEP) c->loss[c->n++] = in->loss;
    return 0;
}

static char *subdir(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", test_tmpdir(), name);
    return p;
}

TEST(train_resume_is_bit_exact) {
    gptc_train_options o;
    tiny_options(&o);
    recorder whole = {0}, first = {0}, second = {0};
    gptc_train_result r;
    CHECK_OK(gptc_train(&o, record, &whole, &r));
    CHECK_EQ_INT(whole.n, 20);
    o.ckpt_dir = subdir("resume");
    first.stop_at = 10; /* the callback stops the run; a checkpoint is written at the stop */
    CHECK_OK(gptc_train(&o, record, &first, &r));
    CHECK_EQ_INT(first.n, 10);
    CHECK_OK(gptc_train(&o, record, &second, &r));
    CHECK_EQ_INT(r.first_step, 10);
    CHECK_EQ_INT(second.n, 10);
    for (int i = 0; i < 10; i++) {
        CHECK_MSG(first.loss[i] == whole.loss[i], "step %d: %.9g vs %.9g", i + 1, first.loss[i], whole.loss[i]);
        CHECK_MSG(second.loss[i] == whole.loss[10 + i], "step %d after resume: %.9g vs %.9g", 11 + i, second.loss[i],
                  whole.loss[10 + i]);
    }
    /* a finished run resumed again has nothing to do */
    recorder none = {0};
    CHECK_OK(gptc_train(&o, record, &none, &r));
    CHECK_EQ_INT(r.steps_run, 0);
}

TEST(train_same_seed_same_losses_and_accumulation) {
    gptc_train_options o;
    tiny_options(&o);
    o.steps = 6;
    o.shuffle = 0;
    recorder a = {0}, b = {0}, acc = {0};
    gptc_train_result r;
    CHECK_OK(gptc_train(&o, record, &a, &r));
    CHECK_OK(gptc_train(&o, record, &b, &r));
    CHECK(a.n == 6 && memcmp(a.loss, b.loss, sizeof(float) * 6) == 0);
    /* batch 4 == batch 2 with two accumulated micro-steps (same windows, same update) */
    o.batch = 2;
    o.total_batch = 4L * o.seq;
    CHECK_OK(gptc_train(&o, record, &acc, &r));
    for (int i = 0; i < 6; i++) CHECK_NEAR(acc.loss[i], a.loss[i], 2e-4 * a.loss[i]);
    /* a different seed gives a different run */
    tiny_options(&o);
    o.steps = 6;
    o.shuffle = 0;
    o.seed = 99;
    recorder c = {0};
    CHECK_OK(gptc_train(&o, record, &c, &r));
    CHECK(c.loss[0] != a.loss[0]);
}

typedef struct { char text[8192]; size_t len; } textbuf;
static void collect(void *user, const char *s, size_t n) {
    textbuf *t = user;
    if (t->len + n < sizeof t->text) memcpy(t->text + t->len, s, n), t->len += n;
    t->text[t->len] = '\0';
}

/* ~100 steps on tiny Shakespeare, then sampling from the checkpoint it wrote */
TEST(train_end_to_end_val_loss_falls_then_sample) {
    gptc_train_options o;
    tiny_options(&o);
    o.steps = 100;
    o.batch = 8;
    o.seq = 64;
    o.warmup = 10;
    o.lr = 1e-2f;
    o.eval_every = 50;
    o.eval_batches = 4;
    o.ckpt_dir = subdir("e2e");
    o.ckpt_every = 40;
    o.keep = 2;
    gptc_train_result r;
    CHECK_OK(gptc_train(&o, NULL, NULL, &r));
    printf("    val loss %.4f -> %.4f over %d steps (uniform over 257 ids: %.4f)\n", r.first_val_loss, r.last_val_loss,
           r.steps_run, log(257.0));
    CHECK(r.first_val_loss > 5.0);
    CHECK_MSG(r.last_val_loss < 3.6 && r.last_val_loss < r.first_val_loss - 1.5, "val loss only reached %g", r.last_val_loss);
    CHECK_EQ_INT(r.model.vocab, 257); /* from the data's meta.json */
    /* keep = 2: steps 80 and 100 remain, 40 was pruned */
    char p[1024];
    snprintf(p, sizeof p, "%s/step-00000100/model.safetensors", o.ckpt_dir);
    CHECK(gptc_is_file(p));
    snprintf(p, sizeof p, "%s/step-00000100/config.json", o.ckpt_dir);
    CHECK(gptc_is_file(p));
    snprintf(p, sizeof p, "%s/step-00000080", o.ckpt_dir);
    CHECK(gptc_is_dir(p));
    snprintf(p, sizeof p, "%s/step-00000040", o.ckpt_dir);
    CHECK(!gptc_is_dir(p));
    /* sampling from the final checkpoint */
    gptc_sample_options s;
    gptc_sample_options_default(&s);
    s.ckpt = o.ckpt_dir;
    s.prompt = "ROMEO:";
    s.tokens = 40;
    textbuf a = {0}, b = {0}, c = {0};
    CHECK_OK(gptc_sample(&s, collect, &a));
    CHECK_OK(gptc_sample(&s, collect, &b));
    CHECK_EQ_INT(a.len, 40); /* byte tokens: one byte each */
    CHECK(strcmp(a.text, b.text) == 0);
    s.seed = 4;
    CHECK_OK(gptc_sample(&s, collect, &c));
    CHECK(strcmp(a.text, c.text) != 0);
    s.tokens = 1000; /* over the context of 64: the window slides */
    textbuf longer = {0};
    CHECK_OK(gptc_sample(&s, collect, &longer));
    CHECK_EQ_INT(longer.len, 1000);
    s.tokens = 0;
    CHECK(gptc_sample(&s, collect, &c) == GPTC_ERR_ARG);
    s.tokens = 10;
    s.temperature = 0;
    textbuf g1 = {0}, g2 = {0};
    s.seed = 1;
    CHECK_OK(gptc_sample(&s, collect, &g1));
    s.seed = 2;
    CHECK_OK(gptc_sample(&s, collect, &g2));
    CHECK(strcmp(g1.text, g2.text) == 0); /* greedy ignores the seed */
}


TEST(checkpoint_round_trip_and_refusals) {
    gptc_model_config cfg = {2, 2, 16, 8, 40, GPTC_GELU_KIND_TANH};
    gptc_model m, back;
    CHECK_OK(gptc_model_init(&m, &cfg));
    gptc_model_init_weights(&m, 9);
    float *mom = calloc(m.num_floats, 4), *vel = calloc(m.num_floats, 4);
    float *mom2 = calloc(m.num_floats, 4), *vel2 = calloc(m.num_floats, 4);
    for (size_t i = 0; i < m.num_floats; i++) mom[i] = (float)i * 1e-3f, vel[i] = (float)i * 1e-6f;
    gptc_trainer_state s = {.step = 7, .rng = 0xdeadbeefcafef00dULL, .loader_epoch = 2, .loader_cursor = 40};
    s.hp.u[GPTC_HP_seed] = 123;
    const gptc_optimizer_kind *adamw = gptc_optimizer_find("adamw");
    float *state[2] = {mom, vel}, *state2[2] = {mom2, vel2};
    gptc_ostate os = gptc_ostate_fp32(state, 2, 0, m.num_floats), os2 = gptc_ostate_fp32(state2, 2, 0, m.num_floats);
    snprintf(s.tokenizer, sizeof s.tokenizer, "byte");
    const char *dir = subdir("ckpt");
    char written[1024];
    CHECK_OK(gptc_ckpt_save(dir, &m, adamw, &os, &s, 3, written, sizeof written));
    CHECK(strstr(written, "step-00000007") != NULL);
    char found_path[1024];
    bool found;
    CHECK_OK(gptc_ckpt_find(dir, found_path, sizeof found_path, &found));
    CHECK(found && strcmp(found_path, written) == 0);
    CHECK_OK(gptc_model_init(&back, &cfg));
    gptc_trainer_state s2 = {0};
    CHECK_OK(gptc_ckpt_load(found_path, &back, adamw, &os2, &s2));
    CHECK(memcmp(back.params, m.params, m.num_floats * 4) == 0);
    bool same_m = true;
    for (int i = 0; i < m.ntensors; i++) {
        const gptc_tensor_desc *d = &m.tensors[i];
        same_m &= memcmp(mom + d->offset, mom2 + d->offset, d->numel * 4) == 0 &&
                  memcmp(vel + d->offset, vel2 + d->offset, d->numel * 4) == 0;
    }
    CHECK(same_m);
    CHECK(s2.step == 7 && s2.hp.u[GPTC_HP_seed] == 123 && s2.rng == s.rng && s2.loader_epoch == 2 && s2.loader_cursor == 40);
    CHECK(strcmp(s2.tokenizer, "byte") == 0);

    /* a checkpoint of another optimizer is refused in one line naming both, before any state is read */
    gptc_optimizer_kind other_kind = *adamw;
    other_kind.name = "other";
    s.step = 5;
    char written5[1024];
    CHECK_OK(gptc_ckpt_save(subdir("ckpt-other"), &m, &other_kind, &os, &s, 3, written5,
                            sizeof written5));
    CHECK(gptc_ckpt_load(written5, &back, adamw, &os2, &s2) == GPTC_ERR_STATE);
    CHECK_MSG(strstr(gptc_last_error(), "trained with the optimizer other, but this run asks for 'optimizer' adamw") &&
              !strchr(gptc_last_error(), '\n'), "got: %s", gptc_last_error());
    s.step = 7;

    /* another shape is refused, naming both */
    gptc_model other;
    gptc_model_config ocfg = cfg;
    ocfg.channels = 32;
    CHECK_OK(gptc_model_init(&other, &ocfg));
    CHECK(gptc_ckpt_load(found_path, &other, NULL, NULL, NULL) == GPTC_ERR_STATE);
    CHECK(strstr(gptc_last_error(), "channels=16") && strstr(gptc_last_error(), "channels=32"));
    gptc_model_free(&other);

    /* a newer but torn checkpoint: find falls back to the older valid one */
    s.step = 8;
    CHECK_OK(gptc_ckpt_save(dir, &m, adamw, &os, &s, 3, written, sizeof written));
    char model8[1200];
    snprintf(model8, sizeof model8, "%s/model.safetensors", written);
    struct stat st;
    stat(model8, &st);
    CHECK(truncate(model8, st.st_size - 100) == 0);
    CHECK_OK(gptc_ckpt_find(dir, found_path, sizeof found_path, &found));
    CHECK(found && strstr(found_path, "step-00000007"));
    CHECK(gptc_ckpt_load(written, &back, NULL, NULL, NULL) == GPTC_ERR_FORMAT);
    CHECK(strstr(gptc_last_error(), model8) != NULL);
    /* whole weights beside a torn optimizer state: a resume falls back, a reader of the weights does not */
    s.step = 8;
    CHECK_OK(gptc_ckpt_save(dir, &m, adamw, &os, &s, 3, written, sizeof written));
    char optim8[1200];
    snprintf(optim8, sizeof optim8, "%s/optim.safetensors", written);
    stat(optim8, &st);
    CHECK(truncate(optim8, st.st_size - 100) == 0);
    CHECK_OK(gptc_ckpt_find(dir, found_path, sizeof found_path, &found));
    CHECK(found && strstr(found_path, "step-00000007"));
    CHECK_OK(gptc_ckpt_find_weights(dir, found_path, sizeof found_path, &found));
    CHECK(found && strstr(found_path, "step-00000008"));
    /* a bit flip in the data is caught by the checksum */
    s.step = 9;
    CHECK_OK(gptc_ckpt_save(dir, &m, adamw, &os, &s, 3, written, sizeof written));
    char model9[1200];
    snprintf(model9, sizeof model9, "%s/model.safetensors", written);
    FILE *f = fopen(model9, "r+b");
    fseek(f, -5, SEEK_END);
    int c = fgetc(f);
    fseek(f, -5, SEEK_END);
    fputc(c ^ 0x10, f);
    fclose(f);
    CHECK(gptc_ckpt_load(written, &back, NULL, NULL, NULL) == GPTC_ERR_FORMAT);
    CHECK(strstr(gptc_last_error(), "checksum") != NULL);
    /* a foreign file */
    const char *junk = "this is not a checkpoint";
    const void *parts[1] = {junk};
    size_t lens[1] = {strlen(junk)};
    CHECK_OK(gptc_file_write_atomic(model9, parts, lens, 1));
    CHECK(gptc_ckpt_load(written, &back, NULL, NULL, NULL) == GPTC_ERR_FORMAT);
    /* keep = 3 pruned nothing valid too early: 7, 8, 9 exist; a 4th save removes 7 */
    s.step = 10;
    CHECK_OK(gptc_ckpt_save(dir, &m, adamw, &os, &s, 3, written, sizeof written));
    char p7[1024];
    snprintf(p7, sizeof p7, "%s/step-00000007", dir);
    CHECK(!gptc_is_dir(p7));
    CHECK_OK(gptc_ckpt_find(dir, found_path, sizeof found_path, &found));
    CHECK(found && strstr(found_path, "step-00000010"));
    gptc_model_free(&m);
    gptc_model_free(&back);
    free(mom); free(vel); free(mom2); free(vel2);
}

TEST(train_refuses_before_writing) {
    gptc_train_options o;
    tiny_options(&o);
    o.ckpt_dir = subdir("never");
    gptc_train_result r;
    o.seq = 1000; /* over the context of 64 */
    CHECK(gptc_train(&o, NULL, NULL, &r) == GPTC_ERR_ARG);
    CHECK(strstr(gptc_last_error(), "'seq' 1000") != NULL);
    tiny_options(&o);
    o.ckpt_dir = subdir("never");
    o.total_batch = 100; /* not a multiple of 4*32 */
    CHECK(gptc_train(&o, NULL, NULL, &r) == GPTC_ERR_ARG);
    tiny_options(&o);
    o.ckpt_dir = subdir("never");
    o.model.heads = 3;
    CHECK(gptc_train(&o, NULL, NULL, &r) == GPTC_ERR_ARG);
    tiny_options(&o);
    o.ckpt_dir = subdir("never");
    o.data = "/nonexistent/shards";
    CHECK(gptc_train(&o, NULL, NULL, &r) != GPTC_OK);
    CHECK(strstr(gptc_last_error(), "'data'") != NULL);
    tiny_options(&o);
    o.ckpt_dir = subdir("never");
    o.batch = 100000; /* more windows than the data holds */
    o.model.context = 1024;
    o.seq = 1024;
    CHECK(gptc_train(&o, NULL, NULL, &r) == GPTC_ERR_ARG);
    CHECK(!gptc_is_dir(subdir("never")));
}

/* config.json's activation_function in step folder dir ("" if unreadable) */
static void hf_activation(const char *dir, char *out, size_t cap) {
    char path[1024], buf[4096] = "";
    snprintf(path, sizeof path, "%s/config.json", dir);
    out[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *o = cJSON_Parse(buf);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "activation_function");
    if (cJSON_IsString(a)) snprintf(out, cap, "%s", a->valuestring);
    cJSON_Delete(o);
}

/* Rewrites step folder dir's model.safetensors without the gptc.gelu metadata, as gptc wrote it
 * before the form was recorded. */
static void drop_gelu_metadata(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    gptc_st_file f = {0};
    CHECK_OK(gptc_st_open(&f, path));
    gptc_st_entry *e = calloc(f.ntensors, sizeof *e);
    const char **keys = calloc(f.nmeta, sizeof *keys), **vals = calloc(f.nmeta, sizeof *vals);
    for (int i = 0; i < f.ntensors; i++) {
        const gptc_st_tensor *t = &f.tensors[i];
        e[i] = (gptc_st_entry){.name = t->name, .dtype = t->dtype, .ndim = t->ndim, .data = t->data};
        memcpy(e[i].shape, t->shape, sizeof e[i].shape);
    }
    int nk = 0;
    for (int i = 0; i < f.nmeta; i++)
        if (strcmp(f.meta_keys[i], "gptc.gelu") != 0 && strncmp(f.meta_keys[i], "crc32c.", 7) != 0)
            keys[nk] = f.meta_keys[i], vals[nk++] = f.meta_vals[i];
    CHECK_OK(gptc_st_write(path, e, f.ntensors, keys, vals, nk));
    gptc_st_close(&f);
    free(e);
    free(keys);
    free(vals);
}

/* Each form is written to model.safetensors (gptc.gelu) and config.json (Hugging Face's name), read
 * back, and refused when loaded into a model of another form; a checkpoint that predates the
 * field is tanh. Sampling uses the checkpoint's form: `gptc_sample` equals generation by a model
 * of that form, on weights where the forms pick different tokens. */
TEST(checkpoint_keeps_gelu_form_and_sampling_uses_it) {
    const char *hf[] = {"gelu_new", "gelu", "quick_gelu"};
    const gptc_gelu_kind forms[] = {GPTC_GELU_KIND_TANH, GPTC_GELU_KIND_ERF, GPTC_GELU_KIND_SIGMOID};
    for (int f = 0; f < 3; f++) {
        gptc_model_config cfg = {2, 2, 32, 16, 257, forms[f]}; /* vocab 257: the byte tokenizer's */
        gptc_model m;
        CHECK_OK(gptc_model_init(&m, &cfg));
        gptc_model_init_weights(&m, 17);
        /* MLP pre-activations spread over a few units, where the forms differ, an MLP output that
         * counts in the residual stream, and logits far enough apart that sampling follows them */
        for (int i = 0; i < m.ntensors; i++) {
            const char *name = m.tensors[i].name;
            float scale = strstr(name, "mlp.c_fc.weight") || strstr(name, "mlp.c_proj.weight") ? 20.0f
                          : strcmp(name, "wte.weight") == 0                                     ? 10.0f
                                                                                                : 1.0f;
            for (size_t j = 0; j < m.tensors[i].numel; j++) m.params[m.tensors[i].offset + j] *= scale;
        }
        gptc_trainer_state s = {.step = 1};
        snprintf(s.tokenizer, sizeof s.tokenizer, "byte");
        char dirname[64], written[1024];
        snprintf(dirname, sizeof dirname, "gelu-%s", gptc_gelu_name(forms[f]));
        const char *dir = subdir(dirname);
        CHECK_OK(gptc_ckpt_save(dir, &m, NULL, NULL, &s, 1, written, sizeof written));
        gptc_model_config back;
        CHECK_OK(gptc_ckpt_read_config(written, &back, NULL, 0));
        CHECK_MSG(back.gelu == forms[f], "gelu %s read back as %d", gptc_gelu_name(forms[f]), (int)back.gelu);
        char act[64];
        hf_activation(written, act, sizeof act);
        CHECK_MSG(strcmp(act, hf[f]) == 0, "config.json activation_function \"%s\", want \"%s\"", act, hf[f]);
        char path[1200];
        gptc_st_file st = {0};
        CHECK_OK(gptc_st_open(&st, test_path(path, sizeof path, "%s/model.safetensors", written)));
        const char *meta = gptc_st_meta(&st, "gptc.gelu");
        CHECK(meta && strcmp(meta, gptc_gelu_name(forms[f])) == 0);
        gptc_st_close(&st);

        /* a model of another form is refused, naming both */
        gptc_model other;
        gptc_model_config ocfg = cfg;
        ocfg.gelu = forms[(f + 1) % 3];
        CHECK_OK(gptc_model_init(&other, &ocfg));
        CHECK(gptc_ckpt_load(written, &other, NULL, NULL, NULL) == GPTC_ERR_STATE);
        char want_a[32], want_b[32];
        snprintf(want_a, sizeof want_a, "'model.gelu' %s", gptc_gelu_name(forms[f]));
        snprintf(want_b, sizeof want_b, "'model.gelu' %s", gptc_gelu_name(ocfg.gelu));
        CHECK_MSG(strstr(gptc_last_error(), want_a) && strstr(gptc_last_error(), want_b), "got: %s", gptc_last_error());
        gptc_model_free(&other);

        /* sampling: gptc_sample (config from the checkpoint) == generation with this form */
        if (forms[f] != GPTC_GELU_KIND_TANH) {
            gptc_tokenizer *tok;
            CHECK_OK(gptc_tokenizer_open("byte", &tok));
            gptc_sample_options so;
            gptc_sample_options_default(&so);
            so.ckpt = written;
            so.prompt = "ROMEO:";
            so.tokens = 200;
            so.temperature = 1;
            so.top_p = 1;
            textbuf own = {0}, tanh_text = {0}, sampled = {0};
            CHECK_OK(gptc_generate(&m, tok, so.prompt, &so, collect, &own));
            m.cfg.gelu = GPTC_GELU_KIND_TANH;
            CHECK_OK(gptc_generate(&m, tok, so.prompt, &so, collect, &tanh_text));
            m.cfg.gelu = forms[f];
            CHECK_OK(gptc_sample(&so, collect, &sampled));
            CHECK_MSG(strcmp(own.text, tanh_text.text) != 0, "gelu %s: tanh samples the same text; the check "
                      "below would not tell the forms apart", gptc_gelu_name(forms[f]));
            CHECK_MSG(strcmp(sampled.text, own.text) == 0, "gelu %s: gptc_sample gave \"%s\", the model \"%s\"",
                      gptc_gelu_name(forms[f]), sampled.text, own.text);
            gptc_tokenizer_free(tok);
        }

        /* a checkpoint written before the form was recorded is GPT-2's tanh */
        drop_gelu_metadata(written);
        CHECK_OK(gptc_ckpt_read_config(written, &back, NULL, 0));
        CHECK(back.gelu == GPTC_GELU_KIND_TANH);
        gptc_model_free(&m);
    }
}

/* Resuming with another --gelu than the checkpoint's is refused before anything is written; the
 * same form resumes. */
TEST(train_resume_refuses_another_gelu) {
    gptc_train_options o;
    tiny_options(&o);
    o.steps = 2;
    o.model.gelu = GPTC_GELU_KIND_ERF;
    o.ckpt_dir = subdir("resume-gelu");
    gptc_train_result r;
    CHECK_OK(gptc_train(&o, NULL, NULL, &r));
    char step2[1024];
    snprintf(step2, sizeof step2, "%s/step-00000002", o.ckpt_dir);
    char act[64];
    hf_activation(step2, act, sizeof act);
    CHECK(strcmp(act, "gelu") == 0);
    o.steps = 3;
    o.model.gelu = GPTC_GELU_KIND_TANH;
    CHECK(gptc_train(&o, NULL, NULL, &r) == GPTC_ERR_STATE);
    CHECK_MSG(strstr(gptc_last_error(), "'model.gelu' erf") && strstr(gptc_last_error(), "'model.gelu' tanh"), "got: %s",
              gptc_last_error());
    char step3[1024];
    snprintf(step3, sizeof step3, "%s/step-00000003", o.ckpt_dir);
    CHECK(!gptc_is_dir(step3));
    o.model.gelu = GPTC_GELU_KIND_ERF;
    CHECK_OK(gptc_train(&o, NULL, NULL, &r));
    CHECK_EQ_INT(r.first_step, 2);
    CHECK(gptc_is_dir(step3));
}

/* --dtype bf16 (GEMMs and attention on bf16 copies, fp32 master weights, gradients and AdamW)
 * against fp32 over 300 steps of the same run (same seed, data order and initial weights): the
 * curves must differ (bf16 really runs) and stay within a band: every 25-step window's mean loss
 * within 0.05 + 4 % of fp32's. For scale, and as a second check, the same fp32 run with another seed
 * is further from it than bf16 is: bf16's effect is below the run-to-run noise. This tiny model
 * leaves its unigram plateau (~3.3) at a step that any perturbation moves, so the windows there
 * differ most (measured here: bf16 gap up to 0.14, seed gap up to 0.4). */
TEST(train_bf16_loss_curve_tracks_fp32) {
    enum { STEPS = 300, WIN = 25 };
    static float lf[STEPS], lb[STEPS], ls[STEPS];
    gptc_train_options o;
    tiny_options(&o);
    o.steps = STEPS;
    o.batch = 8;
    o.seq = 64;
    o.warmup = 20;
    o.lr = 3e-3f;
    o.shuffle = 0;
    curve cf = {lf, 0}, cb = {lb, 0}, cs = {ls, 0};
    gptc_train_result r;
    CHECK_OK(gptc_train(&o, record_curve, &cf, &r));
    o.dtype = GPTC_PRECISION_BF16;
    CHECK_OK(gptc_train(&o, record_curve, &cb, &r));
    o.dtype = GPTC_PRECISION_FP32;
    o.seed = 7;
    CHECK_OK(gptc_train(&o, record_curve, &cs, &r));
    CHECK(cf.n == STEPS && cb.n == STEPS && cs.n == STEPS);
    if (cf.n != STEPS || cb.n != STEPS || cs.n != STEPS) return;
    int differ = 0;
    double worst = 0, worst_gap = 0, worst_seed = 0;
    for (int s = 0; s < STEPS; s++) differ += lf[s] != lb[s];
    for (int w = 0; w < STEPS / WIN; w++) {
        double mf = 0, mb = 0, ms = 0;
        for (int s = w * WIN; s < (w + 1) * WIN; s++) mf += lf[s] / WIN, mb += lb[s] / WIN, ms += ls[s] / WIN;
        double gap = fabs(mb - mf), band = 0.05 + 0.04 * mf;
        worst = fmax(worst, gap / band);
        worst_gap = fmax(worst_gap, gap);
        worst_seed = fmax(worst_seed, fabs(ms - mf));
        CHECK_MSG(gap <= band, "steps %d-%d: bf16 mean loss %.4f vs fp32 %.4f (band %.4f)", w * WIN + 1,
                  (w + 1) * WIN, mb, mf, band);
    }
    printf("    fp32 loss %.4f -> %.4f, bf16 %.4f -> %.4f; %d of %d steps differ; worst window gap %.4f (%.0f%% of "
           "the band); fp32 with another seed: %.4f\n",
           lf[0], lf[STEPS - 1], lb[0], lb[STEPS - 1], differ, STEPS, worst_gap, 100 * worst, worst_seed);
    CHECK_MSG(differ > STEPS / 2, "bf16 and fp32 losses agree on %d of %d steps: is bf16 running?", STEPS - differ, STEPS);
    CHECK_MSG(worst_gap < worst_seed, "bf16 moves the curve (%.4f) more than another seed does (%.4f)", worst_gap,
              worst_seed);
    CHECK(lf[STEPS - 1] < lf[0] - 1.0);
}

/* Lion through the trainer (--optimizer lion): 6 steps in one run equal 3 steps, a checkpoint and a
 * resume to 6, bit for bit; the checkpoint holds Lion's one moment (exp_avg.*) and no exp_avg_sq.*;
 * resuming it as AdamW is refused naming both; AdamW from the same start differs after its first
 * update; ZeRO-1 in one process (the shard path) gives Lion's losses bit for bit. */
TEST(train_lion_resume_is_bit_exact) {
    gptc_train_options o;
    tiny_options(&o);
    o.steps = 6;
    o.warmup = 2;
    o.optimizer = "lion";
    o.lr = 3e-4f;    /* Lion's lr: ~10x under AdamW's */
    o.beta2 = 0.99f; /* the paper's */
    recorder whole = {0}, first = {0}, second = {0}, adamw = {0}, zero = {0};
    gptc_train_result r;
    CHECK_OK(gptc_train(&o, record, &whole, &r));
    CHECK_EQ_INT(whole.n, 6);
    o.ckpt_dir = subdir("resume-lion");
    first.stop_at = 3; /* the callback stops the run; a checkpoint is written at the stop */
    CHECK_OK(gptc_train(&o, record, &first, &r));
    CHECK_EQ_INT(first.n, 3);
    char path[1024];
    gptc_st_file f;
    CHECK_OK(gptc_st_open(&f, test_path(path, sizeof path, "%s/step-%08d/optim.safetensors", o.ckpt_dir, 3)));
    CHECK(gptc_st_find(&f, "exp_avg.wte.weight") != NULL);
    CHECK(gptc_st_find(&f, "exp_avg_sq.wte.weight") == NULL);
    gptc_st_close(&f);
    CHECK_OK(gptc_train(&o, record, &second, &r));
    CHECK_EQ_INT(r.first_step, 3);
    CHECK_EQ_INT(second.n, 3);
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(first.loss[i] == whole.loss[i], "step %d: %.9g vs %.9g", i + 1, first.loss[i], whole.loss[i]);
        CHECK_MSG(second.loss[i] == whole.loss[3 + i], "step %d after resume: %.9g vs %.9g", 4 + i, second.loss[i],
                  whole.loss[3 + i]);
    }
    /* resuming Lion's checkpoint as AdamW is refused, naming the optimizer it was trained with */
    o.optimizer = "adamw";
    o.steps = 8;
    CHECK(gptc_train(&o, NULL, NULL, NULL) != GPTC_OK && strstr(gptc_last_error(), "lion"));
    /* AdamW from the same start: the same first loss (same init and batch), different later */
    o.ckpt_dir = NULL;
    o.steps = 6;
    CHECK_OK(gptc_train(&o, record, &adamw, &r));
    CHECK(adamw.loss[0] == whole.loss[0] && adamw.loss[5] != whole.loss[5]);
    /* ZeRO-1 in one process takes the shard path: the same Lion losses bit for bit */
    o.optimizer = "lion";
    o.zero = 1;
    CHECK_OK(gptc_train(&o, record, &zero, &r));
    CHECK_EQ_INT(zero.n, 6);
    for (int i = 0; i < 6; i++) CHECK_MSG(zero.loss[i] == whole.loss[i], "step %d zero-1: %.9g vs %.9g", i + 1, zero.loss[i], whole.loss[i]);
}
