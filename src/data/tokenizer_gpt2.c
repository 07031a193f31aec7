/* tokenizer_gpt2.c — GPT-2's byte-level BPE: loads OpenAI's encoder.json and vocab.bpe, splits text
 * with GPT-2's pattern (PCRE2, JIT), runs BPE on each piece's bytes (bpe_merge.c) through a per-state
 * cache (bpe_cache.c), and decodes ids back to bytes. Any bytes are valid input: what the pattern
 * does not cover (invalid UTF-8) is encoded as pieces of its own, so decoding gives the text back. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/bpe.h"
#include "data/tokenizers.h"
#include "io/io.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GPT2_VOCAB 50257
#define GPT2_MERGES 50000
#define GPT2_EOT 50256
static const char k_eot_text[] = "<|endoftext|>";
#define EOT_LEN (sizeof k_eot_text - 1)
/* Text shorter than this, encoded with no state, is encoded without the piece cache. */
#define TEMP_CACHE_MIN (16 * 1024)

/* \s written as the Unicode White_Space set (PCRE2's own \s also takes U+180E, which is not). */
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static const char k_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS
                                "]+(?![^" WS "])|[" WS "]+";

/* The pattern runs on a window of the text, not on all that is left: PCRE2's interpreter checks
 * the UTF-8 of its whole subject on every call, which would make long texts quadratic. A match is
 * taken only if it ends at least WINDOW_MARGIN bytes before a window end that is not the text's
 * end (what decides a match looks at most a few bytes past it: "'re", the lookahead, a character
 * cut by the window); otherwise the window doubles and the match is redone. The pattern has no
 * lookbehind, so starting the subject at the current offset changes nothing. */
#define WINDOW_START 256
#define WINDOW_MARGIN 16

typedef struct gpt2 {
    gptc_tokenizer base;
    uint32_t *tok_off;    /* [GPT2_VOCAB] start of token id's bytes in blob */
    uint16_t *tok_len;    /* [GPT2_VOCAB] their count */
    unsigned char *blob;  /* the bytes of every token */
    int32_t byte_id[256]; /* id of the one-byte token of each byte */
    gptc_bpe_ranks ranks;
    pcre2_code *re;
    bool jit; /* re is JIT-compiled */
} gpt2;

struct gptc_tok_state {
    const gpt2 *g;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;
    bool use_cache;
    size_t window; /* bytes of text the pattern first sees (see encode_ordinary) */
    gptc_bpe_cache cache;
    gptc_bpe_work work;
};

/* ---------------------------------------------------------------- the byte alphabet */

/* GPT-2 writes token bytes as characters: bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF stand for
 * themselves; the other 68 bytes, in increasing order, are U+0100, U+0101, ... */
static void alphabet_build(uint16_t byte_to_cp[256], int16_t cp_to_byte[256 + 68]) {
    int extra = 0;
    for (int i = 0; i < 256 + 68; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_to_cp[b] = (uint16_t)(self ? b : 256 + extra++);
        cp_to_byte[byte_to_cp[b]] = (int16_t)b;
    }
}

/* Decodes one UTF-8 character of s[0..len) (len >= 1): its code point, or -1 when the bytes are not
 * UTF-8; *used gets its length. */
static long utf8_next(const unsigned char *s, size_t len, size_t *used) {
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    *used = 1;
    if (n == 0 || n > len) return -1;
    long cp = n == 1 ? (long)c : (long)(c & (0x7F >> n));
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const long k_min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < k_min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    *used = n;
    return cp;
}

/* Maps a token string in the alphabet to its bytes (out has room for len); returns the byte count,
 * or -1 with *bad_cp set (-1 for bytes that are not UTF-8) at the first character outside it. */
static long alphabet_decode(const int16_t cp_to_byte[256 + 68], const char *s, size_t len, unsigned char *out,
                            long *bad_cp) {
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        size_t used;
        long cp = utf8_next((const unsigned char *)s + i, len - i, &used);
        if (cp < 0 || cp >= 256 + 68 || cp_to_byte[cp] < 0) {
            *bad_cp = cp;
            return -1;
        }
        out[k++] = (unsigned char)cp_to_byte[cp];
        i += used;
    }
    return (long)k;
}

