/* test_bad_inputs.c — hostile inputs through the real gptc command: each is refused with exactly one
 * line on stderr that names the file or flag, a non-zero exit (2 for a refusal before the run), no
 * crash, and nothing lost (an existing checkpoint folder or log unchanged, no output left behind).
 * The library-level checks of the same inputs are in test_data.c (shards, loader), test_io.c
 * (safetensors), test_train.c (checkpoints), test_plan.c and test_tokenizer_gpt2.c; these run the
 * CLI on files crafted the same way. docs/faults.md ("Hostile inputs") lists every message. */
#include "test.h"
#include "data/data.h"
#include "io/io.h"

#include "core/core.h"

#include <cjson/cJSON.h>
#include <ftw.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------- running the CLI */

/* Checks a refusal: exit `rc`, one line on stderr holding every needle (NULL-terminated). */
static void expect_refused(const char *what, test_cli_result r, int rc, ...) {
    CHECK_MSG(r.rc == rc, "%s: exit %d, want %d; stderr: %s", what, r.rc, rc, r.err);
    CHECK_MSG(test_count_lines(r.err) == 1, "%s: want one line on stderr, got: %s", what, r.err);
    va_list ap;
    va_start(ap, rc);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        CHECK_MSG(strstr(r.err, needle), "%s: stderr lacks \"%s\": %s", what, needle, r.err);
    va_end(ap);
    test_cli_free(&r);
}
#define REFUSED(what, r, ...) expect_refused(what, r, 2, __VA_ARGS__, (const char *)NULL)

/* ---------------------------------------------------------------- fixtures */

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* A listing of every entry under dir with each file's size and CRC-32C, sorted: equal before and
 * after means nothing was added, removed or changed. */
static char **g_lines;
static int g_nlines;
static size_t g_root_len;
static int digest_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)ftw;
    char line[1200];
    uint32_t crc = 0;
    if (type == FTW_F) {
        char *data = NULL;
        size_t len = 0;
        if (gptc_file_read_all(path, &data, &len) == GPTC_OK) crc = gptc_crc32c(0, data, len);
        gptc_free(data);
    }
    snprintf(line, sizeof line, "%s %c %lld %08x", path + g_root_len, type == FTW_F ? 'f' : 'd', (long long)sb->st_size, crc);
    g_lines = realloc(g_lines, sizeof *g_lines * (g_nlines + 1));
    g_lines[g_nlines++] = strdup(line);
    return 0;
}
static int by_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static char *tree_digest(const char *dir) {
    g_lines = NULL;
    g_nlines = 0;
    g_root_len = strlen(dir);
    CHECK(nftw(dir, digest_entry, 16, FTW_PHYS) == 0);
    qsort(g_lines, g_nlines, sizeof *g_lines, by_str);
    size_t len = 1;
    for (int i = 0; i < g_nlines; i++) len += strlen(g_lines[i]) + 1;
    char *out = calloc(1, len);
    for (int i = 0; i < g_nlines; i++) strcat(strcat(out, g_lines[i]), "\n"), free(g_lines[i]);
    free(g_lines);
    return out;
}

static void copy_tree(const char *from, const char *to) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    CHECK_EQ_INT(test_run(cmd, NULL), 0);
}

/* A tiny byte-vocabulary checkpoint folder (one step folder), trained once per run. */
static const char *tiny_ckpt(void) {
    static char dir[600];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/bad-ckpt", test_tmpdir());
        test_cli_result r = test_cli(NULL, "train --model tiny --data %s --batch 2 --seq 16 --steps 2 --threads 1 --quiet --ckpt %s",
                           test_shakespeare_data(), dir);
        CHECK_MSG(r.rc == 0, "making the checkpoint: %s", r.err);
        test_cli_free(&r);
    }
    return dir;
}

/* A copy of the tiny checkpoint as `name`; step gets its step folder. */
static const char *ckpt_copy(const char *name, char *step, size_t cap) {
    static char dir[8][600];
    static int k;
    char *d = dir[k++ % 8];
    snprintf(d, 600, "%s/%s", test_tmpdir(), name);
    copy_tree(tiny_ckpt(), d);
    snprintf(step, cap, "%s/step-00000002", d);
    return d;
}

