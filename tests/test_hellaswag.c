/* test_hellaswag.c — HellaSwag-format multiple choice (src/train/hellaswag.h): every candidate's
 * summed loss and the accuracies against PyTorch in float64 on the same weights
 * (tools/make_hellaswag_fixture.py, a byte-level tiny GPT-2 over the hand-written
 * tests/fixtures/hellaswag/tiny.jsonl, some of whose rows are longer than the context), the reader's
 * refusals naming the line, and `gptc eval --hellaswag` from the command line. */
#include "test.h"
#include "data/data.h"
#include "io/io.h"
#include "model/gpt2.h"
#include "train/hellaswag.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITEMS "tests/fixtures/hellaswag/tiny.jsonl"
#define FIXTURE "tests/fixtures/hellaswag/tiny_torch.safetensors"

static int meta_i(const gptc_st_file *f, const char *k) {
    const char *v = gptc_st_meta(f, k);
    return v ? atoi(v) : -1;
}

TEST(hellaswag_matches_torch_float64) {
    gptc_st_file f = {0};
    CHECK_OK(gptc_st_open(&f, FIXTURE));
    if (!f.map) return;
    gptc_model_config cfg = {meta_i(&f, "layers"), meta_i(&f, "heads"), meta_i(&f, "channels"), meta_i(&f, "context"),
                             meta_i(&f, "vocab"), GPTC_GELU_KIND_TANH};
    gptc_model m;
    CHECK_OK(gptc_model_init(&m, &cfg));
    for (int i = 0; i < m.ntensors; i++) {
        char name[96];
        snprintf(name, sizeof name, "param.%s", m.tensors[i].name);
        const gptc_st_tensor *t = gptc_st_find(&f, name);
        CHECK_MSG(t && t->dtype == GPTC_F32 && t->numel == m.tensors[i].numel, "fixture tensor %s", name);
        if (t) memcpy(m.params + m.tensors[i].offset, t->data, t->numel * sizeof(float));
    }
    m.fuse = true;
    gptc_tokenizer *tz = NULL;
    CHECK_OK(gptc_tokenizer_open("byte", &tz));
    gptc_mc_set set;
    CHECK_OK(gptc_mc_read(ITEMS, tz, &set));
    CHECK_EQ_INT(set.n, meta_i(&f, "items"));
    CHECK(set.n >= 20 && set.max_endings == 4);
    const gptc_st_tensor *ts = gptc_st_find(&f, "sum_loss"), *tn = gptc_st_find(&f, "ntok");
    CHECK(ts && ts->dtype == GPTC_F64 && ts->numel == (size_t)set.n * 4);
    CHECK(tn && tn->dtype == GPTC_I32 && tn->numel == (size_t)set.n * 4);
    double *sums = malloc(sizeof(double) * set.n * 4);
    int *ntok = malloc(sizeof(int) * set.n * 4);
    gptc_mc_result r;
    CHECK_OK(gptc_mc_score(&m, &set, &r, sums, ntok));
    if (ts && tn) {
        const double *want = ts->data;
        const int *wn = tn->data;
        double worst = 0;
        int counts = 0;
        for (int i = 0; i < set.n * 4; i++) {
            double e = fabs(sums[i] - want[i]) / fabs(want[i]);
            if (e > worst) worst = e;
            counts += ntok[i] != wn[i];
        }
        printf("    %d items: acc %d/%d, acc_norm %d/%d (torch: %d, %d); worst relative error of a candidate's "
               "summed loss %.2e\n",
               r.items, r.correct, r.items, r.correct_norm, r.items, meta_i(&f, "correct"), meta_i(&f, "correct_norm"),
               worst);
        CHECK_MSG(worst < 1e-5, "summed losses differ from torch by %g (relative)", worst);
        CHECK_EQ_INT(counts, 0);
    }
    CHECK_EQ_INT(r.items, set.n);
    CHECK_EQ_INT(r.correct, meta_i(&f, "correct"));
    CHECK_EQ_INT(r.correct_norm, meta_i(&f, "correct_norm"));
    CHECK(fabs(r.acc - (double)r.correct / set.n) < 1e-12);

    /* one item scored alone gives its bits in the set: the padding of the other rows changes nothing */
    gptc_mc_set one = {set.items + 5, 1, 4};
    double alone[4];
    gptc_mc_result r1;
    CHECK_OK(gptc_mc_score(&m, &one, &r1, alone, NULL));
    CHECK(memcmp(alone, sums + 5 * 4, sizeof alone) == 0);

    /* in a model whose activations hold one row of the context (as a trainer's at B=1, T=context), the
     * candidates run one at a time: the same scores */
    gptc_model m1;
    CHECK_OK(gptc_model_init(&m1, &cfg));
    memcpy(m1.params, m.params, sizeof(float) * m.num_floats);
    m1.fuse = true;
    CHECK_OK(gptc_model_alloc_train(&m1, 1, cfg.context));
    double *sums1 = malloc(sizeof(double) * set.n * 4);
    gptc_mc_result r2;
    CHECK_OK(gptc_mc_score(&m1, &set, &r2, sums1, NULL));
    double worst1 = 0;
    for (int i = 0; i < set.n * 4; i++) worst1 = fmax(worst1, fabs(sums1[i] - sums[i]) / fabs(sums[i]));
    CHECK_MSG(worst1 < 1e-6 && r2.correct == r.correct && r2.correct_norm == r.correct_norm,
              "one row at a time: %g relative, %d/%d correct", worst1, r2.correct, r2.correct_norm);
    gptc_model_free(&m1);
    free(sums1);
    free(sums), free(ntok);
    gptc_mc_free(&set);
    gptc_tokenizer_free(tz);
    gptc_model_free(&m);
    gptc_st_close(&f);
}