/* Writes a short printable rendering of s[0..len) into buf (non-printable bytes as \xNN), for
 * messages that must stay one line. */
static const char *show(const char *s, size_t len, char *buf, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < len && k + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != 0x7F && c != '"' && c != '\\') buf[k++] = (char)c;
        else k += (size_t)snprintf(buf + k, cap - k, "\\x%02X", c);
        if (i + 1 < len && k + 5 >= cap) {
            k = k + 4 < cap ? k : cap - 4;
            memcpy(buf + k, "...", 3);
            k += 3;
            break;
        }
    }
    buf[k] = '\0';
    return buf;
}

/* ---------------------------------------------------------------- loading */

/* token bytes -> id, used while the merges are resolved */
typedef struct tok_index {
    int32_t *slot; /* [mask+1] id or -1 */
    size_t mask;
} tok_index;

static int tok_index_find(const tok_index *x, const gpt2 *g, const unsigned char *b, size_t len) {
    for (size_t i = gptc_bpe_cache_hash(b, len) & x->mask;; i = (i + 1) & x->mask) {
        int id = x->slot[i];
        if (id < 0) return -1;
        if (g->tok_len[id] == len && memcmp(g->blob + g->tok_off[id], b, len) == 0) return id;
    }
}

/* Adds id; returns the id already holding the same bytes, or -1. */
static int tok_index_add(tok_index *x, const gpt2 *g, int id) {
    const unsigned char *b = g->blob + g->tok_off[id];
    size_t len = g->tok_len[id];
    size_t i = gptc_bpe_cache_hash(b, len) & x->mask;
    for (; x->slot[i] >= 0; i = (i + 1) & x->mask) {
        int other = x->slot[i];
        if (g->tok_len[other] == len && memcmp(g->blob + g->tok_off[other], b, len) == 0) return other;
    }
    x->slot[i] = id;
    return -1;
}

/* Fills the token table of g from encoder.json (text[0..len)). */
static gptc_status load_encoder(gpt2 *g, const char *path, const char *text, size_t len,
                                const int16_t cp_to_byte[256 + 68]) {
    char shown[64];
    const char *at = NULL; /* where parsing stopped (not cJSON_GetErrorPtr: that one is global) */
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &at, false);
    if (!root) {
        size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : len;
        return gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: not valid JSON (near byte %zu); restore OpenAI's file",
                         path, off);
    }
    gptc_status st = GPTC_OK;
    if (!cJSON_IsObject(root)) {
        st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: not a JSON object mapping token strings to ids", path);
        goto done;
    }
    int count = cJSON_GetArraySize(root);
    if (count != GPT2_VOCAB) {
        st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: holds %d tokens; GPT-2's encoder.json holds %d", path,
                       count, GPT2_VOCAB);
        goto done;
    }
    size_t total = 0;
    for (cJSON *e = root->child; e; e = e->next) total += strlen(e->string);
    g->blob = malloc(total ? total : 1);
    if (!g->blob) {
        st = gptc_fail(GPTC_ERR_NOMEM, "tokenizer gpt2: cannot allocate %zu bytes of tokens", total);
        goto done;
    }
    for (int i = 0; i < GPT2_VOCAB; i++) g->tok_off[i] = UINT32_MAX;
    size_t used = 0;
    for (cJSON *e = root->child; e; e = e->next) {
        const char *key = e->string;
        size_t klen = strlen(key);
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(v >= 0 && v < GPT2_VOCAB && v == (double)(int)v)) {
            st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: token \"%s\": its id is not an integer in 0..%d",
                           path, show(key, klen, shown, sizeof shown), GPT2_VOCAB - 1);
            goto done;
        }
        int id = (int)v;
        if (g->tok_off[id] != UINT32_MAX) {
            st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: id %d is given to two tokens (one is \"%s\")", path,
                           id, show(key, klen, shown, sizeof shown));
            goto done;
        }
        long bad_cp = 0;
        long n = alphabet_decode(cp_to_byte, key, klen, g->blob + used, &bad_cp);
        if (n < 0) {
            if (bad_cp < 0)
                st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: token %d (\"%s\") is not valid UTF-8", path, id,
                               show(key, klen, shown, sizeof shown));
            else
                st = gptc_fail(GPTC_ERR_FORMAT,
                               "tokenizer gpt2: %s: token %d (\"%s\") has U+%04lX, which is not in GPT-2's byte "
                               "alphabet",
                               path, id, show(key, klen, shown, sizeof shown), bad_cp);
            goto done;
        }
        if (n == 0 || n > UINT16_MAX) {
            st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: token %d has %ld bytes (1..%d allowed)", path, id, n,
                           UINT16_MAX);
            goto done;
        }
        g->tok_off[id] = (uint32_t)used;
        g->tok_len[id] = (uint16_t)n;
        used += (size_t)n;
        if (id == GPT2_EOT && !((size_t)n == EOT_LEN && memcmp(g->blob + g->tok_off[id], k_eot_text, EOT_LEN) == 0)) {
            st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: id %d is \"%s\", not \"%s\"", path, id,
                           show(key, klen, shown, sizeof shown), k_eot_text);
            goto done;
        }
    }
    /* count == GPT2_VOCAB and no id twice: every id 0..GPT2_VOCAB-1 is set */
    for (int b = 0; b < 256; b++) g->byte_id[b] = -1;
    for (int id = 0; id < GPT2_VOCAB; id++)
        if (g->tok_len[id] == 1) g->byte_id[g->blob[g->tok_off[id]]] = id;
    for (int b = 0; b < 256; b++)
        if (g->byte_id[b] < 0) {
            st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: no token for the single byte 0x%02X", path, b);
            goto done;
        }
