/* test_io.c — tests of the io module: atomic writes, folder helpers, and the safetensors reader and
 * writer, including hand-made files and every kind of damage the reader must refuse. */
#include "io/io.h"
#include "test.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

/* A path under this run's scratch folder (one of 32 rotating static buffers: copy to keep longer). */
static const char *tpath(const char *fmt, const char *name) {
    static char bufs[32][512];
    static int next;
    char *b = bufs[next++ % 32];
    char rel[256];
    snprintf(rel, sizeof rel, fmt, name);
    snprintf(b, 512, "%s/%s", test_tmpdir(), rel);
    return b;
}

static void write_raw(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) { test_fail_at(__FILE__, __LINE__, "cannot create %s", path); return; }
    if (n && fwrite(data, 1, n, f) != n) test_fail_at(__FILE__, __LINE__, "cannot write %s", path);
    fclose(f);
}

/* Count of entries in dir whose name contains needle. */
static int count_names(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, needle)) n++;
    closedir(d);
    return n;
}

/* A safetensors file from a hand-written header: 8-byte LE length, the header padded with spaces
 * to pad_to bytes (0: no padding), then the data. Returns the byte count (into *out, malloc'd). */
static size_t build_st(unsigned char **out, const char *json, size_t pad_to, const void *data, size_t ndata) {
    size_t jlen = strlen(json), hlen = jlen;
    if (pad_to) hlen = (jlen + pad_to - 1) / pad_to * pad_to;
    size_t n = 8 + hlen + ndata;
    unsigned char *b = malloc(n + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, json, jlen);
    memset(b + 8 + jlen, ' ', hlen - jlen);
    if (ndata) memcpy(b + 8 + hlen, data, ndata);
    *out = b;
    return n;
}

static gptc_status open_hand(const char *path, const char *json, const void *data, size_t ndata) {
    unsigned char *b;
    size_t n = build_st(&b, json, 8, data, ndata);
    write_raw(path, b, n);
    free(b);
    gptc_st_file f;
    gptc_status st = gptc_st_open(&f, path);
    gptc_st_close(&f);
    return st;
}

/* A refusal must be GPTC_ERR_FORMAT with a one-line message that names the file. */
#define CHECK_REFUSED(st, path, needle)                                                               \
    do {                                                                                              \
        gptc_status s_ = (st);                                                                        \
        const char *m_ = gptc_last_error();                                                           \
        CHECK_MSG(s_ == GPTC_ERR_FORMAT, "expected a format error, got %s: %s", gptc_status_name(s_), m_); \
        CHECK_MSG(strncmp(m_, (path), strlen(path)) == 0 && !strchr(m_, '\n'), "bad message: %s", m_); \
        CHECK_MSG(strstr(m_, (needle)) != NULL, "message lacks \"%s\": %s", (needle), m_);             \
    } while (0)

static bool is_zeroed(const gptc_st_file *f) {
    static const gptc_st_file zero;
    return memcmp(f, &zero, sizeof zero) == 0;
}

/* ---------------------------------------------------------------- checksums and files */

