/* tokenizer.c — opens a tokenizer by name; each kind lives in its own tokenizer_<name>.c. */
#include "data/tokenizers.h"

#include <string.h>

gptc_status gptc_tokenizer_open(const char *name, gptc_tokenizer **out) {
    *out = NULL;
    if (!name || !name[0]) return gptc_fail(GPTC_ERR_ARG, "tokenizer: missing; use byte or gpt2");
    if (strcmp(name, "byte") == 0 || strcmp(name, "bytes") == 0) return gptc_tokenizer_byte_open(out);
    if (strcmp(name, "gpt2") == 0) return gptc_tokenizer_gpt2_open(NULL, out);
    return gptc_fail(GPTC_ERR_ARG, "tokenizer %s: unknown; known tokenizers: byte, gpt2", name);
}

void gptc_tokenizer_free(gptc_tokenizer *t) {
    if (t && t->free) t->free(t);
}
