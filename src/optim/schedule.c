/* schedule.c — linear warm-up then cosine decay to a floor; gradient norm and clipping factor. */
#include "optim/optim.h"
#include "core/profile.h"

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

/* The sum of squares in NCHUNK fixed chunks, each summed in 8 independent double lanes (which the
 * compiler vectorises, and which keep the adds off one latency chain), then added in chunk order:
 * the same bits for any thread count. */
#define NCHUNK 64
double gptc_grad_sumsq(const float *g, size_t n) {
    gptc_prof_begin(GPTC_PROF_OPT, "grad_norm", -1);
    double partial[NCHUNK];
    size_t per = (n + NCHUNK - 1) / NCHUNK;
    per = (per + 7) & ~(size_t)7;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < NCHUNK; c++) {
        size_t lo = (size_t)c * per < n ? (size_t)c * per : n, hi = lo + per < n ? lo + per : n;
        double lane[8] = {0};
        size_t i = lo;
        for (; i + 8 <= hi; i += 8)
            for (int j = 0; j < 8; j++) lane[j] += (double)g[i + j] * g[i + j];
        for (; i < hi; i++) lane[i & 7] += (double)g[i] * g[i];
        partial[c] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    }
    double total = 0;
    for (int c = 0; c < NCHUNK; c++) total += partial[c];
    gptc_prof_end(2.0 * n, 4.0 * n); /* a multiply-add per float read */
    return total;
}

double gptc_grad_norm(const float *g, size_t n) { return sqrt(gptc_grad_sumsq(g, n)); }

float gptc_clip_scale(double norm, float clip) {
    if (clip <= 0) return 1.0f;
    double c = clip / (norm + 1e-6);
    return c < 1.0 ? (float)c : 1.0f;
}
