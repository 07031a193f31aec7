/* eval.h — `gptc eval`: the loss of a model over a whole data split, with sliding windows.
 *
 * The split's shards (in path order) are one token stream x[0..N) (gptc prepare's shards are
 * consecutive pieces of one stream). Target positions p = 1..N-1 are scored: x[p] predicted from the
 * tokens before it. Windows hold T = min(seq, N-1) inputs x[s..s+T) and their targets x[s+1..s+T+1);
 * the first starts at 0 and scores all T targets; each later one ends S targets further (the last
 * one where the stream ends, S or fewer) and scores only those targets it adds: its first positions
 * are context only (the usual sliding-window perplexity). So every target is scored exactly once,
 * and with S = T the windows are those of the trainer's loader (data.h) inside one shard.
 * max_tokens (> 0) stops after that many scored targets.
 *
 * Bits per byte: the byte count of the scored tokens is read from the tokenizer (each id decoded;
 * both tokenizers gptc has are lossless byte-level, so the bytes are the text's bytes exactly),
 * end-of-text counting 0 bytes (it stands for a document boundary, not for text); bpb = summed
 * loss / ln 2 / bytes. Without the tokenizer (a model that does not name one, or GPT-2's vocabulary
 * files not found) there is no bpb.
 *
 * The model runs through its backend (gptc_model_forward); the per-position losses (B,T) are copied
 * back with the backend's memory. Internal API (not in gptc.h). */
#ifndef GPTC_TRAIN_EVAL_H
#define GPTC_TRAIN_EVAL_H

#include "data/data.h"
#include "model/gpt2.h"
#include "train/hellaswag.h"

typedef struct gptc_eval_options {
    const char *ckpt;   /* anything --init reads: checkpoint folder, step folder, HF folder, llm.c .bin */
    const char *data;   /* a shard, a glob, or a gptc prepare folder */
    bool train_split;   /* with a prepare folder: its train_*.bin (default: val_*.bin) */
    long max_tokens;    /* targets to score at most (0: all) */
    int seq;            /* window T (0: the model's context) */
    int stride;         /* S, 1..T (0: T) */
    int batch;          /* windows per forward (B) */
    int threads;        /* OpenMP threads (0: all cores) */
} gptc_eval_options;

void gptc_eval_options_default(gptc_eval_options *o);

typedef struct gptc_eval_result {
    uint64_t tokens;      /* targets scored */
    uint64_t windows;     /* windows run */
    uint64_t split_tokens; /* N, tokens of the split */
    double loss_sum;      /* summed loss (nats), in double */
    double loss;          /* mean loss per scored target */
    double perplexity;    /* exp(loss) */
    bool has_bpb;
    uint64_t bytes;       /* bytes of the scored targets' text (has_bpb) */
    double bpb;           /* bits per byte (has_bpb) */
    int T, S, B;          /* the window, stride and batch used */
    int threads;
    double seconds;       /* wall time of the windows' forwards */
    double tokens_per_s;  /* scored targets per second */
    char tokenizer[32];   /* the model's tokenizer ("" when unknown) */
    char split_desc[64];  /* "val split" / "train split" / "shards" */
} gptc_eval_result;

/* A token stream made of pieces (shards) in order: piece i holds n[i] uint16 ids at tok[i]. */
typedef struct gptc_eval_stream {
    const uint16_t *const *tok;
    const size_t *n;
    int npieces;
    const char *const *names; /* [npieces] each piece's name for messages (its shard file), or NULL */
} gptc_eval_stream;

/* Evaluates m (built and loaded by the caller, fp32 or not as it was bound) over the stream with
 * window T (<= m's context), stride S (1..T) and B windows per forward. byte_len (vocab entries,
 * may be NULL: no bpb) gives each id's bytes. Allocates the model's activations for (B, T)
 * (gptc_model_alloc_train) when they are not there yet; sets dropout off. Every id must be < the
 * model's vocabulary (checked first: GPTC_ERR_FORMAT naming the piece and offset). */
gptc_status gptc_eval_stream_run(gptc_model *m, const gptc_eval_stream *s, int T, int S, int B, long max_tokens,
                                 const int *byte_len, gptc_eval_result *r);

/* gptc eval: reads the model from o->ckpt, resolves and checks o->data (its manifest's tokenizer
 * against the model's, every id against the vocabulary), and evaluates. Bad options and data are
 * GPTC_ERR_ARG / FORMAT / STATE / IO with one line naming the flag or file. */
gptc_status gptc_eval(const gptc_eval_options *o, gptc_eval_result *r);

/* gptc eval --hellaswag: reads the model from ckpt and its tokenizer, reads and scores the
 * multiple-choice file (train/hellaswag.h) with `threads` threads (0: all cores). */
gptc_status gptc_eval_hellaswag(const char *ckpt, const char *file, int threads, gptc_mc_result *r);

#endif
