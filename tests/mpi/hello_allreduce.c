/* hello_allreduce.c — a small MPI program for the MPI test scripts in tests/mpi, independent of gptc.
 *
 *   hello_allreduce
 *       checks one MPI_Allreduce of known values, and prints where every rank runs (host name,
 *       network namespace, pid); exits 0 only when every sum is exact.
 *   hello_allreduce --bench [MAX_MIB]
 *       times MPI_Allreduce (float sum) from 4 bytes to MAX_MIB MiB (default 256): the median over
 *       repeats of the slowest rank's time, with the ring model's bus bandwidth 2(N-1)/N * S / t; then
 *       the ring model's latency alpha (from the smallest message) and link bandwidth (from the
 *       largest), as docs/scaling.md uses them.
 *   hello_allreduce --buckets TOTAL_MB BUCKET_MB
 *       times allreducing TOTAL_MB (decimal MB, e.g. 498 for GPT-2 124M's fp32 gradients) as
 *       consecutive MPI_Allreduce calls of BUCKET_MB each, as a bucketed gradient sync does with no
 *       backward to overlap: the median of 5 (slowest rank), for tools/scaling_model.py --predict.
 *   hello_allreduce --loop [--watchdog S | --watchdog-thread S] [--stamp FILE]
 *       allreduces 1 MiB until killed. With --stamp, rank 0 rewrites FILE atomically (temp + rename)
 *       about every 0.2 s: a stand-in for a checkpoint. With --watchdog S, a rank that has waited
 *       more than S seconds for a collective to complete prints why and calls MPI_Abort, so a rank
 *       that hangs (rather than dies) cannot hang the others: the prototype of a comm timeout.
 *       --watchdog-thread S does the same for a blocking MPI_Allreduce: a second thread watches the
 *       time since the collective began, and past S seconds prints why and calls _exit(3) (no MPI
 *       call off the main thread); mpirun then ends the job because a rank exited without finalizing.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank, g_size;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Waits for req; with watchdog_s > 0, aborts the whole job once the wait passes watchdog_s. */
static void wait_or_abort(MPI_Request *req, double watchdog_s, const char *what) {
    if (watchdog_s <= 0) {
        MPI_Wait(req, MPI_STATUS_IGNORE);
        return;
    }
    double t0 = now_s();
    for (;;) {
        int done = 0;
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done) return;
        double waited = now_s() - t0;
        if (waited > watchdog_s) {
            fprintf(stderr,
                    "hello_allreduce: rank %d: watchdog: %s has waited %.1f s for the other ranks (limit %g s); "
                    "a rank is stuck or unreachable; aborting the job\n",
                    g_rank, what, waited, watchdog_s);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        struct timespec pause = {0, 200000}; /* 0.2 ms: polls drive Open MPI's progress engine */
        nanosleep(&pause, NULL);
    }
}

/* The thread watchdog: g_wait_since is when the main thread entered a collective (0: not in one). */
static _Atomic double g_wait_since;
static double g_thread_limit;

static void *watchdog_thread(void *arg) {
    (void)arg;
    for (;;) {
        struct timespec pause = {0, 100000000}; /* 0.1 s */
        nanosleep(&pause, NULL);
        double since = atomic_load(&g_wait_since);
        if (since > 0 && now_s() - since > g_thread_limit) {
            char msg[256];
            int n = snprintf(msg, sizeof msg,
                             "hello_allreduce: rank %d: watchdog: MPI_Allreduce has waited %.1f s for the other ranks "
                             "(limit %g s); a rank is stuck or unreachable; exiting so that mpirun ends the job\n",
                             g_rank, now_s() - since, g_thread_limit);
            if (write(2, msg, (size_t)n) < 0) { /* nothing more to do */ }
            _exit(3);
        }
    }
    return NULL;
}

