/* gpt2.h — the GPT-2 model: parameters, gradients and activations as flat arenas planned once
 * from the configuration (sizes first, one allocation, then views), forward, backward, and the
 * one-token decode step with a KV cache used for sampling.
 *
 * Parameter layout: wte, wpe, then each layer's 12 tensors in order, then ln_f; every tensor
 * starts on a 64-byte boundary. Weights use Hugging Face's GPT-2 layout (Conv1D: [in, out]), so
 * checkpoints copy tensors as they are. wte has Vp = padded_vocab(V) rows; rows V..Vp-1 are zero
 * and stay zero (no gradient reaches them, and they are never a target or a sample).
 *
 * The model calls nothing but its backend (backend/backend.h: memory, the operator table, the
 * profiled operator calls of backend/ops.h); m->k is the table the backend is bound to. */
#ifndef GPTC_MODEL_GPT2_H
#define GPTC_MODEL_GPT2_H

#include "backend/backend.h"
#include "core/core.h"
#include "kernels/attention.h"
#include "kernels/gelu.h"
#include "kernels/kernels.h"

enum {
    GPTC_LN1W, GPTC_LN1B, GPTC_QKVW, GPTC_QKVB, GPTC_ATTPROJW, GPTC_ATTPROJB,
    GPTC_LN2W, GPTC_LN2B, GPTC_FCW, GPTC_FCB, GPTC_FCPROJW, GPTC_FCPROJB,
    GPTC_LAYER_TENSORS
};

/* Views of one layer's tensors (into params or grads). */
typedef struct gptc_layer {
    float *ln1w, *ln1b;         /* (C) */
    float *qkvw, *qkvb;         /* (C,3C), (3C) */
    float *attprojw, *attprojb; /* (C,C), (C) */
    float *ln2w, *ln2b;         /* (C) */
    float *fcw, *fcb;           /* (C,4C), (4C) */
    float *fcprojw, *fcprojb;   /* (4C,C), (C) */
} gptc_layer;

typedef struct gptc_weights {
    float *wte;        /* (Vp,C) */
    float *wpe;        /* (maxT,C) */
    gptc_layer *layer; /* [L] */
    float *lnfw, *lnfb; /* (C) */
} gptc_weights;

/* One tensor of the model as a checkpoint sees it (HF name, real shape, place in the arena). */
typedef struct gptc_tensor_desc {
    char name[48];      /* "h.3.attn.c_attn.weight" */
    int ndim;
    int64_t shape[2];
    size_t offset;      /* floats from the start of the arena (in a trainable set's table: of the set's gradient
                         * and optimizer-state arena) */
    size_t numel;       /* real elements (wte: V*C, not Vp*C) */
    bool decay;         /* AdamW weight decay applies (2-D weights) */
    size_t src;         /* floats from the start of the arena holding the values (gptc_pset.values); the model's
                         * own table: = offset */
    size_t ready;       /* the backward's watermark (gptc_model.grads_ready, a model-arena offset) at or below
                         * which this tensor's gradient is final; the model's own table: = offset */
} gptc_tensor_desc;

/* The trainable set: the tensors the backward forms gradients for and the optimizer updates. Their
 * gradients (gptc_model.grads) and optimizer state are one compact arena of `floats` floats, tensor i at
 * t[i].offset (64-byte aligned, in t's order); its values at values + t[i].src. Three kinds:
 *   whole:    every tensor of the model (t is the model's table, compact = arena: the default);
 *   frozen:   the model's tensors that --freeze leaves trainable (t a table of its own, src = arena offset);
 *   adapters: LoRA's A and B matrices (t the adapters' table, values the adapters' arena, src = offset).
 * The tensors are in increasing `ready` order, so a model-arena watermark maps to a compact one
 * (gptc_pset_ready). */
typedef struct gptc_pset {
    const gptc_tensor_desc *t; /* [n] */
    int n;
    float *values;             /* the arena the src offsets index */
    size_t floats;             /* the gradient / optimizer-state arena */
    bool same_layout;          /* src == offset for every tensor (whole, adapters): the values are one arena in
                                * the compact layout, which ZeRO-1's all-gather can exchange directly */
    bool adapters;             /* LoRA adapters: the model's own parameters never change */
} gptc_pset;

/* The compact watermark for a model-arena watermark lo (grads_ready): the offset of the first tensor of
 * ps whose ready >= lo, or ps->floats when none is. */
size_t gptc_pset_ready(const gptc_pset *ps, size_t lo);

