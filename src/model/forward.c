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
 * reruns the forward's code for them (recompute_layer), so every level gives the same bits. */
#include "model/gpt2.h"
#include "kernels/attention.h"
#include "kernels/gelu.h"

#include <string.h>

/* out (N,OC) = inp (N,IC) @ w (IC,OC) + b (OC): fused, the bias in the GEMM's epilogue; unfused, its own pass */
static void linear_fwd(const gptc_model *m, float *out, const float *inp, const float *w, const float *b, int N, int IC,
                       int OC) {
    m->gemm(0, 0, N, OC, IC, inp, IC, w, OC, 0.0f, m->fuse ? b : NULL, out, OC);
    if (!m->fuse) m->k->bias_fwd(out, b, N, OC);
}

/* dinp (N,IC) = (overwritten), dw (IC,OC) +=, db (OC) += from dout (N,OC) */
static void linear_bwd(const gptc_model *m, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                       const float *w, int N, int IC, int OC) {
    m->gemm(0, 1, N, IC, OC, dout, OC, w, OC, 0.0f, NULL, dinp, IC);
    m->gemm(1, 0, IC, OC, N, inp, IC, dout, OC, 1.0f, NULL, dw, OC);
    m->k->bias_bwd(db, dout, N, OC);
}

/* res (N,C) = a + b; out = LayerNorm(res) with w, bias; mean, rstd (N) */
static void residual_ln_fwd(const gptc_model *m, float *res, float *out, float *mean, float *rstd, const float *a,
                            const float *b, const float *w, const float *bias, int N, int C) {
    if (m->fuse) {
        m->k->residual_layernorm_fwd(res, out, mean, rstd, a, b, w, bias, N, C);
    } else {
        m->k->residual_fwd(res, a, b, (size_t)N * C);
        m->k->layernorm_fwd(out, mean, rstd, res, w, bias, N, C);
    }
}

/* dinp (N,C) = dskip (or 0 when NULL) + LayerNorm backward of dout; dw, db (C) += */
static void ln_bwd_residual(const gptc_model *m, float *dinp, float *dw, float *db, const float *dskip,
                            const float *dout, const float *inp, const float *w, const float *mean, const float *rstd,
                            int N, int C) {
    if (m->fuse) {
        m->k->layernorm_bwd_residual(dinp, dw, db, dskip, dout, inp, w, mean, rstd, N, C);
        return;
    }
    if (!dskip) memset(dinp, 0, sizeof(float) * (size_t)N * C);
    else if (dskip != dinp) memcpy(dinp, dskip, sizeof(float) * (size_t)N * C);
    m->k->layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
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
    m->k->layernorm_fwd(m->a.ln1[l], m->a.ln1_mean[l], m->a.ln1_rstd[l], block_input(m, l), w->ln1w, w->ln1b, BT,
                        m->cfg.channels);
}

/* atty[l] (B,T,C) from qkv[l] (B,T,3C), keeping what the attention's backward reads: naive, preatt
 * and att (B,NH,T,T); flash, the head-major q, k, v, o (B,NH,T,HS) and lse (B,NH,T). */
static void attention_forward(gptc_model *m, int l, int B, int T) {
    int C = m->cfg.channels, NH = m->cfg.heads;
    gptc_acts *a = &m->a;
    if (m->naive_attention) {
        m->k->attention_fwd(a->atty[l], a->preatt[l], a->att[l], a->qkv[l], B, T, C, NH);
    } else {
        gptc_qkv_to_heads(a->q[l], a->k[l], a->v[l], a->qkv[l], B, T, C, NH);
        m->flash_fwd(a->o[l], a->lse[l], a->q[l], a->k[l], a->v[l], B, NH, T, C / NH, 0.0f, 0);
        gptc_heads_to_rows(a->atty[l], a->o[l], B, T, C, NH);
    }
}

/* fch_gelu[l] (B,T,4C) = GELU(fch[l]) */
static void gelu_forward(gptc_model *m, int l, int BT) {
    gptc_gelu_fwd_form(m->cfg.gelu, m->a.fch_gelu[l], m->a.fch[l], (size_t)BT * 4 * m->cfg.channels);
}

/* Block l from its normalised input ln1[l] through fcproj[l] (B,T,C): everything but the block's
 * output residual3[l] and the LayerNorm after it. The forward and the block recompute share it. */
static void block_forward(gptc_model *m, int l, int B, int T) {
    int C = m->cfg.channels, BT = B * T;
    gptc_acts *a = &m->a;
    const gptc_layer *w = &m->w.layer[l];
    linear_fwd(m, a->qkv[l], a->ln1[l], w->qkvw, w->qkvb, BT, C, 3 * C);
    attention_forward(m, l, B, T);
    linear_fwd(m, a->attproj[l], a->atty[l], w->attprojw, w->attprojb, BT, C, C);
    residual_ln_fwd(m, a->residual2[l], a->ln2[l], a->ln2_mean[l], a->ln2_rstd[l], block_input(m, l), a->attproj[l],
                    w->ln2w, w->ln2b, BT, C);
    linear_fwd(m, a->fch[l], a->ln2[l], w->fcw, w->fcb, BT, C, 4 * C);
    gelu_forward(m, l, BT);
    linear_fwd(m, a->fcproj[l], a->fch_gelu[l], w->fcprojw, w->fcprojb, BT, 4 * C, C);
}

