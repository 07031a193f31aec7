/* bench_tokenizer.c — encoding speed of the gpt2 tokenizer: `build/bench_tokenizer FILE [REPEATS]`
 * encodes FILE on one thread ("<|endoftext|>" as plain text) REPEATS times (default 5), each time
 * with a fresh state, so the piece cache starts cold every pass as it does for a new file in
 * `gptc prepare` (and as tiktoken, which keeps no cache between calls, always runs), and prints
 *   gptc: FILE: N bytes, M tokens, X MB/s (median of R runs, 1 thread)
 * on stdout (MB = 1e6 bytes; the format bench/tokenizer_vs_tiktoken.sh reads). A pass over the same
 * text with the cache the previous pass left is reported on stderr for information. */
#include "data/data.h"
#include "io/io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s FILE [REPEATS]\n", argv[0]);
        return 2;
    }
    const char *file = argv[1];
    int repeats = argc > 2 ? atoi(argv[2]) : 5;
    if (repeats < 1 || repeats > 1000) {
        fprintf(stderr, "bench_tokenizer: REPEATS must be 1..1000, got '%s'\n", argv[2]);
        return 2;
    }
    gptc_tokenizer *t = NULL;
    gptc_tok_state *s = NULL;
    char *text = NULL;
    size_t len = 0;
    if (gptc_tokenizer_open("gpt2", &t) != GPTC_OK || gptc_file_read_all(file, &text, &len) != GPTC_OK ||
        t->state_new(t, &s) != GPTC_OK) {
        fprintf(stderr, "bench_tokenizer: %s\n", gptc_last_error());
        return 1;
    }
    int *ids = NULL;
    size_t n = 0, cap = 0;
    double *secs = malloc((size_t)repeats * sizeof *secs), warm = 0;
    for (int r = 0; r <= repeats; r++) { /* r = repeats: once more with the cache left warm */
        if (r < repeats) {
            t->state_free(s);
            if (t->state_new(t, &s) != GPTC_OK) {
                fprintf(stderr, "bench_tokenizer: %s\n", gptc_last_error());
                return 1;
            }
        }
        n = 0;
        double t0 = gptc_now();
        if (t->encode(t, s, text, len, false, &ids, &n, &cap) != GPTC_OK) {
            fprintf(stderr, "bench_tokenizer: %s\n", gptc_last_error());
            return 1;
        }
        double dt = gptc_now() - t0;
        if (r < repeats) secs[r] = dt;
        else warm = dt;
    }
    qsort(secs, (size_t)repeats, sizeof *secs, by_value);
    double median = repeats % 2 ? secs[repeats / 2] : (secs[repeats / 2 - 1] + secs[repeats / 2]) / 2;
    printf("gptc: %s: %zu bytes, %zu tokens, %.2f MB/s (median of %d runs, 1 thread)\n", file, len, n,
           len / 1e6 / median, repeats);
    fprintf(stderr, "gptc: %s: a pass with the cache already warm from the same text: %.2f MB/s\n", file,
            len / 1e6 / warm);
    free(secs);
    free(ids);
    gptc_free(text);
    t->state_free(s);
    gptc_tokenizer_free(t);
    return 0;
}
