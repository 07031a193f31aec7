/* test_generate.c — generation at memory speed (model/decode.c's gptc_decoder, train/sampler.c): the
 * prompt's prefill and the incremental steps after it give the logits of the training forward
 * (unfused, whole logits) and of the one-token-at-a-time path at every position, at every kernel level;
 * batched samples equal single runs bit for bit; the step in one OpenMP region equals one region per
 * operator; bf16 weights stay near fp32; greedy text equals the old path's across a context rebuild. */
#include "test.h"

#include "data/data.h"
#include "model/gpt2.h"
#include "train/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* vocab 300 holds the byte tokenizer's 257 ids; context 24 makes the sliding rebuild cheap to reach */
static const gptc_model_config k_cfg = {2, 4, 32, 24, 300, GPTC_GELU_KIND_TANH};

static void random_tokens(int *x, int n, int vocab, uint64_t seed) {
    gptc_rng r;
    gptc_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int)(gptc_rng_next(&r) % vocab);
}

/* GPT-2's init leaves the logits near 0 and nearly equal; larger weights make them differ (and make a
 * wrong row, position or sample show) */
static void init_model(gptc_model *m, const gptc_model_config *cfg, uint64_t seed) {
    CHECK_OK(gptc_model_init(m, cfg));
    gptc_model_init_weights(m, seed);
    for (size_t i = 0; i < (size_t)m->cfg.vocab * m->cfg.channels; i++) m->params[i] *= 20; /* wte */
    for (int i = 0; i < m->ntensors; i++) {
        const gptc_tensor_desc *d = &m->tensors[i];
        if (d->ndim == 2 && strstr(d->name, "h.")) /* the layers' matrices */
            for (size_t j = 0; j < d->numel; j++) m->params[d->offset + j] *= 4;
    }
}

/* Every position's logits from three paths at each level: the training forward (gptc_model_forward,
 * unfused), the one-token step (gptc_model_decode_step), and the decoder (a prefill of the first p
 * tokens for every p; and a prefill of 5 then steps). Not bitwise: the prefill's GEMMs and flash
 * attention and the steps' matvec sum in other orders than the forward's kernels (1e-5 relative). */
TEST(decoder_prefill_and_steps_match_forward) {
    static const char *const levels[] = {"ref", "avx2", "avx512"};
    static const gptc_gelu_kind forms[] = {GPTC_GELU_KIND_TANH, GPTC_GELU_KIND_ERF, GPTC_GELU_KIND_SIGMOID};
    for (int f = 0; f < 3; f++)
        for (int l = 0; l < 3; l++) {
            const gptc_kernels *k = gptc_kernels_level(levels[l]);
            if (!k) continue;
            gptc_model_config cfg = k_cfg;
            cfg.gelu = forms[f];
            gptc_model m;
            init_model(&m, &cfg, 5 + f);
            int T = cfg.context, V = cfg.vocab, tokens[64];
            random_tokens(tokens, T, V, 17 + f);
            CHECK_OK(gptc_model_alloc_train(&m, 1, T));
            m.k = k;
            gptc_model_bind_kernels(&m);
            gptc_model_forward(&m, tokens, NULL, 1, T);
            const float *full = m.a.logits; /* (T,Vp) */
            gptc_kv_cache kv;
            CHECK_OK(gptc_kv_cache_init(&kv, &m));
            float *old = malloc(sizeof(float) * (size_t)T * m.Vp);
            for (int t = 0; t < T; t++) memcpy(old + (size_t)t * m.Vp, gptc_model_decode_step(&m, &kv, tokens[t]), sizeof(float) * m.Vp);
            gptc_decoder d;
            CHECK_OK(gptc_decoder_init(&d, &m, 1, T, GPTC_PRECISION_FP32, (l + f) % 2 == 0)); /* packed or not */
            double worst = 0;
            for (int p = 1; p <= T; p++) {
                const float *lg = gptc_decoder_prefill(&m, &d, 0, tokens, p);
                CHECK_EQ_INT(d.len, p);
                double e1 = test_rel_err_f(lg, full + (size_t)(p - 1) * m.Vp, V), e2 = test_rel_err_f(lg, old + (size_t)(p - 1) * m.Vp, V);
                worst = fmax(worst, fmax(e1, e2));
            }
            CHECK_MSG(worst < 1e-5, "%s, gelu %s: prefill's last row: rel err %g", levels[l], gptc_gelu_name(forms[f]), worst);
            worst = 0;
            gptc_decoder_prefill(&m, &d, 0, tokens, 5);
            for (int t = 5; t < T; t++) {
                const float *lg = gptc_decoder_step(&m, &d, &tokens[t]);
                double e1 = test_rel_err_f(lg, full + (size_t)t * m.Vp, V), e2 = test_rel_err_f(lg, old + (size_t)t * m.Vp, V);
                worst = fmax(worst, fmax(e1, e2));
            }
            CHECK_MSG(worst < 1e-5, "%s, gelu %s: steps after a prefill: rel err %g", levels[l], gptc_gelu_name(forms[f]), worst);
            CHECK_EQ_INT(d.len, T);
            free(old);
            gptc_decoder_free(&d);
            gptc_kv_cache_free(&kv);
            gptc_model_free(&m);
        }
}

