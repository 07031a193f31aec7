/* test_gemm.c — the blocked GEMM of every available ISA level against the reference gemm. */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "core/team.h"
#include "kernels/gemm/gemm_driver.h"
#include "kernels/kernels.h"
#include "kernels/x86_avx512/avx512.h"
#include "test.h"

/* Tolerance: max |got - ref| <= 1e-5 * max |ref| over the logical C (K-sums up to 3072 terms). */
#define GEMM_TOL 1e-5
#define SENTINEL 12345.0f

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float rnd(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float *rand_buf(size_t n) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = rnd();
    return p;
}

/* Runs one case on k and on the reference; returns the relative error (or INFINITY when the padding
 * columns of C were touched or a NaN survived). pad* widen the stored row strides; with_bias adds a
 * random bias (N) in the epilogue. */
static double gemm_case(const gptc_kernels *k, int ta, int tb, int M, int N, int K, int pada, int padb,
                        int padc, float beta, int with_bias) {
    const gptc_kernels *ref = gptc_kernels_ref();
    int arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
    int lda = acols + pada, ldb = bcols + padb, ldc = N + padc;
    float *A = rand_buf((size_t)arows * lda), *B = rand_buf((size_t)brows * ldb);
    float *C = malloc((size_t)M * ldc * sizeof(float)), *R = malloc((size_t)M * ldc * sizeof(float));
    float *bias = with_bias ? rand_buf((size_t)N) : NULL;
    for (size_t i = 0; i < (size_t)M * ldc; i++) {
        int col = (int)(i % ldc);
        C[i] = col >= N ? SENTINEL : beta == 0.0f ? NAN : rnd();
        R[i] = C[i];
    }
    k->gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, bias, C, ldc);
    ref->gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, bias, R, ldc);
    float *c = malloc((size_t)M * N * sizeof(float)), *r = malloc((size_t)M * N * sizeof(float));
    int bad = 0;
    for (int i = 0; i < M; i++) {
        memcpy(c + (size_t)i * N, C + (size_t)i * ldc, N * sizeof(float));
        memcpy(r + (size_t)i * N, R + (size_t)i * ldc, N * sizeof(float));
        for (int j = N; j < ldc; j++) bad |= C[(size_t)i * ldc + j] != SENTINEL;
        for (int j = 0; j < N; j++) bad |= isnan(C[(size_t)i * ldc + j]);
    }
    double err = bad ? INFINITY : test_rel_err_f(c, r, (size_t)M * N);
    free(A), free(B), free(C), free(R), free(c), free(r), free(bias);
    return err;
}

static const char *const k_levels[] = {"avx2", "avx512"};

/* The blocked GEMM's descriptions on every level this CPU runs (AVX2, AVX-512): fp32 (bf16 0) and bf16 */
typedef struct isa_case {
    const char *level;
    int bf16;
    const gptc_gemm_isa *g;
} isa_case;
static int blocked_isas(isa_case out[4]) {
    int n = 0;
    for (int l = 0; l < 2; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        if (k->gemm_isa) out[n++] = (isa_case){k_levels[l], 0, k->gemm_isa};
        if (k->gemm_bf16_isa) out[n++] = (isa_case){k_levels[l], 1, k->gemm_bf16_isa};
    }
    return n;
}

/* Each case with and without a bias. */
static void check_case(const gptc_kernels *k, int ta, int tb, int M, int N, int K, int pada, int padb, int padc,
                       float beta) {
    for (int wb = 0; wb < 2; wb++) {
        double err = gemm_case(k, ta, tb, M, N, K, pada, padb, padc, beta, wb);
        CHECK_MSG(err <= GEMM_TOL, "%s gemm ta=%d tb=%d M=%d N=%d K=%d pads %d/%d/%d beta=%g bias=%d: rel err %g",
                  k->variant, ta, tb, M, N, K, pada, padb, padc, beta, wb, err);
    }
}

/* The reference's bias is added last: exactly gemm without it, then bias_fwd. */
TEST(gemm_ref_bias_is_gemm_then_bias) {
    const gptc_kernels *ref = gptc_kernels_ref();
    const int M = 37, N = 70, K = 50;
    float *A = rand_buf((size_t)M * K), *B = rand_buf((size_t)K * N), *bias = rand_buf(N);
    float *C1 = rand_buf((size_t)M * N), *C2 = malloc((size_t)M * N * sizeof(float));
    for (int beta = 0; beta < 2; beta++) {
        memcpy(C2, C1, (size_t)M * N * sizeof(float));
        ref->gemm(0, 0, M, N, K, A, K, B, N, (float)beta, bias, C1, N);
        ref->gemm(0, 0, M, N, K, A, K, B, N, (float)beta, NULL, C2, N);
        ref->bias_fwd(C2, bias, M, N);
        CHECK_MSG(memcmp(C1, C2, (size_t)M * N * sizeof(float)) == 0, "beta=%d: fused bias differs", beta);
    }
    free(A), free(B), free(bias), free(C1), free(C2);
}

