/* data.h — token shards (llm.c layout), resolving --data specs, the resumable (B, T+1) window
 * loader, and the tokenizer interface (byte tokenizer now; GPT-2 BPE slots in later). */
#ifndef GPTC_DATA_H
#define GPTC_DATA_H

#include "core/core.h"

/* ---- shards: 256 little-endian int32 header words (magic 20240520, version 1, token count,
 * rest 0), then token count uint16 tokens. */
#define GPTC_SHARD_MAGIC 20240520
#define GPTC_SHARD_VERSION 1
#define GPTC_SHARD_HEADER_INTS 256

typedef struct gptc_shard {
    char *path;
    const uint16_t *tokens; /* ntok tokens, inside the mapping */
    size_t ntok;
    void *map;
    size_t map_size;
} gptc_shard;

/* Maps a shard and checks magic, version and that the file size equals header + count*2.
 * Errors name the path and say what is wrong. */
gptc_status gptc_shard_open(gptc_shard *s, const char *path);
void gptc_shard_close(gptc_shard *s);
/* Writes a shard atomically. */
gptc_status gptc_shard_write(const char *path, const uint16_t *tokens, size_t ntok);

/* ---- --data / --val-data specs: a shard file, a glob, or a folder made by `gptc prepare` (its
 * train_*.bin, or val_*.bin when want_val). Paths come back sorted; free with gptc_paths_free.
 * No match is GPTC_ERR_IO naming the spec. */
gptc_status gptc_data_resolve(const char *spec, bool want_val, char ***paths, int *npaths);
void gptc_paths_free(char **paths, int n);

/* ---- loader: the data is cut into windows of T+1 tokens at stride T inside each shard (a shard of
 * n tokens has (n-1)/T windows). A micro-batch is B consecutive windows of an order that is either
 * sequential or a fresh permutation per epoch (derived from seed and epoch). With world ranks each
 * global batch is world×B windows and rank r takes the r-th block of B. When fewer than world×B
 * windows remain the epoch ends and the next begins. Position (epoch, cursor) is all the state. */
typedef struct gptc_loader_pos {
    uint64_t epoch;
    uint64_t cursor; /* windows of this epoch's order already consumed (all ranks) */
} gptc_loader_pos;

typedef struct gptc_loader {
    gptc_shard *shards;
    int nshards;
    int B, T, vocab;
    bool shuffle;
    uint64_t seed;
    int rank, world;
    size_t nwindows;
    uint32_t *win_shard;  /* [nwindows] shard of window i (sequential order) */
    uint64_t *win_start;  /* [nwindows] first token of window i */
    uint64_t *order;      /* [nwindows] this epoch's order (identity if !shuffle) */
    uint64_t order_epoch; /* epoch `order` was built for */
    gptc_loader_pos pos;
} gptc_loader;

/* Opens the shards and plans the windows. Fails (naming the path) when a shard is bad or the data
 * holds fewer than world×B windows of T+1 tokens. vocab bounds the token ids (checked as windows
 * are read: an id >= vocab is GPTC_ERR_FORMAT naming the shard and offset). */
gptc_status gptc_loader_open(gptc_loader *l, char *const *paths, int npaths, int B, int T, int vocab,
                             bool shuffle, uint64_t seed, int rank, int world);
void gptc_loader_close(gptc_loader *l);
/* Fills inputs (B,T) and targets (B,T) (targets = inputs shifted by one) with the next micro-batch. */
gptc_status gptc_loader_next(gptc_loader *l, int *inputs, int *targets);
gptc_loader_pos gptc_loader_tell(const gptc_loader *l);
gptc_status gptc_loader_seek(gptc_loader *l, gptc_loader_pos pos);
void gptc_loader_rewind(gptc_loader *l); /* back to epoch 0, cursor 0 (for evaluation passes) */
/* Checks every token id of part `part` of `parts` equal slices of the data (all shards, in path
 * order) against the vocabulary, so a shard of another tokenizer is refused before training rather
 * than at the batch that first reads it: GPTC_ERR_FORMAT naming the shard, the offset and the id.
 * Reads the slice once, on the OpenMP threads (memory-bound: about 2 bytes a token). */
gptc_status gptc_loader_check_vocab(const gptc_loader *l, int part, int parts);

/* ---- tokenizers
 * A tokenizer is immutable once open and may be shared by threads; what encoding mutates (regex
 * match data, the cache of pieces already encoded) lives in a gptc_tok_state, one per thread. */
