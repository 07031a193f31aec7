/* test_tokenizer_gpt2.c — GPT-2's byte-level BPE: known encodings, the pre-tokenizer's pieces,
 * round trips of arbitrary bytes, long pieces, cache and merge variants, shared states, refused
 * vocabulary files, and tiktoken's ids from tests/fixtures/tokenizer/. */
#include "test.h"

#include "data/tokenizers.h"
#include "io/io.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURE_DIR "tests/fixtures/tokenizer"

/* ---------------------------------------------------------------- helpers */

static gptc_tokenizer *open_gpt2(void) {
    gptc_tokenizer *t = NULL;
    gptc_status st = gptc_tokenizer_open("gpt2", &t);
    if (st != GPTC_OK) test_fail_at(__FILE__, __LINE__, "open gpt2: %s", gptc_last_error());
    return t;
}

/* a growable id list */
typedef struct ids {
    int *v;
    size_t n, cap;
} ids;

/* Encodes text[0..len) into *out (replacing what it held); false on failure (recorded). */
static bool enc(const gptc_tokenizer *t, gptc_tok_state *s, const char *text, size_t len, bool special, ids *out) {
    out->n = 0;
    gptc_status st = t->encode(t, s, text, len, special, &out->v, &out->n, &out->cap);
    if (st != GPTC_OK) {
        test_fail_at(__FILE__, __LINE__, "encode: %s", gptc_last_error());
        return false;
    }
    return true;
}

static bool enc_str(const gptc_tokenizer *t, const char *text, bool special, ids *out) {
    return enc(t, NULL, text, strlen(text), special, out);
}

/* Appends the ids of text to *out. */
static void enc_append(const gptc_tokenizer *t, const char *text, ids *out) {
    gptc_status st = t->encode(t, NULL, text, strlen(text), false, &out->v, &out->n, &out->cap);
    if (st != GPTC_OK) test_fail_at(__FILE__, __LINE__, "encode: %s", gptc_last_error());
}

static bool ids_equal(const ids *a, const int *b, size_t nb) {
    return a->n == nb && (nb == 0 || memcmp(a->v, b, nb * sizeof *b) == 0);
}

/* Decodes ids into a malloc'd buffer; *len gets its size (-1 if an id does not decode). */
static char *dec(const gptc_tokenizer *t, const int *v, size_t n, long *len) {
    char *buf = malloc(n * 16 + 1);
    size_t k = 0;
    *len = 0;
    for (size_t i = 0; i < n; i++) {
        int b = t->decode(t, v[i], buf + k, 16);
        if (b < 0) {
            *len = -1;
            return buf;
        }
        k += (size_t)b;
    }
    *len = (long)k;
    return buf;
}

/* decode(encode(text)) == text, and every id is in the vocabulary */
static bool roundtrips(const gptc_tokenizer *t, gptc_tok_state *s, const char *text, size_t len, bool special,
                       ids *work) {
    if (!enc(t, s, text, len, special, work)) return false;
    for (size_t i = 0; i < work->n; i++)
        if (work->v[i] < 0 || work->v[i] >= t->vocab) return false;
    long got = 0;
    char *back = dec(t, work->v, work->n, &got);
    bool ok = got == (long)len && memcmp(back, text, len) == 0;
    free(back);
    return ok;
}

/* The tokenizer's pieces are exactly these strings: encoding the whole equals encoding each. */
static void check_pieces(const gptc_tokenizer *t, const char *whole, const char *const *pieces, int npieces,
                         int line) {
    ids a = {0}, b = {0};
    enc_str(t, whole, false, &a);
    for (int i = 0; i < npieces; i++) enc_append(t, pieces[i], &b);
    if (!ids_equal(&a, b.v, b.n)) test_fail_at(__FILE__, line, "pieces of \"%s\" differ", whole);
    free(a.v);
    free(b.v);
}
#define CHECK_PIECES(whole, ...)                                                                \
    do {                                                                                        \
        const char *p_[] = {__VA_ARGS__};                                                       \
        check_pieces(t, whole, p_, (int)(sizeof p_ / sizeof p_[0]), __LINE__);                  \
    } while (0)

/* A random code point from a mix of scripts, spaces and marks (never a surrogate). */
static uint32_t random_cp(gptc_rng *r) {
    static const uint32_t ranges[][2] = {
        {0x20, 0x7E},     {0x09, 0x0D},     {0x80, 0xFF},     {0x100, 0x24F},   {0x300, 0x36F},
        {0x391, 0x3C9},   {0x400, 0x4FF},   {0x5D0, 0x5EA},   {0x620, 0x64A},   {0x660, 0x669},
        {0x900, 0x97F},   {0xE00, 0xE5B},   {0x1680, 0x1680}, {0x180E, 0x180E}, {0x2000, 0x200F},
        {0x2028, 0x202F}, {0x205F, 0x205F}, {0x2070, 0x209F}, {0x3000, 0x3000}, {0x3040, 0x30FF},
        {0x4E00, 0x4FFF}, {0xAC00, 0xAD00}, {0xFEFF, 0xFEFF}, {0xFFFD, 0xFFFF}, {0x1D400, 0x1D4FF},
        {0x1F300, 0x1F64F}, {0x20000, 0x2000F}, {0x10FFFF, 0x10FFFF}, {0x85, 0x85}, {0xA0, 0xA0},
        {'\'', '\''}, {' ', ' '}, {'0', '9'},
    };
    int nr = (int)(sizeof ranges / sizeof ranges[0]);
    const uint32_t *g = ranges[gptc_rng_next(r) % (uint64_t)nr];
    return g[0] + (uint32_t)(gptc_rng_next(r) % (g[1] - g[0] + 1));
}

