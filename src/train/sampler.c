/* sampler.c — text generation from a checkpoint: the prompt is fed through the KV cache one
 * token at a time, then each new token is drawn from the temperature-scaled softmax restricted by
 * top-k and top-p, and decoded as it is produced. When the cache is full (context positions) it is
 * rebuilt from the last context/2 tokens, so text of any length can be generated; within the
 * context each new token costs one incremental step. */
#include "gptc.h"
#include "data/data.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"
#include "train/sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gptc_sample_options_default(gptc_sample_options *o) {
    memset(o, 0, sizeof *o);
    o->prompt = "";
    o->tokens = 200;
    o->temperature = 0.8f;
    o->top_k = 0;
    o->top_p = 0.95f;
    o->seed = 1337;
}

typedef struct { float p; int id; } cand;

static int by_prob_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? 1 : -1;
    return x->id - y->id; /* stable: ties by id */
}

/* Draws a token from logits (V) per the options; c is scratch (V). */
static int draw(const float *logits, int V, const gptc_sample_options *o, cand *c, gptc_rng *rng) {
    if (o->temperature <= 0) {
        int best = 0;
        for (int v = 1; v < V; v++)
            if (logits[v] > logits[best]) best = v;
        return best;
    }
    float maxv = -INFINITY;
    for (int v = 0; v < V; v++)
        if (logits[v] > maxv) maxv = logits[v];
    double sum = 0;
    for (int v = 0; v < V; v++) {
        c[v].p = expf((logits[v] - maxv) / o->temperature);
        c[v].id = v;
        sum += c[v].p;
    }
    qsort(c, V, sizeof *c, by_prob_desc);
    int n = V;
    if (o->top_k > 0 && o->top_k < n) n = o->top_k;
    if (o->top_p < 1) {
        double cum = 0;
        for (int i = 0; i < n; i++) {
            cum += c[i].p / sum;
            if (cum >= o->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    double kept = 0;
    for (int i = 0; i < n; i++) kept += c[i].p;
    double u = gptc_rng_uniform(rng) * kept, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += c[i].p;
        if (u < acc) return c[i].id;
    }
    return c[n - 1].id;
}

typedef struct feeder {
    const gptc_model *m;
    gptc_kv_cache *kv;
    int *hist;   /* every token fed so far */
    size_t n;
} feeder;

/* Feeds one token (sliding the window when the cache is full); returns the next-token logits. */
static const float *feed(feeder *f, int token) {
    if (f->kv->len == f->kv->maxT) {
        size_t keep = (size_t)f->kv->maxT / 2;
        f->kv->len = 0;
        for (size_t i = f->n - keep; i < f->n; i++) gptc_model_decode_step(f->m, f->kv, f->hist[i]);
    }
    f->hist[f->n++] = token;
    return gptc_model_decode_step(f->m, f->kv, token);
}

gptc_status gptc_generate(const gptc_model *m, const gptc_tokenizer *tok, const char *prompt,
                          const gptc_sample_options *o, gptc_text_fn emit, void *user) {
    gptc_kv_cache kv = {0};
    int *ids = NULL;
    size_t nids = 0, cap = 0;
    cand *scratch = NULL;
    int *hist = NULL;
    gptc_status st;
    if ((st = tok->encode(tok, NULL, prompt, strlen(prompt), true, &ids, &nids, &cap))) goto done;
    if (nids == 0) { /* an empty prompt starts a new document */
        ids = malloc(sizeof *ids);
        if (!ids) { st = gptc_fail(GPTC_ERR_NOMEM, "out of memory"); goto done; }
        ids[0] = tok->eot;
        nids = 1;
    }
    if ((st = gptc_kv_cache_init(&kv, m))) goto done;
    scratch = malloc(sizeof *scratch * m->cfg.vocab);
    hist = malloc(sizeof *hist * (nids + (size_t)o->tokens));
    if (!scratch || !hist) { st = gptc_fail(GPTC_ERR_NOMEM, "out of memory"); goto done; }
    gptc_rng rng;
    gptc_rng_seed(&rng, o->seed);
    feeder fd = {m, &kv, hist, 0};
    const float *logits = NULL;
    for (size_t i = 0; i < nids; i++) logits = feed(&fd, ids[i]);
    char buf[64];
    for (int i = 0; i < o->tokens; i++) {
        int next = draw(logits, tok->vocab, o, scratch, &rng); /* only ids the tokenizer can decode */
        int n = tok->decode(tok, next, buf, sizeof buf);
        if (n > 0 && emit) emit(user, buf, (size_t)n);
        if (i + 1 < o->tokens) logits = feed(&fd, next);
    }
done:
    free(scratch);
    free(hist);
    free(ids);
    gptc_kv_cache_free(&kv);
    return st;
}

gptc_status gptc_sample(const gptc_sample_options *o, gptc_text_fn emit, void *user) {
    if (!o->ckpt || !*o->ckpt) return gptc_fail(GPTC_ERR_ARG, "'ckpt': missing; give a checkpoint folder written by `gptc train`, a Hugging Face GPT-2 folder or an llm.c .bin");
    if (o->tokens < 1) return gptc_fail(GPTC_ERR_ARG, "'tokens' %d: must be at least 1", o->tokens);
    if (!(o->temperature >= 0) || !isfinite(o->temperature)) return gptc_fail(GPTC_ERR_ARG, "'temperature' %g: must be 0 (greedy) or positive", o->temperature);
    if (o->top_k < 0) return gptc_fail(GPTC_ERR_ARG, "'top_k' %d: must be 0 (off) or positive", o->top_k);
    if (!(o->top_p > 0 && o->top_p <= 1)) return gptc_fail(GPTC_ERR_ARG, "'top_p' %g: must be in (0, 1]", o->top_p);
    if (o->threads < 0) return gptc_fail(GPTC_ERR_ARG, "'threads' %d: must be 0 (all cores) or more", o->threads);

    char dir[4096];
    bool found;
    gptc_status st = gptc_ckpt_find(o->ckpt, dir, sizeof dir, &found);
    if (st) return gptc_fail_prefix(st, "'ckpt'");
    if (!found) return gptc_fail(GPTC_ERR_IO, "'ckpt' %s: no checkpoint found (expected a folder written by `gptc train`, a Hugging Face GPT-2 folder or an llm.c .bin)", o->ckpt);
    gptc_model_config cfg;
    char tokname[32];
    if ((st = gptc_ckpt_read_config(dir, &cfg, tokname, sizeof tokname))) return gptc_fail_prefix(st, "'ckpt'");
    if (!tokname[0]) return gptc_fail(GPTC_ERR_FORMAT, "'ckpt' %s: the weights do not name their tokenizer (and their vocabulary of %d is not GPT-2's 50257)", dir, cfg.vocab);
    gptc_set_threads(o->threads);

    gptc_model m = {0};
    gptc_tokenizer *tok = NULL;
    if ((st = gptc_tokenizer_open_for_model(tokname, dir, &tok))) goto done; /* an exported folder's own files */
    if (tok->vocab > cfg.vocab) {
        st = gptc_fail(GPTC_ERR_FORMAT, "'ckpt' %s: tokenizer %s has %d ids but the model only %d", dir, tokname, tok->vocab, cfg.vocab);
        goto done;
    }
    if ((st = gptc_model_init(&m, &cfg))) goto done;
    if ((st = gptc_ckpt_load(dir, &m, NULL, NULL, NULL))) {
        st = gptc_fail_prefix(st, "'ckpt'");
        goto done;
    }
    st = gptc_generate(&m, tok, o->prompt, o, emit, user);
done:
    if (tok) gptc_tokenizer_free(tok);
    gptc_model_free(&m);
    return st;
}