typedef struct gptc_tok_state gptc_tok_state;
typedef struct gptc_tokenizer gptc_tokenizer;
struct gptc_tokenizer {
    const char *name;  /* "byte", "gpt2" */
    int vocab;         /* ids are 0..vocab-1 */
    int eot;           /* end-of-text id */
    uint32_t files_crc; /* CRC-32C of the vocabulary files it was built from (0: none) */
    /* Makes a per-thread state (*out may be NULL for tokenizers that need none). */
    gptc_status (*state_new)(const gptc_tokenizer *t, gptc_tok_state **out);
    void (*state_free)(gptc_tok_state *s);
    /* Appends the ids of text[0..len) to *ids (growing *cap with realloc); allow_special lets
     * "<|endoftext|>" in the text become eot. Any bytes are valid input. s is this thread's state
     * (or NULL: a temporary one is made for the call). */
    gptc_status (*encode)(const gptc_tokenizer *t, gptc_tok_state *s, const char *text, size_t len,
                          bool allow_special, int **ids, size_t *n, size_t *cap);
    /* Writes the bytes of one id into buf (at most cap bytes); returns the byte count, or -1 for
     * an id outside the vocabulary or a buffer too small. eot decodes to "<|endoftext|>". */
    int (*decode)(const gptc_tokenizer *t, int id, char *buf, size_t cap);
    void (*free)(gptc_tokenizer *t);
    void *impl;
};

/* Opens a tokenizer by name: "byte" (alias "bytes"), or "gpt2" (OpenAI's encoder.json and
 * vocab.bpe, looked up in $GPTC_VOCAB_DIR, then <dir of the gptc binary>/../data/gpt2, then
 * ./data/gpt2). An unknown name is GPTC_ERR_ARG listing the known ones. */
gptc_status gptc_tokenizer_open(const char *name, gptc_tokenizer **out);
void gptc_tokenizer_free(gptc_tokenizer *t);
/* The folder where gptc_tokenizer_open("gpt2") finds encoder.json and vocab.bpe (the lookup order
 * above) into dir (cap bytes); not found is GPTC_ERR_IO naming every folder looked in. */
gptc_status gptc_tokenizer_gpt2_dir(char *dir, size_t cap);
/* Opens tokenizer name for the model at `where` (a model folder, or a weights file: its folder):
 * for "gpt2", the folder's own vocab.json and merges.txt when it holds both (a Hugging Face
 * folder, as `gptc export --format hf` writes), else the lookup of gptc_tokenizer_open. */
gptc_status gptc_tokenizer_open_for_model(const char *name, const char *where, gptc_tokenizer **out);

/* ---- the meta.json that `gptc prepare` writes beside its shards (its manifest):
 * {"tokenizer": "gpt2", "vocab": 50257, "eot": 50256, "vocab_crc32c": "8 hex digits",
 *  "train_tokens": N, "val_tokens": N, "documents": N, "input_bytes": N,
 *  "shards": [{"file": "train_000000.bin", "split": "train", "tokens": N}, ...]}.
 * Only tokenizer, vocab and eot are required (older folders have no more); vocab_crc32c, when
 * present, must be 8 hex digits. Looks for it in the folder of spec (spec itself if a folder, else
 * the folder of the file or glob). Returns GPTC_OK with *found = false when there is none; a
 * meta.json that cannot be parsed is GPTC_ERR_FORMAT. */
typedef struct gptc_data_meta {
    char tokenizer[32];
    int vocab;
    int eot;
    bool has_vocab_crc; /* the manifest records vocab_crc32c (gptc prepare since streaming) */
    uint32_t vocab_crc; /* CRC-32C of the tokenizer's vocabulary files (0 for byte) */
} gptc_data_meta;
gptc_status gptc_data_meta_read(const char *spec, gptc_data_meta *meta, bool *found);

/* ---- knobs of gptc_prepare_run that only the tests turn (tests/test_prepare.c) */
typedef struct gptc_prepare_test_knobs {
    size_t chunk_bytes;              /* bytes per encoding chunk (0: input/(4 x threads), 64 KiB to 1 MiB);
                                      * when set, forced cuts come after 32 chunks instead of 8 MiB */
    const gptc_tokenizer *tokenizer; /* used instead of opening o->tokenizer (NULL: open it) */
} gptc_prepare_test_knobs;
/* gptc_prepare_run with those knobs (k NULL: none, as gptc_prepare_run). */
gptc_status gptc_prepare_run_knobs(const gptc_prepare_options *o, const gptc_prepare_test_knobs *k,
                                   gptc_prepare_result *res);

/* ---- prepare internals (src/data/prepare*.c; the entry points are gptc_prepare_run and
 * gptc_prepare in gptc.h) */

/* Whether byte offset p of a document's text (0 < p < len) is a safe cut: text[p] is a space and
 * text[p-1] an ASCII byte that is not whitespace (\t \n \v \f \r space). GPT-2's pre-tokenizer
 * always has a piece boundary there (every pattern alternative that can cover text[p-1] stops
 * before a space, no whitespace alternative covers it, and nothing looks behind), so encoding the
 * text in pieces cut at such points gives the same ids as encoding it whole. */
bool gptc_prep_safe_cut(const unsigned char *text, size_t p);

/* One unit of encoding work: bytes [off, off+len) of the reader's buffer, all from one document. */
typedef struct gptc_prep_chunk {
    size_t off, len;
    uint64_t pos;   /* offset of its first byte in the concatenated inputs */
    bool doc_start; /* the document's first chunk: its tokens follow an end-of-text */
    bool val;       /* belongs to the val split */
} gptc_prep_chunk;

