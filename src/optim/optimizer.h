/* optimizer.h — the optimizer interface: what the trainer, the checkpoints and the planner know of an
 * optimizer. Each optimizer is one file (optim/adamw.c, optim/lion.c) that defines a
 * gptc_optimizer_kind, plus its line in the registry (optim/optimizer.c). Nothing outside optim/
 * names an optimizer's hyper-parameters: the kind reads its own from the run's options.
 *
 * "The arena" below is the model's trainable set (model/gpt2.h gptc_pset, m->ps): the parameter arena by
 * default, or the compact arena of what --freeze leaves or of LoRA's adapters; the optimizer reaches each
 * tensor's values through m->ps (values + src).
 *
 * State: `nstates` buffers, each shaped like the parameter arena (num_floats elements, or a ZeRO-1
 * shard [lo, hi) of it), held in one of three types (--optim-state, gptc_ostate below): fp32 (4 bytes
 * per parameter and state), bf16 (2 bytes, stochastic rounding) or int8 (1 byte, plus one fp32 absmax
 * per block of GPTC_OSTATE_BLOCK values of a tensor); checkpoints store buffer s as tensors
 * "<state_names[s]>.<tensor name>" (F32, BF16 or U8) and, for int8, "<state_names[s]>.absmax.<tensor
 * name>" (F32, one per block) in optim.safetensors, so a checkpoint written by one rank or by many holds
 * the same tensors. */
#ifndef GPTC_OPTIM_OPTIMIZER_H
#define GPTC_OPTIM_OPTIMIZER_H

#include "gptc.h"
#include "model/gpt2.h"

#define GPTC_OPTIM_MAX_STATES 4

/* --optim-state: how the state buffers hold their values (kernels/ostate.h has the arithmetic). */
typedef enum gptc_ostate_type { GPTC_OSTATE_FP32, GPTC_OSTATE_BF16, GPTC_OSTATE_INT8 } gptc_ostate_type;

/* An optimizer's state buffers for arena elements [lo, hi). buf[s] holds hi - lo elements of
 * gptc_ostate_elem(type) bytes (float, bf16 as uint16_t, or uint8_t code indices), element j belonging
 * to parameter lo + j (padding between tensors included, unused). int8: absmax[s] holds the scales of
 * blocks [blk_lo, blk_lo + nblocks) of the arena's block numbering (gptc_ostate_block_of): every
 * tensor's blocks of GPTC_OSTATE_BLOCK elements counted from its start (the last partial), tensor by
 * tensor; [lo, hi) must then not cut a block (whole tensors, or ZeRO-1 shards snapped by
 * gptc_ostate_snap_bounds). */
typedef struct gptc_ostate {
    gptc_ostate_type type;
    int nstates;
    size_t lo, hi;
    size_t blk_lo, nblocks;                 /* int8 only (0 otherwise) */
    void *buf[GPTC_OPTIM_MAX_STATES];       /* (hi - lo) elements each */
    float *absmax[GPTC_OPTIM_MAX_STATES];   /* int8: nblocks floats each; NULL otherwise */
    const gptc_backend_memory *mem;         /* where gptc_ostate_alloc took the buffers (the model's backend
                                             * memory), NULL for a state wrapping the caller's buffers */
} gptc_ostate;

typedef struct gptc_optimizer_kind {
    const char *name;                               /* "adamw", "lion": what --optimizer takes */
    const char *help;                               /* one line for --help */
    int nstates;                                    /* state buffers, each one float per parameter */
    const char *state_names[GPTC_OPTIM_MAX_STATES]; /* their checkpoint prefixes: "exp_avg", "exp_avg_sq" */
    /* Checks the options this optimizer reads (GPTC_ERR_ARG naming the option, without a CLI flag). */
    gptc_status (*check)(const gptc_train_options *o);
    /* One update of arena floats [lo, hi): p = m->params (the whole arena), g holds the gradients of the
     * range (g[0] is parameter lo's), state the buffers of a range [state->lo, state->hi) that contains
     * [lo, hi) (so a caller updating layer by layer passes the same state each time). Every tensor's
     * piece inside the range is updated, with weight decay `wd` on the tensors marked decay (2-D
     * weights); padding between tensors is left alone. lr the step's learning rate, grad_scale multiplies
     * g first (clipping), t the 1-based update count (with o->seed, the key of bf16's stochastic
     * rounding). Reads its other hyper-parameters from o. A compact state (bf16, int8) goes through
     * gptc_ostate_update block by block; [lo, hi) must not cut an int8 block (whole tensors, or snapped
     * ZeRO-1 shards). It may write m->params16 for the range in the same pass and say so
     * (gptc_model_params16_written); the caller then calls gptc_model_params_changed as always. */
    void (*update)(gptc_model *m, const gptc_train_options *o, const float *g, const gptc_ostate *state,
                   size_t lo, size_t hi, float lr, float wd, float grad_scale, int t);
} gptc_optimizer_kind;