/* The AVX-512 packer writes exactly what the portable packer writes (values and zero padding), for
 * both layouts, both micro-panel widths and ragged rows / depths at offsets into a strided matrix, with
 * rows 4 KiB apart too (the order it packs A's micro-panels in depends on it). */
TEST(gemm_pack_avx512_matches_portable) {
    if (!gptc_kernels_level("avx512")) {
        printf("    (no AVX-512 on this CPU: nothing to compare)\n");
        return;
    }
    const int rs[] = {12, 32}, ms[] = {1, 11, 12, 13, 16, 17, 31, 32, 33, 45, 64, 70}, kcs[] = {1, 15, 16, 17, 100};
    const int ldxs[] = {140, 1024}, rows = 120; /* cover i0 + m and k0 + kc either way round */
    for (int li = 0; li < 2; li++) {
        const int ldx = ldxs[li];
        float *X = rand_buf((size_t)rows * ldx);
        for (int ri = 0; ri < 2; ri++)
            for (int trans = 0; trans < 2; trans++)
                for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                    for (size_t ki = 0; ki < sizeof kcs / sizeof kcs[0]; ki++) {
                        int r = rs[ri], m = ms[mi], kc = kcs[ki], i0 = 3, k0 = 5;
                        size_t n = (size_t)((m + r - 1) / r) * r * kc;
                        float *o1 = malloc(n * sizeof(float)), *o2 = malloc(n * sizeof(float));
                        for (size_t i = 0; i < n; i++) o1[i] = o2[i] = NAN;
                        gptc_gemm_pack_portable(trans, X, ldx, i0, k0, m, kc, r, o1);
                        gptc_avx512_gemm_pack(trans, X, ldx, i0, k0, m, kc, r, o2);
                        CHECK_MSG(memcmp(o1, o2, n * sizeof(float)) == 0, "ldx=%d r=%d trans=%d m=%d kc=%d: packs differ",
                                  ldx, r, trans, m, kc);
                        free(o1), free(o2);
                    }
        free(X);
    }
}

TEST(gemm_ragged_shapes) {
    static const int shapes[][3] = {
        {1, 1, 1},     {1, 7, 13},    {7, 1, 31},     {13, 31, 7},    {31, 33, 65},  {33, 65, 1},
        {65, 13, 257}, {257, 33, 31}, {300, 257, 13}, {13, 769, 300}, {7, 300, 769}, {65, 65, 1000},
        {33, 1, 2000}, {1, 257, 1500},
    };
    for (int l = 0; l < 2; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int t = 0; t < 4; t++)
                for (int b = 0; b < 2; b++)
                    check_case(k, t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], 0, 0, 0, (float)b);
    }
}

TEST(gemm_strided_views) {
    for (int l = 0; l < 2; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        for (int t = 0; t < 4; t++)
            for (int b = 0; b < 2; b++) {
                check_case(k, t >> 1, t & 1, 67, 45, 129, 3, 5, 19, (float)b);
                check_case(k, t >> 1, t & 1, 300, 769, 450, 1, 16, 47, (float)b);
            }
    }
}

/* The products the model runs (src/model/forward.c) at C = 768, BT = 64, V = 50257 (ldc = Vp). */
TEST(gemm_gpt2_shapes) {
    const int BT = 64, C = 768;
    const int io[][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
    for (int l = 0; l < 2; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        for (int s = 0; s < 4; s++) {
            int IC = io[s][0], OC = io[s][1];
            check_case(k, 0, 0, BT, OC, IC, 0, 0, 0, 0.0f); /* forward */
            check_case(k, 0, 1, BT, IC, OC, 0, 0, 0, 1.0f); /* dinp */
            check_case(k, 1, 0, IC, OC, BT, 0, 0, 0, 1.0f); /* dweight */
        }
        check_case(k, 0, 1, 16, 50257, C, 0, 0, 50304 - 50257, 0.0f); /* classifier forward */
    }
}

/* Each C element's K-sum order must not depend on the thread count. */
TEST(gemm_deterministic_threads) {
    const int M = 300, N = 769, K = 1100;
    for (int l = 0; l < 2; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        for (int t = 0; t < 4; t++) {
            int ta = t >> 1, tb = t & 1;
            float *A = rand_buf((size_t)M * K), *B = rand_buf((size_t)K * N);
            float *C1 = rand_buf((size_t)M * N), *C2 = malloc((size_t)M * N * sizeof(float));
            memcpy(C2, C1, (size_t)M * N * sizeof(float));
            float *bias = rand_buf(N), *C0 = malloc((size_t)M * N * sizeof(float));
            memcpy(C0, C1, (size_t)M * N * sizeof(float));
            int saved = omp_get_max_threads();
            omp_set_num_threads(1);
            k->gemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, 1.0f, bias, C1, N);
            /* 2, 3 and 4 threads: grids 1x2 / 2x1, 1x3 / 3x1 and 2x2 */
            for (int nt = 2; nt <= 4; nt++) {
                memcpy(C2, C0, (size_t)M * N * sizeof(float));
                omp_set_num_threads(nt);
                k->gemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, 1.0f, bias, C2, N);
                CHECK_MSG(memcmp(C1, C2, (size_t)M * N * sizeof(float)) == 0,
                          "%s gemm ta=%d tb=%d: 1 vs %d threads differ", k->variant, ta, tb, nt);
            }
            omp_set_num_threads(saved);
            free(A), free(B), free(C0), free(C1), free(C2), free(bias);
        }
    }
}

