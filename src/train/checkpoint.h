/* checkpoint.h — checkpoints as folders of safetensors files:
 *   DIR/step-00000100/model.safetensors   HF GPT-2 tensor names and layouts, config in metadata
 *   DIR/step-00000100/config.json         HF-style GPT-2 config, so the folder loads elsewhere
 *                                         (activation_function names the GELU form)
 *   DIR/step-00000100/optim.safetensors   the optimizer's state buffers ("<state_names[s]>.<name>":
 *                                         AdamW's "exp_avg.", "exp_avg_sq."; F32, or with --optim-state
 *                                         BF16, or U8 plus "<state_names[s]>.absmax.<name>" F32 [blocks]
 *                                         for int8; the type under gptc.optim_state), the trainer state and
 *                                         the options of train/hparams.def that have a key (the
 *                                         optimizer's name under gptc.optimizer) in its metadata
 * A checkpoint is written into DIR/.tmp-step-N-PID, every file fsync'd, then renamed into place and
 * DIR fsync'd, so a crash leaves either the old set or the new one. Each tensor carries a CRC32C. */
#ifndef GPTC_TRAIN_CHECKPOINT_H
#define GPTC_TRAIN_CHECKPOINT_H

#include "model/gpt2.h"
#include "optim/optimizer.h"
#include "train/hparams.h"

typedef struct gptc_trainer_state {
    int step;                 /* optimizer steps completed */
    uint64_t rng;             /* trainer RNG state */
    uint64_t loader_epoch, loader_cursor;
    char tokenizer[32];       /* tokenizer of the training data ("" if unknown) */
    /* the options the run was trained with: those of train/hparams.def with a checkpoint key (seed,
     * lr, batch, the schedules, the optimizer, ...; total_batch holds the tokens per update) */
    gptc_hp_values hp;
    /* the step guard (train/guard.h): rollbacks change the learning rate for the rest of the run */
    float lr_scale;           /* multiplies the schedule's lr (1 until a rollback lowers it; 0 saves as 1) */
    int rollbacks;            /* rollbacks so far */
    int bad_run;              /* bad steps in a row just before this checkpoint */
    float *guard;             /* save: guard_len floats of gptc_guard_pack (may be NULL); load: a buffer of
                               * guard_len floats, or NULL; guard_len becomes what the file holds (0: none) */
    size_t guard_len;
    /* the callbacks' overrides (NaN none) */
    float ov_lr, ov_dropout, ov_attn_dropout, ov_weight_decay;
} gptc_trainer_state;

/* Writes DIR/step-<step> atomically, then removes all but the newest `keep` step folders.
 * opt NULL: a weights-only checkpoint; else state holds opt's state buffers of the whole arena (lo 0,
 * hi num_floats), stored in their own type.
 * *written (may be NULL) gets the folder path. */
gptc_status gptc_ckpt_save(const char *dir, const gptc_model *m, const gptc_optimizer_kind *opt, const gptc_ostate *state,
                           const gptc_trainer_state *s, int keep, char *written, size_t cap);

/* Finds the newest step folder in dir whose model file and optimizer state (where present) open and
 * verify (headers and checksums); older valid ones are
 * the fallback when a newer one is damaged (a warning names it). *found false when none. If dir
 * itself is a step folder, or any folder holding model.safetensors (a Hugging Face GPT-2 folder),
 * or a file (an llm.c .bin, a .safetensors), it is returned as it is. */
gptc_status gptc_ckpt_find(const char *dir, char *path, size_t cap, bool *found);
/* The same for readers of the weights alone (sample, eval, export, --init): the optimizer state is
 * neither verified nor required to be whole (a 124M checkpoint's is 1 GB of checksums). */
gptc_status gptc_ckpt_find_weights(const char *dir, char *path, size_t cap, bool *found);

/* Reads the model configuration (shape and GELU form; a checkpoint that does not record the form
 * is tanh, GPT-2's) and tokenizer name from a step folder, or from anything gptc_weights_probe
 * (train/weights.h) reads. Headers only: the tensors' checksums are verified by the load. */
gptc_status gptc_ckpt_read_config(const char *step_dir, gptc_model_config *cfg, char *tokenizer, size_t cap);

/* Loads the weights into m (initialised with the same config; a different shape or GELU form is
 * refused naming both) and, when opt/state/s are non-NULL, opt's state buffers and the trainer
 * state (which only a gptc checkpoint has: weights from elsewhere are refused there, pointing to
 * 'init'; a checkpoint of another optimizer, or of another state type ('optim_state'), is refused, naming
 * both). state's buffers (allocated, in the run's type) are filled bit for bit. */
gptc_status gptc_ckpt_load(const char *step_dir, gptc_model *m, const gptc_optimizer_kind *opt, gptc_ostate *state,
                           gptc_trainer_state *s);
/* The same, loading only the state's range [state->lo, state->hi) of the arena (a ZeRO-1 shard, which for
 * int8 does not cut a block): each tensor's piece inside it is loaded, the rest of the file is skipped. */
gptc_status gptc_ckpt_load_range(const char *step_dir, gptc_model *m, const gptc_optimizer_kind *opt,
                                 gptc_ostate *state, gptc_trainer_state *s);

#endif
