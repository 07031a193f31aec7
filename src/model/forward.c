/* forward.c — the GPT-2 forward and backward passes over the kernel table.
 *
 * Two ways through the same mathematics, chosen by m->fuse before the arenas are allocated:
 * - fused (the trainer's default): each linear layer's bias is added in its GEMM's epilogue, each
 *   residual add is fused with the LayerNorm that reads it (forward and backward), and the tied
 *   classifier + softmax + cross-entropy runs in chunks of GPTC_CLASSIFIER_CHUNK rows, so the
 *   (B,T,Vp) logits are never held whole; a training step (gptc_model_forward_backward) forms each
 *   chunk's gradient while its logits are in memory;
 * - unfused (the reference path, and what a caller that wants the logits uses): separate bias,
 *   residual and LayerNorm kernels and the whole (B,T,Vp) logits kept after the forward.
 * Either way, m->recompute (gpt2.h, gptc_acts) drops activations after the forward; the backward
 * reruns the forward's code for them (recompute_layer), so every level gives the same bits.
 *
 * Every operator call is a span of the profiler (core/profile.h; nothing is recorded, and the cost
 * arguments are not evaluated, while it is off) named after the operator ("qkv.fwd", "qkv.dw.bwd",
 * ...), with its layer, its FLOPs and the bytes it moves; the passes are phase spans. An operator a
 * plugin replaced (kernels/plugin.h) is named by the table's label instead, "gelu_fwd[plugin:NAME]". */
#include "model/gpt2.h"
#include "core/profile.h"
#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "kernels/gelu.h"

#include <string.h>

/* ---- the profiler's cost model. FLOPs: a matrix product 2*M*N*K; the causal attention counts its
 * products over the causal half only (the flash backward's 5 products include its recompute of the
 * scores); elementwise operators the EW_* FLOPs per element, estimates of the arithmetic (exp, tanh
 * and sqrt as one). Bytes: each operand read once and each result written once (accumulated results
 * read and written), what the operator must move at the least: caches and the GEMM's repeated panel
 * reads make the real traffic differ. The A and B operands of a GEMM count at the element size the
 * multiply uses (2 bytes in bf16, whose kernels round fp32 arrays to bf16 while packing); everything
 * else is fp32 (the attention too, whatever the dtype). */
#define EW_LN_FWD 8     /* mean, variance, normalise, scale and shift */
#define EW_LN_BWD 14
#define EW_GELU_FWD 12
#define EW_GELU_BWD 20
#define EW_XENT 5       /* max, subtract + exp, sum, normalise (+ the gradient's scale when fused) */
#define F32 4.0

static double gemm_flops(double M, double N, double K) { return 2 * M * N * K; }

/* C (M,N) = A (M,K) B (K,N), C read too when accumulated (beta 1), with or without a bias (N) */
static double gemm_bytes(const gptc_model *m, double M, double N, double K, bool accumulate, bool bias) {
    double e = m->precision == GPTC_PRECISION_BF16 ? 2 : F32;
    return e * (M * K + K * N) + F32 * M * N * (accumulate ? 2 : 1) + (bias ? F32 * N : 0);
}

/* The span names of one linear layer: its forward and the three parts of its backward. */
typedef struct op_names {
    const char *fwd, *dx, *dw, *db;
} op_names;
static const op_names QKV = {"qkv.fwd", "qkv.dx.bwd", "qkv.dw.bwd", "qkv.db.bwd"};
static const op_names ATTPROJ = {"attn.proj.fwd", "attn.proj.dx.bwd", "attn.proj.dw.bwd", "attn.proj.db.bwd"};
static const op_names FC = {"mlp.fc.fwd", "mlp.fc.dx.bwd", "mlp.fc.dw.bwd", "mlp.fc.db.bwd"};
static const op_names FCPROJ = {"mlp.proj.fwd", "mlp.proj.dx.bwd", "mlp.proj.dw.bwd", "mlp.proj.db.bwd"};

