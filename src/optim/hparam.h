/* hparam.h — schedules for any scalar hyper-parameter (learning rate, dropout, weight decay):
 * a list of points "STEP:VALUE,STEP:VALUE,..." (steps increasing), optionally prefixed "cos:".
 *
 * The step convention, the one place it is stated: STEP is the step number the log shows, 1 for
 * the first optimizer step (gptc_step_info.step, the JSON log's "step"); the point "N:V" gives V to
 * the step the log numbers N. (Point 0 is before the first step: "0:V" only sets the value the ramp
 * to the next point starts from.)
 * Before the first point the value is the first point's, after the last the last's; in between it
 * moves linearly, or with "cos:" along a half cosine (slow at both ends). Example, dropout held at
 * zero while the loss settles, then ramped: "0:0.0,10000:0.0,50000:0.1". */
#ifndef GPTC_OPTIM_HPARAM_H
#define GPTC_OPTIM_HPARAM_H

#include "core/core.h"

#define GPTC_HPARAM_MAX_POINTS 64
#define GPTC_HPARAM_SPEC_MAX 1024

typedef struct gptc_hparam_schedule {
    int n;                          /* points; 0: no schedule */
    bool cosine;
    int step[GPTC_HPARAM_MAX_POINTS];
    float value[GPTC_HPARAM_MAX_POINTS];
} gptc_hparam_schedule;

/* Parses spec (NULL or "" gives n = 0). flag names the option in messages (as the library names
 * options: its field in quotes, train/hparams.h); every value must lie in
 * [lo, hi]. */
gptc_status gptc_hparam_parse(gptc_hparam_schedule *s, const char *spec, const char *flag, double lo, double hi);
/* The value of the step the log numbers `step` (1-based; see above); s->n must be > 0. */
float gptc_hparam_at(const gptc_hparam_schedule *s, int step);

#endif
