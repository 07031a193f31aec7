/* gemm_driver.c — portable BLIS-style GEMM: cache blocking, packing (absorbs transposes; B's micro-panels
 * inside the tiles where the ISA's kernel can copy them), a barrier-free 2-D split of C over OpenMP threads,
 * and the bias in the microkernel's epilogue.
 * Element size and k granularity come from the ISA description, so the same code drives the fp32
 * and the bf16 kernels. */
#include "kernels/gemm/gemm_driver.h"

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/profile.h"
#include "core/team.h"
#include "kernels/kernels.h"

#define GEMM_MIN(a, b) ((a) < (b) ? (a) : (b))

/* Per-thread packing buffers: one A block and one B panel, and the rows of a bf16 matvec panel put back
 * in column order; they grow once, then are reused. */
static _Thread_local gptc_workspace tl_apack, tl_bpack, tl_rows16, tl_tiles;

void gptc_gemm_pack_portable(int trans, const float *X, int ldx, int i0, int k0, int m, int kc, int r,
                             void *out_) {
    float *out = out_;
    for (int p = 0; p < m; p += r) {
        int rows = GEMM_MIN(r, m - p);
        float *o = out + (size_t)p * kc;
        if (trans) {
            for (int k = 0; k < kc; k++) {
                const float *x = X + (size_t)(k0 + k) * ldx + i0 + p;
                float *ok = o + (size_t)k * r;
                int i = 0;
                for (; i < rows; i++) ok[i] = x[i];
                for (; i < r; i++) ok[i] = 0.0f;
            }
        } else {
            for (int i = 0; i < rows; i++) {
                const float *x = X + (size_t)(i0 + p + i) * ldx + k0;
                for (int k = 0; k < kc; k++) o[(size_t)k * r + i] = x[k];
            }
            for (int i = rows; i < r; i++)
                for (int k = 0; k < kc; k++) o[(size_t)k * r + i] = 0.0f;
        }
    }
}

/* gptc_gemm_pack_portable on the widened values of a bf16 source */
void gptc_gemm_pack16_portable(int trans, const uint16_t *X, int ldx, int i0, int k0, int m, int kc, int r,
                               void *out_) {
    float *out = out_;
    for (int p = 0; p < m; p += r) {
        int rows = GEMM_MIN(r, m - p);
        float *o = out + (size_t)p * kc;
        for (int k = 0; k < kc; k++)
            for (int i = 0; i < r; i++)
                o[(size_t)k * r + i] = i >= rows ? 0.0f
                                       : trans   ? gptc_bf16_to_f32(X[(size_t)(k0 + k) * ldx + i0 + p + i])
                                                 : gptc_bf16_to_f32(X[(size_t)(i0 + p + i) * ldx + k0 + k]);
    }
}

/* Branch-free so that it vectorises: x + 0x7fff + lsb then truncation is round to nearest, ties to
 * even; a NaN keeps its top bits and is made quiet (gptc_f32_to_bf16's rule). */
void gptc_gemm_round_bf16(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, p + i, sizeof x);
        const uint32_t rne = (x + 0x7fffu + ((x >> 16) & 1u)) & 0xffff0000u;
        const uint32_t nan = (x | 0x00400000u) & 0xffff0000u;
        x = (x & 0x7fffffffu) > 0x7f800000u ? nan : rne;
        memcpy(p + i, &x, sizeof x);
    }
}

static size_t round_up(size_t x, size_t r) { return (x + r - 1) / r * r; }

/* Bytes of one packed row (of A or B) over kc depths: kc rounded up to the ISA's k granularity */
static size_t row_bytes(const gptc_gemm_isa *g, int kc) { return round_up((size_t)kc, (size_t)g->kstep) * (size_t)g->esize; }

static long clamp_down(long x, long multiple, long lo, long hi) {
    x = x / multiple * multiple;
    return x < lo ? lo : x > hi ? hi : x;
}

/* Blocking from the cache sizes. The kernel reads, per k step, nr values of B (vector loads) and mr of
 * A (broadcasts).
 * - Full-width 512-bit FMAs and an L2 of at least 2 MiB (order A_IN_L1): the A micro-panel (mr x kc)
 *   takes 3/8 of L1d, so the streaming B micro-panels and C rows share the rest; the B panel (kc x nc)
 *   half of L2, re-read from there for every A micro-panel; the A block as tall as the thread's rows
 *   (up to 4092), so A is packed once per depth block and each B panel once per A block (gemm_block's
 *   A_IN_L1 loops); its micro-panels are read from L3 once per B panel. On this rule a 48 KiB L1d /
 *   2 MiB L2 Intel core gets kc 384, nc 672 for fp32. Measured on such a core (Xeon, family 6 model
 *   207, 1 thread, 1024x3072x768, best of 6, a shared machine): 129 GFLOP/s against 111 for the Zen 4
 *   order and blocking with the same microkernel.
 * - Otherwise (order B_IN_L1), the constants tuned on Zen 4 (double-pumped FMAs) — kc 768 (GPT-2's C
 *   in one pass; 384 -> 768 gave +3-5%), an A block of 27/64 of L2 (144 x 768 fp32 in 1 MiB) and a B
 *   panel of 9/32 of L3 (768 x 3072 fp32 in 32 MiB) — expressed as these fractions of its caches.
 *   Zen 5 (full width, 48 KiB L1d, 1 MiB L2) takes this order: there the A_IN_L1 rule's half-of-L2 B
 *   panel (384 x 320) fell to a third of its speed on some runs of the classifier's products, a
 *   quarter of L2 (384 x 160) with A blocks of up to 1356 rows held, and then the two orders were
 *   within noise of each other at 2 threads on GPT-2's products, while a training step at T=64 was
 *   faster in this one (docs/performance.md, "Zen 5"). That VM hides its L3: a panel of 768 x 1536
 *   (4.5 MiB) instead of 768 x 3072 ran the classifier's forward (1024 x 50304 x 768) at 2 threads at
 *   354 against 300 GFLOP/s (bf16: 532 against 380) in alternated runs, so an unknown L3 counts as a
 *   16 MiB share. */
