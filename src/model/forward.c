/* forward.c — the GPT-2 forward and backward passes over the kernel table. */
#include "model/gpt2.h"
#include "kernels/attention.h"

#include <string.h>

/* out (N,OC) = inp (N,IC) @ w (IC,OC) + b (OC) */
static void linear_fwd(const gptc_kernels *k, float *out, const float *inp, const float *w, const float *b, int N,
                       int IC, int OC) {
    k->gemm(0, 0, N, OC, IC, inp, IC, w, OC, 0.0f, out, OC);
    k->bias_fwd(out, b, N, OC);
}

/* dinp (N,IC) +=, dw (IC,OC) +=, db (OC) += from dout (N,OC) */
static void linear_bwd(const gptc_kernels *k, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                       const float *w, int N, int IC, int OC) {
    k->gemm(0, 1, N, IC, OC, dout, OC, w, OC, 1.0f, dinp, IC);
    k->gemm(1, 0, IC, OC, N, inp, IC, dout, OC, 1.0f, dw, OC);
    k->bias_bwd(db, dout, N, OC);
}

float gptc_model_forward(gptc_model *m, const int *inputs, const int *targets, int B, int T) {
    GPTC_ASSERT(m->act_arena && B <= m->B && T <= m->T);
    /* the arenas are planned for (m->B, m->T); smaller calls use the same views, which stay
     * valid because every activation is indexed with the call's own B and T */
    const gptc_kernels *k = m->k;
    int L = m->cfg.layers, C = m->cfg.channels, NH = m->cfg.heads, V = m->cfg.vocab, Vp = m->Vp;
    int BT = B * T;
    gptc_acts *a = &m->a;
    memcpy(m->inputs, inputs, sizeof(int) * BT);
    if (targets) memcpy(m->targets, targets, sizeof(int) * BT);

    k->encoder_fwd(a->encoded, inputs, m->w.wte, m->w.wpe, B, T, C);
    for (int l = 0; l < L; l++) {
        const gptc_layer *w = &m->w.layer[l];
        float *res = l == 0 ? a->encoded : a->residual3[l - 1];
        k->layernorm_fwd(a->ln1[l], a->ln1_mean[l], a->ln1_rstd[l], res, w->ln1w, w->ln1b, BT, C);
        linear_fwd(k, a->qkv[l], a->ln1[l], w->qkvw, w->qkvb, BT, C, 3 * C);
        if (m->naive_attention) {
            k->attention_fwd(a->atty[l], a->preatt[l], a->att[l], a->qkv[l], B, T, C, NH);
        } else {
            gptc_qkv_to_heads(a->q[l], a->k[l], a->v[l], a->qkv[l], B, T, C, NH);
            gptc_flash_fwd()(a->o[l], a->lse[l], a->q[l], a->k[l], a->v[l], B, NH, T, C / NH, 0.0f, 0);
            gptc_heads_to_rows(a->atty[l], a->o[l], B, T, C, NH);
        }
        linear_fwd(k, a->attproj[l], a->atty[l], w->attprojw, w->attprojb, BT, C, C);
        k->residual_fwd(a->residual2[l], res, a->attproj[l], (size_t)BT * C);
        k->layernorm_fwd(a->ln2[l], a->ln2_mean[l], a->ln2_rstd[l], a->residual2[l], w->ln2w, w->ln2b, BT, C);
        linear_fwd(k, a->fch[l], a->ln2[l], w->fcw, w->fcb, BT, C, 4 * C);
        k->gelu_fwd(a->fch_gelu[l], a->fch[l], (size_t)BT * 4 * C);
        linear_fwd(k, a->fcproj[l], a->fch_gelu[l], w->fcprojw, w->fcprojb, BT, 4 * C, C);
        k->residual_fwd(a->residual3[l], a->residual2[l], a->fcproj[l], (size_t)BT * C);
    }
    k->layernorm_fwd(a->lnf, a->lnf_mean, a->lnf_rstd, a->residual3[L - 1], m->w.lnfw, m->w.lnfb, BT, C);
    /* logits (BT, Vp) = lnf (BT,C) @ wte[:V]^T; the padding columns are not computed */
    k->gemm(0, 1, BT, V, C, a->lnf, C, m->w.wte, C, 0.0f, a->logits, Vp);
    if (!targets) {
        m->loss = 0;
        return 0;
    }
    k->crossentropy_fwd(a->losses, a->logits, a->logits, targets, BT, V, Vp);
    double sum = 0;
    for (int i = 0; i < BT; i++) sum += a->losses[i];
    m->loss = (float)(sum / BT);
    m->B_last = B;
    m->T_last = T;
    return m->loss;
}