/* Writes a shard of n tokens (i*7 mod 256) with token `bad_at` (if < n) set to `bad`. */
static void write_shard(const char *path, size_t n, size_t bad_at, uint16_t bad) {
    uint16_t *t = malloc((n ? n : 1) * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = (uint16_t)(i * 7 % 256);
    if (bad_at < n) t[bad_at] = bad;
    CHECK_OK(gptc_shard_write(path, t, n));
    free(t);
}

/* A raw shard file: the 1024-byte header (magic, version, count) then n tokens. */
static void write_raw_shard(const char *path, uint32_t magic, uint32_t version, uint32_t count, size_t n, size_t cut) {
    size_t len = 1024 + 2 * n;
    unsigned char *b = calloc(1, len);
    uint32_t hdr[3] = {magic, version, count};
    memcpy(b, hdr, sizeof hdr);
    test_write_file(path, b, cut < len ? cut : len);
    free(b);
}

/* ---- safetensors: the header as JSON, edited and written back in front of the same data */

typedef struct { cJSON *hdr; unsigned char *data; size_t dlen; } st_parts;

static st_parts st_read(const char *path) {
    st_parts p = {0};
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(gptc_file_read_all(path, &text, &len));
    uint64_t n = 0;
    memcpy(&n, text, 8);
    p.hdr = cJSON_ParseWithLength(text + 8, n);
    p.dlen = len - 8 - n;
    p.data = malloc(p.dlen);
    memcpy(p.data, text + 8 + n, p.dlen);
    gptc_free(text);
    return p;
}

/* Writes header text `h` (length field `hlen_field`, or its real length when 0) and the data. */
static void st_write_raw(const char *path, const char *h, uint64_t hlen_field, const st_parts *p) {
    size_t hl = strlen(h);
    uint64_t field = hlen_field ? hlen_field : hl;
    unsigned char *b = malloc(8 + hl + p->dlen);
    memcpy(b, &field, 8);
    memcpy(b + 8, h, hl);
    memcpy(b + 8 + hl, p->data, p->dlen);
    test_write_file(path, b, 8 + hl + p->dlen);
    free(b);
}

static void st_write(const char *path, st_parts *p) {
    char *h = cJSON_PrintUnformatted(p->hdr);
    st_write_raw(path, h, 0, p);
    free(h);
}

static void st_free(st_parts *p) {
    cJSON_Delete(p->hdr);
    free(p->data);
}

static void set_offsets(cJSON *t, double a, double b) {
    cJSON *o = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
    cJSON_ReplaceItemInArray(o, 0, cJSON_CreateNumber(a));
    cJSON_ReplaceItemInArray(o, 1, cJSON_CreateNumber(b));
}

static double offset_of(const cJSON *t, int i) {
    return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t, "data_offsets"), i)->valuedouble;
}

/* A fresh copy of the checkpoint's step folder whose model.safetensors is then edited; returns
 * the model.safetensors path and loads its parts into *p. */
static const char *st_case(const char *name, char *step, size_t cap, st_parts *p) {
    static char path[700];
    ckpt_copy(name, step, cap);
    snprintf(path, sizeof path, "%s/model.safetensors", step);
    *p = st_read(path);
    CHECK(p->hdr != NULL);
    return path;
}

/* sample --ckpt STEP must refuse the edited file, naming it and the reason. */
static void st_refused(const char *what, const char *step, const char *file, const char *reason) {
    char *before = tree_digest(step);
    REFUSED(what, test_cli(NULL, "sample --ckpt %s --tokens 4 --threads 1", step), file, reason);
    char *after = tree_digest(step);
    CHECK_MSG(strcmp(before, after) == 0, "%s: the checkpoint folder changed", what);
    free(before);
    free(after);
}

/* ---------------------------------------------------------------- the inputs */

/* Library: data_loader_bad_token (the per-batch check), mpi_bad_data_on_one_rank_stops_the_job. Here:
 * an id in the last quarter of the shard, which a short run would never read, is refused before the
 * first step, and the run folder is never made. */