void gptc_gemm_block_for_caches(gptc_gemm_isa *g, const gptc_cpu_info *c) {
    const long l1 = c->l1d_bytes, l2 = c->l2_bytes, l3 = c->l3_bytes, es = g->esize;
    const long kq = 16L * g->kstep; /* kc a multiple of 16 k values (of pairs for bf16) */
    if (l1 <= 0 || l2 <= 0) return;
    if (!c->fma512_half_width && l2 >= 2L << 20) {
        g->order = GPTC_GEMM_A_IN_L1;
        g->kc = (int)clamp_down(l1 * 3 / 8 / (g->mr * es), kq, kq * 8, 2048);
        g->nc = (int)clamp_down(l2 / 2 / (g->kc * es), g->nr, g->nr * 4, 4096);
        g->mc = 4092 / g->mr * g->mr; /* up to 4092 rows: A packed once per depth block on GPT-2's shapes */
        return;
    }
    g->order = GPTC_GEMM_B_IN_L1;
    g->kc = 768 * 4 / (int)es;
    g->mc = (int)clamp_down(l2 * 27 / 64 / (g->kc * es), g->mr, g->mr * 4, 4096);
    /* an L3 the CPU does not report (a VM hiding it) is taken as a 16 MiB share: a B panel of 4.5 MiB */
    const long l3_share = l3 > 0 ? l3 : 16L << 20;
    g->nc = (int)clamp_down(l3_share * 9 / 32 / (g->kc * es), g->nr, g->nr * 4, 4096);
}

/* The thread grid tm x tn (tm * tn = nt) with the least work on its busiest thread: multiply-adds
 * of its block plus packing, an element packed costing about as much as 16 multiply-adds (a
 * vector load and store against a 16-wide FMA). In the B_IN_L1 order A is packed once per B panel
 * width nc; in the A_IN_L1 order B is packed once per A block height mc. Where the kernel copies B
 * inside the tiles (kernel_copy), a B element counts half: A's packing is a pass of its own, B's mostly
 * is not. That decides the ties: a 768 x 768 weight gradient (2 threads) on a 2 x 1 grid, each thread
 * packing half of A, ran 4-9 % faster than on 1 x 2, each packing all of it (K = 256, 1024, 4096; Zen
 * 5). A quarter would also move GPT-2's 256 x 768 x K products to 2 x 1, where the forward measured
 * +0.3 % and the input gradient -1.0 to -1.3 % (docs/performance.md, sixteenth session). */
static void choose_grid(const gptc_gemm_isa *g, int nt, int mpan, int npan, int *tm, int *tn) {
    double best = -1;
    const double b_cost = g->kernel_copy ? 0.5 : 1.0; /* of a packed B element, against an A one */
    for (int a = 1; a <= nt; a++) {
        if (nt % a) continue;
        int b = nt / a;
        double rows = (double)((mpan + a - 1) / a) * g->mr, cols = (double)((npan + b - 1) / b) * g->nr;
        double packed = g->order == GPTC_GEMM_A_IN_L1 ? rows + cols * ceil(rows / g->mc)
                                                      : rows * ceil(cols / g->nc) + b_cost * cols;
        double cost = rows * cols + 16.0 * packed;
        if (best < 0 || cost < best) best = cost, *tm = a, *tn = b;
    }
}

/* How one operand is packed: its packer, whether it is a bf16 source (packed by pack16, unrounded), and
 * for B whether it is in matvec's panel form (kernels.h GPTC_GEMM_B_PANELS; depth K) or packed whole
 * already (GPTC_GEMM_B_PACKED: op(B) (K,N) as gptc_gemm_pack_whole_b wrote it, read in place). */
typedef struct gemm_src {
    gptc_gemm_pack pack;
    gptc_gemm_pack16 pack16;
    bool x16;
    bool panels;
    bool prepacked;
    int K, N;
} gemm_src;