/* ---- LoRA (Hu et al. 2021): a linear layer y = x W + b adapted to y + (alpha/r) (x A^T) B^T, A (r, in)
 * and B (out, r) in PEFT's layout (lora_A.weight, lora_B.weight), A initialised as PEFT does (uniform in
 * +-1/sqrt(in), its kaiming_uniform with a = sqrt(5)) and B zero, so the adapted model starts as the
 * base. The sites are the four linear layers of a block; `targets` has bit s for site s in every layer. */
enum { GPTC_LORA_QKV, GPTC_LORA_ATTPROJ, GPTC_LORA_FC, GPTC_LORA_FCPROJ, GPTC_LORA_SITES };
typedef struct gptc_lora {
    int rank;
    float alpha, scale;         /* scale = alpha / rank */
    unsigned targets;           /* bit GPTC_LORA_*: adapted sites */
    gptc_tensor_desc *tensors;  /* [ntensors]: PEFT names ("base_model.model.transformer.h.0.attn.c_attn.lora_A.weight"),
                                 * by layer then site, A before B; offset = src = place in params, ready = the layer's
                                 * first model float */
    int ntensors;
    size_t floats;
    float *params, *grads;      /* (floats) the adapters and their gradients (grads: from gptc_model_alloc_train) */
    float **A, **B;             /* [L * GPTC_LORA_SITES] views into params; NULL at sites not adapted (a tensor's
                                 * gradient is at the same offset in grads: gptc_lora_grad) */
    float *u;                   /* (L, GPTC_LORA_SITES, B*T, r): each adapted site's scale * x A^T from the forward */
    float *du;                  /* (B*T, r) the backward's scratch */
} gptc_lora;

/* Activations of one training step for (B,T); per-layer tensors are [L] arrays of views. With
 * m->recompute above none, the tensors that level drops are one shared buffer: every layer's view
 * points at it, the forward overwrites it layer by layer and the backward recomputes it:
 *   gelu:  fch_gelu;
 *   attn:  also atty, preatt, att, q, k, v, o, lse (the backward reruns the attention from qkv);
 *   block: also ln1 (+mean, rstd), qkv, attproj, residual2, ln2 (+mean, rstd), fch, fcproj: only
 *          encoded and residual3[l] (each block's input / output), lnf, the logits and losses stay
 *          per layer, and each block's forward runs again just before its backward. */
typedef struct gptc_acts {
    /* bf16 storage (--dtype bf16, kernels.h): ln1, ln2, lnf and fch_gelu (act16), and atty (atty16: flash
     * attention, whose head merge writes it) hold bf16 values (uint16_t) — the activations that only
     * bf16 GEMMs read (the linear layers' forward and weight-gradient products, the classifier), stored
     * as the values those products would round them to. Otherwise they hold floats. */
    bool act16, atty16;
    float *encoded;                 /* (B,T,C) */
    void **ln1;                     /* (B,T,C) */
    float **ln1_mean, **ln1_rstd;   /* (B,T), (B,T) */
    float **qkv;                    /* (B,T,3C) */
    void **atty;                    /* (B,T,C) */
    float **preatt, **att;          /* (B,NH,T,T), naive attention only */
    float **q, **k, **v, **o;       /* (B,NH,T,HS) head-major, flash attention only */
    float **lse;                    /* (B,NH,T) row log-sum-exp, flash attention only */
    float **attproj;                /* (B,T,C) */
    float **residual2;              /* (B,T,C) */
    void **ln2;                     /* (B,T,C) */
    float **ln2_mean, **ln2_rstd;
    float **fch;                    /* (B,T,4C) */
    void **fch_gelu;                /* (B,T,4C) */
    float **fcproj;                 /* (B,T,C) */
    float **residual3;              /* (B,T,C) */
    void *lnf;                      /* (B,T,C) */
    float *lnf_mean, *lnf_rstd;     /* (B,T), (B,T) */
    float *logits;                  /* unfused: (B,T,Vp), overwritten with the probabilities by the loss;
                                     * fused: (min(B*T, GPTC_CLASSIFIER_CHUNK), Vp), one chunk's logits */
    float *losses;                  /* (B,T) */
} gptc_acts;

/* Gradients of activations: one layer's worth, reused layer by layer, plus the residual stream. */
typedef struct gptc_dacts {
    float *dres_out, *dres_in;      /* (B,T,C) gradient at a layer's output / input (ping-pong) */
    float *dln1, *dqkv, *datty, *dpreatt, *datt, *dres2, *dln2, *dfch, *dfch_gelu; /* one layer's */
    float *dq, *dk, *dv, *dout_heads; /* (B,NH,T,HS), flash attention only */
    float *dlnf;                    /* (B,T,C) */
    float *dlogits;                 /* (B,T,Vp), unfused only (the fused classifier works in place) */
} gptc_dacts;