static size_t put_utf8(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | cp >> 6); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Random bytes of four kinds: uniform bytes, bytes from an alphabet that stresses the pattern
 * (spaces, apostrophes, high bytes, pieces of "<|endoftext|>"), valid UTF-8 of mixed scripts, and
 * valid UTF-8 with stray bytes. Writes len bytes into buf (room for len + 4). */
static size_t random_text(gptc_rng *r, char *buf, size_t len) {
    static const char *frag[] = {" ", "  ", "\n", "\t", "'", "'s", "'ll", "a", "Z", "7", "!", "<|", "|>",
                                 "<|endoftext|>", "endoftext", "\xC2\x85", "\xE1\xA0\x8E", "\xE3\x80\x80",
                                 "\x80", "\xFF", "\xC3", "\xE2\x82", "\xF0\x9F\x98", "\r\n", "\xC2\xA0"};
    int kind = (int)(gptc_rng_next(r) % 4);
    size_t k = 0;
    while (k < len) {
        if (kind == 0) {
            buf[k++] = (char)(gptc_rng_next(r) & 0xFF);
        } else if (kind == 1) {
            const char *f = frag[gptc_rng_next(r) % (sizeof frag / sizeof frag[0])];
            size_t fl = strlen(f);
            if (k + fl > len) fl = len - k;
            memcpy(buf + k, f, fl);
            k += fl;
        } else {
            char tmp[4];
            size_t n = put_utf8(random_cp(r), tmp);
            if (kind == 3 && gptc_rng_next(r) % 8 == 0) n = 1 + gptc_rng_next(r) % n; /* cut short */
            if (k + n > len) n = len - k;
            memcpy(buf + k, tmp, n);
            k += n;
        }
    }
    return k;
}

static char *read_file(const char *path, size_t *len) {
    char *data = NULL;
    if (gptc_file_read_all(path, &data, len) != GPTC_OK) return NULL;
    return data;
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); abort(); }
    if (len && fwrite(data, 1, len, f) != len) { perror(path); abort(); }
    fclose(f);
}

/* ---------------------------------------------------------------- known encodings */

TEST(tokenizer_gpt2_known) {
    gptc_tokenizer *t = open_gpt2();
    if (!t) return;
    CHECK(strcmp(t->name, "gpt2") == 0);
    CHECK_EQ_INT(t->vocab, 50257);
    CHECK_EQ_INT(t->eot, 50256);
    /* files_crc: CRC-32C of encoder.json then vocab.bpe */
    size_t el = 0, bl = 0;
    char *e = read_file("data/gpt2/encoder.json", &el), *b = read_file("data/gpt2/vocab.bpe", &bl);
    CHECK(e && b);
    if (e && b) CHECK_EQ_INT(t->files_crc, gptc_crc32c(gptc_crc32c(0, e, el), b, bl));
    gptc_free(e);
    gptc_free(b);

    ids a = {0};
    /* ids read off encoder.json: "Hello" 15496, "Ġworld" 995, "Ġthe" 262, "a" 64, "Ġ" 220, "Ġb" 275,
     * "don" 9099, "'t" 470, "I" 40, "'m" 1101, "they" 9930, "'re" 821 */
    enc_str(t, "Hello world", false, &a);
    CHECK(ids_equal(&a, (int[]){15496, 995}, 2));
    enc_str(t, " the", false, &a);
    CHECK(ids_equal(&a, (int[]){262}, 1));
    enc_str(t, "a  b", false, &a);
    CHECK(ids_equal(&a, (int[]){64, 220, 275}, 3));
    enc_str(t, "don't", false, &a);
    CHECK(ids_equal(&a, (int[]){9099, 470}, 2));
    enc_str(t, "I'm", false, &a);
    CHECK(ids_equal(&a, (int[]){40, 1101}, 2));
    enc_str(t, "they're", false, &a);
    CHECK(ids_equal(&a, (int[]){9930, 821}, 2));
    enc_str(t, "", false, &a);
    CHECK_EQ_INT(a.n, 0);

    /* the special token: only when allowed */
    enc_str(t, "<|endoftext|>", true, &a);
    CHECK(ids_equal(&a, (int[]){50256}, 1));
    enc_str(t, "<|endoftext|>", false, &a);
    CHECK(a.n > 1);
    for (size_t i = 0; i < a.n; i++) CHECK(a.v[i] != 50256);
    long got = 0;
    char *back = dec(t, a.v, a.n, &got);
    CHECK(got == 13 && memcmp(back, "<|endoftext|>", 13) == 0);
    free(back);
    enc_str(t, "a<|endoftext|><|endoftext|>b", true, &a);
    CHECK(ids_equal(&a, (int[]){64, 50256, 50256, 65}, 4));

    /* decode */
    char buf[32];
    CHECK_EQ_INT(t->decode(t, 50256, buf, sizeof buf), 13);
    CHECK(memcmp(buf, "<|endoftext|>", 13) == 0);
    CHECK_EQ_INT(t->decode(t, 50256, buf, 12), -1);
    CHECK_EQ_INT(t->decode(t, 262, buf, sizeof buf), 4);
    CHECK(memcmp(buf, " the", 4) == 0);
    CHECK_EQ_INT(t->decode(t, -1, buf, sizeof buf), -1);
    CHECK_EQ_INT(t->decode(t, 50257, buf, sizeof buf), -1);
    /* every single byte has a token that decodes to it */
    for (int c = 0; c < 256; c++) {
        char one = (char)c;
        enc(t, NULL, &one, 1, false, &a);
        CHECK(a.n == 1 && t->decode(t, a.v[0], buf, 1) == 1 && buf[0] == one);
    }
    /* appending keeps what the list held */
    a.n = 0;
    enc_append(t, "Hello", &a);
    enc_append(t, " world", &a);
    CHECK(ids_equal(&a, (int[]){15496, 995}, 2));
    free(a.v);
    gptc_tokenizer_free(t);
}

