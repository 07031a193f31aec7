/* cmd_plan.c — `gptc plan`: the memory a training run would take per rank (model/plan.h), as a
 * table, and whether it fits this machine (or --memory). Allocates nothing big. */
#include "cli/commands.h"
#include "cli/options.h"
#include "core/core.h"
#include "model/plan.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct plan_cli {
    const char *model;
    int batch, seq;
    const char *dtype, *recompute, *optimizer, *optim_state, *freeze, *lora_targets;
    int ranks, zero, threads, lora;
    int naive_attention, no_fusion, fused_update, pack_weights, bytes;
    float memory_gib;
} plan_cli;

#define F(field) offsetof(plan_cli, field)
static const gptc_option g_plan_opts[] = {
    {"model", OPT_STRING, F(model), "NAME", "model preset", 0, 0},
    {"batch", OPT_INT, F(batch), "B", "sequences per micro-step", 1, 1 << 20},
    {"seq", OPT_INT, F(seq), "T", "tokens per sequence (0: the model's context)", 0, 1 << 20},
    {"dtype", OPT_STRING, F(dtype), "D", "fp32 or bf16", 0, 0},
    {"recompute", OPT_STRING, F(recompute), "LEVEL", "none, gelu, attn or block (as gptc train --recompute)", 0, 0},
    {"ranks", OPT_INT, F(ranks), "N", "data-parallel ranks", 1, 1 << 20},
    {"optimizer", OPT_STRING, F(optimizer), "NAME", "the optimizer whose state is planned (as gptc train --optimizer)", 0, 0},
    {"optim-state", OPT_STRING, F(optim_state), "fp32|bf16|int8", "how the optimizer state is stored (as gptc train --optim-state): 4, 2 or 1 byte per parameter and moment (int8 plus an fp32 scale per 2048)", 0, 0},
    {"zero", OPT_INT, F(zero), "0|1", "1: ZeRO-1, the optimizer state split over the ranks", 0, 1},
    {"threads", OPT_INT, F(threads), "N", "OpenMP threads per rank (0: all cores)", 0, 4096},
    {"naive-attention", OPT_FLAG, F(naive_attention), "", "plan for the attention that stores the T x T scores", 0, 0},
    {"no-fusion", OPT_FLAG, F(no_fusion), "", "plan for the unfused path (whole (B,T,V) logits)", 0, 0},
    {"fused-update", OPT_FLAG, F(fused_update), "", "plan for gptc train --fused-update (gradients of one layer at a time)", 0, 0},
    {"freeze", OPT_STRING, F(freeze), "PATTERNS", "plan for gptc train --freeze (gradients and optimizer state of the other tensors only)", 0, 0},
    {"lora", OPT_INT, F(lora), "R", "plan for gptc train --lora R (gradients and optimizer state of the adapters only)", 0, 65536},
    {"lora-targets", OPT_STRING, F(lora_targets), "LIST", "as gptc train --lora-targets", 0, 0},
    {"pack-weights", OPT_FLAG, F(pack_weights), "", "plan for the weight matrices kept packed (gptc train --pack-weights on, or auto where it keeps them)", 0, 0},
    {"memory", OPT_FLOAT, F(memory_gib), "GIB", "memory to fit in, GiB per rank (0: this machine's)", 0, 1e9},
    {"bytes", OPT_FLAG, F(bytes), "", "print the table in bytes, for scripts (bench/big_model.sh)", 0, 0},
};
#undef F

const gptc_command_spec gptc_cmd_plan_spec = {
    "plan", "gptc plan --model NAME --batch B --seq T [options]",
    "Prints the memory per rank a training run would take and whether it fits.",
    g_plan_opts, sizeof g_plan_opts / sizeof g_plan_opts[0], NULL, sizeof(plan_cli),
};

