/* prepare.c — `gptc prepare`: checks the options and inputs, then streams the inputs through the
 * tokenizer in parallel batches into train/val shards and writes the manifest (meta.json).
 *
 * The contract (token stream, safe cuts, the val split by input bytes, atomic output) is spelled
 * out in gptc.h; the reader (prepare_read.c) and the shard writer (prepare_write.c) in data.h.
 *
 * One batch at a time: the reader cuts up to 2 × threads chunks (of up to 1 MiB, see gptc.h); the
 * chunks are encoded by `threads` OpenMP threads, each with its own tokenizer state, into one id
 * buffer per chunk; then this thread appends the buffers to the writer in chunk order. So the
 * output never depends on the thread count, and memory is bounded by the batch, never the files. */
#include "data/data.h"
#include "io/io.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Chunks: input / (4 × threads), within these bounds, so that even a small input keeps every
 * thread busy; the size never changes the output. */
#define PREPARE_CHUNK_MIN ((size_t)64 << 10)
#define PREPARE_CHUNK_MAX ((size_t)1 << 20)
/* A chunk with no safe cut for this long is cut anyway (the same for every thread count). */
#define PREPARE_FORCED_CUT ((size_t)8 << 20)
/* With the tests' chunk_bytes, forced cuts come after this many chunks instead. */
#define PREPARE_FORCED_CHUNKS 32
#define PREPARE_MAX_THREADS 1024

void gptc_prepare_options_default(gptc_prepare_options *o) {
    memset(o, 0, sizeof *o);
    o->tokenizer = "byte";
    o->val_fraction = 0.1f;
    o->shard_tokens = 100000000;
    o->threads = 0;
}

/* ---------------------------------------------------------------- checks (nothing written yet) */

