/* test_prepare.c — `gptc prepare`: the token stream against a reference model of its contract (gptc.h),
 * the same shards for every thread count and chunk size (byte, and gpt2 when its vocab files are
 * there), shard sizes, the val split, document separators, the manifest, refusals, failures and
 * interruptions mid-way, bounded memory, and the CLI. */
#include "test.h"

#include "data/data.h"
#include "io/io.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */


static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Files in dir whose names match pattern (fnmatch; a leading dot must be in the pattern). */
static int count_files(const char *dir, const char *pattern) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (fnmatch(pattern, e->d_name, FNM_PERIOD) == 0 && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The sorted names in dir (without . and ..); *n gets the count. Caller frees each and the array. */
static char **list_dir(const char *dir, int *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **v = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        v = realloc(v, (size_t)(*n + 1) * sizeof *v);
        v[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    if (*n) qsort(v, (size_t)*n, sizeof *v, cmp_str);
    return v;
}

static void free_list(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* True when folders a and b hold the same names with the same bytes. */
static bool same_tree(const char *a, const char *b) {
    int na, nb;
    char **la = list_dir(a, &na), **lb = list_dir(b, &nb);
    bool same = na == nb && na > 0;
    for (int i = 0; same && i < na; i++) {
        char pa[1024], pb[1024], *da = NULL, *db = NULL;
        size_t sa = 0, sb = 0;
        same = strcmp(la[i], lb[i]) == 0 &&
               gptc_file_read_all(test_path(pa, sizeof pa, "%s/%s", a, la[i]), &da, &sa) == GPTC_OK &&
               gptc_file_read_all(test_path(pb, sizeof pb, "%s/%s", b, lb[i]), &db, &sb) == GPTC_OK && sa == sb &&
               memcmp(da, db, sa) == 0;
        if (!same) printf("    %s/%s and %s differ\n", a, la[i], b);
        gptc_free(da);
        gptc_free(db);
    }
    free_list(la, na);
    free_list(lb, nb);
    return same;
}

/* A growing list of token ids. */
typedef struct toks {
    int *v;
    size_t n, cap;
} toks;

static void toks_push(toks *t, int id) {
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 1024;
        t->v = realloc(t->v, t->cap * sizeof *t->v);
    }
    t->v[t->n++] = id;
}

static void toks_free(toks *t) {
    free(t->v);
    memset(t, 0, sizeof *t);
}

static bool toks_equal(const toks *a, const toks *b) {
    if (a->n != b->n) {
        printf("    %zu tokens vs %zu\n", a->n, b->n);
        return false;
    }
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i] != b->v[i]) {
            printf("    token %zu: %d vs %d\n", i, a->v[i], b->v[i]);
            return false;
        }
    return true;
}

/* Appends the tokens of a prepared split (shards in order) to *out; returns the shard count
 * (0: none, -1: a bad shard). */
static int read_split(const char *dir, bool val, toks *out) {
    char **paths = NULL;
    int np = 0;
    if (gptc_data_resolve(dir, val, &paths, &np) != GPTC_OK) return 0;
    for (int i = 0; i < np; i++) {
        gptc_shard s;
        if (gptc_shard_open(&s, paths[i]) != GPTC_OK) {
            gptc_paths_free(paths, np);
            return -1;
        }
        for (size_t k = 0; k < s.ntok; k++) toks_push(out, s.tokens[k]);
        gptc_shard_close(&s);
    }
    gptc_paths_free(paths, np);
    return np;
}

/* Writes n files NAME_i.txt into dir; paths[i] gets their paths (static storage per call site). */
static void write_inputs(const char *dir, const char *name, const char *const *texts, const size_t *lens, int n,
                         char paths[][600]) {
    for (int i = 0; i < n; i++) test_write_file(test_path(paths[i], 600, "%s/%s_%d.txt", dir, name, i), texts[i], lens[i]);
}

/* ---------------------------------------------------------------- the reference model */

static bool ref_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* gptc.h's safe cut, written again from its definition. */
static bool ref_safe(const unsigned char *t, size_t p) { return p > 0 && t[p] == ' ' && t[p - 1] < 0x80 && !ref_space(t[p - 1]); }

typedef struct ref_doc {
    uint64_t start; /* in the concatenation */
    const unsigned char *text;
    size_t len;
} ref_doc;

/* The expected train and val streams for inputs texts[0..n) under gptc.h's contract: documents
 * (split at sep, empties dropped), the val split at the first cut point at or after
 * ceil(total × (1 − f)), end-of-text before each document. Pieces are encoded with tok. Returns
 * the val start (total: none) and the document count in *docs. Assumes no forced cuts (every
 * document has a safe cut at least every 32 chunks). */
static uint64_t ref_stream(const gptc_tokenizer *tok, const char *const *texts, const size_t *lens, int n,
                           const char *sep, float f, toks *train, toks *val, uint64_t *docs) {
    size_t seplen = sep ? strlen(sep) : 0;
    ref_doc *d = NULL;
    int nd = 0;
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const unsigned char *t = (const unsigned char *)texts[i];
        size_t pos = 0;
        for (;;) {
            const unsigned char *q = seplen ? memmem(t + pos, lens[i] - pos, sep, seplen) : NULL;
            size_t end = q ? (size_t)(q - t) : lens[i];
            if (end > pos) {
                d = realloc(d, (size_t)(nd + 1) * sizeof *d);
                d[nd++] = (ref_doc){off + pos, t + pos, end - pos};
            }
            if (!q) break;
            pos = end + seplen;
        }
        off += lens[i];
    }
    uint64_t total = off;
    double at = ceil((double)total * (1.0 - (double)f));
    uint64_t x = at >= (double)total ? total : (uint64_t)at, vstart = total;
    for (int i = 0; i < nd && vstart == total; i++) {
        if (d[i].start >= x) {
            vstart = d[i].start;
            break;
        }
        for (size_t p = 1; p < d[i].len; p++)
            if (d[i].start + p >= x && ref_safe(d[i].text, p)) {
                vstart = d[i].start + p;
                break;
            }
    }
    int *ids = NULL;
    size_t nid = 0, cap = 0;
    for (int i = 0; i < nd; i++) {
        toks *dst = d[i].start >= vstart ? val : train;
        toks_push(dst, tok->eot);
        size_t cut = d[i].start < vstart && vstart < d[i].start + d[i].len ? (size_t)(vstart - d[i].start) : d[i].len;
        for (int part = 0; part < 2; part++) {
            const unsigned char *p = part ? d[i].text + cut : d[i].text;
            size_t len = part ? d[i].len - cut : cut;
            if (!len) continue;
            nid = 0;
            if (tok->encode(tok, NULL, (const char *)p, len, false, &ids, &nid, &cap) != GPTC_OK) abort();
            for (size_t k = 0; k < nid; k++) toks_push(part ? val : dst, ids[k]);
        }
    }
    free(ids);
    free(d);
    *docs = (uint64_t)nd;
    return vstart;
}

