/* watchdog.c — the comm timeout of the data-parallel layer (dist.h, `gptc train --comm-timeout S`).
 *
 * A rank that dies ends the job through mpirun within about a second, but a rank that stops without
 * dying (stopped, deadlocked, swapping, cut off by a network fault the runtime has not noticed) leaves
 * the others waiting in their next exchange forever: Open MPI has no timeout on a collective. So every
 * blocking exchange of the MPI backend marks when it began (gptc_dist_wait_begin) and ended, and a
 * thread started by gptc_dist_set_comm_timeout checks the mark a few times a second: once one wait
 * passes the limit it writes one line naming the exchange and the wait to stderr and ends the process
 * with _exit(3). mpirun sees a rank end without MPI_Finalize and ends the job. The thread makes no MPI
 * call (the job runs MPI_THREAD_FUNNELED), uses only async-signal-safe calls to report, and costs the
 * exchanges two atomic stores. The limit must exceed the longest wait that is not a fault: the other
 * ranks wait while rank 0 writes a checkpoint or samples. */
#include "dist/dist.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic double g_since;           /* CLOCK_MONOTONIC seconds at the current wait's start; 0: none */
static _Atomic(const char *) g_what;     /* the exchange waited on (a string literal) */
static double g_limit;                   /* seconds; set before the thread starts */
static bool g_started;

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void gptc_dist_wait_begin(const char *what) {
    if (!g_started) return;
    atomic_store_explicit(&g_what, what, memory_order_relaxed);
    atomic_store_explicit(&g_since, mono_s(), memory_order_release);
}

void gptc_dist_wait_end(void) {
    if (!g_started) return;
    atomic_store_explicit(&g_since, 0.0, memory_order_release);
}

static void *watch(void *arg) {
    (void)arg;
    double tick = g_limit / 4 < 0.5 ? g_limit / 4 : 0.5;
    struct timespec pause = {(time_t)tick, (long)((tick - (double)(time_t)tick) * 1e9)};
    for (;;) {
        nanosleep(&pause, NULL);
        double since = atomic_load_explicit(&g_since, memory_order_acquire);
        if (since <= 0) continue;
        double waited = mono_s() - since;
        if (waited <= g_limit) continue;
        const char *what = atomic_load_explicit(&g_what, memory_order_relaxed);
        char msg[512];
        int n = snprintf(msg, sizeof msg,
                         "[rank %d] gptc: comm timeout: %s has waited %.1f s for the other ranks ('comm_timeout' %g): "
                         "a rank has stopped or cannot be reached; ending this rank so that mpirun ends the job\n",
                         gptc_dist_rank(), what ? what : "an exchange", waited, g_limit);
        if (n > 0 && write(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1) < 0) {
            /* nothing else to try: the exit status still says it */
        }
        _exit(3);
    }
    return NULL;
}

gptc_status gptc_dist_set_comm_timeout(double seconds) {
    if (seconds <= 0 || gptc_dist_world() == 1) return GPTC_OK;
    if (g_started) return gptc_fail(GPTC_ERR_STATE, "the comm timeout is already set");
    g_limit = seconds;
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&th, &attr, watch, NULL);
    pthread_attr_destroy(&attr);
    if (e) return gptc_fail(GPTC_ERR_STATE, "'comm_timeout': cannot start the watchdog thread (%s)", strerror(e));
    g_started = true;
    return GPTC_OK;
}