TEST(bad_input_token_id_beyond_vocab) {
    char dir[512], shard[600], ck[600];
    test_dir("bad_", "vocab", dir, sizeof dir);
    write_shard(test_path(shard, sizeof shard, "%s/s.bin", dir), 5000, 4000, 300);
    test_path(ck, sizeof ck, "%s/ck", dir);
    REFUSED("train on a shard with id 300 (vocab 257)",
            test_cli(NULL, "train --model tiny --vocab 257 --data %s --batch 2 --seq 16 --steps 2 --threads 1 --ckpt %s", shard, ck),
            "--data", shard, "token id 300 at offset 4000", "vocabulary 257");
    CHECK_MSG(!exists(ck), "the refused run made %s", ck);
    /* the same shard as --val-data is refused naming that flag */
    char good[600];
    write_shard(test_path(good, sizeof good, "%s/good.bin", dir), 5000, 5000, 0);
    REFUSED("--val-data with id 300",
            test_cli(NULL, "train --model tiny --vocab 257 --data %s --val-data %s --batch 2 --seq 16 --steps 2 --threads 1", good, shard),
            "--val-data", shard, "token id 300");
}

/* Library: data_shard_refusals. */
TEST(bad_input_shard_size_disagrees_with_header) {
    char dir[512], p[600];
    test_dir("bad_", "shard", dir, sizeof dir);
    const char *train = "train --model tiny --vocab 257 --batch 2 --seq 16 --steps 2 --threads 1 --data";
    write_raw_shard(test_path(p, sizeof p, "%s/longer.bin", dir), 20240520, 1, 6000, 5000, SIZE_MAX);
    REFUSED("count over the data", test_cli(NULL, "%s %s", train, p), p, "header says 6000 tokens (13024 bytes) but the file holds 11024");
    write_raw_shard(test_path(p, sizeof p, "%s/shorter.bin", dir), 20240520, 1, 4000, 5000, SIZE_MAX);
    REFUSED("count under the data", test_cli(NULL, "%s %s", train, p), p, "header says 4000 tokens");
    write_raw_shard(test_path(p, sizeof p, "%s/truncated.bin", dir), 20240520, 1, 5000, 5000, 1024 + 3001);
    REFUSED("truncated", test_cli(NULL, "%s %s", train, p), p, "truncated");
    write_raw_shard(test_path(p, sizeof p, "%s/header.bin", dir), 20240520, 1, 5000, 5000, 500);
    REFUSED("cut inside the header", test_cli(NULL, "%s %s", train, p), p, "shorter than the 1024-byte header");
    write_raw_shard(test_path(p, sizeof p, "%s/magic.bin", dir), 1234, 1, 5000, 5000, SIZE_MAX);
    REFUSED("wrong magic", test_cli(NULL, "%s %s", train, p), p, "magic 1234, expected 20240520");
    write_raw_shard(test_path(p, sizeof p, "%s/version.bin", dir), 20240520, 2, 5000, 5000, SIZE_MAX);
    REFUSED("wrong version", test_cli(NULL, "%s %s", train, p), p, "version 2, expected 1");
}

/* Library: data_loader_refusals. T+1 tokens make one window; T make none. */
TEST(bad_input_data_shorter_than_window) {
    char dir[512], p[600];
    test_dir("bad_", "short", dir, sizeof dir);
    const char *train = "train --model tiny --vocab 257 --batch 1 --seq 16 --steps 1 --threads 1 --quiet --data";
    write_shard(test_path(p, sizeof p, "%s/t.bin", dir), 16, 99, 0);
    REFUSED("T tokens", test_cli(NULL, "%s %s", train, p), "--data", p, "holds 16 tokens in 0 windows of 16+1");
    write_shard(test_path(p, sizeof p, "%s/zero.bin", dir), 0, 99, 0);
    REFUSED("no tokens", test_cli(NULL, "%s %s", train, p), p, "holds 0 tokens");
    write_shard(test_path(p, sizeof p, "%s/t1.bin", dir), 17, 99, 0);
    test_cli_result r = test_cli(NULL, "%s %s", train, p);
    CHECK_MSG(r.rc == 0, "T+1 tokens: exit %d: %s", r.rc, r.err);
    test_cli_free(&r);
    /* two windows for a batch of 2 per micro-step is the least; one is refused */
    REFUSED("fewer windows than the batch", test_cli(NULL, "train --model tiny --vocab 257 --batch 2 --seq 16 --steps 1 --data %s --threads 1", p),
            "fewer than the 2", "--batch or --seq");
}