/* Every document encoded whole, each after an end-of-text (what train ++ val must equal). */
static void whole_stream(const gptc_tokenizer *tok, const char *const *texts, const size_t *lens, int n,
                         const char *sep, toks *out) {
    size_t seplen = sep ? strlen(sep) : 0;
    int *ids = NULL;
    size_t nid = 0, cap = 0;
    for (int i = 0; i < n; i++) {
        const char *t = texts[i];
        size_t pos = 0;
        for (;;) {
            const char *q = seplen ? memmem(t + pos, lens[i] - pos, sep, seplen) : NULL;
            size_t end = q ? (size_t)(q - t) : lens[i];
            if (end > pos) {
                toks_push(out, tok->eot);
                nid = 0;
                if (tok->encode(tok, NULL, t + pos, end - pos, false, &ids, &nid, &cap) != GPTC_OK) abort();
                for (size_t k = 0; k < nid; k++) toks_push(out, ids[k]);
            }
            if (!q) break;
            pos = end + seplen;
        }
    }
    free(ids);
}

/* ---------------------------------------------------------------- generated text */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* len bytes of text-like bytes: words, numbers, punctuation, contractions, runs of whitespace,
 * UTF-8, an "<|endoftext|>", a stray invalid byte; a safe cut at least every few words. */
static char *gen_text(uint64_t seed, size_t len) {
    static const char *const pieces[] = {
        "the", "quick", "brown", "fox", "don't", "I'll", "we've", "it's", "1,000", "3.14", "42", "!!", "?", "...",
        "(x)", "\n", "\n\n", "  ", "\t", " \n", "<|endoftext|>", "\xc3\xa9t\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
        "\xf0\x9f\x98\x80", "'s", "--", "\r\n", "ab'", "'", "\xff", "x1y2", "   spaced", "END.", "\"quoted\"",
    };
    const size_t np = sizeof pieces / sizeof pieces[0];
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    char *t = malloc(len + 64);
    size_t n = 0;
    while (n < len) {
        const char *p = pieces[rng_next(&s) % np];
        size_t k = strlen(p);
        memcpy(t + n, p, k);
        n += k;
        if (rng_next(&s) % 8) t[n++] = ' ';
        if (rng_next(&s) % 4 == 0) { /* a plain word: keeps safe cuts frequent */
            memcpy(t + n, "word ", 5);
            n += 5;
        }
    }
    return t; /* only the first len bytes are used */
}

/* ---------------------------------------------------------------- a run */

typedef struct run {
    const char *tokenizer;
    const void *impl;
    int threads;
    size_t chunk;
    long shard_tokens;
    float f;
    const char *sep;
} run;

static gptc_status do_prepare(const run *r, char paths[][600], int n, const char *out, gptc_prepare_result *res) {
    const char *inputs[16];
    for (int i = 0; i < n; i++) inputs[i] = paths[i];
    gptc_prepare_options o;
    gptc_prepare_options_default(&o);
    o.tokenizer = r->tokenizer ? r->tokenizer : "byte";
    o.inputs = inputs;
    o.ninputs = n;
    o.out = out;
    o.val_fraction = r->f;
    o.shard_tokens = r->shard_tokens ? r->shard_tokens : 100000000;
    o.threads = r->threads;
    o.doc_separator = r->sep;
    gptc_prepare_test_knobs k = {.chunk_bytes = r->chunk, .tokenizer = r->impl};
    return gptc_prepare_run_knobs(&o, &k, res);
}

/* Prepares texts with r and checks the shards against the reference model. */
static void check_against_ref(const gptc_tokenizer *tok, const run *r, const char *const *texts, const size_t *lens,
                              int n, char paths[][600], const char *out) {
    gptc_prepare_result res;
    CHECK_OK(do_prepare(r, paths, n, out, &res));
    toks wt = {0}, wv = {0}, gt = {0}, gv = {0};
    uint64_t docs = 0, vstart = ref_stream(tok, texts, lens, n, r->sep, r->f, &wt, &wv, &docs);
    int nt = read_split(out, false, &gt), nv = read_split(out, true, &gv);
    CHECK_MSG(toks_equal(&gt, &wt), "train differs (threads %d, chunk %zu, f %g)", r->threads, r->chunk, (double)r->f);
    CHECK_MSG(toks_equal(&gv, &wv), "val differs (threads %d, chunk %zu, f %g)", r->threads, r->chunk, (double)r->f);
    CHECK_EQ_INT(res.train_tokens, wt.n);
    CHECK_EQ_INT(res.val_tokens, wv.n);
    CHECK_EQ_INT(res.val_start, vstart);
    CHECK_EQ_INT(res.documents, docs);
    CHECK_EQ_INT(res.train_shards, nt);
    CHECK_EQ_INT(res.val_shards, nv);
    size_t per = (size_t)(r->shard_tokens ? r->shard_tokens : 100000000);
    CHECK_EQ_INT(nt, (wt.n + per - 1) / per);
    CHECK_EQ_INT(nv, (wv.n + per - 1) / per);
    toks_free(&wt);
    toks_free(&wv);
    toks_free(&gt);
    toks_free(&gv);
}

/* ---------------------------------------------------------------- tests */

TEST(prepare_stream) {
    char dir[512], paths[2][600], out[600];
    test_dir("prep_", "stream", dir, sizeof dir);
    const char *t1 = "hello world\n", *t2 = "abc<|endoftext|>\xff\x00z";
    const char *texts[2] = {t1, t2};
    size_t lens[2] = {strlen(t1), 19};
    write_inputs(dir, "in", texts, lens, 2, paths);
    test_path(out, sizeof out, "%s/out/nested", dir);

    gptc_prepare_options o;
    gptc_prepare_options_default(&o);
    CHECK(strcmp(o.tokenizer, "byte") == 0);
    CHECK_NEAR(o.val_fraction, 0.1, 1e-7);
    CHECK_EQ_INT(o.shard_tokens, 100000000);
    CHECK_EQ_INT(o.threads, 0);
    CHECK(o.doc_separator == NULL && o.progress == NULL);

    /* no val split: the whole stream is eot one eot two, in shards of 7 */
    run r = {.threads = 2, .shard_tokens = 7, .f = 0};
    gptc_prepare_result res;
    CHECK_OK(do_prepare(&r, paths, 2, out, &res));
    toks got = {0};
    CHECK_EQ_INT(read_split(out, false, &got), 5); /* 33 = 7+7+7+7+5 */
    CHECK_EQ_INT(got.n, 33);
    const unsigned char *u1 = (const unsigned char *)t1, *u2 = (const unsigned char *)t2;
    size_t k = 0;
    CHECK(got.n == 33 && got.v[k++] == 256);
    for (size_t i = 0; i < lens[0] && k < got.n; i++) CHECK_EQ_INT(got.v[k++], u1[i]);
    CHECK(k < got.n && got.v[k++] == 256);
    for (size_t i = 0; i < lens[1] && k < got.n; i++) CHECK_EQ_INT(got.v[k++], u2[i]);
    CHECK_EQ_INT(res.train_tokens, 33);
    CHECK_EQ_INT(res.val_tokens, 0);
    CHECK_EQ_INT(res.train_shards, 5);
    CHECK_EQ_INT(res.val_shards, 0);
    CHECK_EQ_INT(res.documents, 2);
    CHECK_EQ_INT(res.input_bytes, 31);
    CHECK_EQ_INT(res.val_start, 31);
    CHECK_EQ_INT(res.threads, 2);
    CHECK_EQ_INT(count_files(out, ".*"), 0); /* no temp files left */
    toks empty = {0};
    CHECK_EQ_INT(read_split(out, true, &empty), 0);

    /* the loader reads the prepared folder with the tokenizer's vocabulary */
    gptc_data_meta m;
    bool found = false;
    CHECK_OK(gptc_data_meta_read(out, &m, &found));
    CHECK(found && strcmp(m.tokenizer, "byte") == 0 && m.vocab == 257 && m.eot == 256);
    CHECK(m.has_vocab_crc && m.vocab_crc == 0);
    char **lp = NULL;
    int np = 0;
    CHECK_OK(gptc_data_resolve(out, false, &lp, &np));
    gptc_loader l;
    CHECK_OK(gptc_loader_open(&l, lp, np, 1, 4, m.vocab, true, 1, 0, 1));
    int in[4], tg[4];
    for (int i = 0; i < 3; i++) CHECK_OK(gptc_loader_next(&l, in, tg));
    gptc_loader_close(&l);
    gptc_paths_free(lp, np);

    /* a second run into the same folder replaces the data set: no stale shards stay (and the
     * compact entry point reports the counts) */
    const char *inputs[2] = {paths[0], paths[1]};
    gptc_prepare_options_default(&o);
    o.inputs = inputs;
    o.ninputs = 2;
    o.out = out;
    o.val_fraction = 0;
    size_t ntrain = 0, nval = 9;
    CHECK_OK(gptc_prepare(&o, &ntrain, &nval));
    CHECK(ntrain == 33 && nval == 0);
    CHECK_EQ_INT(count_files(out, "train_*.bin"), 1);
    toks again = {0};
    CHECK_EQ_INT(read_split(out, false, &again), 1);
    CHECK(toks_equal(&again, &got));
    toks_free(&got);
    toks_free(&again);
}