/* The transformer body: embeddings through the final LayerNorm (a->lnf). */
static void body_forward(gptc_model *m, const int *inputs, int B, int T) {
    int L = m->cfg.layers, C = m->cfg.channels, BT = B * T;
    gptc_acts *a = &m->a;
    m->k->encoder_fwd(a->encoded, inputs, m->w.wte, m->w.wpe, B, T, C);
    ln1_forward(m, 0, BT);
    for (int l = 0; l < L; l++) {
        block_forward(m, l, B, T);
        /* residual3 = residual2 + fcproj, normalised by the next layer's ln_1 (or ln_f) in the same pass */
        bool last = l == L - 1;
        const gptc_layer *next = last ? NULL : &m->w.layer[l + 1];
        residual_ln_fwd(m, a->residual3[l], last ? a->lnf : a->ln1[l + 1], last ? a->lnf_mean : a->ln1_mean[l + 1],
                        last ? a->lnf_rstd : a->ln1_rstd[l + 1], a->residual2[l], a->fcproj[l],
                        last ? m->w.lnfw : next->ln1w, last ? m->w.lnfb : next->ln1b, BT, C);
    }
}

/* Before layer l's backward: recomputes what m->recompute dropped, with the forward's kernels on the
 * forward's inputs, so the values are the forward's bit for bit. The last layer needs nothing: its
 * forward ran last, so the shared buffers still hold its activations. */
static void recompute_layer(gptc_model *m, int l, int B, int T) {
    if (m->recompute == GPTC_RECOMPUTE_NONE || l == m->cfg.layers - 1) return;
    if (m->recompute == GPTC_RECOMPUTE_BLOCK) {
        ln1_forward(m, l, B * T);
        block_forward(m, l, B, T);
        return;
    }
    if (m->recompute >= GPTC_RECOMPUTE_ATTN) attention_forward(m, l, B, T);
    gelu_forward(m, l, B * T);
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
    ln_bwd_residual(m, d->dres_out, g->lnfw, g->lnfb, NULL, d->dlnf, a->residual3[L - 1], w->lnfw, a->lnf_mean,
                    a->lnf_rstd, BT, C);
    grads_ready(m, m->ntensors - 2); /* ln_f.weight, ln_f.bias */
    for (int l = L - 1; l >= 0; l--) {
        const gptc_layer *lw = &w->layer[l];
        gptc_layer *lg = &g->layer[l];
        float *res = block_input(m, l);
        recompute_layer(m, l, B, T);
        /* only the buffers the kernels accumulate into need zeroing; the rest are overwritten */
        memset(d->dfch, 0, sizeof(float) * btc * 4);
        memset(d->dqkv, 0, sizeof(float) * btc * 3);
        if (!m->naive_attention) {
            memset(d->dq, 0, sizeof(float) * btc);
            memset(d->dk, 0, sizeof(float) * btc);
            memset(d->dv, 0, sizeof(float) * btc);
        }
        /* residual3 = residual2 + fcproj: both receive dres_out unchanged */
        linear_bwd(m, d->dfch_gelu, lg->fcprojw, lg->fcprojb, d->dres_out, a->fch_gelu[l], lw->fcprojw, BT, 4 * C, C);
        gptc_gelu_bwd_form(m->cfg.gelu, d->dfch, a->fch[l], d->dfch_gelu, (size_t)BT * 4 * C);
        linear_bwd(m, d->dln2, lg->fcw, lg->fcb, d->dfch, a->ln2[l], lw->fcw, BT, C, 4 * C);
        /* dres2 = dres_out (through the skip) + ln_2's backward */
        ln_bwd_residual(m, d->dres2, lg->ln2w, lg->ln2b, d->dres_out, d->dln2, a->residual2[l], lw->ln2w,
                        a->ln2_mean[l], a->ln2_rstd[l], BT, C);
        /* residual2 = res + attproj: both receive dres2 unchanged */
        linear_bwd(m, d->datty, lg->attprojw, lg->attprojb, d->dres2, a->atty[l], lw->attprojw, BT, C, C);
        if (m->naive_attention) {
            k->attention_bwd(d->dqkv, d->dpreatt, d->datt, d->datty, a->qkv[l], a->att[l], B, T, C, NH);
        } else {
            gptc_rows_to_heads(d->dout_heads, d->datty, B, T, C, NH);
            m->flash_bwd(d->dq, d->dk, d->dv, d->dout_heads, a->q[l], a->k[l], a->v[l], a->o[l], a->lse[l], B, NH, T,
                         C / NH, 0.0f, 0);
            gptc_heads_to_qkv_grad(d->dqkv, d->dq, d->dk, d->dv, B, T, C, NH);
        }
        linear_bwd(m, d->dln1, lg->qkvw, lg->qkvb, d->dqkv, a->ln1[l], lw->qkvw, BT, C, 3 * C);
        /* dres_in = dres2 (through the skip) + ln_1's backward */
        ln_bwd_residual(m, d->dres_in, lg->ln1w, lg->ln1b, d->dres2, d->dln1, res, lw->ln1w, a->ln1_mean[l],
                        a->ln1_rstd[l], BT, C);
        float *t = d->dres_out; /* the input gradient of this layer is the output gradient of the next */
        d->dres_out = d->dres_in;
        d->dres_in = t;
        grads_ready(m, 2 + l * GPTC_LAYER_TENSORS); /* after wte, wpe: layer l's first tensor */
    }
    k->encoder_bwd(g->wte, g->wpe, d->dres_out, m->inputs, B, T, C);
    grads_ready(m, 0);
}