/* Checks one input: a readable, non-empty regular file; its size goes to *size. */
static gptc_status prepare_check_input(const char *path, int i, uint64_t *size) {
    if (!path || !path[0]) return gptc_fail(GPTC_ERR_ARG, "input %d: missing file name", i + 1);
    struct stat sb;
    if (stat(path, &sb) != 0) return gptc_fail(GPTC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return gptc_fail(GPTC_ERR_IO, "%s: not a regular file; give text files to tokenize", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return gptc_fail(GPTC_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    close(fd);
    if (sb.st_size == 0) return gptc_fail(GPTC_ERR_ARG, "%s: empty; nothing to tokenize", path);
    *size = (uint64_t)sb.st_size;
    return GPTC_OK;
}

/* --out must be a folder or creatable as one: no part of it may be an existing non-folder. */
static gptc_status prepare_check_out(const char *out) {
    if (!out || !out[0]) return gptc_fail(GPTC_ERR_ARG, "'out': missing; name the folder for the shards");
    struct stat sb;
    if (stat(out, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) return gptc_fail(GPTC_ERR_ARG, "'out' %s: exists and is not a folder", out);
        return GPTC_OK;
    }
    char *p = strdup(out); /* walk up to the nearest part that exists */
    if (!p) return gptc_fail(GPTC_ERR_NOMEM, "cannot allocate the 'out' path");
    gptc_status st = GPTC_OK;
    for (char *slash; (slash = strrchr(p, '/')) != NULL;) {
        while (slash > p && slash[-1] == '/') slash--;
        if (slash == p) break; /* the root */
        *slash = '\0';
        if (stat(p, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode))
                st = gptc_fail(GPTC_ERR_ARG, "'out' %s: %s exists and is not a folder", out, p);
            break;
        }
    }
    free(p);
    return st;
}

static gptc_status prepare_check(const gptc_prepare_options *o, uint64_t *sizes, uint64_t *total) {
    gptc_status st = prepare_check_out(o->out);
    if (st != GPTC_OK) return st;
    if (!(o->val_fraction >= 0.0f && o->val_fraction < 1.0f))
        return gptc_fail(GPTC_ERR_ARG, "'val_fraction' %g: must be at least 0 and below 1", (double)o->val_fraction);
    if (o->shard_tokens < 1 || o->shard_tokens > INT32_MAX)
        return gptc_fail(GPTC_ERR_ARG, "'shard_tokens' %ld: must be between 1 and %d", o->shard_tokens, INT32_MAX);
    if (o->threads < 0 || o->threads > PREPARE_MAX_THREADS)
        return gptc_fail(GPTC_ERR_ARG, "'threads' %d: must be between 0 (all cores) and %d", o->threads,
                         PREPARE_MAX_THREADS);
    *total = 0;
    for (int i = 0; i < o->ninputs; i++) {
        if ((st = prepare_check_input(o->inputs[i], i, &sizes[i])) != GPTC_OK) return st;
        *total += sizes[i];
    }
    return GPTC_OK;
}

/* Opens the tokenizer (or takes the one the tests give) and checks that its ids fit a shard. */
static gptc_status prepare_tokenizer(const gptc_prepare_options *o, const gptc_prepare_test_knobs *k,
                                     gptc_tokenizer **tok, bool *owned) {
    *owned = false;
    if (k->tokenizer) {
        *tok = (gptc_tokenizer *)k->tokenizer;
    } else {
        gptc_status st = gptc_tokenizer_open(o->tokenizer, tok);
        if (st != GPTC_OK) {
            char msg[1024]; /* the tokenizer's message starts "tokenizer NAME: ..."; make it name the flag */
            snprintf(msg, sizeof msg, "%s", gptc_last_error());
            return gptc_fail(st, "--%s", msg);
        }
        *owned = true;
    }
    const gptc_tokenizer *t = *tok;
    if (t->vocab < 1 || t->vocab > 65536)
        return gptc_fail(GPTC_ERR_ARG, "'tokenizer' %s: %d ids do not fit token shards (uint16 ids, at most 65536)",
                         t->name, t->vocab);
    if (t->eot < 0 || t->eot >= t->vocab)
        return gptc_fail(GPTC_ERR_ARG, "'tokenizer' %s: end-of-text id %d is outside its %d ids", t->name, t->eot,
                         t->vocab);
    return GPTC_OK;
}

/* ---------------------------------------------------------------- encoding */

/* One chunk's ids (the buffer is kept from batch to batch). */
typedef struct prepare_slot {
    int *ids; /* [cap], n used */
    size_t n, cap;
    gptc_status st;
    char err[512]; /* the worker thread's message when st != OK */
} prepare_slot;

/* Encodes chunks[0..n) of buf into slots[0..n), in parallel; states[t] belongs to thread t. */
static void prepare_encode(const gptc_tokenizer *tok, gptc_tok_state **states, int nthreads, const unsigned char *buf,
                           const gptc_prep_chunk *chunks, prepare_slot *slots, int n) {
#pragma omp parallel for num_threads(nthreads) schedule(dynamic, 1)
    for (int i = 0; i < n; i++) {
        prepare_slot *s = &slots[i];
        s->n = 0;
        /* byte and gpt2 give at most one id per byte: room for that (plus some slack for the next
         * batch) keeps encode from doubling the buffer, which would double this memory */
        size_t len = chunks[i].len;
        if (s->cap < len) {
            size_t want = len + len / 8 + 16;
            int *p = realloc(s->ids, want * sizeof *p);
            if (!p) {
                s->st = gptc_fail(GPTC_ERR_NOMEM, "cannot allocate %zu token ids", want);
                snprintf(s->err, sizeof s->err, "%s", gptc_last_error());
                continue;
            }
            s->ids = p;
            s->cap = want;
        }
        s->st = tok->encode(tok, states[omp_get_thread_num()], (const char *)buf + chunks[i].off, chunks[i].len, false,
                            &s->ids, &s->n, &s->cap);
        if (s->st != GPTC_OK) snprintf(s->err, sizeof s->err, "%s", gptc_last_error());
    }
}

/* The input that holds byte pos of the concatenation. */
static const char *prepare_file_at(const gptc_prepare_options *o, const uint64_t *sizes, uint64_t pos) {
    for (int i = 0; i < o->ninputs; i++) {
        if (pos < sizes[i]) return o->inputs[i];
        pos -= sizes[i];
    }
    return o->inputs[o->ninputs - 1];
}

/* ---------------------------------------------------------------- the folder */

static void prepare_path(char *buf, size_t cap, const char *dir, const char *name) {
    size_t dlen = strlen(dir);
    snprintf(buf, cap, "%s%s%s", dir, dlen && dir[dlen - 1] == '/' ? "" : "/", name);
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

/* True for a temp file of a prepare run (a shard's or meta.json's) whose process is gone. */
static bool prepare_is_dead_temp(const char *name) {
    bool shard = fnmatch(".train_*.bin.tmp-*", name, 0) == 0 || fnmatch(".val_*.bin.tmp-*", name, 0) == 0;
    if (!shard && fnmatch("meta.json.tmp-*", name, 0) != 0) return false;
    const char *p = strstr(name, ".tmp-") + 5;
    char *end = NULL;
    errno = 0;
    long pid = strtol(p, &end, 10);
    if (errno || end == p || *end || pid <= 0 || pid == (long)getpid()) return false;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Removes train_*.bin / val_*.bin files in dir that this run did not write, and the temp files
 * of earlier runs that were killed. */
static gptc_status prepare_remove_stale(const char *dir, int ntrain, int nval) {
    DIR *d = opendir(dir);
    if (!d) return gptc_fail(GPTC_ERR_IO, "%s: cannot open the folder: %s", dir, strerror(errno));
    gptc_status st = GPTC_OK;
    struct dirent *e;
    while (st == GPTC_OK && (e = readdir(d)) != NULL) {
        bool train = fnmatch("train_*.bin", e->d_name, 0) == 0, val = fnmatch("val_*.bin", e->d_name, 0) == 0;
        bool temp = !train && !val && prepare_is_dead_temp(e->d_name);
        if (!train && !val && !temp) continue;
        if (train && prepare_is_ours(e->d_name, "train", ntrain)) continue;
        if (val && prepare_is_ours(e->d_name, "val", nval)) continue;
        char path[4200];
        prepare_path(path, sizeof path, dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (unlink(path) != 0)
            st = gptc_fail(GPTC_ERR_IO, "%s: cannot remove this file left from an earlier run: %s", path,
                           strerror(errno));
    }
    closedir(d);
    return st;
}

/* The manifest: what tokenizer, which shards, how many tokens. */
static gptc_status prepare_write_meta(const char *dir, const gptc_tokenizer *tok, const gptc_prep_writer *w,
                                      uint64_t documents, uint64_t input_bytes) {
    static const char *const split_name[2] = {"train", "val"};
    char path[4200], crc[16];
    prepare_path(path, sizeof path, dir, "meta.json");
    snprintf(crc, sizeof crc, "%08x", (unsigned)tok->files_crc);
    cJSON *root = cJSON_CreateObject(), *shards = NULL;
    bool ok = root && cJSON_AddStringToObject(root, "tokenizer", tok->name) &&
              cJSON_AddNumberToObject(root, "vocab", tok->vocab) && cJSON_AddNumberToObject(root, "eot", tok->eot) &&
              cJSON_AddStringToObject(root, "vocab_crc32c", crc) &&
              cJSON_AddNumberToObject(root, "train_tokens", (double)w->tokens[0]) &&
              cJSON_AddNumberToObject(root, "val_tokens", (double)w->tokens[1]) &&
              cJSON_AddNumberToObject(root, "documents", (double)documents) &&
              cJSON_AddNumberToObject(root, "input_bytes", (double)input_bytes) &&
              (shards = cJSON_AddArrayToObject(root, "shards")) != NULL;
    for (int i = 0; ok && i < w->nshards; i++) {
        const gptc_prep_shard *s = &w->shards[i];
        const char *slash = strrchr(s->final, '/');
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(shards, e) && cJSON_AddStringToObject(e, "file", slash ? slash + 1 : s->final) &&
             cJSON_AddStringToObject(e, "split", split_name[s->split]) &&
             cJSON_AddNumberToObject(e, "tokens", s->tokens);
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return gptc_fail(GPTC_ERR_NOMEM, "%s: cannot build the JSON", path);
    const void *parts[2] = {text, "\n"};
    size_t lens[2] = {strlen(text), 1};
    gptc_status st = gptc_file_write_atomic(path, parts, lens, 2);
    cJSON_free(text);
    return st;
}

/* ---------------------------------------------------------------- the run */

/* Everything a run holds, for one cleanup path. */
typedef struct prepare_run {
    const gptc_prepare_options *o;
    uint64_t *sizes; /* [ninputs] */
    uint64_t total;
    gptc_tokenizer *tok;
    bool own_tok;
    int nthreads;
    gptc_tok_state **states; /* [nthreads] */
    gptc_prep_chunk *chunks; /* [maxchunks] */
    prepare_slot *slots;     /* [maxchunks] */
    int maxchunks;
    size_t chunk_bytes;
    const gptc_prepare_test_knobs *k; /* the tests' knobs (all zero otherwise) */
    gptc_prep_reader reader;
    gptc_prep_writer writer;
} prepare_run;

static void prepare_run_free(prepare_run *r) {
    gptc_prep_reader_close(&r->reader);
    gptc_prep_writer_free(&r->writer);
    if (r->slots)
        for (int i = 0; i < r->maxchunks; i++) free(r->slots[i].ids);
    free(r->slots);
    free(r->chunks);
    if (r->states)
        for (int i = 0; i < r->nthreads; i++)
            if (r->states[i]) r->tok->state_free(r->states[i]);
    free(r->states);
    if (r->own_tok) gptc_tokenizer_free(r->tok);
    free(r->sizes);
}

/* Allocates the per-thread states and per-chunk buffers. */
static gptc_status prepare_setup(prepare_run *r) {
    const gptc_prepare_options *o = r->o;
    r->nthreads = o->threads > 0 ? o->threads : omp_get_max_threads();
    if (r->nthreads > PREPARE_MAX_THREADS) r->nthreads = PREPARE_MAX_THREADS;
    r->maxchunks = 2 * r->nthreads; /* more chunks than threads evens out their encoding times */
    size_t max_chunk = PREPARE_FORCED_CUT;
    size_t knob = r->k->chunk_bytes;
    if (knob) {
        r->chunk_bytes = knob;
        max_chunk = knob > SIZE_MAX / PREPARE_FORCED_CHUNKS ? SIZE_MAX : knob * PREPARE_FORCED_CHUNKS;
    } else {
        uint64_t c = r->total / (4 * (uint64_t)r->nthreads);
        r->chunk_bytes = c < PREPARE_CHUNK_MIN ? PREPARE_CHUNK_MIN : c > PREPARE_CHUNK_MAX ? PREPARE_CHUNK_MAX : (size_t)c;
    }
    r->states = calloc((size_t)r->nthreads, sizeof *r->states);
    r->chunks = calloc((size_t)r->maxchunks, sizeof *r->chunks);
    r->slots = calloc((size_t)r->maxchunks, sizeof *r->slots);
    if (!r->states || !r->chunks || !r->slots) return gptc_fail(GPTC_ERR_NOMEM, "cannot allocate the encoding buffers");
    for (int i = 0; i < r->nthreads; i++) {
        gptc_status st = r->tok->state_new(r->tok, &r->states[i]);
        if (st != GPTC_OK) return gptc_fail_prefix(st, "tokenizer %s", r->tok->name);
    }
    /* val begins at the first cut at or after this byte (input_bytes: never) */
    double at = ceil((double)r->total * (1.0 - (double)o->val_fraction));
    uint64_t val_at = at >= (double)r->total ? r->total : (uint64_t)at;
    gptc_prep_reader_init(&r->reader, o->inputs, r->sizes, o->ninputs, o->doc_separator, r->chunk_bytes, max_chunk,
                          val_at);
    return gptc_prep_writer_init(&r->writer, o->out, (uint32_t)o->shard_tokens);
}

/* Reads, encodes and writes every batch. */
static gptc_status prepare_stream(prepare_run *r, uint64_t *val_start) {
    const gptc_prepare_options *o = r->o;
    gptc_prep_writer *w = &r->writer;
    *val_start = r->total;
    size_t budget = (size_t)r->maxchunks * r->chunk_bytes;
    for (;;) {
        int n = 0;
        gptc_status st = gptc_prep_reader_batch(&r->reader, r->chunks, r->maxchunks, budget, &n);
        if (st != GPTC_OK || n == 0) return st;
        prepare_encode(r->tok, r->states, r->nthreads, r->reader.buf, r->chunks, r->slots, n);
        for (int i = 0; i < n; i++) {
            const gptc_prep_chunk *c = &r->chunks[i];
            const prepare_slot *s = &r->slots[i];
            if (s->st != GPTC_OK)
                return gptc_fail(s->st, "%s: %s", prepare_file_at(o, r->sizes, c->pos), s->err);
            int split = c->val ? 1 : 0;
            if (split && *val_start == r->total) *val_start = c->pos;
            if (c->doc_start && (st = gptc_prep_writer_put(w, split, &r->tok->eot, 1)) != GPTC_OK) return st;
            if ((st = gptc_prep_writer_put(w, split, s->ids, s->n)) != GPTC_OK) {
                if (st == GPTC_ERR_FORMAT) gptc_fail_prefix(st, "%s", prepare_file_at(o, r->sizes, c->pos));
                return st;
            }
        }
        if (o->progress) {
            const gptc_prep_chunk *last = &r->chunks[n - 1];
            o->progress(o->progress_user, last->pos + last->len, r->total, w->tokens[0] + w->tokens[1]);
        }
    }
}

gptc_status gptc_prepare_run(const gptc_prepare_options *o, gptc_prepare_result *res) {
    return gptc_prepare_run_knobs(o, NULL, res);
}

gptc_status gptc_prepare_run_knobs(const gptc_prepare_options *o, const gptc_prepare_test_knobs *k,
                                   gptc_prepare_result *res) {
    static const gptc_prepare_test_knobs none = {0};
    gptc_prepare_result local;
    if (!res) res = &local;
    memset(res, 0, sizeof *res);
    double t0 = gptc_now();
    prepare_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.k = k ? k : &none;
    r.reader.fd = -1;
    r.writer.fd = -1;
    gptc_status st = GPTC_OK;
    if (o->ninputs < 1 || !o->inputs) {
        st = gptc_fail(GPTC_ERR_ARG, "no input files; give one or more text files to tokenize");
        goto done;
    }
    r.sizes = calloc((size_t)o->ninputs, sizeof *r.sizes);
    if (!r.sizes) {
        st = gptc_fail(GPTC_ERR_NOMEM, "cannot allocate the list of inputs");
        goto done;
    }
    if ((st = prepare_check(o, r.sizes, &r.total)) != GPTC_OK) goto done;
    if ((st = prepare_tokenizer(o, r.k, &r.tok, &r.own_tok)) != GPTC_OK) goto done;
    if ((st = prepare_setup(&r)) != GPTC_OK) goto done;
    res->threads = r.nthreads;
    res->input_bytes = r.total;

    /* nothing has been written before this point */
    bool out_existed = gptc_is_dir(o->out);
    uint64_t val_start = r.total;
    st = prepare_stream(&r, &val_start);
    gptc_prep_writer *w = &r.writer;
    if (st == GPTC_OK && w->tokens[0] + w->tokens[1] == 0)
        st = gptc_fail(GPTC_ERR_ARG, "no text to tokenize: the inputs hold only 'doc_separator'");
    else if (st == GPTC_OK && w->tokens[0] == 0)
        st = gptc_fail(GPTC_ERR_ARG, "'val_fraction' %g: leaves no train tokens; use a smaller fraction",
                       (double)o->val_fraction);
    if (st == GPTC_OK) {
        /* until the new meta.json is written, a folder without one says "incomplete" */
        char meta[4200];
        prepare_path(meta, sizeof meta, o->out, "meta.json");
        if (unlink(meta) != 0 && errno != ENOENT)
            st = gptc_fail(GPTC_ERR_IO, "%s: cannot remove the old manifest: %s", meta, strerror(errno));
    }
    if (st == GPTC_OK) st = gptc_prep_writer_commit(w);
    if (st == GPTC_OK) st = prepare_remove_stale(o->out, w->next_index[0], w->next_index[1]);
    if (st == GPTC_OK) st = prepare_write_meta(o->out, r.tok, w, r.reader.documents, r.total);
    res->output_started = w->dir_made;
    if (st != GPTC_OK) {
        gptc_prep_writer_discard(w);
        if (!out_existed) rmdir(o->out); /* the folder this run made, if nothing is left in it */
        goto done;
    }
    res->train_tokens = w->tokens[0];
    res->val_tokens = w->tokens[1];
    res->train_shards = w->next_index[0];
    res->val_shards = w->next_index[1];
    res->documents = r.reader.documents;
    res->val_start = val_start;
    if (o->progress) o->progress(o->progress_user, r.total, r.total, w->tokens[0] + w->tokens[1]);
done:
    prepare_run_free(&r);
    res->seconds = gptc_now() - t0;
    return st;
}

gptc_status gptc_prepare(const gptc_prepare_options *o, size_t *train_tokens, size_t *val_tokens) {
    gptc_prepare_result res;
    gptc_status st = gptc_prepare_run(o, &res);
    if (train_tokens) *train_tokens = (size_t)res.train_tokens;
    if (val_tokens) *val_tokens = (size_t)res.val_tokens;
    return st;
}