/* A's and B's sources for a call's in16 bits (kernels.h GPTC_GEMM_*): the ISA's packers, else the portable
 * ones; B's own where the ISA has them. A bf16 source needs the ISA's pack16 unless its panels are fp32
 * (the portable one writes fp32 panels). */
static gemm_src src_a(const gptc_gemm_isa *g, int in16, int K, int M) {
    const bool x16 = (in16 & GPTC_GEMM_A16) != 0;
    GPTC_ASSERT(!x16 || g->pack16 || (g->esize == 4 && g->kstep == 1));
    return (gemm_src){g->pack ? g->pack : gptc_gemm_pack_portable, g->pack16 ? g->pack16 : gptc_gemm_pack16_portable,
                      x16, false, false, K, M};
}
static gemm_src src_b(const gptc_gemm_isa *g, int in16, int K, int N) {
    gemm_src s = src_a(g, in16 & GPTC_GEMM_B16 ? GPTC_GEMM_A16 : 0, K, N);
    if (g->pack_b) s.pack = g->pack_b;
    if (g->pack16_b) s.pack16 = g->pack16_b;
    s.panels = (in16 & GPTC_GEMM_B_PANELS) != 0;
    s.prepacked = (in16 & GPTC_GEMM_B_PACKED) != 0;
    return s;
}

/* Rows k0..k0+kc-1 of a bf16 panel of matvec's form (kernels.h: each run of 32 columns as 16 pairs,
 * word i = columns i and 16 + i) as a (kc, GPTC_MV_PANEL) matrix in column order. */
static void panel_rows16(const uint16_t *panel, int k0, int kc, uint16_t *out) {
    for (int k = 0; k < kc; k++) {
        const uint16_t *src = panel + (size_t)(k0 + k) * GPTC_MV_PANEL;
        uint16_t *o = out + (size_t)k * GPTC_MV_PANEL;
        for (int g = 0; g < GPTC_MV_PANEL; g += 32)
            for (int i = 0; i < 16; i++) {
                uint32_t w;
                memcpy(&w, src + g + 2 * i, sizeof w);
                o[g + i] = (uint16_t)(w & 0xffffu), o[g + 16 + i] = (uint16_t)(w >> 16);
            }
    }
}

/* floats of tl_rows16 for kc rows of a bf16 panel put back in column order (panel_rows16) */
static size_t rows16_floats(int kc) { return (size_t)kc * GPTC_MV_PANEL / 2; }

/* B's columns i0.. (m of them, i0 a multiple of r) x depths k0.. (kc) from matvec's panel form (depth
 * s.K): each panel a (K, GPTC_MV_PANEL) matrix, its micro-panels whole (GPTC_MV_PANEL % r == 0, checked
 * at the call); a bf16 panel's kc rows are first put back in column order (one panel at a time, so a
 * block in L1). */
static void pack_from_panels(const gptc_gemm_isa *g, gemm_src s, int i0, int k0, int m, int kc, int r, const void *X,
                             char *out) {
    const int P = GPTC_MV_PANEL;
    const size_t es = s.x16 ? sizeof(uint16_t) : sizeof(float), kbytes = row_bytes(g, kc);
    GPTC_ASSERT(i0 % r == 0);
    uint16_t *rows16 = s.x16 ? (uint16_t *)gptc_workspace_get(&tl_rows16, rows16_floats(kc)) : NULL;
    for (int i = i0; i < i0 + m;) {
        const int n = GEMM_MIN(P * (i / P + 1), i0 + m) - i;
        const char *src = (const char *)X + gptc_matvec_panel_at(s.K, 0, i - i % P, s.x16) * es;
        char *dst = out + (size_t)(i - i0) * kbytes;
        if (s.x16) {
            panel_rows16((const uint16_t *)src, k0, kc, rows16);
            s.pack16(1, rows16, P, i % P, 0, n, kc, r, dst);
        } else {
            s.pack(1, (const float *)src, P, i % P, k0, n, kc, r, dst);
        }
        i += n;
    }
}

/* Packs rows i0.. (m of them) x depths k0.. (kc) of op(X) into micro-panels of r rows (gemm_driver.h),
 * rounded to bf16 when the ISA computes gemm_bf16 with fp32 FMAs (a bf16 source is already). */
static void pack_panels(const gptc_gemm_isa *g, gemm_src s, int trans, const void *X, int ldx, int i0, int k0, int m,
                        int kc, int r, char *out) {
    if (s.panels)
        pack_from_panels(g, s, i0, k0, m, kc, r, X, out);
    else if (s.x16)
        s.pack16(trans, X, ldx, i0, k0, m, kc, r, out);
    else
        s.pack(trans, X, ldx, i0, k0, m, kc, r, out);
    if (g->round_bf16 && !s.x16)
        (g->round ? g->round : gptc_gemm_round_bf16)((float *)out, round_up((size_t)m, (size_t)r) * row_bytes(g, kc) / sizeof(float));
}

/* The sum of squares of a finished m x n tile of C (row stride ldc), for ISAs whose kernels do not take it from
 * their registers (read back after the thread's block: read straight after the kernel's masked stores, a weight
 * gradient's product took 30 % longer). Any fixed order serves: a tile is summed the same way on any thread. */