/* out (N,OC) = inp (N,IC) @ w (IC,OC) + b (OC): fused, the bias in the GEMM's epilogue; unfused, its own pass */
static void linear_fwd(const gptc_model *m, const op_names *nm, int l, float *out, const float *inp, const float *w,
                       const float *b, int N, int IC, int OC) {
    gptc_prof_begin(GPTC_PROF_FWD, nm->fwd, l);
    m->gemm(0, 0, N, OC, IC, inp, IC, w, OC, 0.0f, m->fuse ? b : NULL, out, OC);
    if (!m->fuse) m->k->bias_fwd(out, b, N, OC);
    gptc_prof_end(gemm_flops(N, OC, IC) + (double)N * OC, gemm_bytes(m, N, OC, IC, !m->fuse, true));
}

/* dinp (N,IC) = (overwritten), dw (IC,OC) +=, db (OC) += from dout (N,OC) */
static void linear_bwd(const gptc_model *m, const op_names *nm, int l, float *dinp, float *dw, float *db,
                       const float *dout, const float *inp, const float *w, int N, int IC, int OC) {
    gptc_prof_begin(GPTC_PROF_BWD, nm->dx, l);
    m->gemm(0, 1, N, IC, OC, dout, OC, w, OC, 0.0f, NULL, dinp, IC);
    gptc_prof_end(gemm_flops(N, IC, OC), gemm_bytes(m, N, IC, OC, false, false));
    gptc_prof_begin(GPTC_PROF_BWD, nm->dw, l);
    m->gemm(1, 0, IC, OC, N, inp, IC, dout, OC, 1.0f, NULL, dw, OC);
    gptc_prof_end(gemm_flops(IC, OC, N), gemm_bytes(m, IC, OC, N, true, false));
    gptc_prof_begin(GPTC_PROF_BWD, nm->db, l);
    m->k->bias_bwd(db, dout, N, OC);
    gptc_prof_end((double)N * OC, F32 * ((double)N * OC + 2.0 * OC));
}

/* res (N,C) = a + b; out = LayerNorm(res) with w, bias; mean, rstd (N) */
static void residual_ln_fwd(const gptc_model *m, const char *name, int l, float *res, float *out, float *mean,
                            float *rstd, const float *a, const float *b, const float *w, const float *bias, int N,
                            int C) {
    gptc_prof_begin(GPTC_PROF_FWD,
                    m->fuse ? GPTC_KERNEL_SPAN(m->k, residual_layernorm_fwd, name) : GPTC_KERNEL_SPAN(m->k, layernorm_fwd, name),
                    l);
    if (m->fuse) {
        m->k->residual_layernorm_fwd(res, out, mean, rstd, a, b, w, bias, N, C);
    } else {
        m->k->residual_fwd(res, a, b, (size_t)N * C);
        m->k->layernorm_fwd(out, mean, rstd, res, w, bias, N, C);
    }
    double nc = (double)N * C;
    gptc_prof_end((EW_LN_FWD + 1) * nc, F32 * (4 * nc + 2.0 * N + 2.0 * C));
}

/* dinp (N,C) = dskip (or 0 when NULL) + LayerNorm backward of dout; dw, db (C) += */
static void ln_bwd_residual(const gptc_model *m, const char *name, int l, float *dinp, float *dw, float *db,
                            const float *dskip, const float *dout, const float *inp, const float *w, const float *mean,
                            const float *rstd, int N, int C) {
    gptc_prof_begin(GPTC_PROF_BWD,
                    m->fuse ? GPTC_KERNEL_SPAN(m->k, layernorm_bwd_residual, name) : GPTC_KERNEL_SPAN(m->k, layernorm_bwd, name),
                    l);
    if (m->fuse) {
        m->k->layernorm_bwd_residual(dinp, dw, db, dskip, dout, inp, w, mean, rstd, N, C);
    } else {
        if (!dskip) memset(dinp, 0, sizeof(float) * (size_t)N * C);
        else if (dskip != dinp) memcpy(dinp, dskip, sizeof(float) * (size_t)N * C);
        m->k->layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    }
    double nc = (double)N * C;
    gptc_prof_end(EW_LN_BWD * nc, F32 * ((dskip ? 4 : 3) * nc + 2.0 * N + 5.0 * C));
}

