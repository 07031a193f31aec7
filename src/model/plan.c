/* plan.c — the memory planner (see plan.h). Every figure comes from the code that allocates it: the
 * model's arenas from layout.c's planning, the kernel scratch from the kernels layer
 * (gptc_gemm_scratch, the table's flash_scratch entries), so the plan cannot drift from the allocations. */
#include "model/plan.h"
#include "optim/optimizer.h"
#include "dist/dist.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void gptc_mem_request_default(gptc_mem_request *r) {
    memset(r, 0, sizeof *r);
    r->ranks = 1;
}

/* The per-thread GEMM scratch so far: a thread's buffers end at the largest request it made. */
typedef struct gemm_scratch {
    const gptc_kernels *k;
    int bf16, threads;
    size_t *a, *b, *ta, *tb; /* [threads]: running maxima, and one call's figures */
    size_t transient;        /* the largest per-call transient */
} gemm_scratch;

static int clamp_int(size_t x) { return x > INT_MAX ? INT_MAX : (int)x; }

static void add_gemm(gemm_scratch *g, size_t M, size_t N, size_t K) {
    size_t tr;
    gptc_gemm_scratch(g->k, g->bf16, clamp_int(M), clamp_int(N), clamp_int(K), g->threads, g->ta, g->tb, &tr);
    for (int t = 0; t < g->threads; t++) {
        if (g->ta[t] > g->a[t]) g->a[t] = g->ta[t];
        if (g->tb[t] > g->b[t]) g->b[t] = g->tb[t];
    }
    if (tr > g->transient) g->transient = tr;
}

/* The matrix products of one training step (forward.c) and of an evaluation forward. */
static void step_gemms(gemm_scratch *g, const gptc_mem_request *r) {
    size_t C = r->model.channels, V = r->model.vocab, BT = (size_t)r->batch * r->seq;
    const size_t lin[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}}; /* (in, out) of each linear layer */
    for (int i = 0; i < 4; i++) {
        size_t IC = lin[i][0], OC = lin[i][1];
        add_gemm(g, BT, OC, IC); /* forward */
        add_gemm(g, BT, IC, OC); /* input gradient */
        add_gemm(g, IC, OC, BT); /* weight gradient */
    }
    if (r->lora > 0) /* the adapters' products (forward.c lora_forward, lora_backward) */
        for (int i = 0; i < 4; i++) {
            size_t IC = lin[i][0], OC = lin[i][1], R = (size_t)r->lora;
            add_gemm(g, BT, R, IC);
            add_gemm(g, BT, OC, R);
            add_gemm(g, OC, R, BT);
            add_gemm(g, BT, R, OC);
            add_gemm(g, R, IC, BT);
            add_gemm(g, BT, IC, R);
        }
    /* the classifier: whole when unfused, else in chunks of GPTC_CLASSIFIER_CHUNK rows and a ragged one */
    size_t rows[2] = {BT, 0};
    if (!r->no_fusion) rows[0] = BT < GPTC_CLASSIFIER_CHUNK ? BT : GPTC_CLASSIFIER_CHUNK, rows[1] = BT % GPTC_CLASSIFIER_CHUNK;
    for (int i = 0; i < 2; i++) {
        if (!rows[i]) continue;
        add_gemm(g, rows[i], V, C); /* logits */
        add_gemm(g, rows[i], C, V); /* dlnf */
        add_gemm(g, V, C, rows[i]); /* wte's gradient */
    }
}

/* The bytes of a run in doubles, roughly (every arena term counted, generously): the exact figures
 * below are size_t sums that would wrap around 64 bits for a run of exabytes and plan it as small. */
static double plan_estimate(const gptc_mem_request *r) {
    double L = r->model.layers, C = r->model.channels, NH = r->model.heads, Tc = r->model.context;
    double V = gptc_padded_vocab(r->model.vocab), BT = (double)r->batch * r->seq;
    double TT = r->naive_attention ? (double)r->batch * NH * r->seq * r->seq : 0;
    double params = V * C + Tc * C + L * (12 * C * C + 13 * C) + 2 * C;
    double acts = BT * C * (30 * L + 10) + BT * (8 + NH) * (L + 1) + 2 * BT * V + 2 * TT * (L + 1);
    return 4.0 * (4 * params + acts);
}

/* The trainable set of a request, as gptc_model_alloc_train builds it (model/layout.c, trainable.c, lora.c). */
typedef struct trainable {
    bool part;             /* freeze or lora: not the whole model */
    gptc_tensor_desc *t;   /* [n] its table (malloc'd; the caller frees) */
    int n;
    size_t floats;         /* its compact arena */
    size_t host, grads, acts; /* bytes beyond the whole model's: host tables and adapters (params), the compact
                               * gradients with the frozen LayerNorm scratch, LoRA's activations */
} trainable;

