/* sampler.c — text generation from a checkpoint (model/gpt2.h's gptc_decoder): the prompt is prefilled
 * in one batched forward and its cache copied to every sample, then each step draws one token per sample
 * from the temperature-scaled softmax restricted by top-k and top-p (sample i with its own generator,
 * seeded seed + i), decodes it as it is produced, and feeds all samples' tokens through one incremental
 * step (the weights read once for all of them). When the cache is full (context positions) each sample's
 * is rebuilt from its last context/2 tokens, so text of any length can be generated, the same positions
 * as feeding every token one at a time would hold. */
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
    o->samples = 1;
    o->dtype = GPTC_PRECISION_FP32;
    o->pack = 1;
}

/* Positions a cache holds after n tokens were fed one at a time under the sliding rule (a full cache of
 * maxT positions is rebuilt from the last maxT/2 tokens before the next one goes in): the prefill of a
 * prompt of n tokens takes its last held_after(n) tokens, so it continues as feeding them one by one did. */
static int held_after(size_t n, int maxT) {
    if (n <= (size_t)maxT) return (int)n;
    int keep = maxT / 2;
    return keep + (int)((n - (size_t)maxT - 1) % (size_t)(maxT - keep)) + 1;
}

gptc_status gptc_generate_many(const gptc_model *m, const gptc_tokenizer *tok, const char *prompt,
                               const gptc_sample_options *o, gptc_sample_text_fn emit, void *user,
                               gptc_sample_stats *stats) {
    gptc_decoder d = {0};
    int *ids = NULL, *hist = NULL, *next = NULL;
    size_t nids = 0, cap = 0;
    gptc_draw_scratch *scratch = NULL;
    gptc_rng *rng = NULL;
    gptc_status st;
    int S = o->samples, maxT = m->cfg.context, keep = maxT / 2;
    if (S < 1) return gptc_fail(GPTC_ERR_ARG, "'samples' %d: must be at least 1", S);
    if ((st = tok->encode(tok, NULL, prompt, strlen(prompt), true, &ids, &nids, &cap))) goto done;
    if (nids == 0) { /* an empty prompt starts a new document */
        ids = malloc(sizeof *ids);
        if (!ids) { st = gptc_fail(GPTC_ERR_NOMEM, "out of memory"); goto done; }
        ids[0] = tok->eot;
        nids = 1;
    }
    int held = held_after(nids, maxT), rows = held;
    if ((size_t)held + (size_t)o->tokens > (size_t)maxT + 1 && keep > rows) rows = keep; /* a rebuild's prefill */
    bool pack = o->pack;
    if (pack && !gptc_decoder_pack_fits(m, o->dtype, gptc_machine_memory())) {
        gptc_warn("sampling reads the model's fp32 weights in place: a copy packed for decoding would not fit "
                  "in this machine's memory (steps are about 15 %% slower)");
        pack = false;
    }
    if ((st = gptc_decoder_init(&d, m, S, rows, o->dtype, pack))) goto done;
    size_t hcap = (size_t)held + (size_t)o->tokens; /* each sample's tokens from the prefill's first on */
    scratch = gptc_draw_scratch_new(tok->vocab);
    hist = malloc(sizeof *hist * hcap * S);
    next = malloc(sizeof *next * S);
    rng = malloc(sizeof *rng * S);
    if (!scratch || !hist || !next || !rng) { st = gptc_fail(GPTC_ERR_NOMEM, "out of memory"); goto done; }
    for (int s = 0; s < S; s++) {
        gptc_rng_seed(&rng[s], o->seed + (uint64_t)s);
        memcpy(hist + (size_t)s * hcap, ids + (nids - (size_t)held), sizeof *hist * held);
    }
    size_t n = (size_t)held; /* tokens in each sample's history */
    double t0 = gptc_now();
    gptc_decoder_prefill(m, &d, 0, hist, held);
    gptc_decoder_fork(m, &d, 0);
    double t1 = gptc_now();
    const float *logits = d.logits;
    char buf[64];
    int steps = 0;
    for (int i = 0; i < o->tokens; i++) {
        /* only ids the tokenizer can decode */
        gptc_draw_tokens(logits, (size_t)m->Vp, S, tok->vocab, o, scratch, rng, next);
        for (int s = 0; s < S; s++) {
            int len = tok->decode(tok, next[s], buf, sizeof buf);
            if (len > 0 && emit) emit(user, s, buf, (size_t)len);
        }
        if (i + 1 == o->tokens) break;
        if (d.len == maxT) { /* full: every sample rebuilt from its last maxT/2 tokens, then the new one */
            for (int s = 0; s < S; s++)
                if (keep > 0) gptc_decoder_prefill(m, &d, s, hist + (size_t)s * hcap + (n - (size_t)keep), keep);
            d.len = keep;
        }
        for (int s = 0; s < S; s++) hist[(size_t)s * hcap + n] = next[s];
        n++;
        logits = gptc_decoder_step(m, &d, next);
        steps++;
    }
    double t2 = gptc_now();
    if (stats) {
        stats->samples = S;
        stats->dtype = o->dtype;
        stats->prefill_tokens = held;
        stats->prefill_s = t1 - t0;
        stats->prefill_flops = gptc_decoder_prefill_flops(m, held);
        stats->decode_steps = steps;
        stats->decode_s = t2 - t1;
        stats->step_weight_bytes = gptc_decoder_step_weight_bytes(m, o->dtype);
    }
done:
    gptc_draw_scratch_free(scratch);
    free(hist);
    free(next);
    free(rng);
    free(ids);
    gptc_decoder_free(&d);
    return st;
}