static double tile_sumsq(const float *c, int ldc, int m, int n) {
    double sum = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) sum += (double)c[(size_t)i * ldc + j] * c[(size_t)i * ldc + j];
    return sum;
}

/* Where the B panel of depth block pc, columns from jc (a multiple of nr), starts in op(B) (K,N) packed
 * whole (gptc_gemm_pack_whole_b): the depth blocks one after the other, each ceil(N/nr) micro-panels of
 * its depth (every block but the last a whole kc), so a panel is the same bytes a call would pack. */
static size_t whole_b_offset(const gptc_gemm_isa *g, int N, int pc, int kc, int jc) {
    const size_t cols = round_up((size_t)N, (size_t)g->nr);
    return (size_t)(pc / g->kc) * cols * row_bytes(g, g->kc) + (size_t)jc * row_bytes(g, kc);
}

/* B's panel of columns jc.. (nc) x depths pc.. (kc): packed now into bpack, or where it lies in a B
 * packed whole */
static const char *b_panel(const gptc_gemm_isa *g, gemm_src sb, int transB, const void *B, int ldb, int jc, int pc,
                           int nc, int kc, char *bpack) {
    if (sb.prepacked) return (const char *)B + whole_b_offset(g, sb.N, pc, kc, jc);
    pack_panels(g, sb, !transB, B, ldb, jc, pc, nc, kc, g->nr, bpack);
    return bpack;
}

/* One thread's block of C: rows [r0, r1), columns [c0, c1) (multiples of the micro-tile but at
 * the matrix edge), all of K in KC steps, in g's loop order. apack / bpack hold one packed A block /
 * B panel (B by sb's packers). Both orders run the same micro-tile calls, each C element receiving its KC partial sums
 * in increasing k, so they give the same bits. */