/* Rows of the fused classifier's chunk: its logits take GPTC_CLASSIFIER_CHUNK x Vp floats (206 MB
 * at GPT-2's vocabulary) whatever B and T are. Each chunk streams all of wte three times (logits,
 * dlnf, wte's gradient), so taller chunks pack and read it less often: on a Xeon (family 6 model
 * 207, 2 threads, B*T = 1024) one chunk of 1024 rows against four of 256 ran the logits product at
 * 242.8 against 211.0 GFLOP/s and dlnf's at 226.1 against 200.2 (wte's gradient level), for 155 MB
 * more activation memory. */
#define GPTC_CLASSIFIER_CHUNK 1024

/* The training step's weight matrices kept packed for its products (model/packed.c): the two forms of each
 * (GPTC_PACK_FWD: what the forward multiplies by, GPTC_PACK_DX: what the input gradient multiplies by),
 * each with the range of the parameter arena it was packed from and whether that range changed since. */
enum { GPTC_PACK_FWD, GPTC_PACK_DX, GPTC_PACK_FORMS };
typedef struct gptc_packed_mat {
    void *p;        /* kernels.h gptc_gemm_pack_b's form, in the arena below */
    size_t lo, hi;  /* the weight's floats [lo, hi) in m->params */
    bool stale;     /* a change in [lo, hi) since it was packed: repacked at the next forward */
} gptc_packed_mat;
typedef struct gptc_packed_weights {
    char *arena;            /* one allocation on the model's memory */
    size_t bytes;
    int n;                  /* (L * GPTC_LORA_SITES + 1) * GPTC_PACK_FORMS: layer l's site s form f at index
                             * (l * GPTC_LORA_SITES + s) * GPTC_PACK_FORMS + f, then wte's two */
    gptc_packed_mat *mats;  /* [n] */
} gptc_packed_weights;

/* The weight gradients' shares of the global norm the backward takes inside their products (gptc_be_matmul_bwd's
 * dw_sumsq, the classifier's wte product, corrected by the embeddings' backward for the token rows it adds to),
 * instead of a pass over the gradients afterwards; owned by the caller, who clears set before the backward. */
typedef struct gptc_wsumsq {
    double *sums;  /* [ntensors] */
    bool *set;     /* [ntensors] true where the backward wrote sums[i] */
    int *rows;     /* [B*T] the embeddings' backward's scratch: the batch's distinct tokens */
    double *part;  /* [B*T] the same's scratch: their rows' sums (gptc_be_rows_sumsq) */
} gptc_wsumsq;

