/* core.h — the bottom layer: error messages, logging, aligned memory and arena planning,
 * a seeded RNG, the clock, CRC32C and CPU feature detection. Depends on nothing else in gptc. */
#ifndef GPTC_CORE_H
#define GPTC_CORE_H

#include "gptc.h"
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- errors: set the thread's message and return st (so `return gptc_fail(...)` reads well) */
gptc_status gptc_fail(gptc_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix the current message with "ctx: " (for adding the caller's context on the way up). */
gptc_status gptc_fail_prefix(gptc_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gptc_clear_error(void);

/* Broken invariants are bugs, not user errors: abort with file:line. */
#define GPTC_ASSERT(cond)                                                                   \
    do {                                                                                    \
        if (!(cond)) gptc_assert_fail(#cond, __FILE__, __LINE__);                           \
    } while (0)
void gptc_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));

/* ---- logging to stderr: gptc_log only on rank 0; gptc_warn on every rank, with a "[rank r] "
 * prefix when the world has more than one rank */
void gptc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gptc_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A rewrite of every gptc_log and gptc_warn line before it is printed (NULL: none): the CLI shows
 * flags where the library names options (cli/options.h, gptc_cli_flag_names). */
void gptc_log_set_rewrite(void (*fn)(const char *msg, char *out, size_t cap));
/* The rank and world the prefix and gptc_log go by (set by gptc_dist_init; 0 and 1 until then). */
void gptc_log_set_rank(int rank, int world);
/* Writes "[rank r] " to f when the world has more than one rank (for the CLI's error lines). */
void gptc_log_rank_prefix(FILE *f);

/* ---- memory: 64-byte aligned, zero-filled; NULL (with the error message set) on failure. Only
 * gptc_free may release a gptc_alloc block (a header before the block records its size). */
void *gptc_alloc(size_t bytes, const char *what);
void gptc_free(void *p);
/* Bytes held now by gptc_alloc blocks (header and rounding included) and the most held at once since
 * the start or the last gptc_alloc_reset_peak(); thread-safe. Either pointer may be NULL. */
void gptc_alloc_stats(size_t *live, size_t *peak);
/* NUMA placement (numa.c): with first touch on, gptc_alloc makes each block of 1 MiB or more a fresh
 * mapping whose i-th of gptc_threads() contiguous parts is first written by OpenMP thread i, so its
 * pages sit on that thread's node (the split of the static-schedule loops and the optimizer). */
void gptc_alloc_set_first_touch(bool on);
bool gptc_alloc_first_touch(void);
void gptc_first_touch_zero(void *p, size_t bytes);
int gptc_numa_nodes(void); /* NUMA nodes Linux reports (/sys/devices/system/node), at least 1 */
void gptc_alloc_reset_peak(void);
/* What gptc_alloc(bytes) adds to the live count: bytes rounded up to 64 plus the 64-byte header. */
size_t gptc_alloc_block_bytes(size_t bytes);
/* Memory this process may use: the smaller of MemTotal (/proc/meminfo) and the cgroup v2 limit
 * (/sys/fs/cgroup/memory.max) when one is set; 0 when neither can be read. */
size_t gptc_machine_memory(void);
/* The process's peak resident set so far in bytes (getrusage's ru_maxrss). */
size_t gptc_peak_rss(void);

/* A float buffer that grows on demand and is then reused: kernels keep one per thread
 * (`static _Thread_local gptc_workspace w;`), so every call after the first allocates nothing.
 * Aborts when the allocation fails (kernels have no status to return). 64-byte aligned. The buffer
 * is freed when the thread exits, so w must be a _Thread_local of the calling thread. */
typedef struct gptc_workspace {
    float *buf;
    size_t cap; /* floats */
} gptc_workspace;
float *gptc_workspace_get(gptc_workspace *w, size_t nfloats);

/* Arena planning: sizes first, then one allocation, then views. Offsets are in floats and
 * aligned to 16 floats (64 bytes). */
typedef struct gptc_plan {
    size_t used; /* floats planned so far */
} gptc_plan;
size_t gptc_plan_take(gptc_plan *p, size_t nfloats); /* returns the offset of the new region */

/* ---- comma-separated lists (option values such as --freeze wte,wpe or --lora-targets attn,mlp) */
/* Copies the item at *cursor into out (cap bytes, NUL-terminated) and moves *cursor past it and its comma.
 * Returns 1 for an item, 0 at the end of the list (**cursor is '\0'), -1 for an empty item or one of cap
 * bytes or more (out then holds nothing). */
int gptc_list_next(const char **cursor, char *out, size_t cap);

/* ---- RNG: splitmix64, one 64-bit word of state, so checkpoints store it exactly */
typedef struct gptc_rng {
    uint64_t state;
} gptc_rng;
void gptc_rng_seed(gptc_rng *r, uint64_t seed);
uint64_t gptc_rng_next(gptc_rng *r);
double gptc_rng_uniform(gptc_rng *r);  /* [0, 1) with 53 random bits */
double gptc_rng_normal(gptc_rng *r);   /* standard normal (Box-Muller, one value per call) */
uint64_t gptc_hash64(uint64_t x);      /* a stateless mix, for deriving seeds */

/* ---- bfloat16: the top 16 bits of an IEEE float. Conversions round to nearest, ties to even (as
 * AVX512_BF16's vcvtne2ps2bf16 does); NaN stays NaN (quiet). */
static inline uint16_t gptc_f32_to_bf16(float x) {
    union { float f; uint32_t u; } v = {x};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40u); /* NaN: keep it quiet */
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}
static inline float gptc_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}
/* x rounded to the nearest bfloat16, as a float */
static inline float gptc_bf16_round(float x) { return gptc_bf16_to_f32(gptc_f32_to_bf16(x)); }