/* ---- dropout sites: each has its own stream of the step's seed (kernels/dropout.h) */
enum { DROP_EMBED = 0, DROP_ATTN_RES = 1, DROP_MLP_RES = 2, DROP_ATTN_PROBS = 3 };
static uint64_t drop_stream(int site, int l) { return (uint64_t)site << 32 | (uint32_t)(l + 1); }
/* the flash attention takes a seed only: one per layer, mixed from the step's seed */
static uint64_t attn_drop_seed(const gptc_model *m, int l) {
    return gptc_hash64(m->dropout_seed ^ (drop_stream(DROP_ATTN_PROBS, l) * 0x9E3779B97F4A7C15ULL));
}
/* in place on x (n): the forward's dropout at a site (nothing when m->dropout is 0) */
static void drop_fwd(const gptc_model *m, const char *name, int site, int l, float *x, size_t n) {
    if (m->dropout <= 0) return;
    gptc_prof_begin(GPTC_PROF_FWD, name, l);
    gptc_dropout_apply(x, x, n, m->dropout, m->dropout_seed, drop_stream(site, l));
    gptc_prof_end((double)n, F32 * 2.0 * n);
}
/* out (n) = the site's mask applied to the gradient dout (n); returns out, or dout itself when off */
static const float *drop_bwd(const gptc_model *m, const char *name, int site, int l, float *out, const float *dout,
                             size_t n) {
    if (m->dropout <= 0) return dout;
    gptc_prof_begin(GPTC_PROF_BWD, name, l);
    gptc_dropout_apply(out, dout, n, m->dropout, m->dropout_seed, drop_stream(site, l));
    gptc_prof_end((double)n, F32 * 2.0 * n);
    return out;
}

/* The input of block l (B,T,C): the embeddings, or the previous block's output. */
static float *block_input(const gptc_model *m, int l) { return l == 0 ? m->a.encoded : m->a.residual3[l - 1]; }

/* ln1[l] (B,T,C), its mean and rstd (B,T) from block l's input. Only layer 0's forward and the block
 * recompute call this; the forward normalises the other layers' inputs in the previous layer's
 * residual_ln_fwd. Fused, that is residual_layernorm_fwd, which every kernel level computes with the
 * same operations in the same order as residual_fwd then layernorm_fwd (kernels.h; checked per level
 * by tests/test_recompute.c), so layernorm_fwd on the stored sum gives the forward's bits. */
static void ln1_forward(gptc_model *m, int l, int BT) {
    const gptc_layer *w = &m->w.layer[l];
    int C = m->cfg.channels;
    gptc_prof_begin(GPTC_PROF_FWD, GPTC_KERNEL_SPAN(m->k, layernorm_fwd, "ln1.fwd"), l);
    m->k->layernorm_fwd(m->a.ln1[l], m->a.ln1_mean[l], m->a.ln1_rstd[l], block_input(m, l), w->ln1w, w->ln1b, BT, C);
    gptc_prof_end(EW_LN_FWD * (double)BT * C, F32 * (2.0 * BT * C + 2.0 * BT + 2.0 * C));
}

/* atty[l] (B,T,C) from qkv[l] (B,T,3C), keeping what the attention's backward reads: naive, preatt
 * and att (B,NH,T,T); flash, the head-major q, k, v, o (B,NH,T,HS) and lse (B,NH,T). */
static void attention_forward(gptc_model *m, int l, int B, int T) {
    int C = m->cfg.channels, NH = m->cfg.heads;
    gptc_acts *a = &m->a;
    double btc = (double)B * T * C, causal = (double)B * T * (T + 1) * C; /* B*NH*HS * T(T+1)/2 query-key pairs x 2 */
    if (m->naive_attention) {
        gptc_prof_begin(GPTC_PROF_FWD, GPTC_KERNEL_SPAN(m->k, attention_fwd, "attn.naive_fwd"), l);
        m->k->attention_fwd(a->atty[l], a->preatt[l], a->att[l], a->qkv[l], B, T, C, NH);
        gptc_prof_end(2 * causal, F32 * (4 * btc + (double)B * NH * T * (T + 1)));
    } else {
        gptc_prof_begin(GPTC_PROF_FWD, "attn.split_heads.fwd", l);
        gptc_qkv_to_heads(a->q[l], a->k[l], a->v[l], a->qkv[l], B, T, C, NH);
        gptc_prof_end(0, F32 * 6 * btc);
        gptc_prof_begin(GPTC_PROF_FWD, "attn.flash_fwd", l);
        m->flash_fwd(a->o[l], a->lse[l], a->q[l], a->k[l], a->v[l], B, NH, T, C / NH, m->attn_dropout,
                     attn_drop_seed(m, l));
        gptc_prof_end(2 * causal, F32 * (4 * btc + (double)B * NH * T));
        gptc_prof_begin(GPTC_PROF_FWD, "attn.merge_heads.fwd", l);
        gptc_heads_to_rows(a->atty[l], a->o[l], B, T, C, NH);
        gptc_prof_end(0, F32 * 2 * btc);
    }
}