void gptc_model_zero_grad(gptc_model *m) { memset(m->grads, 0, m->num_floats * sizeof(float)); }

void gptc_model_backward(gptc_model *m, float dloss_scale) {
    const gptc_kernels *k = m->k;
    int B = m->B_last, T = m->T_last;
    int L = m->cfg.layers, C = m->cfg.channels, NH = m->cfg.heads, V = m->cfg.vocab, Vp = m->Vp;
    int BT = B * T;
    gptc_acts *a = &m->a;
    gptc_dacts *d = &m->d;
    gptc_weights *w = &m->w, *g = &m->g;

    memset(d->dres_out, 0, sizeof(float) * (size_t)BT * C);
    memset(d->dlnf, 0, sizeof(float) * (size_t)BT * C);
    memset(d->dlogits, 0, sizeof(float) * (size_t)BT * Vp);
    /* a->logits holds the probabilities after the loss */
    k->crossentropy_bwd(d->dlogits, a->logits, m->targets, dloss_scale / BT, BT, V, Vp);
    k->gemm(0, 0, BT, C, V, d->dlogits, Vp, w->wte, C, 1.0f, d->dlnf, C);
    k->gemm(1, 0, V, C, BT, d->dlogits, Vp, a->lnf, C, 1.0f, g->wte, C);
    k->layernorm_bwd(d->dres_out, g->lnfw, g->lnfb, d->dlnf, a->residual3[L - 1], w->lnfw, a->lnf_mean, a->lnf_rstd,
                     BT, C);
    for (int l = L - 1; l >= 0; l--) {
        const gptc_layer *lw = &w->layer[l];
        gptc_layer *lg = &g->layer[l];
        float *res = l == 0 ? a->encoded : a->residual3[l - 1];
        memset(d->layer_block, 0, sizeof(float) * d->layer_floats);
        memset(d->dres_in, 0, sizeof(float) * (size_t)BT * C);
        /* residual3 = residual2 + fcproj */
        k->residual_bwd(d->dres2, d->dfcproj, d->dres_out, (size_t)BT * C);
        linear_bwd(k, d->dfch_gelu, lg->fcprojw, lg->fcprojb, d->dfcproj, a->fch_gelu[l], lw->fcprojw, BT, 4 * C, C);
        k->gelu_bwd(d->dfch, a->fch[l], d->dfch_gelu, (size_t)BT * 4 * C);
        linear_bwd(k, d->dln2, lg->fcw, lg->fcb, d->dfch, a->ln2[l], lw->fcw, BT, C, 4 * C);
        k->layernorm_bwd(d->dres2, lg->ln2w, lg->ln2b, d->dln2, a->residual2[l], lw->ln2w, a->ln2_mean[l],
                         a->ln2_rstd[l], BT, C);
        /* residual2 = res + attproj */
        k->residual_bwd(d->dres_in, d->dattproj, d->dres2, (size_t)BT * C);
        linear_bwd(k, d->datty, lg->attprojw, lg->attprojb, d->dattproj, a->atty[l], lw->attprojw, BT, C, C);
        if (m->naive_attention) {
            k->attention_bwd(d->dqkv, d->dpreatt, d->datt, d->datty, a->qkv[l], a->att[l], B, T, C, NH);
        } else {
            gptc_rows_to_heads(d->dout_heads, d->datty, B, T, C, NH);
            gptc_flash_bwd()(d->dq, d->dk, d->dv, d->dout_heads, a->q[l], a->k[l], a->v[l], a->o[l], a->lse[l], B, NH,
                             T, C / NH, 0.0f, 0);
            gptc_heads_to_qkv_grad(d->dqkv, d->dq, d->dk, d->dv, B, T, C, NH);
        }
        linear_bwd(k, d->dln1, lg->qkvw, lg->qkvb, d->dqkv, a->ln1[l], lw->qkvw, BT, C, 3 * C);
        k->layernorm_bwd(d->dres_in, lg->ln1w, lg->ln1b, d->dln1, res, lw->ln1w, a->ln1_mean[l], a->ln1_rstd[l], BT,
                         C);
        float *t = d->dres_out; /* the input gradient of this layer is the output gradient of the next */
        d->dres_out = d->dres_in;
        d->dres_in = t;
    }
    k->encoder_bwd(g->wte, g->wpe, d->dres_out, m->inputs, B, T, C);
}