/* The registry, in the order `--help` lists them; the first is the default. */
extern const gptc_optimizer_kind *const gptc_optimizers[];
extern const int gptc_noptimizers;
/* The kind named `name`, or NULL. */
const gptc_optimizer_kind *gptc_optimizer_find(const char *name);
/* "adamw, lion": the names, for help text and messages. */
const char *gptc_optimizer_names(void);
/* Bytes of optimizer state for `floats` parameters (a shard or the whole arena): nstates allocations of
 * floats floats each, as gptc_alloc counts them (gptc_alloc_block_bytes); 0 for no floats. */
size_t gptc_optimizer_state_bytes(const gptc_optimizer_kind *k, size_t floats);

/* ---- typed state (optim/ostate.c) */

/* "fp32", "bf16", "int8" */
const char *gptc_ostate_name(gptc_ostate_type t);
/* the type named s; false when s names none */
bool gptc_ostate_parse(const char *s, gptc_ostate_type *t);
#define GPTC_OSTATE_NAMES "fp32, bf16, int8"
/* bytes per stored element: 4, 2, 1 */
size_t gptc_ostate_elem(gptc_ostate_type t);
/* The block numbering of a parameter layout (tensors [nt], by increasing offset): the index of the
 * block that arena element pos starts or lies in (a position in the padding before a tensor: that
 * tensor's first block; past the last tensor: the total count). */
size_t gptc_ostate_block_of(const gptc_tensor_desc *tensors, int nt, size_t pos);
/* ZeRO-1 bounds (world + 1, from gptc_dist_shards) moved down, for int8, to the start of the block they
 * cut, so no block is split between ranks (fp32 and bf16: unchanged); returns the longest shard. */
size_t gptc_ostate_snap_bounds(const gptc_tensor_desc *tensors, int nt, gptc_ostate_type t, int world, size_t *bounds);
/* Bytes, as gptc_alloc counts them, of the state of k for `elems` elements holding `blocks` int8 blocks:
 * nstates buffers (and for int8 nstates scale arrays); equals gptc_optimizer_state_bytes for fp32. */
size_t gptc_ostate_bytes(const gptc_optimizer_kind *k, gptc_ostate_type t, size_t elems, size_t blocks);
/* Allocates (gptc_alloc, zeroed: moments start at 0, which every type holds exactly) the state of k for
 * arena elements [lo, hi) of m in type t; on failure frees what it took and returns GPTC_ERR_NOMEM. */
gptc_status gptc_ostate_alloc(gptc_ostate *st, const gptc_optimizer_kind *k, gptc_ostate_type t, const gptc_model *m,
                              size_t lo, size_t hi);
void gptc_ostate_free(gptc_ostate *st);
/* An fp32 state over caller-owned buffers bufs[s] (hi - lo floats each): what code with float moments
 * hands to update. */
gptc_ostate gptc_ostate_fp32(float *const *bufs, int nstates, size_t lo, size_t hi);

/* The fp32 update of a block of n <= GPTC_OSTATE_BLOCK elements: p, g (n), the widened states st[s] (n
 * each, updated in place), wd the tensor's weight decay. */
typedef void (*gptc_ostate_block_fn)(void *ctx, float *p, const float *g, float *const *st, size_t n, float wd);
/* A compact state's update of arena elements [lo, hi) (inside [st->lo, st->hi)) of m with gradients g
 * (g[0] is element lo's): the tensors' pieces cut into blocks of GPTC_OSTATE_BLOCK counted from each
 * tensor's start, the blocks shared statically among the threads of one parallel region; each block's
 * states are widened to fp32 (the table's ostate_*_load), fn updates them and the parameters, and they
 * are stored back (ostate_bf16_store with the key gptc_ostate_sr_key(seed, t, s), or ostate_q8_store,
 * the first state on the signed map and the others on the unsigned one). Every block is one thread's,
 * so the bits do not depend on the thread count; nor, as blocks are relative to tensors and the
 * rounding bits to arena indices, on how the arena is cut into ranges. wd applies to decay tensors.
 * Returns the parameters updated (the tensors' elements inside the range, padding not counted). */
size_t gptc_ostate_update(const gptc_model *m, const gptc_ostate *st, const float *g, size_t lo, size_t hi, float wd,
                        uint64_t seed, int t, gptc_ostate_block_fn fn, void *ctx);

#endif