/* gptc_generate's pieces: sample 0's to a gptc_text_fn */
typedef struct one_sample {
    gptc_text_fn emit;
    void *user;
} one_sample;

static void emit_one(void *user, int sample, const char *text, size_t len) {
    one_sample *u = user;
    if (u->emit) u->emit(u->user, text, len);
}

gptc_status gptc_generate(const gptc_model *m, const gptc_tokenizer *tok, const char *prompt,
                          const gptc_sample_options *o, gptc_text_fn emit, void *user) {
    one_sample u = {emit, user};
    return gptc_generate_many(m, tok, prompt, o, emit_one, &u, NULL);
}

gptc_status gptc_sample_many(const gptc_sample_options *o, gptc_sample_text_fn emit, void *user,
                             gptc_sample_stats *stats) {
    if (!o->ckpt || !*o->ckpt) return gptc_fail(GPTC_ERR_ARG, "'ckpt': missing; give a checkpoint folder written by `gptc train`, a Hugging Face GPT-2 folder or an llm.c .bin");
    if (o->tokens < 1) return gptc_fail(GPTC_ERR_ARG, "'tokens' %d: must be at least 1", o->tokens);
    if (!(o->temperature >= 0) || !isfinite(o->temperature)) return gptc_fail(GPTC_ERR_ARG, "'temperature' %g: must be 0 (greedy) or positive", o->temperature);
    if (o->top_k < 0) return gptc_fail(GPTC_ERR_ARG, "'top_k' %d: must be 0 (off) or positive", o->top_k);
    if (!(o->top_p > 0 && o->top_p <= 1)) return gptc_fail(GPTC_ERR_ARG, "'top_p' %g: must be in (0, 1]", o->top_p);
    if (o->threads < 0) return gptc_fail(GPTC_ERR_ARG, "'threads' %d: must be 0 (all cores) or more", o->threads);
    if (o->samples < 1) return gptc_fail(GPTC_ERR_ARG, "'samples' %d: must be at least 1", o->samples);
    if (o->dtype != GPTC_PRECISION_FP32 && o->dtype != GPTC_PRECISION_BF16) return gptc_fail(GPTC_ERR_ARG, "'dtype' %d: must be fp32 or bf16", (int)o->dtype);

    char dir[4096];
    bool found;
    gptc_status st = gptc_ckpt_find_weights(o->ckpt, dir, sizeof dir, &found);
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
    st = gptc_generate_many(&m, tok, o->prompt, o, emit, user, stats);
done:
    if (tok) gptc_tokenizer_free(tok);
    gptc_model_free(&m);
    return st;
}

gptc_status gptc_sample(const gptc_sample_options *o, gptc_text_fn emit, void *user) {
    one_sample u = {emit, user};
    return gptc_sample_many(o, emit_one, &u, NULL);
}