done:
    cJSON_Delete(root);
    return st;
}

/* Builds g->ranks from vocab.bpe (text[0..len)); enc_path names encoder.json in messages. */
static gptc_status load_merges(gpt2 *g, const char *path, const char *enc_path, const char *text, size_t len,
                               const int16_t cp_to_byte[256 + 68]) {
    static const char k_header[] = "#version: 0.2";
    char shown[64];
    /* lines: the header, then one merge per line; the file ends with a newline (tolerated without) */
    const char *p = text, *end = text + len;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    size_t hlen = (size_t)((eol ? eol : end) - p);
    if (hlen && p[hlen - 1] == '\r') hlen--;
    if (hlen != sizeof k_header - 1 || memcmp(p, k_header, hlen) != 0)
        return gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: the first line is not \"%s\"; restore OpenAI's file",
                         path, k_header);
    const char *body = eol ? eol + 1 : end;
    size_t nmerges = 0;
    for (const char *q = body; q < end;) {
        const char *e = memchr(q, '\n', (size_t)(end - q));
        nmerges++;
        q = e ? e + 1 : end;
    }
    if (nmerges != GPT2_MERGES)
        return gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: holds %zu merges; GPT-2's vocab.bpe holds %d", path,
                         nmerges, GPT2_MERGES);
    gptc_status st = gptc_bpe_ranks_init(&g->ranks, nmerges);
    if (st != GPTC_OK) return st;
    tok_index x = {malloc((1u << 17) * sizeof(int32_t)), (1u << 17) - 1};
    unsigned char *buf = malloc(len + 1); /* [len] the bytes of one merge's two parts, back to back */
    if (!x.slot || !buf) {
        st = gptc_fail(GPTC_ERR_NOMEM, "tokenizer gpt2: cannot allocate the token index");
        goto done;
    }
    memset(x.slot, 0xff, (x.mask + 1) * sizeof(int32_t));
    for (int id = 0; id < GPT2_VOCAB; id++) {
        int other = tok_index_add(&x, g, id);
        if (other >= 0) {
            st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: tokens %d and %d stand for the same bytes",
                           enc_path, other, id);
            goto done;
        }
    }
    int rank = 0;
    for (const char *q = body; q < end; rank++) {
        const char *e = memchr(q, '\n', (size_t)(end - q));
        size_t n = (size_t)((e ? e : end) - q);
        int line = rank + 2;
        if (n && q[n - 1] == '\r') n--;
        const char *sp = memchr(q, ' ', n);
        if (!sp || sp == q || sp + 1 == q + n || memchr(sp + 1, ' ', (size_t)(q + n - sp - 1))) {
            st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: line %d (\"%s\") is not two tokens and one space",
                           path, line, show(q, n, shown, sizeof shown));
            goto done;
        }
        const char *part[2] = {q, sp + 1};
        size_t plen[2] = {(size_t)(sp - q), (size_t)(q + n - sp - 1)};
        long blen[2];
        int pid[2];
        for (int k = 0; k < 2; k++) {
            long bad_cp = 0;
            blen[k] = alphabet_decode(cp_to_byte, part[k], plen[k], buf + (k ? blen[0] : 0), &bad_cp);
            pid[k] = blen[k] < 0 ? -1 : tok_index_find(&x, g, buf + (k ? blen[0] : 0), (size_t)blen[k]);
            if (pid[k] < 0) {
                st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: line %d: \"%s\" is not a token of encoder.json",
                               path, line, show(part[k], plen[k], shown, sizeof shown));
                goto done;
            }
        }
        int merged = tok_index_find(&x, g, buf, (size_t)(blen[0] + blen[1]));
        if (merged < 0) {
            st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: line %d: the merge \"%s\" makes a token that is not "
                           "in encoder.json", path, line, show(q, n, shown, sizeof shown));
            goto done;
        }
        int before = gptc_bpe_ranks_add(&g->ranks, pid[0], pid[1], rank, merged);
        if (before >= 0) {
            st = gptc_fail(GPTC_ERR_FORMAT, "tokenizer gpt2: %s: line %d repeats the merge of line %d", path, line,
                           before + 2);
            goto done;
        }
        q = e ? e + 1 : end;
    }
