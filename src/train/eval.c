/* eval.c — `gptc eval` (train/eval.h): the mean loss, perplexity and bits per byte of a model over a
 * whole split, sliding windows of T tokens at stride S, B windows per forward through the backend. */
#include "train/eval.h"

#include "io/io.h"
#include "train/checkpoint.h"
#include "train/weights.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void gptc_eval_options_default(gptc_eval_options *o) {
    memset(o, 0, sizeof *o);
    o->batch = 4;
}

/* Where global token g lies: piece index and offset, from starts[npieces+1] (prefix sums). */
static void locate(const uint64_t *starts, int npieces, uint64_t g, int *piece, size_t *off) {
    int lo = 0, hi = npieces - 1;
    while (lo < hi) { /* the last piece whose start <= g */
        int mid = (lo + hi + 1) / 2;
        if (starts[mid] <= g) lo = mid;
        else hi = mid - 1;
    }
    *piece = lo;
    *off = (size_t)(g - starts[lo]);
}

/* dst[0..n) = x[g..g+n) of the stream, across piece boundaries (pieces of 0 tokens skipped). */
static void copy_tokens(const gptc_eval_stream *s, const uint64_t *starts, uint64_t g, int n, int *dst) {
    int p;
    size_t off;
    locate(starts, s->npieces, g, &p, &off);
    for (int i = 0; i < n; i++) {
        while (off >= s->n[p]) {
            p++;
            off = 0;
        }
        dst[i] = s->tok[p][off++];
    }
}