/* The B_IN_L1 order packing B's micro-panels inside the first A block's tiles (the ISA's kernel_copy) gives
 * the bits of packing the B panel before them: fp32, and bf16 from bf16 rows or matvec's bf16 panels (odd
 * depth blocks, and bf16 panels from fp32 sources, packed before the tiles), from B's rows and (copy_t32)
 * from B^T's (depth blocks of whole 16-row blocks; the others packed before the tiles); blockings small
 * enough for many column, depth and row blocks, tiles that copy no rows, ragged last micro-panels, beta 0
 * and 1 with a bias, 1 and 2 threads. */
TEST(gemm_packing_b_inside_the_tiles_changes_no_bits) {
    static const int shapes[][3] = {{40, 100, 45}, {37, 64, 20}, {100, 70, 7}, {12, 200, 300}, {5, 33, 64},
                                    {37, 96, 320}};
    int cases = 0;
    isa_case c[4];
    const int nc = blocked_isas(c);
    for (int ci = 0; ci < nc; ci++) {
        const int which = c[ci].bf16;
        if (!c[ci].g->kernel_copy) continue;
        for (int blocking = 0; blocking < 3; blocking++) {
            gptc_gemm_isa fused = *c[ci].g;
            fused.order = GPTC_GEMM_B_IN_L1;
            if (blocking) fused.mc = 3 * fused.mr, fused.kc = blocking == 1 ? 20 : 64, fused.nc = 3 * fused.nr;
            gptc_gemm_isa plain = fused;
            plain.kernel_copy = NULL;
            for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
                for (int t = 0; t < 8; t++)
                    for (int src16 = 0; src16 <= 2 * which; src16++) { /* 2: matvec's bf16 panels */
                        const int M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2], ta = t & 1, tb = t >> 2;
                        if (tb && (src16 == 2 || !fused.copy_t32)) continue; /* panels are B's rows */
                        cases++;
                        const int nt = 1 + ((t >> 1) & 1);
                        const int in16 = (src16 ? GPTC_GEMM_B16 : 0) | (src16 == 2 ? GPTC_GEMM_B_PANELS : 0);
                        const float beta = (float)(t & 1);
                        float *A = rand_buf((size_t)M * K), *B = rand_buf((size_t)K * N), *bias = rand_buf(N);
                        float *C1 = rand_buf((size_t)M * N), *C2 = malloc((size_t)M * N * sizeof(float));
                        uint16_t *B16 = malloc(sizeof(uint16_t) * (size_t)K * N);
                        for (size_t i = 0; i < (size_t)K * N; i++) B16[i] = gptc_f32_to_bf16(B[i]);
                        const size_t pbytes = gptc_matvec_panel_elems(K, N) * sizeof(uint16_t);
                        void *P = aligned_alloc(64, (pbytes + 63) / 64 * 64);
                        gptc_matvec_pack(P, 1, B, N, 0, K, N);
                        const void *Bs = src16 == 2 ? P : src16 ? (const void *)B16 : (const void *)B;
                        const int ldb = src16 == 2 ? 0 : tb ? K : N; /* tb: B read as the (N,K) matrix it holds */
                        memcpy(C2, C1, (size_t)M * N * sizeof(float));
                        int saved = omp_get_max_threads();
                        omp_set_num_threads(nt);
                        const int lda = ta ? M : K;
                        gptc_gemm_blocked_in16(&plain, ta, tb, M, N, K, A, lda, Bs, ldb, in16, beta, bias, C1, N);
                        gptc_gemm_blocked_in16(&fused, ta, tb, M, N, K, A, lda, Bs, ldb, in16, beta, bias, C2, N);
                        omp_set_num_threads(saved);
                        CHECK_MSG(memcmp(C1, C2, (size_t)M * N * sizeof(float)) == 0,
                                  "%s %s blocking %d %dx%dx%d ta=%d tb=%d src16=%d threads %d: differ", c[ci].level,
                                  which ? "bf16" : "fp32", blocking, M, N, K, ta, tb, src16, nt);
                        free(A), free(B), free(B16), free(bias), free(C1), free(C2), free(P);
                    }
        }
    }
    if (!cases) printf("    SKIP: no level with a packing microkernel on this CPU\n");
    else printf("    %d cases\n", cases);
}

/* A thread's GEMM packing buffers (_Thread_local workspaces) are freed when the thread exits: an
 * OpenMP team that shrinks ends threads, and their buffers used to stay allocated with nothing
 * pointing at them (LeakSanitizer found 28 such blocks, 30 MB, after the suite). */
