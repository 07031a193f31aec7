/* schedule.c — linear warm-up then cosine decay to a floor; gradient norm and clipping factor. */
#include "optim/optim.h"
#include "backend/backend.h"

#include <math.h>
#include <omp.h>

float gptc_lr_at(const gptc_lr_schedule *s, int step) {
    if (step < s->warmup) return s->lr * (float)(step + 1) / (float)s->warmup;
    int span = s->steps - s->warmup - 1;
    double progress = span > 0 ? (double)(step - s->warmup) / span : 1.0;
    if (progress > 1) progress = 1;
    double lr_min = (double)s->lr * s->floor;
    return (float)(lr_min + 0.5 * (1.0 + cos(M_PI * progress)) * (s->lr - lr_min));
}

/* The backend's grad_sumsq entry (kernels/ref/sumsq.c: fixed chunks, the same bits for any thread
 * count), with its profiler span. */
double gptc_grad_sumsq(const float *g, size_t n) { return gptc_be_grad_sumsq(gptc_backend_default(), g, n); }

double gptc_grad_norm(const float *g, size_t n) { return sqrt(gptc_grad_sumsq(g, n)); }

float gptc_clip_scale(double norm, float clip) {
    if (clip <= 0) return 1.0f;
    double c = clip / (norm + 1e-6);
    return c < 1.0 ? (float)c : 1.0f;
}