gptc_status gptc_eval_stream_run(gptc_model *m, const gptc_eval_stream *s, int T, int S, int B, long max_tokens,
                                 const int *byte_len, gptc_eval_result *r) {
    int V = m->cfg.vocab;
    if (B < 1) return gptc_fail(GPTC_ERR_ARG, "'batch' %d: must be at least 1", B);
    if (T < 1 || T > m->cfg.context)
        return gptc_fail(GPTC_ERR_ARG, "'seq' %d: must be between 1 and the model's context %d", T, m->cfg.context);
    if (S < 1 || S > T)
        return gptc_fail(GPTC_ERR_ARG, "'stride' %d: must be between 1 and the window %d ('seq', or the model's context); "
                         "use 'stride' %d for windows that do not overlap", S, T, T);
    if (max_tokens < 0) return gptc_fail(GPTC_ERR_ARG, "'max_tokens' %ld: must be 0 (all) or more", max_tokens);
    uint64_t *starts = malloc(sizeof *starts * ((size_t)s->npieces + 1));
    if (!starts) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    starts[0] = 0;
    for (int i = 0; i < s->npieces; i++) {
        starts[i + 1] = starts[i] + s->n[i];
        for (size_t j = 0; j < s->n[i]; j++) /* another tokenizer's data is refused before any forward */
            if (s->tok[i][j] >= V) {
                free(starts);
                char piece[32];
                snprintf(piece, sizeof piece, "piece %d", i);
                return gptc_fail(GPTC_ERR_FORMAT, "%s: token %zu is id %d, outside the model's vocabulary of %d; the data "
                                 "was made with another tokenizer: prepare it with the model's",
                                 s->names ? s->names[i] : piece, j, s->tok[i][j], V);
            }
    }
    uint64_t N = starts[s->npieces];
    if (N < 2) {
        free(starts);
        return gptc_fail(GPTC_ERR_FORMAT, "the data holds %llu token%s; at least 2 are needed to score one",
                         (unsigned long long)N, N == 1 ? "" : "s");
    }
    uint64_t limit = N - 1; /* the last target position */
    if (max_tokens > 0 && (uint64_t)max_tokens < limit) limit = (uint64_t)max_tokens;
    int Te = limit < (uint64_t)T ? (int)limit : T; /* every window holds Te inputs */
    if (!m->act_arena) {
        gptc_status st = gptc_model_alloc_train(m, B, Te);
        if (st) {
            free(starts);
            return st;
        }
    } else if (m->B < B || m->T < Te) {
        free(starts);
        return gptc_fail(GPTC_ERR_STATE, "eval: the model's activations are for (%d, %d), smaller than (%d, %d)", m->B, m->T,
                         B, Te);
    }
    m->dropout = m->attn_dropout = 0;
    int *in = malloc(sizeof(int) * (size_t)B * (Te + 1)), *tg = malloc(sizeof(int) * (size_t)B * Te);
    int *first = malloc(sizeof(int) * (size_t)B); /* first scored position of each window in the batch */
    float *losses = malloc(sizeof(float) * (size_t)B * Te); /* (B,Te) host copy of the per-position losses */
    if (!in || !tg || !first || !losses) {
        free(starts), free(in), free(tg), free(first), free(losses);
        return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    }
    memset(r, 0, sizeof *r);
    r->T = Te;
    r->S = S;
    r->B = B;
    r->split_tokens = N;
    r->threads = gptc_threads();
    double sum = 0;
    uint64_t bytes = 0, done = 0, windows = 0; /* done: targets 1..done scored */
    double t0 = gptc_now();
    while (done < limit) {
        int b = 0;
        for (; b < B && done < limit; b++) {
            uint64_t end = done == 0 ? (uint64_t)Te : done + (uint64_t)S; /* the window's last target */
            if (end > limit) end = limit;
            uint64_t start = end - (uint64_t)Te; /* its first input */
            int *row = in + (size_t)b * (Te + 1);
            copy_tokens(s, starts, start, Te + 1, row);
            memcpy(tg + (size_t)b * Te, row + 1, sizeof(int) * Te);
            first[b] = Te - (int)(end - done);
            done = end;
        }
        /* inputs (b, Te) are rows of Te+1: pack them to (b, Te) */
        for (int i = 1; i < b; i++) memmove(in + (size_t)i * Te, in + (size_t)i * (Te + 1), sizeof(int) * Te);
        gptc_model_forward(m, in, tg, b, Te);
        m->be.mem->copy_d2h(losses, m->a.losses, sizeof(float) * (size_t)b * Te);
        for (int i = 0; i < b; i++)
            for (int j = first[i]; j < Te; j++) {
                sum += losses[(size_t)i * Te + j];
                if (byte_len) bytes += (uint64_t)byte_len[tg[(size_t)i * Te + j]];
            }
        windows += (uint64_t)b;
    }
    r->seconds = gptc_now() - t0;
    free(starts), free(in), free(tg), free(first), free(losses);
    r->tokens = limit;
    r->windows = windows;
    r->loss_sum = sum;
    r->loss = sum / (double)limit;
    r->perplexity = exp(r->loss);
    r->tokens_per_s = r->seconds > 0 ? (double)limit / r->seconds : 0;
    if (!isfinite(r->loss)) return gptc_fail(GPTC_ERR_NUMERIC, "eval: the loss is not finite (%g); the weights hold NaN or Inf", r->loss);
    if (byte_len && bytes > 0) {
        r->has_bpb = true;
        r->bytes = bytes;
        r->bpb = sum / log(2.0) / (double)bytes;
    }
    return GPTC_OK;
}

/* Each id's bytes as tok decodes it (end-of-text: 0, a document boundary); vocab entries. */
static gptc_status byte_lengths(const gptc_tokenizer *tok, int vocab, int **out) {
    int *len = malloc(sizeof(int) * (size_t)vocab);
    if (!len) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    char buf[256];
    for (int id = 0; id < vocab; id++) {
        int n = id == tok->eot || id >= tok->vocab ? 0 : tok->decode(tok, id, buf, sizeof buf);
        len[id] = n > 0 ? n : 0;
    }
    *out = len;
    return GPTC_OK;
}

/* The model at ckpt (anything --init reads): the folder it was found in (dir), its config and its
 * tokenizer's name, read without loading the weights. */
static gptc_status find_model(const char *ckpt, char *dir, size_t dircap, gptc_model_config *cfg, char *tokname,
                              size_t tokcap) {
    bool found;
    gptc_status st = gptc_ckpt_find_weights(ckpt, dir, dircap, &found);
    if (st) return gptc_fail_prefix(st, "'ckpt'");
    if (!found)
        return gptc_fail(GPTC_ERR_IO, "'ckpt' %s: no checkpoint found (expected a folder written by `gptc train 'ckpt'`, "
                         "a Hugging Face GPT-2 folder or an llm.c .bin)", ckpt);
    if ((st = gptc_ckpt_read_config(dir, cfg, tokname, tokcap))) return gptc_fail_prefix(st, "'ckpt'");
    return GPTC_OK;
}