typedef struct gptc_model {
    gptc_model_config cfg;
    int Vp;
    const gptc_kernels *k;
    /* parameters and their gradients: same layout */
    size_t num_floats;          /* arena size in floats (with padding) */
    float *params, *grads;      /* grads (num_floats): NULL until gptc_model_alloc_train, and stays NULL with
                                 * fused_update (no whole-model gradient exists; see cgrads) */
    /* O2 (--dtype bf16): the bf16 working copy of params (num_floats, same layout) that every matrix
     * product of the training step reads, rounded to nearest even after each change
     * (gptc_model_params_changed); the fp32 params stay the master the optimizer updates and the
     * embeddings and LayerNorms read. Allocated by gptc_model_alloc_train under bf16 unless fp32_weights;
     * NULL otherwise. The products' bits are the same as rounding the fp32 weights inside the GEMM. */
    uint16_t *params16;
    /* Arena floats [p16_lo, p16_hi) whose params16 values an optimizer wrote with its update, in the same
     * pass (gptc_model_params16_written); the next gptc_model_params_changed skips converting them and
     * clears the range. Empty (0, 0) otherwise. */
    size_t p16_lo, p16_hi;
    gptc_weights w, g;          /* g: views into grads, or with fused_update into cgrads (every layer's views
                                 * point at the one slot) */
    /* --fused-update (set before gptc_model_alloc_train): the trainer updates each layer as soon as its
     * gradients are final, so the L layers share one layer-sized gradient slot. cgrads (cgrad_floats) is
     * the parameter arena with layers 1..L-1 cut out: [0, layer_lo) the embeddings' gradients (wte, wpe,
     * at their arena offsets), [layer_lo, layer_lo + layer_stride) the slot (a layer's block, same
     * relative layout as any layer's in the arena), then ln_f's (arena [lnf_lo, num_floats)). The
     * backward zeroes the slot before each layer's backward (the kernels accumulate). */
    bool fused_update;
    float *cgrads;
    size_t cgrad_floats;
    size_t layer_lo, layer_stride, lnf_lo; /* arena offsets: layer 0's first float, the layers' (equal) stride,
                                            * ln_f's first float (= layer_lo + L * layer_stride) */
    gptc_tensor_desc *tensors;  /* [ntensors] */
    int ntensors;
    /* What training updates (gptc_pset): the whole model (set by gptc_model_init), or after
     * gptc_model_alloc_train the tensors `frozen` leaves, or the LoRA adapters. grads is its compact arena. */
    gptc_pset ps;
    bool *frozen;               /* [ntensors] set before gptc_model_alloc_train (gptc_model_freeze): no gradient
                                 * is formed or kept for these; NULL: none */
    gptc_tensor_desc *ps_table; /* the frozen kind's table (gptc_pset), or NULL */
    gptc_lora *lora;            /* adapters (gptc_model_lora_attach before gptc_model_alloc_train), or NULL; the
                                 * base model is then frozen whole */
    float *gscratch;            /* (2C) where a frozen LayerNorm's dw, db go (never read) */
    int bwd_floor;              /* the lowest layer whose backward runs (layers below hold nothing trainable);
                                 * -1: also the embeddings' */
    /* training activations for (B,T) */
    bool naive_attention;       /* materialise (B,NH,T,T) scores (the reference) instead of flash */
    bool fuse;                  /* fused residual+LayerNorm and chunked classifier (see forward.c);
                                 * false: separate kernels and the whole logits kept */
    gptc_precision precision;   /* --dtype of the training step's matrix products */
    gptc_recompute recompute;   /* --recompute: activations dropped after the forward (see gptc_acts) */
    bool fp32_acts;             /* keep every activation in fp32 under bf16 too (no bf16 storage, gptc_acts):
                                 * the tests that compare the two set it */
    bool fp32_weights;          /* under bf16, no working copy: the GEMMs round the fp32 weights as they pack
                                 * them (the tests that compare the two set it) */
    /* --pack-weights (gptc_model_pack_weights, after gptc_model_alloc_train): the matrices packed once per
     * change for the step's products; NULL: every product packs the weight it reads. */
    gptc_packed_weights *packed;
    /* Zeroing only what the backward accumulates into: training the whole model on the whole arena (no
     * freeze, LoRA or fused_update), gptc_model_zero_grad zeroes the zero_count ranges zero_bufs/zero_ns of
     * m->grads — all but each layer's four matrices' and wte's gradients, whose first writers are products —
     * and sets grads_fresh; the next backward's products then overwrite those (beta 0) instead of adding to
     * zeros read back from memory, and the backward clears it. Ranges set by gptc_model_alloc_train. */
    bool grads_fresh;
    int zero_count;
    float **zero_bufs;
    size_t *zero_ns;
    /* The backend the model runs on, bound by gptc_model_bind_kernels from k, precision and fuse: the
     * training step (forward.c) and decoding (decode.c, fp32 on be.k) call nothing else. */
    gptc_backend be;
    /* On a CUDA device (gptc_model_init_on): be.mem is the device's memory and k its table (backend/cuda.h);
     * false (memset 0): the CPU. */
    bool cuda;
    int B, T;
    float *act_arena, *dact_arena;
    size_t act_floats, dact_floats;
    gptc_acts a;
    gptc_dacts d;
    /* Dropout in the training step (forward.c): on the embeddings and on both residual branches'
     * outputs with probability dropout, on the attention probabilities with attn_dropout (flash
     * attention only). Masks are counter-based (kernels/dropout.h) in dropout_seed, which the trainer
     * sets per micro-step, so the backward and any recompute draw the same ones; the trainer sets
     * both to 0 for evaluation. Sampling (decode.c) never drops. */
    float dropout, attn_dropout;
    uint64_t dropout_seed;
    int *inputs, *targets;      /* (B,T) copies of the last forward's batch */
    int B_last, T_last;         /* shape of the last forward with targets (what backward uses) */
    float loss;                 /* mean loss of the last forward with targets */
    /* Called by the backward with a watermark lo once every gradient in [lo, num_floats) is final:
     * after ln_f's, after each layer's from the last to the first (lo = the layer's first tensor),
     * and after the embeddings' (lo = 0); wte's classifier gradient comes before all of them. The
     * data-parallel reducer starts its buckets' exchanges from here. NULL: none. */
    void (*grads_ready)(void *user, size_t lo);
    void *grads_ready_user;
    /* Where the backward leaves the sums of squares of the weight gradients its products finish (gptc_wsumsq), or
     * NULL: none asked for. Meaningful only where those gradients are final: the trainer sets it for the last
     * micro-step of a single process (an exchange between ranks changes the gradients after the products). */
    gptc_wsumsq *wsumsq;
} gptc_model;