/* fch_gelu[l] (B,T,4C) = GELU(fch[l]) */
static void gelu_forward(gptc_model *m, int l, int BT) {
    size_t n = (size_t)BT * 4 * m->cfg.channels;
    bool tanh_form = m->cfg.gelu == GPTC_GELU_KIND_TANH; /* the form the table's gelu_fwd is */
    gptc_prof_begin(GPTC_PROF_FWD, tanh_form ? GPTC_KERNEL_SPAN(m->k, gelu_fwd, "gelu.fwd") : "gelu.fwd", l);
    gptc_gelu_fwd_k(m->k, m->cfg.gelu, m->a.fch_gelu[l], m->a.fch[l], n);
    gptc_prof_end(EW_GELU_FWD * (double)n, F32 * 2 * (double)n);
}

/* Block l from its normalised input ln1[l] through fcproj[l] (B,T,C): everything but the block's
 * output residual3[l] and the LayerNorm after it. The forward and the block recompute share it. */
static void block_forward(gptc_model *m, int l, int B, int T) {
    int C = m->cfg.channels, BT = B * T;
    gptc_acts *a = &m->a;
    const gptc_layer *w = &m->w.layer[l];
    linear_fwd(m, &QKV, l, a->qkv[l], a->ln1[l], w->qkvw, w->qkvb, BT, C, 3 * C);
    attention_forward(m, l, B, T);
    linear_fwd(m, &ATTPROJ, l, a->attproj[l], a->atty[l], w->attprojw, w->attprojb, BT, C, C);
    drop_fwd(m, "attn.dropout.fwd", DROP_ATTN_RES, l, a->attproj[l], (size_t)BT * C);
    residual_ln_fwd(m, "res+ln2.fwd", l, a->residual2[l], a->ln2[l], a->ln2_mean[l], a->ln2_rstd[l], block_input(m, l),
                    a->attproj[l], w->ln2w, w->ln2b, BT, C);
    linear_fwd(m, &FC, l, a->fch[l], a->ln2[l], w->fcw, w->fcb, BT, C, 4 * C);
    gelu_forward(m, l, BT);
    linear_fwd(m, &FCPROJ, l, a->fcproj[l], a->fch_gelu[l], w->fcprojw, w->fcprojb, BT, 4 * C, C);
    drop_fwd(m, "mlp.dropout.fwd", DROP_MLP_RES, l, a->fcproj[l], (size_t)BT * C);
}

/* The transformer body: embeddings through the final LayerNorm (a->lnf). */
static void body_forward(gptc_model *m, const int *inputs, int B, int T) {
    int L = m->cfg.layers, C = m->cfg.channels, BT = B * T;
    gptc_acts *a = &m->a;
    gptc_prof_begin(GPTC_PROF_PHASE, "forward", -1);
    gptc_prof_begin(GPTC_PROF_FWD, "encoder.fwd", -1);
    m->k->encoder_fwd(a->encoded, inputs, m->w.wte, m->w.wpe, B, T, C);
    gptc_prof_end((double)BT * C, F32 * 3.0 * BT * C + sizeof(int) * (double)BT);
    drop_fwd(m, "embed.dropout.fwd", DROP_EMBED, -1, a->encoded, (size_t)BT * C);
    ln1_forward(m, 0, BT);
    for (int l = 0; l < L; l++) {
        block_forward(m, l, B, T);
        /* residual3 = residual2 + fcproj, normalised by the next layer's ln_1 (or ln_f) in the same pass */
        bool last = l == L - 1;
        const gptc_layer *next = last ? NULL : &m->w.layer[l + 1];
        residual_ln_fwd(m, last ? "res+lnf.fwd" : "res+ln1.fwd", l, a->residual3[l], last ? a->lnf : a->ln1[l + 1],
                        last ? a->lnf_mean : a->ln1_mean[l + 1], last ? a->lnf_rstd : a->ln1_rstd[l + 1],
                        a->residual2[l], a->fcproj[l], last ? m->w.lnfw : next->ln1w, last ? m->w.lnfb : next->ln1b,
                        BT, C);
    }
    gptc_prof_end(0, 0);
}

