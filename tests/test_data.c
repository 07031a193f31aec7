/* test_data.c — token shards, --data resolution, the window loader, the byte tokenizer (prepare: test_prepare.c). */
#include "test.h"

#include "data/data.h"
#include "io/io.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */


/* Writes a shard of n tokens (first + i) mod 65536. */
static void write_seq_shard(const char *path, size_t n, unsigned first) {
    uint16_t *t = malloc((n ? n : 1) * sizeof *t); /* [n] */
    for (size_t i = 0; i < n; i++) t[i] = (uint16_t)(first + i);
    gptc_status st = gptc_shard_write(path, t, n);
    if (st != GPTC_OK) { fprintf(stderr, "%s\n", gptc_last_error()); abort(); }
    free(t);
}

/* The raw bytes of a valid shard holding n tokens 0..n-1; *len gets the size. Caller frees. */
static unsigned char *shard_bytes(size_t n, size_t *len) {
    *len = 1024 + 2 * n;
    unsigned char *b = calloc(1, *len);
    int32_t hdr[3] = {GPTC_SHARD_MAGIC, GPTC_SHARD_VERSION, (int32_t)n};
    memcpy(b, hdr, sizeof hdr);
    for (size_t i = 0; i < n; i++) {
        b[1024 + 2 * i] = (unsigned char)i;
        b[1024 + 2 * i + 1] = (unsigned char)(i >> 8);
    }
    return b;
}

/* ---------------------------------------------------------------- shards */

TEST(data_shard_roundtrip) {
    char dir[512], path[600];
    test_dir("data_", "shard_rt", dir, sizeof dir);
    test_path(path, sizeof path, "%s/a.bin", dir);
    enum { N = 1000 };
    uint16_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (uint16_t)(i * 7919u);
    CHECK_OK(gptc_shard_write(path, toks, N));
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == 1024 + 2 * N);
    gptc_shard s;
    CHECK_OK(gptc_shard_open(&s, path));
    CHECK_EQ_INT(s.ntok, N);
    CHECK(s.path && strcmp(s.path, path) == 0);
    CHECK(s.tokens && memcmp(s.tokens, toks, sizeof toks) == 0);
    gptc_shard_close(&s);
    CHECK(s.map == NULL && s.path == NULL);

    /* the header matches llm.c's layout word for word */
    char *raw = NULL;
    size_t len = 0;
    CHECK_OK(gptc_file_read_all(path, &raw, &len));
    int32_t hdr[256];
    memcpy(hdr, raw, sizeof hdr);
    CHECK_EQ_INT(hdr[0], 20240520);
    CHECK_EQ_INT(hdr[1], 1);
    CHECK_EQ_INT(hdr[2], N);
    int nonzero = 0;
    for (int i = 3; i < 256; i++) nonzero += hdr[i] != 0;
    CHECK_EQ_INT(nonzero, 0);
    gptc_free(raw);

    /* an empty shard is a valid file */
    test_path(path, sizeof path, "%s/empty.bin", dir);
    CHECK_OK(gptc_shard_write(path, NULL, 0));
    CHECK_OK(gptc_shard_open(&s, path));
    CHECK_EQ_INT(s.ntok, 0);
    gptc_shard_close(&s);

    gptc_shard z;
    memset(&z, 0, sizeof z);
    gptc_shard_close(&z); /* safe on a zeroed struct */
}

static void expect_refusal(const char *path, gptc_status want, const char *word) {
    gptc_shard s;
    gptc_status st = gptc_shard_open(&s, path);
    CHECK_MSG(st == want, "%s: status %s, expected %s (%s)", path, gptc_status_name(st), gptc_status_name(want),
              gptc_last_error());
    CHECK_MSG(strstr(gptc_last_error(), path) != NULL, "error does not name %s: %s", path, gptc_last_error());
    CHECK_MSG(strstr(gptc_last_error(), word) != NULL, "error lacks \"%s\": %s", word, gptc_last_error());
    CHECK(s.map == NULL && s.path == NULL && s.tokens == NULL);
    gptc_shard_close(&s);
}