/* After anything wrote parameters [lo, hi) of m->params (an optimizer update of that range, loading or
 * initialising weights, an all-gather): refreshes what the model derives from them (under O2 bf16, the
 * bf16 working copy the products read; packed weights are marked for repacking at the next forward).
 * Cheap when nothing is derived. */
void gptc_model_params_changed(gptc_model *m, size_t lo, size_t hi);
/* The optimizer wrote params16 for arena floats [lo, hi) together with the update (the backend's AdamW
 * pieces): the caller's gptc_model_params_changed need not convert them again. */
void gptc_model_params16_written(gptc_model *m, size_t lo, size_t hi);

/* ---- what training updates (model/trainable.c, model/lora.c) */

/* The gradient of adapter tensor p (A[i] or B[i] of m->lora): the same offset in the adapters' grads. */
static inline float *gptc_lora_grad(const gptc_lora *lr, const float *p) { return lr->grads + (p - lr->params); }

/* A training step's FLOPs per token for m as set up (the multiply-adds of the products it runs, x2, and the
 * attention's): gptc_model_flops_per_token for the whole model; with a partial trainable set the forward,
 * the input gradients of the layers the backward reaches (bwd_floor), the weight gradients of the trained
 * matrices only, and the adapters' six small products per adapted site. */
double gptc_model_step_flops_per_token(const gptc_model *m, int T);

/* Whether a --freeze pattern matches a tensor name (gptc_tensor_desc.name, "h.3.attn.c_attn.weight"): as a
 * glob over the whole name ("*.bias"), or component by component as a prefix of it, each component equal,
 * a glob, or a range of integers "A-B" ("wte", "h.0-9.*", "h.*.ln_1"). */
bool gptc_freeze_match(const char *pattern, const char *name);
/* Marks the tensors the comma-separated patterns match as frozen (before gptc_model_alloc_train); a
 * pattern matching nothing, or every tensor frozen, is refused naming it. *nfrozen gets the count. */
gptc_status gptc_model_freeze(gptc_model *m, const char *patterns, int *nfrozen);
/* The trainable table of the tensors not frozen (out NULL: the count only; *floats the compact arena). */
int gptc_model_trainable_table(const gptc_tensor_desc *tensors, int n, const bool *frozen, gptc_tensor_desc *out,
                               size_t *floats);
/* After the optimizer wrote the trainable values of compact floats [lo, hi) of m->ps: refreshes what the
 * model derives from them (gptc_model_params_changed on their arena ranges). */
void gptc_model_pset_changed(gptc_model *m, size_t lo, size_t hi);

/* --lora_targets: a comma-separated list of attn (c_attn and attn.c_proj), mlp (c_fc and mlp.c_proj) or the
 * module names, as bits GPTC_LORA_*; NULL or "" is attn */
gptc_status gptc_lora_targets_parse(const char *spec, unsigned *targets);
/* "attn.c_attn,attn.c_proj": the modules of targets */
void gptc_lora_targets_name(unsigned targets, char *out, size_t cap);
/* site s's module under h.N ("attn.c_attn"), its weight's index among a layer's tensors (GPTC_QKVW, ...;
 * gptc_layer's fields in that order) and its in / out widths for C */
const char *gptc_lora_site_module(int s);
int gptc_lora_site_weight(int s);
void gptc_lora_site_shape(int s, int C, int *in, int *out);
/* The layer and site of adapter pair p: tensors 2p (A) and 2p + 1 (B) of gptc_lora_table's order (by layer,
 * then by site among the targets). */
void gptc_lora_pair_site(unsigned targets, int p, int *l, int *s);
/* The adapters' table for cfg (out NULL: the count only) and their floats; names as gptc_lora.tensors. */
int gptc_lora_table(const gptc_model_config *cfg, int rank, unsigned targets, gptc_tensor_desc *out, size_t *floats);
/* PEFT's key of an adapter tensor: "base_model.model.transformer." + name */
void gptc_lora_peft_name(const char *name, char *out, size_t cap);
/* For the planner: host bytes (struct, table, views) and backend bytes of the values, as allocated. */
void gptc_lora_bytes(const gptc_model_config *cfg, int rank, unsigned targets, size_t *host, size_t *values);
/* Attaches adapters of rank r with alpha on the targets (before gptc_model_alloc_train): A uniform in
 * +-1/sqrt(in) (deterministic in seed), B zero; the base model is frozen whole. */
