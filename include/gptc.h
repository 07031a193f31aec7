/* gptc.h — the public API of libgptc: status codes, model configuration, training and sampling.
 *
 * Every fallible call returns a gptc_status; on failure gptc_last_error() holds one line that names
 * the file or option at fault and what to do. The library never exits the process. */
#ifndef GPTC_H
#define GPTC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

typedef enum gptc_status {
    GPTC_OK = 0,
    GPTC_ERR_ARG,     /* a bad option or argument value */
    GPTC_ERR_IO,      /* a file could not be opened, read, written or renamed */
    GPTC_ERR_FORMAT,  /* a file exists but its contents are wrong (magic, size, header, checksum) */
    GPTC_ERR_NOMEM,   /* an allocation failed */
    GPTC_ERR_STATE,   /* the call does not fit the object's state (e.g. a checkpoint for another shape) */
    GPTC_ERR_NUMERIC, /* a non-finite value where a finite one is needed */
} gptc_status;

/* The message of the last failure on this thread ("" if none). */
const char *gptc_last_error(void);
/* A short name for a status ("io error", ...). */
const char *gptc_status_name(gptc_status st);

/* ---------------------------------------------------------------- model */

/* The MLP's activation: one of three GELU forms. The tanh form is GPT-2's and is 0, so a config
 * zeroed or written without the field keeps GPT-2's behaviour. Hugging Face calls them "gelu_new",
 * "gelu" and "quick_gelu" (config.json's activation_function). */
typedef enum gptc_gelu_kind {
    GPTC_GELU_KIND_TANH = 0, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    GPTC_GELU_KIND_ERF,      /* exact: 0.5 x (1 + erf(x / sqrt2)) */
    GPTC_GELU_KIND_SIGMOID,  /* x sigmoid(1.702 x) */
} gptc_gelu_kind;

typedef struct gptc_model_config {
    int layers;   /* L: transformer blocks */
    int heads;    /* NH: attention heads; must divide channels */
    int channels; /* C: embedding width */
    int context;  /* maxT: positions (wpe rows) */
    int vocab;    /* V: real vocabulary size; the model pads it internally to padded_vocab() */
    gptc_gelu_kind gelu; /* the GELU form of every MLP (0: tanh, GPT-2's) */
} gptc_model_config;

/* "tanh", "erf" or "sigmoid" (the names `gptc train --gelu` takes); "?" for a value out of range. */
const char *gptc_gelu_name(gptc_gelu_kind g);
/* Parses one of those names into *out; anything else is GPTC_ERR_ARG naming 'model.gelu' and the choices. */
gptc_status gptc_gelu_from_name(const char *name, gptc_gelu_kind *out);

/* Fills *cfg from a preset name, one of gptc_model_preset_names() (the list lives in one place:
 * src/model/config.c). */
gptc_status gptc_model_preset(const char *name, gptc_model_config *cfg);
/* A comma-separated list of the preset names, for help text. */
const char *gptc_model_preset_names(void);
/* Checks a configuration: sizes positive, heads divide channels, a known GELU form. */
gptc_status gptc_model_config_check(const gptc_model_config *cfg);
/* The vocabulary rounded up to a multiple of 64 (the padded rows never change a loss or a sample). */
int gptc_padded_vocab(int vocab);
/* Number of trainable parameters (counting the real vocabulary, not the padding). */
size_t gptc_model_num_params(const gptc_model_config *cfg);
/* Model FLOPs of one training token (forward + backward) at sequence length T, PaLM's convention:
 * 6 x (parameters that take part in matrix products: all but wpe; the tied wte counts once, for the
 * classifier) + 12 x layers x channels x T for attention. MFU = tokens/s x this / peak. */
double gptc_model_flops_per_token(const gptc_model_config *cfg, int T);

/* ---------------------------------------------------------------- training */

/* Precision of the training step's matrix products (--dtype): fp32 throughout, or bf16 mixed
 * precision ("O2"): GEMMs and attention read bf16 copies of their operands and sum in fp32, while
 * master weights, gradients and AdamW stay fp32. */