/* Before layer l's backward: recomputes what m->recompute dropped, with the forward's kernels on the
 * forward's inputs, so the values are the forward's bit for bit. The last layer needs nothing: its
 * forward ran last, so the shared buffers still hold its activations. */
static void recompute_layer(gptc_model *m, int l, int B, int T) {
    if (m->recompute == GPTC_RECOMPUTE_NONE || l == m->cfg.layers - 1) return;
    gptc_prof_begin(GPTC_PROF_PHASE, "recompute", l);
    if (m->recompute == GPTC_RECOMPUTE_BLOCK) {
        ln1_forward(m, l, B * T);
        block_forward(m, l, B, T);
    } else {
        if (m->recompute >= GPTC_RECOMPUTE_ATTN) attention_forward(m, l, B, T);
        gelu_forward(m, l, B * T);
    }
    gptc_prof_end(0, 0);
}

/* Tells m->grads_ready that the gradients from tensor i to the end of the arena are final. */
static void grads_ready(gptc_model *m, int i) {
    if (m->grads_ready) m->grads_ready(m->grads_ready_user, i == 0 ? 0 : m->tensors[i].offset);
}

/* The body's backward from d->dlnf (B,T,C), accumulating into the gradients. */
static void body_backward(gptc_model *m, int B, int T) {
    const gptc_kernels *k = m->k;
    int L = m->cfg.layers, C = m->cfg.channels, NH = m->cfg.heads, BT = B * T;
    gptc_acts *a = &m->a;
    gptc_dacts *d = &m->d;
    gptc_weights *w = &m->w, *g = &m->g;
    size_t btc = (size_t)BT * C;
    double causal = (double)B * T * (T + 1) * C; /* as in attention_forward */
    gptc_prof_begin(GPTC_PROF_PHASE, "backward", -1);
    ln_bwd_residual(m, "lnf.bwd", -1, d->dres_out, g->lnfw, g->lnfb, NULL, d->dlnf, a->residual3[L - 1], w->lnfw,
                    a->lnf_mean, a->lnf_rstd, BT, C);
    grads_ready(m, m->ntensors - 2); /* ln_f.weight, ln_f.bias */
    for (int l = L - 1; l >= 0; l--) {
        const gptc_layer *lw = &w->layer[l];
        gptc_layer *lg = &g->layer[l];
        float *res = block_input(m, l);
        recompute_layer(m, l, B, T);
        /* only the buffers the kernels accumulate into need zeroing; the rest are overwritten */
        gptc_prof_begin(GPTC_PROF_BWD, "zero.bwd", l);
        memset(d->dfch, 0, sizeof(float) * btc * 4);
        memset(d->dqkv, 0, sizeof(float) * btc * 3);
        if (!m->naive_attention) {
            memset(d->dq, 0, sizeof(float) * btc);
            memset(d->dk, 0, sizeof(float) * btc);
            memset(d->dv, 0, sizeof(float) * btc);
        }
        gptc_prof_end(0, F32 * (m->naive_attention ? 7 : 10) * (double)btc);
        /* residual3 = residual2 + dropout(fcproj): both receive dres_out, the branch through its mask
         * (into dln2, free until the MLP's input gradient overwrites it) */
        const float *dbranch = drop_bwd(m, "mlp.dropout.bwd", DROP_MLP_RES, l, d->dln2, d->dres_out, btc);
        linear_bwd(m, &FCPROJ, l, d->dfch_gelu, lg->fcprojw, lg->fcprojb, dbranch, a->fch_gelu[l], lw->fcprojw, BT,
                   4 * C, C);
        gptc_prof_begin(GPTC_PROF_BWD,
                        m->cfg.gelu == GPTC_GELU_KIND_TANH ? GPTC_KERNEL_SPAN(k, gelu_bwd, "gelu.bwd") : "gelu.bwd", l);
        gptc_gelu_bwd_k(k, m->cfg.gelu, d->dfch, a->fch[l], d->dfch_gelu, (size_t)BT * 4 * C);
        gptc_prof_end(EW_GELU_BWD * 4.0 * btc, F32 * 4 * 4.0 * btc);
        linear_bwd(m, &FC, l, d->dln2, lg->fcw, lg->fcb, d->dfch, a->ln2[l], lw->fcw, BT, C, 4 * C);
        /* dres2 = dres_out (through the skip) + ln_2's backward */
        ln_bwd_residual(m, "res+ln2.bwd", l, d->dres2, lg->ln2w, lg->ln2b, d->dres_out, d->dln2, a->residual2[l],
                        lw->ln2w, a->ln2_mean[l], a->ln2_rstd[l], BT, C);
        /* residual2 = res + dropout(attproj): both receive dres2, the branch through its mask (dln2 is free again) */
        dbranch = drop_bwd(m, "attn.dropout.bwd", DROP_ATTN_RES, l, d->dln2, d->dres2, btc);
        linear_bwd(m, &ATTPROJ, l, d->datty, lg->attprojw, lg->attprojb, dbranch, a->atty[l], lw->attprojw, BT, C, C);
        if (m->naive_attention) {
            gptc_prof_begin(GPTC_PROF_BWD, GPTC_KERNEL_SPAN(k, attention_bwd, "attn.naive_bwd"), l);
            k->attention_bwd(d->dqkv, d->dpreatt, d->datt, d->datty, a->qkv[l], a->att[l], B, T, C, NH);
            gptc_prof_end(4 * causal, F32 * (10.0 * btc + 1.5 * B * NH * T * (T + 1)));
        } else {
            gptc_prof_begin(GPTC_PROF_BWD, "attn.split_heads.bwd", l);
            gptc_rows_to_heads(d->dout_heads, d->datty, B, T, C, NH);
            gptc_prof_end(0, F32 * 2 * (double)btc);
            gptc_prof_begin(GPTC_PROF_BWD, "attn.flash_bwd", l);
            m->flash_bwd(d->dq, d->dk, d->dv, d->dout_heads, a->q[l], a->k[l], a->v[l], a->o[l], a->lse[l], B, NH, T,
                         C / NH, m->attn_dropout, attn_drop_seed(m, l));
            gptc_prof_end(5 * causal, F32 * (11.0 * btc + (double)B * NH * T));
            gptc_prof_begin(GPTC_PROF_BWD, "attn.merge_heads.bwd", l);
            gptc_heads_to_qkv_grad(d->dqkv, d->dq, d->dk, d->dv, B, T, C, NH);
            gptc_prof_end(3.0 * btc, F32 * 9 * (double)btc);
        }
        linear_bwd(m, &QKV, l, d->dln1, lg->qkvw, lg->qkvb, d->dqkv, a->ln1[l], lw->qkvw, BT, C, 3 * C);
        /* dres_in = dres2 (through the skip) + ln_1's backward */
        ln_bwd_residual(m, "res+ln1.bwd", l, d->dres_in, lg->ln1w, lg->ln1b, d->dres2, d->dln1, res, lw->ln1w,
                        a->ln1_mean[l], a->ln1_rstd[l], BT, C);
        float *t = d->dres_out; /* the input gradient of this layer is the output gradient of the next */
        d->dres_out = d->dres_in;
        d->dres_in = t;
        grads_ready(m, 2 + l * GPTC_LAYER_TENSORS); /* after wte, wpe: layer l's first tensor */
    }
    drop_bwd(m, "embed.dropout.bwd", DROP_EMBED, -1, d->dres_out, d->dres_out, btc); /* in place: read only here */
    gptc_prof_begin(GPTC_PROF_BWD, "encoder.bwd", -1);
    k->encoder_bwd(g->wte, g->wpe, d->dres_out, m->inputs, B, T, C);
    gptc_prof_end(2.0 * btc, F32 * 5.0 * btc + sizeof(int) * (double)BT);
    grads_ready(m, 0);
    gptc_prof_end(0, 0); /* backward */
}

