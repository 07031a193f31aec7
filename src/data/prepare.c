/* prepare.c — `gptc prepare`: tokenizes text files into train/val token shards plus a meta.json.
 *
 * The token stream is, for each input in order, eot followed by the file's tokens (as llm.c does:
 * an eot before every document); "<|endoftext|>" inside a file is plain text. The last
 * val_fraction of the stream (rounded down, at least one token when val_fraction > 0) is the val
 * split. OUT gets train_000000.bin, train_000001.bin, ... and val_000000.bin, ... of at most
 * shard_tokens tokens each, then meta.json last; every file is written atomically. Shards named
 * train_*.bin or val_*.bin in OUT that this run did not write (left from an earlier, larger run)
 * are removed so that the folder holds exactly this data set.
 *
 * Every option and input is checked, and every input read and tokenized, before anything is
 * written. The whole token stream is held in memory (2 bytes a token). */
#include "data/data.h"
#include "io/io.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void gptc_prepare_options_default(gptc_prepare_options *o) {
    memset(o, 0, sizeof *o);
    o->tokenizer = "byte";
    o->val_fraction = 0.1f;
    o->shard_tokens = 100000000;
}

/* ---------------------------------------------------------------- checks */

static gptc_status prepare_check_input(const char *path, int i) {
    if (!path || !path[0]) return gptc_fail(GPTC_ERR_ARG, "input %d: missing file name", i + 1);
    struct stat sb;
    if (stat(path, &sb) != 0) return gptc_fail(GPTC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return gptc_fail(GPTC_ERR_IO, "%s: not a regular file; give text files to tokenize", path);
    if (access(path, R_OK) != 0) return gptc_fail(GPTC_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (sb.st_size == 0) return gptc_fail(GPTC_ERR_ARG, "%s: empty; nothing to tokenize", path);
    return GPTC_OK;
}

static gptc_status prepare_check(const gptc_prepare_options *o) {
    if (!o->out || !o->out[0]) return gptc_fail(GPTC_ERR_ARG, "--out: missing; name the folder for the shards");
    struct stat sb;
    if (stat(o->out, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return gptc_fail(GPTC_ERR_ARG, "--out %s: exists and is not a folder", o->out);
    if (!(o->val_fraction >= 0.0f && o->val_fraction < 1.0f))
        return gptc_fail(GPTC_ERR_ARG, "--val-fraction %g: must be at least 0 and below 1", (double)o->val_fraction);
    if (o->shard_tokens < 1 || o->shard_tokens > INT32_MAX)
        return gptc_fail(GPTC_ERR_ARG, "--shard-tokens %ld: must be between 1 and %d", o->shard_tokens, INT32_MAX);
    if (o->ninputs < 1 || !o->inputs)
        return gptc_fail(GPTC_ERR_ARG, "no input files; give one or more text files to tokenize");
    for (int i = 0; i < o->ninputs; i++) {
        gptc_status st = prepare_check_input(o->inputs[i], i);
        if (st != GPTC_OK) return st;
    }
    return GPTC_OK;
}

/* ---------------------------------------------------------------- tokenizing */

/* Appends eot and the tokens of each input to *toks ([*n] used of [*cap], uint16 ids). */
static gptc_status prepare_tokenize(const gptc_prepare_options *o, const gptc_tokenizer *tok, uint16_t **toks,
                                    size_t *n, size_t *cap) {
    int *ids = NULL; /* [idcap] scratch: one file's ids */
    size_t idcap = 0;
    gptc_status st = GPTC_OK;
    for (int f = 0; f < o->ninputs && st == GPTC_OK; f++) {
        const char *path = o->inputs[f];
        char *text = NULL;
        size_t len = 0;
        st = gptc_file_read_all(path, &text, &len);
        if (st != GPTC_OK) break;
        if (len == 0) {
            gptc_free(text);
            st = gptc_fail(GPTC_ERR_ARG, "%s: empty; nothing to tokenize", path);
            break;
        }
        size_t nid = 0;
        st = tok->encode(tok, NULL, text, len, false, &ids, &nid, &idcap);
        gptc_free(text);
        if (st != GPTC_OK) {
            gptc_fail_prefix(st, "%s", path);
            break;
        }
        if (*n + 1 + nid > *cap) {
            size_t want = *cap * 2 > *n + 1 + nid ? *cap * 2 : *n + 1 + nid;
            uint16_t *p = realloc(*toks, want * sizeof *p);
            if (!p) {
                st = gptc_fail(GPTC_ERR_NOMEM, "%s: cannot allocate %zu tokens", path, want);
                break;
            }
            *toks = p;
            *cap = want;
        }
        uint16_t *out = *toks;
        out[(*n)++] = (uint16_t)tok->eot;
        for (size_t i = 0; i < nid; i++) {
            GPTC_ASSERT(ids[i] >= 0 && ids[i] < tok->vocab);
            out[(*n)++] = (uint16_t)ids[i];
        }
    }
    free(ids);
    return st;
}

/* ---------------------------------------------------------------- writing */

static void prepare_path(char *buf, size_t cap, const char *dir, const char *name) {
    size_t dlen = strlen(dir);
    snprintf(buf, cap, "%s%s%s", dir, dlen && dir[dlen - 1] == '/' ? "" : "/", name);
}

/* Writes toks[0..n) as PREFIX_000000.bin, ... of at most per tokens each; returns the count in *nfiles. */
static gptc_status prepare_write_split(const char *dir, const char *prefix, const uint16_t *toks, size_t n,
                                       size_t per, int *nfiles) {
    *nfiles = 0;
    for (size_t off = 0; off < n; off += per) {
        size_t k = n - off < per ? n - off : per;
        char name[64], path[4200];
        snprintf(name, sizeof name, "%s_%06d.bin", prefix, *nfiles);
        prepare_path(path, sizeof path, dir, name);
        gptc_status st = gptc_shard_write(path, toks + off, k);
        if (st != GPTC_OK) return st;
        (*nfiles)++;
    }
    return GPTC_OK;
}

/* True when name is PREFIX_NNNNNN.bin with an index below nfiles, i.e. one this run wrote. */
static bool prepare_is_ours(const char *name, const char *prefix, int nfiles) {
    size_t plen = strlen(prefix);
    if (strncmp(name, prefix, plen) != 0 || name[plen] != '_') return false;
    char *end = NULL;
    errno = 0;
    long idx = strtol(name + plen + 1, &end, 10);
    if (errno || idx < 0 || idx >= nfiles) return false;
    char canon[64];
    snprintf(canon, sizeof canon, "%s_%06ld.bin", prefix, idx);
    return strcmp(canon, name) == 0;
}

/* Removes train_*.bin / val_*.bin files in dir that this run did not write. */
static gptc_status prepare_remove_stale(const char *dir, int ntrain, int nval) {
    DIR *d = opendir(dir);
    if (!d) return gptc_fail(GPTC_ERR_IO, "%s: cannot open the folder: %s", dir, strerror(errno));
    gptc_status st = GPTC_OK;
    struct dirent *e;
    while (st == GPTC_OK && (e = readdir(d)) != NULL) {
        bool train = fnmatch("train_*.bin", e->d_name, 0) == 0, val = fnmatch("val_*.bin", e->d_name, 0) == 0;
        if (!train && !val) continue;
        if (train && prepare_is_ours(e->d_name, "train", ntrain)) continue;
        if (val && prepare_is_ours(e->d_name, "val", nval)) continue;
        char path[4200];
        prepare_path(path, sizeof path, dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (unlink(path) != 0)
            st = gptc_fail(GPTC_ERR_IO, "%s: cannot remove this shard left from an earlier run: %s", path,
                           strerror(errno));
    }
    closedir(d);
    return st;
}

static gptc_status prepare_write_meta(const char *dir, const gptc_tokenizer *tok, size_t ntrain, size_t nval) {
    char path[4200];
    prepare_path(path, sizeof path, dir, "meta.json");
    cJSON *root = cJSON_CreateObject();
    char *text = NULL;
    if (root && cJSON_AddStringToObject(root, "tokenizer", tok->name) &&
        cJSON_AddNumberToObject(root, "vocab", tok->vocab) && cJSON_AddNumberToObject(root, "eot", tok->eot) &&
        cJSON_AddNumberToObject(root, "train_tokens", (double)ntrain) &&
        cJSON_AddNumberToObject(root, "val_tokens", (double)nval))
        text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return gptc_fail(GPTC_ERR_NOMEM, "%s: cannot build the JSON", path);
    const void *parts[2] = {text, "\n"};
    size_t lens[2] = {strlen(text), 1};
    gptc_status st = gptc_file_write_atomic(path, parts, lens, 2);
    cJSON_free(text);
    return st;
}

gptc_status gptc_prepare(const gptc_prepare_options *o, size_t *train_tokens, size_t *val_tokens) {
    if (train_tokens) *train_tokens = 0;
    if (val_tokens) *val_tokens = 0;
    gptc_tokenizer *tok = NULL;
    gptc_status st = gptc_tokenizer_open(o->tokenizer, &tok);
    if (st != GPTC_OK) {
        char msg[1024]; /* the tokenizer's message starts "tokenizer NAME: ..."; make it name the flag */
        snprintf(msg, sizeof msg, "%s", gptc_last_error());
        return gptc_fail(st, "--%s", msg);
    }
    GPTC_ASSERT(tok->vocab <= 65536); /* shards hold uint16 ids */
    uint16_t *toks = NULL; /* [cap], n used: the whole token stream */
    size_t n = 0, cap = 0;
    st = prepare_check(o);
    if (st == GPTC_OK) st = prepare_tokenize(o, tok, &toks, &n, &cap);
    if (st != GPTC_OK) goto done;

    size_t nval = (size_t)((double)n * (double)o->val_fraction);
    if (o->val_fraction > 0 && nval == 0) nval = 1;
    if (nval >= n) nval = n - 1; /* n >= 2 (eot + a byte) and val_fraction < 1: keeps a train token */
    size_t ntrain = n - nval;

    /* nothing has been written before this point */
    int ntrain_files = 0, nval_files = 0;
    st = gptc_mkdir_p(o->out);
    if (st == GPTC_OK)
        st = prepare_write_split(o->out, "train", toks, ntrain, (size_t)o->shard_tokens, &ntrain_files);
    if (st == GPTC_OK)
        st = prepare_write_split(o->out, "val", toks + ntrain, nval, (size_t)o->shard_tokens, &nval_files);
    if (st == GPTC_OK) st = prepare_remove_stale(o->out, ntrain_files, nval_files);
    if (st == GPTC_OK) st = prepare_write_meta(o->out, tok, ntrain, nval);
    if (st == GPTC_OK) {
        if (train_tokens) *train_tokens = ntrain;
        if (val_tokens) *val_tokens = nval;
    }
done:
    free(toks);
    gptc_tokenizer_free(tok);
    return st;
}