typedef enum gptc_precision { GPTC_PRECISION_FP32 = 0, GPTC_PRECISION_BF16 = 1 } gptc_precision;
const char *gptc_precision_name(gptc_precision p); /* "fp32", "bf16"; "?" out of range */
gptc_status gptc_precision_from_name(const char *name, gptc_precision *out); /* GPTC_ERR_ARG names 'dtype' */

/* Activations dropped after the forward and recomputed in the backward (--recompute); each level
 * drops what the one before it drops and more: none; gelu (the MLP's GELU output); attn (also the
 * attention's head-major Q/K/V, output and log-sum-exp, or the naive scores); block (everything but
 * each block's input: a block's whole forward runs again just before its backward). */
typedef enum gptc_recompute {
    GPTC_RECOMPUTE_NONE = 0, GPTC_RECOMPUTE_GELU, GPTC_RECOMPUTE_ATTN, GPTC_RECOMPUTE_BLOCK
} gptc_recompute;
const char *gptc_recompute_name(gptc_recompute r); /* "none", "gelu", "attn", "block"; "?" out of range */
gptc_status gptc_recompute_from_name(const char *name, gptc_recompute *out); /* GPTC_ERR_ARG names 'recompute' */

/* What the trainer does after too many bad steps in a row (see gptc_train_options.bad_steps). */
typedef enum gptc_on_bad { GPTC_ON_BAD_ROLLBACK = 0, GPTC_ON_BAD_STOP = 1 } gptc_on_bad;

/* The options a user sets, with their defaults, ranges and help, are listed once in
 * src/train/hparams.def; gptc_train checks the same ranges as the CLI. Messages name an option by
 * its field here, in single quotes ('lr', 'model.context'). */