static gptc_status plan_trainable(const gptc_mem_request *r, trainable *ts) {
    memset(ts, 0, sizeof *ts);
    const gptc_backend_memory *mem = gptc_backend_cpu_memory();
    int nt = gptc_model_tensor_table(&r->model, NULL);
    gptc_tensor_desc *all = malloc(sizeof *all * (size_t)nt);
    gptc_model m = {.tensors = all, .ntensors = nt}; /* for gptc_model_freeze's matching, on the table alone */
    gptc_status st = GPTC_OK;
    if (!all) {
        st = gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        goto done;
    }
    gptc_model_tensor_table(&r->model, all);
    size_t C = r->model.channels, BT = (size_t)r->batch * r->seq;
    if (r->lora > 0) {
        unsigned targets;
        if ((st = gptc_lora_targets_parse(r->lora_targets, &targets))) goto done;
        ts->part = true;
        ts->n = gptc_lora_table(&r->model, r->lora, targets, NULL, &ts->floats);
        if (!(ts->t = malloc(sizeof *ts->t * (size_t)(ts->n ? ts->n : 1)))) {
            st = gptc_fail(GPTC_ERR_NOMEM, "out of memory");
            goto done;
        }
        gptc_lora_table(&r->model, r->lora, targets, ts->t, NULL);
        size_t values;
        gptc_lora_bytes(&r->model, r->lora, targets, &ts->host, &values);
        ts->host += values;
        ts->grads = mem->block_bytes(ts->floats * sizeof(float)) + mem->block_bytes(2 * C * sizeof(float));
        ts->acts = mem->block_bytes(sizeof(float) * (size_t)r->model.layers * GPTC_LORA_SITES * BT * (size_t)r->lora) +
                   mem->block_bytes(sizeof(float) * BT * (size_t)r->lora);
    } else if (r->freeze && *r->freeze) {
        int nfrozen;
        if ((st = gptc_model_freeze(&m, r->freeze, &nfrozen))) goto done;
        ts->part = true;
        ts->n = gptc_model_trainable_table(all, nt, m.frozen, NULL, &ts->floats);
        if (!(ts->t = malloc(sizeof *ts->t * (size_t)ts->n))) {
            st = gptc_fail(GPTC_ERR_NOMEM, "out of memory");
            goto done;
        }
        gptc_model_trainable_table(all, nt, m.frozen, ts->t, NULL);
        ts->host = gptc_alloc_block_bytes(sizeof(bool) * (size_t)nt) + gptc_alloc_block_bytes(sizeof(gptc_tensor_desc) * (size_t)ts->n);
        ts->grads = mem->block_bytes(ts->floats * sizeof(float)) + mem->block_bytes(2 * C * sizeof(float));
    } else {
        ts->n = nt;
        ts->t = all;
        all = NULL;
        ts->floats = gptc_model_arena_floats(&r->model);
    }
done:
    free(all);
    gptc_free(m.frozen);
    return st;
}