/* Library: checkpoint_round_trip_and_refusals, train_resume_refuses_another_gelu. */
TEST(bad_input_checkpoint_of_another_shape) {
    char step[700];
    const char *ck = ckpt_copy("bad-shape", step, sizeof step);
    char *before = tree_digest(ck);
    REFUSED("resume with --channels 32",
            test_cli(NULL, "train --model tiny --channels 32 --data %s --batch 2 --seq 16 --steps 4 --ckpt %s --threads 1",
                test_shakespeare_data(), ck),
            "--ckpt", step, "channels=64", "channels=32");
    REFUSED("resume as small-cpu",
            test_cli(NULL, "train --model small-cpu --data %s --batch 2 --seq 16 --steps 4 --ckpt %s --threads 1", test_shakespeare_data(), ck),
            "layers=2", "layers=4");
    char *after = tree_digest(ck);
    CHECK_MSG(strcmp(before, after) == 0, "the refused resumes changed %s", ck);
    free(before);
    free(after);

    /* config.json that disagrees with model.safetensors: the folder was edited or mixed up */
    ckpt_copy("bad-config", step, sizeof step);
    char cfg[800];
    snprintf(cfg, sizeof cfg, "%s/config.json", step);
    char *text = test_slurp(cfg);
    cJSON *o = cJSON_Parse(text);
    cJSON_ReplaceItemInObject(o, "n_embd", cJSON_CreateNumber(32));
    char *edited = cJSON_Print(o);
    test_write_file(cfg, edited, strlen(edited));
    free(edited);
    free(text);
    cJSON_Delete(o);
    st_refused("config.json says n_embd 32", step, cfg, "n_embd is 32 but model.safetensors holds 64");

    /* metadata that claims another shape is refused before the model is allocated for it */
    st_parts p;
    const char *model = st_case("bad-meta", step, sizeof step, &p);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(p.hdr, "__metadata__");
    cJSON_ReplaceItemInObject(meta, "gptc.context", cJSON_CreateString("1000000000"));
    cJSON_ReplaceItemInObject(meta, "gptc.layers", cJSON_CreateString("1000"));
    st_write(model, &p);
    st_free(&p);
    st_refused("metadata of a 64G-parameter model", step, model, "config describes layers=1000");
}

TEST(bad_input_safetensors_lying_offsets) {
    char step[700];
    st_parts p;
    /* a span 4 bytes longer than wte's shape needs */
    const char *model = st_case("bad-st-lie", step, sizeof step, &p);
    cJSON *wte = cJSON_GetObjectItemCaseSensitive(p.hdr, "wte.weight");
    set_offsets(wte, offset_of(wte, 0), offset_of(wte, 1) + 4);
    st_write(model, &p);
    st_refused("wte's span 4 bytes too long", step, model, "data_offsets span 65796 bytes but a F32 tensor of 16448 elements needs 65792");
    /* the last tensor running past the end of the data */
    cJSON *last = NULL, *t;
    double end = -1;
    cJSON_ArrayForEach(t, p.hdr) if (strcmp(t->string, "__metadata__") && offset_of(t, 1) > end) end = offset_of(t, 1), last = t;
    set_offsets(wte, offset_of(wte, 0), offset_of(wte, 1) - 4);
    set_offsets(last, offset_of(last, 0) + 64, offset_of(last, 1) + 64);
    st_write(model, &p);
    st_refused("a tensor past the data", step, model, "run past the data");
    set_offsets(last, offset_of(last, 0) - 64, offset_of(last, 1) - 64);
    /* a dtype whose size disagrees with the span, and a shape whose product does */
    cJSON_ReplaceItemInObject(wte, "dtype", cJSON_CreateString("F16"));
    st_write(model, &p);
    st_refused("wte declared F16", step, model, "a F16 tensor of 16448 elements needs 32896");
    cJSON_ReplaceItemInObject(wte, "dtype", cJSON_CreateString("F32"));
    cJSON *shape = cJSON_GetObjectItemCaseSensitive(wte, "shape");
    cJSON_ReplaceItemInArray(shape, 0, cJSON_CreateNumber(256));
    st_write(model, &p);
    st_refused("wte's shape one row short", step, model, "a F32 tensor of 16384 elements needs 65536");
    cJSON_ReplaceItemInArray(shape, 0, cJSON_CreateNumber(257));
    /* the header length pointing past the end of the file */
    char *h = cJSON_PrintUnformatted(p.hdr);
    st_write_raw(model, h, strlen(h) + p.dlen + 100, &p);
    free(h);
    st_refused("header length past the file", step, model, "header length");
    /* a header that is JSON but not an object, and one that is not JSON */
    st_write_raw(model, "[1, 2, 3]", 0, &p);
    st_refused("header is an array", step, model, "does not start with '{'");
    st_write_raw(model, "{\"wte.weight\": ", 0, &p);
    st_refused("header is cut JSON", step, model, "not valid JSON");
    st_free(&p);
}