typedef struct gptc_train_options {
    gptc_model_config model;
    const char *data;      /* train shards: a file, a glob, or a folder made by `gptc prepare` */
    const char *val_data;  /* val shards (NULL: found in the --data folder, if any) */
    int batch;             /* B: sequences per micro-step */
    int seq;               /* T: tokens per sequence, <= model.context */
    long total_batch;      /* tokens per optimizer update; a multiple of B*T (0: B*T) */
    int steps;             /* optimizer updates to run (total, counting resumed ones) */
    const char *optimizer; /* "adamw" (the default) or another name of the registry (src/optim/optimizer.h) */
    const char *optim_state; /* how the moments are stored: "fp32" (the default), "bf16" or "int8" (optim/optimizer.h) */
    float lr;              /* peak learning rate */
    int warmup;            /* linear warm-up steps */
    float lr_floor;        /* cosine decays to lr * lr_floor */
    float weight_decay;    /* decoupled, on 2-D weights only */
    float beta1, beta2, eps; /* the optimizer's (AdamW's moments' decays and epsilon) */
    float clip;            /* global gradient-norm clip (0: off) */
    uint64_t seed;
    int shuffle;           /* 1: shuffle windows each epoch; 0: sequential */
    const char *init;      /* start from these weights (a checkpoint, a Hugging Face GPT-2 folder or an llm.c
                            * .bin; model must equal their config) instead of a random init; NULL: random.
                            * A run that resumes from ckpt_dir ignores it */
    const char *ckpt_dir;  /* NULL: no checkpoints */
    int ckpt_every;        /* steps between checkpoints (0: only at the end) */
    int keep;              /* checkpoints kept in ckpt_dir (>= 1) */
    int eval_every;        /* steps between val-loss evaluations (0: only at the end) */
    int eval_batches;      /* micro-batches per evaluation */
    const char *eval_hellaswag; /* multiple choice in HellaSwag's jsonl format scored at each evaluation (NULL: none) */
    int threads;           /* OpenMP threads (0: all cores) */
    int naive_attention;   /* 1: the reference attention that stores (B,NH,T,T) scores; 0: flash */
    int no_fusion;         /* 1: separate bias, residual and LayerNorm kernels and the whole (B,T,V) logits
                            * (the unfused baseline); 0: fused residual+LayerNorm and the classifier +
                            * cross-entropy in chunks of rows, logits never whole */
    gptc_precision dtype;  /* --dtype (0: fp32) */
    gptc_recompute recompute; /* --recompute (0: none) */
    int sample_every;      /* steps between samples in the log (0: none); needs the data's tokenizer */
    int sample_tokens;     /* tokens per sample */
    /* data parallel (a job started by mpirun; see src/dist/dist.h): every rank reads its own B
     * sequences of each global batch of ranks x B, and total_batch counts the tokens of all ranks */
    float bucket_mb;       /* MB of gradients per exchange bucket (0: one exchange per tensor) */
    int zero;              /* 1: ZeRO-1, the optimizer state split over the ranks; 0: every rank holds all */
    int fused_update;      /* 1: each layer's update inside the backward, one layer's gradients at a time (no
                            * whole-model gradient; two backward passes per step, for the exact global norm);
                            * needs total_batch = B*T (no accumulation) and one rank */
    const char *pack_weights; /* "auto" (default), "on" or "off": the weight matrices kept packed for the
                            * products, repacked after each update (the same results, more memory) */
    /* fine-tuning a part (src/model/gpt2.h gptc_pset): freeze fixes the tensors its patterns match (no gradient,
     * no optimizer state); lora > 0 trains rank-lora adapters on the lora_targets linear layers with the base
     * frozen whole, scaled by lora_alpha / lora (lora_alpha 0: = lora) */
    const char *freeze;    /* NULL: none */
    int lora;
    float lora_alpha;
    const char *lora_targets; /* "attn" (default), "mlp", "attn,mlp" or module names */
    /* the step guard (src/train/guard.h): a bad step — loss or gradient norm not finite, or with
     * skip_spikes a z-score above spike_z over the last spike_window good steps — drops its update
     * (every rank the same, agreed); more than bad_steps bad steps in a row roll the run back to its
     * newest checkpoint with the learning rate times rollback_lr (on_bad ROLLBACK, at most
     * max_rollbacks times), or stop it (on_bad STOP) */
    int bad_steps;         /* bad steps in a row that are only skipped (0: the first acts) */
    gptc_on_bad on_bad;
    float rollback_lr;     /* factor on the learning rate per rollback, in (0, 1] */
    int max_rollbacks;
    int skip_spikes;       /* 1: spikes are bad steps too */
    int spike_window;      /* good steps the z-scores are measured over */
    float spike_z;         /* z-score limit (loss and gradient norm, upward) */
    /* regularisation and schedules */
    float dropout;         /* on the embeddings and on each residual branch's output (0: off) */
    float attn_dropout;    /* on the attention probabilities (flash attention only; 0: off) */
    /* Schedules "STEP:VALUE,..." (optionally "cos:" first; src/optim/hparam.h) that replace the
     * constant: lr_schedule replaces the warm-up + cosine of lr/warmup/lr_floor. NULL: none. */
    const char *lr_schedule, *dropout_schedule, *attn_dropout_schedule, *weight_decay_schedule;
    const struct gptc_callbacks *callbacks; /* NULL: none (see gptc_callbacks below) */
    const char *profile;   /* --profile: write a Chrome trace-event JSON of the run's operators here (NULL: off);
                            * the spans stay in memory for the CLI's table (train/profile_report.h) */
    int profile_from, profile_to; /* with profile: record steps from..to (1-based, inclusive; 0: the first / the last),
                            * so a long run keeps only a window of spans in memory */
    /* custom operators (include/gptc_op_plugin.h, docs/extending.md) */
    const char *op_plugins; /* shared libraries, paths separated by ',' or ':' (NULL: none); each operator the run
                             * calls is checked against the reference at the run's shapes before the first step */
    const char *device;    /* "cpu" (NULL: the CPU), "cuda" or "cuda:N": the backend the model trains on
                            * (src/backend/cuda.h; needs a build with make CUDA=1 and a device) */
} gptc_train_options;

void gptc_train_options_default(gptc_train_options *o);

