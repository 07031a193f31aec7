/* dist.h — the data-parallel layer: the ranks of a job and what they exchange.
 *
 * Two backends behind one interface, chosen by the Makefile: dist_mpi.c (Open MPI, built when mpicc
 * is found; only that file sees mpi.h) and dist_single.c (one process, world 1, every exchange a
 * copy or nothing). dist.c holds what both share: agreeing on a failure, sums in rank order, and the
 * gradient reducer (buckets of the gradient arena reduced while the backward runs).
 *
 * A process started by mpirun joins the job in gptc_dist_init; one started any other way is a world
 * of one, whatever the build. Every exchange is collective: all ranks call it in the same order.
 * Failures of the library's own checks come back as a gptc_status; MPI's errors abort the job. */
#ifndef GPTC_DIST_DIST_H
#define GPTC_DIST_DIST_H

#include "core/core.h"

/* ---- the job */

/* Joins the MPI job when launched by mpirun (MPI_THREAD_FUNNELED: only the main thread talks);
 * otherwise a world of one. Sets the log's rank prefix. Safe to call more than once. */
gptc_status gptc_dist_init(void);
/* Leaves the job (MPI_Finalize); every rank must call it. */
void gptc_dist_finalize(void);
/* Ends every rank of the job at once with this exit code (for a failure the other ranks cannot
 * know about); in a world of one, exits. */
void gptc_dist_abort(int code) __attribute__((noreturn));
int gptc_dist_rank(void);  /* 0 .. world-1 (0 before init) */
int gptc_dist_world(void); /* ranks in the job (1 before init) */
/* 1 when built with MPI (a job of many ranks is possible), 0 when not. */
int gptc_dist_has_mpi(void);

/* ---- the comm timeout (watchdog.c)
 * With seconds > 0 in a job of more than one rank, starts a thread that ends this process (one line on
 * stderr naming the exchange, then exit status 3) once any blocking exchange below, or a wait for a
 * non-blocking one, has waited more than seconds; mpirun then ends every rank. So a rank that stops
 * without dying stops the job within the limit instead of hanging it. Call once, after
 * gptc_dist_init; 0 (or a world of one) does nothing. */
gptc_status gptc_dist_set_comm_timeout(double seconds);
/* The backend brackets every wait with these (what: a string literal naming the exchange). */
void gptc_dist_wait_begin(const char *what);
void gptc_dist_wait_end(void);

/* ---- collective exchanges (blocking) */

/* x (n) = its sum over the ranks, on every rank. */
gptc_status gptc_dist_allreduce_f(float *x, size_t n);
/* x (n) = its sum over the ranks, added in rank order 0, 1, ... so every rank gets the same bits
 * whatever the transport does (gathers every rank's x: for a few values, like losses and norms). */
gptc_status gptc_dist_sum_ordered(double *x, int n);
/* buf (bytes) = root's buf on every rank. */
gptc_status gptc_dist_bcast(void *buf, size_t bytes, int root);
/* The shards of an arena: rank r owns floats [bounds[r], bounds[r+1]) of a (bounds[world]) arena. */
/* root's all (bounds[world] floats) = every rank's mine (its shard, bounds[r+1]-bounds[r] floats). */
gptc_status gptc_dist_gather_shards(const float *mine, float *all, const size_t *bounds, int root);
/* The same for elements of elem bytes (the compact optimizer states: 2-byte bf16, 1-byte int8 codes). */
gptc_status gptc_dist_gather_shards_elem(const void *mine, void *all, const size_t *bounds, size_t elem, int root);
/* arena (bounds[world] floats): every rank's shard [bounds[r], bounds[r+1]) copied to every rank. */
gptc_status gptc_dist_allgather_shards(float *arena, const size_t *bounds);

/* root's *all (malloc'd; *total bytes) = every rank's mine (len bytes; lengths may differ) in rank
 * order; the other ranks get NULL and 0. For reports gathered at the end of a run (the profile). */
gptc_status gptc_dist_gather_bytes(const void *mine, size_t len, char **all, size_t *total, int root);

/* ---- agreeing on a failure
 * Every rank passes its own status; if any failed, every rank returns the status of the lowest
 * failing rank with its message (the failing rank keeps its own), and gptc_dist_failed_rank() names
 * that rank. So a bad batch on one rank stops all of them at the same point, with its message. */
