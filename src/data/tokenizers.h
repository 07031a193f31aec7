/* tokenizers.h — private to src/data: the constructors that gptc_tokenizer_open dispatches to. */
#ifndef GPTC_DATA_TOKENIZERS_H
#define GPTC_DATA_TOKENIZERS_H

#include "data/data.h"

/* The byte tokenizer: ids 0..255 are the bytes, 256 is end-of-text; vocab 257. */
gptc_status gptc_tokenizer_byte_open(gptc_tokenizer **out);

/* GPT-2's byte-level BPE from OpenAI's encoder.json and vocab.bpe in dir (NULL: the lookup order
 * of data.h; not found is GPTC_ERR_IO naming every folder looked in). Vocab 50257, eot 50256.
 * Unreadable files are GPTC_ERR_IO, malformed ones GPTC_ERR_FORMAT, naming the file. */
gptc_status gptc_tokenizer_gpt2_open(const char *dir, gptc_tokenizer **out);
/* The same from the two files named (a Hugging Face folder's vocab.json and merges.txt hold
 * encoder.json's and vocab.bpe's content). */
gptc_status gptc_tokenizer_gpt2_open_files(const char *enc_path, const char *bpe_path, gptc_tokenizer **out);
/* For tests and benchmarks: turns a gpt2 state's piece cache on or off, sets the piece length from
 * which the heap merge runs instead of the scan (0: always the heap; SIZE_MAX: never), and the
 * bytes of text the pattern first looks at (0: the default; SIZE_MAX: all that is left). */
void gptc_tokenizer_gpt2_tune(gptc_tok_state *s, bool cache, size_t heap_threshold, size_t window);

#endif