/* Summary of a finished run. */
typedef struct gptc_train_result {
    int steps_run;         /* steps executed by this call (not counting resumed ones) */
    int first_step;        /* step the run started from (0, or the resumed step) */
    gptc_model_config model; /* the model trained (vocab filled in from the data if it was 0) */
    size_t num_params;
    float first_loss;      /* train loss of the first step run */
    float last_loss;       /* train loss of the last step run */
    float first_val_loss;  /* val loss at the first evaluation (NaN if none) */
    float last_val_loss;   /* val loss at the last evaluation (NaN if none) */
    double tokens_per_s;   /* median training throughput over the steps run */
    double ms_per_step;    /* median step time */
    int world;             /* ranks that trained (1 without mpirun) */
    double comm_calls_per_step; /* gradient exchanges started per step (0 for one rank) */
    double comm_wait_ms_per_step; /* ms per step spent waiting for them after the backward (mean) */
    double comm_wait_share;  /* that wait over the mean step time */
    size_t optim_bytes;      /* bytes this rank allocated for the optimizer state (ZeRO-1: its shard's) */
    int skipped_steps;       /* bad steps whose update was dropped (non-finite, or spikes) */
    int rollbacks;           /* rollbacks to a checkpoint by this call */
    float lr_scale;          /* the learning-rate factor at the end (1: never rolled back) */
} gptc_train_result;

/* What the trainer reports: once at the start (after every check and allocation, before the
 * first step), after each optimizer step, and after each checkpoint written. */
typedef enum gptc_event { GPTC_EVENT_START, GPTC_EVENT_STEP, GPTC_EVENT_CHECKPOINT, GPTC_EVENT_ROLLBACK } gptc_event;

typedef struct gptc_step_info {
    gptc_event event;
    const gptc_model_config *model; /* the model being trained (vocab resolved from the data) */
    int first_step;        /* step the run starts from (0, or the resumed step) */
    long tokens_per_update;
    double flops_per_token; /* the step's model FLOPs per token as this run computes them: 6N + attention for
                            * the whole model; less with 'freeze' or 'lora' (the products they skip), plus the
                            * adapters' own */
    int step;              /* 1-based number of the step just finished (START: first_step) */
    int steps;             /* total steps of the run */
    float loss;            /* mean train loss over the step's micro-batches */
    float lr;              /* learning rate used */
    float grad_norm;       /* global gradient norm before clipping */
    double ms;             /* wall time of the step */
    double tokens_per_s;   /* tokens of the step / its wall time */
    float val_loss;        /* val loss if evaluated after this step, else NaN */
    float hellaswag_acc, hellaswag_acc_norm; /* with 'eval_hellaswag', the multiple-choice accuracies when
                                              * evaluated after this step, else NaN */
    const char *ckpt_path; /* CHECKPOINT: the folder written */
    const char *sample;    /* text sampled after this step (decoded with the data's tokenizer), else NULL */
    int skipped;           /* 1: a bad step, its update dropped (bad says why) */
    const char *bad;       /* "nonfinite", "loss spike", "norm spike", or "" */
    double z_loss, z_norm; /* the step's z-scores with skip_spikes (NaN when not judged) */
    int bad_run;           /* bad steps in a row, this one included */
    /* ROLLBACK: step is the checkpoint's step the run went back to, ckpt_path its folder */
    float lr_scale;        /* the factor on the schedule's learning rate from now on */
    int rollbacks;         /* rollbacks so far in this run's history */
    float dropout, attn_dropout, weight_decay; /* STEP: the values the step used */
} gptc_step_info;

/* Per-step callback for the CLI, embedders and tests: return nonzero to stop the run after this
 * step (a final checkpoint is still written). In a job of many ranks only rank 0 calls it. */
typedef int (*gptc_step_fn)(void *user, const gptc_step_info *info);

/* ---- training callbacks (an embedder's hooks; gptc_step_fn above is the CLI's log).
 * They run on rank 0 after the event; what they write into *ctl is sent to every rank and applies
 * from the next step on. A value set stays until set again; NaN (the initial value) means "the
 * run's schedule or constant". Overrides are saved in checkpoints, so a resumed run keeps them. */
typedef struct gptc_train_control {
    float lr;              /* the learning rate (before a rollback's factor) */
    float dropout, attn_dropout, weight_decay;
    int stop;              /* 1: stop after this step (a checkpoint is written with --ckpt) */
} gptc_train_control;

