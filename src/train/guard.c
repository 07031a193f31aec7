/* guard.c — the step guard's judgement and state (see guard.h). */
#include "train/guard.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

gptc_status gptc_guard_init(gptc_guard *g, bool spikes, int window, float z) {
    memset(g, 0, sizeof *g);
    g->spikes = spikes;
    g->z = z;
    g->z_loss = g->z_norm = NAN;
    if (!spikes) return GPTC_OK;
    if (window < 2) return gptc_fail(GPTC_ERR_ARG, "'spike_window' %d: must be at least 2", window);
    if (!(z > 0) || !isfinite(z)) return gptc_fail(GPTC_ERR_ARG, "'spike_z' %g: must be a positive number", z);
    g->window = window;
    g->loss = calloc((size_t)window, sizeof(float));
    g->norm = calloc((size_t)window, sizeof(float));
    if (!g->loss || !g->norm) {
        gptc_guard_free(g);
        return gptc_fail(GPTC_ERR_NOMEM, "'spike_window' %d: out of memory", window);
    }
    return GPTC_OK;
}

void gptc_guard_free(gptc_guard *g) {
    free(g->loss);
    free(g->norm);
    g->loss = g->norm = NULL;
}

/* (x - mean) / stdev over the ring's first n values, in double, summed in slot order */
static double zscore(const float *ring, int n, double x) {
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += ring[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += (ring[i] - mean) * (ring[i] - mean);
    return (x - mean) / sqrt(var / (n - 1));
}

gptc_bad_kind gptc_guard_judge(gptc_guard *g, float loss, double norm) {
    g->z_loss = g->z_norm = NAN;
    if (!isfinite(loss) || !isfinite(norm)) return GPTC_BAD_NONFINITE;
    if (!g->spikes) return GPTC_BAD_NONE;
    int fill = g->window < GPTC_GUARD_MIN_FILL ? g->window : GPTC_GUARD_MIN_FILL;
    if (g->count >= fill) {
        g->z_loss = zscore(g->loss, g->count, loss);
        g->z_norm = zscore(g->norm, g->count, norm);
        if (!(g->z_loss <= g->z)) return GPTC_BAD_LOSS_SPIKE; /* NaN fails the comparison: a spike */
        if (!(g->z_norm <= g->z)) return GPTC_BAD_NORM_SPIKE;
    }
    g->loss[g->head] = loss;
    g->norm[g->head] = (float)norm;
    g->head = (g->head + 1) % g->window;
    if (g->count < g->window) g->count++;
    return GPTC_BAD_NONE;
}

const char *gptc_bad_kind_name(gptc_bad_kind k) {
    switch (k) {
    case GPTC_BAD_NONE: return "";
    case GPTC_BAD_NONFINITE: return "nonfinite";
    case GPTC_BAD_LOSS_SPIKE: return "loss spike";
    case GPTC_BAD_NORM_SPIKE: return "norm spike";
    }
    return "";
}

size_t gptc_guard_packed_len(const gptc_guard *g) { return 2 + 2 * (size_t)g->window; }

void gptc_guard_pack(const gptc_guard *g, float *out) {
    out[0] = (float)g->count;
    out[1] = (float)g->head;
    if (g->window) {
        memcpy(out + 2, g->loss, sizeof(float) * g->window);
        memcpy(out + 2 + g->window, g->norm, sizeof(float) * g->window);
    }
}

gptc_status gptc_guard_unpack(gptc_guard *g, const float *in, size_t len) {
    if (len != gptc_guard_packed_len(g))
        return gptc_fail(GPTC_ERR_STATE, "the checkpoint's spike window holds %zu values, this run's 'spike_window' %d "
                         "needs %zu", len < 2 ? 0 : (len - 2) / 2, g->window, gptc_guard_packed_len(g));
    int count = (int)in[0], head = (int)in[1];
    if (count < 0 || count > g->window || head < 0 || (g->window && head >= g->window) || count != in[0] || head != in[1])
        return gptc_fail(GPTC_ERR_FORMAT, "the checkpoint's spike window state (%g, %g) is out of range", in[0], in[1]);
    g->count = count;
    g->head = head;
    if (g->window) {
        memcpy(g->loss, in + 2, sizeof(float) * g->window);
        memcpy(g->norm, in + 2 + g->window, sizeof(float) * g->window);
    }
    return GPTC_OK;
}