TEST(bad_input_safetensors_overlapping_tensors) {
    char step[700];
    st_parts p;
    const char *model = st_case("bad-st-overlap", step, sizeof step, &p);
    /* two tensors of one size on the same bytes (the data no longer fully covered is the same lie) */
    cJSON *w = cJSON_GetObjectItemCaseSensitive(p.hdr, "h.0.ln_1.weight"), *b = cJSON_GetObjectItemCaseSensitive(p.hdr, "h.0.ln_1.bias");
    double a0 = offset_of(b, 0), a1 = offset_of(b, 1);
    set_offsets(b, offset_of(w, 0), offset_of(w, 1));
    st_write(model, &p);
    st_refused("ln_1.bias on ln_1.weight's bytes", step, model, "overlaps");
    set_offsets(b, a0, a1);
    /* one name twice */
    cJSON_AddItemToObject(p.hdr, "wte.weight", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(p.hdr, "wte.weight"), 1));
    st_write(model, &p);
    st_refused("wte.weight twice", step, model, "wte.weight appears twice");
    st_free(&p);
}

TEST(bad_input_safetensors_huge_lengths) {
    char step[700];
    st_parts p;
    const char *model = st_case("bad-st-huge", step, sizeof step, &p);
    cJSON *wte = cJSON_GetObjectItemCaseSensitive(p.hdr, "wte.weight");
    double a0 = offset_of(wte, 0), a1 = offset_of(wte, 1);
    set_offsets(wte, 0, 18446744073709551615.0);
    st_write(model, &p);
    st_refused("end offset 2^64-1", step, model, "data_offsets must be two non-negative integers");
    set_offsets(wte, 9223372036854775808.0, 9223372036854775808.0 + 65792);
    st_write(model, &p);
    st_refused("offsets at 2^63", step, model, "data_offsets");
    set_offsets(wte, a0, a1);
    cJSON *shape = cJSON_GetObjectItemCaseSensitive(wte, "shape");
    cJSON_ReplaceItemInArray(shape, 0, cJSON_CreateNumber(4611686018427387904.0));
    cJSON_ReplaceItemInArray(shape, 1, cJSON_CreateNumber(4611686018427387904.0));
    st_write(model, &p);
    st_refused("shape [2^62, 2^62]", step, model, "shape entry 0");
    cJSON_ReplaceItemInArray(shape, 0, cJSON_CreateNumber(1 << 20));
    cJSON_ReplaceItemInArray(shape, 1, cJSON_CreateNumber(1 << 20));
    st_write(model, &p);
    st_refused("shape [2^20, 2^20]", step, model, "elements needs");
    cJSON_ReplaceItemInArray(shape, 0, cJSON_CreateNumber(257));
    cJSON_ReplaceItemInArray(shape, 1, cJSON_CreateNumber(64));
    char *h = cJSON_PrintUnformatted(p.hdr);
    st_write_raw(model, h, UINT64_MAX, &p);
    free(h);
    st_refused("header length 2^64-1", step, model, "over the 100 MB limit");
    st_free(&p);
}

/* GPT-2's BPE is byte-level: any bytes encode, and decode back to the same bytes. Library:
 * tokenizer_gpt2_roundtrip_random_bytes. Here through `prepare` (the shard decodes to the file),
 * `tokenize` (the same ids) and `sample --prompt` (the prompt comes back byte for byte). */
