/* clock.c — monotonic time. */
#include "core.h"

#include <time.h>

double gptc_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