static void gemm_block(const gptc_gemm_isa *g, gemm_src sa, gemm_src sb, int transA, int transB, int r0, int r1,
                       int c0, int c1, int K, const void *A, int lda, const void *B, int ldb, float beta,
                       const float *bias, float *C, int ldc, char *apack, char *bpack, double *tile_sums, int npan) {
    const int MR = g->mr, NR = g->nr, KC = g->kc, NC = g->nc;
    /* a finished tile's sum of squares from the kernel's registers, into its slot of tile_sums (one per micro-tile of
     * C, row-major), in the last depth block; kernels without kernel_sumsq: blocked_run reads the tiles back */
#define TILE_SQ(ir, jr)                                                                                            \
    (tile_sums && pc + kc >= K ? &tile_sums[(size_t)((ic + (ir)) / MR) * npan + (jc + (jr)) / NR] : NULL)
#define GEMM_TILE(ir, jr)                                                                                          \
    g->kernel(kc, apack + (size_t)(ir) * kbytes, bp + (size_t)(jr) * kbytes, C + (size_t)(ic + (ir)) * ldc + jc + (jr), \
              ldc, GEMM_MIN(MR, mc - (ir)), GEMM_MIN(NR, nc - (jr)), bt, bs ? bs + jc + (jr) : NULL, TILE_SQ(ir, jr))
    if (g->order == GPTC_GEMM_A_IN_L1) {
        /* per depth block: each A block packed once, then every B panel of the thread's columns (in L2)
         * against its A micro-panels (each in L1 while the B micro-panels stream past). The thread's rows
         * go in A blocks of equal height (whole micro-panels, at most mc), so that no thin last block packs
         * every B panel again for a few rows. */
        const int blocks = (r1 - r0 + g->mc - 1) / g->mc;
        const int MC = (int)round_up((size_t)((r1 - r0 + blocks - 1) / blocks), (size_t)MR);
        for (int pc = 0; pc < K; pc += KC) {
            const int kc = GEMM_MIN(KC, K - pc);
            const size_t kbytes = row_bytes(g, kc); /* one row of a panel */
            const float bt = pc == 0 ? beta : 1.0f;
            const float *bs = pc == 0 ? bias : NULL; /* the bias joins the first partial sum */
            for (int ic = r0; ic < r1; ic += MC) {
                const int mc = GEMM_MIN(MC, r1 - ic);
                pack_panels(g, sa, transA, A, lda, ic, pc, mc, kc, MR, apack);
                for (int jc = c0; jc < c1; jc += NC) {
                    const int nc = GEMM_MIN(NC, c1 - jc);
                    const char *bp = b_panel(g, sb, transB, B, ldb, jc, pc, nc, kc, bpack);
                    for (int ir = 0; ir < mc; ir += MR)
                        for (int jr = 0; jr < nc; jr += NR) GEMM_TILE(ir, jr);
                }
            }
        }
        return;
    }
    /* B's panel packed while the first A block's tiles run (kernel_copy), where B is rows of values the
     * kernel takes as they are — floats for fp32 panels, bf16 values for bf16 pair panels: the copy's loads,
     * stores and shuffles run beside the multiply-adds. Packed before the tiles, B's panel took 8 % of GPT-2's
     * forward products at B.T = 256 on Zen 5 with its operands in cache, 14 % from memory; bf16 pairs rounded
     * from floats inside the tiles cost the weight gradients 3-6 % (the conversions share the pipes of
     * vdpbf16ps), so those are packed before (docs/performance.md, tenth session). B^T (the input gradients'
     * W, the classifier's wte) is copied the same way where the ISA's kernel transposes its words between its
     * depths (copy_t32), in whole blocks of 16 packed rows: at GPT-2's B.T = 256 the input gradients ran 8-12 %
     * faster in the step than with B^T packed before the tiles (docs/performance.md, fifteenth session). */
    const bool rows_fuse = !transB && (!sb.panels || g->nr == 32), t32 = transB && g->copy_t32 && !sb.panels;
    const bool fuse = g->kernel_copy && (rows_fuse || t32) && !sb.prepacked && sb.x16 == (g->kstep == 2) &&
                      !g->pack_b && !g->round_bf16;
    const size_t ses = sb.x16 ? sizeof(uint16_t) : sizeof(float); /* B's elements */
    const int form = t32         ? GPTC_GEMM_COPY_T32
                     : sb.panels ? GPTC_GEMM_COPY_PANELS16
                     : sb.x16    ? GPTC_GEMM_COPY_BF16
                                 : GPTC_GEMM_COPY_F32;
    const int unit = t32 ? 16 : 1; /* packed rows a copy moves together */
    const int MC = g->mc;
    for (int jc = c0; jc < c1; jc += NC) {
        const int nc = GEMM_MIN(NC, c1 - jc);
        for (int pc = 0; pc < K; pc += KC) {
            const int kc = GEMM_MIN(KC, K - pc);
            const size_t kbytes = row_bytes(g, kc);
            const float bt = pc == 0 ? beta : 1.0f;
            const float *bs = pc == 0 ? bias : NULL;
            const bool fused = fuse && kc % (g->kstep * unit) == 0; /* whole depth pairs, whole blocks */
            const char *bp = fused ? bpack : b_panel(g, sb, transB, B, ldb, jc, pc, nc, kc, bpack);
            for (int ic = r0; ic < r1; ic += MC) {
                const int mc = GEMM_MIN(MC, r1 - ic);
                pack_panels(g, sa, transA, A, lda, ic, pc, mc, kc, MR, apack);
                if (fused && ic == r0) {
                    /* the first micro-panel packed before the tiles; each next whole one copied by the tiles
                     * of the one before, a share of its packed rows (depths, or depth pairs) each; a ragged
                     * last one packed after them */
                    const int prows = kc / g->kstep, tiles = (mc + MR - 1) / MR;
                    const int per = ((prows + tiles - 1) / tiles + unit - 1) / unit * unit;
                    pack_panels(g, sb, !transB, B, ldb, jc, pc, GEMM_MIN(NR, nc), kc, NR, bpack);
                    for (int jr = 0; jr < nc; jr += NR) {
                        const int nx = jr + NR;
                        if (nx + NR > nc) {
                            for (int ir = 0; ir < mc; ir += MR) GEMM_TILE(ir, jr);
                            if (nx < nc)
                                pack_panels(g, sb, !transB, B, ldb, jc + nx, pc, nc - nx, kc, NR,
                                            bpack + (size_t)nx * kbytes);
                            continue;
                        }
                        /* from B's rows, its next micro-panel's run of 32 columns in a panel (kernels.h), or
                         * (B^T) the rows that are its columns; a packed row's step in the source */
                        const size_t at = sb.panels ? gptc_matvec_panel_at(sb.K, pc, jc + nx, 1)
                                          : transB  ? (size_t)(jc + nx) * ldb + pc
                                                    : (size_t)pc * ldb + jc + nx;
                        const size_t lds = sb.panels ? GPTC_MV_PANEL : (size_t)ldb;
                        const size_t step = (size_t)g->kstep * (transB ? 1 : lds) * ses;
                        const char *src = (const char *)B + at * ses;
                        char *dst = bpack + (size_t)nx * kbytes;
                        for (int ir = 0, t = 0; ir < mc; ir += MR, t++) {
                            const int row = GEMM_MIN(t * per, prows), rows = GEMM_MIN(per, prows - row);
                            g->kernel_copy(kc, apack + (size_t)ir * kbytes, bp + (size_t)jr * kbytes,
                                           C + (size_t)(ic + ir) * ldc + jc + jr, ldc, GEMM_MIN(MR, mc - ir), NR, bt,
                                           bs ? bs + jc + jr : NULL, TILE_SQ(ir, jr),
                                           src + (size_t)row * step, lds,
                                           form, dst + (size_t)row * NR * g->esize * g->kstep, rows);
                        }
                    }
                    continue;
                }
                for (int jr = 0; jr < nc; jr += NR)
                    for (int ir = 0; ir < mc; ir += MR) GEMM_TILE(ir, jr);
            }
        }
    }
#undef GEMM_TILE
#undef TILE_SQ
}