gptc_status gptc_dist_agree(gptc_status st);
/* The rank whose failure the last gptc_dist_agree reported, or -1 when it reported none: a failure
 * returned after that was not agreed, only this rank knows of it and the others may be waiting in
 * an exchange, so the job has to be aborted (gptc_dist_abort). */
int gptc_dist_failed_rank(void);

/* ---- the backend's primitives (dist_mpi.c or dist_single.c) under the functions above */
/* all (world * bytes) = every rank's mine (bytes), in rank order. */
gptc_status gptc_comm_allgather(const void *mine, void *all, size_t bytes);

/* ---- the backend's non-blocking reductions (used by the reducer) */
typedef struct gptc_comm_req {
    _Alignas(8) unsigned char opaque[16]; /* the backend's request handle */
    bool active;
} gptc_comm_req;
/* Starts x (n) = its sum over the ranks, in place. */
gptc_status gptc_comm_iallreduce_f(float *x, size_t n, gptc_comm_req *r);
/* Starts a reduce-scatter of send (sum of counts floats, rank r's part at the sum of counts[0..r)):
 * this rank's part of the sum over the ranks lands in recv (counts[rank] floats). counts [world]. */
gptc_status gptc_comm_ireduce_scatter_f(const float *send, float *recv, const int *counts, gptc_comm_req *r);
/* *done = whether r has finished (progressing it); an inactive r is done. */
gptc_status gptc_comm_test(gptc_comm_req *r, bool *done);
gptc_status gptc_comm_wait(gptc_comm_req *r);

/* ---- ZeRO-1 shards: the arena of n floats cut into world pieces of share floats (the last ones
 * shorter or empty), share = ceil(n / world) rounded up to 16 floats, so each piece starts on a
 * 64-byte boundary. bounds [world+1]. Returns share. */
size_t gptc_dist_shards(size_t n, int world, size_t *bounds);

/* ---- the gradient reducer
 * The gradient arena (n floats) is cut into buckets: contiguous ranges, made from the end of the
 * arena towards its start (the order in which the backward finishes them), each of whole tensors
 * and at least bucket_bytes (0: one bucket per tensor). While the backward runs it reports a
 * watermark lo: every gradient in [lo, n) is final. gptc_reducer_ready starts the reduction of every
 * bucket that lies above the watermark and tests the ones in flight, so communication overlaps the
 * rest of the backward; gptc_reducer_finish starts what is left and waits for all of it.
 * Without ZeRO each bucket is an in-place allreduce of the gradients; with ZeRO (shard != NULL)
 * each bucket is reduce-scattered: this rank's part of every bucket lands in shard (the rank's
 * [bounds[rank], bounds[rank+1]) of the arena), the rest of the arena is left as it was. */
typedef struct gptc_bucket {
    size_t lo, hi;       /* floats [lo, hi) of the arena */
    gptc_comm_req req;
    int counts_at;       /* ZeRO: index of this bucket's [world] counts in counts */
} gptc_bucket;

typedef struct gptc_reducer {
    float *grads;        /* (n) */
    size_t n;
    float *shard;        /* ZeRO: this rank's reduced shard, (bounds[rank+1]-bounds[rank]); else NULL */
    const size_t *bounds;
    gptc_bucket *b;      /* [nb], b[0] the highest range */
    int nb;
    int *counts;         /* ZeRO: [nb * world] reduce-scatter counts */
    int next;            /* the next bucket to start */
    gptc_status st;      /* the first failure of this round */
    /* statistics since init */
    long calls;          /* reductions started */
    double wait_s;       /* seconds spent in gptc_reducer_finish waiting */
    int rounds;          /* gptc_reducer_finish calls */
} gptc_reducer;

/* Plans the buckets of an arena of n floats whose tensors start at starts[0..ntensors) (ascending).
 * shard/bounds: ZeRO (see above) or NULL. A bucket of more than INT_MAX floats is cut. */
gptc_status gptc_reducer_init(gptc_reducer *r, float *grads, size_t n, const size_t *starts, int ntensors,
                              double bucket_bytes, float *shard, const size_t *bounds);
void gptc_reducer_free(gptc_reducer *r);
/* The backward has finished every gradient in [lo, n). */
void gptc_reducer_ready(gptc_reducer *r, size_t lo);
/* Starts the remaining buckets, waits for every one; returns the round's status and readies the
 * reducer for the next round. */
gptc_status gptc_reducer_finish(gptc_reducer *r);

#endif
