/* dist_single.c — the backend of dist.h for a build without MPI: one process, world 1. Every
 * collective is a copy or nothing, so the trainer runs the same code either way. */
#include "dist/dist.h"

#include <stdlib.h>
#include <string.h>

/* Under mpirun every copy of a build without MPI would train alone and race on the checkpoints. */
gptc_status gptc_dist_init(void) {
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (size && atoi(size) > 1)
        return gptc_fail(GPTC_ERR_STATE, "mpirun -np %s: this gptc was built without MPI; install libopenmpi-dev and "
                         "rebuild (make MPI=1) to train on many ranks", size);
    return GPTC_OK;
}
void gptc_dist_finalize(void) {}
void gptc_dist_abort(int code) { exit(code); }
int gptc_dist_rank(void) { return 0; }
int gptc_dist_world(void) { return 1; }
int gptc_dist_has_mpi(void) { return 0; }

gptc_status gptc_dist_allreduce_f(float *x, size_t n) { return GPTC_OK; }

gptc_status gptc_comm_allgather(const void *mine, void *all, size_t bytes) {
    memmove(all, mine, bytes);
    return GPTC_OK;
}

gptc_status gptc_dist_bcast(void *buf, size_t bytes, int root) { return GPTC_OK; }

gptc_status gptc_dist_gather_shards(const float *mine, float *all, const size_t *bounds, int root) {
    memmove(all, mine, sizeof(float) * bounds[1]);
    return GPTC_OK;
}

gptc_status gptc_dist_gather_shards_elem(const void *mine, void *all, const size_t *bounds, size_t elem, int root) {
    memmove(all, mine, elem * bounds[1]);
    return GPTC_OK;
}

gptc_status gptc_dist_allgather_shards(float *arena, const size_t *bounds) { return GPTC_OK; }

gptc_status gptc_comm_iallreduce_f(float *x, size_t n, gptc_comm_req *r) {
    r->active = false;
    return GPTC_OK;
}

gptc_status gptc_comm_ireduce_scatter_f(const float *send, float *recv, const int *counts, gptc_comm_req *r) {
    r->active = false;
    memmove(recv, send, sizeof(float) * (size_t)counts[0]);
    return GPTC_OK;
}

gptc_status gptc_comm_test(gptc_comm_req *r, bool *done) {
    *done = true;
    return GPTC_OK;
}

gptc_status gptc_comm_wait(gptc_comm_req *r) { return GPTC_OK; }

gptc_status gptc_dist_gather_bytes(const void *mine, size_t len, char **all, size_t *total, int root) {
    *all = malloc(len ? len : 1);
    *total = 0;
    if (!*all) return gptc_fail(GPTC_ERR_NOMEM, "out of memory gathering %zu bytes", len);
    memcpy(*all, mine, len);
    *total = len;
    return GPTC_OK;
}
