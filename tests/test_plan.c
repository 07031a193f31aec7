/* test_plan.c — the memory planner against what a training setup really allocates (counted by
 * gptc_alloc_stats; cases 4 and 7 with --fused-update's compact gradient arena, 5-7 compact optimizer
 * state, 10-11 packed weights), ZeRO-1's split of the optimizer state, --fused-update's gradients, `gptc
 * plan`'s table, and `gptc train` refusing a run that cannot fit before it allocates anything big. */
#include "test.h"
#include "model/plan.h"
#include "optim/optim.h"
#include "optim/optimizer.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const gptc_model_config k_cfg = {.layers = 2, .heads = 4, .channels = 128, .context = 256, .vocab = 512};
enum { B = 4, T = 200, NCASES = 12 };

/* the settings of each measured case */
static void case_request(int c, gptc_mem_request *r) {
    gptc_mem_request_default(r);
    r->model = k_cfg;
    r->batch = B;
    r->seq = T;
    r->naive_attention = c == 1;
    r->no_fusion = c == 1 || c == 3;
    r->dtype = c >= 2 ? GPTC_PRECISION_BF16 : GPTC_PRECISION_FP32;
    const gptc_recompute rc[NCASES] = {GPTC_RECOMPUTE_NONE, GPTC_RECOMPUTE_GELU, GPTC_RECOMPUTE_BLOCK, GPTC_RECOMPUTE_ATTN,
                                       GPTC_RECOMPUTE_BLOCK, GPTC_RECOMPUTE_NONE, GPTC_RECOMPUTE_BLOCK,
                                       GPTC_RECOMPUTE_BLOCK, GPTC_RECOMPUTE_BLOCK, GPTC_RECOMPUTE_NONE,
                                       GPTC_RECOMPUTE_NONE, GPTC_RECOMPUTE_NONE};
    r->recompute = rc[c];
    r->fused_update = c == 4 || c == 7;
    /* the compact optimizer states (--optim-state): int8 (codes and a scale per block), bf16; case 7 is the
     * smallest setting, bf16 with block recompute, int8 state and the fused update */
    r->optim_state = c == 5 || c == 7 || c == 8 ? "int8" : c == 6 ? "bf16" : NULL;
    /* fine-tuning a part: LoRA r=8 on every linear layer (bf16, block recompute), and --freeze in fp32 */
    r->lora = c == 8 || c == 11 ? 8 : 0;
    r->lora_targets = r->lora ? "attn,mlp" : NULL;
    r->freeze = c == 9 ? "wte,wpe,h.0.*" : NULL;
    if (c >= 8) r->dtype = c == 8 || c == 11 ? GPTC_PRECISION_BF16 : GPTC_PRECISION_FP32;
    /* the weight matrices kept packed (--pack-weights): fp32, and bf16 LoRA */
    r->pack_weights = c >= 10;
}

/* --fused-update's per-layer update (the trainer's hook, trainer_step.c, in small) */
typedef struct { gptc_model *m; const gptc_ostate *st; const gptc_train_options *o; } fused_user;
static void fused_layer_update(void *user, size_t lo) {
    fused_user *u = user;
    gptc_model *m = u->m;
    if (lo < m->layer_lo || lo >= m->lnf_lo) return;
    gptc_optimizer_find("adamw")->update(m, u->o, m->cgrads + m->layer_lo, u->st, lo, lo + m->layer_stride, 1e-3f, 0.1f,
                                         1.0f, 1);
}

/* Runs in its own process (GPTC_TEST_PLAN_CASE set by plan_matches_allocations; a no-op otherwise):
 * the kernels' per-thread scratch is thread-local and kept for the life of a thread, so in the
 * suite's process earlier tests would already have grown it and the measured growth would be too
 * small. A fresh process starts with none. Sets up training as gptc_train does (model, gradients,
 * activations, AdamW moments, the batch), runs one training step, an AdamW update and an
 * evaluation forward, and prints the planned total and the peak bytes allocated meanwhile. */