/* Streams the inputs as one concatenated byte sequence and cuts it into chunks: at each document
 * end (file end, or a separator, which is dropped; empty documents are skipped), and inside a
 * document at the first safe cut at or after chunk_bytes from the chunk start. A chunk that finds
 * no safe cut for max_chunk bytes is cut there (at a UTF-8 character start) to keep memory bounded;
 * that is the only place where the tokens may differ from encoding the document whole, so
 * max_chunk must not depend on the thread count (chunk_bytes may). The val split starts at the
 * first chunk start at or after byte val_at (a chunk is cut there exactly when possible). Cuts
 * depend only on the bytes, never on read sizes or threads. The buffer holds the current batch
 * (about budget bytes) plus at most one chunk of look-ahead. */
typedef struct gptc_prep_reader {
    const char *const *paths;
    const uint64_t *sizes; /* [nfiles] sizes seen by the checks; a file that changes is an error */
    int nfiles;
    const char *sep; /* NULL: one document per file */
    size_t seplen;
    size_t chunk_bytes, max_chunk, block;
    uint64_t val_at;
    /* state */
    int file;            /* current file (nfiles: done) */
    int fd;              /* its descriptor, or -1 */
    uint64_t file_start; /* offset of the current file in the concatenation */
    uint64_t pos;        /* next chunk start */
    bool doc_start;      /* pos starts a document */
    bool val;            /* the val split has begun */
    uint64_t documents;  /* documents begun so far */
    uint64_t sep_hit;    /* the first separator at or after pos once found (UINT64_MAX: not yet) */
    uint64_t sep_clear;  /* else: no separator starts in [pos, sep_clear) */
    unsigned char *buf;  /* [cap]: bytes [base, base+len) of the concatenation */
    size_t cap, len;
    uint64_t base;
} gptc_prep_reader;

/* Sets up the reader (opens nothing yet). */
void gptc_prep_reader_init(gptc_prep_reader *r, const char *const *paths, const uint64_t *sizes, int nfiles,
                           const char *sep, size_t chunk_bytes, size_t max_chunk, uint64_t val_at);
/* Fills chunks[0..*n) (*n <= max) with the next chunks, stopping once they hold budget bytes; *n
 * is 0 at the end of the input. The chunks point into r->buf until the next call. Read failures
 * (and a file that changed since the checks) are GPTC_ERR_IO naming the file. */
gptc_status gptc_prep_reader_batch(gptc_prep_reader *r, gptc_prep_chunk *chunks, int max, size_t budget, int *n);
void gptc_prep_reader_close(gptc_prep_reader *r);

/* A shard finished by the writer: still under its temp name until gptc_prep_writer_commit. */
typedef struct gptc_prep_shard {
    int split;     /* 0 train, 1 val */
    int index;     /* the NNNNNN of train_NNNNNN.bin */
    uint32_t tokens;
    char *tmp;     /* DIR/.train_NNNNNN.bin.tmp-PID */
    char *final;   /* DIR/train_NNNNNN.bin */
    bool renamed;
} gptc_prep_shard;

/* Appends tokens to shards of at most shard_tokens tokens in dir (created on the first token).
 * Each shard is written to a hidden temp file with a placeholder header; when it is full (or the
 * split ends) the header gets the count and the file is fsynced and closed. Only commit renames
 * them, in order, to their final names; discard removes every temp file not yet renamed. */
typedef struct gptc_prep_writer {
    const char *dir;
    uint32_t shard_tokens;
    bool dir_made;
    int fd;                 /* the open shard, or -1 */
    int split;              /* split of the open shard */
    uint32_t count;         /* tokens in the open shard (staged ones included) */
    uint16_t *stage;        /* [GPTC_PREP_STAGE] tokens not yet written */
    size_t nstage;
    int next_index[2];      /* per split */
    uint64_t tokens[2];     /* per split */
    gptc_prep_shard *shards; /* [nshards] (the open one last) */
    int nshards, cap;
} gptc_prep_writer;
#define GPTC_PREP_STAGE ((size_t)1 << 20)

gptc_status gptc_prep_writer_init(gptc_prep_writer *w, const char *dir, uint32_t shard_tokens);
/* Appends ids to split (0 train, 1 val; once val has begun, train is closed). An id outside
 * 0..65535 is GPTC_ERR_FORMAT (shards hold uint16 ids); write failures are GPTC_ERR_IO. */
gptc_status gptc_prep_writer_put(gptc_prep_writer *w, int split, const int *ids, size_t n);
/* Finishes the open shard, renames every shard to its final name and fsyncs the folder. */
gptc_status gptc_prep_writer_commit(gptc_prep_writer *w);
/* Closes the open shard and removes the temp files not yet renamed (for failures). */
void gptc_prep_writer_discard(gptc_prep_writer *w);
void gptc_prep_writer_free(gptc_prep_writer *w);

#endif