/* The fused classifier on rows [r0, r0+n) of lnf: logits (n,Vp) in a->logits (the chunk buffer),
 * losses; with grad, also dlnf rows = dlogits @ wte and wte's gradient += dlogits^T lnf rows,
 * dlogits = (softmax - onehot) * dloss formed in place of the logits. */
static void classifier_chunk(gptc_model *m, int r0, int n, bool grad, float dloss) {
    const gptc_kernels *k = m->k;
    int C = m->cfg.channels, V = m->cfg.vocab, Vp = m->Vp;
    const float *x = m->a.lnf + (size_t)r0 * C;
    float *logits = m->a.logits;
    m->gemm(0, 1, n, V, C, x, C, m->w.wte, C, 0.0f, NULL, logits, Vp);
    if (!grad) {
        k->crossentropy_fwd(m->a.losses + r0, logits, logits, m->targets + r0, n, V, Vp);
        return;
    }
    k->crossentropy_fused(m->a.losses + r0, logits, m->targets + r0, dloss, n, V, Vp);
    m->gemm(0, 0, n, C, V, logits, Vp, m->w.wte, C, 0.0f, NULL, m->d.dlnf + (size_t)r0 * C, C);
    m->gemm(1, 0, V, C, n, logits, Vp, x, C, 1.0f, NULL, m->g.wte, C);
}

static void classifier_chunks(gptc_model *m, int BT, bool grad, float dloss) {
    for (int r0 = 0; r0 < BT; r0 += GPTC_CLASSIFIER_CHUNK)
        classifier_chunk(m, r0, BT - r0 < GPTC_CLASSIFIER_CHUNK ? BT - r0 : GPTC_CLASSIFIER_CHUNK, grad, dloss);
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
    int C = m->cfg.channels, V = m->cfg.vocab, Vp = m->Vp, BT = B * T;
    gptc_acts *a = &m->a;
    /* the fused path keeps no whole logits: asking it for them is a programming error */
    GPTC_ASSERT(targets || !m->fuse);
    take_batch(m, inputs, targets, B, T);
    body_forward(m, inputs, B, T);
    if (!targets) {
        /* logits (BT, Vp) = lnf (BT,C) @ wte[:V]^T; the padding columns are not computed */
        m->gemm(0, 1, BT, V, C, a->lnf, C, m->w.wte, C, 0.0f, NULL, a->logits, Vp);
        m->loss = 0;
        return 0;
    }
    if (m->fuse) {
        classifier_chunks(m, BT, false, 0.0f);
    } else {
        m->gemm(0, 1, BT, V, C, a->lnf, C, m->w.wte, C, 0.0f, NULL, a->logits, Vp);
        k->crossentropy_fwd(a->losses, a->logits, a->logits, m->targets, BT, V, Vp); /* probabilities in place */
    }
    return finish_loss(m, B, T);
}

void gptc_model_zero_grad(gptc_model *m) { memset(m->grads, 0, m->num_floats * sizeof(float)); }

void gptc_model_backward(gptc_model *m, float dloss_scale) {
    const gptc_kernels *k = m->k;
    int B = m->B_last, T = m->T_last, BT = B * T;
    int C = m->cfg.channels, V = m->cfg.vocab, Vp = m->Vp;
    gptc_acts *a = &m->a;
    gptc_dacts *d = &m->d;
    if (m->fuse) {
        /* the forward kept only the losses: the classifier runs again, chunk by chunk, with its gradient */
        classifier_chunks(m, BT, true, dloss_scale / BT);
    } else {
        memset(d->dlogits, 0, sizeof(float) * (size_t)BT * Vp);
        /* a->logits holds the probabilities after the loss */
        k->crossentropy_bwd(d->dlogits, a->logits, m->targets, dloss_scale / BT, BT, V, Vp);
        m->gemm(0, 0, BT, C, V, d->dlogits, Vp, m->w.wte, C, 0.0f, NULL, d->dlnf, C);
        m->gemm(1, 0, V, C, BT, d->dlogits, Vp, a->lnf, C, 1.0f, NULL, m->g.wte, C);
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
