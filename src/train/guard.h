/* guard.h — the step guard: decides whether a step's update is applied. A step is bad when its loss
 * or gradient norm is not finite, or (when spike detection is on) when either lies more than z
 * standard deviations above the mean of the last `window` good steps (a NaN z-score counts as a
 * spike). Only good steps enter the window. The state is a few numbers and two rings of floats; the
 * checkpoint stores it (gptc_guard_pack/unpack), so a resumed run judges its steps as an
 * uninterrupted one would. */
#ifndef GPTC_TRAIN_GUARD_H
#define GPTC_TRAIN_GUARD_H

#include "core/core.h"

#define GPTC_GUARD_MIN_FILL 20 /* good steps in the window before spikes are judged (or all of a smaller window) */

typedef enum gptc_bad_kind {
    GPTC_BAD_NONE = 0,
    GPTC_BAD_NONFINITE,   /* loss or gradient norm not finite */
    GPTC_BAD_LOSS_SPIKE,  /* loss z-score above the limit (or NaN) */
    GPTC_BAD_NORM_SPIKE,  /* gradient-norm z-score above the limit (or NaN) */
} gptc_bad_kind;

typedef struct gptc_guard {
    bool spikes;          /* judge spikes (else only non-finite values) */
    int window;           /* ring length W */
    float z;              /* the z-score limit */
    int count;            /* good steps seen, up to W */
    int head;             /* next ring slot */
    float *loss, *norm;   /* [W] rings of the last good steps' loss and gradient norm */
    double z_loss, z_norm; /* the last judged step's z-scores (NaN when not judged) */
} gptc_guard;

/* spikes 0: window and z are unused (window may be 0). */
gptc_status gptc_guard_init(gptc_guard *g, bool spikes, int window, float z);
void gptc_guard_free(gptc_guard *g);

/* Judges a step; a good step enters the window. */
gptc_bad_kind gptc_guard_judge(gptc_guard *g, float loss, double norm);

/* "nonfinite", "loss spike", "norm spike" (or "" for none) */
const char *gptc_bad_kind_name(gptc_bad_kind k);

/* The state as 2 + 2W floats (count, head, then the rings), and back; unpack refuses a different W. */
size_t gptc_guard_packed_len(const gptc_guard *g);
void gptc_guard_pack(const gptc_guard *g, float *out);
gptc_status gptc_guard_unpack(gptc_guard *g, const float *in, size_t len);

#endif