/* ---------------------------------------------------------------- the pre-tokenizer */

TEST(tokenizer_gpt2_pieces) {
    gptc_tokenizer *t = open_gpt2();
    if (!t) return;
    /* whitespace runs: all but the last space stay apart from the word that follows */
    CHECK_PIECES("a  b", "a", " ", " b");
    CHECK_PIECES("a     b", "a", "    ", " b");
    CHECK_PIECES("a   ", "a", "   ");
    CHECK_PIECES("hello\n\nworld", "hello", "\n", "\n", "world");
    CHECK_PIECES("x \n y", "x", " \n", " y");
    CHECK_PIECES("a\t b", "a", "\t", " b");
    /* contractions: lower case ASCII apostrophe only */
    CHECK_PIECES("we'll they've he'd it's I'M", "we", "'ll", " they", "'ve", " he", "'d", " it", "'s", " I", "'",
                 "M");
    CHECK_PIECES("'s's", "'s", "'s");
    /* letters, numbers and the rest */
    CHECK_PIECES("abc123def", "abc", "123", "def");
    CHECK_PIECES(" 2024!!", " 2024", "!!");
    CHECK_PIECES("x ...y", "x", " ...", "y");
    /* White_Space: U+3000, U+0085 and U+00A0 are spaces */
    CHECK_PIECES(" \xE3\x80\x80x", " ", "\xE3\x80\x80", "x");
    CHECK_PIECES("a \xC2\x85" "b", "a", " ", "\xC2\x85", "b");
    CHECK_PIECES("a \xC2\xA0" "b", "a", " ", "\xC2\xA0", "b");
    /* ... but U+180E and U+FEFF are not (PCRE2's own \s would take U+180E): " X" is one piece of
     * punctuation, where a space would split off */
    CHECK_PIECES(" \xE1\xA0\x8Ex", " \xE1\xA0\x8E", "x");
    CHECK_PIECES("a \xEF\xBB\xBF" "b", "a", " \xEF\xBB\xBF", "b");
    CHECK_PIECES(" \xE1\xA0\x8E\xE1\xA0\x8E x", " \xE1\xA0\x8E\xE1\xA0\x8E", " x");
    gptc_tokenizer_free(t);
}

/* ---------------------------------------------------------------- round trips */

TEST(tokenizer_gpt2_roundtrip_random_bytes) {
    gptc_tokenizer *t = open_gpt2();
    if (!t) return;
    gptc_tok_state *s = NULL, *whole = NULL, *tiny = NULL;
    CHECK_OK(t->state_new(t, &s));
    CHECK_OK(t->state_new(t, &whole));
    CHECK_OK(t->state_new(t, &tiny));
    gptc_tokenizer_gpt2_tune(whole, false, 48, SIZE_MAX); /* the pattern sees all the text */
    gptc_tokenizer_gpt2_tune(tiny, false, 48, 1);         /* it starts from one byte and widens */
    gptc_rng r;
    gptc_rng_seed(&r, 1234);
    char buf[304];
    ids w = {0}, x = {0};
    int bad = 0;
    for (int i = 0; i < 4000; i++) {
        size_t len = random_text(&r, buf, (size_t)(gptc_rng_next(&r) % 301));
        bool special = gptc_rng_next(&r) & 1;
        if (!roundtrips(t, i & 1 ? s : NULL, buf, len, special, &w) && bad++ < 5)
            test_fail_at(__FILE__, __LINE__, "case %d (%zu bytes, special %d) does not round-trip", i, len, special);
        enc(t, i & 1 ? whole : tiny, buf, len, special, &x);
        if (!ids_equal(&w, x.v, x.n) && bad++ < 5)
            test_fail_at(__FILE__, __LINE__, "case %d (%zu bytes): the pattern window changed the ids", i, len);
    }
    free(w.v);
    free(x.v);
    t->state_free(s);
    t->state_free(whole);
    t->state_free(tiny);
    gptc_tokenizer_free(t);
}