TEST(prepare_val_split) {
    char dir[512], paths[2][600], out[600];
    test_dir("prep_", "val", dir, sizeof dir);
    test_path(out, sizeof out, "%s/out", dir);
    const char *texts[2] = {"aaaa bbbb", "cccc dddd"};
    size_t lens[2] = {9, 9};
    write_inputs(dir, "in", texts, lens, 2, paths);
    gptc_tokenizer *byte = NULL;
    CHECK_OK(gptc_tokenizer_open("bytes", &byte));
    if (!byte) return;
    struct {
        float f;
        uint64_t val_start;
        size_t ntrain, nval;
    } cases[] = {
        {0.5f, 9, 10, 10},  /* byte 9 starts file 2: its eot goes to val */
        {0.4f, 13, 15, 5},  /* byte ceil(10.8) = 11 is inside "cccc": val starts at the space at 13 */
        {0.1f, 18, 20, 0},  /* no cut point at or after byte 17: no val split */
        {0.9f, 4, 5, 15},   /* byte 2: the first cut is the space at 4 */
        {0.0f, 18, 20, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run r = {.threads = 3, .f = cases[i].f, .chunk = 2};
        gptc_prepare_result res;
        CHECK_OK(do_prepare(&r, paths, 2, out, &res));
        CHECK_MSG(res.val_start == cases[i].val_start, "f %g: val starts at %llu", (double)cases[i].f,
                  (unsigned long long)res.val_start);
        CHECK_EQ_INT(res.train_tokens, cases[i].ntrain);
        CHECK_EQ_INT(res.val_tokens, cases[i].nval);
        CHECK_EQ_INT(count_files(out, "val_*.bin"), cases[i].nval ? 1 : 0);
        check_against_ref(byte, &r, texts, lens, 2, paths, out);
    }
    /* with a separator the val split can start at a document inside a file */
    const char *one[1] = {"aa bb||cc dd"};
    size_t onelen[1] = {12};
    write_inputs(dir, "sep", one, onelen, 1, paths);
    run r = {.threads = 2, .f = 0.5f, .sep = "||"};
    gptc_prepare_result res;
    CHECK_OK(do_prepare(&r, paths, 1, out, &res));
    CHECK_EQ_INT(res.val_start, 7); /* byte 6 is inside the separator */
    CHECK_EQ_INT(res.train_tokens, 6);
    CHECK_EQ_INT(res.val_tokens, 6);
    CHECK_EQ_INT(res.documents, 2);
    toks v = {0};
    read_split(out, true, &v);
    CHECK(v.n == 6 && v.v[0] == 256 && v.v[1] == 'c' && v.v[5] == 'd');
    toks_free(&v);
    /* everything in val is refused: a data set needs train tokens (here the first file holds only a
     * separator, and byte 1 falls before the first document) */
    r.f = 0.9f;
    const char *tiny[2] = {"||", "ab"};
    size_t tinylen[2] = {2, 2};
    write_inputs(dir, "tiny", tiny, tinylen, 2, paths);
    CHECK_EQ_INT(do_prepare(&r, paths, 2, out, &res), GPTC_ERR_ARG);
    CHECK(strstr(gptc_last_error(), "no train tokens") != NULL);
    gptc_tokenizer_free(byte);
}

TEST(prepare_doc_separator) {
    char dir[512], paths[3][600], out[600];
    test_dir("prep_", "sep", dir, sizeof dir);
    test_path(out, sizeof out, "%s/out", dir);
    /* separators at the start, the end, back to back and across files */
    const char *texts[3] = {"\n\nab cd\n\nef\n\n\n\n\n\ngh\n\n", "ij\n\n\nkl", "\n\n"};
    size_t lens[3] = {strlen(texts[0]), strlen(texts[1]), 2};
    write_inputs(dir, "in", texts, lens, 3, paths);
    run r = {.threads = 2, .f = 0, .sep = "\n\n", .chunk = 1};
    gptc_prepare_result res;
    CHECK_OK(do_prepare(&r, paths, 3, out, &res));
    toks got = {0};
    read_split(out, false, &got);
    const char *want = "|ab cd|ef|gh|ij|\nkl"; /* '|' stands for eot */
    CHECK_EQ_INT(got.n, strlen(want));
    for (size_t i = 0; i < got.n && i < strlen(want); i++) CHECK_EQ_INT(got.v[i], want[i] == '|' ? 256 : want[i]);
    CHECK_EQ_INT(res.documents, 5);
    toks_free(&got);

    /* separators that straddle the 64 KiB read blocks, in a long file, against the reference */
    size_t big = 200000;
    char *t = gen_text(7, big);
    const char *sep = "<SEP>";
    size_t at[] = {10, 65533, 65536 + 2, 131070, 131072 - 5, 196608 - 1, big - 5};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) memcpy(t + at[i], sep, 5);
    const char *bt[1] = {t};
    size_t bl[1] = {big};
    write_inputs(dir, "big", bt, bl, 1, paths);
    gptc_tokenizer *byte = NULL;
    CHECK_OK(gptc_tokenizer_open("byte", &byte));
    size_t chunks[] = {1000, 70000, 0};
    for (size_t c = 0; byte && c < 3; c++) {
        run rb = {.threads = 3, .f = 0.3f, .sep = sep, .chunk = chunks[c], .shard_tokens = 50000};
        check_against_ref(byte, &rb, bt, bl, 1, paths, out);
    }
    /* inputs that hold only separators give no text */
    const char *only[1] = {"<SEP><SEP>"};
    size_t onlylen[1] = {10};
    write_inputs(dir, "only", only, onlylen, 1, paths);
    run ro = {.sep = sep};
    test_path(out, sizeof out, "%s/out_only", dir);
    CHECK_EQ_INT(do_prepare(&ro, paths, 1, out, &res), GPTC_ERR_ARG);
    CHECK(strstr(gptc_last_error(), "no text") != NULL);
    CHECK(!exists(out));
    free(t);
    gptc_tokenizer_free(byte);
}

