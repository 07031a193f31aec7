/* test_mpi.c — data-parallel training under mpirun: `mpirun -np 2` of the gptc binary on the tiny
 * model and tiny Shakespeare, 10 steps, against one plain process with twice the batch:
 *   - 2 ranks x B give 1 rank x 2B's per-step losses (relative LOSS_TOL) and final weights (WEIGHT_TOL,
 *     all but the attention's key biases, whose gradient is pure rounding noise: see weights_err), with gradient buckets of 0.05 MB (several buckets), one allreduce per tensor
 *     (--bucket-mb 0), and ZeRO-1 with both; one case also accumulates two micro-steps per rank;
 *   - ZeRO-1 halves the AdamW moments each rank allocates (as the run reports them);
 *   - a checkpoint written by 2 ranks (ZeRO-1) resumes on 1, and one written by 1 resumes on 2
 *     (ZeRO-1), each continuing to the uninterrupted run's losses and weights;
 *   - --fused-update (and with ZeRO-1) on 2 ranks equals 1 rank x 2B too, and the ordinary 2 ranks bit for bit;
 *   - --optim-state int8 under ZeRO-1 (bounds snapped to the 2048-value blocks) resumes across rank
 *     counts, its state within a few flipped codes of the one-process run's;
 *   - a bad token id that only rank 1 reads stops the whole job, non-zero, with rank 1's message.
 * Skipped (with a SKIP line) when the binary was built without MPI or mpirun is missing. */
#include "test.h"
#include "data/data.h"
#include "dist/dist.h"
#include "io/io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define STEPS 10
#define LOSS_TOL 1e-5   /* |loss_2ranks - loss_1rank| / loss_1rank, every step */
#define WEIGHT_TOL 1e-4 /* weights_err of the final weights */
#define KBIAS_TOL 1e-4  /* the key biases (see weights_err), absolute */

/* Root may run mpirun only when told to; --oversubscribe lets 2 ranks share fewer cores; shared
 * memory (vader, without the cross-process copy a container may forbid) carries the messages between
 * ranks of one host; ob1 avoids probing for UCX; a job that hangs is killed after 120 s. */
#define MPIRUN                                                                                     \
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun -np 2 --oversubscribe " \
    "--bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none --mca pml ob1 "

/* Whether the mpirun cases can run; prints the reason they are skipped when not. */
static bool have_mpi(void) {
    if (!gptc_dist_has_mpi()) {
        printf("    SKIP: gptc was built without MPI (mpicc not found, or make MPI=0)\n");
        return false;
    }
    if (test_run("command -v mpirun", NULL) != 0) {
        printf("    SKIP: mpirun not found (tools/setup.sh installs openmpi-bin)\n");
        return false;
    }
    return true;
}

/* `gptc train` of the tiny model on np ranks (1: a plain process) with micro-batch `batch`, into
 * checkpoint folder ck (resuming from it), each step's loss into losses; extra flags appended.
 * Returns the exit status; the output goes to *out (may be NULL). */
static int train(int np, int batch, int steps, const char *ck, const char *losses, const char *extra, char **out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "%s%s train --model tiny --data %s --batch %d --seq 32 --steps %d --warmup 2 --lr 2e-3 --lr-floor 1 "
             "--threads 1 --eval-batches 1 --quiet --ckpt %s --log-losses %s %s",
             np > 1 ? MPIRUN : "", test_gptc_bin(), test_shakespeare_data(), batch, steps, ck, losses, extra);
    return test_run(cmd, out);
}

/* Reads a --log-losses file into loss[step] (steps 1..STEPS; NAN where absent). */
static void read_losses(const char *path, double *loss) {
    for (int i = 0; i <= STEPS; i++) loss[i] = NAN;
    FILE *f = fopen(path, "r");
    CHECK_MSG(f, "no losses file %s", path);
    if (!f) return;
    int step;
    double l, norm, lr;
    while (fscanf(f, "%d %lf %lf %lf", &step, &l, &norm, &lr) == 4)
        if (step >= 1 && step <= STEPS) loss[step] = l;
    fclose(f);
}