TEST(io_crc32c_known_value) {
    CHECK_EQ_INT(gptc_crc32c(0, "123456789", 9), 0xE3069283u);
    /* incremental use gives the same answer */
    CHECK_EQ_INT(gptc_crc32c(gptc_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
    CHECK_EQ_INT(gptc_crc32c(0, NULL, 0), 0);
    CHECK_EQ_INT(gptc_crc32c_portable(0, "123456789", 9), 0xE3069283u);
}

TEST(io_crc32c_instruction_matches_tables) {
    /* the CPU's CRC32C instruction path (where there is one) against the portable tables: every
     * length 0..300 at every start offset 0..7 (the 8-byte steps and the byte tail), chained */
    unsigned char buf[320];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
    for (int off = 0; off < 8; off++)
        for (size_t n = 0; n <= 300; n++) {
            uint32_t a = gptc_crc32c(0x5a5a5a5au, buf + off, n), b = gptc_crc32c_portable(0x5a5a5a5au, buf + off, n);
            CHECK_MSG(a == b, "offset %d length %zu: %08x vs tables %08x", off, n, a, b);
        }
}

TEST(io_atomic_write_replaces_and_leaves_no_temp) {
    const char *dir = tpath("%s", "atomic");
    CHECK_OK(gptc_mkdir_p(dir));
    const char *p = tpath("atomic/%s", "f.txt");
    const void *parts1[] = {"hello"};
    size_t lens1[] = {5};
    CHECK_OK(gptc_file_write_atomic(p, parts1, lens1, 1));
    const void *parts2[] = {"new ", NULL, "content", ""};
    size_t lens2[] = {4, 0, 7, 0};
    CHECK_OK(gptc_file_write_atomic(p, parts2, lens2, 4));
    char *data = NULL;
    size_t len = 0;
    CHECK_OK(gptc_file_read_all(p, &data, &len));
    CHECK_EQ_INT(len, 11);
    CHECK(data && strcmp(data, "new content") == 0);
    gptc_free(data);
    CHECK_EQ_INT(count_names(dir, ".tmp-"), 0);
    CHECK_EQ_INT(count_names(dir, "f.txt"), 1);
    /* zero parts makes an empty file */
    CHECK_OK(gptc_file_write_atomic(p, NULL, NULL, 0));
    CHECK_OK(gptc_file_read_all(p, &data, &len));
    CHECK_EQ_INT(len, 0);
    gptc_free(data);
    /* a bigger write (several MiB) round-trips byte for byte */
    size_t big = (size_t)5 << 20;
    unsigned char *buf = malloc(big);
    for (size_t i = 0; i < big; i++) buf[i] = (unsigned char)(i * 2654435761u >> 13);
    const void *parts3[] = {buf, buf + 1000};
    size_t lens3[] = {1000, big - 1000};
    CHECK_OK(gptc_file_write_atomic(p, parts3, lens3, 2));
    CHECK_OK(gptc_file_read_all(p, &data, &len));
    CHECK_EQ_INT(len, big);
    CHECK(data && memcmp(data, buf, big) == 0);
    gptc_free(data);
    free(buf);
    CHECK_EQ_INT(count_names(dir, ".tmp-"), 0);
}

TEST(io_atomic_write_into_missing_folder_fails) {
    const char *p = tpath("%s/f.bin", "no-such-folder");
    const void *parts[] = {"x"};
    size_t lens[] = {1};
    gptc_status st = gptc_file_write_atomic(p, parts, lens, 1);
    CHECK_EQ_INT(st, GPTC_ERR_IO);
    CHECK_MSG(strstr(gptc_last_error(), p) && !strchr(gptc_last_error(), '\n'), "message: %s", gptc_last_error());
    CHECK(!gptc_is_dir(tpath("%s", "no-such-folder")));
    CHECK(!gptc_is_file(p));
    CHECK_EQ_INT(count_names(test_tmpdir(), ".tmp-"), 0);
    /* the target is a folder: rename fails, the temp file is removed */
    const char *d = tpath("%s", "a-folder-target");
    CHECK_OK(gptc_mkdir_p(d));
    CHECK_EQ_INT(gptc_file_write_atomic(d, parts, lens, 1), GPTC_ERR_IO);
    CHECK(gptc_is_dir(d));
    CHECK_EQ_INT(count_names(test_tmpdir(), ".tmp-"), 0);
}

TEST(io_read_all) {
    const char *p = tpath("%s", "read.txt");
    write_raw(p, "abc\0def", 7);
    char *data = NULL;
    size_t len = 0;
    CHECK_OK(gptc_file_read_all(p, &data, &len));
    CHECK_EQ_INT(len, 7);
    CHECK(data && memcmp(data, "abc\0def", 8) == 0); /* NUL-terminated too */
    gptc_free(data);
    const char *e = tpath("%s", "empty.txt");
    write_raw(e, "", 0);
    CHECK_OK(gptc_file_read_all(e, &data, &len));
    CHECK_EQ_INT(len, 0);
    CHECK(data && data[0] == '\0');
    gptc_free(data);
    CHECK_EQ_INT(gptc_file_read_all(tpath("%s", "missing.txt"), &data, &len), GPTC_ERR_IO);
    CHECK(data == NULL);
    CHECK(strstr(gptc_last_error(), "missing.txt") != NULL);
    CHECK_EQ_INT(gptc_file_read_all(test_tmpdir(), &data, &len), GPTC_ERR_IO);
    /* a file whose st_size says 0 but that has content */
    if (gptc_is_file("/proc/self/status")) {
        CHECK_OK(gptc_file_read_all("/proc/self/status", &data, &len));
        CHECK(len > 0 && data && strstr(data, "Name:") != NULL);
        gptc_free(data);
    }
}

TEST(io_mkdir_p_and_is_dir) {
    const char *p = tpath("%s/b/c//d/", "mk");
    CHECK_OK(gptc_mkdir_p(p));
    CHECK(gptc_is_dir(p));
    CHECK(gptc_is_dir(tpath("%s/b/c", "mk")));
    CHECK_OK(gptc_mkdir_p(p)); /* already there */
    CHECK(!gptc_is_file(p));
    const char *f = tpath("%s/file", "mk");
    write_raw(f, "x", 1);
    CHECK(gptc_is_file(f));
    CHECK(!gptc_is_dir(f));
    CHECK_EQ_INT(gptc_mkdir_p(tpath("%s/file/sub", "mk")), GPTC_ERR_IO);
    CHECK_EQ_INT(gptc_mkdir_p(f), GPTC_ERR_IO);
    CHECK_EQ_INT(gptc_mkdir_p(""), GPTC_ERR_ARG);
    CHECK(!gptc_is_dir(tpath("%s", "nothing-here")));
    CHECK(!gptc_is_file(tpath("%s", "nothing-here")));
    CHECK_OK(gptc_fsync_dir(tpath("%s", "mk")));
    CHECK_EQ_INT(gptc_fsync_dir(tpath("%s", "nothing-here")), GPTC_ERR_IO);
}

TEST(io_remove_tree) {
    char root[512];
    snprintf(root, sizeof root, "%s", tpath("%s", "rm"));
    CHECK_OK(gptc_mkdir_p(tpath("%s/a/b/c", "rm")));
    CHECK_OK(gptc_mkdir_p(tpath("%s/empty", "rm")));
    write_raw(tpath("%s/a/f1", "rm"), "1", 1);
    write_raw(tpath("%s/a/b/c/f2", "rm"), "22", 2);
    /* a link to a folder outside: the link goes, the target stays */
    const char *keep = tpath("%s", "rm-keep");
    CHECK_OK(gptc_mkdir_p(keep));
    write_raw(tpath("%s/precious", "rm-keep"), "p", 1);
    CHECK(symlink(keep, tpath("%s/a/link", "rm")) == 0);
    CHECK_OK(gptc_remove_tree(root));
    CHECK(!gptc_is_dir(root));
    CHECK(gptc_is_file(tpath("%s/precious", "rm-keep")));
    CHECK_OK(gptc_remove_tree(root)); /* already gone */
    CHECK_EQ_INT(gptc_remove_tree(tpath("%s/precious", "rm-keep")), GPTC_ERR_ARG);
    CHECK(gptc_is_file(tpath("%s/precious", "rm-keep")));
}

/* ---------------------------------------------------------------- safetensors: round trip */

TEST(io_st_round_trip) {
    const char *p = tpath("%s", "rt.safetensors");
    float a[6] = {1.5f, -2.25f, 3.0f, 0.0f, -0.0f, 1e-30f};
    unsigned char u8[5] = {0, 1, 127, 200, 255};
    int64_t i64[3] = {INT64_MIN, -1, INT64_MAX};
    uint16_t bf16[4] = {0x3f80, 0xbf80, 0x7f80, 0x0001};
    double scalar = 3.141592653589793;
    int32_t i32[3] = {-7, 0, 2147483647};
    uint16_t u16[3] = {1, 65535, 300};
    uint16_t f16[1] = {0x3c00};
    gptc_st_entry e[] = {
        {"u8", GPTC_U8, 1, {5}, u8},
        {"a.weight", GPTC_F32, 2, {2, 3}, a},
        {"ids", GPTC_I64, 1, {3}, i64},
        {"bf", GPTC_BF16, 1, {4}, bf16},
        {"scalar", GPTC_F64, 0, {0}, &scalar},
        {"empty", GPTC_F16, 2, {0, 7}, NULL},
        {"deep", GPTC_I32, 4, {1, 1, 1, 3}, i32},
        {"u16", GPTC_U16, 1, {3}, u16},
        {"h", GPTC_F16, 1, {1}, f16},
    };
    int n = (int)(sizeof e / sizeof e[0]);
    const char *mk[] = {"format", "note"};
    const char *mv[] = {"pt", "quotes \" and \\ and unicode \xc3\xa9 and\nnewline"};
    CHECK_OK(gptc_st_write(p, e, n, mk, mv, 2));
    CHECK_EQ_INT(count_names(test_tmpdir(), ".tmp-"), 0);

    /* the data begins at a multiple of 64 bytes */
    char *raw = NULL;
    size_t rawlen = 0;
    CHECK_OK(gptc_file_read_all(p, &raw, &rawlen));
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | (unsigned char)raw[i];
    CHECK_EQ_INT((8 + hlen) % 64, 0);
    CHECK(raw[8] == '{');
    gptc_free(raw);

    gptc_st_file f;
    CHECK_OK(gptc_st_open(&f, p));
    CHECK_EQ_INT(f.ntensors, n);
    for (int i = 0; i < n; i++) {
        const gptc_st_tensor *t = gptc_st_find(&f, e[i].name);
        CHECK_MSG(t != NULL, "tensor %s missing", e[i].name);
        if (!t) continue;
        CHECK_EQ_INT(t->dtype, e[i].dtype);
        CHECK_EQ_INT(t->ndim, e[i].ndim);
        size_t numel = 1;
        for (int d = 0; d < e[i].ndim; d++) {
            CHECK_EQ_INT(t->shape[d], e[i].shape[d]);
            numel *= (size_t)e[i].shape[d];
        }
        CHECK_EQ_INT(t->numel, numel);
        CHECK_EQ_INT(t->nbytes, numel * gptc_dtype_size(e[i].dtype));
        if (t->nbytes) CHECK_MSG(memcmp(t->data, e[i].data, t->nbytes) == 0, "tensor %s data differs", e[i].name);
        CHECK_MSG((uintptr_t)t->data % gptc_dtype_size(t->dtype) == 0, "tensor %s is misaligned", e[i].name);
        char key[64], hex[16];
        snprintf(key, sizeof key, "crc32c.%s", e[i].name);
        snprintf(hex, sizeof hex, "%08x", gptc_crc32c(0, e[i].data, t->nbytes));
        CHECK_MSG(gptc_st_meta(&f, key) && strcmp(gptc_st_meta(&f, key), hex) == 0, "checksum of %s", e[i].name);
    }
    const gptc_st_tensor *s = gptc_st_find(&f, "scalar");
    CHECK(s && s->ndim == 0 && s->numel == 1 && *(const double *)s->data == scalar);
    const gptc_st_tensor *z = gptc_st_find(&f, "empty");
    CHECK(z && z->numel == 0 && z->nbytes == 0);
    CHECK(gptc_st_find(&f, "nope") == NULL);
    CHECK(gptc_st_meta(&f, "format") && strcmp(gptc_st_meta(&f, "format"), "pt") == 0);
    CHECK(gptc_st_meta(&f, "note") && strcmp(gptc_st_meta(&f, "note"), mv[1]) == 0);
    CHECK(gptc_st_meta(&f, "absent") == NULL);
    CHECK_EQ_INT(f.nmeta, 2 + n);
    gptc_st_close(&f);
    CHECK(is_zeroed(&f));
    gptc_st_close(&f); /* twice is fine */

    /* rewrite in place with other data; readers see the new file */
    a[0] = 42.0f;
    CHECK_OK(gptc_st_write(p, e, 2, NULL, NULL, 0));
    CHECK_OK(gptc_st_open(&f, p));
    CHECK_EQ_INT(f.ntensors, 2);
    const gptc_st_tensor *t = gptc_st_find(&f, "a.weight");
    CHECK(t && ((const float *)t->data)[0] == 42.0f);
    CHECK_EQ_INT(f.nmeta, 2);
    gptc_st_close(&f);

    /* no tensors at all */
    CHECK_OK(gptc_st_write(p, NULL, 0, NULL, NULL, 0));
    CHECK_OK(gptc_st_open(&f, p));
    CHECK_EQ_INT(f.ntensors, 0);
    gptc_st_close(&f);
}

TEST(io_st_write_refuses_bad_input) {
    const char *p = tpath("%s", "refuse.safetensors");
    float x[2] = {1, 2};
    gptc_st_entry dup[] = {{"w", GPTC_F32, 1, {2}, x}, {"w", GPTC_F32, 1, {1}, x}};
    CHECK_EQ_INT(gptc_st_write(p, dup, 2, NULL, NULL, 0), GPTC_ERR_ARG);
    CHECK(strstr(gptc_last_error(), "twice") != NULL);
    gptc_st_entry meta_name[] = {{"__metadata__", GPTC_F32, 1, {2}, x}};
    CHECK_EQ_INT(gptc_st_write(p, meta_name, 1, NULL, NULL, 0), GPTC_ERR_ARG);
    gptc_st_entry neg[] = {{"w", GPTC_F32, 1, {-2}, x}};
    CHECK_EQ_INT(gptc_st_write(p, neg, 1, NULL, NULL, 0), GPTC_ERR_ARG);
    gptc_st_entry deep[] = {{"w", GPTC_F32, 9, {1}, x}};
    CHECK_EQ_INT(gptc_st_write(p, deep, 1, NULL, NULL, 0), GPTC_ERR_ARG);
    gptc_st_entry huge[] = {{"w", GPTC_F32, 2, {(int64_t)1 << 40, (int64_t)1 << 40}, x}};
    CHECK_EQ_INT(gptc_st_write(p, huge, 1, NULL, NULL, 0), GPTC_ERR_ARG);
    gptc_st_entry nodata[] = {{"w", GPTC_F32, 1, {2}, NULL}};
    CHECK_EQ_INT(gptc_st_write(p, nodata, 1, NULL, NULL, 0), GPTC_ERR_ARG);
    gptc_st_entry ok[] = {{"w", GPTC_F32, 1, {2}, x}};
    const char *k[] = {"crc32c.w"}, *v[] = {"00000000"};
    CHECK_EQ_INT(gptc_st_write(p, ok, 1, k, v, 1), GPTC_ERR_ARG);
    const char *k2[] = {"a", "a"}, *v2[] = {"1", "2"};
    CHECK_EQ_INT(gptc_st_write(p, ok, 1, k2, v2, 2), GPTC_ERR_ARG);
    CHECK(!gptc_is_file(p));
    CHECK_EQ_INT(gptc_st_write(tpath("%s/x.safetensors", "missing-dir"), ok, 1, NULL, NULL, 0), GPTC_ERR_IO);
}

/* ---------------------------------------------------------------- safetensors: foreign files */

TEST(io_st_reads_hand_built_file) {
    /* What Python's safetensors writes for {"ids": int64[3], "bias": float32[2]}: __metadata__ first,
     * wider dtypes first, the header padded with spaces to a multiple of 8. */
    unsigned char data[32];
    int64_t ids[3] = {1, -2, 300000000000};
    float bias[2] = {0.5f, -1.25f};
    memcpy(data, ids, 24);
    memcpy(data + 24, bias, 8);
    const char *json = "{\"__metadata__\":{\"format\":\"pt\"},"
                       "\"ids\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]},"
                       "\"bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}";
    const char *p = tpath("%s", "hand.safetensors");
    unsigned char *b;
    size_t n = build_st(&b, json, 8, data, sizeof data);
    write_raw(p, b, n);
    free(b);
    gptc_st_file f;
    CHECK_OK(gptc_st_open(&f, p));
    CHECK_EQ_INT(f.ntensors, 2);
    const gptc_st_tensor *t = gptc_st_find(&f, "ids");
    CHECK(t && t->dtype == GPTC_I64 && t->ndim == 1 && t->shape[0] == 3 && t->nbytes == 24);
    if (t) {
        int64_t got[3];
        memcpy(got, t->data, sizeof got);
        CHECK(got[0] == 1 && got[1] == -2 && got[2] == 300000000000);
    }
    t = gptc_st_find(&f, "bias");
    CHECK(t && t->dtype == GPTC_F32 && t->numel == 2);
    if (t) {
        float got[2];
        memcpy(got, t->data, sizeof got);
        CHECK(got[0] == 0.5f && got[1] == -1.25f);
    }
    CHECK(gptc_st_meta(&f, "format") && strcmp(gptc_st_meta(&f, "format"), "pt") == 0);
    CHECK_EQ_INT(f.nmeta, 1);
    gptc_st_close(&f);

    /* no metadata, no padding, pretty-printed, and a key order the writer would not pick */
    const char *json2 = "{\n  \"b\": {\"shape\": [], \"data_offsets\": [4, 8], \"dtype\": \"I32\"},\n"
                        "  \"a\": {\"dtype\": \"U8\", \"shape\": [2, 2], \"data_offsets\": [0, 4]}\n}";
    unsigned char d2[8] = {1, 2, 3, 4, 0xff, 0xff, 0xff, 0x7f};
    n = build_st(&b, json2, 0, d2, sizeof d2);
    write_raw(p, b, n);
    free(b);
    CHECK_OK(gptc_st_open(&f, p));
    t = gptc_st_find(&f, "b");
    CHECK(t && t->ndim == 0 && t->numel == 1);
    if (t) {
        int32_t v;
        memcpy(&v, t->data, 4);
        CHECK_EQ_INT(v, 2147483647);
    }
    CHECK_EQ_INT(f.nmeta, 0);
    gptc_st_close(&f);

    /* "__metadata__": null, an empty header object, and a correct hand-made checksum are all fine */
    CHECK_OK(open_hand(p, "{\"__metadata__\":null}", NULL, 0));
    CHECK_OK(open_hand(p, "{}", NULL, 0));
    char j3[256];
    snprintf(j3, sizeof j3,
             "{\"__metadata__\":{\"crc32c.x\":\"%08x\"},\"x\":{\"dtype\":\"U8\",\"shape\":[9],\"data_offsets\":[0,9]}}",
             gptc_crc32c(0, "123456789", 9));
    CHECK_OK(open_hand(p, j3, "123456789", 9));
    CHECK_REFUSED(open_hand(p, j3, "123456780", 9), p, "checksum");
}

/* ---------------------------------------------------------------- safetensors: refusals */

TEST(io_st_refuses_every_truncation) {
    const char *src = tpath("%s", "whole.safetensors");
    float w[5] = {1, 2, 3, 4, 5};
    unsigned char u[3] = {7, 8, 9};
    gptc_st_entry e[] = {{"w", GPTC_F32, 1, {5}, w}, {"u", GPTC_U8, 1, {3}, u}};
    CHECK_OK(gptc_st_write(src, e, 2, NULL, NULL, 0));
    char *whole = NULL;
    size_t size = 0;
    CHECK_OK(gptc_file_read_all(src, &whole, &size));
    const char *p = tpath("%s", "cut.safetensors");
    int bad = 0;
    for (size_t len = 0; len < size; len++) {
        write_raw(p, whole, len);
        gptc_st_file f;
        memset(&f, 0x5a, sizeof f); /* open must not trust what is in the struct */
        gptc_status st = gptc_st_open(&f, p);
        if (st != GPTC_ERR_FORMAT || strncmp(gptc_last_error(), p, strlen(p)) != 0 || !is_zeroed(&f)) {
            if (bad++ < 3) test_fail_at(__FILE__, __LINE__, "prefix %zu: %s: %s", len, gptc_status_name(st), gptc_last_error());
        }
        gptc_st_close(&f);
    }
    CHECK_EQ_INT(bad, 0);
    /* the specific messages for the shortest files */
    write_raw(p, whole, 0);
    gptc_st_file f;
    CHECK_REFUSED(gptc_st_open(&f, p), p, "empty");
    write_raw(p, whole, 5);
    CHECK_REFUSED(gptc_st_open(&f, p), p, "too short");
    write_raw(p, whole, 20);
    CHECK_REFUSED(gptc_st_open(&f, p), p, "larger than the rest of the file");
    write_raw(p, whole, size - 1);
    CHECK_REFUSED(gptc_st_open(&f, p), p, "truncated");
    /* one byte too many is a hole at the end */
    char *longer = malloc(size + 1);
    memcpy(longer, whole, size);
    longer[size] = 0;
    write_raw(p, longer, size + 1);
    CHECK_REFUSED(gptc_st_open(&f, p), p, "belong to no tensor");
    free(longer);
    gptc_free(whole);
}

TEST(io_st_refuses_flipped_bits) {
    const char *src = tpath("%s", "flip-src.safetensors");
    float w[6] = {1, 2, 3, 4, 5, 6};
    int64_t ids[2] = {10, 20};
    gptc_st_entry e[] = {{"w", GPTC_F32, 2, {2, 3}, w}, {"ids", GPTC_I64, 1, {2}, ids}};
    CHECK_OK(gptc_st_write(src, e, 2, NULL, NULL, 0));
    char *whole = NULL;
    size_t size = 0;
    CHECK_OK(gptc_file_read_all(src, &whole, &size));
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | (unsigned char)whole[i];
    size_t data_at = 8 + (size_t)hlen;
    CHECK_EQ_INT(size - data_at, sizeof w + sizeof ids);
    const char *p = tpath("%s", "flip.safetensors");
    int bad = 0;
    for (size_t at = 0; at < size; at++) {
        for (int bit = 0; bit < 8; bit++) {
            whole[at] ^= (char)(1 << bit);
            write_raw(p, whole, size);
            whole[at] ^= (char)(1 << bit);
            gptc_st_file f;
            gptc_status st = gptc_st_open(&f, p); /* anywhere: no crash, no leak */
            gptc_st_close(&f);
            if (at >= data_at) {
                const char *m = gptc_last_error();
                if (st != GPTC_ERR_FORMAT || !strstr(m, "fails its checksum"))
                    if (bad++ < 3) test_fail_at(__FILE__, __LINE__, "flip at %zu bit %d: %s: %s", at, bit, gptc_status_name(st), m);
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    gptc_free(whole);
}

TEST(io_st_open_header_skips_only_the_checksums) {
    /* a flipped data byte: gptc_st_open refuses it, gptc_st_open_header (probes) reads the header */
    const char *p = tpath("%s", "header-only.safetensors");
    float w[4] = {1, 2, 3, 4};
    gptc_st_entry e[] = {{"w", GPTC_F32, 1, {4}, w}};
    CHECK_OK(gptc_st_write(p, e, 1, NULL, NULL, 0));
    char *whole = NULL;
    size_t size = 0;
    CHECK_OK(gptc_file_read_all(p, &whole, &size));
    whole[size - 1] ^= 0x10;
    write_raw(p, whole, size);
    gptc_st_file f;
    CHECK(gptc_st_open(&f, p) == GPTC_ERR_FORMAT && strstr(gptc_last_error(), "fails its checksum"));
    CHECK_OK(gptc_st_open_header(&f, p));
    CHECK(f.ntensors == 1 && f.tensors[0].numel == 4);
    gptc_st_close(&f);
    /* the header's own checks stay: a truncated file is refused by both */
    write_raw(p, whole, size - 2);
    CHECK(gptc_st_open_header(&f, p) == GPTC_ERR_FORMAT);
    gptc_free(whole);
}

/* One byte of data flipped in place (same file, same size), after the file was verified: the next open
 * reads the checksums again and refuses it — whether the file was written just before (a change within
 * the kernel's timestamp tick of the write) or over a second before (the verified file remembered). */
static void flip_in_place(const char *p, size_t size) {
    FILE *f = fopen(p, "r+b");
    if (!f) { test_fail_at(__FILE__, __LINE__, "cannot open %s", p); return; }
    fseek(f, (long)size - 1, SEEK_SET);
    int c = fgetc(f);
    fseek(f, (long)size - 1, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

TEST(io_st_verified_file_changed_in_place_is_checked_again) {
    float w[4] = {1, 2, 3, 4};
    gptc_st_entry e[] = {{"w", GPTC_F32, 1, {4}, w}};
    for (int old = 0; old < 2; old++) {
        const char *p = tpath("%s", old ? "verified-old.safetensors" : "verified-new.safetensors");
        CHECK_OK(gptc_st_write(p, e, 1, NULL, NULL, 0));
        struct stat sb;
        CHECK(stat(p, &sb) == 0);
        if (old) usleep(1200 * 1000); /* changed over a second before its check */
        gptc_st_file f;
        for (int i = 0; i < 2; i++) { /* verified, then the same file again */
            CHECK_OK(gptc_st_open(&f, p));
            gptc_st_close(&f);
        }
        flip_in_place(p, (size_t)sb.st_size);
        CHECK_MSG(gptc_st_open(&f, p) == GPTC_ERR_FORMAT && strstr(gptc_last_error(), "fails its checksum"),
                  "old %d: a flipped byte not found: %s", old, gptc_last_error());
    }
}

TEST(io_st_refuses_bad_headers) {
    const char *p = tpath("%s", "bad.safetensors");
    unsigned char z[64] = {0};
    static const struct {
        const char *json;
        size_t ndata;
        const char *needle;
    } cases[] = {
        /* offsets */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "run past the data"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[1000000,1000004]}}", 4, "run past the data"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8, "end before they begin"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlaps"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "overlaps"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, "belong to no tensor"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "belong to no tensor"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "belong to no tensor"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4, "two non-negative"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, "two non-negative"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}", 4, "two non-negative"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,1e300]}}", 4, "two non-negative"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",\"4\"]}}", 4, "two non-negative"},
        /* dtypes and shapes */
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, "unsupported dtype"},
        {"{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unsupported dtype"},
        {"{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "needs \"dtype\""},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "needs \"dtype\""},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "needs \"dtype\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "needs \"dtype\""},
        {"{\"a\":[1,2,3]}", 4, "not an object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "needs 12"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, "needs 8"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,4]}}", 4, "needs 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,4]}}", 4, "overflows"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,1],\"data_offsets\":[0,4]}}", 4, "overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", 4, "shape entry 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,-1],\"data_offsets\":[0,4]}}", 4, "shape entry 1"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0.5],\"data_offsets\":[0,4]}}", 4, "shape entry 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4, "shape entry 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "dimensions"},
        /* names and metadata */
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}", 4, "appears twice"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "not a string"},
        {"{\"__metadata__\":[\"k\"]}", 0, "__metadata__ is not an object"},
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "appears twice"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "appears twice"},
        {"{\"__metadata__\":{\"crc32c.b\":\"00000000\"}}", 0, "not in the file"},
        {"{\"__metadata__\":{\"crc32c.a\":\"E3069283\"},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, "not 8 lowercase hex"},
        {"{\"__metadata__\":{\"crc32c.a\":\"0\"},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, "not 8 lowercase hex"},
        {"{\"__metadata__\":{\"crc32c.a\":\"2144df1c0\"},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, "not 8 lowercase hex"},
        {"{\"__metadata__\":{\"crc32c.a\":\"00000000\"},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, "fails its checksum"},
        /* not JSON, or not an object */
        {"[1,2,3]", 0, "does not start with '{'"},
        {"\"just a string\"", 0, "does not start with '{'"},
        {"42", 0, "does not start with '{'"},
        {" {}", 0, "does not start with '{'"},
        {"{\"a\":", 0, "not valid JSON"},
        {"{} trailing", 0, "not valid JSON"},
        {"{}{}", 0, "not valid JSON"},
        {"{'a':1}", 0, "not valid JSON"},
        {"{\"\xff\":1}", 0, "not UTF-8"},
        {"{\"\xc0\xaf\":1}", 0, "not UTF-8"},
        {"{\"\xed\xa0\x80\":1}", 0, "not UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gptc_status st = open_hand(p, cases[i].json, z, cases[i].ndata);
        const char *m = gptc_last_error();
        CHECK_MSG(st == GPTC_ERR_FORMAT && strstr(m, cases[i].needle) && strncmp(m, p, strlen(p)) == 0 &&
                      !strchr(m, '\n'),
                  "case %zu (%s): %s: %s", i, cases[i].json, gptc_status_name(st), m);
    }

    /* headers with a bad length field */
    unsigned char buf[64];
    memset(buf, ' ', sizeof buf);
    uint64_t lens[] = {0, 57, 1000, 100000001, (uint64_t)1 << 40, UINT64_MAX};
    const char *needles[] = {"header length is 0", "larger than the rest", "larger than the rest",
                             "100 MB", "100 MB", "100 MB"};
    for (int k = 0; k < 6; k++) {
        for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(lens[k] >> (8 * i));
        memcpy(buf + 8, "{}", 2);
        write_raw(p, buf, sizeof buf);
        gptc_st_file f;
        CHECK_REFUSED(gptc_st_open(&f, p), p, needles[k]);
        CHECK(is_zeroed(&f));
    }
    /* a NUL inside the header */
    unsigned char nul[16] = {6, 0, 0, 0, 0, 0, 0, 0, '{', '}', 0, ' ', ' ', ' '};
    write_raw(p, nul, 14);
    gptc_st_file f;
    CHECK_REFUSED(gptc_st_open(&f, p), p, "not UTF-8");
}

TEST(io_st_refuses_garbage) {
    const char *p = tpath("%s", "garbage.safetensors");
    gptc_rng r;
    gptc_rng_seed(&r, 12345);
    unsigned char buf[300];
    for (int trial = 0; trial < 200; trial++) {
        size_t n = 1 + gptc_rng_next(&r) % sizeof buf;
        for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)gptc_rng_next(&r);
        if (trial % 2 && n > 9) {
            /* a plausible length and a '{', so that the JSON parser sees the garbage */
            uint64_t h = 1 + gptc_rng_next(&r) % (n - 8);
            for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(h >> (8 * i));
            buf[8] = '{';
        }
        write_raw(p, buf, n);
        gptc_st_file f;
        gptc_status st = gptc_st_open(&f, p);
        CHECK_MSG(st == GPTC_ERR_FORMAT, "trial %d: %s: %s", trial, gptc_status_name(st), gptc_last_error());
        gptc_st_close(&f);
    }
}

TEST(io_st_open_errors_and_close_safety) {
    gptc_st_file f;
    memset(&f, 0, sizeof f);
    gptc_st_close(&f); /* a zeroed struct */
    const char *missing = tpath("%s", "missing.safetensors");
    CHECK_EQ_INT(gptc_st_open(&f, missing), GPTC_ERR_IO);
    CHECK(strstr(gptc_last_error(), missing) != NULL);
    CHECK(is_zeroed(&f));
    gptc_st_close(&f);
    CHECK_EQ_INT(gptc_st_open(&f, test_tmpdir()), GPTC_ERR_IO); /* a folder */
    gptc_st_close(&f);
    CHECK(strcmp(gptc_dtype_name(GPTC_BF16), "BF16") == 0 && gptc_dtype_size(GPTC_BF16) == 2);
    CHECK(strcmp(gptc_dtype_name(GPTC_U8), "U8") == 0 && gptc_dtype_size(GPTC_I64) == 8);
}

TEST(io_st_reads_python_fixture) {
    /* The PyTorch reference fixture is written by tools/torch_gpt2.py, an independent writer. */
    const char *p = "tests/fixtures/gpt2_tiny_torch.safetensors";
    if (!gptc_is_file(p)) return; /* run from another folder, or the fixture is not made yet */
    gptc_st_file f;
    CHECK_OK(gptc_st_open(&f, p));
    CHECK(f.ntensors > 0);
    size_t total = 0;
    for (int i = 0; i < f.ntensors; i++) total += f.tensors[i].nbytes;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | ((const unsigned char *)f.map)[i];
    CHECK_EQ_INT(total, f.map_size - 8 - hlen); /* the tensors cover the data */
    gptc_st_close(&f);
}

/* kB of file-backed pages mapped into this process (RssFile in /proc/self/status), -1 if unknown */
static long rss_file_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssFile: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

/* Opening a file verifies every tensor's checksum, which reads all of it; the pages are released
 * tensor by tensor, so a 64 MiB file does not stay resident (a resumed run's checkpoint files are the
 * size of the model and its moments). Touching a tensor brings its pages back, and releasing drops
 * them again: the measure can see them. */
TEST(io_st_open_releases_what_it_verified) {
    if (rss_file_kb() < 0) {
        printf("    SKIP: no RssFile in /proc/self/status\n");
        return;
    }
    const size_t n = 16u << 20; /* 64 MiB of floats */
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)i;
    char path[600];
    snprintf(path, sizeof path, "%s/big.safetensors", test_tmpdir());
    gptc_st_entry e = {.name = "x", .dtype = GPTC_F32, .ndim = 1, .shape = {(int64_t)n}, .data = x};
    CHECK_OK(gptc_st_write(path, &e, 1, NULL, NULL, 0));
    free(x);
    long before = rss_file_kb();
    gptc_st_file f = {0};
    CHECK_OK(gptc_st_open(&f, path));
    long opened = rss_file_kb();
    const gptc_st_tensor *t = gptc_st_find(&f, "x");
    double sum = 0;
    for (size_t i = 0; t && i < n; i += 1024) sum += ((const float *)t->data)[i];
    long touched = rss_file_kb();
    if (t) gptc_st_release(&f, t);
    long released = rss_file_kb();
    gptc_st_close(&f);
    printf("    RssFile: %ld kB before, +%ld after open (checksums verified), +%ld touched, +%ld released\n", before,
           opened - before, touched - before, released - before);
    CHECK_MSG(opened - before < 8 * 1024, "open left %ld kB of the file resident", opened - before);
    CHECK_MSG(touched - before > 48 * 1024, "touching 64 MiB raised RssFile by only %ld kB", touched - before);
    CHECK_MSG(released - before < 8 * 1024, "release left %ld kB resident", released - before);
    CHECK(sum > 0);
}