TEST(tokenizer_gpt2_roundtrip_utf8) {
    gptc_tokenizer *t = open_gpt2();
    if (!t) return;
    gptc_tok_state *s = NULL;
    CHECK_OK(t->state_new(t, &s));
    gptc_rng r;
    gptc_rng_seed(&r, 99);
    char buf[2000];
    ids w = {0};
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        size_t ncp = gptc_rng_next(&r) % 300, len = 0;
        for (size_t k = 0; k < ncp; k++) len += put_utf8(random_cp(&r), buf + len);
        if (!roundtrips(t, s, buf, len, false, &w) && bad++ < 5)
            test_fail_at(__FILE__, __LINE__, "utf-8 case %d (%zu bytes) does not round-trip", i, len);
    }
    free(w.v);
    t->state_free(s);
    gptc_tokenizer_free(t);
}

/* ---------------------------------------------------------------- long pieces */

TEST(tokenizer_gpt2_long_pieces) {
    gptc_tokenizer *t = open_gpt2();
    if (!t) return;
    gptc_tok_state *s = NULL;
    CHECK_OK(t->state_new(t, &s));
    size_t len = 100 * 1000;
    char *text = malloc(4 * len + 8);
    gptc_rng r;
    gptc_rng_seed(&r, 7);
    ids w = {0};
    /* 100 KB of letters without a space: one piece for the merge loop */
    for (size_t i = 0; i < len; i++) text[i] = (char)('a' + gptc_rng_next(&r) % 26);
    double t0 = gptc_now();
    CHECK(roundtrips(t, s, text, len, false, &w));
    double dt = gptc_now() - t0;
    printf("    100 KB piece of letters: %.3f s, %zu tokens\n", dt, w.n);
    CHECK_MSG(dt < 2.0, "100 KB piece took %.3f s", dt);
    /* the same piece through the scan-only merge (quadratic, so a shorter slice) agrees */
    ids heap = {0}, scan = {0};
    gptc_tokenizer_gpt2_tune(s, false, 0, 0);
    enc(t, s, text, 5000, false, &heap);
    gptc_tokenizer_gpt2_tune(s, false, SIZE_MAX, 0);
    enc(t, s, text, 5000, false, &scan);
    CHECK(ids_equal(&heap, scan.v, scan.n));
    gptc_tokenizer_gpt2_tune(s, true, 48, 0);
    /* one repeated letter, digits, punctuation, spaces before a word, invalid bytes */
    const char fills[][2] = {{'a', 0}, {'7', 0}, {'!', 0}, {' ', 'x'}, {'\n', 'x'}, {(char)0xFF, 0}, {(char)0x80, 'q'}};
    for (size_t f = 0; f < sizeof fills / sizeof fills[0]; f++) {
        memset(text, fills[f][0], len);
        size_t n = len;
        if (fills[f][1]) text[n++] = fills[f][1];
        t0 = gptc_now();
        CHECK_MSG(roundtrips(t, s, text, n, false, &w), "fill 0x%02X", (unsigned char)fills[f][0]);
        dt = gptc_now() - t0;
        CHECK_MSG(dt < 2.0, "100 KB of 0x%02X took %.3f s", (unsigned char)fills[f][0], dt);
    }
    /* 400 KB of 4-byte characters with no space, and 1 MB of spaces then a word */
    size_t n = 0;
    while (n < 4 * len) n += put_utf8(0x1D400 + (uint32_t)(gptc_rng_next(&r) % 52), text + n);
    CHECK(roundtrips(t, s, text, n, false, &w));
    free(text);
    text = malloc(1000 * 1000 + 1);
    memset(text, ' ', 1000 * 1000);
    text[1000 * 1000] = 'x';
    CHECK(roundtrips(t, s, text, 1000 * 1000 + 1, false, &w));
    CHECK(w.n == 1000 * 1000 && w.v[w.n - 1] == 2124); /* "Ġx" */
    free(text);
    free(w.v);
    free(heap.v);
    free(scan.v);
    t->state_free(s);
    gptc_tokenizer_free(t);
}