done:
    free(x.slot);
    free(buf);
    return st;
}

static gptc_status compile_pattern(gpt2 *g) {
    int err = 0;
    PCRE2_SIZE erroff = 0;
    g->re = pcre2_compile((PCRE2_SPTR)k_pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                          &err, &erroff, NULL);
    if (!g->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return gptc_fail(GPTC_ERR_STATE, "tokenizer gpt2: PCRE2 cannot compile GPT-2's pattern (%s at %zu); it needs "
                         "PCRE2 built with Unicode support", (const char *)msg, (size_t)erroff);
    }
    g->jit = pcre2_jit_compile(g->re, PCRE2_JIT_COMPLETE) == 0; /* without JIT the interpreter runs */
    return GPTC_OK;
}

/* ---------------------------------------------------------------- states */

static gptc_status gpt2_state_new(const gptc_tokenizer *t, gptc_tok_state **out) {
    const gpt2 *g = t->impl;
    *out = NULL;
    gptc_tok_state *s = calloc(1, sizeof *s);
    if (!s) return gptc_fail(GPTC_ERR_NOMEM, "tokenizer gpt2: cannot allocate a state");
    s->g = g;
    s->use_cache = true;
    s->window = WINDOW_START;
    gptc_bpe_work_init(&s->work);
    s->md = pcre2_match_data_create_from_pattern(g->re, NULL);
    s->mctx = pcre2_match_context_create(NULL);
    /* a JIT stack of its own (mapped, so untouched pages cost nothing) for input that would overflow
     * the default 32 KiB; past 1 MiB the interpreter takes over for the call */
    s->jit_stack = g->jit ? pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL) : NULL;
    if (!s->md || !s->mctx || (g->jit && !s->jit_stack)) {
        t->state_free(s);
        return gptc_fail(GPTC_ERR_NOMEM, "tokenizer gpt2: cannot allocate a state");
    }
    if (s->jit_stack) pcre2_jit_stack_assign(s->mctx, NULL, s->jit_stack);
    *out = s;
    return GPTC_OK;
}

static void gpt2_state_free(gptc_tok_state *s) {
    if (!s) return;
    pcre2_match_data_free(s->md);
    pcre2_match_context_free(s->mctx);
    pcre2_jit_stack_free(s->jit_stack);
    gptc_bpe_cache_free(&s->cache);
    gptc_bpe_work_free(&s->work);
    free(s);
}

void gptc_tokenizer_gpt2_tune(gptc_tok_state *s, bool cache, size_t heap_threshold, size_t window) {
    s->use_cache = cache;
    s->work.heap_threshold = heap_threshold;
    s->window = window ? window : WINDOW_START;
}