typedef struct ws_probe {
    const gptc_kernels *k;
    size_t live_inside;
} ws_probe;

static void *ws_thread(void *arg) {
    ws_probe *p = arg;
    enum { M = 64, N = 96, K = 80 };
    float *A = calloc((size_t)M * K, sizeof(float)), *B = calloc((size_t)K * N, sizeof(float));
    float *C = calloc((size_t)M * N, sizeof(float));
    omp_set_num_threads(1); /* this thread runs the product itself, with its own workspaces */
    p->k->gemm(0, 0, M, N, K, A, K, B, N, 0.0f, NULL, C, N);
    gptc_alloc_stats(&p->live_inside, NULL);
    free(A), free(B), free(C);
    return NULL;
}

TEST(gemm_workspaces_freed_when_thread_exits) {
    const char *levels[] = {"avx2", "avx512"};
    int ran = 0;
    for (int i = 0; i < 2; i++) {
        const gptc_kernels *k = gptc_kernels_level(levels[i]);
        if (!k) continue;
        ran++;
        ws_probe p = {k, 0};
        size_t before, after;
        gptc_alloc_stats(&before, NULL);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, ws_thread, &p) == 0);
        pthread_join(t, NULL);
        gptc_alloc_stats(&after, NULL);
        CHECK_MSG(p.live_inside > before, "%s: the product allocated no workspace (%zu -> %zu bytes)", levels[i], before,
                  p.live_inside);
        CHECK_MSG(after == before, "%s: %zu bytes of the exited thread's workspaces still allocated", levels[i],
                  after - before);
    }
    if (!ran) printf("    SKIP: this CPU has neither AVX2 nor AVX-512\n");
}

/* gptc_gemm_reserve: after it, a team's products of at most its shape allocate nothing; without it the
 * first product allocates (each case on a fresh thread, whose OpenMP team starts with empty buffers). */
typedef struct reserve_probe {
    const gptc_kernels *k;
    int bf16, in16;
    bool reserve;
    size_t grew_reserve, grew_calls;
} reserve_probe;

static void *reserve_thread(void *arg) {
    reserve_probe *p = arg;
    enum { M = 150, N = 200, K = 300 };
    const bool panels = p->in16 & GPTC_GEMM_B_PANELS;
    float *A = calloc((size_t)M * K, sizeof(float)), *B = calloc((size_t)K * N, sizeof(float));
    float *C = calloc((size_t)M * N, sizeof(float));
    void *P = NULL;
    if (panels) {
        P = aligned_alloc(64, (gptc_matvec_panel_elems(K, N) * sizeof(uint16_t) + 63) / 64 * 64);
        gptc_matvec_pack(P, 1, B, N, 0, K, N);
    }
    omp_set_num_threads(2);
    size_t l0, l1, l2;
    gptc_alloc_stats(&l0, NULL);
    if (p->reserve) gptc_gemm_reserve(p->k, p->bf16, M, N, K, p->in16);
    gptc_alloc_stats(&l1, NULL);
    /* the whole shape, fewer rows (a split by columns), fewer columns, and (B in rows) a shallower depth */
    static const int shapes[][3] = {{M, N, K}, {1, N, K}, {M / 3, N / 2, K}, {M, 5, K}, {7, N, K / 2}};
    for (int i = 0; i < 5; i++) {
        const int m = shapes[i][0], n = shapes[i][1], kd = panels ? K : shapes[i][2];
        if (p->bf16)
            p->k->gemm_bf16_in16(0, 0, m, n, kd, A, K, panels ? P : B, panels ? 0 : N, p->in16, 0.0f, NULL, C, n);
        else
            p->k->gemm(0, 0, m, n, kd, A, K, B, N, 0.0f, NULL, C, n);
    }
    gptc_alloc_stats(&l2, NULL);
    p->grew_reserve = l1 - l0, p->grew_calls = l2 - l1;
    free(A), free(B), free(C), free(P);
    return NULL;
}

/* Waits (up to half a second) until no thread is freeing memory: the OpenMP threads of a finished case's
 * team exit after its thread, and free their buffers as they go. */
static void settle_live(void) {
    size_t last, now;
    gptc_alloc_stats(&last, NULL);
    for (int stable = 0, i = 0; stable < 5 && i < 500; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        gptc_alloc_stats(&now, NULL);
        stable = now == last ? stable + 1 : 0;
        last = now;
    }
}