TEST(bad_input_non_utf8_text_round_trips) {
    gptc_tokenizer *tok = NULL;
    if (gptc_tokenizer_open("gpt2", &tok) != GPTC_OK) {
        printf("    SKIP: GPT-2 vocabulary files not found: %s\n", gptc_last_error());
        return;
    }
    char dir[512], in[600], out[600], shard[700];
    test_dir("bad_", "utf8", dir, sizeof dir);
    /* invalid: lone 0xff/0xfe, a lone continuation byte, a cut 2-byte and 4-byte character, a UTF-16
     * surrogate, an overlong '/', then valid text and bytes from a fixed generator */
    static const char bad[] = "abc \xff\xfe \x80 x\xc3 caf\xc3\xa9 \xed\xa0\x80 \xc0\xaf \xf0\x9f\x98 end\n";
    size_t n = sizeof bad - 1 + 4000;
    unsigned char *text = malloc(n);
    memcpy(text, bad, sizeof bad - 1);
    uint64_t x = 12345;
    for (size_t i = sizeof bad - 1; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL, text[i] = (unsigned char)(x >> 56);
    test_write_file(test_path(in, sizeof in, "%s/in.txt", dir), text, n);
    test_path(out, sizeof out, "%s/shards", dir);
    test_cli_result r = test_cli(NULL, "prepare --tokenizer gpt2 --val-fraction 0 %s --out %s", in, out);
    CHECK_MSG(r.rc == 0 && !r.err[0], "prepare: exit %d: %s", r.rc, r.err);
    test_cli_free(&r);
    gptc_shard s;
    CHECK_OK(gptc_shard_open(&s, test_path(shard, sizeof shard, "%s/train_000000.bin", out)));
    unsigned char *back = malloc(n + 64);
    size_t len = 0;
    bool ok = s.ntok > 1 && s.tokens[0] == tok->eot;
    for (size_t i = 1; ok && i < s.ntok; i++) {
        char buf[128];
        int k = tok->decode(tok, s.tokens[i], buf, sizeof buf);
        ok = k > 0 && len + (size_t)k <= n;
        if (ok) memcpy(back + len, buf, (size_t)k), len += (size_t)k;
    }
    CHECK_MSG(ok && len == n && memcmp(back, text, n) == 0, "the shard does not decode to the input (%zu of %zu bytes)", len, n);
    /* tokenize gives the same ids */
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "%s tokenize --ids-only - < %s", test_gptc_bin(), in);
    char *ids = NULL;
    CHECK_EQ_INT(test_run(cmd, &ids), 0);
    size_t k = 1;
    for (char *c = ids, *end; ids && k < s.ntok; c = end, k++) {
        long id = strtol(c, &end, 10);
        if (end == c || id != s.tokens[k]) break;
    }
    CHECK_MSG(k == s.ntok, "tokenize differs from the shard at token %zu", k);
    free(ids);
    /* the shown pieces are escaped, never raw invalid bytes */
    r = test_cli(NULL, "tokenize \"$(printf 'a\\377b')\"");
    CHECK_MSG(r.rc == 0 && strstr(r.out, "\"\\xff\"") && !strchr(r.out, '\xff'), "tokenize shows: %s", r.out);
    test_cli_free(&r);
    gptc_shard_close(&s);
    free(back);
    free(text);
    gptc_tokenizer_free(tok);
    /* a prompt of invalid bytes comes back unchanged before the sample */
    r = test_cli(NULL, "sample --ckpt %s --tokens 3 --threads 1 --prompt \"$(printf 'x\\377\\376\\303')\"", tiny_ckpt());
    CHECK_MSG(r.rc == 0 && memcmp(r.out, "x\xff\xfe\xc3", 4) == 0, "sample: exit %d: %s", r.rc, r.err);
    test_cli_free(&r);
}