/* Random inputs, separators, fractions, chunk and shard sizes: the shards always match the model. */
TEST(prepare_random_vs_reference) {
    char dir[512], paths[4][600], out[600];
    test_dir("prep_", "random", dir, sizeof dir);
    test_path(out, sizeof out, "%s/out", dir);
    gptc_tokenizer *byte = NULL;
    CHECK_OK(gptc_tokenizer_open("byte", &byte));
    if (!byte) return;
    uint64_t s = 12345;
    const char *seps[] = {NULL, "\n\n", "x", "<|endoftext|>", " "};
    for (int c = 0; c < 24; c++) {
        int n = 1 + (int)(rng_next(&s) % 4);
        char *texts[4];
        size_t lens[4];
        for (int i = 0; i < n; i++) {
            lens[i] = 1 + rng_next(&s) % 3000;
            texts[i] = gen_text(rng_next(&s), lens[i]);
        }
        write_inputs(dir, "in", (const char *const *)texts, lens, n, paths);
        run r = {.threads = 1 + (int)(rng_next(&s) % 4),
                 .chunk = 4 + rng_next(&s) % 300,
                 .shard_tokens = 1 + (long)(rng_next(&s) % 3000),
                 .f = (float)(rng_next(&s) % 100) / 100.0f,
                 .sep = seps[rng_next(&s) % 5]};
        gptc_prepare_result res;
        gptc_status st = do_prepare(&r, paths, n, out, &res);
        if (st == GPTC_ERR_ARG) { /* the separator ate everything, or val took it all */
            CHECK(strstr(gptc_last_error(), "no text") || strstr(gptc_last_error(), "no train tokens"));
        } else {
            check_against_ref(byte, &r, (const char *const *)texts, lens, n, paths, out);
        }
        for (int i = 0; i < n; i++) free(texts[i]);
    }
    gptc_tokenizer_free(byte);
}

/* Prepares the same inputs with threads 1..4 and several chunk sizes: identical folders, equal to
 * the reference and to every document encoded whole. */
static void check_thread_invariance(const char *tokname, const char *tag, const char *const *texts,
                                    const size_t *lens, int n, const char *sep) {
    char dir[512], paths[4][600], first[600], out[600];
    test_dir("prep_", tag, dir, sizeof dir);
    write_inputs(dir, "in", texts, lens, n, paths);
    gptc_tokenizer *tok = NULL;
    CHECK_OK(gptc_tokenizer_open(tokname, &tok));
    if (!tok) return;
    toks whole = {0};
    whole_stream(tok, texts, lens, n, sep, &whole);
    size_t chunks[] = {0, 1000, 13, 5}; /* 5: forced cuts come after 160 bytes without a safe cut: rare here */
    int runs = 0;
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        for (int threads = 1; threads <= 4; threads++) {
            if (chunks[c] == 5 && threads != 3) continue; /* tiny chunks are slow under gpt2: one run */
            run r = {.tokenizer = tokname, .threads = threads, .chunk = chunks[c], .shard_tokens = 20000,
                     .f = 0.2f, .sep = sep};
            if (runs == 0) {
                test_path(first, sizeof first, "%s/out_first", dir);
                check_against_ref(tok, &r, texts, lens, n, paths, first);
                toks all = {0};
                read_split(first, false, &all);
                read_split(first, true, &all);
                CHECK_MSG(toks_equal(&all, &whole), "%s: the shards differ from encoding each document whole", tokname);
                toks_free(&all);
            } else {
                test_path(out, sizeof out, "%s/out_%zu_%d", dir, chunks[c], threads);
                gptc_prepare_result res;
                CHECK_OK(do_prepare(&r, paths, n, out, &res));
                CHECK_MSG(same_tree(first, out), "%s: chunk %zu, %d threads differ from the first run", tokname,
                          chunks[c], threads);
            }
            runs++;
        }
    }
    toks_free(&whole);
    gptc_tokenizer_free(tok);
}

TEST(prepare_threads_byte) {
    char *texts[3];
    size_t lens[3] = {90000, 5, 40000};
    for (int i = 0; i < 3; i++) texts[i] = gen_text(100 + (uint64_t)i, lens[i]);
    check_thread_invariance("byte", "threads_byte", (const char *const *)texts, lens, 3, NULL);
    check_thread_invariance("byte", "threads_byte_sep", (const char *const *)texts, lens, 3, "\n\n");
    for (int i = 0; i < 3; i++) free(texts[i]);
}

/* gpt2 when its vocabulary files are found: chunked encoding equals whole-document encoding. */
static gptc_tokenizer *gpt2_or_skip(const char *test) {
    gptc_tokenizer *t = NULL;
    if (gptc_tokenizer_open("gpt2", &t) != GPTC_OK) {
        printf("    %s: skipped gpt2 (%s)\n", test, gptc_last_error());
        return NULL;
    }
    return t;
}

TEST(prepare_threads_gpt2) {
    gptc_tokenizer *t = gpt2_or_skip("prepare_threads_gpt2");
    if (!t) return;
    gptc_tokenizer_free(t);
    char *shake = NULL;
    size_t slen = 0;
    CHECK_OK(gptc_file_read_all("data/tinyshakespeare.txt", &shake, &slen));
    if (!shake) return;
    char *gen = gen_text(5, 60000);
    const char *texts[2] = {shake, gen};
    size_t lens[2] = {slen < 60000 ? slen : 60000, 60000};
    check_thread_invariance("gpt2", "threads_gpt2", texts, lens, 2, NULL);
    check_thread_invariance("gpt2", "threads_gpt2_sep", texts, lens, 2, "\n\n");
    gptc_free(shake);
    free(gen);
}

/* The safe-cut rule itself: with gpt2, encoding the two sides of any safe cut equals encoding the
 * whole text (every safe cut of a text full of edge cases). */
TEST(prepare_safe_cut_gpt2) {
    unsigned char t[] = "a b\tc d\n e  f's g' h 1 2 \xc3\xa9 x";
    CHECK(gptc_prep_safe_cut(t, 1));   /* "a| b" */
    CHECK(!gptc_prep_safe_cut(t, 0));  /* the start is not a cut */
    CHECK(!gptc_prep_safe_cut(t, 2));  /* not a space */
    CHECK(!gptc_prep_safe_cut(t, 8));  /* "\n| e": after whitespace */
    CHECK(!gptc_prep_safe_cut(t, 11)); /* "e |f": after a space */
    CHECK(gptc_prep_safe_cut(t, 15));  /* "f's| g" */
    CHECK(!gptc_prep_safe_cut(t, 27)); /* after a UTF-8 byte */
    gptc_tokenizer *tok = gpt2_or_skip("prepare_safe_cut_gpt2");
    if (!tok) return;
    size_t len = 20000;
    char *text = gen_text(11, len);
    int *whole = NULL, *ids = NULL;
    size_t nw = 0, cw = 0, ni = 0, ci = 0;
    CHECK_OK(tok->encode(tok, NULL, text, len, false, &whole, &nw, &cw));
    int cuts = 0, bad = 0;
    for (size_t p = 1; p < len; p++) {
        if (!gptc_prep_safe_cut((const unsigned char *)text, p) || p % 7) continue; /* a sample of them */
        ni = 0;
        CHECK_OK(tok->encode(tok, NULL, text, p, false, &ids, &ni, &ci));
        CHECK_OK(tok->encode(tok, NULL, text + p, len - p, false, &ids, &ni, &ci));
        bool same = ni == nw && memcmp(ids, whole, nw * sizeof *ids) == 0;
        if (!same && bad++ < 3) printf("    cut at %zu changes the tokens\n", p);
        cuts++;
    }
    CHECK(cuts > 100);
    CHECK_EQ_INT(bad, 0);
    free(whole);
    free(ids);
    free(text);
    gptc_tokenizer_free(tok);
}

