/* test_backend.c — the backend seam (src/backend/backend.h): every level's table has every entry (what a
 * new backend must implement), each level's overlay sets its own flash and GELU-form entries (no other
 * dispatch), GPTC_KERNELS=...,flash=LEVEL pins the four flash entries, the binding picks the
 * precision's GEMM and flash entries, the CPU memory is the counting allocator the planner checks, and
 * the calls that run several buffers in one parallel region (zero, AdamW's pieces) equal the entry on
 * each buffer for any thread count. */
#include "test.h"
#include "backend/backend.h"
#include "core/core.h"
#include "kernels/gelu.h"
#include "kernels/x86_avx512/avx512.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_levels[] = {"ref", "avx2", "avx512"};

/* entry i of table k as a plain pointer */
static void *entry(const gptc_kernels *k, size_t off) {
    void *p;
    memcpy(&p, (const char *)k + off, sizeof p);
    return p;
}

TEST(backend_every_level_has_every_entry) {
    for (int l = 0; l < 3; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        for (int i = 0; i < gptc_kernel_nops; i++)
            CHECK_MSG(entry(k, gptc_kernel_ops[i].offset), "%s: %s is NULL", k_levels[l], gptc_kernel_ops[i].name);
        CHECK(k->flash_scratch && k->flash_scratch_bf16 && k->matvec_part && k->attention_decode_part);
    }
    /* gptc_kernel_ops lists every function pointer of the table (the ISA blocking, labels, the two shares of
     * the decode operators and the two scratch sizes are the others) */
    CHECK_EQ_INT(gptc_kernel_nops + 8, (int)GPTC_KERNEL_SLOTS);
}

TEST(backend_each_level_sets_its_flash_and_gelu_forms) {
    const gptc_kernels *r = gptc_kernels_ref(), *a2 = gptc_kernels_level("avx2"), *a5 = gptc_kernels_level("avx512");
    CHECK(r->flash_fwd == gptc_flash_fwd_ref && r->flash_bwd_bf16 == gptc_flash_bwd_bf16_ref);
    CHECK(r->gelu_erf_fwd == gptc_gelu_erf_fwd_ref && r->gelu_sigmoid_bwd == gptc_gelu_sigmoid_bwd_ref);
    if (a2) {
        CHECK(a2->flash_fwd == gptc_flash_fwd_avx2 && a2->flash_bwd == gptc_flash_bwd_avx2);
        CHECK(a2->flash_fwd_bf16 == gptc_flash_fwd_bf16_ref); /* no AVX2 bf16 flash */
        CHECK(a2->gelu_erf_fwd != r->gelu_erf_fwd && a2->gelu_sigmoid_bwd != r->gelu_sigmoid_bwd);
    }
    if (a5) {
        CHECK(a5->flash_fwd == gptc_flash_fwd_avx512 && a5->flash_bwd == gptc_flash_bwd_avx512);
        /* the bf16 flash on vdpbf16ps where gemm_bf16 runs it, else on fp32 FMAs */
        if (gptc_avx512_bf16_native())
            CHECK(a5->flash_fwd_bf16 == gptc_flash_fwd_bf16_dp && a5->flash_bwd_bf16 == gptc_flash_bwd_bf16_dp);
        else
            CHECK(a5->flash_fwd_bf16 == gptc_flash_fwd_bf16_avx512 && a5->flash_bwd_bf16 == gptc_flash_bwd_bf16_avx512);
        CHECK(a5->gelu_erf_bwd != a2->gelu_erf_bwd);
    }
    /* a form's entry is its own at every level */
    const gptc_kernels *k = a5 ? a5 : a2 ? a2 : r;
    CHECK(gptc_gelu_fwd_entry(k, GPTC_GELU_KIND_ERF) == k->gelu_erf_fwd);
    CHECK(gptc_gelu_bwd_entry(k, GPTC_GELU_KIND_SIGMOID) == k->gelu_sigmoid_bwd);
    CHECK(gptc_gelu_fwd_entry(k, GPTC_GELU_KIND_TANH) == k->gelu_fwd);
}