/* a file holding `text`, its path in path */
static void write_file(char *path, size_t cap, const char *text) {
    snprintf(path, cap, "%s/hs.jsonl", test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

TEST(hellaswag_reader_names_the_bad_line) {
    gptc_tokenizer *tz = NULL;
    CHECK_OK(gptc_tokenizer_open("byte", &tz));
    const char *good = "{\"ctx\": \"A man\", \"endings\": [\"runs.\", \"sits.\"], \"label\": 1}\n";
    const struct { const char *line, *why; } bad[] = {
        {"{\"ctx\": \"A man\", \"endings\": [\"runs.\", \"sits.\"]}\n", "\"label\""},
        {"{\"ctx\": \"A man\", \"endings\": [\"runs.\", \"sits.\"], \"label\": 2}\n", "index of one of the endings"},
        {"{\"ctx\": \"A man\", \"endings\": [\"runs.\"], \"label\": 0}\n", "2 to 16"},
        {"{\"ctx\": 3, \"endings\": [\"a\", \"b\"], \"label\": 0}\n", "\"ctx\""},
        {"{\"ctx\": \"A\", \"endings\": [\"a\", 7], \"label\": 0}\n", "not a string"},
        {"{\"ctx\": \"A\", \"endings\": [\"a\", \"\"], \"label\": 0}\n", "empty"},
        {"{\"ctx\": \"A\", \"endings\": [\"a\", \"b\"], \"label\": 0.5}\n", "index"},
        {"[1, 2]\n", "not a JSON object"},
        {"{\"ctx\": \"A\", \"endings\": [\"a\"\n", "not valid JSON"},
    };
    char path[4096], text[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "%s\n%s%s", good, good, bad[i].line); /* line 4: a blank line is skipped */
        write_file(path, sizeof path, text);
        gptc_mc_set s;
        CHECK(gptc_mc_read(path, tz, &s) == GPTC_ERR_FORMAT);
        const char *e = gptc_last_error();
        CHECK_MSG(strstr(e, "line 4") && strstr(e, bad[i].why), "case %zu: %s", i, e);
        CHECK(s.items == NULL && s.n == 0);
    }
    write_file(path, sizeof path, "\n\n");
    gptc_mc_set s;
    CHECK(gptc_mc_read(path, tz, &s) == GPTC_ERR_FORMAT && strstr(gptc_last_error(), "no items"));
    /* a label given as a string (some conversions write it so) is read */
    write_file(path, sizeof path, "{\"ctx\": \"A man\", \"endings\": [\"runs.\", \"sits.\", \"eats.\"], \"label\": \"2\"}\n");
    CHECK_OK(gptc_mc_read(path, tz, &s));
    CHECK(s.n == 1 && s.items[0].label == 2 && s.items[0].nend == 3 && s.items[0].nctx == 5 && s.items[0].nendtok[0] == 6);
    gptc_mc_free(&s);
    gptc_tokenizer_free(tz);
}

TEST(hellaswag_cli) {
    char dir[4096], cmd[8192], *out = NULL;
    snprintf(dir, sizeof dir, "%s/hs_run", test_tmpdir());
    /* a byte-level tiny model, two steps, so that its checkpoint names a tokenizer */
    char data[4096];
    snprintf(data, sizeof data, "%s/hs_data", test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "%s prepare data/tinyshakespeare.txt --out %s >/dev/null && %s train --model tiny --data %s --batch 2 "
             "--seq 32 --steps 2 --ckpt %s >/dev/null",
             test_gptc_bin(), data, test_gptc_bin(), data, dir);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "%s eval --ckpt %s --hellaswag " ITEMS " --json", test_gptc_bin(), dir);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK_MSG(out && strstr(out, "\"items\":24") && strstr(out, "\"acc_norm\":"), "got: %s", out);
    free(out);
    char path[4096];
    write_file(path, sizeof path, "{\"ctx\": \"A man\", \"endings\": [\"runs.\", \"sits.\"], \"label\": 1}\nnot json\n");
    snprintf(cmd, sizeof cmd, "%s eval --ckpt %s --hellaswag %s", test_gptc_bin(), dir, path);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "line 2") && strstr(out, "--hellaswag") && !strchr(strchr(out, '\n') + 1, '\n'),
              "got: %s", out);
    free(out);
    /* inside gptc train: scored at each evaluation and logged; a bad file stops the run before its first step */
    char run2[4200];
    snprintf(run2, sizeof run2, "%s/hs_train", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s train --model tiny --data %s --batch 2 --seq 64 --steps 2 --eval-every 1 "
             "--eval-hellaswag " ITEMS " --ckpt %s", test_gptc_bin(), data, run2);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK_MSG(out && strstr(out, "hellaswag acc "), "got: %s", out);
    free(out);
    char logp[4300], *log = NULL;
    snprintf(logp, sizeof logp, "%s/log.jsonl", run2);
    size_t len;
    CHECK_OK(gptc_file_read_all(logp, &log, &len));
    CHECK_MSG(log && strstr(log, "\"hellaswag_acc\":") && strstr(log, "\"hellaswag_acc_norm\":"), "log: %s", log);
    gptc_free(log);
    /* gptc report draws them: a chart with a marker per evaluation (steps 1 and 2) for each accuracy */
    snprintf(cmd, sizeof cmd, "%s report %s >/dev/null", test_gptc_bin(), run2);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    free(out);
    char htmlp[4300], *html = NULL;
    snprintf(htmlp, sizeof htmlp, "%s/report.html", run2);
    CHECK_OK(gptc_file_read_all(htmlp, &html, &len));
    int marks = 0;
    for (const char *p = html; p && (p = strstr(p, "<circle class=\"marker hellaswag-acc")); p++) marks++;
    CHECK_MSG(html && strstr(html, "HellaSwag") && marks == 4, "%d markers", marks);
    gptc_free(html);
    snprintf(cmd, sizeof cmd, "%s train --model tiny --data %s --batch 2 --seq 32 --steps 2 --eval-hellaswag %s --ckpt %s_bad",
             test_gptc_bin(), data, path, run2);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "--eval-hellaswag") && strstr(out, "line 2") && !strstr(out, "step 1/"), "got: %s", out);
    free(out);
    /* an ending longer than --seq cannot be scored in the training arenas: refused, naming --seq */
    snprintf(cmd, sizeof cmd, "%s train --model tiny --data %s --batch 2 --seq 16 --steps 2 --eval-hellaswag " ITEMS
             " --ckpt %s_short", test_gptc_bin(), data, run2);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "--seq 16") && !strstr(out, "step 1/"), "got: %s", out);
    free(out);
}