TEST(prepare_manifest) {
    char dir[512], paths[2][600], out[600], mpath[700];
    test_dir("prep_", "manifest", dir, sizeof dir);
    test_path(out, sizeof out, "%s/out", dir);
    const char *texts[2] = {"one two three four five", "six seven eight"};
    size_t lens[2] = {23, 15};
    write_inputs(dir, "in", texts, lens, 2, paths);
    run r = {.threads = 2, .f = 0.3f, .shard_tokens = 10};
    gptc_prepare_result res;
    CHECK_OK(do_prepare(&r, paths, 2, out, &res));
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(gptc_file_read_all(test_path(mpath, sizeof mpath, "%s/meta.json", out), &text, &len));
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK(root != NULL);
    if (!root) return;
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(root, "tokenizer")), "byte") == 0);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "vocab")) == 257);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "eot")) == 256);
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(root, "vocab_crc32c")), "00000000") == 0);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "train_tokens")) == (double)res.train_tokens);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "val_tokens")) == (double)res.val_tokens);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "input_bytes")) == 38);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "documents")) == 2);
    CHECK_EQ_INT(res.train_tokens + res.val_tokens, 40);
    const cJSON *shards = cJSON_GetObjectItem(root, "shards");
    CHECK(cJSON_IsArray(shards));
    int ns = cJSON_GetArraySize(shards), ntrain = 0, nval = 0;
    CHECK_EQ_INT(ns, res.train_shards + res.val_shards);
    uint64_t sum[2] = {0, 0};
    for (int i = 0; i < ns; i++) {
        const cJSON *e = cJSON_GetArrayItem(shards, i);
        const char *file = cJSON_GetStringValue(cJSON_GetObjectItem(e, "file"));
        const char *split = cJSON_GetStringValue(cJSON_GetObjectItem(e, "split"));
        double tokens = cJSON_GetNumberValue(cJSON_GetObjectItem(e, "tokens"));
        if (!file || !split) {
            CHECK(false);
            continue;
        }
        bool val = strcmp(split, "val") == 0;
        char want[64], spath[800];
        snprintf(want, sizeof want, "%s_%06d.bin", split, val ? nval++ : ntrain++);
        CHECK_MSG(strcmp(file, want) == 0, "shard %d is %s, expected %s", i, file, want);
        gptc_shard s;
        CHECK_OK(gptc_shard_open(&s, test_path(spath, sizeof spath, "%s/%s", out, file)));
        CHECK(s.ntok == (size_t)tokens && tokens <= 10);
        gptc_shard_close(&s);
        sum[val] += (uint64_t)tokens;
    }
    CHECK_EQ_INT(ntrain, res.train_shards);
    CHECK_EQ_INT(nval, res.val_shards);
    CHECK_EQ_INT(sum[0], res.train_tokens);
    CHECK_EQ_INT(sum[1], res.val_tokens);
    cJSON_Delete(root);
    gptc_free(text);

    /* the reader: the checksum when there, older manifests without it, a malformed one refused */
    gptc_data_meta m;
    bool found = false;
    CHECK_OK(gptc_data_meta_read(out, &m, &found));
    CHECK(found && m.has_vocab_crc && m.vocab_crc == 0 && m.vocab == 257);
    const char *old = "{\"tokenizer\": \"byte\", \"vocab\": 257, \"eot\": 256, \"train_tokens\": 9, \"val_tokens\": 1}\n";
    test_write_file(mpath, old, strlen(old));
    CHECK_OK(gptc_data_meta_read(out, &m, &found));
    CHECK(found && !m.has_vocab_crc && m.vocab == 257);
    const char *crc = "{\"tokenizer\": \"gpt2\", \"vocab\": 50257, \"eot\": 50256, \"vocab_crc32c\": \"DEADbeef\"}";
    test_write_file(mpath, crc, strlen(crc));
    CHECK_OK(gptc_data_meta_read(out, &m, &found));
    CHECK(found && m.has_vocab_crc && m.vocab_crc == 0xdeadbeefu);
    const char *bad[] = {"{\"tokenizer\": \"byte\", \"vocab\": 257, \"eot\": 256, \"vocab_crc32c\": \"xyz\"}",
                         "{\"tokenizer\": \"byte\", \"vocab\": 257, \"eot\": 256, \"vocab_crc32c\": 5}",
                         "{\"tokenizer\": \"byte\", \"vocab\": 257, \"eot\": 256, \"vocab_crc32c\": \"123456789\"}"};
    for (int i = 0; i < 3; i++) {
        test_write_file(mpath, bad[i], strlen(bad[i]));
        CHECK_EQ_INT(gptc_data_meta_read(out, &m, &found), GPTC_ERR_FORMAT);
        CHECK(!found && strstr(gptc_last_error(), "vocab_crc32c") != NULL);
    }

    /* gpt2's manifest names its vocabulary checksum */
    gptc_tokenizer *g = gpt2_or_skip("prepare_manifest");
    if (!g) return;
    run rg = {.tokenizer = "gpt2", .threads = 2, .f = 0.3f};
    CHECK_OK(do_prepare(&rg, paths, 2, out, &res));
    CHECK_OK(gptc_data_meta_read(out, &m, &found));
    CHECK(found && strcmp(m.tokenizer, "gpt2") == 0 && m.vocab == 50257 && m.eot == 50256);
    CHECK(m.has_vocab_crc && m.vocab_crc == g->files_crc && g->files_crc != 0);
    gptc_tokenizer_free(g);
}

/* ---------------------------------------------------------------- refusals and failures */

static void expect_refusal(const gptc_prepare_options *o, gptc_status want, const char *word, const char *out) {
    gptc_prepare_result res;
    res.train_tokens = 99;
    gptc_status st = gptc_prepare_run(o, &res);
    CHECK_MSG(st == want, "status %s, expected %s (%s)", gptc_status_name(st), gptc_status_name(want),
              gptc_last_error());
    CHECK_MSG(strstr(gptc_last_error(), word) != NULL, "error lacks \"%s\": %s", word, gptc_last_error());
    CHECK(res.train_tokens == 0 && res.val_tokens == 0 && !res.output_started);
    CHECK_MSG(!exists(out), "%s was created", out);
}