gptc_status gptc_model_lora_attach(gptc_model *m, int rank, float alpha, unsigned targets, uint64_t seed);
/* Layer l's site s weight W (in, out) += scale A^T B^T for A (r, in), B (out, r): each element's sum over r in
 * double, added once (the caller refreshes derived copies: gptc_model_params_changed). */
void gptc_lora_fold_site(gptc_model *m, int l, int s, const float *A, const float *B, int r, double scale);
void gptc_model_lora_free(gptc_model *m);

/* Floats of the parameter arena (m->num_floats) for cfg, planned without allocating. */
size_t gptc_model_arena_floats(const gptc_model_config *cfg);
/* The tensor table gptc_model_init would make for cfg (names, shapes, offsets) into out, without
 * allocating the arena; returns the count (out NULL: only the count). For the planner. */
int gptc_model_tensor_table(const gptc_model_config *cfg, gptc_tensor_desc *out);
/* Plans and allocates the parameter arena (zeroed), on the CPU. */
gptc_status gptc_model_init(gptc_model *m, const gptc_model_config *cfg);
/* The same on device: -1 the CPU, N >= 0 CUDA device N (selected for the process, gptc_cuda_select; the
 * model's memory and table are then the CUDA backend's). */
gptc_status gptc_model_init_on(gptc_model *m, const gptc_model_config *cfg, int device);
void gptc_model_free(gptc_model *m);
/* Packed weights (gptc_model.packed; model/packed.c). gptc_model_packed_bytes: the bytes they take for cfg on
 * k (bf16: for --dtype bf16's products), 0 where k's products cannot read them (then packing is off).
 * gptc_model_pack_weights: allocates them on m's backend (after gptc_model_alloc_train; nothing where the
 * bytes are 0), every form stale; the next forward packs them. gptc_model_packed_changed: marks the forms
 * whose weight overlaps arena floats [lo, hi) stale (gptc_model_params_changed calls it).
 * gptc_model_packed_refresh: repacks the stale forms (a "weights.pack" span; the start of every forward).
 * gptc_model_packed_form: layer l's site's form (l -1: wte's), or NULL when m keeps none. */
size_t gptc_model_packed_bytes(const gptc_kernels *k, const gptc_model_config *cfg, bool bf16);
size_t gptc_model_packed_table_bytes(const gptc_model_config *cfg); /* the table's, as gptc_alloc counts them */
gptc_status gptc_model_pack_weights(gptc_model *m);
void gptc_model_packed_free(gptc_model *m);
void gptc_model_packed_changed(gptc_model *m, size_t lo, size_t hi);
void gptc_model_packed_refresh(gptc_model *m);
const void *gptc_model_packed_form(const gptc_model *m, int l, int site, int form);

/* GPT-2 initialisation: weights N(0, 0.02), residual projections (attn.c_proj, mlp.c_proj)
 * N(0, 0.02/sqrt(2L)), biases 0, LayerNorm weights 1; deterministic in seed. */
void gptc_model_init_weights(gptc_model *m, uint64_t seed);
/* Allocates gradients and the activations for micro-batches of (B,T), for the attention chosen by
 * m->naive_attention (false = fused flash attention, O(T) memory per row), the classifier chosen
 * by m->fuse, the recompute level m->recompute and the precision m->precision (set all before);
 * binds the kernels (gptc_model_bind_kernels). */
gptc_status gptc_model_alloc_train(gptc_model *m, int B, int T);
/* Binds m->be to the model's memory (the CPU's, or the CUDA device's when m->cuda), the table m->k, m->precision and m->fuse (done by gptc_model_init and
 * gptc_model_alloc_train; call again after changing m->k, m->precision or m->fuse). */
void gptc_model_bind_kernels(gptc_model *m);
/* Bytes of the activation arena and of the activation-gradient arena gptc_model_alloc_train plans
 * for (B,T) with these settings (the model's inputs/targets copies not included). */
void gptc_model_act_bytes(const gptc_model_config *cfg, int B, int T, bool naive_attention, bool fuse,
                          gptc_recompute recompute, gptc_precision precision, size_t *acts, size_t *dacts);

/* Bytes, as gptc_alloc counts them (gptc_alloc_stats), that gptc_model_init (params: the arena and its
 * tables) and gptc_model_alloc_train (grads; acts: both activation arenas, their views and the
 * inputs/targets copies) allocate for these settings. */