/* bytes as "123.4 MiB" or "12.34 GiB" (or the exact count when g_exact) */
static bool g_exact;
static const char *human(char *buf, size_t cap, size_t bytes) {
    if (g_exact) snprintf(buf, cap, "%zu", bytes);
    else if (bytes < ((size_t)1 << 30)) snprintf(buf, cap, "%.1f MiB", bytes / 1048576.0);
    else snprintf(buf, cap, "%.2f GiB", bytes / 1073741824.0);
    return buf;
}

int gptc_cmd_plan(int argc, char **argv) {
    plan_cli c = {.model = "gpt2", .batch = 1, .dtype = "fp32", .recompute = "none", .optimizer = "adamw", .optim_state = "fp32", .ranks = 1}, d = c;
    bool help;
    int npos;
    if (gptc_options_parse(&gptc_cmd_plan_spec, &c, argc, argv, NULL, NULL, &npos, &help)) {
        gptc_cli_error();
        return 2;
    }
    if (help) {
        gptc_options_help(stdout, &gptc_cmd_plan_spec, &d);
        return 0;
    }
    g_exact = c.bytes;
    gptc_mem_request r;
    gptc_mem_request_default(&r);
    if (gptc_model_preset(c.model, &r.model) || gptc_precision_from_name(c.dtype, &r.dtype) ||
        gptc_recompute_from_name(c.recompute, &r.recompute)) {
        gptc_cli_error();
        return 2;
    }
    r.batch = c.batch;
    r.seq = c.seq ? c.seq : r.model.context;
    r.ranks = c.ranks;
    r.zero = c.zero;
    r.optimizer = c.optimizer;
    r.optim_state = c.optim_state;
    r.threads = c.threads;
    r.naive_attention = c.naive_attention;
    r.no_fusion = c.no_fusion;
    r.fused_update = c.fused_update;
    r.freeze = c.freeze;
    r.lora = c.lora;
    r.lora_targets = c.lora_targets;
    r.pack_weights = c.pack_weights;
    gptc_mem_plan p;
    if (gptc_mem_plan_make(&r, &p)) {
        gptc_cli_error();
        return 2;
    }
    printf("plan: %s (%.1fM parameters), batch %d x %d, dtype %s, recompute %s, %s attention, %s, %d threads, "
           "%d rank%s, zero %d%s%s%s%s\n",
           c.model, gptc_model_num_params(&r.model) / 1e6, r.batch, r.seq, c.dtype, c.recompute,
           r.naive_attention ? "naive" : "flash", r.no_fusion ? "unfused" : "fused", p.threads, r.ranks,
           r.ranks == 1 ? "" : "s", r.zero, r.fused_update ? ", fused update" : "", c.lora ? ", LoRA" : "",
           c.freeze ? ", frozen tensors" : "", c.pack_weights ? ", packed weights" : "");
    const char *rows[] = {"parameters",  "bf16 weights copy", "gradients", "optimizer state",
                          "activations", "packed weights",    "workspace", "total per rank"};
    size_t vals[] = {p.params, p.weights16, p.grads, p.optim, p.acts, p.packed, p.workspace, p.total};
    char buf[32];
    /* what the optimizer state holds: "(adamw, int8 + scales)" */
    char what[96];
    snprintf(what, sizeof what, "  (%s, %s%s)", c.optimizer, c.optim_state,
             strcmp(c.optim_state, "int8") == 0 ? " + scales" : "");
    for (int i = 0; i < 8; i++) printf("  %-17s %12s%s\n", rows[i], human(buf, sizeof buf, vals[i]), i == 3 ? what : "");
    size_t have = c.memory_gib > 0 ? (size_t)(c.memory_gib * 1073741824.0) : gptc_machine_memory();
    if (have)
        printf("fits: %s (%s %s)\n", p.total <= have ? "yes" : "no", c.memory_gib > 0 ? "--memory" : "this machine has",
               human(buf, sizeof buf, have));
    else
        printf("fits: unknown (this machine's memory cannot be read)\n");
    return 0;
}