/* The largest relative loss difference over steps [from, STEPS]; NaN when a step is missing. */
static double losses_err(const double *a, const double *b, int from) {
    double worst = 0;
    for (int s = from; s <= STEPS; s++) {
        double e = fabs(a[s] - b[s]) / fabs(b[s]);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

/* The largest, over the tensors, of max |a - b| / max(max |b|, 0.01) between the final tensors in `file`
 * (the weights, or LoRA's adapters) of two checkpoint folders (the floor keeps tensors that start at zero, the biases, from dividing
 * by their own tiny size); NaN when a tensor is missing. One slice is left out and measured on its
 * own, absolute, into *kbias: the key third of attn.c_attn.bias. Its true gradient is zero (a key
 * bias adds the same score to a whole softmax row), so what the backward computes there is
 * rounding noise, which AdamW divides by its own size (plus eps): those weights move by steps the
 * noise sets, and any change of summation order (B vs 2B rows) changes them. Small here (a few
 * 1e-6 after 10 steps) but relative to nothing, they get an absolute bound. */
static char g_worst[64]; /* the tensor of the last weights_err's largest difference */
static double file_err(const char *ck_a, const char *ck_b, const char *file, double *kbias) {
    char pa[1024], pb[1024];
    snprintf(pa, sizeof pa, "%s/step-%08d/%s", ck_a, STEPS, file);
    snprintf(pb, sizeof pb, "%s/step-%08d/%s", ck_b, STEPS, file);
    gptc_st_file a = {0}, b = {0};
    CHECK_OK(gptc_st_open(&a, pa));
    CHECK_OK(gptc_st_open(&b, pb));
    double worst = a.ntensors > 0 ? 0 : NAN;
    *kbias = 0;
    for (int i = 0; i < a.ntensors; i++) {
        const gptc_st_tensor *x = &a.tensors[i], *y = gptc_st_find(&b, x->name);
        if (!y || y->numel != x->numel || x->dtype != GPTC_F32) {
            worst = NAN;
            break;
        }
        const float *u = x->data, *v = y->data;
        size_t n = x->numel, k0 = n, k1 = n; /* the key slice [k0, k1), if any */
        if (strstr(x->name, "attn.c_attn.bias")) k0 = n / 3, k1 = 2 * n / 3;
        double diff = 0, ref = 0.01;
        for (size_t j = 0; j < n; j++) {
            double d = fabs((double)u[j] - v[j]);
            if (j >= k0 && j < k1) *kbias = fmax(*kbias, d);
            else diff = fmax(diff, d);
            ref = fmax(ref, fabs((double)v[j]));
        }
        if (!(diff / ref <= worst)) {
            worst = diff / ref;
            snprintf(g_worst, sizeof g_worst, "%s", x->name);
        }
    }
    gptc_st_close(&a);
    gptc_st_close(&b);
    return worst;
}
/* file_err of the weights (model.safetensors) */
static double weights_err(const char *ck_a, const char *ck_b, double *kbias) {
    return file_err(ck_a, ck_b, "model.safetensors", kbias);
}

/* The reference: one process, micro-batch 4, 10 steps (made once). */
static const char *reference(double *loss) {
    static char ck[600], losses[700];
    if (!ck[0]) {
        snprintf(ck, sizeof ck, "%s/mpi-ref", test_tmpdir());
        snprintf(losses, sizeof losses, "%s/mpi-ref.losses", test_tmpdir());
        char *out = NULL;
        int rc = train(1, 4, STEPS, ck, losses, "", &out);
        CHECK_MSG(rc == 0, "reference run failed: %s", out);
        free(out);
    }
    read_losses(losses, loss);
    return ck;
}

TEST(mpi_two_ranks_match_one_rank_double_batch) {
    if (!have_mpi()) return;
    double ref[STEPS + 1], got[STEPS + 1];
    const char *ref_ck = reference(ref);
    static const struct { const char *name, *flags; int batch, per_tensor; } cases[] = {
        {"bucketed", "--bucket-mb 0.05", 2, 0},
        {"per-tensor", "--bucket-mb 0", 2, 1},
        {"zero1-bucketed", "--bucket-mb 0.05 --zero 1", 2, 0},
        /* micro-batch 1, two micro-steps per update: only the last one exchanges gradients */
        {"zero1-per-tensor-accum", "--bucket-mb 0 --zero 1 --total-batch 128", 1, 1},
    };
    double moments_mib[2] = {0, 0}; /* [zero] */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char ck[600], losses[700], *out = NULL;
        snprintf(ck, sizeof ck, "%s/mpi-%s", test_tmpdir(), cases[i].name);
        snprintf(losses, sizeof losses, "%s.losses", ck);
        int rc = train(2, cases[i].batch, STEPS, ck, losses, cases[i].flags, &out);
        CHECK_MSG(rc == 0, "%s: exit %d: %s", cases[i].name, rc, out);
        CHECK_MSG(out && strstr(out, "comm: 2 ranks"), "%s: no comm summary in: %s", cases[i].name, out);
        read_losses(losses, got);
        double kb, le = losses_err(got, ref, 1), we = weights_err(ck, ref_ck, &kb);
        const char *comm = out ? strstr(out, "comm: ") : NULL;
        printf("    %-22s max loss rel diff %.2e, max weight diff %.2e (%s), key bias %.1e | %.*s\n", cases[i].name, le,
               we, g_worst, kb, comm ? (int)strcspn(comm, "\n") : 0, comm ? comm : "");
        CHECK_MSG(kb <= KBIAS_TOL, "%s: key biases differ by %g", cases[i].name, kb);
        /* the tiny model has 28 tensors: one exchange each at --bucket-mb 0, fewer (and more than one) in buckets */
        double calls = 0;
        CHECK(comm && sscanf(comm, "comm: 2 ranks, %lf", &calls) == 1);
        if (cases[i].per_tensor) CHECK_MSG(calls == 28, "%s: %g exchanges per step", cases[i].name, calls);
        else CHECK_MSG(calls > 1 && calls < 28, "%s: %g exchanges per step", cases[i].name, calls);
        CHECK_MSG(le <= LOSS_TOL, "%s: losses differ by %g (relative)", cases[i].name, le);
        CHECK_MSG(we <= WEIGHT_TOL, "%s: weights differ by %g", cases[i].name, we);
        /* ZeRO-1 halves the moments each rank allocates (to 64-byte rounding) */
        const char *mem = out ? strstr(out, "memory: optimizer state ") : NULL;
        double mib = 0;
        CHECK(mem && sscanf(mem, "memory: optimizer state %lf", &mib) == 1);
        moments_mib[strstr(cases[i].flags, "--zero 1") != NULL] = mib;
        free(out);
    }
    printf("    AdamW moments per rank: %.3f MiB replicated, %.3f MiB with ZeRO-1\n", moments_mib[0], moments_mib[1]);
    CHECK_MSG(fabs(moments_mib[1] - moments_mib[0] / 2) <= 0.01 * moments_mib[0], "ZeRO-1 moments %g MiB, replicated %g MiB",
              moments_mib[1], moments_mib[0]);
}

/* --fused-update on 2 ranks (each layer's slot all-reduced in both backward passes; with ZeRO-1 each rank
 * updates its shard's part of every layer) equals 1 rank with twice the batch, as the ordinary exchange
 * does; without ZeRO-1 it gives the ordinary 2-rank run's bits (the same sums of the same gradients). */
/* Whether the optimizer states of two runs' last checkpoints hold the same bytes (same tensors, same dtypes). */
static bool same_optim_state(const char *ck_a, const char *ck_b) {
    char pa[1024], pb[1024];
    snprintf(pa, sizeof pa, "%s/step-%08d/optim.safetensors", ck_a, STEPS);
    snprintf(pb, sizeof pb, "%s/step-%08d/optim.safetensors", ck_b, STEPS);
    gptc_st_file a = {0}, b = {0};
    CHECK_OK(gptc_st_open(&a, pa));
    CHECK_OK(gptc_st_open(&b, pb));
    bool same = a.ntensors > 0 && a.ntensors == b.ntensors;
    for (int i = 0; same && i < a.ntensors; i++) {
        const gptc_st_tensor *x = &a.tensors[i], *y = gptc_st_find(&b, x->name);
        same = y && y->dtype == x->dtype && y->nbytes == x->nbytes && memcmp(x->data, y->data, x->nbytes) == 0;
        if (!same) printf("    optimizer state %s differs\n", x->name);
    }
    gptc_st_close(&a);
    gptc_st_close(&b);
    return same;
}

TEST(mpi_fused_update_matches_one_rank_double_batch) {
    if (!have_mpi()) return;
    double ref[STEPS + 1], got[STEPS + 1], plain[STEPS + 1];
    const char *ref_ck = reference(ref);
    char plain_ck[600], plain_losses[700], *out = NULL;
    snprintf(plain_ck, sizeof plain_ck, "%s/mpi-fused-plain", test_tmpdir());
    snprintf(plain_losses, sizeof plain_losses, "%s.losses", plain_ck);
    int rc = train(2, 2, STEPS, plain_ck, plain_losses, "", &out);
    CHECK_MSG(rc == 0, "ordinary 2-rank run: exit %d: %s", rc, out);
    free(out);
    read_losses(plain_losses, plain);
    static const struct { const char *name, *flags; } cases[] = {
        {"fused", "--fused-update"},
        {"fused-zero1", "--fused-update --zero 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char ck[600], losses[700];
        out = NULL;
        snprintf(ck, sizeof ck, "%s/mpi-%s", test_tmpdir(), cases[i].name);
        snprintf(losses, sizeof losses, "%s.losses", ck);
        rc = train(2, 2, STEPS, ck, losses, cases[i].flags, &out);
        CHECK_MSG(rc == 0, "%s: exit %d: %s", cases[i].name, rc, out);
        read_losses(losses, got);
        double kb, le = losses_err(got, ref, 1), we = weights_err(ck, ref_ck, &kb);
        printf("    %-12s max loss rel diff %.2e, max weight diff %.2e (%s), key bias %.1e\n", cases[i].name, le, we,
               g_worst, kb);
        CHECK_MSG(le <= LOSS_TOL, "%s: losses differ by %g (relative)", cases[i].name, le);
        CHECK_MSG(we <= WEIGHT_TOL, "%s: weights differ by %g", cases[i].name, we);
        CHECK_MSG(kb <= KBIAS_TOL, "%s: key biases differ by %g", cases[i].name, kb);
        if (i == 0) {
            double pkb, pwe = weights_err(ck, plain_ck, &pkb);
            CHECK_MSG(pwe == 0 && pkb == 0, "fused vs ordinary on 2 ranks: weights differ by %g (key bias %g)", pwe, pkb);
            CHECK_MSG(losses_err(got, plain, 1) == 0, "fused vs ordinary on 2 ranks: losses differ");
        } else {
            /* ZeRO-1: each rank's shard of the state, gathered into the checkpoint, is the whole state of
             * the run without ZeRO (the update is elementwise) */
            char fused_ck[600];
            snprintf(fused_ck, sizeof fused_ck, "%s/mpi-fused", test_tmpdir());
            CHECK_MSG(same_optim_state(ck, fused_ck), "fused-zero1: the checkpoint's optimizer state is not the fused run's");
        }
        free(out);
    }
}

/* --lora (its compact gradients exchanged by the reducer; with ZeRO-1 the adapters sharded and all-gathered)
 * and --freeze on 2 ranks equal 1 rank with twice the batch. */
TEST(mpi_lora_and_freeze_match_one_rank_double_batch) {
    if (!have_mpi()) return;
    static const struct { const char *name, *flags; } cases[] = {
        {"lora", "--lora 4 --lora-targets attn,mlp --bucket-mb 0.01"},
        {"lora-zero1", "--lora 4 --lora-targets attn,mlp --zero 1"},
        {"freeze", "--freeze wte,wpe,h.0.* --bucket-mb 0.05"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char ck1[600], l1[700], ck2[600], l2[700], *out = NULL;
        double one[STEPS + 1], two[STEPS + 1];
        snprintf(ck1, sizeof ck1, "%s/mpi-%s-1", test_tmpdir(), cases[i].name);
        snprintf(l1, sizeof l1, "%s.losses", ck1);
        snprintf(ck2, sizeof ck2, "%s/mpi-%s-2", test_tmpdir(), cases[i].name);
        snprintf(l2, sizeof l2, "%s.losses", ck2);
        int rc = train(1, 4, STEPS, ck1, l1, cases[i].flags, &out);
        CHECK_MSG(rc == 0, "%s on 1 rank: exit %d: %s", cases[i].name, rc, out);
        free(out);
        out = NULL;
        rc = train(2, 2, STEPS, ck2, l2, cases[i].flags, &out);
        CHECK_MSG(rc == 0, "%s on 2 ranks: exit %d: %s", cases[i].name, rc, out);
        free(out);
        read_losses(l1, one);
        read_losses(l2, two);
        double kb = 0, le = losses_err(two, one, 1);
        double we = file_err(ck2, ck1, strstr(cases[i].name, "lora") ? "adapter_model.safetensors" : "model.safetensors", &kb);
        printf("    %-10s max loss rel diff %.2e, max trained-weight diff %.2e\n", cases[i].name, le, we);
        CHECK_MSG(le <= LOSS_TOL, "%s: losses differ by %g (relative)", cases[i].name, le);
        CHECK_MSG(we <= WEIGHT_TOL && kb <= KBIAS_TOL, "%s: weights differ by %g (key bias %g)", cases[i].name, we, kb);
    }
}

TEST(mpi_checkpoints_resume_across_rank_counts) {
    if (!have_mpi()) return;
    double ref[STEPS + 1], got[STEPS + 1];
    const char *ref_ck = reference(ref);
    /* 2 ranks (ZeRO-1: the moments gathered into one file) for 5 steps, then 1 rank; and the other way */
    static const struct { const char *name; int np1, b1, np2, b2; } cases[] = {
        {"2to1", 2, 2, 1, 4},
        {"1to2", 1, 4, 2, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char ck[600], losses[700], *out = NULL;
        snprintf(ck, sizeof ck, "%s/mpi-resume-%s", test_tmpdir(), cases[i].name);
        snprintf(losses, sizeof losses, "%s.losses", ck);
        int rc = train(cases[i].np1, cases[i].b1, 5, ck, losses, "--zero 1 --bucket-mb 0.05", &out);
        CHECK_MSG(rc == 0, "%s: first half: exit %d: %s", cases[i].name, rc, out);
        free(out);
        rc = train(cases[i].np2, cases[i].b2, STEPS, ck, losses, "--zero 1 --bucket-mb 0.05", &out);
        CHECK_MSG(rc == 0, "%s: second half: exit %d: %s", cases[i].name, rc, out);
        /* the micro-batch changed with the rank count: said once, by rank 0 in a job of two */
        const char *warn = cases[i].np2 > 1 ? "[rank 0] gptc: warning: resuming" : "gptc: warning: resuming";
        CHECK_MSG(out && strstr(out, warn) && !strstr(out, "[rank 1]"), "%s: no warning \"%s\" in: %s", cases[i].name,
                  warn, out);
        free(out);
        read_losses(losses, got);
        double kb, le = losses_err(got, ref, 6), we = weights_err(ck, ref_ck, &kb);
        printf("    %s: steps 6-10 max loss rel diff %.2e, final weights max diff %.2e (%s), key bias %.1e\n", cases[i].name,
               le, we, g_worst, kb);
        CHECK_MSG(kb <= KBIAS_TOL, "%s: key biases differ by %g", cases[i].name, kb);
        CHECK_MSG(le <= LOSS_TOL, "%s: resumed losses differ by %g (relative)", cases[i].name, le);
        CHECK_MSG(we <= WEIGHT_TOL, "%s: weights differ by %g", cases[i].name, we);
    }
}

/* --optim-state int8 under ZeRO-1 (shard bounds snapped to whole blocks of 2048): 2 ranks for 5 steps
 * then 1 rank to 10, and the other way, continue the one-process int8 run: the checkpoint gathered from
 * the shards holds the U8 moments and their scales, and the state is the same whatever the rank count,
 * so the losses and weights differ only by the gradient sums' order, as fp32's do, and by the codes
 * that order flips: under 0.5 % of the final state's codes differ from the one-process run's (measured:
 * ~0.1 %, mostly by one code), and a flipped first-moment code of an element with a tiny second moment moves
 * it by a fraction of a learning-rate step, hence INT8_WEIGHT_TOL (measured up to 1.2e-2). */
#define INT8_LOSS_TOL 1e-4
#define INT8_WEIGHT_TOL 3e-2

/* The share of U8 codes that differ between two checkpoints' optimizer states (1 when none compare). */
static double codes_differ(const char *ck_a, const char *ck_b) {
    char pa[1024], pb[1024];
    snprintf(pa, sizeof pa, "%s/step-%08d/optim.safetensors", ck_a, STEPS);
    snprintf(pb, sizeof pb, "%s/step-%08d/optim.safetensors", ck_b, STEPS);
    gptc_st_file a = {0}, b = {0};
    if (gptc_st_open(&a, pa) || gptc_st_open(&b, pb)) {
        gptc_st_close(&a);
        return 1;
    }
    size_t differ = 0, total = 0;
    for (int i = 0; i < a.ntensors; i++) {
        const gptc_st_tensor *x = &a.tensors[i], *y = gptc_st_find(&b, x->name);
        if (x->dtype != GPTC_U8) continue;
        if (!y || y->numel != x->numel) {
            differ = total = 0;
            break;
        }
        const unsigned char *u = x->data, *v = y->data;
        for (size_t j = 0; j < x->numel; j++) differ += u[j] != v[j];
        total += x->numel;
    }
    gptc_st_close(&a);
    gptc_st_close(&b);
    return total ? (double)differ / total : 1;
}
TEST(mpi_int8_state_zero1_resumes_across_rank_counts) {
    if (!have_mpi()) return;
    double ref[STEPS + 1], got[STEPS + 1];
    char ref_ck[600], ref_losses[700], *out = NULL;
    snprintf(ref_ck, sizeof ref_ck, "%s/mpi-int8-ref", test_tmpdir());
    snprintf(ref_losses, sizeof ref_losses, "%s.losses", ref_ck);
    int rc = train(1, 4, STEPS, ref_ck, ref_losses, "--optim-state int8", &out);
    CHECK_MSG(rc == 0, "int8 reference: exit %d: %s", rc, out);
    free(out);
    read_losses(ref_losses, ref);
    static const struct { const char *name; int np1, b1, np2, b2; } cases[] = {{"2to1", 2, 2, 1, 4}, {"1to2", 1, 4, 2, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char ck[600], losses[700], path[700];
        snprintf(ck, sizeof ck, "%s/mpi-int8-%s", test_tmpdir(), cases[i].name);
        snprintf(losses, sizeof losses, "%s.losses", ck);
        const char *flags = "--zero 1 --bucket-mb 0.05 --optim-state int8";
        rc = train(cases[i].np1, cases[i].b1, 5, ck, losses, flags, &out);
        CHECK_MSG(rc == 0, "%s: first half: exit %d: %s", cases[i].name, rc, out);
        free(out);
        snprintf(path, sizeof path, "%s/step-%08d/optim.safetensors", ck, 5);
        gptc_st_file f = {0};
        CHECK_OK(gptc_st_open(&f, path));
        const gptc_st_tensor *q = gptc_st_find(&f, "exp_avg_sq.h.0.mlp.c_fc.weight"),
                             *sc = gptc_st_find(&f, "exp_avg_sq.absmax.h.0.mlp.c_fc.weight");
        CHECK(q && q->dtype == GPTC_U8 && sc && sc->dtype == GPTC_F32 && sc->numel == (q->numel + 2047) / 2048);
        gptc_st_close(&f);
        rc = train(cases[i].np2, cases[i].b2, STEPS, ck, losses, flags, &out);
        CHECK_MSG(rc == 0, "%s: second half: exit %d: %s", cases[i].name, rc, out);
        free(out);
        read_losses(losses, got);
        double kb, le = losses_err(got, ref, 1), we = weights_err(ck, ref_ck, &kb), cd = codes_differ(ck, ref_ck);
        printf("    int8 %s: max loss rel diff %.2e, final weights max diff %.2e (%s), key bias %.1e, %.3f%% of the "
               "codes differ\n", cases[i].name, le, we, g_worst, kb, 100 * cd);
        CHECK_MSG(cd < 0.005, "%s: %.3f%% of the int8 codes differ from the one-process run's", cases[i].name, 100 * cd);
        CHECK_MSG(le <= INT8_LOSS_TOL, "%s: losses differ by %g (relative)", cases[i].name, le);
        CHECK_MSG(we <= INT8_WEIGHT_TOL, "%s: weights differ by %g", cases[i].name, we);
    }
}

TEST(mpi_bad_data_on_one_rank_stops_the_job) {
    if (!have_mpi()) return;
    /* 2 ranks, batch 1, seq 8: every id is checked before the first step, each rank its half of
     * the tokens; token 150, in rank 1's half, is out of the 256-token vocabulary */
    uint16_t tok[200];
    for (int i = 0; i < 200; i++) tok[i] = (uint16_t)(i % 50 + 32);
    tok[150] = 300;
    char shard[600], ck[600], cmd[4096], *out = NULL;
    snprintf(shard, sizeof shard, "%s/mpi-bad.bin", test_tmpdir());
    snprintf(ck, sizeof ck, "%s/mpi-bad-ck", test_tmpdir());
    CHECK_OK(gptc_shard_write(shard, tok, 200));
    snprintf(cmd, sizeof cmd,
             MPIRUN "%s train --model tiny --vocab 256 --data %s --batch 1 --seq 8 --steps 5 --sequential --threads 1 "
                    "--ckpt %s",
             test_gptc_bin(), shard, ck);
    int rc = test_run(cmd, &out);
    CHECK_MSG(rc != 0, "the job did not fail: %s", out);
    CHECK_MSG(out && strstr(out, "[rank 1] gptc: --data") && strstr(out, "mpi-bad.bin"),
              "no message from rank 1 naming the shard in: %s", out);
    free(out);
}

/* One trace for the job: rank 0 gathers every rank's spans (pid = rank), communication included. */
TEST(mpi_profile_has_every_rank_and_the_communication) {
    if (!have_mpi()) return;
    char trace[600], ck[600], losses[700], extra[800], *out = NULL;
    snprintf(trace, sizeof trace, "%s/mpi-profile.json", test_tmpdir());
    snprintf(ck, sizeof ck, "%s/mpi-profile-ck", test_tmpdir());
    snprintf(losses, sizeof losses, "%s/mpi-profile.losses", test_tmpdir());
    snprintf(extra, sizeof extra, "--profile %s --bucket-mb 0.05", trace);
    int rc = train(2, 2, 3, ck, losses, extra, &out);
    CHECK_MSG(rc == 0, "profiled 2-rank run failed: %s", out);
    free(out);
    size_t len;
    char *text = NULL;
    CHECK_OK(gptc_file_read_all(trace, &text, &len));
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK_MSG(root != NULL, "%s is not JSON", trace);
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), *e;
    int steps[2] = {0}, starts[2] = {0}, waits[2] = {0}, others = 0;
    cJSON_ArrayForEach(e, events) {
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid"), *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!cJSON_IsNumber(pid) || !cJSON_IsString(name)) continue;
        int p = pid->valueint;
        if (p < 0 || p > 1) { others++; continue; }
        steps[p] += strcmp(name->valuestring, "step") == 0;
        starts[p] += strcmp(name->valuestring, "comm.start_allreduce") == 0;
        waits[p] += strcmp(name->valuestring, "comm.wait_grads") == 0;
    }
    for (int p = 0; p < 2; p++) {
        CHECK_MSG(steps[p] == 3, "rank %d: %d step spans, want 3", p, steps[p]);
        CHECK_MSG(waits[p] == 3, "rank %d: %d comm.wait_grads spans, want 3", p, waits[p]);
        /* 0.05 MB buckets over the tiny model's gradients: several exchanges per step */
        CHECK_MSG(starts[p] >= 3 * 2 && starts[p] % 3 == 0, "rank %d: %d bucket starts over 3 steps", p, starts[p]);
    }
    CHECK_MSG(starts[0] == starts[1], "ranks started %d and %d exchanges", starts[0], starts[1]);
    CHECK_MSG(others == 0, "%d events with a pid other than 0 or 1", others);
    cJSON_Delete(root);
    gptc_free(text);
}

/* The NaN guard under 2 ranks: a gradient made not finite on rank 1 alone at step 3 (fault injection,
 * docs/faults.md) poisons the averaged gradients of both ranks, and both drop that update; the
 * losses and weights after it are those of 1 rank x 2B with the same step dropped (so neither rank
 * updated: one that had would change the averaged losses after it), and the weights of the two ranks
 * stay the same bits (the run checks that at the end); the same with --fused-update and ZeRO-1. With --bad-steps 0 --on-bad stop the job
 * stops at step 3 with rank 0 naming it. */
TEST(mpi_nonfinite_step_is_skipped_on_every_rank) {
    if (!have_mpi()) return;
    double ref[STEPS + 1], got[STEPS + 1];
    char ck1[600], l1[700], ck2[600], l2[700], *out = NULL;
    snprintf(ck1, sizeof ck1, "%s/mpi-nan-1", test_tmpdir());
    snprintf(l1, sizeof l1, "%s.losses", ck1);
    snprintf(ck2, sizeof ck2, "%s/mpi-nan-2", test_tmpdir());
    snprintf(l2, sizeof l2, "%s.losses", ck2);
    setenv("GPTC_FAULT_NONFINITE", "0:3", 1);
    int rc = train(1, 4, STEPS, ck1, l1, "--bad-steps 1 --on-bad stop", &out);
    CHECK_MSG(rc == 0 && strstr(out, "1 bad step skipped"), "1-rank run: exit %d: %s", rc, out);
    free(out);
    setenv("GPTC_FAULT_NONFINITE", "1:3", 1);
    rc = train(2, 2, STEPS, ck2, l2, "--bad-steps 1 --on-bad stop --bucket-mb 0.05", &out);
    CHECK_MSG(rc == 0 && strstr(out, "1 bad step skipped"), "2-rank run: exit %d: %s", rc, out);
    free(out);
    read_losses(l1, ref);
    read_losses(l2, got);
    double kb, le = losses_err(got, ref, 4), we = weights_err(ck2, ck1, &kb);
    printf("    step 3 dropped on both ranks: losses after it differ by %.2e (relative), weights by %.2e\n", le, we);
    CHECK_MSG(le <= LOSS_TOL, "losses after the skipped step differ by %g", le);
    CHECK_MSG(we <= WEIGHT_TOL && kb <= KBIAS_TOL, "weights differ by %g (key bias %g)", we, kb);
    /* --fused-update with ZeRO-1: the poisoned rank's gradient reaches the other through the exchange,
     * both drop the step before any layer is updated, and end where the ordinary 2-rank run does */
    char ck4[600], l4[700];
    snprintf(ck4, sizeof ck4, "%s/mpi-nan-fused", test_tmpdir());
    snprintf(l4, sizeof l4, "%s.losses", ck4);
    rc = train(2, 2, STEPS, ck4, l4, "--bad-steps 1 --on-bad stop --fused-update --zero 1", &out);
    CHECK_MSG(rc == 0 && strstr(out, "1 bad step skipped"), "2-rank --fused-update run: exit %d: %s", rc, out);
    free(out);
    read_losses(l4, got);
    le = losses_err(got, ref, 4), we = weights_err(ck4, ck1, &kb);
    CHECK_MSG(le <= LOSS_TOL, "--fused-update: losses after the skipped step differ by %g", le);
    CHECK_MSG(we <= WEIGHT_TOL && kb <= KBIAS_TOL, "--fused-update: weights differ by %g (key bias %g)", we, kb);
    /* no bad step allowed: the whole job stops at step 3, named once by rank 0 */
    char ck3[600], l3[700];
    snprintf(ck3, sizeof ck3, "%s/mpi-nan-3", test_tmpdir());
    snprintf(l3, sizeof l3, "%s.losses", ck3);
    rc = train(2, 2, STEPS, ck3, l3, "--bad-steps 0 --on-bad stop", &out);
    unsetenv("GPTC_FAULT_NONFINITE");
    CHECK_MSG(rc != 0 && out && strstr(out, "[rank 0] gptc: step 3: ") && strstr(out, "not finite"),
              "exit %d without the step named: %s", rc, out);
    free(out);
}

/* Too many bad steps in a row on one rank roll every rank back to the same checkpoint with the same
 * lowered learning rate (ZeRO-1: each rank reloads its shard of the moments): the 2-rank run with
 * rank 1's gradient NaN in steps 5-8 ends like 1 rank x 2B with the same fault, and the ranks' weights
 * agree (the run checks a CRC32C of them at the end). */
TEST(mpi_rollback_on_every_rank) {
    if (!have_mpi()) return;
    double ref[STEPS + 1], got[STEPS + 1];
    char ck1[600], l1[700], ck2[600], l2[700], *out = NULL;
    snprintf(ck1, sizeof ck1, "%s/mpi-rollback-1", test_tmpdir());
    snprintf(l1, sizeof l1, "%s.losses", ck1);
    snprintf(ck2, sizeof ck2, "%s/mpi-rollback-2", test_tmpdir());
    snprintf(l2, sizeof l2, "%s.losses", ck2);
    setenv("GPTC_FAULT_NONFINITE", "0:5-8", 1);
    int rc = train(1, 4, STEPS, ck1, l1, "--ckpt-every 3 --bad-steps 3", &out);
    CHECK_MSG(rc == 0 && strstr(out, "1 rollback"), "1-rank run: exit %d: %s", rc, out);
    free(out);
    setenv("GPTC_FAULT_NONFINITE", "1:5-8", 1);
    rc = train(2, 2, STEPS, ck2, l2, "--ckpt-every 3 --bad-steps 3 --zero 1 --bucket-mb 0.05", &out);
    unsetenv("GPTC_FAULT_NONFINITE");
    CHECK_MSG(rc == 0 && strstr(out, "1 rollback"), "2-rank run: exit %d: %s", rc, out);
    free(out);
    read_losses(l1, ref);
    read_losses(l2, got);
    double kb, le = losses_err(got, ref, 4), we = weights_err(ck2, ck1, &kb);
    printf("    rolled back on both ranks: losses after it differ by %.2e (relative), weights by %.2e\n", le, we);
    CHECK_MSG(le <= LOSS_TOL, "losses after the rollback differ by %g", le);
    CHECK_MSG(we <= WEIGHT_TOL && kb <= KBIAS_TOL, "weights differ by %g (key bias %g)", we, kb);
}

/* SIGUSR1 to mpirun (which forwards it to every rank; its SIGTERM would be followed by SIGKILL)
 * stops the job gracefully: rank 0's stop is broadcast, every rank finishes the same step, rank 0
 * writes its checkpoint, and the job exits 0. */
TEST(mpi_sigusr1_stops_every_rank_with_a_checkpoint) {
    if (!have_mpi()) return;
    char ck[600], log[700], outp[700], cmd[8192];
    snprintf(ck, sizeof ck, "%s/mpi-usr1", test_tmpdir());
    snprintf(log, sizeof log, "%s/log.jsonl", ck);
    snprintf(outp, sizeof outp, "%s.out", ck);
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 exec mpirun -np 2 --oversubscribe --bind-to none "
             "--mca btl self,vader --mca btl_vader_single_copy_mechanism none --mca pml ob1 %s train --model tiny --data %s --batch 2 --seq 32 --steps 100000 --threads 1 "
             "--eval-every 0 --ckpt-every 0 --quiet --ckpt %s >%s 2>&1",
             test_gptc_bin(), test_shakespeare_data(), ck, outp);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    /* wait for the second step in the log, then signal */
    int last = 0;
    for (int i = 0; i < 60000 && last < 2; i++) {
        FILE *f = fopen(log, "r");
        char line[4096];
        while (f && fgets(line, sizeof line, f)) {
            const char *s = strstr(line, "\"type\":\"step\",\"step\":");
            if (s) last = atoi(s + 21);
        }
        if (f) fclose(f);
        if (waitpid(pid, NULL, WNOHANG) == pid) break;
        usleep(2000);
    }
    CHECK_MSG(last >= 2, "the job did not reach step 2");
    kill(pid, SIGUSR1);
    int status = -1;
    for (int i = 0; i < 1200 && waitpid(pid, &status, WNOHANG) != pid; i++) usleep(100000);
    if (!WIFEXITED(status) && !WIFSIGNALED(status)) { /* not stopped within 120 s: end it */
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    char *out = NULL, cat[800];
    snprintf(cat, sizeof cat, "cat %s", outp);
    test_run(cat, &out);
    int stopped = 0;
    const char *s = out ? strstr(out, "stopped by SIGUSR1 after step ") : NULL;
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0 && s && sscanf(s, "stopped by SIGUSR1 after step %d", &stopped) == 1,
              "status %#x: %s", status, out);
    char step_dir[800];
    snprintf(step_dir, sizeof step_dir, "%s/step-%08d/optim.safetensors", ck, stopped);
    struct stat sb;
    CHECK_MSG(stopped >= 2 && stat(step_dir, &sb) == 0, "no checkpoint of step %d", stopped);
    free(out);
}