TEST(prepare_refusals) {
    char dir[512], good[600], empty[600], missing[600], out[600], under[700];
    test_dir("prep_", "bad", dir, sizeof dir);
    test_write_file(test_path(good, sizeof good, "%s/good.txt", dir), "text", 4);
    test_write_file(test_path(empty, sizeof empty, "%s/empty.txt", dir), "", 0);
    test_path(missing, sizeof missing, "%s/missing.txt", dir);
    test_path(out, sizeof out, "%s/out", dir);

    gptc_prepare_options o;
    gptc_prepare_options_default(&o);
    const char *inputs[2] = {good, missing};
    o.inputs = inputs;
    o.ninputs = 2;
    o.out = out;
    expect_refusal(&o, GPTC_ERR_IO, missing, out);
    inputs[1] = empty;
    expect_refusal(&o, GPTC_ERR_ARG, "empty.txt: empty; nothing to tokenize", out);
    inputs[1] = dir;
    expect_refusal(&o, GPTC_ERR_IO, "not a regular file", out);
    CHECK(strstr(gptc_last_error(), dir) != NULL);
    inputs[1] = good;
    o.tokenizer = "nope";
    expect_refusal(&o, GPTC_ERR_ARG, "--tokenizer nope: unknown", out);
    o.tokenizer = "byte";
    o.val_fraction = 1.0f;
    expect_refusal(&o, GPTC_ERR_ARG, "'val_fraction'", out);
    o.val_fraction = NAN;
    expect_refusal(&o, GPTC_ERR_ARG, "'val_fraction'", out);
    o.val_fraction = 0.1f;
    o.shard_tokens = 0;
    expect_refusal(&o, GPTC_ERR_ARG, "'shard_tokens'", out);
    o.shard_tokens = 100;
    o.threads = -1;
    expect_refusal(&o, GPTC_ERR_ARG, "'threads'", out);
    o.threads = 0;
    o.ninputs = 0;
    expect_refusal(&o, GPTC_ERR_ARG, "no input files", out);
    o.ninputs = 2;
    o.out = NULL;
    expect_refusal(&o, GPTC_ERR_ARG, "'out': missing", out);
    o.out = good; /* a file, not a folder */
    expect_refusal(&o, GPTC_ERR_ARG, "not a folder", out);
    o.out = test_path(under, sizeof under, "%s/sub/dir", good); /* a folder under a file */
    expect_refusal(&o, GPTC_ERR_ARG, "good.txt exists and is not a folder", out);
    CHECK(exists(good));

    /* a refusal leaves an earlier data set alone */
    o.out = out;
    gptc_prepare_result res;
    CHECK_OK(gptc_prepare_run(&o, &res));
    CHECK_EQ_INT(res.train_tokens + res.val_tokens, 10);
    char keep[600];
    test_path(keep, sizeof keep, "%s/keep", dir);
    CHECK_OK(gptc_prepare_run(&(gptc_prepare_options){.tokenizer = "byte", .inputs = inputs, .ninputs = 2, .out = keep,
                                                  .val_fraction = 0.1f, .shard_tokens = 100},
                          &res));
    inputs[1] = missing;
    CHECK_EQ_INT(gptc_prepare_run(&o, &res), GPTC_ERR_IO);
    CHECK(same_tree(out, keep));
}

/* A tokenizer for failure tests: bytes like "byte", but "BOOM" fails to encode and "BIG" yields
 * the id 70000. */
static gptc_status fake_encode(const gptc_tokenizer *t, gptc_tok_state *s, const char *text, size_t len,
                               bool allow_special, int **ids, size_t *n, size_t *cap) {
    if (memmem(text, len, "BOOM", 4)) return gptc_fail(GPTC_ERR_FORMAT, "fake tokenizer: cannot encode BOOM");
    if (*n + len + 1 > *cap) {
        *cap = (*n + len + 1) * 2;
        *ids = realloc(*ids, *cap * sizeof **ids);
    }
    for (size_t i = 0; i < len; i++) (*ids)[(*n)++] = (unsigned char)text[i];
    if (memmem(text, len, "BIG", 3)) (*ids)[(*n)++] = 70000;
    return GPTC_OK;
}
static gptc_status fake_state_new(const gptc_tokenizer *t, gptc_tok_state **out) {
    *out = NULL;
    return GPTC_OK;
}
static void fake_state_free(gptc_tok_state *s) {}

TEST(prepare_bad_ids) {
    char dir[512], paths[2][600], out[600];
    test_dir("prep_", "ids", dir, sizeof dir);
    test_path(out, sizeof out, "%s/out", dir);
    gptc_tokenizer fake = {.name = "fake", .vocab = 257, .eot = 256, .files_crc = 0xdeadbeefu,
                           .state_new = fake_state_new, .state_free = fake_state_free, .encode = fake_encode};
    char *t = gen_text(3, 50000);
    const char *texts[2] = {t, t};
    size_t lens[2] = {50000, 50000};
    memcpy(t + 30000, "word BOOM ", 10);
    write_inputs(dir, "boom", texts, lens, 2, paths);
    run r = {.impl = &fake, .threads = 4, .chunk = 500, .shard_tokens = 1000};
    gptc_prepare_result res;
    /* a worker thread's failure comes back with its message, naming the file */
    CHECK_EQ_INT(do_prepare(&r, paths, 2, out, &res), GPTC_ERR_FORMAT);
    CHECK(strstr(gptc_last_error(), "cannot encode BOOM") && strstr(gptc_last_error(), paths[0]));
    CHECK(res.output_started); /* the shards before it were being written ... */
    CHECK(!exists(out));       /* ... and are gone, with the folder the run made */

    memcpy(t + 30000, "word BIG  ", 10);
    write_inputs(dir, "big", texts, lens, 2, paths);
    CHECK_EQ_INT(do_prepare(&r, paths, 2, out, &res), GPTC_ERR_FORMAT);
    CHECK(strstr(gptc_last_error(), "70000 does not fit") && strstr(gptc_last_error(), paths[0]));
    CHECK(!exists(out));

    fake.vocab = 70001; /* refused before anything is written */
    test_path(out, sizeof out, "%s/out_vocab", dir);
    CHECK_EQ_INT(do_prepare(&r, paths, 2, out, &res), GPTC_ERR_ARG);
    CHECK(strstr(gptc_last_error(), "70001 ids do not fit") != NULL);
    CHECK(!exists(out) && !res.output_started);

    /* the manifest records the tokenizer's checksum */
    fake.vocab = 257;
    memcpy(t + 30000, "word word ", 10);
    write_inputs(dir, "fine", texts, lens, 2, paths);
    CHECK_OK(do_prepare(&r, paths, 2, out, &res));
    gptc_data_meta m;
    bool found;
    CHECK_OK(gptc_data_meta_read(out, &m, &found));
    CHECK(found && strcmp(m.tokenizer, "fake") == 0 && m.has_vocab_crc && m.vocab_crc == 0xdeadbeefu);
    free(t);
}

/* What a forked child does mid-way through the run (from the progress callback). */
typedef enum { MIDWAY_FSIZE, MIDWAY_TRUNCATE, MIDWAY_KILL } midway_kind;
typedef struct midway {
    midway_kind kind;
    const char *victim; /* MIDWAY_TRUNCATE: the input to shorten */
    int calls;
} midway;