/* The packed weights (panels) give the unpacked decoder's logits, prefill and steps, fp32 against the
 * model's own rows, bf16 against O2 training's bf16 copy (m->params16) read in place: the layers' products
 * bit for bit (panels sum in the rows' order), the classifier's within float rounding (wte's rows are
 * dot products in another fixed order than wte^T's panels), so each step's logits agree to 1e-5 and its
 * hidden state is the same. A bf16 decoder of a model without that copy packs one. */
TEST(decoder_packed_equals_unpacked) {
    gptc_model m;
    init_model(&m, &k_cfg, 21);
    int S = 2, T = k_cfg.context, V = k_cfg.vocab, prompt[8], steps[24];
    random_tokens(prompt, 8, V, 4);
    random_tokens(steps, T, V, 44);
    m.params16 = m.be.mem->alloc(m.num_floats * sizeof(uint16_t), "test bf16 copy");
    CHECK(m.params16 != NULL);
    m.be.k->to_bf16(m.params16, m.params, m.num_floats);
    for (int dt = 0; dt < 2; dt++) {
        gptc_precision p = dt ? GPTC_PRECISION_BF16 : GPTC_PRECISION_FP32;
        gptc_decoder d[2];
        for (int pack = 0; pack < 2; pack++) {
            CHECK_OK(gptc_decoder_init(&d[pack], &m, S, 8, p, pack));
            CHECK_EQ_INT(!!(d[pack].wfmt & GPTC_MV_PANELS), pack);
        }
        double worst = test_rel_err_f(gptc_decoder_prefill(&m, &d[0], 0, prompt, 8),
                                      gptc_decoder_prefill(&m, &d[1], 0, prompt, 8), V);
        gptc_decoder_fork(&m, &d[0], 0), gptc_decoder_fork(&m, &d[1], 0);
        bool same_state = true;
        for (int t = 8; t < T; t++) {
            int tok[2] = {steps[t], steps[T - 1 - t]};
            const float *a = gptc_decoder_step(&m, &d[0], tok), *b = gptc_decoder_step(&m, &d[1], tok);
            for (int s = 0; s < S; s++) worst = fmax(worst, test_rel_err_f(a + (size_t)s * m.Vp, b + (size_t)s * m.Vp, V));
            same_state = same_state && !memcmp(d[0].xn, d[1].xn, sizeof(float) * S * k_cfg.channels);
        }
        CHECK_MSG(same_state, "%s: packed and unpacked decoders' hidden states differ", gptc_precision_name(p));
        CHECK_MSG(worst < 1e-5, "%s: packed and unpacked logits: rel err %g", gptc_precision_name(p), worst);
        gptc_decoder_free(&d[0]), gptc_decoder_free(&d[1]);
    }
    m.be.mem->free(m.params16);
    m.params16 = NULL;
    gptc_decoder d;
    CHECK_OK(gptc_decoder_init(&d, &m, 1, 8, GPTC_PRECISION_BF16, false));
    CHECK_MSG(d.packed != NULL && (d.wfmt & GPTC_MV_PANELS), "bf16 without params16: a packed copy");
    gptc_decoder_free(&d);
    gptc_model_free(&m);
}