/* ---- time */
double gptc_now(void); /* monotonic seconds */

/* ---- checksums */
uint32_t gptc_crc32c(uint32_t crc, const void *data, size_t n);
/* The same value from the portable tables, whatever the CPU (the test's twin of the instruction path). */
uint32_t gptc_crc32c_portable(uint32_t crc, const void *data, size_t n);

/* ---- CPU */
typedef struct gptc_cpu_info {
    char vendor[16];
    char brand[64];
    bool sse42, avx, avx2, fma, avx512f, avx512bw, avx512vl, avx512bf16;
    /* AMX-TILE and AMX-BF16 (CPUID 7.0 EDX bits 24 and 22), counted only with palette 1 holding at
     * least 8 tiles of 16 rows x 64 bytes (CPUID 0x1D) and os_amx. Linux also wants the process to ask
     * for the tile data state before the first tile instruction: gptc_cpu_amx_usable() below. */
    bool amx_tile, amx_bf16;
    bool os_avx;     /* the OS saves YMM state (XCR0 bits 1,2) */
    bool os_avx512;  /* the OS saves ZMM/opmask state (XCR0 bits 5,6,7) */
    bool os_amx;     /* the OS saves tile state (XCR0 bits 17 XTILECFG, 18 XTILEDATA) */
    int logical_cpus;
    int family, model;       /* CPUID display family and model (0 off x86) */
    bool fma512_half_width;  /* 512-bit FMAs run as two 256-bit halves (AMD Zen 4) */
    /* Data cache sizes in bytes from CPUID (leaf 4 on Intel, 0x8000001D on AMD), else sysfs, else (AMD's
     * L1d and L2) the older leaves 0x80000005/6, else 0:
     * L1d and L2 as one core sees them, L3 the whole cache of the package (shared). */
    long l1d_bytes, l2_bytes, l3_bytes;
} gptc_cpu_info;
const gptc_cpu_info *gptc_cpu(void);
/* L1d and L2 sizes still 0 in c from AMD's older cache leaves, for CPUs (often virtual) that do not
 * give 0x8000001D: Fn8000_0005 ECX[31:24] the L1 data cache in KiB, Fn8000_0006 ECX[31:16] the L2 in
 * KiB. Their L3 field is left alone: a virtual machine was seen to report the whole host's there
 * (508 MiB), which is no guide to the cache one core's threads share. */
void gptc_cpu_caches_from_amd_legacy(gptc_cpu_info *c, uint32_t ecx5, uint32_t ecx6);
/* Whether this process may run AMX-BF16 tile instructions: amx_tile and amx_bf16 above, and Linux's
 * permission for XTILEDATA (XSTATE component 18). The permission is asked for once, on the first call
 * (arch_prctl(ARCH_REQ_XCOMP_PERM, 18), then checked with ARCH_GET_XCOMP_PERM; the kernels' dispatch
 * calls this when it selects the AMX kernel); a refusal only means no AMX. Thread-safe. */
bool gptc_cpu_amx_usable(void);
/* The XSTATE components this process is permitted (arch_prctl ARCH_GET_XCOMP_PERM), 0 where the
 * kernel has no such call (before Linux 5.16, or off x86 Linux): for tests and `gptc info`. */
uint64_t gptc_cpu_xcomp_perm(void);

/* ---- threads */
void gptc_set_threads(int n); /* 0: leave OpenMP's default */
int gptc_threads(void);
/* Binds OpenMP thread i of a team of gptc_threads() to one CPU of the process's affinity mask, with
 * sched_setaffinity inside a parallel region (libgomp reads OMP_PLACES only when it loads, so
 * setting it from inside the program is too late). CPUs are taken one per physical core first
 * (lowest CPU of each core, in order), then the hyperthread siblings, wrapping round when there are
 * more threads than CPUs. The team's threads persist across parallel regions of up to that many
 * threads, so the binding holds for the run. cpus (cap entries, may be NULL) gets thread i's CPU;
 * returns the threads bound, or -1 (message set) if the kernel refused. */
int gptc_pin_threads(int *cpus, int cap);
/* Gives every thread of the team back the affinity mask the process had before gptc_pin_threads. */
void gptc_unpin_threads(void);
/* A barrier for the nt threads of one parallel region that spins instead of sleeping: a decode step in one
 * region (model/decode.c) passes ~100 of them per token, where OpenMP's barrier took 1.5 us on a 2-vCPU VM
 * and this one 0.2. After a few thousand spins a waiting thread yields its CPU, so a team larger than the
 * CPUs still moves on. Zero-initialise it before the region; each thread keeps its own sense (an int, 0
 * at first) across the waits. */
typedef struct gptc_spin_barrier {
    int count, sense;
} gptc_spin_barrier;
void gptc_spin_barrier_wait(gptc_spin_barrier *b, int nt, int *sense);

/* ---- rolling statistics of the last GPTC_WINDOW values (step times for the jitter in the log) */
#define GPTC_WINDOW 50
typedef struct gptc_window {
    double v[GPTC_WINDOW];
    int n, next;
} gptc_window;
void gptc_window_add(gptc_window *w, double x);
/* Median and 95th percentile (nearest rank) of the values in the window, and their standard deviation
 * as a percentage of their mean; all 0 for an empty window. */
void gptc_window_stats(const gptc_window *w, double *p50, double *p95, double *stdev_pct);
/* The same over v[0..n) (sorts v in place). */
void gptc_spread(double *v, size_t n, double *p50, double *p95, double *stdev_pct);
/* The median of v[0..n) (sorts v in place); NaN when n is 0. */
double gptc_median(double *v, size_t n);

#endif