TEST(gemm_reserve_leaves_first_products_nothing_to_allocate) {
    const char *levels[] = {"avx2", "avx512"};
    int ran = 0;
    for (int i = 0; i < 2; i++) {
        const gptc_kernels *k = gptc_kernels_level(levels[i]);
        if (!k) continue;
        static const struct { int bf16, in16; } kinds[] = {{0, 0}, {1, 0}, {1, GPTC_GEMM_B16 | GPTC_GEMM_B_PANELS}};
        for (int c = 0; c < 3; c++)
            for (int reserve = 0; reserve < 2; reserve++) {
                ran++;
                reserve_probe p = {k, kinds[c].bf16, kinds[c].in16, reserve, 0, 0};
                settle_live();
                pthread_t t;
                CHECK(pthread_create(&t, NULL, reserve_thread, &p) == 0);
                pthread_join(t, NULL);
                if (reserve) {
                    CHECK_MSG(p.grew_reserve > 0, "%s kind %d: the reserve allocated nothing", levels[i], c);
                    CHECK_MSG(p.grew_calls == 0, "%s kind %d: products after the reserve allocated %zu bytes",
                              levels[i], c, p.grew_calls);
                } else {
                    CHECK_MSG(p.grew_calls > 0, "%s kind %d: products allocated nothing without a reserve", levels[i],
                              c);
                }
            }
    }
    /* the reference packs nothing: nothing to reserve */
    size_t before, after;
    gptc_alloc_stats(&before, NULL);
    gptc_gemm_reserve(gptc_kernels_ref(), 0, 100, 100, 100, 0);
    gptc_alloc_stats(&after, NULL);
    CHECK_EQ_INT((int)(after - before), 0);
    if (!ran) printf("    SKIP: this CPU has neither AVX2 nor AVX-512\n");
}

/* The cache rules of gptc_gemm_block_for_caches: Zen 4's caches give back the constants tuned there
 * (B micro-panel in L1); a full-width 48 KiB L1d / 2 MiB L2 core gets the A-in-L1 order and its own
 * sizes; unknown caches leave an ISA's fallback alone. */
TEST(gemm_blocking_from_cache_sizes) {
    gptc_gemm_isa g = {.mr = 12, .nr = 32, .mc = 1, .kc = 2, .nc = 3, .esize = 4, .kstep = 1};
    gptc_cpu_info zen4 = {.fma512_half_width = true, .l1d_bytes = 32 << 10, .l2_bytes = 1 << 20, .l3_bytes = 32 << 20};
    gptc_gemm_block_for_caches(&g, &zen4);
    CHECK_MSG(g.order == GPTC_GEMM_B_IN_L1 && g.mc == 144 && g.kc == 768 && g.nc == 3072, "zen4 fp32: %d %d %d %d",
              g.order, g.mc, g.kc, g.nc);
    gptc_gemm_isa h = {.mr = 12, .nr = 32, .esize = 2, .kstep = 2};
    gptc_gemm_block_for_caches(&h, &zen4);
    CHECK_MSG(h.mc == 144 && h.kc == 1536 && h.nc == 3072, "zen4 bf16: %d %d %d", h.mc, h.kc, h.nc);
    gptc_cpu_info spr = {.l1d_bytes = 48 << 10, .l2_bytes = 2 << 20, .l3_bytes = 105 << 20};
    gptc_gemm_block_for_caches(&g, &spr);
    CHECK_MSG(g.order == GPTC_GEMM_A_IN_L1 && g.mc == 4092 && g.kc == 384 && g.nc == 672, "intel fp32: %d %d %d %d",
              g.order, g.mc, g.kc, g.nc);
    /* the A micro-panel takes 3/8 of L1d, the B panel half of L2 */
    CHECK((long)g.mr * g.kc * 4 <= spr.l1d_bytes * 3 / 8 && (long)g.kc * g.nc * 4 <= spr.l2_bytes / 2);
    gptc_gemm_block_for_caches(&h, &spr);
    CHECK_MSG(h.kc == 768 && h.kc % 32 == 0, "intel bf16 kc %d", h.kc);
    /* Zen 5: full-width FMAs but a 1 MiB L2, so Zen 4's order and fractions */
    gptc_cpu_info zen5 = {.l1d_bytes = 48 << 10, .l2_bytes = 1 << 20, .l3_bytes = 32 << 20};
    gptc_gemm_isa z = {.mr = 12, .nr = 32, .esize = 4, .kstep = 1};
    gptc_gemm_block_for_caches(&z, &zen5);
    CHECK_MSG(z.order == GPTC_GEMM_B_IN_L1 && z.mc == 144 && z.kc == 768 && z.nc == 3072, "zen5 fp32: %d %d %d %d",
              z.order, z.mc, z.kc, z.nc);
    /* an L3 not reported (a VM) counts as a 16 MiB share: a B panel of 4.5 MiB */
    zen5.l3_bytes = 0;
    gptc_gemm_block_for_caches(&z, &zen5);
    CHECK_MSG(z.nc == 1536 && z.mc == 144 && z.kc == 768, "zen5, L3 unknown: nc %d", z.nc);
    gptc_gemm_isa u = g;
    gptc_cpu_info none = {0};
    gptc_gemm_block_for_caches(&u, &none);
    CHECK(memcmp(&u, &g, sizeof u) == 0);
    /* this machine's sizes, when known, give a blocking inside the clamps */
    const gptc_cpu_info *c = gptc_cpu();
    if (c->l1d_bytes > 0 && c->l2_bytes > 0) {
        gptc_gemm_isa m = g;
        gptc_gemm_block_for_caches(&m, c);
        CHECK(m.kc >= 128 && m.kc <= 2048 && m.mc % m.mr == 0 && m.nc % m.nr == 0);
    } else {
        printf("  (this CPU reports no cache sizes: only the rules were checked)\n");
    }
}

