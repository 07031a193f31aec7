/* hparam.h — schedules for any scalar hyper-parameter (learning rate, dropout, weight decay):
 * a list of points "STEP:VALUE,STEP:VALUE,..." (steps increasing), optionally prefixed "cos:".
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

/* Parses spec (NULL or "" gives n = 0). flag names the option in messages; every value must lie in
 * [lo, hi]. */
gptc_status gptc_hparam_parse(gptc_hparam_schedule *s, const char *spec, const char *flag, double lo, double hi);
/* The value at optimizer step `step` (0-based: the step about to run); s->n must be > 0. */
float gptc_hparam_at(const gptc_hparam_schedule *s, int step);

#endif