/* ---------------------------------------------------------------- encoding */

/* growable output: *ids [*cap] with *n used */
typedef struct out_buf {
    int **ids;
    size_t *n, *cap;
} out_buf;

/* Makes room for `more` ids. */
static gptc_status out_reserve(out_buf *o, size_t more) {
    if (more <= *o->cap - *o->n) return GPTC_OK;
    if (more > SIZE_MAX / sizeof(int) - *o->n)
        return gptc_fail(GPTC_ERR_NOMEM, "tokenizer gpt2: too many tokens to hold");
    size_t need = *o->n + more, want = *o->cap * 2 > need ? *o->cap * 2 : need;
    if (want < 1024) want = 1024;
    if (want > SIZE_MAX / sizeof(int)) want = need;
    int *p = realloc(*o->ids, want * sizeof *p);
    if (!p) {
        want = need;
        p = realloc(*o->ids, want * sizeof *p);
    }
    if (!p) return gptc_fail(GPTC_ERR_NOMEM, "tokenizer gpt2: cannot allocate %zu token ids", need);
    *o->ids = p;
    *o->cap = want;
    return GPTC_OK;
}

/* Appends the BPE ids of one piece (len >= 1). */
static gptc_status encode_piece(const gpt2 *g, gptc_tok_state *s, const unsigned char *piece, size_t len, out_buf *o) {
    gptc_status st = out_reserve(o, len);
    if (st != GPTC_OK) return st;
    int *out = *o->ids + *o->n;
    if (len == 1) {
        out[0] = g->byte_id[piece[0]];
        *o->n += 1;
        return GPTC_OK;
    }
    bool cacheable = s->use_cache && len <= GPTC_BPE_CACHE_MAX_PIECE;
    uint64_t h = 0;
    if (cacheable && !s->cache.slots) { /* made on first use: a state that encodes little stays small */
        st = gptc_bpe_cache_init(&s->cache);
        if (st != GPTC_OK) return st;
    }
    if (cacheable) {
        h = gptc_bpe_cache_hash(piece, len);
        size_t nids = 0;
        const int32_t *hit = gptc_bpe_cache_get(&s->cache, h, piece, len, &nids);
        if (hit) {
            for (size_t i = 0; i < nids; i++) out[i] = hit[i];
            *o->n += nids;
            return GPTC_OK;
        }
    }
    size_t m = gptc_bpe_merge(&g->ranks, g->byte_id, piece, len, &s->work, out);
    if (m == 0) return GPTC_ERR_NOMEM; /* message set by the merge */
    if (cacheable) gptc_bpe_cache_put(&s->cache, h, piece, len, out, m);
    *o->n += m;
    return GPTC_OK;
}

/* Finds the first match in subject[0..len): >0 with the match in the ovector, PCRE2_ERROR_NOMATCH,
 * or another negative PCRE2 code. The JIT may run out of stack on odd input; the interpreter then
 * takes over for that call. */
static int pattern_match(const gpt2 *g, gptc_tok_state *s, const unsigned char *subject, size_t len) {
    if (g->jit) {
        int rc = pcre2_jit_match(g->re, subject, len, 0, 0, s->md, s->mctx);
        if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH) return rc;
    }
    return pcre2_match(g->re, subject, len, 0, PCRE2_NO_JIT, s->md, s->mctx);
}

/* Appends the ids of text[0..len), which holds no special tokens. */
static gptc_status encode_ordinary(const gpt2 *g, gptc_tok_state *s, const unsigned char *text, size_t len,
                                   out_buf *o) {
    size_t off = 0, window = s->window;
    while (off < len) {
        size_t wlen = len - off < window ? len - off : window;
        bool at_end = off + wlen == len;
        int rc = pattern_match(g, s, text + off, wlen);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return gptc_fail(GPTC_ERR_STATE, "tokenizer gpt2: splitting the text failed at byte %zu: %s", off,
                             (const char *)msg);
        }
        size_t start = wlen, end = wlen; /* no match: the window is one gap */
        if (rc >= 0) {
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
            start = ov[0];
            end = ov[1];
            GPTC_ASSERT(end > start && end <= wlen); /* no alternative matches empty */
        }
        if (!at_end && end + WINDOW_MARGIN > wlen) {
            window = window > SIZE_MAX / 2 ? SIZE_MAX : window * 2; /* undecided: look further */
            continue;
        }
        gptc_status st = GPTC_OK;
        if (start > 0) st = encode_piece(g, s, text + off, start, o); /* bytes the pattern skipped */
        if (st == GPTC_OK && end > start) st = encode_piece(g, s, text + off + start, end - start, o);
        if (st != GPTC_OK) return st;
        off += end;
        window = s->window;
    }
    return GPTC_OK;
}

