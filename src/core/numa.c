/* numa.c — placement of the big arenas on multi-socket machines (`gptc train --numa`). Linux puts a
 * page on the NUMA node of the thread that first writes it; gptc_alloc zeroes its blocks on the
 * calling thread, so without this every weight, gradient, moment and activation would live on the
 * main thread's node, and the other socket's threads would read all of them across the link. With
 * first touch on, large blocks are fresh mappings whose pages are written first by the OpenMP thread
 * that the element-wise loops and the optimizer (static schedules: thread i takes the i-th contiguous
 * part) will give that part to, so those passes read and write local memory. GEMMs read the weights
 * from every thread whatever the placement. Threads must be pinned for the placement to hold (the CLI
 * pins them under --numa). */
#include "core.h"

#include <dirent.h>
#include <omp.h>
#include <stdatomic.h>
#include <string.h>

static atomic_bool g_first_touch;

void gptc_alloc_set_first_touch(bool on) { atomic_store(&g_first_touch, on); }
bool gptc_alloc_first_touch(void) { return atomic_load(&g_first_touch); }

int gptc_numa_nodes(void) {
    DIR *d = opendir("/sys/devices/system/node");
    if (!d) return 1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "node", 4) && e->d_name[4] >= '0' && e->d_name[4] <= '9') n++;
    closedir(d);
    return n > 0 ? n : 1;
}

/* Zeroes p[0, bytes) with thread i of the team writing the i-th of gptc_threads() contiguous parts,
 * the split of `#pragma omp parallel for schedule(static)` over the block's floats. */
void gptc_first_touch_zero(void *p, size_t bytes) {
    const int nt = gptc_threads() > 0 ? gptc_threads() : 1;
    const size_t floats = bytes / sizeof(float);
#pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
        const size_t lo = floats * (size_t)t / (size_t)n, hi = floats * (size_t)(t + 1) / (size_t)n;
        memset((float *)p + lo, 0, (hi - lo) * sizeof(float));
        if (t == n - 1) memset((float *)p + floats, 0, bytes - floats * sizeof(float));
    }
}