/* The fused classifier on rows [r0, r0+n) of lnf: logits (n,Vp) in a->logits (the chunk buffer),
 * losses; with grad, also dlnf rows = dlogits @ wte and wte's gradient += dlogits^T lnf rows,
 * dlogits = (softmax - onehot) * dloss formed in place of the logits. */
/* logits (n,Vp) = x (n,C) @ wte[:V]^T; the padding columns are not computed */
static void classifier_fwd(gptc_model *m, const float *x, int n, float *logits) {
    int C = m->cfg.channels, V = m->cfg.vocab;
    gptc_prof_begin(GPTC_PROF_FWD, "classifier.fwd", -1);
    m->gemm(0, 1, n, V, C, x, C, m->w.wte, C, 0.0f, NULL, logits, m->Vp);
    gptc_prof_end(gemm_flops(n, V, C), gemm_bytes(m, n, V, C, false, false));
}

/* dx (n,C) = dlogits (n,Vp) @ wte[:V]; wte's gradient += dlogits^T x */
static void classifier_bwd(gptc_model *m, const float *dlogits, const float *x, int n, float *dx) {
    int C = m->cfg.channels, V = m->cfg.vocab, Vp = m->Vp;
    gptc_prof_begin(GPTC_PROF_BWD, "classifier.dx.bwd", -1);
    m->gemm(0, 0, n, C, V, dlogits, Vp, m->w.wte, C, 0.0f, NULL, dx, C);
    gptc_prof_end(gemm_flops(n, C, V), gemm_bytes(m, n, C, V, false, false));
    gptc_prof_begin(GPTC_PROF_BWD, "classifier.dw.bwd", -1);
    m->gemm(1, 0, V, C, n, dlogits, Vp, x, C, 1.0f, NULL, m->g.wte, C);
    gptc_prof_end(gemm_flops(V, C, n), gemm_bytes(m, V, C, n, true, false));
}