typedef struct gptc_model_bytes {
    size_t params, grads, acts;
    size_t weights16; /* the bf16 working copy of the weights (O2, --dtype bf16), else 0 */
} gptc_model_bytes;
void gptc_model_alloc_bytes(const gptc_model_config *cfg, int B, int T, bool naive_attention, bool fuse,
                            gptc_recompute recompute, gptc_precision precision, gptc_model_bytes *out);
/* Floats of the compact gradient arena of m->fused_update (gptc_model.cgrads) for cfg: the arena
 * without layers 1..L-1. */
size_t gptc_model_fused_grad_floats(const gptc_model_config *cfg);

/* Forward over inputs (B,T); with targets (B,T) returns the mean loss, else returns 0 and leaves
 * the logits in m->a.logits (B,T,Vp), which only an unfused model (m->fuse false) keeps. B,T must
 * not exceed the allocated ones. */
float gptc_model_forward(gptc_model *m, const int *inputs, const int *targets, int B, int T);
/* Zeroes the gradients for a new accumulation: m->grads, or with fused_update the whole of m->cgrads; where
 * m->zero_count is set, the ranges the backward accumulates into, and the rest is overwritten by the next
 * backward (gptc_model.grads_fresh): either way the next backward's gradients are its own. */
void gptc_model_zero_grad(gptc_model *m);
/* Backward of the last forward, accumulating into m->grads; dloss_scale multiplies the gradient
 * of the mean loss (1/accumulation steps). */
void gptc_model_backward(gptc_model *m, float dloss_scale);
/* fused_update's second pass: the body's backward again from the kept dlnf (B,T,C) of the last training
 * micro-step, over the layers only: ln_f's gradient goes to scratch (the slot's ln_1 part, zeroed
 * before layer L-1 anyway), every layer is recomputed under m->recompute (the last one too: the
 * first pass left the shared buffers holding layer 0's), the slot is zeroed before and grads_ready is
 * called after each layer's backward (the trainer's update), and the embeddings' backward is not run
 * (their gradients and ln_f's came from the first pass, which must not have updated anything the
 * backward reads: the layers' weights and ln_f's are read by it, wte and wpe are not). */
void gptc_model_backward_layers(gptc_model *m);
/* A training micro-step: forward with targets and backward in one call (what the trainer runs).
 * Same result as forward then backward; when fused, each classifier chunk's gradient is formed
 * while its logits are in memory, where a separate backward has to compute them again. */
float gptc_model_forward_backward(gptc_model *m, const int *inputs, const int *targets, int B, int T,
                                  float dloss_scale);

/* ---- decoding with a KV cache */
typedef struct gptc_kv_cache {
    int maxT, len;          /* positions held */
    float *k, *v;           /* (L, maxT, C) */
    float *x, *xn, *qkv, *atty, *tmp, *fch, *att; /* (C), (C), (3C), (C), (C), (4C), (NH,maxT) */
    float *logits;          /* (Vp) */
    int *token;             /* (1) the step's token, and mean, rstd (2) the LayerNorms' statistics: backend
                             * memory, as every operator argument must be */
    float *stats;
    float *arena;
    const gptc_backend_memory *mem; /* the backend memory the arena came from */
} gptc_kv_cache;

gptc_status gptc_kv_cache_init(gptc_kv_cache *c, const gptc_model *m);
void gptc_kv_cache_free(gptc_kv_cache *c);
/* Appends one token at position c->len and returns the logits (V valid of Vp) for the next token. */
const float *gptc_model_decode_step(const gptc_model *m, gptc_kv_cache *c, int token);

/* ---- generation at memory speed: a prompt prefilled in one batched forward, then S samples decoded
 * together. All S sequences hold the same number of positions (they share the prompt and each step
 * appends one token to every one). A step is one matvec per weight matrix for the S rows (the weights
 * streamed once, in fp32 or, with bf16, from a bf16 copy: half the bytes); activations stay fp32, the
 * KV cache is fp32, or bf16 under bf16 (keys and values rounded as they are stored). */
