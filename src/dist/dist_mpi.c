/* dist_mpi.c — the Open MPI backend of dist.h (built when the Makefile finds mpicc; the only file
 * compiled with MPI's headers). A process not started by mpirun never calls MPI_Init: it is a world
 * of one, like the single-process backend. MPI's own errors keep MPI_ERRORS_ARE_FATAL: they end the
 * job, they are never returned. */
#include "dist/dist.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(MPI_Request) <= sizeof(((gptc_comm_req *)0)->opaque), "MPI_Request does not fit gptc_comm_req");

static int g_rank = 0, g_world = 1;
static bool g_mpi; /* MPI_Init ran here */

/* Set by mpirun (Open MPI), or by a PMI/PMIx launcher. */
static bool launched_by_mpirun(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

gptc_status gptc_dist_init(void) {
    if (g_mpi || !launched_by_mpirun()) return GPTC_OK;
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return gptc_fail(GPTC_ERR_STATE, "mpirun: MPI_Init_thread failed");
    g_mpi = true;
    if (provided < MPI_THREAD_FUNNELED) {
        gptc_warn("MPI gives thread level %d, below MPI_THREAD_FUNNELED; continuing (only the main thread talks)", provided);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    gptc_log_set_rank(g_rank, g_world);
    return GPTC_OK;
}

void gptc_dist_finalize(void) {
    if (!g_mpi) return;
    gptc_dist_wait_begin("MPI_Finalize");
    MPI_Finalize();
    gptc_dist_wait_end();
    g_mpi = false;
}

void gptc_dist_abort(int code) {
    if (g_mpi && g_world > 1) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

int gptc_dist_rank(void) { return g_rank; }
int gptc_dist_world(void) { return g_world; }
int gptc_dist_has_mpi(void) { return 1; }

static int as_int(size_t n) {
    GPTC_ASSERT(n <= INT_MAX);
    return (int)n;
}

gptc_status gptc_dist_allreduce_f(float *x, size_t n) {
    if (g_world == 1 || n == 0) return GPTC_OK;
    gptc_dist_wait_begin("MPI_Allreduce");
    MPI_Allreduce(MPI_IN_PLACE, x, as_int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    gptc_dist_wait_end();
    return GPTC_OK;
}

gptc_status gptc_comm_allgather(const void *mine, void *all, size_t bytes) {
    if (g_world == 1) {
        memmove(all, mine, bytes);
        return GPTC_OK;
    }
    gptc_dist_wait_begin("MPI_Allgather");
    MPI_Allgather(mine, as_int(bytes), MPI_BYTE, all, as_int(bytes), MPI_BYTE, MPI_COMM_WORLD);
    gptc_dist_wait_end();
    return GPTC_OK;
}

gptc_status gptc_dist_gather_bytes(const void *mine, size_t len, char **all, size_t *total, int root) {
    *all = NULL;
    *total = 0;
    if (g_world == 1) {
        if (!(*all = malloc(len ? len : 1))) return gptc_fail(GPTC_ERR_NOMEM, "out of memory gathering %zu bytes", len);
        memcpy(*all, mine, len);
        *total = len;
        return GPTC_OK;
    }
    long long mylen = (long long)len, *lens = NULL;
    int *counts = NULL, *displs = NULL;
    gptc_status st = GPTC_OK;
    if (g_rank == root) {
        lens = malloc(sizeof *lens * g_world);
        counts = malloc(sizeof *counts * g_world);
        displs = malloc(sizeof *displs * g_world);
        if (!lens || !counts || !displs) st = gptc_fail(GPTC_ERR_NOMEM, "out of memory gathering from %d ranks", g_world);
    }
    if ((st = gptc_dist_agree(st))) goto done;
    gptc_dist_wait_begin("MPI_Gather (lengths)");
    MPI_Gather(&mylen, 1, MPI_LONG_LONG, lens, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD);
    gptc_dist_wait_end();
    if (g_rank == root) {
        long long sum = 0;
        for (int q = 0; q < g_world; q++) {
            counts[q] = (int)lens[q];
            displs[q] = (int)sum;
            sum += lens[q];
        }
        if (sum > INT_MAX) st = gptc_fail(GPTC_ERR_ARG, "gathering %lld bytes: more than 2 GiB", sum);
        else if (!(*all = malloc(sum ? (size_t)sum : 1))) st = gptc_fail(GPTC_ERR_NOMEM, "out of memory gathering %lld bytes", sum);
        else *total = (size_t)sum;
    }
    if ((st = gptc_dist_agree(st))) goto done;
    gptc_dist_wait_begin("MPI_Gatherv (bytes)");
    MPI_Gatherv(mine, as_int(len), MPI_BYTE, *all, counts, displs, MPI_BYTE, root, MPI_COMM_WORLD);
    gptc_dist_wait_end();
done:
    if (st) {
        free(*all);
        *all = NULL;
        *total = 0;
    }
    free(lens);
    free(counts);
    free(displs);
    return st;
}

gptc_status gptc_dist_bcast(void *buf, size_t bytes, int root) {
    if (g_world == 1) return GPTC_OK;
    gptc_dist_wait_begin("MPI_Bcast");
    MPI_Bcast(buf, as_int(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
    gptc_dist_wait_end();
    return GPTC_OK;
}

/* counts and displacements [world] of the shards in bounds, as MPI's ints */
static gptc_status shard_counts(const size_t *bounds, int **counts, int **displs) {
    *counts = malloc(sizeof(int) * 2 * (size_t)g_world);
    if (!*counts) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    *displs = *counts + g_world;
    for (int r = 0; r < g_world; r++) {
        (*counts)[r] = as_int(bounds[r + 1] - bounds[r]);
        (*displs)[r] = as_int(bounds[r]);
    }
    return GPTC_OK;
}

gptc_status gptc_dist_gather_shards(const float *mine, float *all, const size_t *bounds, int root) {
    if (g_world == 1) {
        memmove(all, mine, sizeof(float) * bounds[1]);
        return GPTC_OK;
    }
    int *counts, *displs;
    gptc_status st = shard_counts(bounds, &counts, &displs);
    if (st) return st;
    gptc_dist_wait_begin("MPI_Gatherv");
    MPI_Gatherv(mine, counts[g_rank], MPI_FLOAT, all, counts, displs, MPI_FLOAT, root, MPI_COMM_WORLD);
    gptc_dist_wait_end();
    free(counts);
    return GPTC_OK;
}

gptc_status gptc_dist_gather_shards_elem(const void *mine, void *all, const size_t *bounds, size_t elem, int root) {
    if (elem == sizeof(float)) return gptc_dist_gather_shards(mine, all, bounds, root);
    if (g_world == 1) {
        memmove(all, mine, elem * bounds[1]);
        return GPTC_OK;
    }
    int *counts, *displs;
    gptc_status st = shard_counts(bounds, &counts, &displs);
    if (st) return st;
    MPI_Datatype type; /* one element: counts and displacements stay in elements */
    MPI_Type_contiguous(as_int(elem), MPI_BYTE, &type);
    MPI_Type_commit(&type);
    gptc_dist_wait_begin("MPI_Gatherv");
    MPI_Gatherv(mine, counts[g_rank], type, all, counts, displs, type, root, MPI_COMM_WORLD);
    gptc_dist_wait_end();
    MPI_Type_free(&type);
    free(counts);
    return GPTC_OK;
}

gptc_status gptc_dist_allgather_shards(float *arena, const size_t *bounds) {
    if (g_world == 1) return GPTC_OK;
    int *counts, *displs;
    gptc_status st = shard_counts(bounds, &counts, &displs);
    if (st) return st;
    gptc_dist_wait_begin("MPI_Allgatherv");
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, arena, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
    gptc_dist_wait_end();
    free(counts);
    return GPTC_OK;
}

static MPI_Request *req_of(gptc_comm_req *r) { return (MPI_Request *)(void *)r->opaque; }

gptc_status gptc_comm_iallreduce_f(float *x, size_t n, gptc_comm_req *r) {
    r->active = false;
    if (g_world == 1 || n == 0) return GPTC_OK;
    MPI_Iallreduce(MPI_IN_PLACE, x, as_int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req_of(r));
    r->active = true;
    return GPTC_OK;
}

gptc_status gptc_comm_ireduce_scatter_f(const float *send, float *recv, const int *counts, gptc_comm_req *r) {
    r->active = false;
    if (g_world == 1) {
        memmove(recv, send, sizeof(float) * (size_t)counts[0]);
        return GPTC_OK;
    }
    MPI_Ireduce_scatter(send, recv, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req_of(r));
    r->active = true;
    return GPTC_OK;
}

gptc_status gptc_comm_test(gptc_comm_req *r, bool *done) {
    *done = true;
    if (!r->active) return GPTC_OK;
    int flag = 0;
    MPI_Test(req_of(r), &flag, MPI_STATUS_IGNORE);
    if (flag) r->active = false;
    *done = flag != 0;
    return GPTC_OK;
}

gptc_status gptc_comm_wait(gptc_comm_req *r) {
    if (!r->active) return GPTC_OK;
    gptc_dist_wait_begin("MPI_Wait (a gradient bucket's allreduce or reduce-scatter)");
    MPI_Wait(req_of(r), MPI_STATUS_IGNORE);
    gptc_dist_wait_end();
    r->active = false;
    return GPTC_OK;
}