/* The decoder's step in one OpenMP region (the table's matvec_part and attention_decode_part, a spinning
 * barrier) gives the step of one region per operator (a table without the shares) bit for bit: logits and
 * hidden state, fp32 and bf16, packed and not, 1 and 3 samples after a shared prompt, at each level. */
TEST(decoder_one_region_step_equals_per_operator_steps) {
    static const char *const levels[] = {"ref", "avx2", "avx512"};
    gptc_model m;
    init_model(&m, &k_cfg, 31);
    int V = k_cfg.vocab, T = k_cfg.context, prompt[8], steps[24];
    random_tokens(prompt, 8, V, 6);
    random_tokens(steps, T, V, 66);
    for (int l = 0; l < 3; l++) {
        const gptc_kernels *k = gptc_kernels_level(levels[l]);
        if (!k) continue;
        gptc_kernels apart = *k; /* the same operators, one region each */
        apart.matvec_part = NULL;
        apart.attention_decode_part = NULL;
        const gptc_kernels *tables[2] = {k, &apart};
        for (int c = 0; c < 8; c++) {
            int S = c & 1 ? 3 : 1, pack = (c >> 1) & 1;
            gptc_precision p = c & 4 ? GPTC_PRECISION_BF16 : GPTC_PRECISION_FP32;
            gptc_decoder d[2];
            for (int i = 0; i < 2; i++) {
                m.k = tables[i];
                gptc_model_bind_kernels(&m);
                CHECK_OK(gptc_decoder_init(&d[i], &m, S, 8, p, pack));
                gptc_decoder_prefill(&m, &d[i], 0, prompt, 8);
                gptc_decoder_fork(&m, &d[i], 0);
            }
            bool same = true;
            for (int t = 8; t < T && same; t++) {
                int tok[3] = {steps[t], steps[T - 1 - t], steps[(t * 7) % T]};
                const float *lg[2];
                for (int i = 0; i < 2; i++) {
                    m.k = tables[i];
                    gptc_model_bind_kernels(&m);
                    lg[i] = gptc_decoder_step(&m, &d[i], tok);
                }
                same = !memcmp(lg[0], lg[1], sizeof(float) * S * m.Vp) &&
                       !memcmp(d[0].xn, d[1].xn, sizeof(float) * S * k_cfg.channels);
            }
            CHECK_MSG(same, "%s %s S %d packed %d: the one-region step differs", levels[l], gptc_precision_name(p), S,
                      pack);
            gptc_decoder_free(&d[0]), gptc_decoder_free(&d[1]);
        }
    }
    m.k = gptc_kernels_get();
    gptc_model_bind_kernels(&m);
    gptc_model_free(&m);
}

/* Whether sampling may make the fp32 packed copy: it fits beside what is allocated within 90 % of the
 * machine's memory; an unknown machine (0) is taken as fitting; bf16 always (its copy is needed anyway). */
TEST(decoder_pack_fits_the_machine) {
    gptc_model m;
    init_model(&m, &k_cfg, 3);
    size_t live = 0, copy = 0;
    gptc_alloc_stats(&live, NULL);
    gptc_decoder d;
    CHECK_OK(gptc_decoder_init(&d, &m, 1, 8, GPTC_PRECISION_FP32, true));
    gptc_alloc_stats(&copy, NULL);
    copy -= live; /* the copy and the decoder's arena */
    gptc_decoder_free(&d);
    CHECK(gptc_decoder_pack_fits(&m, GPTC_PRECISION_FP32, 0));
    CHECK(gptc_decoder_pack_fits(&m, GPTC_PRECISION_FP32, (live + copy) * 2));
    CHECK(!gptc_decoder_pack_fits(&m, GPTC_PRECISION_FP32, live));
    CHECK(gptc_decoder_pack_fits(&m, GPTC_PRECISION_BF16, live));
    gptc_model_free(&m);
}