TEST(data_shard_refusals) {
    char dir[512], path[600];
    test_dir("data_", "shard_bad", dir, sizeof dir);
    size_t len;
    unsigned char *b = shard_bytes(10, &len);

    test_path(path, sizeof path, "%s/ok.bin", dir);
    test_write_file(path, b, len);
    gptc_shard s;
    CHECK_OK(gptc_shard_open(&s, path));
    CHECK_EQ_INT(s.ntok, 10);
    CHECK_EQ_INT(s.tokens[9], 9);
    gptc_shard_close(&s);

    test_path(path, sizeof path, "%s/magic.bin", dir);
    b[0] ^= 1;
    test_write_file(path, b, len);
    b[0] ^= 1;
    expect_refusal(path, GPTC_ERR_FORMAT, "magic 20240521, expected 20240520");

    test_path(path, sizeof path, "%s/version.bin", dir);
    b[4] = 2;
    test_write_file(path, b, len);
    b[4] = 1;
    expect_refusal(path, GPTC_ERR_FORMAT, "version 2");

    test_path(path, sizeof path, "%s/short1.bin", dir);
    test_write_file(path, b, len - 1);
    expect_refusal(path, GPTC_ERR_FORMAT, "truncated");

    test_path(path, sizeof path, "%s/extra1.bin", dir);
    unsigned char *b2 = calloc(1, len + 1);
    memcpy(b2, b, len);
    test_write_file(path, b2, len + 1);
    free(b2);
    expect_refusal(path, GPTC_ERR_FORMAT, "header says 10 tokens");

    test_path(path, sizeof path, "%s/tiny.bin", dir);
    test_write_file(path, b, 100);
    expect_refusal(path, GPTC_ERR_FORMAT, "header");

    test_path(path, sizeof path, "%s/empty.bin", dir);
    test_write_file(path, b, 0);
    expect_refusal(path, GPTC_ERR_FORMAT, "not a token shard");

    test_path(path, sizeof path, "%s/missing.bin", dir);
    expect_refusal(path, GPTC_ERR_IO, "cannot open");

    expect_refusal(dir, GPTC_ERR_IO, "not a regular file");
    free(b);
}

/* ---------------------------------------------------------------- resolve */

static void expect_paths(const char *spec, bool want_val, int n, const char *const *names) {
    char **paths = NULL;
    int np = -1;
    gptc_status st = gptc_data_resolve(spec, want_val, &paths, &np);
    CHECK_MSG(st == GPTC_OK, "resolve %s: %s", spec, gptc_last_error());
    CHECK_EQ_INT(np, n);
    for (int i = 0; i < n && i < np; i++) {
        const char *slash = strrchr(paths[i], '/');
        CHECK_MSG(slash && strcmp(slash + 1, names[i]) == 0, "%s: path %d is %s, expected .../%s", spec, i,
                  paths[i], names[i]);
    }
    gptc_paths_free(paths, np);
}

static void expect_no_match(const char *spec, bool want_val) {
    char **paths = (char **)1;
    int np = -1;
    gptc_status st = gptc_data_resolve(spec, want_val, &paths, &np);
    CHECK_MSG(st == GPTC_ERR_IO, "resolve %s: %s", spec, gptc_status_name(st));
    CHECK(paths == NULL && np == 0);
    CHECK_MSG(strstr(gptc_last_error(), spec) != NULL, "error does not name %s: %s", spec, gptc_last_error());
}