/* AMD's older cache leaves: L1d from Fn8000_0005 ECX[31:24] KiB, L2 from Fn8000_0006 ECX[31:16] KiB (the
 * values a Zen 5 virtual machine gave), filling only sizes not known already. */
TEST(cpu_caches_from_amd_legacy_leaves) {
    gptc_cpu_info c = {0};
    gptc_cpu_caches_from_amd_legacy(&c, 0x30400000u | 0x40u, 0x04006140u);
    CHECK_MSG(c.l1d_bytes == 48 << 10 && c.l2_bytes == 1 << 20 && c.l3_bytes == 0, "l1d %ld l2 %ld l3 %ld", c.l1d_bytes,
              c.l2_bytes, c.l3_bytes);
    gptc_cpu_info known = {.l1d_bytes = 32 << 10, .l2_bytes = 2 << 20};
    gptc_cpu_caches_from_amd_legacy(&known, 0x30400000u, 0x04006140u);
    CHECK(known.l1d_bytes == 32 << 10 && known.l2_bytes == 2 << 20);
}

/* Both loop orders of the driver sum each C element in the same order, so they give the same bits;
 * small blockings put every edge (partial mc, kc, nc blocks, ragged micro-tiles) in play. */
TEST(gemm_loop_orders_agree) {
    static const int shapes[][3] = {{1, 1, 1}, {13, 31, 7}, {65, 97, 130}, {100, 33, 257}, {37, 200, 81}};
    isa_case c[4];
    const int nc = blocked_isas(c);
    for (int ci = 0; ci < nc; ci++) {
        const int which = c[ci].bf16;
        gptc_gemm_isa a = *c[ci].g;
        a.mc = 3 * a.mr, a.kc = 20 * a.kstep, a.nc = 2 * a.nr;
        gptc_gemm_isa b = a;
        a.order = GPTC_GEMM_A_IN_L1, b.order = GPTC_GEMM_B_IN_L1;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int t = 0; t < 4; t++) {
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ta = t >> 1, tb = t & 1;
                float *A = rand_buf((size_t)M * K), *B = rand_buf((size_t)K * N), *bias = rand_buf(N);
                float *C1 = rand_buf((size_t)M * N), *C2 = malloc((size_t)M * N * sizeof(float));
                float *R = malloc((size_t)M * N * sizeof(float));
                memcpy(C2, C1, (size_t)M * N * sizeof(float));
                memcpy(R, C1, (size_t)M * N * sizeof(float));
                gptc_gemm_blocked(&a, ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, 1.0f, bias, C1, N);
                gptc_gemm_blocked(&b, ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, 1.0f, bias, C2, N);
                CHECK_MSG(memcmp(C1, C2, (size_t)M * N * sizeof(float)) == 0, "%s isa %d %dx%dx%d t%d: orders differ",
                          c[ci].level, which, M, N, K, t);
                if (which == 0) {
                    gptc_kernels_ref()->gemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, 1.0f, bias, R, N);
                    double err = test_rel_err_f(C1, R, (size_t)M * N);
                    CHECK_MSG(err <= GEMM_TOL, "%s %dx%dx%d t%d: rel err %g", c[ci].level, M, N, K, t, err);
                }
                free(A), free(B), free(bias), free(C1), free(C2), free(R);
            }
    }
}

/* The sum of squares of C in double, for the checks below */
static double sumsq_of(const float *C, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)C[i] * C[i];
    return s;
}

/* gptc_gemm_blocked_sumsq (the weight gradients' shares of the global norm, taken inside their products) leaves
 * C with the plain product's bits and returns its sum of squares (relative 1e-6 of the double sum: each tile's
 * in float), the same bits for 1, 2 and 3 threads. Every ISA level, fp32 and bf16 (bf16 sources too), kernels
 * that take the sums from their registers and the read-back for those that do not, both loop orders, the
 * packing of B inside the tiles, small blockings (many row, column and depth blocks), ragged shapes, beta 0 and 1
 * with a bias. gptc_gemm_sumsq is the blocked driver's alone: the reference table declines it. */
