/* fuzz_tokenizer.c — both tokenizers are lossless on any bytes (invalid UTF-8 included): decoding the
 * ids of an encoding gives the input back exactly, with and without special tokens allowed. For GPT-2
 * BPE a second state with the piece cache off, the heap merge for every piece and a small pattern
 * window (gptc_tokenizer_gpt2_tune) must give the same ids as the default state: the three are
 * optimisations that promise not to change the result. Any difference aborts.
 * The vocabulary is read from $GPTC_VOCAB_DIR, else data/gpt2 (make fuzz runs from the repo root). */
#include "fuzz_util.h"
#include "data/data.h"
#include "data/tokenizers.h"

#include <string.h>

static gptc_tokenizer *g_byte, *g_gpt2;
static gptc_tok_state *g_plain, *g_tuned; /* gpt2 states: default, and tuned as above */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = getenv("GPTC_VOCAB_DIR");
    if (gptc_tokenizer_byte_open(&g_byte) || gptc_tokenizer_gpt2_open(dir ? dir : "data/gpt2", &g_gpt2) ||
        g_gpt2->state_new(g_gpt2, &g_plain) || g_gpt2->state_new(g_gpt2, &g_tuned)) {
        fprintf(stderr, "fuzz_tokenizer: %s (run from the repository root or set GPTC_VOCAB_DIR)\n", gptc_last_error());
        abort();
    }
    return 0;
}

/* Decodes ids[0..n) into a fresh buffer and checks it equals text[0..len). */
static void check_round_trip(const gptc_tokenizer *t, const int *ids, size_t n, const uint8_t *text, size_t len) {
    char *out = malloc(len + 1);
    size_t at = 0;
    char piece[256];
    for (size_t i = 0; i < n; i++) {
        int k = t->decode(t, ids[i], piece, sizeof piece);
        if (k < 0 || (size_t)k > len - at) {
            fprintf(stderr, "%s: id %d (token %zu of %zu) decodes to %d bytes, %zu of the input left\n", t->name,
                    ids[i], i, n, k, len - at);
            abort();
        }
        memcpy(out + at, piece, (size_t)k);
        at += (size_t)k;
    }
    if (at != len || memcmp(out, text, len) != 0) {
        fprintf(stderr, "%s: decode(encode(x)) != x (%zu bytes in, %zu out)\n", t->name, len, at);
        abort();
    }
    free(out);
}

static void encode_or_die(const gptc_tokenizer *t, gptc_tok_state *s, const uint8_t *text, size_t len, bool special,
                          int **ids, size_t *n, size_t *cap) {
    *n = 0;
    if (t->encode(t, s, (const char *)text, len, special, ids, n, cap) != GPTC_OK) {
        fprintf(stderr, "%s: encode refused %zu bytes: %s\n", t->name, len, gptc_last_error());
        abort(); /* any bytes are valid input */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    /* the first byte picks the tuning of the second state; the rest is the text */
    uint8_t knob = data[0];
    const uint8_t *text = data + 1;
    size_t len = size - 1;
    bool special = knob & 1;
    int *ids = NULL, *ids2 = NULL;
    size_t n = 0, cap = 0, n2 = 0, cap2 = 0;

    encode_or_die(g_byte, NULL, text, len, special, &ids, &n, &cap);
    check_round_trip(g_byte, ids, n, text, len);

    encode_or_die(g_gpt2, g_plain, text, len, special, &ids, &n, &cap);
    check_round_trip(g_gpt2, ids, n, text, len);
    gptc_tokenizer_gpt2_tune(g_tuned, knob & 2, knob & 4 ? 0 : SIZE_MAX, 1 + (knob >> 3));
    encode_or_die(g_gpt2, g_tuned, text, len, special, &ids2, &n2, &cap2);
    if (n2 != n || (n && memcmp(ids, ids2, n * sizeof *ids) != 0)) {
        fprintf(stderr, "gpt2: tuned state (knob 0x%02x) gives %zu ids, the default %zu\n", knob, n2, n);
        abort();
    }
    free(ids);
    free(ids2);
    return 0;
}