/* The weights found in dir into *m (of config cfg), set up for the trainer's fp32 fused path. */
static gptc_status load_model(const char *dir, const gptc_model_config *cfg, gptc_model *m) {
    gptc_status st;
    if ((st = gptc_model_init(m, cfg))) return st;
    if ((st = gptc_ckpt_load(dir, m, NULL, NULL, NULL))) return gptc_fail_prefix(st, "'ckpt'");
    m->fuse = true; /* the trainer's default path: chunked classifier, fused residual+LayerNorm, fp32 */
    m->naive_attention = false;
    m->precision = GPTC_PRECISION_FP32;
    m->recompute = GPTC_RECOMPUTE_NONE;
    return GPTC_OK;
}

gptc_status gptc_eval_hellaswag(const char *ckpt, const char *file, int threads, gptc_mc_result *r) {
    memset(r, 0, sizeof *r);
    if (!ckpt || !*ckpt)
        return gptc_fail(GPTC_ERR_ARG, "'ckpt': missing; give a checkpoint folder written by `gptc train`, a Hugging Face "
                         "GPT-2 folder or an llm.c .bin");
    if (threads < 0) return gptc_fail(GPTC_ERR_ARG, "'threads' %d: must be 0 (all cores) or more", threads);
    char dir[4096], tokname[32] = "";
    gptc_model_config cfg;
    gptc_model m = {0};
    gptc_tokenizer *tz = NULL;
    gptc_mc_set set = {0};
    gptc_status st = find_model(ckpt, dir, sizeof dir, &cfg, tokname, sizeof tokname);
    if (st || (st = load_model(dir, &cfg, &m))) goto done;
    if (!tokname[0]) {
        st = gptc_fail(GPTC_ERR_STATE, "'ckpt' %s: names no tokenizer, so the text cannot be tokenized", ckpt);
        goto done;
    }
    if ((st = gptc_tokenizer_open_for_model(tokname, dir, &tz))) {
        st = gptc_fail_prefix(st, "'ckpt' %s", ckpt);
        goto done;
    }
    if (tz->vocab > cfg.vocab) {
        st = gptc_fail(GPTC_ERR_STATE, "'ckpt' %s: its %s tokenizer has %d ids but the model %d", ckpt, tokname, tz->vocab,
                       cfg.vocab);
        goto done;
    }
    if ((st = gptc_mc_read(file, tz, &set))) {
        st = gptc_fail_prefix(st, "'hellaswag'");
        goto done;
    }
    gptc_set_threads(threads);
    st = gptc_mc_score(&m, &set, r, NULL, NULL);
    if (st) st = gptc_fail_prefix(st, "'hellaswag' %s", file);
done:
    gptc_mc_free(&set);
    if (tz) gptc_tokenizer_free(tz);
    gptc_model_free(&m);
    return st;
}