TEST(gemm_sumsq_keeps_the_product_and_sums_it) {
    static const int shapes[][3] = {{1, 1, 1}, {13, 31, 7}, {65, 97, 130}, {37, 200, 81}, {100, 70, 45}};
    int cases = 0;
    isa_case c[4];
    const int nc = blocked_isas(c);
    for (int ci = 0; ci < nc; ci++) {
        const int which = c[ci].bf16;
        for (int variant = 0; variant < 4; variant++) { /* bit 0: small blocking, A_IN_L1; bit 1: read back */
            gptc_gemm_isa g = *c[ci].g;
            if (variant & 1) g.mc = 3 * g.mr, g.kc = 20 * g.kstep, g.nc = 2 * g.nr, g.order = GPTC_GEMM_A_IN_L1;
            if (variant & 2) g.kernel_sumsq = 0;
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int t = 0; t < 8; t++, cases++) {
                    const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ta = t & 1, tb = (t >> 1) & 1;
                    const int in16 = which && (t >> 2) ? GPTC_GEMM_A16 | GPTC_GEMM_B16 : 0;
                    const float beta = (float)(t & 1);
                    float *A = rand_buf((size_t)M * K), *B = rand_buf((size_t)K * N), *bias = rand_buf(N);
                    uint16_t *A16 = malloc(sizeof(uint16_t) * (size_t)M * K), *B16 = malloc(sizeof(uint16_t) * (size_t)K * N);
                    for (size_t i = 0; i < (size_t)M * K; i++) A16[i] = gptc_f32_to_bf16(A[i]);
                    for (size_t i = 0; i < (size_t)K * N; i++) B16[i] = gptc_f32_to_bf16(B[i]);
                    const void *As = in16 ? (const void *)A16 : A, *Bs = in16 ? (const void *)B16 : B;
                    float *C0 = rand_buf((size_t)M * N), *C1 = malloc((size_t)M * N * sizeof(float));
                    float *C2 = malloc((size_t)M * N * sizeof(float));
                    memcpy(C1, C0, (size_t)M * N * sizeof(float));
                    const int lda = ta ? M : K, ldb = tb ? K : N, saved = omp_get_max_threads();
                    gptc_gemm_blocked_in16(&g, ta, tb, M, N, K, As, lda, Bs, ldb, in16, beta, bias, C1, N);
                    double got[3];
                    for (int nt = 1; nt <= 3; nt++) {
                        memcpy(C2, C0, (size_t)M * N * sizeof(float));
                        omp_set_num_threads(nt);
                        got[nt - 1] = gptc_gemm_blocked_sumsq(&g, ta, tb, M, N, K, As, lda, Bs, ldb, in16, beta,
                                                              bias, C2, N);
                        CHECK_MSG(memcmp(C1, C2, (size_t)M * N * sizeof(float)) == 0,
                                  "%s %s variant %d %dx%dx%d t%d threads %d: C differs from the plain product",
                                  c[ci].level, which ? "bf16" : "fp32", variant, M, N, K, t, nt);
                    }
                    omp_set_num_threads(saved);
                    const double want = sumsq_of(C1, (size_t)M * N);
                    CHECK_MSG(fabs(got[0] - want) <= 1e-6 * want, "%s %s variant %d %dx%dx%d t%d: sum %.17g, C's %.17g",
                              c[ci].level, which ? "bf16" : "fp32", variant, M, N, K, t, got[0], want);
                    CHECK_MSG(got[0] == got[1] && got[0] == got[2], "%s %s variant %d %dx%dx%d t%d: the sum "
                              "differs between 1, 2 and 3 threads (%.17g %.17g %.17g)", c[ci].level,
                              which ? "bf16" : "fp32", variant, M, N, K, t, got[0], got[1], got[2]);
                    free(A), free(B), free(A16), free(B16), free(bias), free(C0), free(C1), free(C2);
                }
        }
    }
    /* the table entry: the driver's where the table's product is, declined by the reference */
    float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 0, 0, 1, 1, 1}, C[4];
    double s = -1;
    CHECK(!gptc_gemm_sumsq(gptc_kernels_ref(), 0, 0, 0, 2, 2, 3, A, 3, B, 2, 0, 0.0f, NULL, C, 2, &s) && s == -1);
    const gptc_kernels *best = gptc_kernels_get();
    if (best->gemm_isa) {
        CHECK(gptc_gemm_sumsq(best, 0, 0, 0, 2, 2, 3, A, 3, B, 2, 0, 0.0f, NULL, C, 2, &s));
        CHECK_MSG(s == sumsq_of(C, 4), "2x2 product's sum %g, C's %g", s, sumsq_of(C, 4));
    }
    if (!cases) printf("    SKIP: no blocked GEMM level on this CPU\n");
    else printf("    %d cases\n", cases);
}

/* The blocks follow the team's speeds (core/team.h), the bits do not: each ISA level, fp32 and bf16, both
 * loop orders, products split 1 x n and n x 1 over 2 and 3 threads with one thread 3 times or a third as
 * fast as the others, C and the sum of squares against the even split's. */
