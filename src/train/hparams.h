/* hparams.h — the training options of train/hparams.def as data: their descriptions (name, kind,
 * range, checkpoint key), the defaults, the library's range check, and a run's values as the
 * checkpoints record them (numbers and texts by table index, so nothing here names an option).
 *
 * Messages: the library names an option by its gptc_train_options field in single quotes ('lr',
 * 'model.context'); the CLI rewrites each 'field' it has a flag for as --flag (cli/flag_names.c). */
#ifndef GPTC_TRAIN_HPARAMS_H
#define GPTC_TRAIN_HPARAMS_H

#include "gptc.h"
#include "optim/hparam.h"
#include <stdbool.h>
#include <stdint.h>

typedef enum { GPTC_HP_INT, GPTC_HP_LONG, GPTC_HP_U64, GPTC_HP_FLOAT, GPTC_HP_TEXT, GPTC_HP_FLAG, GPTC_HP_LIST } gptc_hp_kind;
typedef enum { GPTC_HP_CK_NONE, GPTC_HP_CK_REQ, GPTC_HP_CK_OPT } gptc_hp_ckpt;

/* GPTC_HP_<field>: each option's index in gptc_hps */
enum {
#define HP(field, ...) GPTC_HP_##field,
#include "train/hparams.def"
#undef HP
    GPTC_HP_N
};

typedef struct gptc_hp_info {
    const char *field, *flag;
    gptc_hp_kind kind;
    size_t offset;         /* in gptc_train_options */
    double min, max;
    const char *meta, *help;
    const char *ckpt_key;  /* NULL: not in checkpoints */
    gptc_hp_ckpt ckpt;
    bool warn;             /* warn when a resumed run changes it */
} gptc_hp_info;

extern const gptc_hp_info gptc_hps[GPTC_HP_N];

/* One value of each option: integers in i, floats in f, strings in text (keyed options only). */
typedef struct gptc_hp_values {
    int64_t i[GPTC_HP_N];
    uint64_t u[GPTC_HP_N];
    double f[GPTC_HP_N];
    char text[GPTC_HP_N][GPTC_HPARAM_SPEC_MAX];
} gptc_hp_values;

/* Sets every table option to its default (the rest of *o is left alone). */
void gptc_hp_defaults(gptc_train_options *o);
/* Every numeric option within its [min, max]: GPTC_ERR_ARG "'field' value: must be ..." otherwise. */
gptc_status gptc_hp_check(const gptc_train_options *o);
/* The values of the keyed options of *o into *v (text NULL as ""). */
void gptc_hp_capture(gptc_hp_values *v, const gptc_train_options *o);
/* Option k's value in *v as metadata text; whether the two values of option k differ. */
void gptc_hp_format(const gptc_hp_values *v, int k, char *buf, size_t cap);
bool gptc_hp_differs(const gptc_hp_values *a, const gptc_hp_values *b, int k);
/* Parses metadata text into option k of *v; false when it is not a value of the option's kind. */
bool gptc_hp_parse_value(gptc_hp_values *v, int k, const char *text);
/* Option k's default into *v (for a checkpoint older than the key). */
void gptc_hp_default_value(gptc_hp_values *v, int k);
/* On resume, warns (gptc_warn) for each warn option that the run changes from the checkpoint's. */
void gptc_hp_warn_changes(const char *ckpt, const gptc_hp_values *was, const gptc_hp_values *now);

#endif