typedef struct gptc_decoder {
    int S;                  /* samples (sequences) */
    int maxT, len;          /* positions held by every sample's cache */
    int shared;             /* positions 0..shared-1 are the same in every sample (a forked prompt) and
                             * are read from sample 0's cache only; the others' rows below it are unused */
    int rows;               /* the most positions one prefill takes */
    gptc_precision dtype;   /* fp32, or bf16: a step's matvecs read bf16 weights, a prefill rounds them */
    int wfmt;               /* the layer matrices' matvec format (kernels.h GPTC_MV_*): panels in packed,
                             * or (K,N) rows: the model's fp32 weights, or under bf16 m->params16 */
    void *packed;           /* when wfmt has GPTC_MV_PANELS: per layer qkvw, attprojw, fcw, fcprojw, then the
                             * classifier's wte^T, in panel form (gptc_matvec_pack), floats or bf16; else NULL */
    const uint16_t *w16;    /* m->params16 when a bf16 step reads its rows, else NULL */
    const void *cls;        /* the classifier's weights: wte^T's panels in packed, or wte's (V,C) rows (m->w.wte,
                             * or m->params16's) */
    bool kv16;              /* the cache holds bf16 values (under bf16: half the bytes a step's attention
                             * reads), else floats */
    void *k, *v;            /* (L, S, maxT, C) keys and values, sample s of layer l at (l*S + s)*maxT*C
                             * elements (below d->shared: sample 0's rows for every sample) */
    /* a step's S rows */
    float *x, *xn, *qkv, *atty, *tmp, *fch; /* (S,C), (S,C), (S,3C), (S,C), (S,C), (S,4C) */
    float *mean, *rstd;     /* (max(S,1)) LayerNorm statistics (unused) */
    float *att;             /* (S,NH,maxT) attention_decode_shared's scratch */
    float *logits;          /* (S,Vp) the next-token logits of every sample (V valid per row) */
    /* a prefill's rows */
    float *px, *pxn, *pqkv, *patty, *ptmp, *pfch; /* (rows,C), (rows,C), (rows,3C), (rows,C), (rows,C), (rows,4C) */
    float *pq, *pk, *pv, *po; /* (NH,rows,HS) head-major, for the flash attention */
    float *plse, *pmean, *prstd; /* (NH,rows), (rows), (rows) */
    float *lu;              /* (max(rows, S), r) LoRA's x A^T when the model has adapters (m->lora), else NULL */
    float *arena;
    const gptc_backend_memory *mem;
} gptc_decoder;

/* Allocates the caches of S samples and the buffers of prefills of up to `rows` positions (1..context)
 * on the model's backend, and the weights a step reads: pack, or bf16 without m->params16: a copy of the
 * layer matrices and the classifier's wte^T in panel form (gptc_matvec_pack; bf16: rounded); else the
 * model's own fp32 rows, or under bf16 m->params16's rows. */
gptc_status gptc_decoder_init(gptc_decoder *d, const gptc_model *m, int samples, int rows, gptc_precision dtype,
                              bool pack);
/* Whether a packed fp32 copy (gptc_decoder_init's pack) fits beside what gptc_alloc holds now, within 90 %
 * of `machine` bytes (gptc_machine_memory; 0: unknown, taken as fitting); bf16 always (its copy is
 * needed either way). */
bool gptc_decoder_pack_fits(const gptc_model *m, gptc_precision dtype, size_t machine);
void gptc_decoder_free(gptc_decoder *d);
/* Prefill: tokens (n, 1 <= n <= d->rows) become positions 0..n-1 of sample s's cache (what it held is
 * replaced; a shared prompt is first copied back into every sample's own rows) in one forward over all n rows (LayerNorm of all rows, the products as GEMMs — gemm, or under
 * bf16 gemm_bf16_in16 on the bf16 copy —, causal flash attention, MLP); sets d->len = n and returns the
 * logits (Vp, V valid) of the last position, row s of d->logits. */
const float *gptc_decoder_prefill(const gptc_model *m, gptc_decoder *d, int s, const int *tokens, int n);
/* Makes sample src's cache (d->len positions) every sample's: a prompt prefilled once. Nothing is copied
 * (unless src is not 0: then into sample 0's rows); the positions are shared (d->shared = d->len), read
 * once per step for all samples. */
void gptc_decoder_fork(const gptc_model *m, gptc_decoder *d, int src);
/* One step for every sample: tokens (S) at position d->len (< maxT); returns the logits (S,Vp). */
const float *gptc_decoder_step(const gptc_model *m, gptc_decoder *d, const int *tokens);
/* Bytes of weights one step reads: the matrices (the classifier's V rows of wte) at the dtype's size,
 * the biases, LayerNorm parameters and one wpe row in fp32; the KV cache not counted. */
size_t gptc_decoder_step_weight_bytes(const gptc_model *m, gptc_precision dtype);
/* FLOPs of a prefill of n positions: 2 per multiply-add of the products, the causal attention's
 * (2 n^2 C per layer, the visible half of QK^T and PV) and the last row's classifier. */
double gptc_decoder_prefill_flops(const gptc_model *m, int n);

#endif