static gptc_status gpt2_encode(const gptc_tokenizer *t, gptc_tok_state *s, const char *text, size_t len,
                               bool allow_special, int **ids, size_t *n, size_t *cap) {
    const gpt2 *g = t->impl;
    gptc_tok_state *tmp = NULL;
    if (!s) {
        gptc_status st = gpt2_state_new(t, &tmp);
        if (st != GPTC_OK) return st;
        s = tmp;
        s->use_cache = len >= TEMP_CACHE_MIN; /* filling a cache costs more than it saves on short text */
    }
    GPTC_ASSERT(s->g == g); /* a state belongs to the tokenizer that made it */
    out_buf o = {ids, n, cap};
    size_t n0 = *n;
    const unsigned char *p = (const unsigned char *)text, *end = p + len;
    gptc_status st = GPTC_OK;
    while (st == GPTC_OK) {
        const unsigned char *eot = allow_special ? memmem(p, (size_t)(end - p), k_eot_text, EOT_LEN) : NULL;
        const unsigned char *stop = eot ? eot : end;
        if (stop > p) st = encode_ordinary(g, s, p, (size_t)(stop - p), &o);
        if (st != GPTC_OK || !eot) break;
        st = out_reserve(&o, 1);
        if (st == GPTC_OK) (*ids)[(*n)++] = GPT2_EOT;
        p = eot + EOT_LEN;
    }
    if (st != GPTC_OK) *n = n0;
    gpt2_state_free(tmp);
    return st;
}

static int gpt2_decode(const gptc_tokenizer *t, int id, char *buf, size_t cap) {
    const gpt2 *g = t->impl;
    if (id < 0 || id >= GPT2_VOCAB) return -1;
    size_t len = g->tok_len[id];
    if (len > cap) return -1;
    memcpy(buf, g->blob + g->tok_off[id], len);
    return (int)len;
}

/* ---------------------------------------------------------------- opening */

static void gpt2_free(gptc_tokenizer *t) {
    if (!t) return;
    gpt2 *g = t->impl;
    free(g->tok_off);
    free(g->tok_len);
    free(g->blob);
    gptc_bpe_ranks_free(&g->ranks);
    pcre2_code_free(g->re);
    free(g);
}

/* Opens the tokenizer from enc_path (encoder.json's content) and bpe_path (vocab.bpe's). */
static gptc_status gpt2_open_files(const char *enc_path, const char *bpe_path, gptc_tokenizer **out) {
    char *enc = NULL, *bpe = NULL;
    size_t enc_len = 0, bpe_len = 0;
    gpt2 *g = calloc(1, sizeof *g);
    if (!g) return gptc_fail(GPTC_ERR_NOMEM, "tokenizer gpt2: cannot allocate the tokenizer");
    g->base.name = "gpt2";
    g->base.vocab = GPT2_VOCAB;
    g->base.eot = GPT2_EOT;
    g->base.state_new = gpt2_state_new;
    g->base.state_free = gpt2_state_free;
    g->base.encode = gpt2_encode;
    g->base.decode = gpt2_decode;
    g->base.free = gpt2_free;
    g->base.impl = g;
    uint16_t byte_to_cp[256];
    int16_t cp_to_byte[256 + 68];
    alphabet_build(byte_to_cp, cp_to_byte);
    gptc_status st = gptc_file_read_all(enc_path, &enc, &enc_len);
    if (st == GPTC_OK) st = gptc_file_read_all(bpe_path, &bpe, &bpe_len);
    if (st != GPTC_OK) {
        gptc_fail_prefix(st, "tokenizer gpt2");
        goto done;
    }
    g->tok_off = malloc(GPT2_VOCAB * sizeof *g->tok_off);
    g->tok_len = calloc(GPT2_VOCAB, sizeof *g->tok_len);
    if (!g->tok_off || !g->tok_len) {
        st = gptc_fail(GPTC_ERR_NOMEM, "tokenizer gpt2: cannot allocate the token table");
        goto done;
    }
    st = load_encoder(g, enc_path, enc, enc_len, cp_to_byte);
    if (st == GPTC_OK) st = load_merges(g, bpe_path, enc_path, bpe, bpe_len, cp_to_byte);
    if (st == GPTC_OK) st = compile_pattern(g);
    if (st == GPTC_OK) g->base.files_crc = gptc_crc32c(gptc_crc32c(0, enc, enc_len), bpe, bpe_len);
done:
    gptc_free(enc);
    gptc_free(bpe);
    if (st != GPTC_OK) {
        gpt2_free(&g->base);
        return st;
    }
    *out = &g->base;
    return GPTC_OK;
}