static int check_mode(void) {
    enum { N = 4099 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    if (!x || !y) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < N; i++) x[i] = (float)(g_rank + 1) * (float)(i % 97 + 1);
    MPI_Allreduce(x, y, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    /* sum over ranks of (r+1)*k = k * N(N+1)/2: exact in float for these small integers */
    long tri = (long)g_size * (g_size + 1) / 2;
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (y[i] != (float)(tri * (i % 97 + 1))) bad++;
    int bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

    /* where each rank runs: host name and network namespace (the inode of /proc/self/ns/net) */
    char me[256] = {0}, host[64] = {0}, ns[64] = "?";
    gethostname(host, sizeof host - 1);
    ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    if (n > 0) ns[n] = '\0';
    snprintf(me, sizeof me, "%s %s %d", host, ns, (int)getpid());
    char *all = g_rank == 0 ? calloc((size_t)g_size, sizeof me) : NULL;
    MPI_Gather(me, sizeof me, MPI_CHAR, all, sizeof me, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (g_rank == 0) {
        int distinct = 0;
        for (int r = 0; r < g_size; r++) {
            char h[64], s[64];
            int pid;
            sscanf(all + r * sizeof me, "%63s %63s %d", h, s, &pid);
            printf("rank %d: host %s, netns %s, pid %d\n", r, h, s, pid);
            int seen = 0;
            for (int q = 0; q < r; q++) {
                char h2[64], s2[64];
                sscanf(all + q * sizeof me, "%63s %63s", h2, s2);
                if (strcmp(s, s2) == 0) seen = 1;
            }
            distinct += !seen;
        }
        printf("network namespaces: %d distinct of %d ranks\n", distinct, g_size);
        if (bad_all) printf("allreduce WRONG: %d ranks, %d wrong sums\n", g_size, bad_all);
        else printf("allreduce ok: %d ranks, %d floats exact\n", g_size, N);
        fflush(stdout);
        free(all);
    }
    free(x);
    free(y);
    return bad_all ? 1 : 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int bench_mode(double max_mib) {
    size_t max_bytes = (size_t)(max_mib * 1048576.0);
    if (max_bytes < 4) max_bytes = 4;
    float *x = malloc(max_bytes), *y = malloc(max_bytes);
    if (!x || !y) MPI_Abort(MPI_COMM_WORLD, 2);
    memset(x, 0, max_bytes);
    memset(y, 0, max_bytes);
    double ring = 2.0 * (g_size - 1) / g_size;
    size_t sizes[32];
    double med[32];
    int k = 0;
    for (size_t bytes = 4; bytes <= max_bytes && k < 32; bytes *= 4, k++) {
        int count = (int)(bytes / 4);
        int reps = bytes <= (1u << 16) ? 200 : bytes <= (1u << 22) ? 30 : 7;
        double t[200];
        for (int w = 0; w < 2; w++) MPI_Allreduce(x, y, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (int r = 0; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now_s();
            MPI_Allreduce(x, y, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double mine = now_s() - t0, slowest;
            MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            t[r] = slowest;
        }
        qsort(t, (size_t)reps, sizeof t[0], cmp_double);
        sizes[k] = bytes;
        med[k] = t[reps / 2];
    }
    if (g_rank == 0) {
        /* ring model t = 2(N-1) alpha + 2(N-1)/N * S / BW: alpha from the smallest message, BW from
         * the largest; the model column shows how well two numbers describe every size between */
        double alpha = g_size > 1 ? med[0] / (2.0 * (g_size - 1)) : 0;
        double bw = ring * sizes[k - 1] / (med[k - 1] - 2.0 * (g_size - 1) * alpha);
        printf("# %d ranks: bytes, median us (slowest rank), algbw GB/s, busbw GB/s (2(N-1)/N S/t), model us, measured/model\n",
               g_size);
        for (int i = 0; i < k; i++) {
            double model = 2.0 * (g_size - 1) * alpha + ring * sizes[i] / bw;
            printf("%12zu %12.1f %10.3f %10.3f %12.1f %8.2f\n", sizes[i], med[i] * 1e6, sizes[i] / med[i] / 1e9,
                   ring * sizes[i] / med[i] / 1e9, model * 1e6, med[i] / model);
        }
        if (g_size > 1)
            printf("fit: alpha %.2f us, BW %.3f GB/s (ring model, %d ranks; alpha from %zu B, BW from %zu B)\n", alpha * 1e6,
                   bw / 1e9, g_size, sizes[0], sizes[k - 1]);
        fflush(stdout);
    }
    free(x);
    free(y);
    return 0;
}

static int buckets_mode(double total_mb, double bucket_mb) {
    size_t total = (size_t)(total_mb * 1e6) / 4, bucket = (size_t)(bucket_mb * 1e6) / 4;
    if (total < 1 || bucket < 1) MPI_Abort(MPI_COMM_WORLD, 2);
    float *x = calloc(total, sizeof *x), *y = calloc(total, sizeof *y);
    if (!x || !y) MPI_Abort(MPI_COMM_WORLD, 2);
    double t[5];
    int nb = 0;
    MPI_Allreduce(x, y, (int)(bucket < total ? bucket : total), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int r = 0; r < 5; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_s();
        nb = 0;
        for (size_t off = 0; off < total; off += bucket, nb++) {
            size_t n = total - off < bucket ? total - off : bucket;
            MPI_Allreduce(x + off, y + off, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        double mine = now_s() - t0;
        MPI_Allreduce(&mine, &t[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    qsort(t, 5, sizeof t[0], cmp_double);
    if (g_rank == 0) {
        printf("buckets: %g MB in %d allreduces of %g MB on %d ranks: %.3f ms (median of 5, slowest rank)\n", total_mb, nb,
               bucket_mb, g_size, t[2] * 1e3);
        fflush(stdout);
    }
    free(x);
    free(y);
    return 0;
}

static int loop_mode(double watchdog_s, double thread_s, const char *stamp) {
    enum { N = 262144 }; /* 1 MiB of floats */
    float *x = calloc(N, sizeof *x), *y = calloc(N, sizeof *y);
    if (!x || !y) MPI_Abort(MPI_COMM_WORLD, 2);
    if (thread_s > 0) {
        pthread_t th;
        g_thread_limit = thread_s;
        if (pthread_create(&th, NULL, watchdog_thread, NULL) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double last = 0;
    for (long it = 0;; it++) {
        if (thread_s > 0) {
            atomic_store(&g_wait_since, now_s());
            MPI_Allreduce(x, y, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            atomic_store(&g_wait_since, 0.0);
        } else {
            MPI_Request req;
            MPI_Iallreduce(x, y, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
            wait_or_abort(&req, watchdog_s, "MPI_Iallreduce");
        }
        if (g_rank == 0 && stamp && now_s() - last > 0.2) {
            char tmp[4096];
            snprintf(tmp, sizeof tmp, "%s.tmp", stamp);
            FILE *f = fopen(tmp, "w");
            if (!f || fprintf(f, "iteration %ld\n", it) < 0 || fclose(f) != 0 || rename(tmp, stamp) != 0) {
                perror(stamp);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            last = now_s();
        }
    }
    return 0; /* not reached: the loop ends when the job is killed */
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    int rc = 0, mode = 0;
    double max_mib = 256, watchdog_s = 0, thread_s = 0, total_mb = 0, bucket_mb = 0;
    const char *stamp = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--bench") == 0) {
            mode = 1;
            if (i + 1 < argc && argv[i + 1][0] != '-') max_mib = atof(argv[++i]);
        } else if (strcmp(argv[i], "--buckets") == 0 && i + 2 < argc) {
            mode = 3;
            total_mb = atof(argv[++i]);
            bucket_mb = atof(argv[++i]);
        } else if (strcmp(argv[i], "--loop") == 0) mode = 2;
        else if (strcmp(argv[i], "--watchdog") == 0 && i + 1 < argc) watchdog_s = atof(argv[++i]);
        else if (strcmp(argv[i], "--watchdog-thread") == 0 && i + 1 < argc) thread_s = atof(argv[++i]);
        else if (strcmp(argv[i], "--stamp") == 0 && i + 1 < argc) stamp = argv[++i];
        else {
            if (g_rank == 0) fprintf(stderr, "hello_allreduce: unknown argument %s\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (mode == 0) rc = check_mode();
    else if (mode == 1) rc = bench_mode(max_mib);
    else if (mode == 3) rc = buckets_mode(total_mb, bucket_mb);
    else rc = loop_mode(watchdog_s, thread_s, stamp);
    MPI_Finalize();
    return rc;
}
