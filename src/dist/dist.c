/* dist.c — the part of the data-parallel layer both backends share (see dist.h): sums in rank
 * order, agreeing on a failure, ZeRO-1's shard bounds, and the bucketed gradient reducer. */
#include "dist/dist.h"
#include "core/profile.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An allocation inside a collective: failing on one rank only would leave the others waiting, so
 * it ends the job. */
static void *alloc_or_abort(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        gptc_warn("out of memory in a collective exchange (%zu bytes); stopping the job", bytes);
        gptc_dist_abort(1);
    }
    return p;
}

gptc_status gptc_dist_sum_ordered(double *x, int n) {
    int world = gptc_dist_world();
    if (world == 1) return GPTC_OK;
    double *all = alloc_or_abort(sizeof(double) * (size_t)n * world);
    gptc_status st = gptc_comm_allgather(x, all, sizeof(double) * (size_t)n);
    for (int i = 0; i < n && !st; i++) {
        double s = 0;
        for (int r = 0; r < world; r++) s += all[(size_t)r * n + i];
        x[i] = s;
    }
    free(all);
    return st;
}

static int g_failed_rank = -1;

int gptc_dist_failed_rank(void) { return g_failed_rank; }

gptc_status gptc_dist_agree(gptc_status st) {
    int world = gptc_dist_world(), rank = gptc_dist_rank();
    g_failed_rank = st ? rank : -1;
    if (world == 1) return st;
    int mine = (int)st, *all = alloc_or_abort(sizeof(int) * (size_t)world);
    gptc_comm_allgather(&mine, all, sizeof(int));
    int first = -1;
    for (int r = 0; r < world && first < 0; r++)
        if (all[r] != GPTC_OK) first = r;
    gptc_status fst = first < 0 ? GPTC_OK : (gptc_status)all[first];
    free(all);
    g_failed_rank = first;
    if (first < 0) return GPTC_OK;
    char msg[1024] = "";
    if (rank == first) snprintf(msg, sizeof msg, "%s", gptc_last_error());
    gptc_dist_bcast(msg, sizeof msg, first);
    if (rank == first) return st;
    return gptc_fail(fst, "%s", msg);
}

size_t gptc_dist_shards(size_t n, int world, size_t *bounds) {
    size_t share = (n + (size_t)world - 1) / (size_t)world;
    share = (share + 15) / 16 * 16;
    for (int r = 0; r <= world; r++) bounds[r] = (size_t)r * share < n ? (size_t)r * share : n;
    return share;
}

/* ---- the reducer */

/* the most floats one MPI call takes (its counts are ints), kept a multiple of 16 */
#define BUCKET_MAX ((size_t)INT_MAX / 16 * 16)

static gptc_status add_bucket(gptc_reducer *r, int *cap, size_t lo, size_t hi) {
    if (r->nb == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        gptc_bucket *b = realloc(r->b, sizeof *b * (size_t)*cap);
        if (!b) return gptc_fail(GPTC_ERR_NOMEM, "out of memory planning gradient buckets");
        r->b = b;
    }
    r->b[r->nb++] = (gptc_bucket){.lo = lo, .hi = hi};
    return GPTC_OK;
}

/* floats of [lo, hi) inside [a, b) */
static size_t overlap(size_t lo, size_t hi, size_t a, size_t b) {
    size_t x = lo > a ? lo : a, y = hi < b ? hi : b;
    return y > x ? y - x : 0;
}

gptc_status gptc_reducer_init(gptc_reducer *r, float *grads, size_t n, const size_t *starts, int ntensors,
                              double bucket_bytes, float *shard, const size_t *bounds) {
    memset(r, 0, sizeof *r);
    r->grads = grads;
    r->n = n;
    r->shard = shard;
    r->bounds = bounds;
    double want = bucket_bytes / sizeof(float);
    int cap = 0;
    gptc_status st = GPTC_OK;
    size_t hi = n;
    /* from the last tensor to the first: a bucket closes once it holds `want` floats */
    for (int i = ntensors - 1; i >= 0 && !st; i--) {
        size_t lo = i == 0 ? 0 : starts[i];
        if (i > 0 && (double)(hi - lo) < want) continue;
        while (!st && hi - lo > BUCKET_MAX) {
            st = add_bucket(r, &cap, hi - BUCKET_MAX, hi);
            hi -= BUCKET_MAX;
        }
        if (!st) st = add_bucket(r, &cap, lo, hi);
        hi = lo;
    }
    if (!st && shard) {
        int world = gptc_dist_world();
        r->counts = malloc(sizeof(int) * (size_t)r->nb * world);
        if (!r->counts) st = gptc_fail(GPTC_ERR_NOMEM, "out of memory planning gradient buckets");
        for (int i = 0; !st && i < r->nb; i++) {
            r->b[i].counts_at = i * world;
            for (int q = 0; q < world; q++)
                r->counts[i * world + q] = (int)overlap(r->b[i].lo, r->b[i].hi, bounds[q], bounds[q + 1]);
        }
    }
    if (st) gptc_reducer_free(r);
    return st;
}

void gptc_reducer_free(gptc_reducer *r) {
    free(r->b);
    free(r->counts);
    memset(r, 0, sizeof *r);
}

static void start_bucket(gptc_reducer *r, gptc_bucket *b) {
    gptc_status st;
    gptc_prof_begin(GPTC_PROF_COMM, r->shard ? "comm.start_reduce_scatter" : "comm.start_allreduce", -1);
    if (r->shard) {
        int me = gptc_dist_rank();
        size_t from = b->lo > r->bounds[me] ? b->lo : r->bounds[me];
        float *recv = r->counts[b->counts_at + me] ? r->shard + (from - r->bounds[me]) : r->shard;
        st = gptc_comm_ireduce_scatter_f(r->grads + b->lo, recv, r->counts + b->counts_at, &b->req);
    } else {
        st = gptc_comm_iallreduce_f(r->grads + b->lo, b->hi - b->lo, &b->req);
    }
    gptc_prof_end(0, sizeof(float) * (double)(b->hi - b->lo));
    r->calls++;
    if (st && !r->st) r->st = st;
}

void gptc_reducer_ready(gptc_reducer *r, size_t lo) {
    /* progress what is in flight (MPI moves non-blocking collectives only inside its calls) */
    for (int i = 0; i < r->next; i++) {
        bool done;
        if (r->b[i].req.active) gptc_comm_test(&r->b[i].req, &done);
    }
    while (r->next < r->nb && r->b[r->next].lo >= lo) start_bucket(r, &r->b[r->next++]);
}

gptc_status gptc_reducer_finish(gptc_reducer *r) {
    double t0 = gptc_now();
    gptc_reducer_ready(r, 0);
    for (int i = 0; i < r->nb; i++) {
        gptc_status st = gptc_comm_wait(&r->b[i].req);
        if (st && !r->st) r->st = st;
    }
    r->wait_s += gptc_now() - t0;
    r->rounds++;
    gptc_status st = r->st;
    r->st = GPTC_OK;
    r->next = 0;
    return st;
}