gptc_status gptc_eval(const gptc_eval_options *o, gptc_eval_result *r) {
    memset(r, 0, sizeof *r);
    if (!o->ckpt || !*o->ckpt)
        return gptc_fail(GPTC_ERR_ARG, "'ckpt': missing; give a checkpoint folder written by `gptc train`, a Hugging Face "
                         "GPT-2 folder or an llm.c .bin");
    if (!o->data || !*o->data)
        return gptc_fail(GPTC_ERR_ARG, "'data': missing; give a folder made by `gptc prepare`, a shard or a glob of shards");
    if (o->threads < 0) return gptc_fail(GPTC_ERR_ARG, "'threads' %d: must be 0 (all cores) or more", o->threads);
    if (o->batch < 1) return gptc_fail(GPTC_ERR_ARG, "'batch' %d: must be at least 1", o->batch);
    if (o->seq < 0) return gptc_fail(GPTC_ERR_ARG, "'seq' %d: must be 0 (the model's context) or more", o->seq);
    if (o->stride < 0) return gptc_fail(GPTC_ERR_ARG, "'stride' %d: must be at least 1 (or 0: the window)", o->stride);
    if (o->max_tokens < 0) return gptc_fail(GPTC_ERR_ARG, "'max_tokens' %ld: must be 0 (all) or more", o->max_tokens);

    /* the model's description first: the window and the tokenizer come from it */
    char dir[4096];
    gptc_model_config cfg;
    char tokname[32];
    gptc_status st = find_model(o->ckpt, dir, sizeof dir, &cfg, tokname, sizeof tokname);
    if (st) return st;
    int T = o->seq ? o->seq : cfg.context;
    if (T > cfg.context)
        return gptc_fail(GPTC_ERR_ARG, "'seq' %d: longer than the model's context %d; use 'seq' %d or less", T, cfg.context,
                         cfg.context);
    int S = o->stride ? o->stride : T;
    if (S > T)
        return gptc_fail(GPTC_ERR_ARG, "'stride' %d: longer than the window %d (%s); use 'stride' %d or less", S, T,
                         o->seq ? "'seq'" : "the model's context", T);

    /* the data: its manifest's tokenizer must be the model's */
    gptc_data_meta meta;
    bool has_meta = false;
    if ((st = gptc_data_meta_read(o->data, &meta, &has_meta))) return gptc_fail_prefix(st, "'data'");
    if (has_meta && tokname[0] && meta.tokenizer[0] && strcmp(meta.tokenizer, tokname) != 0)
        return gptc_fail(GPTC_ERR_STATE, "'data' %s: holds %s tokens (vocabulary %d) but 'ckpt' %s reads %s tokens; "
                         "prepare the data with the %s tokenizer", o->data, meta.tokenizer, meta.vocab, o->ckpt, tokname,
                         tokname);
    if (has_meta && meta.vocab > cfg.vocab)
        return gptc_fail(GPTC_ERR_STATE, "'data' %s: holds %s tokens of a vocabulary of %d but 'ckpt' %s has %d; prepare "
                         "the data with the model's tokenizer", o->data, meta.tokenizer, meta.vocab, o->ckpt, cfg.vocab);
    char **paths = NULL;
    int npaths = 0;
    if ((st = gptc_data_resolve(o->data, !o->train_split, &paths, &npaths))) return gptc_fail_prefix(st, "'data'");
    gptc_shard *shards = calloc((size_t)npaths, sizeof *shards);
    const uint16_t **tok = calloc((size_t)npaths, sizeof *tok);
    size_t *n = calloc((size_t)npaths, sizeof *n);
    int opened = 0, *byte_len = NULL;
    gptc_model m = {0};
    gptc_tokenizer *tz = NULL;
    if (!shards || !tok || !n) {
        st = gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < npaths; i++) {
        if ((st = gptc_shard_open(&shards[i], paths[i]))) {
            st = gptc_fail_prefix(st, "'data'");
            goto done;
        }
        opened = i + 1; /* closed at done from here on */
        tok[i] = shards[i].tokens;
        n[i] = shards[i].ntok;
    }
    snprintf(r->split_desc, sizeof r->split_desc, "%s", !gptc_is_dir(o->data) ? "shards" : o->train_split ? "train split" : "val split");

    /* bits per byte needs the tokenizer; without it the rest still runs */
    if (tokname[0] && gptc_tokenizer_open_for_model(tokname, dir, &tz) != GPTC_OK)
        gptc_warn("'ckpt' %s: no bits per byte: %s", o->ckpt, gptc_last_error());
    if (tz && (st = byte_lengths(tz, cfg.vocab, &byte_len))) goto done;

    gptc_set_threads(o->threads);
    if ((st = load_model(dir, &cfg, &m))) goto done;
    gptc_eval_stream s = {tok, n, npaths, (const char *const *)paths}; /* ids checked there, before any forward */
    gptc_eval_result res;
    if ((st = gptc_eval_stream_run(&m, &s, T, S, o->batch, o->max_tokens, byte_len, &res))) {
        if (st != GPTC_ERR_NUMERIC) st = gptc_fail_prefix(st, "'data' %s", o->data);
        goto done;
    }
    snprintf(res.tokenizer, sizeof res.tokenizer, "%s", tokname);
    memcpy(res.split_desc, r->split_desc, sizeof res.split_desc);
    *r = res;
done:
    free(byte_len);
    if (tz) gptc_tokenizer_free(tz);
    gptc_model_free(&m);
    for (int i = 0; i < opened; i++) gptc_shard_close(&shards[i]);
    free(shards);
    free(tok);
    free(n);
    gptc_paths_free(paths, npaths);
    return st;
}