gptc_status gptc_mem_plan_make(const gptc_mem_request *r, gptc_mem_plan *out) {
    memset(out, 0, sizeof *out);
    gptc_status st = gptc_model_config_check(&r->model);
    if (st) return st;
    if (r->batch < 1) return gptc_fail(GPTC_ERR_ARG, "'batch' %d: must be at least 1", r->batch);
    if (r->seq < 1 || r->seq > r->model.context)
        return gptc_fail(GPTC_ERR_ARG, "'seq' %d: must be between 1 and the model's context %d", r->seq, r->model.context);
    if (r->ranks < 1) return gptc_fail(GPTC_ERR_ARG, "'ranks' %d: must be at least 1", r->ranks);
    if (r->zero != 0 && r->zero != 1) return gptc_fail(GPTC_ERR_ARG, "'zero' %d: must be 0 or 1", r->zero);
    if (r->threads < 0) return gptc_fail(GPTC_ERR_ARG, "'threads' %d: must be 0 (all cores) or more", r->threads);
    if ((unsigned)r->dtype > GPTC_PRECISION_BF16) return gptc_fail(GPTC_ERR_ARG, "'dtype': must be fp32 or bf16");
    if ((unsigned)r->recompute > GPTC_RECOMPUTE_BLOCK)
        return gptc_fail(GPTC_ERR_ARG, "'recompute': must be none, gelu, attn or block");
    double estimate = plan_estimate(r);
    if (estimate > 0x1p61) /* a factor 8 short of wrapping, so the exact sums below cannot */
        return gptc_fail(GPTC_ERR_ARG,
                         "'batch' %d 'seq' %d: this run needs about %.3g EiB (%.3g bytes), beyond any machine; use a "
                         "smaller model, 'batch' or 'seq'",
                         r->batch, r->seq, estimate / 0x1p60, estimate);
    int threads = r->threads ? r->threads : gptc_threads();

    gptc_model_bytes mb;
    gptc_model_alloc_bytes(&r->model, r->batch, r->seq, r->naive_attention, !r->no_fusion, r->recompute, r->dtype,
                           &mb);
    size_t n = gptc_model_arena_floats(&r->model);
    size_t share = r->zero ? (n + (size_t)r->ranks - 1) / (size_t)r->ranks : n;
    gptc_ostate_type otype = GPTC_OSTATE_FP32;
    if (r->optim_state && !gptc_ostate_parse(r->optim_state, &otype))
        return gptc_fail(GPTC_ERR_ARG, "'optim_state' %s: unknown (expected one of " GPTC_OSTATE_NAMES ")", r->optim_state);
    size_t batch_copy = gptc_alloc_block_bytes(sizeof(int) * (size_t)r->batch * r->seq);

    size_t *buf = calloc(4 * (size_t)threads, sizeof(size_t));
    if (!buf) return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
    const gptc_kernels *k = gptc_backend_default()->k;
    gemm_scratch g = {.k = k, .bf16 = r->dtype == GPTC_PRECISION_BF16, .threads = threads,
                      .a = buf, .b = buf + threads, .ta = buf + 2 * threads, .tb = buf + 3 * threads};
    step_gemms(&g, r);
    size_t work = g.transient;
    int HS = r->model.channels / r->model.heads;
    size_t flash = r->naive_attention ? 0
                   : r->dtype == GPTC_PRECISION_BF16 ? k->flash_scratch_bf16(r->seq, HS)
                                                     : k->flash_scratch(r->seq, HS);
    for (int t = 0; t < threads; t++) work += g.a[t] + g.b[t] + flash;
    free(buf);

    const gptc_optimizer_kind *opt = r->optimizer ? gptc_optimizer_find(r->optimizer) : gptc_optimizers[0];
    if (!opt) return gptc_fail(GPTC_ERR_ARG, "'optimizer' %s: unknown (expected one of %s)", r->optimizer, gptc_optimizer_names());
    /* the trainable set (gpt2.h gptc_pset): the whole arena, what 'freeze' leaves, or LoRA's adapters */
    trainable ts;
    if ((st = plan_trainable(r, &ts))) return st;
    n = ts.floats;
    share = r->zero ? (n + (size_t)r->ranks - 1) / (size_t)r->ranks : n;
    if (otype == GPTC_OSTATE_FP32) {
        out->optim = gptc_optimizer_state_bytes(opt, share);
    } else { /* the trainer's bounds and allocation (trainer_open.c): each rank its own shard; the largest */
        int nt = ts.n, ranks = r->zero ? r->ranks : 1;
        gptc_tensor_desc *td = ts.t;
        size_t *bounds = malloc(sizeof(size_t) * ((size_t)ranks + 1));
        if (!bounds) {
            free(td);
            return gptc_fail(GPTC_ERR_NOMEM, "out of memory");
        }
        ts.t = NULL;
        gptc_dist_shards(n, ranks, bounds);
        share = gptc_ostate_snap_bounds(td, nt, otype, ranks, bounds);
        out->optim = 0;
        for (int q = 0; q < ranks; q++) {
            size_t blocks = gptc_ostate_block_of(td, nt, bounds[q + 1]) - gptc_ostate_block_of(td, nt, bounds[q]);
            size_t b = gptc_ostate_bytes(opt, otype, bounds[q + 1] - bounds[q], blocks);
            out->optim = b > out->optim ? b : out->optim;
        }
        free(td);
        free(bounds);
    }
    free(ts.t);
    out->params = mb.params + ts.host;
    out->weights16 = mb.weights16;
    /* ZeRO-1 on many ranks also receives its shard of the reduced gradients (src/dist/dist.h) */
    out->grads = mb.grads + (r->zero && r->ranks > 1 ? gptc_alloc_block_bytes(share * sizeof(float)) : 0);
    /* --fused-update: the compact arena (the embeddings', one layer slot, ln_f's) instead of the whole one */
    if (r->fused_update)
        out->grads = gptc_backend_cpu_memory()->block_bytes(gptc_model_fused_grad_floats(&r->model) * sizeof(float));
    if (ts.part) out->grads = ts.grads + (r->zero && r->ranks > 1 ? gptc_alloc_block_bytes(share * sizeof(float)) : 0);
    out->acts = mb.acts + 2 * batch_copy + ts.acts; /* the trainer's own (B,T) inputs and targets */
    out->workspace = work;
    size_t packed = r->pack_weights ? gptc_model_packed_bytes(k, &r->model, r->dtype == GPTC_PRECISION_BF16) : 0;
    out->packed = packed ? gptc_alloc_block_bytes(packed) + gptc_model_packed_table_bytes(&r->model) : 0;
    out->total = out->params + out->weights16 + out->grads + out->optim + out->acts + out->packed + out->workspace;
    out->threads = threads;
    return GPTC_OK;
}