/* The cost of a softmax cross-entropy pass over n rows of V logits, read and written in place. */
static void xent_end(const gptc_model *m, int n) {
    double nv = (double)n * m->cfg.vocab;
    gptc_prof_end(EW_XENT * nv, F32 * 2 * nv + (F32 + sizeof(int)) * n);
}

static void classifier_chunk(gptc_model *m, int r0, int n, bool grad, float dloss) {
    const gptc_kernels *k = m->k;
    int C = m->cfg.channels, V = m->cfg.vocab, Vp = m->Vp;
    const float *x = m->a.lnf + (size_t)r0 * C;
    float *logits = m->a.logits;
    classifier_fwd(m, x, n, logits);
    if (!grad) {
        gptc_prof_begin(GPTC_PROF_FWD, "xent.fwd", -1);
        k->crossentropy_fwd(m->a.losses + r0, logits, logits, m->targets + r0, n, V, Vp);
        xent_end(m, n);
        return;
    }
    gptc_prof_begin(GPTC_PROF_FWD, "xent.fused", -1);
    k->crossentropy_fused(m->a.losses + r0, logits, m->targets + r0, dloss, n, V, Vp);
    xent_end(m, n);
    classifier_bwd(m, logits, x, n, m->d.dlnf + (size_t)r0 * C);
}

static void classifier_chunks(gptc_model *m, int BT, bool grad, float dloss) {
    gptc_prof_begin(GPTC_PROF_PHASE, "classifier", -1);
    for (int r0 = 0; r0 < BT; r0 += GPTC_CLASSIFIER_CHUNK)
        classifier_chunk(m, r0, BT - r0 < GPTC_CLASSIFIER_CHUNK ? BT - r0 : GPTC_CLASSIFIER_CHUNK, grad, dloss);
    gptc_prof_end(0, 0);
}

/* Records the mean of the (B,T) losses and the shape the backward will use; returns the mean. */
static float finish_loss(gptc_model *m, int B, int T) {
    double sum = 0;
    for (int i = 0; i < B * T; i++) sum += m->a.losses[i];
    m->loss = (float)(sum / (B * T));
    m->B_last = B;
    m->T_last = T;
    return m->loss;
}

