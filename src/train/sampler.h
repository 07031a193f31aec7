/* sampler.h — text generation from a model in memory (used by `gptc sample` through gptc_sample,
 * and by the trainer's periodic samples). */
#ifndef GPTC_TRAIN_SAMPLER_H
#define GPTC_TRAIN_SAMPLER_H

#include "data/data.h"
#include "model/gpt2.h"

/* Encodes prompt with tok (an empty prompt starts with end-of-text), prefills a KV cache with it,
 * then draws o->tokens tokens per o (temperature, top_k, top_p, seed) and emits each decoded
 * piece. Allocates its own cache; leaves the model's training arenas untouched. */
gptc_status gptc_generate(const gptc_model *m, const gptc_tokenizer *tok, const char *prompt,
                          const gptc_sample_options *o, gptc_text_fn emit, void *user);
/* The same for o->samples samples of the prompt (prefilled once, then stepped together; sample i draws
 * with seed + i), each piece emitted with its sample's index; stats (may be NULL) gets the timings. */
gptc_status gptc_generate_many(const gptc_model *m, const gptc_tokenizer *tok, const char *prompt,
                               const gptc_sample_options *o, gptc_sample_text_fn emit, void *user,
                               gptc_sample_stats *stats);

/* Drawing one token from a row of logits (V): greedy (o->temperature 0: the first largest), else the tokens
 * weighted exp((logit - max) / temperature), ranked by weight (ties by id); kept: the first o->top_k (0: all),
 * then the shortest run of them whose weight reaches o->top_p of the whole weight (1: all); the token is where
 * a uniform draw (one gptc_rng_uniform per call, greedy none) times the kept weight falls on the kept run.
 * The scratch holds the working arrays for V tokens of each of the OpenMP threads there are when it is made. */
typedef struct gptc_draw_scratch gptc_draw_scratch;
gptc_draw_scratch *gptc_draw_scratch_new(int V); /* NULL: out of memory */
void gptc_draw_scratch_free(gptc_draw_scratch *s);
int gptc_draw_token(const float *logits, int V, const gptc_sample_options *o, gptc_draw_scratch *s, gptc_rng *rng);
/* The same for S rows of logits (row i at logits + i*ld) with generators rng[i], into out[i]: the rows drawn
 * on the scratch's threads (each row's draw is gptc_draw_token's, whichever thread makes it). */
void gptc_draw_tokens(const float *logits, size_t ld, int S, int V, const gptc_sample_options *o, gptc_draw_scratch *s,
                      gptc_rng *rng, int *out);

#endif