/* ---------------------------------------------------------------- cache and merge variants */

TEST(tokenizer_gpt2_cache_and_merge_variants) {
    gptc_tokenizer *t = open_gpt2();
    if (!t) return;
    size_t len = 0;
    char *shakes = read_file("data/tinyshakespeare.txt", &len);
    CHECK(shakes != NULL);
    if (!shakes) {
        gptc_tokenizer_free(t);
        return;
    }
    /* a text with far more distinct pieces than the cache holds (it must empty and refill):
     * Shakespeare, then 60000 distinct numbers and words, then random mixed text */
    size_t cap = 200 * 1000 + 60000 * 16 + 200000;
    char *text = malloc(cap);
    size_t n = 200 * 1000;
    memcpy(text, shakes, n);
    gptc_free(shakes);
    gptc_rng r;
    gptc_rng_seed(&r, 5);
    for (int i = 0; i < 60000; i++) {
        n += (size_t)snprintf(text + n, 16, " %d", 1000000 + i);
        text[n++] = ' ';
        for (int k = 0; k < 6; k++) text[n++] = (char)('a' + gptc_rng_next(&r) % 26);
    }
    while (n < cap - 400) n += random_text(&r, text + n, 300);

    enum { NV = 7 };
    gptc_tok_state *s[NV] = {NULL};
    for (int i = 0; i < NV; i++) CHECK_OK(t->state_new(t, &s[i]));
    gptc_tokenizer_gpt2_tune(s[1], false, 48, 0);        /* no cache */
    gptc_tokenizer_gpt2_tune(s[2], false, 0, 0);         /* no cache, heap for every piece */
    gptc_tokenizer_gpt2_tune(s[3], false, SIZE_MAX, 0);  /* no cache, scan for every piece */
    gptc_tokenizer_gpt2_tune(s[4], true, 48, SIZE_MAX);  /* the pattern sees all the text at once */
    gptc_tokenizer_gpt2_tune(s[5], true, 48, 1);         /* ... or starts from a window of one byte */
    gptc_tokenizer_gpt2_tune(s[6], false, 48, 37);
    ids out[NV] = {{0}};
    for (int i = 0; i < NV; i++) enc(t, s[i], text, n, false, &out[i]);
    for (int i = 1; i < NV; i++) CHECK_MSG(ids_equal(&out[0], out[i].v, out[i].n), "variant %d differs", i);
    /* a second pass through the warm cache gives the same again */
    ids again = {0};
    enc(t, s[0], text, n, false, &again);
    CHECK(ids_equal(&out[0], again.v, again.n));
    free(again.v);
    for (int i = 0; i < NV; i++) {
        free(out[i].v);
        t->state_free(s[i]);
    }
    free(text);
    gptc_tokenizer_free(t);
}

/* ---------------------------------------------------------------- states */

TEST(tokenizer_gpt2_shared_state) {
    gptc_tokenizer *t = open_gpt2();
    if (!t) return;
    gptc_tok_state *s = NULL;
    CHECK_OK(t->state_new(t, &s));
    gptc_rng r;
    gptc_rng_seed(&r, 77);
    char buf[304];
    ids a = {0}, b = {0};
    int bad = 0;
    for (int i = 0; i < 1000; i++) { /* one state, many calls, against a fresh state each time */
        size_t len = random_text(&r, buf, (size_t)(gptc_rng_next(&r) % 301));
        bool special = i % 3 == 0;
        enc(t, s, buf, len, special, &a);
        enc(t, NULL, buf, len, special, &b);
        if (!ids_equal(&a, b.v, b.n) && bad++ < 5) test_fail_at(__FILE__, __LINE__, "call %d differs", i);
    }
    t->state_free(s);
    /* threads share the tokenizer, one state each */
    enum { NT = 4, PER = 200 };
    int fails = 0;
#pragma omp parallel num_threads(NT) reduction(+ : fails)
    {
        gptc_tok_state *ts = NULL;
        if (t->state_new(t, &ts) != GPTC_OK) fails++;
        gptc_rng tr;
        ids x = {0}, y = {0};
        char tb[304];
        for (int i = 0; i < PER && ts; i++) {
            gptc_rng_seed(&tr, (uint64_t)i);
            size_t len = random_text(&tr, tb, (size_t)(gptc_rng_next(&tr) % 301));
            x.n = y.n = 0;
            if (t->encode(t, ts, tb, len, true, &x.v, &x.n, &x.cap) != GPTC_OK ||
                t->encode(t, NULL, tb, len, true, &y.v, &y.n, &y.cap) != GPTC_OK || !ids_equal(&x, y.v, y.n))
                fails++;
        }
        free(x.v);
        free(y.v);
        t->state_free(ts);
    }
    CHECK_EQ_INT(fails, 0);
    free(a.v);
    free(b.v);
    gptc_tokenizer_free(t);
}

/* ---------------------------------------------------------------- vocabulary files */