/* How a call splits C over threads: nt threads in a tm x tn grid of mpan x npan micro-panels; run.w: the
 * threads' weights (core/team.h; run also takes the threads' timings), by which the rows go to the grid's rows
 * of threads (each row of threads weighing what its threads weigh together) and each row's columns to its
 * threads. A tile's bits do not depend on the thread that sums it, so the split may follow the threads'
 * speeds. */
typedef struct gemm_split {
    int nt, tm, tn, mpan, npan;
    gptc_team_run run;
} gemm_split;

static gemm_split split_for(const gptc_gemm_isa *g, int M, int N, int K, int max_threads) {
    gemm_split s = {.mpan = (M + g->mr - 1) / g->mr, .npan = (N + g->nr - 1) / g->nr, .tm = 1, .tn = 1};
    const double flops = 2.0 * M * N * K;
    s.nt = flops < 4e6 ? 1 : max_threads;
    if (s.nt > s.mpan * s.npan) s.nt = s.mpan * s.npan;
    if (s.nt > GPTC_TEAM_MAX) s.nt = GPTC_TEAM_MAX; /* the threads with weights */
    choose_grid(g, s.nt, s.mpan, s.npan, &s.tm, &s.tn);
    gptc_team_run_begin(&s.run, 0, s.nt);
    return s;
}

/* Thread t's block of C: rows [*r0, *r1), columns [*c0, *c1) (whole micro-panels, in proportion to the
 * weights) */
static void thread_block(const gptc_gemm_isa *g, const gemm_split *s, int t, int M, int N, int *r0, int *r1, int *c0,
                         int *c1) {
    const int ti = t / s->tn, tj = t % s->tn, MR = g->mr, NR = g->nr;
    int rw[GPTC_TEAM_MAX]; /* the weights of the rows of threads */
    for (int i = 0; i < s->tm; i++) {
        rw[i] = 0;
        for (int j = 0; j < s->tn; j++) rw[i] += s->run.w[i * s->tn + j];
    }
    const int *cw = s->run.w + ti * s->tn;
    *r0 = gptc_team_part(s->mpan, s->tm, ti, rw) * MR;
    *r1 = GEMM_MIN(gptc_team_part(s->mpan, s->tm, ti + 1, rw) * MR, M);
    *c0 = gptc_team_part(s->npan, s->tn, tj, cw) * NR;
    *c1 = GEMM_MIN(gptc_team_part(s->npan, s->tn, tj + 1, cw) * NR, N);
}

/* The tallest and widest block any thread of the split can get, whatever the weights: what the packing
 * buffers are sized for at a thread's first call, so that no later call grows them as the speeds move. */
static int most_rows(const gptc_gemm_isa *g, const gemm_split *s, int M) {
    return GEMM_MIN(gptc_team_part_max(s->mpan, s->tm) * g->mr, M);
}
static int most_cols(const gptc_gemm_isa *g, const gemm_split *s, int N) {
    return GEMM_MIN(gptc_team_part_max(s->npan, s->tn) * g->nr, N);
}

/* floats (rounded up) taking the packed rows of one block: all of its depth, esize bytes each */
static size_t pack_floats(const gptc_gemm_isa *g, int K, size_t rows) {
    size_t kbytes = row_bytes(g, GEMM_MIN(g->kc, K));
    return (kbytes * rows + sizeof(float) - 1) / sizeof(float);
}
/* floats of the A block and the B panel a thread packs for its block */
static size_t apack_floats(const gptc_gemm_isa *g, int K, int r0, int r1) {
    return pack_floats(g, K, round_up((size_t)GEMM_MIN(g->mc, r1 - r0), g->mr));
}
static size_t bpack_floats(const gptc_gemm_isa *g, int K, int c0, int c1) {
    return pack_floats(g, K, round_up((size_t)GEMM_MIN(g->nc, c1 - c0), g->nr));
}

void gptc_gemm_block_of(const gptc_gemm_isa *g, int M, int N, int K, int threads, int t, int *r0, int *r1, int *c0,
                        int *c1) {
    const gemm_split s = split_for(g, M, N, K, threads);
    *r0 = *r1 = *c0 = *c1 = 0;
    if (t < s.nt) thread_block(g, &s, t, M, N, r0, r1, c0, c1);
}

void gptc_gemm_blocked(const gptc_gemm_isa *g, int transA, int transB, int M, int N, int K, const float *A,
                       int lda, const float *B, int ldb, float beta, const float *bias, float *C, int ldc) {
    gptc_gemm_blocked_in16(g, transA, transB, M, N, K, A, lda, B, ldb, 0, beta, bias, C, ldc);
}

/* gptc_gemm_blocked_in16's product; tiles: NULL, or one double per micro-tile of C (row-major, ceil(N/nr) per
 * row of tiles) that gets the tile's sum of squares once it is final */
