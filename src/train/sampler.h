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

#endif