/* Writes encoder.json and vocab.bpe (either NULL: left out) into a fresh folder <tmp>/name. */
static const char *vocab_dir(const char *name, const char *enc, size_t el, const char *bpe, size_t bl, char *dir,
                             size_t cap) {
    snprintf(dir, cap, "%s/%s", test_tmpdir(), name);
    mkdir(dir, 0755);
    char path[600];
    if (enc) {
        snprintf(path, sizeof path, "%s/encoder.json", dir);
        write_file(path, enc, el);
    }
    if (bpe) {
        snprintf(path, sizeof path, "%s/vocab.bpe", dir);
        write_file(path, bpe, bl);
    }
    return dir;
}

/* Opening dir fails with st and a message holding both needles. */
static void expect_refusal(const char *dir, gptc_status st, const char *needle1, const char *needle2, int line) {
    gptc_tokenizer *t = (gptc_tokenizer *)1;
    gptc_status got = gptc_tokenizer_gpt2_open(dir, &t);
    const char *msg = gptc_last_error();
    if (got != st) test_fail_at(__FILE__, line, "%s: status %s, want %s (%s)", dir, gptc_status_name(got),
                                gptc_status_name(st), msg);
    if (t != NULL) test_fail_at(__FILE__, line, "%s: *out not NULL on failure", dir);
    if (!strstr(msg, needle1) || (needle2 && !strstr(msg, needle2)))
        test_fail_at(__FILE__, line, "%s: message \"%s\" lacks \"%s\" / \"%s\"", dir, msg, needle1,
                     needle2 ? needle2 : "");
    if (strchr(msg, '\n')) test_fail_at(__FILE__, line, "message is not one line: %s", msg);
    if (got == GPTC_OK) gptc_tokenizer_free(t);
}
#define EXPECT_REFUSAL(dir, st, n1, n2) expect_refusal(dir, st, n1, n2, __LINE__)

/* A copy of s[0..len) with the first `from` replaced by `to`; *out_len gets its size. */
static char *replace_once(const char *s, size_t len, const char *from, const char *to, size_t *out_len) {
    const char *at = memmem(s, len, from, strlen(from));
    if (!at) { fprintf(stderr, "replace_once: \"%s\" not found\n", from); abort(); }
    size_t fl = strlen(from), tl = strlen(to), pre = (size_t)(at - s);
    char *o = malloc(len - fl + tl + 1);
    memcpy(o, s, pre);
    memcpy(o + pre, to, tl);
    memcpy(o + pre + tl, at + fl, len - pre - fl);
    *out_len = len - fl + tl;
    return o;
}

TEST(tokenizer_gpt2_bad_files) {
    size_t el = 0, bl = 0;
    char *e = read_file("data/gpt2/encoder.json", &el), *b = read_file("data/gpt2/vocab.bpe", &bl);
    CHECK(e && b);
    if (!e || !b) return;
    char dir[512], want[600];

    /* the good files, copied, open and carry the same crc */
    vocab_dir("good", e, el, b, bl, dir, sizeof dir);
    gptc_tokenizer *t = NULL;
    CHECK_OK(gptc_tokenizer_gpt2_open(dir, &t));
    if (t) CHECK_EQ_INT(t->files_crc, gptc_crc32c(gptc_crc32c(0, e, el), b, bl));
    gptc_tokenizer_free(t);

    /* missing files */
    vocab_dir("empty", NULL, 0, NULL, 0, dir, sizeof dir);
    snprintf(want, sizeof want, "%s/encoder.json", dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_IO, want, "tokenizer gpt2");
    vocab_dir("no_bpe", e, el, NULL, 0, dir, sizeof dir);
    snprintf(want, sizeof want, "%s/vocab.bpe", dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_IO, want, NULL);

    /* encoder.json: truncated, not an object, wrong count, a character outside the alphabet, a
     * wrong eot, an id that is not an integer, an id given twice */
    snprintf(want, sizeof want, "%s/bad_json/encoder.json", test_tmpdir());
    vocab_dir("bad_json", e, 1000, b, bl, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, want, "not valid JSON");
    vocab_dir("bad_array", "[1, 2]", 6, b, bl, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, "bad_array/encoder.json", "not a JSON object");
    size_t ml = 0;
    char *m = replace_once(e, el, "\"!\": 0, ", "", &ml);
    vocab_dir("count", m, ml, b, bl, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, "count/encoder.json", "holds 50256 tokens");
    free(m);
    m = replace_once(e, el, "\"!\": 0", "\"\xC2\xAD\": 0", &ml); /* U+00AD is not in the alphabet */
    vocab_dir("alphabet", m, ml, b, bl, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, "alphabet/encoder.json", "U+00AD");
    free(m);
    m = replace_once(e, el, "\"<|endoftext|>\": 50256", "\"<|endoftext|\": 50256", &ml);
    vocab_dir("eot", m, ml, b, bl, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, "eot/encoder.json", "<|endoftext|>");
    free(m);
    m = replace_once(e, el, "\"!\": 0", "\"!\": 0.5", &ml);
    vocab_dir("id_frac", m, ml, b, bl, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, "id_frac/encoder.json", "not an integer");
    free(m);
    m = replace_once(e, el, "\"!\": 0", "\"!\": 1", &ml);
    vocab_dir("id_twice", m, ml, b, bl, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, "id_twice/encoder.json", "id 1");
    free(m);

    /* vocab.bpe: a merge naming an unknown token, a merge whose result is unknown, a bad header,
     * a missing line, a line that is not two tokens, a repeated merge */
    m = replace_once(b, bl, "\n\xC4\xA0 t\n", "\n\xC4\xA0 zzqzq\n", &ml);
    vocab_dir("unknown_part", e, el, m, ml, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, "unknown_part/vocab.bpe", "line 2: \"zzqzq\" is not a token");
    free(m);
    m = replace_once(b, bl, "\n\xC4\xA0 t\n", "\n\xC4\xA0 \xC3\xBF\n", &ml); /* "Ġÿ" is not a token */
    vocab_dir("unknown_result", e, el, m, ml, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, "unknown_result/vocab.bpe", "line 2: the merge");
    free(m);
    m = replace_once(b, bl, "#version: 0.2", "#version: 9.9", &ml);
    vocab_dir("header", e, el, m, ml, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, "header/vocab.bpe", "#version: 0.2");
    free(m);
    m = replace_once(b, bl, "\n\xC4\xA0 t\n", "\n", &ml);
    vocab_dir("short", e, el, m, ml, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, "short/vocab.bpe", "holds 49999 merges");
    free(m);
    m = replace_once(b, bl, "\n\xC4\xA0 t\n", "\n\xC4\xA0t\n", &ml);
    vocab_dir("one_part", e, el, m, ml, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, "one_part/vocab.bpe", "line 2");
    free(m);
    m = replace_once(b, bl, "\n\xC4\xA0 a\n", "\n\xC4\xA0 t\n", &ml);
    vocab_dir("repeat", e, el, m, ml, dir, sizeof dir);
    EXPECT_REFUSAL(dir, GPTC_ERR_FORMAT, "repeat/vocab.bpe", "line 3 repeats the merge of line 2");
    free(m);
    gptc_free(e);
    gptc_free(b);
}

