/* tokenizer_byte.c — the byte tokenizer: id b (0..255) is the byte b, id 256 is end-of-text.
 * With allow_special, the exact text "<|endoftext|>" encodes to 256; without it those 13 bytes
 * encode as bytes. decode needs a buffer of 13 bytes for eot (1 for a byte) and returns -1 when
 * the buffer is too small or the id is outside the vocabulary. */
#include "data/tokenizers.h"

#include <stdlib.h>
#include <string.h>

#define BYTE_EOT 256
#define BYTE_VOCAB 257
static const char k_eot_text[] = "<|endoftext|>";
#define EOT_LEN (sizeof k_eot_text - 1)

static gptc_status byte_encode(const gptc_tokenizer *t, gptc_tok_state *state, const char *text, size_t len,
                               bool allow_special, int **ids, size_t *n, size_t *cap) {
    /* *ids: [*cap] with *n used; a byte never becomes more than one id, so *n + len bounds it */
    if (len > (SIZE_MAX / sizeof(int)) - *n)
        return gptc_fail(GPTC_ERR_NOMEM, "byte tokenizer: %zu bytes of text are too many to encode", len);
    if (*n + len > *cap) {
        size_t want = *cap * 2 > *n + len ? *cap * 2 : *n + len;
        int *p = realloc(*ids, want * sizeof *p);
        if (!p) {
            p = realloc(*ids, (*n + len) * sizeof *p);
            want = *n + len;
        }
        if (!p) return gptc_fail(GPTC_ERR_NOMEM, "byte tokenizer: cannot allocate %zu token ids", *n + len);
        *ids = p;
        *cap = want;
    }
    int *out = *ids;
    size_t k = *n;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        if (allow_special && s[i] == '<' && len - i >= EOT_LEN && memcmp(s + i, k_eot_text, EOT_LEN) == 0) {
            out[k++] = BYTE_EOT;
            i += EOT_LEN;
        } else {
            out[k++] = s[i++];
        }
    }
    *n = k;
    return GPTC_OK;
}

static int byte_decode(const gptc_tokenizer *t, int id, char *buf, size_t cap) {
    if (id >= 0 && id < 256) {
        if (cap < 1) return -1;
        buf[0] = (char)(unsigned char)id;
        return 1;
    }
    if (id == BYTE_EOT) {
        if (cap < EOT_LEN) return -1;
        memcpy(buf, k_eot_text, EOT_LEN);
        return (int)EOT_LEN;
    }
    return -1;
}

static void byte_free(gptc_tokenizer *t) { free(t); }

static gptc_status byte_state_new(const gptc_tokenizer *t, gptc_tok_state **out) {
    *out = NULL; /* nothing to keep between calls */
    return GPTC_OK;
}

static void byte_state_free(gptc_tok_state *s) {}

gptc_status gptc_tokenizer_byte_open(gptc_tokenizer **out) {
    gptc_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return gptc_fail(GPTC_ERR_NOMEM, "cannot allocate the byte tokenizer");
    t->name = "byte";
    t->vocab = BYTE_VOCAB;
    t->eot = BYTE_EOT;
    t->state_new = byte_state_new;
    t->state_free = byte_state_free;
    t->encode = byte_encode;
    t->decode = byte_decode;
    t->free = byte_free;
    *out = t;
    return GPTC_OK;
}
