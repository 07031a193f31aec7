/* plan.h — the memory planner: the bytes per rank a training run allocates (parameters, gradients,
 * AdamW moments, activations, per-thread kernel scratch), computed from the settings alone, before
 * anything big is allocated. `gptc plan` prints it; gptc_train refuses a run that cannot fit. */
#ifndef GPTC_MODEL_PLAN_H
#define GPTC_MODEL_PLAN_H

#include "model/gpt2.h"

typedef struct gptc_mem_request {
    gptc_model_config model;
    int batch, seq;           /* B, T of a micro-step */
    gptc_precision dtype;
    gptc_recompute recompute;
    bool naive_attention;     /* stored (B,NH,T,T) scores instead of flash */
    bool no_fusion;           /* the unfused path: whole (B,T,Vp) logits and their gradient */
    int threads;              /* OpenMP threads (0: this process's gptc_threads()) */
    int ranks;                /* data-parallel ranks, >= 1 */
    int zero;                 /* 1: ZeRO-1, the optimizer state split over the ranks; 0: replicated */
    const char *optimizer;    /* its name in the registry (optim/optimizer.h; NULL: the default) */
    bool fused_update;        /* --fused-update: gradients of the embeddings, ln_f and one layer slot only */
    const char *optim_state;  /* how its state is stored: "fp32" (NULL: the default), "bf16", "int8" */
    const char *freeze;       /* --freeze patterns (NULL: none): gradients and state for the rest only */
    int lora;                 /* --lora rank (0: off): gradients and state for the adapters only */
    const char *lora_targets; /* --lora-targets (NULL: attn) */
    bool pack_weights;        /* the weight matrices kept packed (gptc train --pack-weights, resolved) */
} gptc_mem_request;

/* Bytes per rank, as gptc_alloc counts them (gptc_alloc_stats). */
typedef struct gptc_mem_plan {
    size_t params;    /* the parameter arena (the fp32 master weights) and the model's tensor tables; with lora also
                       * the adapters (values, table, views), with freeze the frozen flags and the trainable table */
    size_t weights16; /* O2 (--dtype bf16): the bf16 working copy of the weights the products read; else 0 */
    size_t grads;     /* the gradient arena; with zero=1 on many ranks plus the rank's reduced gradient shard;
                       * with fused_update the compact arena (gpt2.h cgrads) alone; with freeze or lora the
                       * trainable set's compact arena (gpt2.h gptc_pset) and a frozen LayerNorm's scratch */
    size_t optim;     /* the optimizer's state buffers (gptc_ostate_bytes): the whole arena each, or with
                       * zero=1 the largest rank's shard (gptc_dist_shards, for int8 snapped to whole blocks),
                       * in the state's type (4, 2 or 1 byte per element; int8 plus an fp32 scale per block) */
    size_t acts;      /* activation and activation-gradient arenas, their views, the batch copies (model and trainer);
                       * with lora the adapters' (L, 4, B*T, r) products and their (B*T, r) gradient */
    size_t packed;    /* with pack_weights: the packed weight matrices and their table (gpt2.h gptc_packed_weights;
                       * 0 where the kernels multiply without them); else 0 */
    size_t workspace; /* kernel scratch: each thread's GEMM packing buffers and flash-attention tiles (kept
                       * once grown), plus the largest scratch a single call allocates and frees */
    size_t total;
    int threads;      /* the thread count planned for */
} gptc_mem_plan;

/* Zeroes *r and sets ranks 1 (the other fields' zero values are the defaults). */
void gptc_mem_request_default(gptc_mem_request *r);
/* Plans r into *out; a bad setting is GPTC_ERR_ARG with one line naming its flag. */
gptc_status gptc_mem_plan_make(const gptc_mem_request *r, gptc_mem_plan *out);

#endif
