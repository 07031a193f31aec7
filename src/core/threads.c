/* threads.c — the OpenMP thread count, set once per run, binding the team's threads to cores, and a
 * spinning barrier for a team's threads. */
#include "core.h"

#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

void gptc_set_threads(int n) {
    if (n > 0) omp_set_num_threads(n);
}

int gptc_threads(void) { return omp_get_max_threads(); }

static cpu_set_t g_saved; /* the process's mask before the first pin */
static bool g_have_saved;

/* The first CPU listed in cpu c's thread_siblings_list (c itself when unknown): one id per core. */
static int core_of(int c) {
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c);
    FILE *f = fopen(path, "r");
    int first = c;
    if (f) {
        if (fscanf(f, "%d", &first) != 1) first = c;
        fclose(f);
    }
    return first;
}

int gptc_pin_threads(int *cpus, int cap) {
    if (!g_have_saved) {
        if (sched_getaffinity(0, sizeof g_saved, &g_saved) != 0)
            return gptc_fail(GPTC_ERR_STATE, "'pin': cannot read this process's CPU affinity"), -1;
        g_have_saved = true;
    }
    /* the allowed CPUs, one per physical core first, then their siblings */
    int order[CPU_SETSIZE], n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &g_saved) && ((core_of(c) == c) == (pass == 0))) order[n++] = c;
    if (n == 0) return gptc_fail(GPTC_ERR_STATE, "'pin': this process may run on no CPU"), -1;
    int nt = gptc_threads(), failed = 0;
#pragma omp parallel num_threads(nt)
    {
        int i = omp_get_thread_num();
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(order[i % n], &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) {
#pragma omp atomic write
            failed = 1;
        }
    }
    if (failed) return gptc_fail(GPTC_ERR_STATE, "'pin': the kernel refused to bind a thread to a CPU"), -1;
    for (int i = 0; cpus && i < nt && i < cap; i++) cpus[i] = order[i % n];
    return nt;
}

void gptc_unpin_threads(void) {
    if (!g_have_saved) return;
#pragma omp parallel
    sched_setaffinity(0, sizeof g_saved, &g_saved);
}

void gptc_spin_barrier_wait(gptc_spin_barrier *b, int nt, int *sense) {
    const int mine = *sense = !*sense;
    if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == nt) { /* the last to arrive releases the rest */
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->sense, mine, __ATOMIC_RELEASE);
        return;
    }
    for (long spins = 0; __atomic_load_n(&b->sense, __ATOMIC_ACQUIRE) != mine; spins++) {
        if (spins < 4096) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield();
        }
    }
}