TEST(bad_input_empty_files) {
    char dir[512], p[700], step[700];
    test_dir("bad_", "empty", dir, sizeof dir);
    /* text to prepare: refused, no output folder */
    test_write_file(test_path(p, sizeof p, "%s/empty.txt", dir), "", 0);
    char outdir[600];
    test_path(outdir, sizeof outdir, "%s/prep", dir);
    REFUSED("empty text", test_cli(NULL, "prepare --tokenizer byte %s --out %s", p, outdir), p, "empty");
    CHECK(!exists(outdir));
    /* a shard */
    test_write_file(test_path(p, sizeof p, "%s/empty.bin", dir), "", 0);
    REFUSED("empty shard", test_cli(NULL, "train --model tiny --data %s --seq 16 --threads 1", p), p, "0 bytes");
    /* meta.json in a prepared folder */
    char data[600];
    copy_tree(test_shakespeare_data(), test_path(data, sizeof data, "%s/data", dir));
    test_write_file(test_path(p, sizeof p, "%s/meta.json", data), "", 0);
    REFUSED("empty meta.json", test_cli(NULL, "train --model tiny --data %s --seq 16 --threads 1", data), p, "not a JSON object");
    test_write_file(p, "[1, 2]", 6);
    REFUSED("meta.json an array", test_cli(NULL, "train --model tiny --data %s --seq 16 --threads 1", data), p, "not a JSON object");
    /* encoder.json and vocab.bpe */
    char vocab[600], env[700];
    test_dir("bad_", "empty/vocab", vocab, sizeof vocab);
    snprintf(env, sizeof env, "GPTC_VOCAB_DIR=%s", vocab);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp data/gpt2/encoder.json data/gpt2/vocab.bpe %s/", vocab);
    if (test_run(cmd, NULL) != 0) {
        printf("    SKIP (vocabulary files): data/gpt2 not found\n");
        return;
    }
    test_write_file(test_path(p, sizeof p, "%s/encoder.json", vocab), "", 0);
    REFUSED("empty encoder.json", test_cli(env, "tokenize hello"), "--tokenizer gpt2", "encoder.json", "not valid JSON");
    CHECK_EQ_INT(test_run(cmd, NULL), 0);
    test_write_file(test_path(p, sizeof p, "%s/vocab.bpe", vocab), "", 0);
    REFUSED("empty vocab.bpe", test_cli(env, "prepare --tokenizer gpt2 data/tinyshakespeare.txt --out %s", outdir), "vocab.bpe");
    CHECK(!exists(outdir));
    /* the checkpoint's three files: sample refuses, resume refuses and keeps the folder */
    const char *files[] = {"model.safetensors", "config.json", "optim.safetensors"};
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "bad-empty-%d", i);
        const char *ck = ckpt_copy(name, step, sizeof step);
        test_write_file(test_path(p, sizeof p, "%s/%s", step, files[i]), "", 0);
        if (i < 2) REFUSED(files[i], test_cli(NULL, "sample --ckpt %s --tokens 3 --threads 1", step), p, "empty");
        char *before = tree_digest(ck);
        REFUSED(files[i], test_cli(NULL, "train --model tiny --data %s --batch 2 --seq 16 --steps 4 --keep 1 --ckpt %s --threads 1",
                              test_shakespeare_data(), ck),
                "--ckpt", "only checkpoint, step-00000002, does not load", p, "empty");
        char *after = tree_digest(ck);
        CHECK_MSG(strcmp(before, after) == 0, "empty %s: the refused resume changed %s", files[i], ck);
        free(before);
        free(after);
    }
    /* a prompt: the flag needs a value; empty text to tokenize is zero tokens, not an error */
    REFUSED("empty prompt", test_cli(NULL, "sample --ckpt %s --prompt '' --threads 1", tiny_ckpt()), "--prompt");
    test_cli_result r = test_cli(NULL, "tokenize - < %s/empty.txt", dir);
    CHECK_MSG(r.rc == 0 && strstr(r.out, "0 tokens, 0 bytes"), "tokenize of nothing: %d %s%s", r.rc, r.out, r.err);
    test_cli_free(&r);
}

/* A damaged newest checkpoint with an older valid one is resumed from the older one with one
 * warning (test_train.c: checkpoint_round_trip_and_refusals); when none is valid the folder is
 * refused, not trained afresh and pruned. */
TEST(bad_input_truncated_checkpoint_only) {
    char step[700], model[800];
    const char *ck = ckpt_copy("bad-trunc", step, sizeof step);
    snprintf(model, sizeof model, "%s/model.safetensors", step);
    struct stat st;
    CHECK(stat(model, &st) == 0 && truncate(model, st.st_size - 100) == 0);
    char *before = tree_digest(ck);
    REFUSED("truncated model.safetensors, resume",
            test_cli(NULL, "train --model tiny --data %s --batch 2 --seq 16 --steps 4 --keep 1 --ckpt %s --threads 1", test_shakespeare_data(), ck),
            ck, "does not load", model);
    REFUSED("truncated model.safetensors, sample", test_cli(NULL, "sample --ckpt %s --threads 1", ck), ck, model);
    char *after = tree_digest(ck);
    CHECK_MSG(strcmp(before, after) == 0, "the refusals changed %s", ck);
    free(before);
    free(after);
}