/* Copies the batch and checks the shape against the arenas. */
static void take_batch(gptc_model *m, const int *inputs, const int *targets, int B, int T) {
    GPTC_ASSERT(m->act_arena && B <= m->B && T <= m->T);
    /* the arenas are planned for (m->B, m->T); smaller calls use the same views, which stay valid
     * because every activation is indexed with the call's own B and T */
    memcpy(m->inputs, inputs, sizeof(int) * B * T);
    if (targets) memcpy(m->targets, targets, sizeof(int) * B * T);
}

float gptc_model_forward(gptc_model *m, const int *inputs, const int *targets, int B, int T) {
    const gptc_kernels *k = m->k;
    int V = m->cfg.vocab, Vp = m->Vp, BT = B * T;
    gptc_acts *a = &m->a;
    /* the fused path keeps no whole logits: asking it for them is a programming error */
    GPTC_ASSERT(targets || !m->fuse);
    take_batch(m, inputs, targets, B, T);
    body_forward(m, inputs, B, T);
    if (!targets) {
        gptc_prof_begin(GPTC_PROF_PHASE, "classifier", -1);
        classifier_fwd(m, a->lnf, BT, a->logits);
        gptc_prof_end(0, 0);
        m->loss = 0;
        return 0;
    }
    if (m->fuse) {
        classifier_chunks(m, BT, false, 0.0f);
    } else {
        gptc_prof_begin(GPTC_PROF_PHASE, "classifier", -1);
        classifier_fwd(m, a->lnf, BT, a->logits);
        gptc_prof_begin(GPTC_PROF_FWD, "xent.fwd", -1);
        k->crossentropy_fwd(a->losses, a->logits, a->logits, m->targets, BT, V, Vp); /* probabilities in place */
        xent_end(m, BT);
        gptc_prof_end(0, 0);
    }
    return finish_loss(m, B, T);
}

void gptc_model_zero_grad(gptc_model *m) {
    gptc_prof_begin(GPTC_PROF_OPT, "zero_grad", -1);
    memset(m->grads, 0, m->num_floats * sizeof(float));
    gptc_prof_end(0, F32 * (double)m->num_floats);
}

void gptc_model_backward(gptc_model *m, float dloss_scale) {
    const gptc_kernels *k = m->k;
    int B = m->B_last, T = m->T_last, BT = B * T;
    int V = m->cfg.vocab, Vp = m->Vp;
    gptc_acts *a = &m->a;
    gptc_dacts *d = &m->d;
    if (m->fuse) {
        /* the forward kept only the losses: the classifier runs again, chunk by chunk, with its gradient */
        classifier_chunks(m, BT, true, dloss_scale / BT);
    } else {
        gptc_prof_begin(GPTC_PROF_PHASE, "classifier", -1);
        gptc_prof_begin(GPTC_PROF_BWD, "xent.bwd", -1);
        memset(d->dlogits, 0, sizeof(float) * (size_t)BT * Vp);
        /* a->logits holds the probabilities after the loss */
        k->crossentropy_bwd(d->dlogits, a->logits, m->targets, dloss_scale / BT, BT, V, Vp);
        xent_end(m, BT);
        classifier_bwd(m, d->dlogits, a->lnf, BT, d->dlnf);
        gptc_prof_end(0, 0);
    }
    body_backward(m, B, T);
}

float gptc_model_forward_backward(gptc_model *m, const int *inputs, const int *targets, int B, int T,
                                  float dloss_scale) {
    if (!m->fuse) {
        float loss = gptc_model_forward(m, inputs, targets, B, T);
        gptc_model_backward(m, dloss_scale);
        return loss;
    }
    int BT = B * T;
    take_batch(m, inputs, targets, B, T);
    body_forward(m, inputs, B, T);
    /* each chunk's gradient is formed while its logits are in memory: no second classifier pass */
    classifier_chunks(m, BT, true, dloss_scale / BT);
    float loss = finish_loss(m, B, T);
    body_backward(m, B, T);
    return loss;
}