static void midway_progress(void *user, uint64_t done, uint64_t total, uint64_t tokens) {
    midway *m = user;
    if (++m->calls != 2) return; /* after two batches: some shards are complete, some not */
    if (m->kind == MIDWAY_FSIZE) {
        struct rlimit rl = {100, 100}; /* any shard write past 100 bytes now fails (EFBIG) */
        setrlimit(RLIMIT_FSIZE, &rl);
    } else if (m->kind == MIDWAY_TRUNCATE) {
        if (truncate(m->victim, 10) != 0) _exit(90);
    } else {
        _exit(0); /* as if killed */
    }
}

/* Runs prepare in a child that fails (or dies) mid-way; returns the child's exit status: 0 when
 * prepare failed as expected (or died), 1 otherwise. */
static int midway_child(midway_kind kind, char paths[][600], int n, const char *out, const char *word) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        const char *inputs[4];
        for (int i = 0; i < n; i++) inputs[i] = paths[i];
        midway m = {.kind = kind, .victim = paths[n - 1]};
        gptc_prepare_options o;
        gptc_prepare_options_default(&o);
        o.inputs = inputs;
        o.ninputs = n;
        o.out = out;
        o.threads = 1; /* OpenMP's thread pool does not survive fork(): one thread runs no pool */
        gptc_prepare_test_knobs k = {.chunk_bytes = 1000};
        o.shard_tokens = 1500;
        o.progress = midway_progress;
        o.progress_user = &m;
        gptc_prepare_result res;
        gptc_status st = gptc_prepare_run_knobs(&o, &k, &res);
        bool ok = st == GPTC_ERR_IO && res.output_started && strstr(gptc_last_error(), word);
        if (!ok) printf("    child: %s: %s\n", gptc_status_name(st), gptc_last_error());
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(prepare_fail_midway) {
    char dir[512], paths[2][600], out[600], keep[600];
    test_dir("prep_", "midway", dir, sizeof dir);
    test_path(out, sizeof out, "%s/out", dir);
    test_path(keep, sizeof keep, "%s/keep", dir);
    char *t = gen_text(9, 40000);
    const char *texts[2] = {t, t};
    size_t lens[2] = {40000, 40000};
    write_inputs(dir, "in", texts, lens, 2, paths);
    /* an earlier data set in OUT (and a copy to compare with) */
    run r = {.threads = 2, .f = 0.1f, .shard_tokens = 30000};
    gptc_prepare_result res;
    CHECK_OK(do_prepare(&r, paths, 2, out, &res));
    CHECK_OK(do_prepare(&r, paths, 2, keep, &res));

    /* a write failure (file size limit) after some shards are complete */
    CHECK_EQ_INT(midway_child(MIDWAY_FSIZE, paths, 2, out, "File too large"), 0);
    CHECK_EQ_INT(count_files(out, ".*"), 0); /* the temp files are removed */
    CHECK_MSG(same_tree(out, keep), "a failed run changed the earlier data set");

    /* an input that changes under the run */
    CHECK_EQ_INT(midway_child(MIDWAY_TRUNCATE, paths, 2, out, "changed while prepare ran"), 0);
    CHECK_EQ_INT(count_files(out, ".*"), 0);
    CHECK(same_tree(out, keep));
    write_inputs(dir, "in", texts, lens, 2, paths);

    /* killed mid-way: only hidden temp files, no final-named shard of the dead run */
    CHECK_EQ_INT(midway_child(MIDWAY_KILL, paths, 2, out, ""), 0);
    CHECK(count_files(out, ".train_*.bin.tmp-*") > 0);
    CHECK(same_tree(out, keep) == false); /* the temps are there ... */
    CHECK_EQ_INT(count_files(out, "train_*.bin"), count_files(keep, "train_*.bin")); /* ... the shards as before */
    /* the next successful run clears the dead run's temp files */
    CHECK_OK(do_prepare(&r, paths, 2, out, &res));
    CHECK_EQ_INT(count_files(out, ".*"), 0);
    CHECK(same_tree(out, keep));
    free(t);
}

/* Progress: bytes done only grow, and the last call has everything. */
typedef struct prog_log {
    int calls;
    uint64_t last_done, last_total, last_tokens;
    bool monotonic;
} prog_log;

static void log_progress(void *user, uint64_t done, uint64_t total, uint64_t tokens) {
    prog_log *p = user;
    if (done < p->last_done || tokens < p->last_tokens || done > total) p->monotonic = false;
    p->calls++;
    p->last_done = done;
    p->last_total = total;
    p->last_tokens = tokens;
}

TEST(prepare_progress) {
    char dir[512], paths[1][600], out[600];
    test_dir("prep_", "progress", dir, sizeof dir);
    test_path(out, sizeof out, "%s/out", dir);
    char *t = gen_text(4, 30000);
    const char *texts[1] = {t};
    size_t lens[1] = {30000};
    write_inputs(dir, "in", texts, lens, 1, paths);
    const char *inputs[1] = {paths[0]};
    prog_log p = {.monotonic = true};
    gptc_prepare_options o;
    gptc_prepare_options_default(&o);
    o.inputs = inputs;
    o.ninputs = 1;
    o.out = out;
    o.threads = 2;
    gptc_prepare_test_knobs k = {.chunk_bytes = 1000};
    o.progress = log_progress;
    o.progress_user = &p;
    gptc_prepare_result res;
    CHECK_OK(gptc_prepare_run_knobs(&o, &k, &res));
    CHECK(p.calls > 5 && p.monotonic);
    CHECK_EQ_INT(p.last_done, 30000);
    CHECK_EQ_INT(p.last_total, 30000);
    CHECK_EQ_INT(p.last_tokens, res.train_tokens + res.val_tokens);
    free(t);
}

/* A document with no safe cut at all is cut every 32 chunks; the output still has every byte and
 * does not depend on the thread count. */
TEST(prepare_forced_cuts) {
    char dir[512], paths[1][600], a[600], b[600];
    test_dir("prep_", "forced", dir, sizeof dir);
    size_t len = 20000;
    char *t = malloc(len);
    for (size_t i = 0; i < len; i++) t[i] = i % 3 == 2 ? (char)0xa9 : i % 3 == 1 ? (char)0xc3 : 'x'; /* "xé" runs */
    const char *texts[1] = {t};
    write_inputs(dir, "in", texts, &len, 1, paths);
    run r = {.threads = 1, .chunk = 10, .f = 0.5f};
    gptc_prepare_result res;
    CHECK_OK(do_prepare(&r, paths, 1, test_path(a, sizeof a, "%s/a", dir), &res));
    r.threads = 4;
    CHECK_OK(do_prepare(&r, paths, 1, test_path(b, sizeof b, "%s/b", dir), &res));
    CHECK(same_tree(a, b));
    CHECK_EQ_INT(res.train_tokens + res.val_tokens, len + 1);
    /* val starts at the first forced cut at or after byte 10000, on a character start */
    CHECK(res.val_start >= 10000 && res.val_start <= 10000 + 320);
    CHECK((unsigned char)t[res.val_start] != 0xa9);
    toks all = {0};
    read_split(a, false, &all);
    read_split(a, true, &all);
    CHECK(all.n == len + 1 && all.v[0] == 256);
    bool same = all.n == len + 1;
    for (size_t i = 0; same && i < len; i++) same = all.v[i + 1] == (unsigned char)t[i];
    CHECK(same);
    toks_free(&all);
    free(t);
}

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0) v = strtol(line + klen + 1, NULL, 10);
    fclose(f);
    return v;
}

