/* hparam.c — piecewise-linear and cosine schedules of a scalar hyper-parameter (see hparam.h). */
#include "optim/hparam.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

gptc_status gptc_hparam_parse(gptc_hparam_schedule *s, const char *spec, const char *flag, double lo, double hi) {
    memset(s, 0, sizeof *s);
    if (!spec || !*spec) return GPTC_OK;
    if (strlen(spec) >= GPTC_HPARAM_SPEC_MAX)
        return gptc_fail(GPTC_ERR_ARG, "%s: longer than %d characters", flag, GPTC_HPARAM_SPEC_MAX - 1);
    const char *p = spec;
    if (strncmp(p, "cos:", 4) == 0) {
        s->cosine = true;
        p += 4;
    }
    while (*p) {
        if (s->n == GPTC_HPARAM_MAX_POINTS)
            return gptc_fail(GPTC_ERR_ARG, "%s %s: more than %d points", flag, spec, GPTC_HPARAM_MAX_POINTS);
        char *end;
        errno = 0;
        long step = strtol(p, &end, 10);
        if (end == p || *end != ':' || errno || step < 0 || step > 2000000000L)
            return gptc_fail(GPTC_ERR_ARG, "%s %s: \"%s\" is not STEP:VALUE (e.g. \"0:0.0,1000:0.1\", optionally \"cos:\" first)",
                             flag, spec, p);
        p = end + 1;
        double v = strtod(p, &end);
        if (end == p || (*end && *end != ',') || !isfinite(v))
            return gptc_fail(GPTC_ERR_ARG, "%s %s: the value after step %ld is not a number", flag, spec, step);
        if (v < lo || v > hi) return gptc_fail(GPTC_ERR_ARG, "%s %s: value %g at step %ld is outside [%g, %g]", flag, spec, v, step, lo, hi);
        if (s->n && step <= s->step[s->n - 1])
            return gptc_fail(GPTC_ERR_ARG, "%s %s: steps must increase (%ld after %d)", flag, spec, step, s->step[s->n - 1]);
        s->step[s->n] = (int)step;
        s->value[s->n] = (float)v;
        s->n++;
        p = *end ? end + 1 : end;
        if (*end && !*p) return gptc_fail(GPTC_ERR_ARG, "%s %s: ends with a comma", flag, spec);
    }
    if (!s->n) return gptc_fail(GPTC_ERR_ARG, "%s %s: no points", flag, spec);
    return GPTC_OK;
}

float gptc_hparam_at(const gptc_hparam_schedule *s, int step) {
    if (step <= s->step[0]) return s->value[0];
    for (int i = 1; i < s->n; i++) {
        if (step < s->step[i]) {
            double f = (double)(step - s->step[i - 1]) / (s->step[i] - s->step[i - 1]);
            if (s->cosine) f = 0.5 * (1 - cos(M_PI * f));
            return (float)(s->value[i - 1] + f * (s->value[i] - s->value[i - 1]));
        }
    }
    return s->value[s->n - 1];
}