static void blocked_run(const gptc_gemm_isa *g, int transA, int transB, int M, int N, int K, const void *A, int lda,
                        const void *B, int ldb, int in16, float beta, const float *bias, float *C, int ldc,
                        double *tiles) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float *c = C + (size_t)i * ldc + j;
                *c = (beta == 0.0f ? 0.0f : beta * *c) + (bias ? bias[j] : 0.0f);
            }
        return;
    }
    const gemm_src sa = src_a(g, in16, K, M), sb = src_b(g, in16, K, N);
    GPTC_ASSERT(!sb.panels || (!transB && GPTC_MV_PANEL % g->nr == 0));
    gemm_split s = split_for(g, M, N, K, omp_get_max_threads()); /* its run takes the threads' timings */
    const int rows = most_rows(g, &s, M), cols = most_cols(g, &s, N);
#pragma omp parallel num_threads(s.nt)
    {
        const int t = omp_get_thread_num();
        int r0, r1, c0, c1;
        thread_block(g, &s, t, M, N, &r0, &r1, &c0, &c1);
        if (r0 < r1 && c0 < c1) {
            gptc_prof_begin(GPTC_PROF_THREAD, "gemm.thread", -1); /* this thread's block, without the end's wait */
            gptc_team_run_start(&s.run);
            char *apack = (char *)gptc_workspace_get(&tl_apack, apack_floats(g, K, 0, rows));
            char *bpack = sb.prepacked ? NULL : (char *)gptc_workspace_get(&tl_bpack, bpack_floats(g, K, 0, cols));
            if (g->thread_begin) g->thread_begin();
            gemm_block(g, sa, sb, transA, transB, r0, r1, c0, c1, K, A, lda, B, ldb, beta, bias, C, ldc, apack, bpack,
                       g->kernel_sumsq ? tiles : NULL, s.npan);
            if (tiles && !g->kernel_sumsq) /* the block's tiles read back */
                for (int i = r0; i < r1; i += g->mr)
                    for (int j = c0; j < c1; j += g->nr)
                        tiles[(size_t)(i / g->mr) * s.npan + j / g->nr] =
                            tile_sumsq(C + (size_t)i * ldc + j, ldc, GEMM_MIN(g->mr, r1 - i), GEMM_MIN(g->nr, c1 - j));
            if (g->thread_end) g->thread_end();
            const double flops = 2.0 * (r1 - r0) * (c1 - c0) * K;
            gptc_team_run_done(&s.run, flops);
            gptc_prof_end(flops, 0);
        }
    }
    gptc_team_run_end(&s.run);
}

void gptc_gemm_blocked_in16(const gptc_gemm_isa *g, int transA, int transB, int M, int N, int K, const void *A,
                            int lda, const void *B, int ldb, int in16, float beta, const float *bias, float *C,
                            int ldc) {
    blocked_run(g, transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C, ldc, NULL);
}

double gptc_gemm_blocked_sumsq(const gptc_gemm_isa *g, int transA, int transB, int M, int N, int K, const void *A,
                               int lda, const void *B, int ldb, int in16, float beta, const float *bias, float *C,
                               int ldc) {
    if (M <= 0 || N <= 0) return 0;
    if (K <= 0) { /* no tiles: C is the beta and bias part alone */
        blocked_run(g, transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C, ldc, NULL);
        return tile_sumsq(C, ldc, M, N);
    }
    const size_t mpan = (size_t)(M + g->mr - 1) / g->mr, npan = (size_t)(N + g->nr - 1) / g->nr;
    double *tiles = (double *)gptc_workspace_get(&tl_tiles, 2 * mpan * npan);
    blocked_run(g, transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C, ldc, tiles);
    double sum = 0;
    for (size_t t = 0; t < mpan * npan; t++) sum += tiles[t];
    return sum;
}

size_t gptc_gemm_whole_b_bytes(const gptc_gemm_isa *g, int N, int K) {
    if (N <= 0 || K <= 0) return 0;
    const int last = (K - 1) / g->kc * g->kc; /* the last depth block's first depth */
    return whole_b_offset(g, N, last, K - last, 0) + round_up((size_t)N, (size_t)g->nr) * row_bytes(g, K - last);
}

/* Columns of B per unit of work of gptc_gemm_pack_whole_b (1.5 MiB of fp32 panels at a depth block of 768),
 * so the threads share even a small matrix evenly. */
#define WHOLE_B_COLS 512

void gptc_gemm_pack_whole_b(const gptc_gemm_isa *g, int transB, int N, int K, const void *B, int ldb, int b16,
                            void *out) {
    if (N <= 0 || K <= 0) return;
    const gemm_src sb = src_b(g, b16 ? GPTC_GEMM_B16 : 0, K, N);
    const int cw = (WHOLE_B_COLS + g->nr - 1) / g->nr * g->nr, nj = (N + cw - 1) / cw, nk = (K + g->kc - 1) / g->kc;
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)N * K >= ((size_t)1 << 16))
    for (int u = 0; u < nj * nk; u++) {
        const int pc = u / nj * g->kc, jc = u % nj * cw, kc = GEMM_MIN(g->kc, K - pc), nc = GEMM_MIN(cw, N - jc);
        pack_panels(g, sb, !transB, B, ldb, jc, pc, nc, kc, g->nr, (char *)out + whole_b_offset(g, N, pc, kc, jc));
    }
}