/* GPTC_KERNELS=ref,flash=LEVEL through `gptc info`: the four flash entries, and nothing else, at LEVEL */
TEST(backend_kernels_env_pins_the_flash_entries) {
    const char *best = gptc_kernels_level("avx512") ? "avx512" : gptc_kernels_level("avx2") ? "avx2" : NULL;
    if (!best) {
        printf("    no SIMD level on this CPU, skipped\n");
        return;
    }
    char cmd[1024], want[64], *out = NULL;
    snprintf(cmd, sizeof cmd, "GPTC_KERNELS=ref,flash=%s %s info", best, test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    snprintf(want, sizeof want, " flash_fwd=%s flash_bwd=%s ", best, best);
    CHECK_MSG(out && strstr(out, want) && strstr(out, " gemm=ref ") && strstr(out, " gelu_erf_fwd=ref "), "%s", out);
    free(out);
}

TEST(backend_bind_picks_the_precision) {
    const gptc_kernels *k = gptc_kernels_get();
    gptc_backend be;
    gptc_backend_bind(&be, gptc_backend_cpu_memory(), k, GPTC_PRECISION_FP32, true);
    CHECK(be.gemm == k->gemm && be.flash_fwd == k->flash_fwd && be.flash_bwd == k->flash_bwd && !be.bf16 && be.fuse);
    CHECK(be.gemm_slot == GPTC_KERNEL_SLOT(gemm) && be.flash_fwd_slot == GPTC_KERNEL_SLOT(flash_fwd));
    gptc_backend_bind(&be, gptc_backend_cpu_memory(), k, GPTC_PRECISION_BF16, false);
    CHECK(be.gemm == k->gemm_bf16 && be.flash_fwd == k->flash_fwd_bf16 && be.flash_bwd == k->flash_bwd_bf16 && be.bf16);
    CHECK(be.flash_bwd_slot == GPTC_KERNEL_SLOT(flash_bwd_bf16) && !be.fuse);
    CHECK(gptc_backend_default()->k == k && !gptc_backend_default()->bf16);
}

TEST(backend_cpu_memory_is_the_counted_allocator) {
    const gptc_backend_memory *mem = gptc_backend_cpu_memory();
    size_t live0, live1, live2;
    gptc_alloc_stats(&live0, NULL);
    float *d = mem->alloc(1000 * sizeof(float), "backend test");
    CHECK(d && ((uintptr_t)d & 63) == 0);
    if (!d) return;
    gptc_alloc_stats(&live1, NULL);
    CHECK_EQ_INT((long long)(live1 - live0), (long long)mem->block_bytes(1000 * sizeof(float)));
    float h[1000], back[1000];
    for (int i = 0; i < 1000; i++) h[i] = (float)i;
    mem->memset(d, 0, sizeof h);
    mem->copy_h2d(d + 10, h, 990 * sizeof(float));
    mem->synchronize();
    mem->copy_d2h(back, d, sizeof back);
    CHECK(back[0] == 0 && back[9] == 0 && back[10] == 0 && back[999] == 989);
    mem->free(d);
    gptc_alloc_stats(&live2, NULL);
    CHECK_EQ_INT((long long)live2, (long long)live0);
}

/* ---- the calls that split several buffers over one parallel region: the same result as the entry
 * on each buffer, for 1, 2 and 3 threads (the cuts fall inside buffers, at ragged lengths) */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { return test_uniform(&g_rng); } /* uniform [-1, 1) */

TEST(backend_zero_several_buffers_in_one_region) {
    static const size_t lens[] = {1, 17, 0, 100003, 33, 70000, 5};
    enum { NBUF = sizeof lens / sizeof *lens, GUARD = 16 };
    for (int l = 0; l < 3; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        gptc_backend be;
        gptc_backend_bind(&be, gptc_backend_cpu_memory(), k, GPTC_PRECISION_FP32, true);
        for (int th = 1; th <= 3; th++) {
            float *bufs[NBUF], *blocks[NBUF];
            for (int i = 0; i < NBUF; i++) {
                blocks[i] = malloc((lens[i] + 2 * GUARD) * sizeof(float));
                for (size_t j = 0; j < lens[i] + 2 * GUARD; j++) blocks[i][j] = 3.5f;
                bufs[i] = blocks[i] + GUARD;
            }
            int saved = omp_get_max_threads();
            omp_set_num_threads(th);
            gptc_be_zero(&be, GPTC_PROF_BWD, "zero.test", -1, NBUF, bufs, lens);
            omp_set_num_threads(saved);
            for (int i = 0; i < NBUF; i++) {
                size_t bad = 0;
                for (size_t j = 0; j < lens[i] + 2 * GUARD; j++) {
                    bool inside = j >= GUARD && j < GUARD + lens[i];
                    if (blocks[i][j] != (inside ? 0.0f : 3.5f)) bad++;
                }
                CHECK_MSG(bad == 0, "%s, %d threads: buffer %d (%zu floats): %zu floats wrong", k_levels[l], th, i,
                          lens[i], bad);
                free(blocks[i]);
            }
        }
    }
}

/* The pieces on 1, 2 and 3 threads equal the entry once per piece, bit for bit; with a bf16 copy asked for
 * (p16: written in runs with the update) the copy equals the table's to_bf16 of the updated p, and the
 * update is the same. The pieces are longer and shorter than the runs. */
TEST(backend_adamw_pieces_equal_the_entry_per_piece) {
    static const size_t lens[] = {768, 50001, 3, 0, 2304 * 7 + 5, 16, 40000};
    enum { NP = sizeof lens / sizeof *lens, ARR = 4 };
    size_t total = 0;
    for (int i = 0; i < NP; i++) total += lens[i];
    float *init[ARR];
    for (int a = 0; a < ARR; a++) {
        init[a] = malloc(total * sizeof(float));
        for (size_t j = 0; j < total; j++) init[a][j] = a == 3 ? 1e-4f * (frand() + 1) : frand();
    }
    uint16_t *want16 = malloc(total * sizeof(uint16_t)), *got16 = malloc(total * sizeof(uint16_t));
    for (int l = 0; l < 3; l++) {
        const gptc_kernels *k = gptc_kernels_level(k_levels[l]);
        if (!k) continue;
        gptc_backend be;
        gptc_backend_bind(&be, gptc_backend_cpu_memory(), k, GPTC_PRECISION_FP32, true);
        /* the yardstick: the entry once per piece (then to_bf16 of the result); then the pieces */
        float *want[ARR], *got[ARR];
        for (int a = 0; a < ARR; a++) want[a] = malloc(total * sizeof(float)), got[a] = malloc(total * sizeof(float));
        for (int a = 0; a < ARR; a++) memcpy(want[a], init[a], total * sizeof(float));
        size_t off = 0;
        for (int i = 0; i < NP; off += lens[i], i++)
            k->adamw(want[0] + off, want[1] + off, want[2] + off, want[3] + off, lens[i], 1e-3f, 0.8f, 0.97f, 1e-6f,
                     i % 2 ? 0.1f : 0.0f, 0.7f, 3);
        k->to_bf16(want16, want[0], total);
        for (int with16 = 0; with16 < 2; with16++)
            for (int th = 1; th <= 3; th++) {
                for (int a = 0; a < ARR; a++) memcpy(got[a], init[a], total * sizeof(float));
                memset(got16, 0xA5, total * sizeof(uint16_t));
                gptc_adamw_piece pieces[NP];
                off = 0;
                for (int i = 0; i < NP; off += lens[i], i++)
                    pieces[i] = (gptc_adamw_piece){got[0] + off, got[1] + off, got[2] + off, got[3] + off, lens[i],
                                                   i % 2 ? 0.1f : 0.0f, with16 ? got16 + off : NULL};
                int saved = omp_get_max_threads();
                omp_set_num_threads(th);
                gptc_be_adamw_pieces(&be, pieces, NP, 1e-3f, 0.8f, 0.97f, 1e-6f, 0.7f, 3);
                omp_set_num_threads(saved);
                for (int a = 0; a < ARR; a++)
                    CHECK_MSG(memcmp(got[a], want[a], total * sizeof(float)) == 0,
                              "%s, %d threads, bf16 copy %d: array %d differs", k_levels[l], th, with16, a);
                if (with16)
                    CHECK_MSG(memcmp(got16, want16, total * sizeof(uint16_t)) == 0,
                              "%s, %d threads: the bf16 copy differs from to_bf16 of the update", k_levels[l], th);
            }
        for (int a = 0; a < ARR; a++) free(want[a]), free(got[a]);
    }
    free(want16), free(got16);
    for (int a = 0; a < ARR; a++) free(init[a]);
}