/* Writes mb MiB of generated text to path. */
static bool write_big(const char *path, size_t mb) {
    size_t piece = (size_t)1 << 20;
    char *t = gen_text(21, piece);
    FILE *f = fopen(path, "wb");
    bool ok = f != NULL;
    for (size_t i = 0; ok && i < mb; i++) ok = fwrite(t, 1, piece, f) == piece;
    if (f && fclose(f) != 0) ok = false;
    free(t);
    return ok;
}

/* Prepares path into out in a child (so that its peak RSS starts from the parent's) with one
 * thread; returns by how many KiB the peak RSS grew, or -1 when prepare failed. */
static long peak_growth_kb(char paths[][600], const char *out) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        long before = status_kb("VmRSS:");
        run r = {.threads = 1, .f = 0.1f}; /* OpenMP's thread pool does not survive fork(): one thread */
        gptc_prepare_result res;
        gptc_status st = do_prepare(&r, paths, 1, out, &res);
        long grew = st == GPTC_OK ? status_kb("VmHWM:") - before : -1;
        if (write(fds[1], &grew, sizeof grew) != (ssize_t)sizeof grew) _exit(1);
        _exit(0);
    }
    close(fds[1]);
    long grew = -1;
    if (read(fds[0], &grew, sizeof grew) != (ssize_t)sizeof grew) grew = -1;
    close(fds[0]);
    waitpid(pid, NULL, 0);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    CHECK_EQ_INT(test_run(cmd, NULL), 0);
    return grew;
}

/* Memory does not grow with the input: 48 MiB of text take about what 8 MiB take, a fraction of
 * the file (the old in-memory version needed 7 times the file: text, int ids, uint16 tokens). */
TEST(prepare_memory_bound) {
    char dir[512], paths[1][600], out[600];
    test_dir("prep_", "memory", dir, sizeof dir);
    test_path(out, sizeof out, "%s/out", dir);
    test_path(paths[0], sizeof paths[0], "%s/big.txt", dir);
    long grew[2];
    size_t mb[2] = {8, 48};
    for (int i = 0; i < 2; i++) {
        CHECK(write_big(paths[0], mb[i]));
        grew[i] = peak_growth_kb(paths, out);
        printf("    %zu MiB of input: peak RSS grew by %.1f MiB\n", mb[i], grew[i] / 1024.0);
    }
    remove(paths[0]);
    CHECK(grew[0] >= 0 && grew[1] >= 0);
    CHECK(grew[1] < (long)(mb[1] << 10) / 2);
    CHECK(grew[1] < grew[0] + 4096);
}

/* ---------------------------------------------------------------- the CLI */

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

TEST(prepare_cli) {
    const char *bin = test_gptc_bin();
    if (!exists(bin)) {
        printf("    prepare_cli: skipped (%s is not built)\n", bin);
        return;
    }
    char dir[512], in[600], out[600], cmd[4096], missing[600], *o = NULL;
    test_dir("prep_", "cli", dir, sizeof dir);
    const char *text = "one two\n\nthree four\n\nfive six"; /* 29 bytes; val from byte ceil(20.3) */
    test_write_file(test_path(in, sizeof in, "%s/in.txt", dir), text, strlen(text));
    test_path(out, sizeof out, "%s/out", dir);
    test_path(missing, sizeof missing, "%s/missing.txt", dir);

    snprintf(cmd, sizeof cmd, "%s prepare --tokenizer bytes %s --out %s --threads 2 --doc-separator '\\n\\n' "
                              "--val-fraction 0.3 --shard-tokens 10", bin, in, out);
    CHECK_EQ_INT(test_run(cmd, &o), 0);
    CHECK(o && strstr(o, "prepare: 19 train tokens, 9 val tokens") && strstr(o, "3 documents") && strstr(o, "MB/s"));
    CHECK(o && !strstr(o, "ETA")); /* no progress line when stderr is not a terminal */
    free(o);
    o = NULL;
    CHECK_EQ_INT(count_files(out, "train_*.bin"), 2);
    CHECK_EQ_INT(count_files(out, "val_*.bin"), 1);

    struct {
        const char *args;
        const char *word;
    } bad[] = {
        {"prepare %s --out %s/x", "missing.txt: cannot open"},
        {"prepare --tokenizer nope %s --out %s/x", "--tokenizer nope: unknown"},
        {"prepare %s --out %s/in.txt", "not a folder"},
        {"prepare %s --out %s/x --threads -1", "--threads"},
        {"prepare %s --out %s/x --doc-separator=", "--doc-separator"},
    };
    for (int i = 0; i < 5; i++) {
        char args[2048];
        snprintf(args, sizeof args, bad[i].args, i == 0 ? missing : in, dir);
        snprintf(cmd, sizeof cmd, "%s %s", bin, args);
        CHECK_EQ_INT(test_run(cmd, &o), 2);
        CHECK_MSG(o && strstr(o, bad[i].word) && count_lines(o) == 1, "%s: %s", args, o ? o : "");
        free(o);
        o = NULL;
    }
    char x[700];
    CHECK(!exists(test_path(x, sizeof x, "%s/x", dir)));

    /* a write failure mid-way (a file size limit; the signal ignored so that write fails) is 1 */
    char big[600];
    char *t = gen_text(2, 300000);
    test_write_file(test_path(big, sizeof big, "%s/big.txt", dir), t, 300000);
    free(t);
    snprintf(cmd, sizeof cmd, "trap '' XFSZ; ulimit -f 100; %s prepare %s --out %s/x", bin, big, dir);
    CHECK_EQ_INT(test_run(cmd, &o), 1);
    CHECK_MSG(o && strstr(o, "train_000000.bin: cannot write: File too large") && count_lines(o) == 1, "%s", o ? o : "");
    free(o);
    o = NULL;
    CHECK(!exists(x));

    /* gpt2 with a malformed or a missing vocabulary file: the tokenizer's message, 2, nothing written */
    gptc_tokenizer *g = gpt2_or_skip("prepare_cli");
    if (g) {
        gptc_tokenizer_free(g);
        char vdir[600], vpath[700];
        test_dir("prep_", "cli_vocab", vdir, sizeof vdir);
        test_write_file(test_path(vpath, sizeof vpath, "%s/encoder.json", vdir), "{\"a\": ", 6);
        test_write_file(test_path(vpath, sizeof vpath, "%s/vocab.bpe", vdir), "#version: 0.2\n", 14);
        for (int i = 0; i < 2; i++) {
            if (i == 1) remove(test_path(vpath, sizeof vpath, "%s/encoder.json", vdir));
            snprintf(cmd, sizeof cmd, "GPTC_VOCAB_DIR=%s %s prepare --tokenizer gpt2 %s --out %s/x", vdir, bin, in, dir);
            CHECK_EQ_INT(test_run(cmd, &o), 2);
            CHECK_MSG(o && strstr(o, "--tokenizer gpt2") && strstr(o, "encoder.json") && count_lines(o) == 1, "%s",
                      o ? o : "");
            free(o);
            o = NULL;
            CHECK(!exists(x));
        }
    }
    snprintf(cmd, sizeof cmd, "%s prepare --help", bin);
    CHECK_EQ_INT(test_run(cmd, &o), 0);
    CHECK(o && strstr(o, "--doc-separator") && strstr(o, "--threads") && strstr(o, "gpt2"));
    free(o);
}