typedef struct gptc_callbacks {
    void *user;
    /* after every optimizer step (info->event == GPTC_EVENT_STEP: loss, grad norm, lr, ...) */
    void (*on_step_end)(void *user, const gptc_step_info *info, gptc_train_control *ctl);
    /* after each evaluation of the val loss */
    void (*on_eval)(void *user, int step, float val_loss, gptc_train_control *ctl);
    /* after each checkpoint folder is written */
    void (*on_checkpoint)(void *user, int step, const char *path, gptc_train_control *ctl);
} gptc_callbacks;

/* Trains as configured. Checks everything (files, sizes) before writing anything. */
gptc_status gptc_train(const gptc_train_options *o, gptc_step_fn on_step, void *user, gptc_train_result *res);

/* ---------------------------------------------------------------- sampling */

typedef struct gptc_sample_options {
    const char *ckpt;      /* a checkpoint folder (newest step inside) or a step folder */
    const char *prompt;    /* text, encoded with the checkpoint's tokenizer */
    int tokens;            /* new tokens to generate */
    float temperature;     /* 0: greedy */
    int top_k;             /* 0: off */
    float top_p;           /* 1: off */
    uint64_t seed;         /* sample i draws with seed + i */
    int threads;
    int samples;           /* continuations of the prompt, generated together (prompt prefilled once); >= 1 */
    gptc_precision dtype;  /* weights the decoding products read: fp32, or a bf16 copy (half the bytes);
                            * activations and the KV cache stay fp32 */
    int pack;              /* 1 (default): steps read the layer matrices from a copy packed for them (panels:
                            * one stream per thread, ~15 % faster steps); 0: fp32 reads the model's own
                            * weights (no copy: 4 bytes less per weight of those matrices), bf16 its O2 copy
                            * when the model has one (else a bf16 copy is needed anyway, and is packed) */
} gptc_sample_options;

void gptc_sample_options_default(gptc_sample_options *o);

/* Called with each decoded piece of text as it is generated. */
typedef void (*gptc_text_fn)(void *user, const char *text, size_t len);
/* The same for one of several samples (0..samples-1); pieces of the samples arrive interleaved, step by step. */
typedef void (*gptc_sample_text_fn)(void *user, int sample, const char *text, size_t len);

/* What a generation measured: the prompt's prefill (one forward over its positions) and the incremental
 * steps (each advances every sample by one token; a context rebuild counts in the decode time). */
typedef struct gptc_sample_stats {
    int samples;
    gptc_precision dtype;
    int prefill_tokens;       /* positions of the prompt's prefill */
    double prefill_s;         /* its seconds */
    double prefill_flops;     /* its FLOPs (products, causal attention, the last row's classifier) */
    int decode_steps;         /* incremental steps: tokens - 1 (the first token comes from the prefill) */
    double decode_s;          /* their seconds, drawing included */
    size_t step_weight_bytes; /* weights one step reads (the matrices at dtype's size; KV cache not counted) */
} gptc_sample_stats;

/* The pieces of every sample to one callback (interleaved when o->samples > 1: use gptc_sample_many). */
gptc_status gptc_sample(const gptc_sample_options *o, gptc_text_fn emit, void *user);
/* o->samples samples; stats (may be NULL) gets the measurements. */
gptc_status gptc_sample_many(const gptc_sample_options *o, gptc_sample_text_fn emit, void *user,
                             gptc_sample_stats *stats);