TEST(data_resolve) {
    char dir[512], path[600], spec[700];
    test_dir("data_", "resolve", dir, sizeof dir);
    write_seq_shard(test_path(path, sizeof path, "%s/train_000001.bin", dir), 10, 0);
    write_seq_shard(test_path(path, sizeof path, "%s/train_000000.bin", dir), 10, 0);
    write_seq_shard(test_path(path, sizeof path, "%s/train_000002.bin", dir), 10, 0);
    write_seq_shard(test_path(path, sizeof path, "%s/val_000000.bin", dir), 10, 0);
    test_write_file(test_path(path, sizeof path, "%s/notes.txt", dir), "x", 1);
    mkdir(test_path(path, sizeof path, "%s/train_folder.bin", dir), 0755); /* a folder is not a shard */

    const char *train[] = {"train_000000.bin", "train_000001.bin", "train_000002.bin"};
    const char *val[] = {"val_000000.bin"};
    expect_paths(dir, false, 3, train);
    expect_paths(dir, true, 1, val);
    test_path(spec, sizeof spec, "%s/", dir); /* a trailing slash */
    expect_paths(spec, false, 3, train);

    test_path(spec, sizeof spec, "%s/train_*.bin", dir);
    expect_paths(spec, false, 3, train);
    expect_paths(spec, true, 3, train); /* want_val only matters for a folder */
    test_path(spec, sizeof spec, "%s/*_00000[0].bin", dir);
    const char *zeros[] = {"train_000000.bin", "val_000000.bin"};
    expect_paths(spec, false, 2, zeros);

    test_path(spec, sizeof spec, "%s/train_000001.bin", dir);
    expect_paths(spec, false, 1, train + 1);

    test_path(spec, sizeof spec, "%s/nothing_*.bin", dir);
    expect_no_match(spec, false);
    test_path(spec, sizeof spec, "%s/missing.bin", dir);
    expect_no_match(spec, false);
    char empty[512];
    test_dir("data_", "resolve_empty", empty, sizeof empty);
    expect_no_match(empty, false);
    expect_no_match(empty, true);
    CHECK(strstr(gptc_last_error(), "no shard files found") != NULL);
}

TEST(data_meta_read) {
    char dir[512], path[600], spec[700];
    test_dir("data_", "meta", dir, sizeof dir);
    gptc_data_meta m;
    bool found = true;
    CHECK_OK(gptc_data_meta_read(dir, &m, &found));
    CHECK(!found);

    const char *good = "{\"tokenizer\": \"byte\", \"vocab\": 257, \"eot\": 256, \"train_tokens\": 9, \"val_tokens\": 1}\n";
    test_write_file(test_path(path, sizeof path, "%s/meta.json", dir), good, strlen(good));
    CHECK_OK(gptc_data_meta_read(dir, &m, &found));
    CHECK(found && strcmp(m.tokenizer, "byte") == 0 && m.vocab == 257 && m.eot == 256);
    /* a file or glob inside the folder finds it too */
    found = false;
    CHECK_OK(gptc_data_meta_read(test_path(spec, sizeof spec, "%s/train_*.bin", dir), &m, &found));
    CHECK(found && m.vocab == 257);

    const char *bad[] = {"{\"tokenizer\": \"byte\", \"vocab\": 257", "[1, 2]",
                         "{\"tokenizer\": \"byte\", \"vocab\": 257, \"eot\": 257}",
                         "{\"tokenizer\": 3, \"vocab\": 257, \"eot\": 256}",
                         "{\"tokenizer\": \"byte\", \"vocab\": -1, \"eot\": 0}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_write_file(path, bad[i], strlen(bad[i]));
        gptc_status st = gptc_data_meta_read(dir, &m, &found);
        CHECK_MSG(st == GPTC_ERR_FORMAT, "meta %s: %s", bad[i], gptc_status_name(st));
        CHECK(!found);
        CHECK(strstr(gptc_last_error(), path) != NULL);
    }
}

/* ---------------------------------------------------------------- loader */

/* Opens a loader over the shards given as paths. */
static gptc_status open_loader(gptc_loader *l, char **paths, int n, int B, int T, int vocab, bool shuffle,
                               uint64_t seed, int rank, int world) {
    return gptc_loader_open(l, paths, n, B, T, vocab, shuffle, seed, rank, world);
}

