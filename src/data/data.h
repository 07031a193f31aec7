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

/* ---- the meta.json that `gptc prepare` writes beside its shards:
 * {"tokenizer": "byte", "vocab": 257, "eot": 256, "train_tokens": N, "val_tokens": N}.
 * Looks for it in the folder of spec (spec itself if a folder, else the folder of the file or glob).
 * Returns GPTC_OK with *found = false when there is none; a meta.json that cannot be parsed is
 * GPTC_ERR_FORMAT. */
typedef struct gptc_data_meta {
    char tokenizer[32];
    int vocab;
    int eot;
} gptc_data_meta;
gptc_status gptc_data_meta_read(const char *spec, gptc_data_meta *meta, bool *found);

#endif