/* S samples stepped together: each sample's logits equal, bit for bit, a decoder of one sample fed the
 * same tokens (matvec's rows do not depend on each other; attention and LayerNorm are per row; the
 * samples read the shared prompt's keys and values, the single decoder its own); fp32 and bf16 weights
 * (bf16: the prompt prefilled into the last sample and forked from there). bf16 weights: within 2% (max abs difference over the largest logit) of fp32 at
 * every step, the rounding of each weight to 8 significant bits. */
TEST(decoder_samples_equal_single_and_bf16_near_fp32) {
    gptc_model m;
    init_model(&m, &k_cfg, 9);
    int S = 3, T = k_cfg.context, V = k_cfg.vocab, prompt[8], steps[3][24];
    random_tokens(prompt, 8, V, 3);
    for (int s = 0; s < S; s++) random_tokens(steps[s], T, V, 100 + s);
    float *alone[2];
    for (int dt = 0; dt < 2; dt++) {
        gptc_precision p = dt ? GPTC_PRECISION_BF16 : GPTC_PRECISION_FP32;
        gptc_decoder all;
        CHECK_OK(gptc_decoder_init(&all, &m, S, 8, p, true));
        gptc_decoder_prefill(&m, &all, dt ? S - 1 : 0, prompt, 8);
        gptc_decoder_fork(&m, &all, dt ? S - 1 : 0);
        float *batched = malloc(sizeof(float) * (size_t)S * (T - 8) * m.Vp);
        for (int t = 8; t < T; t++) {
            int tok[3] = {steps[0][t], steps[1][t], steps[2][t]};
            memcpy(batched + (size_t)(t - 8) * S * m.Vp, gptc_decoder_step(&m, &all, tok), sizeof(float) * S * m.Vp);
        }
        alone[dt] = malloc(sizeof(float) * (size_t)S * (T - 8) * m.Vp);
        bool same = true;
        for (int s = 0; s < S; s++) {
            gptc_decoder one;
            CHECK_OK(gptc_decoder_init(&one, &m, 1, 8, p, true));
            gptc_decoder_prefill(&m, &one, 0, prompt, 8);
            for (int t = 8; t < T; t++) {
                const float *lg = gptc_decoder_step(&m, &one, &steps[s][t]);
                if (memcmp(lg, batched + ((size_t)(t - 8) * S + s) * m.Vp, sizeof(float) * V)) same = false;
                if (s == 0) memcpy(alone[dt] + (size_t)(t - 8) * m.Vp, lg, sizeof(float) * m.Vp);
            }
            gptc_decoder_free(&one);
        }
        CHECK_MSG(same, "%s: a sample of the batch differs from the sample alone", gptc_precision_name(p));
        free(batched);
        gptc_decoder_free(&all);
    }
    double worst = 0;
    for (int t = 0; t < T - 8; t++) worst = fmax(worst, test_rel_err_f(alone[1] + (size_t)t * m.Vp, alone[0] + (size_t)t * m.Vp, V));
    printf("    bf16 weights vs fp32: max rel err %.3g over %d steps\n", worst, T - 8);
    CHECK_MSG(worst < 2e-2 && worst > 0, "bf16 vs fp32: rel err %g", worst);
    free(alone[0]), free(alone[1]);
    gptc_model_free(&m);
}

static void collect(void *user, const char *text, size_t len) {
    char *b = user;
    size_t n = strlen(b);
    if (n + len < 4096) memcpy(b + n, text, len), b[n + len] = '\0';
}

typedef struct many_buf {
    char text[4][4096];
} many_buf;

static void collect_many(void *user, int sample, const char *text, size_t len) { collect(((many_buf *)user)->text[sample], text, len); }

/* The old path (before the prefill): every token fed one at a time through gptc_model_decode_step, a
 * full cache rebuilt from the last context/2 tokens; greedy; the text of `tokens` new tokens into out. */
