/* tokenizer.c — opens a tokenizer by name; each kind lives in its own tokenizer_<name>.c. */
#include "data/tokenizers.h"

#include "io/io.h"

#include <stdio.h>
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

gptc_status gptc_tokenizer_open_for_model(const char *name, const char *where, gptc_tokenizer **out) {
    *out = NULL;
    if (name && strcmp(name, "gpt2") == 0 && where && *where) {
        char dir[4096], enc[4200], bpe[4200];
        snprintf(dir, sizeof dir, "%s", where);
        if (!gptc_is_dir(dir)) { /* a weights file: its folder */
            char *slash = strrchr(dir, '/');
            if (slash) *slash = '\0';
            else snprintf(dir, sizeof dir, ".");
        }
        snprintf(enc, sizeof enc, "%s/vocab.json", dir);
        snprintf(bpe, sizeof bpe, "%s/merges.txt", dir);
        if (gptc_is_file(enc) && gptc_is_file(bpe)) return gptc_tokenizer_gpt2_open_files(enc, bpe, out);
    }
    return gptc_tokenizer_open(name, out);
}
