/* rng.c — splitmix64: a small, fast, seedable generator whose whole state is one word. */
#include "core.h"

#include <math.h>

uint64_t gptc_hash64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void gptc_rng_seed(gptc_rng *r, uint64_t seed) { r->state = gptc_hash64(seed ^ 0x6a09e667f3bcc909ULL); }

uint64_t gptc_rng_next(gptc_rng *r) {
    r->state += 0x9e3779b97f4a7c15ULL;
    return gptc_hash64(r->state);
}

double gptc_rng_uniform(gptc_rng *r) { return (gptc_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

double gptc_rng_normal(gptc_rng *r) {
    double u1 = 1.0 - gptc_rng_uniform(r); /* (0, 1] so the log is finite */
    double u2 = gptc_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