TEST(gemm_split_follows_the_speeds_bits_do_not) {
    static const int shapes[][3] = {{300, 769, 1100}, {37, 200, 81}, {1000, 40, 64}};
    static const double speeds[][3] = {{1, 3, 1}, {3, 1, 1}, {1, 1, 3}};
    isa_case c[4];
    const int nc = blocked_isas(c), saved = omp_get_max_threads();
    int cases = 0, moved = 0;
    for (int ci = 0; ci < nc; ci++)
        for (int order = 0; order < 2; order++) {
            gptc_gemm_isa g = *c[ci].g;
            g.order = order ? GPTC_GEMM_A_IN_L1 : GPTC_GEMM_B_IN_L1;
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ta = (int)s & 1, tb = order;
                float *A = rand_buf((size_t)M * K), *B = rand_buf((size_t)K * N), *bias = rand_buf(N);
                float *C0 = rand_buf((size_t)M * N), *C1 = malloc(sizeof(float) * M * N), *C2 = malloc(sizeof(float) * M * N);
                const int lda = ta ? M : K, ldb = tb ? K : N;
                for (int nt = 2; nt <= 3; nt++) {
                    omp_set_num_threads(nt);
                    gptc_team_set_even(1);
                    memcpy(C1, C0, sizeof(float) * M * N);
                    const double even = gptc_gemm_blocked_sumsq(&g, ta, tb, M, N, K, A, lda, B, ldb, 0, 1.0f, bias, C1, N);
                    int e[4];
                    gptc_gemm_block_of(&g, M, N, K, nt, 0, &e[0], &e[1], &e[2], &e[3]);
                    gptc_team_set_even(0);
                    for (size_t v = 0; v < sizeof speeds / sizeof speeds[0]; v++, cases++) {
                        gptc_team_set_speeds(3, speeds[v]);
                        int b[4];
                        gptc_gemm_block_of(&g, M, N, K, nt, 0, &b[0], &b[1], &b[2], &b[3]);
                        moved += (b[1] - b[0]) * (b[3] - b[2]) != (e[1] - e[0]) * (e[3] - e[2]);
                        memcpy(C2, C0, sizeof(float) * M * N);
                        const double got = gptc_gemm_blocked_sumsq(&g, ta, tb, M, N, K, A, lda, B, ldb, 0, 1.0f, bias, C2, N);
                        CHECK_MSG(memcmp(C1, C2, sizeof(float) * M * N) == 0 && got == even,
                                  "%s %s order %d %dx%dx%d, %d threads, speeds %g %g %g: C or its sum (%.17g, even "
                                  "%.17g) differs from the even split's", c[ci].level, c[ci].bf16 ? "bf16" : "fp32",
                                  order, M, N, K, nt, speeds[v][0], speeds[v][1], speeds[v][2], got, even);
                    }
                }
                free(A), free(B), free(bias), free(C0), free(C1), free(C2);
            }
        }
    omp_set_num_threads(saved);
    gptc_team_reset();
    if (!cases) {
        printf("    SKIP: no blocked GEMM level on this CPU\n");
        return;
    }
    /* thread 0's block changed size in most cases (not in all: a thread with the mean's speed can keep its share) */
    CHECK_MSG(moved * 2 >= cases, "thread 0's block moved in %d of %d cases", moved, cases);
    printf("    %d cases, thread 0's block moved in %d\n", cases, moved);
}

/* Never run: it only marks the ISA below as one whose kernel copies B inside the tiles. */
static void stand_in_copy_kernel(int kc, const void *a, const void *b, float *c, int ldc, int m, int n, float beta,
                                 const float *bias, double *sumsq, const void *src, size_t lds, int form, void *dst,
                                 int rows) {
    (void)kc, (void)a, (void)b, (void)c, (void)ldc, (void)m, (void)n, (void)beta, (void)bias, (void)sumsq, (void)src;
    (void)lds, (void)form, (void)dst, (void)rows;
}

/* The grid's tie: a 768 x 768 product on 2 threads costs the same multiply-adds on 2 x 1 and 1 x 2. Where the
 * kernel copies B inside the tiles, B's packing counts half, so the rows are split (each thread packs half
 * of A, which is a pass of its own); without, the first grid tried, 1 x 2, stays. */
TEST(gemm_grid_splits_the_rows_where_the_tiles_copy_b) {
    gptc_gemm_isa g = {.mr = 12, .nr = 32, .mc = 144, .kc = 768, .nc = 1536, .order = GPTC_GEMM_B_IN_L1,
                       .esize = 4, .kstep = 1};
    gptc_team_set_even(1);
    for (int copy = 0; copy < 2; copy++) {
        g.kernel_copy = copy ? stand_in_copy_kernel : NULL;
        for (int t = 0; t < 2; t++) {
            int r0, r1, c0, c1;
            gptc_gemm_block_of(&g, 768, 768, 256, 2, t, &r0, &r1, &c0, &c1);
            const int want_r0 = copy ? 384 * t : 0, want_r1 = copy ? 384 * (t + 1) : 768;
            const int want_c0 = copy ? 0 : 384 * t, want_c1 = copy ? 768 : 384 * (t + 1);
            CHECK_MSG(r0 == want_r0 && r1 == want_r1 && c0 == want_c0 && c1 == want_c1,
                      "copy %d thread %d: rows [%d, %d) columns [%d, %d), want [%d, %d) [%d, %d)", copy, t, r0, r1, c0,
                      c1, want_r0, want_r1, want_c0, want_c1);
        }
    }
    gptc_team_set_even(0);
    gptc_team_reset();
}