/* ---------------------------------------------------------------- data preparation
 *
 * gptc_prepare turns text files into llm.c-layout token shards plus a manifest (meta.json).
 *
 * Token stream: for each document in input order, the end-of-text id, then the document's tokens.
 * A document is a whole input file or, with doc_separator, each piece of a file between
 * separators (the separator is dropped; empty pieces are skipped). Text is encoded with special
 * tokens off: a literal "<|endoftext|>" inside a file is plain text.
 *
 * Streaming: the inputs are read in blocks and cut into chunks of up to 1 MiB, encoded by
 * `threads` threads and written in input order. Inside a document a chunk ends only at a safe cut,
 * a byte position p where byte p is a space and byte p-1 an ASCII character other than whitespace;
 * GPT-2's pre-tokenizer always has a piece boundary there, so the tokens equal those of encoding
 * each document whole, and the shards are the same bytes for every thread count. (A stretch of
 * 8 MiB with no safe cut, e.g. text in a script written without spaces, is cut at a character
 * boundary there to keep memory bounded; only there can the tokens differ from whole-document
 * encoding, by a piece or two.) Memory is about 10 MiB per thread (the text and int ids of a
 * batch of 2 chunks per thread) plus a 2 MiB write buffer, and up to 45 MiB more per space-less
 * 8 MiB chunk, whatever the file sizes.
 *
 * Val split: the token total is unknown until the end, so the split is placed by input bytes. The
 * val split starts at the first cut point (a document start or a safe cut) at or after byte
 * ceil(input_bytes × (1 − val_fraction)) of the concatenated inputs; every token from there on,
 * including the end-of-text of a document that starts there, goes to val_*.bin, every token
 * before it to train_*.bin. val_fraction 0 gives no val split, and so does a tail with no cut point.
 *
 * Output: OUT/train_000000.bin, ... and val_000000.bin, ... of at most shard_tokens tokens, then
 * OUT/meta.json: {"tokenizer", "vocab", "eot", "vocab_crc32c" (CRC-32C of the tokenizer's vocab
 * files, 8 hex digits), "train_tokens", "val_tokens", "documents", "input_bytes", "shards":
 * [{"file", "split", "tokens"}, ...]}. Shards are written to hidden temp files (.NAME.tmp-PID) and
 * renamed only after all input is encoded, so a failed or interrupted run leaves no partial shard
 * under a final name and keeps the folder's earlier data set. After success, train_*.bin and
 * val_*.bin that this run did not write (from an earlier, larger run) are removed, and meta.json is
 * written last.
 *
 * Every option and input is checked (each input must be a readable, non-empty regular file) and
 * the tokenizer opened before anything is written; OUT is created only when the first shard is. */

/* Progress: called after each batch of chunks is written (and once at the end) with the input
 * bytes done, the input total and the tokens written so far. Runs on the calling thread. */
typedef void (*gptc_prepare_progress_fn)(void *user, uint64_t bytes_done, uint64_t bytes_total, uint64_t tokens);

typedef struct gptc_prepare_options {
    const char *tokenizer;     /* "byte" (alias "bytes") or "gpt2" */
    const char *const *inputs; /* text files */
    int ninputs;
    const char *out;           /* output folder */
    float val_fraction;        /* [0, 1): share of the input bytes, from the end, that goes to val */
    long shard_tokens;         /* tokens per shard file (at most 2^31 - 1) */
    int threads;               /* encoding threads (0: all cores) */
    const char *doc_separator; /* NULL or "": one document per file */
    gptc_prepare_progress_fn progress; /* NULL: none */
    void *progress_user;
} gptc_prepare_options;

void gptc_prepare_options_default(gptc_prepare_options *o);

typedef struct gptc_prepare_result {
    uint64_t train_tokens, val_tokens;
    int train_shards, val_shards;
    uint64_t documents;   /* documents tokenized (each begins with end-of-text) */
    uint64_t input_bytes; /* sum of the input file sizes */
    uint64_t val_start;   /* byte offset where the val split begins (input_bytes: no val split) */
    int threads;          /* encoding threads used */
    double seconds;       /* wall time */
    int output_started;   /* on failure: 1 if it came after writing began (a write or read failure
                           * mid-way; the folder keeps its earlier data set), 0 if an option or
                           * input was refused and nothing was written */
} gptc_prepare_result;

/* Prepares as described above; *res (res may be NULL) gets the counts (0 on failure, when
 * output_started says whether writing had begun). */
gptc_status gptc_prepare_run(const gptc_prepare_options *o, gptc_prepare_result *res);
/* The same, reporting only the token counts (either pointer may be NULL). */
gptc_status gptc_prepare(const gptc_prepare_options *o, size_t *train_tokens, size_t *val_tokens);

#ifdef __cplusplus
}
#endif
#endif