static void old_greedy(const gptc_model *m, const gptc_tokenizer *tok, const char *prompt, int tokens, char *out) {
    int *ids = NULL, hist[512];
    size_t nids = 0, cap = 0, n = 0;
    CHECK_OK(tok->encode(tok, NULL, prompt, strlen(prompt), true, &ids, &nids, &cap));
    gptc_kv_cache kv;
    CHECK_OK(gptc_kv_cache_init(&kv, m));
    const float *lg = NULL;
    out[0] = '\0';
    for (int i = 0; i < (int)nids + tokens - 1; i++) {
        int t;
        if (i < (int)nids) {
            t = ids[i];
        } else {
            t = 0;
            for (int v = 1; v < tok->vocab; v++)
                if (lg[v] > lg[t]) t = v;
            char b[64];
            int k = tok->decode(tok, t, b, sizeof b);
            if (k > 0) collect(out, b, (size_t)k);
        }
        if (kv.len == kv.maxT) {
            int keep = kv.maxT / 2;
            kv.len = 0;
            for (size_t j = n - keep; j < n; j++) gptc_model_decode_step(m, &kv, hist[j]);
        }
        hist[n++] = t;
        lg = gptc_model_decode_step(m, &kv, t);
    }
    int t = 0; /* the last token comes from the last logits */
    for (int v = 1; v < tok->vocab; v++)
        if (lg[v] > lg[t]) t = v;
    char b[64];
    int k = tok->decode(tok, t, b, sizeof b);
    if (k > 0) collect(out, b, (size_t)k);
    free(ids);
    gptc_kv_cache_free(&kv);
}

/* Greedy text of the new path (prefill + steps) equals the old path's: a short prompt, and a prompt longer
 * than the context (the prefill takes the positions feeding would hold), with generation past the
 * context (each sample's cache rebuilt). And --samples: each sample's text equals a single run with
 * seed + i (temperature 1, top-p 0.9), fp32 and bf16. */
TEST(generate_greedy_matches_old_path_and_samples_match_single) {
    gptc_tokenizer *tok;
    CHECK_OK(gptc_tokenizer_open("byte", &tok));
    gptc_model m;
    init_model(&m, &k_cfg, 11);
    static const char *const prompts[] = {"To be", "Now is the winter of our discontent made glorious"};
    for (int p = 0; p < 2; p++) {
        char want[4096], got[4096] = "";
        old_greedy(&m, tok, prompts[p], 40, want);
        gptc_sample_options o;
        gptc_sample_options_default(&o);
        o.temperature = 0;
        o.tokens = 40;
        CHECK_OK(gptc_generate(&m, tok, prompts[p], &o, collect, got));
        CHECK_MSG(strcmp(got, want) == 0, "prompt %d: greedy text differs from the old path's", p);
        CHECK(strlen(got) > 0);
    }
    for (int dt = 0; dt < 2; dt++) {
        gptc_sample_options o;
        gptc_sample_options_default(&o);
        o.temperature = 1;
        o.top_p = 0.9f;
        o.tokens = 40;
        o.samples = 4;
        o.seed = 77;
        o.dtype = dt ? GPTC_PRECISION_BF16 : GPTC_PRECISION_FP32;
        many_buf *mb = calloc(1, sizeof *mb);
        gptc_sample_stats st;
        CHECK_OK(gptc_generate_many(&m, tok, "Hark", &o, collect_many, mb, &st));
        CHECK_EQ_INT(st.samples, 4);
        CHECK_EQ_INT(st.prefill_tokens, 4);
        CHECK_EQ_INT(st.decode_steps, 39);
        CHECK(st.step_weight_bytes == gptc_decoder_step_weight_bytes(&m, o.dtype));
        for (int s = 0; s < 4; s++) {
            char one[4096] = "";
            gptc_sample_options o1 = o;
            o1.samples = 1;
            o1.seed = o.seed + (uint64_t)s;
            CHECK_OK(gptc_generate(&m, tok, "Hark", &o1, collect, one));
            CHECK_MSG(strcmp(one, mb->text[s]) == 0, "%s: sample %d differs from a single run with seed + %d",
                      gptc_precision_name(o.dtype), s, s);
        }
        CHECK(strcmp(mb->text[0], mb->text[1]) != 0); /* different seeds, different text */
        free(mb);
    }
    {
        gptc_sample_options o;
        gptc_sample_options_default(&o);
        o.samples = 0;
        CHECK(gptc_generate_many(&m, tok, "x", &o, collect_many, NULL, NULL) == GPTC_ERR_ARG);
    }
    gptc_model_free(&m);
    gptc_tokenizer_free(tok);
}