/* The blocking behind k's product when it is the blocked driver's own (no plugin put its gemm in the
 * slot: the plugin loader labels what it replaces), else NULL. */
static const gptc_gemm_isa *driver_isa(const gptc_kernels *k, int bf16) {
    const gptc_gemm_isa *g = bf16 ? k->gemm_bf16_isa : k->gemm_isa;
    const size_t slots[2] = {bf16 ? GPTC_KERNEL_SLOT(gemm_bf16) : GPTC_KERNEL_SLOT(gemm),
                             GPTC_KERNEL_SLOT(gemm_bf16_in16)};
    for (int i = 0; i < 1 + bf16; i++)
        if (k->labels && k->labels[slots[i]]) return NULL;
    return g;
}

size_t gptc_gemm_packed_bytes(const gptc_kernels *k, int bf16, int N, int K) {
    const gptc_gemm_isa *g = driver_isa(k, bf16);
    return g ? gptc_gemm_whole_b_bytes(g, N, K) : 0;
}

void gptc_gemm_pack_b(const gptc_kernels *k, int bf16, int transB, int N, int K, const void *B, int ldb, int b16,
                      void *out) {
    const gptc_gemm_isa *g = driver_isa(k, bf16);
    GPTC_ASSERT(g && (bf16 || !b16));
    gptc_gemm_pack_whole_b(g, transB, N, K, B, ldb, b16, out);
}

void gptc_gemm_packed(const gptc_kernels *k, int bf16, int transA, int M, int N, int K, const void *A, int lda,
                      int a16, const void *Bp, float beta, const float *bias, float *C, int ldc) {
    const gptc_gemm_isa *g = driver_isa(k, bf16);
    GPTC_ASSERT(g && (bf16 || !a16));
    gptc_gemm_blocked_in16(g, transA, 0, M, N, K, A, lda, Bp, 0, (a16 ? GPTC_GEMM_A16 : 0) | GPTC_GEMM_B_PACKED, beta,
                           bias, C, ldc);
}

bool gptc_gemm_sumsq(const gptc_kernels *k, int bf16, int transA, int transB, int M, int N, int K, const void *A,
                     int lda, const void *B, int ldb, int in16, float beta, const float *bias, float *C, int ldc,
                     double *sumsq) {
    const gptc_gemm_isa *g = driver_isa(k, bf16);
    if (!g || (in16 & (GPTC_GEMM_B_PACKED | GPTC_GEMM_B_PANELS))) return false;
    GPTC_ASSERT(bf16 || !in16);
    *sumsq = gptc_gemm_blocked_sumsq(g, transA, transB, M, N, K, A, lda, B, ldb, in16, beta, bias, C, ldc);
    return true;
}

void gptc_gemm_reserve(const gptc_kernels *k, int bf16, int M, int N, int K, int in16) {
    const gptc_gemm_isa *g = driver_isa(k, bf16);
    if (!g || M <= 0 || N <= 0 || K <= 0) return;
    const gemm_src sb = src_b(g, in16, K, N);
    /* a thread's block is at most M rows and N columns, whatever the split */
    const size_t a = apack_floats(g, K, 0, M), b = bpack_floats(g, K, 0, N);
#pragma omp parallel
    {
        gptc_workspace_get(&tl_apack, a);
        if (!sb.prepacked) gptc_workspace_get(&tl_bpack, b);
        if (sb.panels && sb.x16) gptc_workspace_get(&tl_rows16, rows16_floats(GEMM_MIN(g->kc, K)));
    }
}

void gptc_gemm_scratch(const gptc_kernels *k, int bf16, int M, int N, int K, int threads, size_t *apack,
                       size_t *bpack, size_t *transient) {
    for (int t = 0; t < threads; t++) apack[t] = bpack[t] = 0;
    *transient = 0;
    if (M <= 0 || N <= 0) return;
    /* the reference bf16 products round (or widen) copies of both operands, then run the reference fp32 one */
    if (bf16 && (k->gemm_bf16 == gptc_kernels_ref()->gemm_bf16 || k->gemm_bf16_in16 == gptc_kernels_ref()->gemm_bf16_in16)) {
        *transient = gptc_alloc_block_bytes(sizeof(float) * (size_t)M * K) +
                     gptc_alloc_block_bytes(sizeof(float) * (size_t)K * N);
        return;
    }
    const gptc_gemm_isa *g = bf16 ? k->gemm_bf16_isa : k->gemm_isa;
    if (!g || K <= 0) return;
    const gemm_split s = split_for(g, M, N, K, threads);
    const int rows = most_rows(g, &s, M), cols = most_cols(g, &s, N);
    for (int t = 0; t < s.nt; t++) { /* any thread may get the largest block (blocked_run) */
        apack[t] = gptc_alloc_block_bytes(sizeof(float) * apack_floats(g, K, 0, rows));
        bpack[t] = gptc_alloc_block_bytes(sizeof(float) * bpack_floats(g, K, 0, cols));
    }
}
