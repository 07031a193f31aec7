/* schedule.c — linear warm-up then cosine decay to a floor; gradient norm and clipping factor. */
#include "optim/optim.h"

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

#define MAX_THREADS 512

double gptc_grad_norm(const float *g, size_t n) {
    double partial[MAX_THREADS] = {0};
    int used = 1;
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        if (nt <= MAX_THREADS) {
            size_t chunk = (n + nt - 1) / nt, lo = id * chunk, hi = lo + chunk > n ? n : lo + chunk;
            double s = 0;
            for (size_t i = lo; i < hi; i++) s += (double)g[i] * g[i];
            partial[id] = s;
            if (id == 0) used = nt;
        }
    }
    if (used > MAX_THREADS) used = MAX_THREADS;
    double total = 0;
    for (int i = 0; i < used; i++) total += partial[i];
    return sqrt(total);
}

float gptc_clip_scale(double norm, float clip) {
    if (clip <= 0) return 1.0f;
    double c = clip / (norm + 1e-6);
    return c < 1.0 ? (float)c : 1.0f;
}