TEST(data_loader_sequential) {
    char dir[512];
    test_dir("data_", "loader_seq", dir, sizeof dir);
    /* shard 0: 100 tokens 0..99 -> 12 windows of 8+1; shard 1: 5 tokens -> 0 windows;
     * shard 2: 9 tokens 2000.. -> 1 window; shard 3: 50 tokens 1000.. -> 6 windows. 19 windows. */
    const size_t ns[4] = {100, 5, 9, 50};
    const unsigned first[4] = {0, 500, 2000, 1000};
    char *paths[4];
    for (int i = 0; i < 4; i++) {
        paths[i] = malloc(600);
        test_path(paths[i], 600, "%s/s%d.bin", dir, i);
        write_seq_shard(paths[i], ns[i], first[i]);
    }
    /* window w -> its first token */
    unsigned start[19];
    for (int w = 0; w < 12; w++) start[w] = 8 * w;
    start[12] = 2000;
    for (int w = 0; w < 6; w++) start[13 + w] = 1000 + 8 * w;

    enum { B = 4, T = 8 };
    gptc_loader l;
    CHECK_OK(open_loader(&l, paths, 4, B, T, 65536, false, 1, 0, 1));
    CHECK_EQ_INT(l.nwindows, 19);
    int in[B * T], tg[B * T];
    /* 19 windows, 4 a batch: 4 batches (16 windows) per epoch, then the epoch wraps */
    for (int step = 0; step < 10; step++) {
        gptc_loader_pos before = gptc_loader_tell(&l);
        CHECK_OK(gptc_loader_next(&l, in, tg));
        gptc_loader_pos after = gptc_loader_tell(&l);
        int k = step % 4;
        CHECK_EQ_INT(after.epoch, step / 4);
        CHECK_EQ_INT(after.cursor, 4 * k + 4);
        if (k == 0 && step > 0) CHECK(before.cursor == 16 && before.epoch == (uint64_t)(step / 4 - 1));
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                unsigned w = 4 * k + b;
                CHECK_EQ_INT(in[b * T + t], start[w] + t);
                CHECK_EQ_INT(tg[b * T + t], start[w] + t + 1);
            }
    }
    /* rewind goes back to the first batch */
    gptc_loader_rewind(&l);
    CHECK(gptc_loader_tell(&l).epoch == 0 && gptc_loader_tell(&l).cursor == 0);
    CHECK_OK(gptc_loader_next(&l, in, tg));
    CHECK_EQ_INT(in[0], 0);
    CHECK_EQ_INT(in[T], 8);
    gptc_loader_close(&l);
    CHECK(l.shards == NULL && l.order == NULL);
    gptc_loader z;
    memset(&z, 0, sizeof z);
    gptc_loader_close(&z);
    for (int i = 0; i < 4; i++) free(paths[i]);
}

/* Runs one epoch with B = 1 and returns the window order seen (windows start at 8*w). */
static void shuffled_epoch(gptc_loader *l, uint64_t *seen, size_t n) {
    int in[8], tg[8];
    for (size_t i = 0; i < n; i++) {
        CHECK_OK(gptc_loader_next(l, in, tg));
        seen[i] = (uint64_t)in[0] / 8;
        CHECK_EQ_INT(tg[7], in[0] + 8);
    }
}

static bool is_permutation(const uint64_t *v, size_t n) {
    bool *hit = calloc(n, 1);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        if (v[i] >= n || hit[v[i]]) ok = false;
        else hit[v[i]] = true;
    }
    free(hit);
    return ok;
}