TEST(plan_alloc_child) {
    const char *env = getenv("GPTC_TEST_PLAN_CASE");
    if (!env) return;
    gptc_mem_request r;
    case_request(atoi(env), &r);
    gptc_mem_plan p;
    CHECK_OK(gptc_mem_plan_make(&r, &p));
    size_t live0, live1, peak1;
    gptc_alloc_stats(&live0, NULL);
    gptc_alloc_reset_peak();
    gptc_model m;
    CHECK_OK(gptc_model_init(&m, &r.model));
    gptc_model_init_weights(&m, 1);
    m.naive_attention = r.naive_attention;
    m.fuse = !r.no_fusion;
    m.precision = r.dtype;
    m.recompute = r.recompute;
    m.fused_update = r.fused_update;
    int nfrozen;
    if (r.freeze) CHECK_OK(gptc_model_freeze(&m, r.freeze, &nfrozen));
    unsigned targets;
    if (r.lora) {
        CHECK_OK(gptc_lora_targets_parse(r.lora_targets, &targets));
        CHECK_OK(gptc_model_lora_attach(&m, r.lora, 16.0f, targets, 1));
    }
    CHECK_OK(gptc_model_alloc_train(&m, B, T));
    if (r.pack_weights) CHECK_OK(gptc_model_pack_weights(&m));
    gptc_ostate_type type = GPTC_OSTATE_FP32;
    if (r.optim_state) gptc_ostate_parse(r.optim_state, &type);
    const gptc_optimizer_kind *adamw = gptc_optimizer_find("adamw");
    gptc_ostate st;
    CHECK_OK(gptc_ostate_alloc(&st, adamw, type, &m, 0, m.ps.floats));
    int *in = gptc_alloc(sizeof(int) * B * T, "inputs"), *tg = gptc_alloc(sizeof(int) * B * T, "targets");
    for (int i = 0; i < B * T; i++) in[i] = (i * 7) % r.model.vocab, tg[i] = (i * 13 + 1) % r.model.vocab;
    gptc_model_zero_grad(&m);
    gptc_model_forward_backward(&m, in, tg, B, T, 1.0f);
    gptc_train_options o;
    gptc_train_options_default(&o);
    if (r.fused_update) { /* the update pass, each layer from its slot */
        fused_user u = {&m, &st, &o};
        m.grads_ready = fused_layer_update;
        m.grads_ready_user = &u;
        gptc_model_backward_layers(&m);
        m.grads_ready = NULL;
    } else {
        adamw->update(&m, &o, m.grads, &st, 0, m.ps.floats, 1e-3f, 0.1f, 1.0f, 1);
    }
    gptc_model_forward(&m, in, tg, B, T);
    gptc_alloc_stats(&live1, &peak1);
    printf("PLANCHECK planned=%zu peak=%zu live=%zu\n", p.total, peak1 - live0, live1 - live0);
    gptc_model_free(&m);
    gptc_ostate_free(&st);
    gptc_free(in), gptc_free(tg);
}

/* Each case's planned total is within 3% of the peak its setup really allocated (in a fresh process:
 * see plan_alloc_child). */
TEST(plan_matches_allocations) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    if (n <= 0) return;
    self[n] = '\0';
    for (int c = 0; c < NCASES; c++) {
        char cmd[4200], *out = NULL;
        const char *runner = getenv("GPTC_TEST_RUNNER"); /* make test-aarch64: the emulator this binary needs */
        snprintf(cmd, sizeof cmd, "GPTC_TEST_PLAN_CASE=%d %s %s plan_alloc_child", c, runner ? runner : "", self);
        CHECK_EQ_INT(test_run(cmd, &out), 0);
        const char *line = out ? strstr(out, "PLANCHECK") : NULL;
        size_t planned = 0, peak = 0, live = 0;
        CHECK_MSG(line && sscanf(line, "PLANCHECK planned=%zu peak=%zu live=%zu", &planned, &peak, &live) == 3,
                  "case %d: no result in: %s", c, out);
        double err = planned ? ((double)planned - (double)peak) / (double)planned : 1;
        gptc_mem_request r;
        case_request(c, &r);
        printf("    %s %s %s recompute %-5s state %s%s%s%s%s: planned %.2f MiB, allocated %.2f MiB at peak (%+.2f%%), %.2f MiB "
               "live\n",
               r.naive_attention ? "naive" : "flash", r.no_fusion ? "unfused" : "fused", gptc_precision_name(r.dtype),
               gptc_recompute_name(r.recompute), r.optim_state ? r.optim_state : "fp32",
               r.fused_update ? " fused-update" : "", r.lora ? " lora 8" : "", r.freeze ? " freeze" : "",
               r.pack_weights ? " packed weights" : "", planned / 1048576.0, peak / 1048576.0, 100 * err, live / 1048576.0);
        CHECK_MSG(fabs(err) <= 0.03, "case %d: planned %zu bytes, allocated %zu at peak", c, planned, peak);
        free(out);
    }
}

/* ZeRO-1 splits the AdamW moments: a share of ceil(n / ranks) floats per rank; on many ranks the
 * gradients gain one share, the rank's reduce-scattered shard. */