/* Library: cli_refuses_bad_values (test_cli.c), plan_train_refuses_oversized_run (test_plan.c). */
TEST(bad_input_absurd_flags) {
    const char *d = test_shakespeare_data();
    char ck[600], losses[600], train[1400];
    snprintf(ck, sizeof ck, "%s/bad-absurd-ck", test_tmpdir());
    snprintf(losses, sizeof losses, "%s/bad-absurd.losses", test_tmpdir());
    test_write_file(losses, "kept\n", 5);
    /* --steps 2 --threads 1: a flag wrongly accepted trains briefly instead of hanging the suite */
    snprintf(train, sizeof train, "train --model tiny --data %s --ckpt %s --log-losses %s --steps 2 --threads 1", d, ck,
             losses);
    static const struct { const char *flags, *needle; } cases[] = {
        {"--batch 0", "--batch 0: must be between 1 and 1048576"},
        {"--batch -3", "--batch -3: must be between 1 and 1048576"},
        {"--batch 1e18", "--batch 1e18: expected an integer"},
        {"--batch 99999999999999999999", "--batch 99999999999999999999: expected an integer"},
        {"--batch 12abc", "--batch 12abc: expected an integer"},
        {"--batch ' 12'", "--batch ' 12': expected an integer"},
        {"--batch ''", "--batch : expected an integer"},
        {"--seq 65", "--seq 65: longer than the model's context 64"},
        {"--lr nan", "--lr nan: expected a number"},
        {"--lr inf", "--lr inf: expected a number"},
        {"--lr 1e39", "--lr 1e39: must be between"},
        {"--clip 1e300", "--clip 1e300: must be at most"},
        {"--steps 99999999999", "--steps 99999999999: must be between 1 and 1000000000"},
        {"--threads 100000", "--threads 100000: must be between 0 and 4096"},
        {"--seed -1", "--seed -1: expected a non-negative integer"},
        {"--batch 2 --seq 16 --total-batch 1000000000000000000", "--total-batch 1000000000000000000: would take"},
        /* more memory than any machine here has: refused before allocating, saying how much */
        {"--batch 1048576 --context 1024 --seq 1024", "this run needs"},
        /* a size that would wrap 64-bit sums */
        {"--layers 1000 --heads 1000 --channels 64000 --context 1048576 --seq 1048576 --batch 1048576", "EiB"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        REFUSED(cases[i].flags, test_cli(NULL, "%s %s", train, cases[i].flags), cases[i].needle);
    CHECK_MSG(!exists(ck), "a refused run made %s", ck);
    char *kept = test_slurp(losses);
    CHECK_MSG(strcmp(kept, "kept\n") == 0, "a refused run emptied --log-losses %s", losses);
    free(kept);
    /* the memory refusal names both sizes */
    test_cli_result r = test_cli(NULL, "train --model tiny --data %s --batch 1048576 --context 1024 --seq 1024 --threads 1", d);
    CHECK_MSG(r.rc == 2 && strstr(r.err, "GiB but the machine has") && test_count_lines(r.err) == 1, "%s", r.err);
    test_cli_free(&r);
    /* gptc plan */
    REFUSED("plan --memory abc", test_cli(NULL, "plan --memory abc"), "--memory abc: expected a number");
    REFUSED("plan --memory -1", test_cli(NULL, "plan --memory -1"), "--memory -1");
    REFUSED("plan --ranks 0", test_cli(NULL, "plan --ranks 0"), "--ranks 0");
    REFUSED("plan --seq 2048", test_cli(NULL, "plan --seq 2048"), "--seq 2048");
    /* sample and prepare */
    REFUSED("sample --top-p 2", test_cli(NULL, "sample --ckpt %s --top-p 2 --threads 1", tiny_ckpt()), "--top-p 2");
    REFUSED("sample --tokens 0", test_cli(NULL, "sample --ckpt %s --tokens 0 --threads 1", tiny_ckpt()), "--tokens 0");
    REFUSED("sample --temperature -1", test_cli(NULL, "sample --ckpt %s --temperature -1 --threads 1", tiny_ckpt()), "--temperature -1");
    REFUSED("sample --samples 0", test_cli(NULL, "sample --ckpt %s --samples 0 --threads 1", tiny_ckpt()), "--samples 0");
    REFUSED("sample --dtype fp16", test_cli(NULL, "sample --ckpt %s --dtype fp16 --threads 1", tiny_ckpt()), "--dtype fp16");
    REFUSED("prepare --val-fraction 1.5", test_cli(NULL, "prepare data/tinyshakespeare.txt --out %s --val-fraction 1.5", ck), "--val-fraction 1.5");
    REFUSED("prepare --shard-tokens 0", test_cli(NULL, "prepare data/tinyshakespeare.txt --out %s --shard-tokens 0", ck), "--shard-tokens 0");
    CHECK(!exists(ck));
}