TEST(tokenizer_gpt2_lookup) {
    /* $GPTC_VOCAB_DIR first; a folder without the files is passed over; none found names them all */
    const char *old = getenv("GPTC_VOCAB_DIR");
    char *saved = old ? strdup(old) : NULL;
    char cwd[1024], nowhere[600], here[700];
    if (!getcwd(cwd, sizeof cwd)) { CHECK(false); return; }
    snprintf(nowhere, sizeof nowhere, "%s/no_vocab_here", test_tmpdir());
    setenv("GPTC_VOCAB_DIR", nowhere, 1);
    gptc_tokenizer *t = NULL;
    CHECK_OK(gptc_tokenizer_open("gpt2", &t)); /* falls through to ./data/gpt2 */
    gptc_tokenizer_free(t);
    t = NULL;
    CHECK(chdir(test_tmpdir()) == 0);
    gptc_status st = gptc_tokenizer_gpt2_open(NULL, &t);
    char exe[1024] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    snprintf(here, sizeof here, "%s/../data/gpt2/encoder.json", exe);
    if (access(here, F_OK) == 0) { /* the binary sits beside a data/ folder (build/gptc_tests) */
        CHECK_OK(st);
        printf("    found beside the binary: %s\n", here);
    } else {
        CHECK_EQ_INT(st, GPTC_ERR_IO);
        const char *msg = gptc_last_error();
        CHECK_MSG(strstr(msg, nowhere) && strstr(msg, "$GPTC_VOCAB_DIR") && strstr(msg, "/../data/gpt2") &&
                      strstr(msg, "./data/gpt2"),
                  "message: %s", msg);
    }
    gptc_tokenizer_free(t);
    CHECK(chdir(cwd) == 0);
    /* a vocabulary in $GPTC_VOCAB_DIR is the one used (here: a folder whose vocab.bpe is broken) */
    snprintf(nowhere, sizeof nowhere, "%s/env_vocab", test_tmpdir());
    mkdir(nowhere, 0755);
    snprintf(here, sizeof here, "%s/vocab.bpe", nowhere);
    write_file(here, "#version: 0.2\n", 14);
    setenv("GPTC_VOCAB_DIR", nowhere, 1);
    t = NULL;
    CHECK_EQ_INT(gptc_tokenizer_open("gpt2", &t), GPTC_ERR_IO); /* its encoder.json is missing */
    CHECK(strstr(gptc_last_error(), nowhere) != NULL);
    if (saved) setenv("GPTC_VOCAB_DIR", saved, 1);
    else unsetenv("GPTC_VOCAB_DIR");
    free(saved);
    /* the dispatcher knows the name */
    CHECK_EQ_INT(gptc_tokenizer_open("gpt3", &t), GPTC_ERR_ARG);
    CHECK(strstr(gptc_last_error(), "byte, gpt2") != NULL);
}

