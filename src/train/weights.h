/* weights.h — the one reader and the writers of GPT-2 weight files, whatever made them:
 *   gptc       DIR/model.safetensors with gptc.* metadata (a checkpoint step folder)
 *   hf         a Hugging Face GPT-2 folder: config.json + model.safetensors (F32, BF16 or F16; names
 *              with or without "transformer."; lm_head.weight absent or equal to wte; the attn.bias
 *              and attn.masked_bias buffers ignored); a .safetensors file alone finds config.json
 *              beside it
 *   llmc       llm.c's checkpoint (gpt2_124M.bin): 256 int32 header, magic 20240326, version 3
 *              (fp32) or 5 (bf16), then the parameters in llm.c's order, matrices [out, in], wte
 *              padded with zero rows to a multiple of 128
 * The model's own layout is Hugging Face's (Conv1D [in, out]), so hf and gptc files copy tensors as
 * they are and llmc files transpose the four matrices of each layer. */
#ifndef GPTC_TRAIN_WEIGHTS_H
#define GPTC_TRAIN_WEIGHTS_H

#include "io/io.h"
#include "model/gpt2.h"

typedef enum gptc_weights_format { GPTC_WEIGHTS_GPTC, GPTC_WEIGHTS_HF, GPTC_WEIGHTS_LLMC } gptc_weights_format;

/* LoRA adapters beside the weights in PEFT's layout (train/adapters.c): DIR/adapter_config.json and
 * DIR/adapter_model.safetensors. */
typedef struct gptc_adapters_info {
    bool found;               /* the folder holds adapter_config.json (read and checked) */
    char dir[4096];
    int rank;
    float alpha;
    unsigned targets;         /* GPTC_LORA_* bits (PEFT's target_modules; "c_proj" is both projections) */
} gptc_adapters_info;

typedef struct gptc_weights_info {
    gptc_weights_format format;
    char file[4096];          /* the file holding the tensors */
    gptc_model_config cfg;    /* read from the files: metadata, config.json or the llm.c header */
    char tokenizer[32];       /* "gptc.tokenizer"; else "gpt2" for GPT-2's vocabulary of 50257; else "" */
    gptc_dtype dtype;         /* of the tensors (llmc: F32 or BF16; hf: that of wte) */
    gptc_adapters_info adapters; /* a folder's LoRA adapters (found false: none) */
    bool base_only;           /* set by a caller before gptc_weights_load: the base weights without the adapters */
} gptc_weights_info;

/* "gptc", "hf", "llmc" */
const char *gptc_weights_format_name(gptc_weights_format f);

/* Recognises path — a folder holding model.safetensors, a .safetensors file, or an llm.c .bin —
 * and reads its model configuration (from headers: the data's checksums are gptc_weights_load's).
 * An unknown or inconsistent file is GPTC_ERR_FORMAT (or GPTC_ERR_IO) with one line naming the
 * path, the reason and what to do. */
gptc_status gptc_weights_probe(const char *path, gptc_weights_info *info);

/* The same after finding the weights: path may also be a run folder of step folders (its newest
 * valid step is used, as gptc_ckpt_find does). A path with nothing to load is GPTC_ERR_IO. */
gptc_status gptc_weights_find(const char *path, gptc_weights_info *info);

/* Loads the weights described by info into m, built with info->cfg (another shape or GELU form is
 * GPTC_ERR_STATE naming both). Tensors of other dtypes are converted to fp32; wte's padding rows
 * are zero afterwards. Adapters beside them (info->adapters) go into m's attached adapters (m->lora:
 * the same rank and targets, else GPTC_ERR_STATE naming both), or without any are folded into the
 * weights, unless info->base_only. */
gptc_status gptc_weights_load(const gptc_weights_info *info, gptc_model *m);

/* Writes m as DIR/model.safetensors (tensors in the order of the model's layout, or by name as the
 * safetensors library orders them when by_name; dtype F32 or BF16; metadata format=pt, the gptc.*
 * config and tokenizer, crc32c per tensor) and DIR/config.json (Hugging Face's GPT2Config fields),
 * each atomically. DIR must exist. */
gptc_status gptc_weights_write_hf(const char *dir, const gptc_model *m, const char *tokenizer, gptc_dtype dtype,
                                  bool by_name);

/* Writes m as an llm.c checkpoint at path (atomically): version 3 for F32, 5 for BF16 (rounded to
 * nearest even), wte padded with zero rows to a multiple of 128. */
gptc_status gptc_weights_write_llmc(const char *path, const gptc_model *m, gptc_dtype dtype);

/* gptc export: reads src (anything gptc_ckpt_find and gptc_weights_probe accept) and writes it in
 * format "hf" (out is a folder, created if needed) or "llmc" (out is a file), as F32 or BF16. LoRA
 * adapters in src: merge_lora folds them into the weights; else hf copies them beside the base weights
 * (a PEFT folder) and llmc is refused. */
gptc_status gptc_weights_export(const char *src, const char *format, gptc_dtype dtype, const char *out, bool merge_lora);

/* ---- LoRA adapters (train/adapters.c) */
/* Reads dir/adapter_config.json when present (a->found false when absent); a damaged one is GPTC_ERR_FORMAT. */
gptc_status gptc_adapters_probe(const char *dir, gptc_adapters_info *a);
/* GPTC_OK when a holds adapters of this rank on these targets, else GPTC_ERR_STATE naming both. */
gptc_status gptc_adapters_match(const gptc_adapters_info *a, int rank, unsigned targets);
/* Copies the adapters into m->lora (the same rank and targets; alpha taken from the file). */
gptc_status gptc_adapters_load(const gptc_adapters_info *a, gptc_model *m);
/* Folds them into m's weights (gptc_lora_fold_site per pair). */
gptc_status gptc_adapters_merge(const gptc_adapters_info *a, gptc_model *m);
/* Writes m->lora as dir/adapter_model.safetensors and dir/adapter_config.json (atomically each); base: the
 * config's base_model_name_or_path. */
gptc_status gptc_adapters_write(const char *dir, const gptc_model *m, const char *base);
/* Copies a's two files into dir. */
gptc_status gptc_adapters_copy(const gptc_adapters_info *a, const char *dir);

#endif