TEST(plan_zero_divides_optimizer_state) {
    gptc_mem_request r;
    gptc_mem_request_default(&r);
    CHECK_OK(gptc_model_preset("gpt2-xl", &r.model));
    r.batch = 1;
    r.seq = 1024;
    gptc_mem_plan one, p;
    CHECK_OK(gptc_mem_plan_make(&r, &one));
    size_t n = gptc_model_arena_floats(&r.model);
    CHECK_EQ_INT(one.optim, 2 * gptc_alloc_block_bytes(n * sizeof(float)));
    r.zero = 1;
    const int ranks[] = {1, 2, 8};
    for (int i = 0; i < 3; i++) {
        r.ranks = ranks[i];
        CHECK_OK(gptc_mem_plan_make(&r, &p));
        size_t share = (n + ranks[i] - 1) / ranks[i];
        CHECK_EQ_INT(p.optim, 2 * gptc_alloc_block_bytes(share * sizeof(float)));
        size_t shard = ranks[i] > 1 ? gptc_alloc_block_bytes(share * sizeof(float)) : 0;
        CHECK(p.params == one.params && p.grads == one.grads + shard && p.acts == one.acts && p.workspace == one.workspace);
        CHECK_EQ_INT(p.total, p.params + p.grads + p.optim + p.acts + p.workspace);
    }
    r.zero = 2;
    CHECK(gptc_mem_plan_make(&r, &p) == GPTC_ERR_ARG && strstr(gptc_last_error(), "'zero'"));
}

/* --fused-update: the gradients are the compact arena alone (the embeddings', one layer slot, ln_f's),
 * whose size is the arena less L-1 layers; the rest of the plan is unchanged. */
TEST(plan_fused_update_counts_compact_arena) {
    gptc_mem_request r;
    gptc_mem_request_default(&r);
    CHECK_OK(gptc_model_preset("gpt2-1.3b", &r.model));
    r.batch = 1;
    r.seq = 1024;
    gptc_mem_plan whole, fused;
    CHECK_OK(gptc_mem_plan_make(&r, &whole));
    r.fused_update = true;
    CHECK_OK(gptc_mem_plan_make(&r, &fused));
    size_t floats = gptc_model_fused_grad_floats(&r.model);
    CHECK_EQ_INT(fused.grads, gptc_alloc_block_bytes(floats * sizeof(float)));
    CHECK(fused.grads * 8 < whole.grads); /* wte (0.4 GB) and one of 24 layers (0.2 GB) of 4.9 GiB */
    /* the compact arena is the parameter arena less L-1 layers (a small model's, allocated) */
    gptc_model m;
    CHECK_OK(gptc_model_init(&m, &k_cfg));
    size_t layer = m.tensors[2 + GPTC_LAYER_TENSORS].offset - m.tensors[2].offset;
    CHECK_EQ_INT(gptc_model_fused_grad_floats(&k_cfg), m.num_floats - (size_t)(k_cfg.layers - 1) * layer);
    gptc_model_free(&m);
    CHECK(fused.params == whole.params && fused.optim == whole.optim && fused.acts == whole.acts &&
          fused.workspace == whole.workspace);
    printf("    gpt2-1.3b gradients: %.2f GiB whole, %.3f GiB with --fused-update\n", whole.grads / 1073741824.0,
           fused.grads / 1073741824.0);
}

TEST(plan_cli_table) {
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s plan --model gpt2-large --batch 1 --seq 1024 --dtype bf16 --recompute block --memory 24",
             test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    const char *want[] = {"parameters", "gradients", "optimizer state", "activations", "workspace", "total per rank",
                          "GiB", "fits: yes", "bf16 weights copy"};
    for (int i = 0; i < 9; i++) CHECK_MSG(out && strstr(out, want[i]), "no \"%s\" in: %s", want[i], out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s plan --model gpt2 --recompute everything", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "--recompute everything"), "got: %s", out);
    free(out);
}

/* An absurd batch is refused with the size it needs, before anything big is allocated: under a
 * 2 GiB address-space limit an allocation of the run's arenas would fail with another message. */
TEST(plan_train_refuses_oversized_run) {
    SKIP_UNDER_ASAN("ulimit -v leaves no room for ASan's shadow memory, so gptc could not even start");
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "ulimit -v 2097152; %s train --data %s --batch 1000000 --seq 128 --steps 1",
             test_gptc_bin(), test_shakespeare_data());
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "--batch 1000000") && strstr(out, "this run needs") && strstr(out, " GiB but the machine has"),
              "got: %s", out);
    CHECK_MSG(out && !strstr(out, "cannot allocate"), "got: %s", out);
    free(out);
}