/* ---------------------------------------------------------------- tiktoken's ids */

/* Checks one id list of a case against the JSON array `want`; false (recorded) if it differs. */
static bool check_case(const gptc_tokenizer *t, gptc_tok_state *s, const char *name, const char *text, size_t len,
                       bool special, const cJSON *want, ids *w) {
    if (!cJSON_IsArray(want)) {
        test_fail_at(__FILE__, __LINE__, "%s: no id list", name);
        return false;
    }
    if (!enc(t, s, text, len, special, w)) return false;
    size_t nw = (size_t)cJSON_GetArraySize(want), i = 0;
    const cJSON *x = want->child;
    for (; i < nw && i < w->n; i++, x = x->next)
        if (!cJSON_IsNumber(x) || (int)x->valuedouble != w->v[i]) break;
    if (i == nw && i == w->n) return true;
    test_fail_at(__FILE__, __LINE__, "%s (special %d): %zu ids, tiktoken %zu; first difference at %zu: %d vs %d",
                 name, special, w->n, nw, i, i < w->n ? w->v[i] : -1,
                 i < nw && x ? (int)x->valuedouble : -1);
    return false;
}

TEST(tokenizer_gpt2_tiktoken_cases) {
    size_t len = 0;
    char *data = read_file(FIXTURE_DIR "/cases.json", &len);
    if (!data) {
        printf("    SKIPPED: %s/cases.json is absent (tools/tokenizer-ref/make_fixtures.js writes it)\n",
               FIXTURE_DIR);
        return;
    }
    gptc_tokenizer *t = open_gpt2();
    cJSON *root = cJSON_ParseWithLength(data, len);
    CHECK(cJSON_IsArray(root));
    if (t && cJSON_IsArray(root)) {
        gptc_tok_state *s = NULL;
        CHECK_OK(t->state_new(t, &s));
        ids w = {0};
        int ncases = 0, nok = 0;
        for (const cJSON *c = root->child; c; c = c->next, ncases++) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(c, "text");
            const char *nm = cJSON_IsString(name) ? name->valuestring : "?";
            if (!cJSON_IsString(text)) {
                test_fail_at(__FILE__, __LINE__, "case %d has no text", ncases);
                continue;
            }
            size_t tl = strlen(text->valuestring);
            bool ok = check_case(t, s, nm, text->valuestring, tl, false, cJSON_GetObjectItemCaseSensitive(c, "ids"), &w);
            ok &= check_case(t, s, nm, text->valuestring, tl, true,
                             cJSON_GetObjectItemCaseSensitive(c, "ids_special"), &w);
            nok += ok;
        }
        printf("    %d of %d tiktoken cases match\n", nok, ncases);
        CHECK(ncases > 0);
        free(w.v);
        t->state_free(s);
    }
    cJSON_Delete(root);
    gptc_free(data);
    gptc_tokenizer_free(t);
}

TEST(tokenizer_gpt2_tiktoken_corpus) {
    /* whole files: token count and sum of ids as tiktoken gives them (specials not allowed) */
    size_t len = 0;
    char *data = read_file(FIXTURE_DIR "/bench_expected.json", &len);
    if (!data) {
        printf("    SKIPPED: %s/bench_expected.json is absent\n", FIXTURE_DIR);
        return;
    }
    gptc_tokenizer *t = open_gpt2();
    cJSON *root = cJSON_ParseWithLength(data, len);
    CHECK(cJSON_IsArray(root));
    ids w = {0};
    for (const cJSON *c = root ? root->child : NULL; t && c; c = c->next) {
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(c, "file");
        const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(c, "tokens");
        const cJSON *sum = cJSON_GetObjectItemCaseSensitive(c, "ids_sum");
        if (!cJSON_IsString(file) || !cJSON_IsNumber(tokens) || !cJSON_IsNumber(sum)) {
            CHECK(false);
            continue;
        }
        size_t fl = 0;
        char *text = read_file(file->valuestring, &fl);
        CHECK_MSG(text != NULL, "%s: %s", file->valuestring, gptc_last_error());
        if (!text) continue;
        enc(t, NULL, text, fl, false, &w);
        double got_sum = 0;
        for (size_t i = 0; i < w.n; i++) got_sum += w.v[i];
        CHECK_MSG(w.n == (size_t)tokens->valuedouble && got_sum == sum->valuedouble,
                  "%s: %zu tokens (sum %.0f), tiktoken %.0f (sum %.0f)", file->valuestring, w.n, got_sum,
                  tokens->valuedouble, sum->valuedouble);
        gptc_free(text);
    }
    free(w.v);
    cJSON_Delete(root);
    gptc_free(data);
    gptc_tokenizer_free(t);
}