/* The order documented in loader.c, computed independently. */
static void documented_order(uint64_t seed, uint64_t epoch, uint64_t *order, size_t n) {
    for (size_t i = 0; i < n; i++) order[i] = i;
    gptc_rng r;
    gptc_rng_seed(&r, gptc_hash64(seed ^ gptc_hash64(epoch)));
    for (size_t i = n - 1; i >= 1; i--) {
        uint64_t bound = i + 1, x;
        do x = gptc_rng_next(&r);
        while (x < (0 - bound) % bound);
        size_t j = x % bound;
        uint64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

TEST(data_loader_shuffle) {
    char dir[512], path[600];
    test_dir("data_", "loader_shuf", dir, sizeof dir);
    write_seq_shard(test_path(path, sizeof path, "%s/s.bin", dir), 8 * 50 + 1, 0); /* 50 windows */
    char *paths[1] = {path};
    enum { N = 50 };
    uint64_t e0[N], e1[N], again[N], other[N], want[N];
    gptc_loader l, m, o;
    CHECK_OK(open_loader(&l, paths, 1, 1, 8, 65536, true, 42, 0, 1));
    CHECK_OK(open_loader(&m, paths, 1, 1, 8, 65536, true, 42, 0, 1));
    CHECK_OK(open_loader(&o, paths, 1, 1, 8, 65536, true, 43, 0, 1));
    shuffled_epoch(&l, e0, N);
    shuffled_epoch(&l, e1, N);
    CHECK_EQ_INT(gptc_loader_tell(&l).epoch, 1);
    shuffled_epoch(&m, again, N);
    shuffled_epoch(&o, other, N);
    CHECK(is_permutation(e0, N));
    CHECK(is_permutation(e1, N));
    CHECK(memcmp(e0, e1, sizeof e0) != 0);       /* a fresh order each epoch */
    CHECK(memcmp(e0, again, sizeof e0) == 0);    /* same seed, same order */
    CHECK(memcmp(e0, other, sizeof e0) != 0);    /* another seed, another order */
    size_t identity = 0;
    for (size_t i = 0; i < N; i++) identity += e0[i] == i;
    CHECK(identity < N / 2);
    documented_order(42, 0, want, N);
    CHECK(memcmp(e0, want, sizeof e0) == 0);
    documented_order(42, 1, want, N);
    CHECK(memcmp(e1, want, sizeof e1) == 0);
    gptc_loader_close(&l);
    gptc_loader_close(&m);
    gptc_loader_close(&o);
}

TEST(data_loader_seek_resumes) {
    char dir[512], p0[600], p1[600];
    test_dir("data_", "loader_seek", dir, sizeof dir);
    write_seq_shard(test_path(p0, sizeof p0, "%s/a.bin", dir), 8 * 13 + 3, 0);
    write_seq_shard(test_path(p1, sizeof p1, "%s/b.bin", dir), 8 * 10 + 1, 30000);
    char *paths[2] = {p0, p1}; /* 23 windows; B = 3: 7 batches an epoch */
    enum { B = 3, T = 8, RUN = 40 };
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        gptc_loader ref;
        CHECK_OK(open_loader(&ref, paths, 2, B, T, 65536, shuffle, 7, 0, 1));
        static int want_in[RUN][B * T], want_tg[RUN][B * T];
        gptc_loader_pos at[RUN + 1];
        for (int i = 0; i < RUN; i++) {
            at[i] = gptc_loader_tell(&ref);
            CHECK_OK(gptc_loader_next(&ref, want_in[i], want_tg[i]));
        }
        at[RUN] = gptc_loader_tell(&ref);
        CHECK(at[RUN].epoch >= 4);
        /* resume from several points, including epoch ends (cursor 21 of 23) */
        const int from[] = {0, 5, 7, 13, 20, 33};
        for (size_t f = 0; f < sizeof from / sizeof from[0]; f++) {
            gptc_loader l;
            CHECK_OK(open_loader(&l, paths, 2, B, T, 65536, shuffle, 7, 0, 1));
            /* wander first so the order held is for another epoch */
            int in[B * T], tg[B * T];
            for (int i = 0; i < 9; i++) CHECK_OK(gptc_loader_next(&l, in, tg));
            CHECK_OK(gptc_loader_seek(&l, at[from[f]]));
            CHECK(gptc_loader_tell(&l).epoch == at[from[f]].epoch && gptc_loader_tell(&l).cursor == at[from[f]].cursor);
            for (int i = from[f]; i < RUN; i++) {
                CHECK_OK(gptc_loader_next(&l, in, tg));
                CHECK_MSG(memcmp(in, want_in[i], sizeof in) == 0 && memcmp(tg, want_tg[i], sizeof tg) == 0,
                          "shuffle %d: resumed at step %d, step %d differs", shuffle, from[f], i);
            }
            gptc_loader_pos bad = {0, 24};
            CHECK_EQ_INT(gptc_loader_seek(&l, bad), GPTC_ERR_STATE);
            CHECK(gptc_loader_tell(&l).cursor == at[RUN].cursor); /* a refused seek changes nothing */
            gptc_loader_pos end = {3, 23};
            CHECK_OK(gptc_loader_seek(&l, end)); /* the very end of an epoch is a valid position */
            CHECK_OK(gptc_loader_next(&l, in, tg));
            CHECK(gptc_loader_tell(&l).epoch == 4 && gptc_loader_tell(&l).cursor == B);
            gptc_loader_close(&l);
        }
        gptc_loader_close(&ref);
    }
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

TEST(data_loader_two_ranks) {
    char dir[512], path[600];
    test_dir("data_", "loader_ranks", dir, sizeof dir);
    write_seq_shard(test_path(path, sizeof path, "%s/s.bin", dir), 8 * 37 + 5, 0); /* 37 windows */
    char *paths[1] = {path};
    enum { B = 2, T = 8, STEPS = 30 };
    gptc_loader one, r0, r1;
    CHECK_OK(open_loader(&one, paths, 1, 2 * B, T, 65536, true, 9, 0, 1));
    CHECK_OK(open_loader(&r0, paths, 1, B, T, 65536, true, 9, 0, 2));
    CHECK_OK(open_loader(&r1, paths, 1, B, T, 65536, true, 9, 1, 2));
    for (int s = 0; s < STEPS; s++) {
        int in1[2 * B * T], tg1[2 * B * T], in2[2 * B * T], tg2[2 * B * T];
        CHECK_OK(gptc_loader_next(&one, in1, tg1));
        CHECK_OK(gptc_loader_next(&r0, in2, tg2));
        CHECK_OK(gptc_loader_next(&r1, in2 + B * T, tg2 + B * T));
        /* windows as a multiset: their first tokens, sorted */
        int a[2 * B], b[2 * B];
        for (int i = 0; i < 2 * B; i++) {
            a[i] = in1[i * T];
            b[i] = in2[i * T];
            CHECK_EQ_INT(tg2[i * T + T - 1], in2[i * T] + T);
        }
        qsort(a, 2 * B, sizeof a[0], cmp_int);
        qsort(b, 2 * B, sizeof b[0], cmp_int);
        CHECK_MSG(memcmp(a, b, sizeof a) == 0, "step %d: the two ranks read other windows", s);
        CHECK(gptc_loader_tell(&r0).cursor == gptc_loader_tell(&one).cursor);
        CHECK(gptc_loader_tell(&r1).epoch == gptc_loader_tell(&one).epoch);
    }
    gptc_loader_close(&one);
    gptc_loader_close(&r0);
    gptc_loader_close(&r1);
}

TEST(data_loader_bad_token) {
    char dir[512], path[600];
    test_dir("data_", "loader_vocab", dir, sizeof dir);
    uint16_t t[41];
    for (int i = 0; i < 41; i++) t[i] = (uint16_t)(i % 10);
    t[37] = 300;
    CHECK_OK(gptc_shard_write(test_path(path, sizeof path, "%s/s.bin", dir), t, 41)); /* 5 windows of 8+1 */
    char *paths[1] = {path};
    gptc_loader l;
    CHECK_OK(open_loader(&l, paths, 1, 1, 8, 257, false, 0, 0, 1));
    int in[8], tg[8];
    for (int i = 0; i < 4; i++) CHECK_OK(gptc_loader_next(&l, in, tg)); /* windows 0..3 hold tokens 0..32 */
    gptc_loader_pos before = gptc_loader_tell(&l);
    CHECK_EQ_INT(gptc_loader_next(&l, in, tg), GPTC_ERR_FORMAT);
    CHECK(strstr(gptc_last_error(), path) != NULL);
    CHECK(strstr(gptc_last_error(), "token id 300 at offset 37") != NULL);
    CHECK(strstr(gptc_last_error(), "257") != NULL);
    CHECK(gptc_loader_tell(&l).cursor == before.cursor && gptc_loader_tell(&l).epoch == before.epoch);
    gptc_loader_close(&l);
}

TEST(data_loader_refusals) {
    char dir[512], path[600], bad[600];
    test_dir("data_", "loader_small", dir, sizeof dir);
    write_seq_shard(test_path(path, sizeof path, "%s/s.bin", dir), 8 * 3 + 1, 0); /* 3 windows */
    char *paths[2] = {path, bad};
    gptc_loader l;
    CHECK_OK(open_loader(&l, paths, 1, 3, 8, 65536, false, 0, 0, 1));
    gptc_loader_close(&l);
    CHECK_EQ_INT(open_loader(&l, paths, 1, 4, 8, 65536, false, 0, 0, 1), GPTC_ERR_ARG);
    CHECK_MSG(strstr(gptc_last_error(), "25 tokens in 3 windows of 8+1") && strstr(gptc_last_error(), "'batch'"),
              "%s", gptc_last_error());
    CHECK(l.shards == NULL && l.order == NULL);
    CHECK_EQ_INT(open_loader(&l, paths, 1, 2, 8, 65536, false, 0, 1, 2), GPTC_ERR_ARG); /* 2×2 > 3 */
    CHECK_EQ_INT(open_loader(&l, paths, 1, 1, 25, 65536, false, 0, 0, 1), GPTC_ERR_ARG); /* T+1 > 25 */
    CHECK_OK(open_loader(&l, paths, 1, 1, 24, 65536, false, 0, 0, 1));                     /* T+1 == 25 */
    gptc_loader_close(&l);
    CHECK_EQ_INT(open_loader(&l, paths, 1, 1, 8, 65536, false, 0, 2, 2), GPTC_ERR_ARG); /* rank >= world */
    CHECK_EQ_INT(open_loader(&l, paths, 1, 0, 8, 65536, false, 0, 0, 1), GPTC_ERR_ARG);
    /* a bad shard among good ones: the error names it */
    test_write_file(test_path(bad, sizeof bad, "%s/bad.bin", dir), "garbage", 7);
    CHECK_EQ_INT(open_loader(&l, paths, 2, 1, 8, 65536, false, 0, 0, 1), GPTC_ERR_FORMAT);
    CHECK(strstr(gptc_last_error(), bad) != NULL);
    gptc_loader_close(&l);
}

/* ---------------------------------------------------------------- tokenizer */

TEST(data_tokenizer_byte) {
    gptc_tokenizer *t = NULL;
    CHECK_OK(gptc_tokenizer_open("byte", &t));
    if (!t) return;
    CHECK(strcmp(t->name, "byte") == 0);
    CHECK_EQ_INT(t->vocab, 257);
    CHECK_EQ_INT(t->eot, 256);

    char all[256];
    for (int i = 0; i < 256; i++) all[i] = (char)i;
    int *ids = NULL;
    size_t n = 0, cap = 0;
    CHECK_OK(t->encode(t, NULL, all, 256, true, &ids, &n, &cap));
    CHECK_EQ_INT(n, 256);
    CHECK(cap >= n);
    for (int i = 0; i < 256 && i < (int)n; i++) {
        CHECK_EQ_INT(ids[i], i);
        char buf[16];
        CHECK_EQ_INT(t->decode(t, ids[i], buf, sizeof buf), 1);
        CHECK_EQ_INT((unsigned char)buf[0], i);
    }

    /* specials: only the exact string, only when allowed; encode appends */
    const char *s = "a<|endoftext|>b<|endoftext|<|endoftext|>";
    size_t before = n;
    CHECK_OK(t->encode(t, NULL, s, strlen(s), true, &ids, &n, &cap));
    const int want[] = {'a', 256, 'b', '<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|', 256};
    CHECK_EQ_INT(n - before, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < sizeof want / sizeof want[0] && before + i < n; i++) CHECK_EQ_INT(ids[before + i], want[i]);
    CHECK_EQ_INT(ids[0], 0); /* what was there stays */
    n = 0;
    CHECK_OK(t->encode(t, NULL, s, strlen(s), false, &ids, &n, &cap));
    CHECK_EQ_INT(n, strlen(s));
    for (size_t i = 0; i < n; i++) CHECK_EQ_INT(ids[i], (unsigned char)s[i]);
    n = 0;
    CHECK_OK(t->encode(t, NULL, "", 0, true, &ids, &n, &cap));
    CHECK_EQ_INT(n, 0);

    char buf[32];
    CHECK_EQ_INT(t->decode(t, 256, buf, sizeof buf), 13);
    CHECK(memcmp(buf, "<|endoftext|>", 13) == 0);
    CHECK_EQ_INT(t->decode(t, 257, buf, sizeof buf), -1);
    CHECK_EQ_INT(t->decode(t, -1, buf, sizeof buf), -1);
    CHECK_EQ_INT(t->decode(t, 256, buf, 12), -1);
    free(ids);
    gptc_tokenizer_free(t);
    gptc_tokenizer_free(NULL);

    CHECK_OK(gptc_tokenizer_open("bytes", &t)); /* the alias the prepare flag documents */
    CHECK(t && t->vocab == 257);
    gptc_tokenizer_free(t);
    CHECK_OK(gptc_tokenizer_open("gpt2", &t));
    CHECK(t && t->vocab == 50257 && t->eot == 50256 && t->files_crc != 0);
    gptc_tokenizer_free(t);
    CHECK_EQ_INT(gptc_tokenizer_open("nope", &t), GPTC_ERR_ARG);
    CHECK(t == NULL);
    CHECK(strstr(gptc_last_error(), "nope") && strstr(gptc_last_error(), "byte") && strstr(gptc_last_error(), "gpt2"));
}