/* Opens the tokenizer from the two files in dir. */
static gptc_status gpt2_open_dir(const char *dir, gptc_tokenizer **out) {
    char enc_path[PATH_MAX], bpe_path[PATH_MAX];
    snprintf(enc_path, sizeof enc_path, "%s/encoder.json", dir);
    snprintf(bpe_path, sizeof bpe_path, "%s/vocab.bpe", dir);
    return gpt2_open_files(enc_path, bpe_path, out);
}

gptc_status gptc_tokenizer_gpt2_open_files(const char *enc_path, const char *bpe_path, gptc_tokenizer **out) {
    *out = NULL;
    return gpt2_open_files(enc_path, bpe_path, out);
}

/* Whether dir holds encoder.json or vocab.bpe. */
static bool dir_has_vocab(const char *dir) {
    char enc[PATH_MAX + 32], bpe[PATH_MAX + 32];
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
    return access(enc, F_OK) == 0 || access(bpe, F_OK) == 0;
}

gptc_status gptc_tokenizer_gpt2_open(const char *dir, gptc_tokenizer **out) {
    *out = NULL;
    if (dir) return gpt2_open_dir(dir, out);
    char found[PATH_MAX];
    gptc_status st = gptc_tokenizer_gpt2_dir(found, sizeof found);
    return st ? st : gpt2_open_dir(found, out);
}

gptc_status gptc_tokenizer_gpt2_dir(char *dir, size_t cap) {
    /* the lookup order of data.h: $GPTC_VOCAB_DIR, <dir of the binary>/../data/gpt2, ./data/gpt2;
     * the first folder holding either file is the one used (a missing partner is then an error) */
    const char *cand[3]; /* the folders, in order */
    const char *label[3] = {NULL, NULL, NULL}; /* how the message names where a folder came from */
    int nc = 0;
    const char *env = getenv("GPTC_VOCAB_DIR");
    if (env && env[0]) {
        label[nc] = " ($GPTC_VOCAB_DIR)";
        cand[nc++] = env;
    }
    char exe[PATH_MAX], exe_dir[PATH_MAX + 16];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el > 0) {
        exe[el] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(exe_dir, sizeof exe_dir, "%s/../data/gpt2", exe);
            cand[nc++] = exe_dir;
        }
    }
    cand[nc++] = "./data/gpt2";
    char looked[900] = "";
    size_t ll = 0;
    for (int i = 0; i < nc; i++) {
        if (dir_has_vocab(cand[i])) {
            if ((size_t)snprintf(dir, cap, "%s", cand[i]) >= cap)
                return gptc_fail(GPTC_ERR_IO, "tokenizer gpt2: the folder path %s is too long", cand[i]);
            return GPTC_OK;
        }
        if (ll < sizeof looked)
            ll += (size_t)snprintf(looked + ll, sizeof looked - ll, "%s%s%s", i ? ", " : "", cand[i],
                                   label[i] ? label[i] : "");
    }
    return gptc_fail(GPTC_ERR_IO, "tokenizer gpt2: encoder.json and vocab.bpe not found; looked in %s; set "
                     "GPTC_VOCAB_DIR to the folder that holds OpenAI's encoder.json and vocab.bpe", looked);
}
