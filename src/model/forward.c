/* forward.c — the GPT-2 forward and backward passes, one backend operator per line (backend/ops.h:
 * each call names its profiler span and layer; the backend runs the bound kernel and records its cost).
 *
 * Two ways through the same mathematics, chosen by m->fuse before the arenas are allocated (and bound
 * into the backend): fused (the trainer's default): each linear layer's bias is added in its GEMM's
 * epilogue, each residual add is fused with the LayerNorm that reads it (forward and backward), and the
 * tied classifier + softmax + cross-entropy runs in chunks of GPTC_CLASSIFIER_CHUNK rows, so the
 * (B,T,Vp) logits are never held whole; a training step (gptc_model_forward_backward) forms each
 * chunk's gradient while its logits are in memory; unfused (the reference path, and what a caller that
 * wants the logits uses): separate bias, residual and LayerNorm kernels and the whole (B,T,Vp) logits
 * kept after the forward. Either way, m->recompute (gpt2.h, gptc_acts) drops activations after the
 * forward; the backward reruns the forward's code for them (recompute_layer), so every level gives
 * the same bits. Under bf16 storage (gpt2.h gptc_acts.act16) the LayerNorm outputs, the GELU output and
 * the flash attention's atty are bf16 arrays: their producers and the GEMMs that read them take the
 * flags a->act16 / a->atty16 (backend/ops.h), the step's bits being those of fp32 storage. With
 * m->fused_update the layers' gradients share one slot, zeroed before each layer's backward, and
 * gptc_model_backward_layers runs the body's backward a second time (gpt2.h) for the trainer's
 * per-layer updates. */
#include "model/gpt2.h"

#include <stdlib.h>
#include <string.h>

/* ---- dropout sites: each has its own stream of the step's seed (kernels/dropout.h) */
enum { DROP_EMBED = 0, DROP_ATTN_RES = 1, DROP_MLP_RES = 2, DROP_ATTN_PROBS = 3 };
static uint64_t drop_stream(int site, int l) { return (uint64_t)site << 32 | (uint32_t)(l + 1); }
/* the flash attention takes a seed only: one per layer, mixed from the step's seed */
static uint64_t attn_drop_seed(const gptc_model *m, int l) {
    return gptc_hash64(m->dropout_seed ^ (drop_stream(DROP_ATTN_PROBS, l) * 0x9E3779B97F4A7C15ULL));
}

/* The weight w (a tensor of m->params) as the products read it: under O2 its bf16 working copy
 * (m->params16, same offset), else itself; W16(m) says which. */
static const void *W(const gptc_model *m, const float *w) {
    return m->params16 ? (const void *)(m->params16 + (w - m->params)) : (const void *)w;
}
#define W16(m) ((m)->params16 != NULL)

/* Layer l's weight w at site (GPTC_LORA_*) as its products read it: W(m, w) and, where the model keeps them
 * (gpt2.h gptc_packed_weights), its packed forms */
static gptc_be_weight LW(const gptc_model *m, int l, int site, const float *w) {
    return (gptc_be_weight){W(m, w), W16(m), gptc_model_packed_form(m, l, site, GPTC_PACK_FWD),
                            gptc_model_packed_form(m, l, site, GPTC_PACK_DX)};
}

/* A LayerNorm's dw, db gradient views, or for a frozen one (NULL view) the model's scratch (never read). */
static float *GW(const gptc_model *m, float *dw) { return dw ? dw : m->gscratch; }
static float *GB(const gptc_model *m, float *db) { return db ? db : m->gscratch + m->cfg.channels; }

/* The input of block l (B,T,C): the embeddings, or the previous block's output. */
static float *block_input(const gptc_model *m, int l) { return l == 0 ? m->a.encoded : m->a.residual3[l - 1]; }

/* ln1[l] (B,T,C), its mean and rstd (B,T) from block l's input. Only layer 0's forward and the block
 * recompute call this; the forward normalises the other layers' inputs in the previous layer's
 * residual+LayerNorm. Fused, that is residual_layernorm_fwd, which every kernel level computes with the
 * same operations in the same order as residual_fwd then layernorm_fwd (kernels.h; checked per level
 * by tests/test_recompute.c), so layernorm_fwd on the stored sum gives the forward's bits. */
static void ln1_forward(gptc_model *m, int l, int BT) {
    const gptc_layer *w = &m->w.layer[l];
    gptc_be_layernorm_fwd(&m->be, "ln1.fwd", l, m->a.ln1[l], m->a.act16, m->a.ln1_mean[l], m->a.ln1_rstd[l],
                          block_input(m, l), w->ln1w, w->ln1b, BT, m->cfg.channels);
}

/* atty[l] (B,T,C) from qkv[l] (B,T,3C), keeping what the attention's backward reads: naive, preatt
 * and att (B,NH,T,T); flash, the head-major q, k, v, o (B,NH,T,HS) and lse (B,NH,T). */
static void attention_forward(gptc_model *m, int l, int B, int T) {
    const gptc_backend *be = &m->be;
    int C = m->cfg.channels, NH = m->cfg.heads;
    gptc_acts *a = &m->a;
    if (m->naive_attention) {
        /* the naive attention writes floats: atty stays fp32 (a->atty16 is false) */
        gptc_be_attention_fwd(be, "attn.naive_fwd", l, a->atty[l], a->preatt[l], a->att[l], a->qkv[l], B, T, C, NH);
        return;
    }
    gptc_be_qkv_to_heads(be, "attn.split_heads.fwd", l, a->q[l], a->k[l], a->v[l], a->qkv[l], B, T, C, NH);
    gptc_be_flash_fwd(be, "attn.flash_fwd", l, a->o[l], a->lse[l], a->q[l], a->k[l], a->v[l], B, NH, T, C / NH,
                      m->attn_dropout, attn_drop_seed(m, l));
    gptc_be_heads_to_rows(be, "attn.merge_heads.fwd", l, a->atty[l], a->atty16, a->o[l], B, T, C, NH);
}

/* fch_gelu[l] (B,T,4C) = GELU(fch[l]) */
static void gelu_forward(gptc_model *m, int l, int BT) {
    gptc_be_gelu_fwd(&m->be, "gelu.fwd", l, m->cfg.gelu, m->a.fch_gelu[l], m->a.act16, m->a.fch[l],
                     (size_t)BT * 4 * m->cfg.channels);
}

/* ---- LoRA (gpt2.h gptc_lora): each adapted linear layer's out += scale (x A^T) B^T */
static const char *const k_lora_fwd[GPTC_LORA_SITES] = {"qkv.lora.fwd", "attn.proj.lora.fwd", "mlp.fc.lora.fwd",
                                                        "mlp.proj.lora.fwd"};
static const char *const k_lora_bwd[GPTC_LORA_SITES] = {"qkv.lora.bwd", "attn.proj.lora.bwd", "mlp.fc.lora.bwd",
                                                        "mlp.proj.lora.bwd"};

/* site s of layer l's u (B*T, r): scale * x A^T, kept from the forward for the backward (each site's region
 * holds the allocated m->B * m->T rows; a call uses the first BT) */
static float *lora_u(const gptc_model *m, int l, int s) {
    const gptc_lora *lr = m->lora;
    return lr->u + ((size_t)l * GPTC_LORA_SITES + s) * (size_t)m->B * m->T * lr->rank;
}

/* out (BT,OC) += u B^T with u = scale * x A^T (BT,r); x (BT,IC), bf16 when x16 */
static void lora_forward(gptc_model *m, int l, int s, float *out, const void *x, bool x16, int BT, int IC, int OC) {
    const gptc_lora *lr = m->lora;
    if (!lr || !lr->A[l * GPTC_LORA_SITES + s]) return;
    int r = lr->rank;
    float *u = lora_u(m, l, s);
    const gptc_backend *be = &m->be;
    gptc_be_gemm(be, GPTC_PROF_FWD, k_lora_fwd[s], l, 0, 1, BT, r, IC, x, IC, lr->A[l * GPTC_LORA_SITES + s], IC,
                 x16 ? GPTC_GEMM_A16 : 0, 0.0f, NULL, u, r);
    gptc_be_scale(be, GPTC_PROF_FWD, k_lora_fwd[s], l, u, lr->scale, (size_t)BT * r);
    gptc_be_gemm(be, GPTC_PROF_FWD, k_lora_fwd[s], l, 0, 1, BT, OC, r, u, r, lr->B[l * GPTC_LORA_SITES + s], r, 0, 1.0f,
                 NULL, out, OC);
}

/* its backward from dout (BT,OC): dB (OC,r) += dout^T u; du = scale * dout B (BT,r); dA (r,IC) += du^T x;
 * dx (BT,IC) += du A */
static void lora_backward(gptc_model *m, int l, int s, float *dx, const float *dout, const void *x, bool x16, int BT,
                          int IC, int OC) {
    const gptc_lora *lr = m->lora;
    if (!lr || !lr->A[l * GPTC_LORA_SITES + s]) return;
    int r = lr->rank, i = l * GPTC_LORA_SITES + s;
    const gptc_backend *be = &m->be;
    const char *site = k_lora_bwd[s];
    gptc_be_gemm(be, GPTC_PROF_BWD, site, l, 1, 0, OC, r, BT, dout, OC, lora_u(m, l, s), r, 0, 1.0f, NULL,
                 gptc_lora_grad(lr, lr->B[i]), r);
    gptc_be_gemm(be, GPTC_PROF_BWD, site, l, 0, 0, BT, r, OC, dout, OC, lr->B[i], r, 0, 0.0f, NULL, lr->du, r);
    gptc_be_scale(be, GPTC_PROF_BWD, site, l, lr->du, lr->scale, (size_t)BT * r);
    gptc_be_gemm(be, GPTC_PROF_BWD, site, l, 1, 0, r, IC, BT, lr->du, r, x, IC, x16 ? GPTC_GEMM_B16 : 0, 1.0f, NULL,
                 gptc_lora_grad(lr, lr->A[i]), IC);
    gptc_be_gemm(be, GPTC_PROF_BWD, site, l, 0, 0, BT, IC, r, lr->du, r, lr->A[i], IC, 0, 1.0f, NULL, dx, IC);
}

/* Block l from its normalised input ln1[l] through fcproj[l] (B,T,C): everything but the block's
 * output residual3[l] and the LayerNorm after it. The forward and the block recompute share it. */
static void block_forward(gptc_model *m, int l, int B, int T) {
    const gptc_backend *be = &m->be;
    int C = m->cfg.channels, BT = B * T;
    gptc_acts *a = &m->a;
    const gptc_layer *w = &m->w.layer[l];
    gptc_be_matmul_fwd(be, "qkv.fwd", l, a->qkv[l], a->ln1[l], a->act16, LW(m, l, GPTC_LORA_QKV, w->qkvw), w->qkvb, BT,
                       C, 3 * C);
    lora_forward(m, l, GPTC_LORA_QKV, a->qkv[l], a->ln1[l], a->act16, BT, C, 3 * C);
    attention_forward(m, l, B, T);
    gptc_be_matmul_fwd(be, "attn.proj.fwd", l, a->attproj[l], a->atty[l], a->atty16,
                       LW(m, l, GPTC_LORA_ATTPROJ, w->attprojw), w->attprojb, BT, C,
                       C);
    lora_forward(m, l, GPTC_LORA_ATTPROJ, a->attproj[l], a->atty[l], a->atty16, BT, C, C);
    gptc_be_dropout_fwd(be, "attn.dropout.fwd", l, a->attproj[l], (size_t)BT * C, m->dropout, m->dropout_seed,
                        drop_stream(DROP_ATTN_RES, l));
    gptc_be_residual_layernorm_fwd(be, "res+ln2.fwd", l, a->residual2[l], a->ln2[l], a->act16, a->ln2_mean[l],
                                   a->ln2_rstd[l], block_input(m, l), a->attproj[l], w->ln2w, w->ln2b, BT, C);
    gptc_be_matmul_fwd(be, "mlp.fc.fwd", l, a->fch[l], a->ln2[l], a->act16, LW(m, l, GPTC_LORA_FC, w->fcw), w->fcb, BT, C,
                       4 * C);
    lora_forward(m, l, GPTC_LORA_FC, a->fch[l], a->ln2[l], a->act16, BT, C, 4 * C);
    gelu_forward(m, l, BT);
    gptc_be_matmul_fwd(be, "mlp.proj.fwd", l, a->fcproj[l], a->fch_gelu[l], a->act16,
                       LW(m, l, GPTC_LORA_FCPROJ, w->fcprojw), w->fcprojb, BT,
                       4 * C, C);
    lora_forward(m, l, GPTC_LORA_FCPROJ, a->fcproj[l], a->fch_gelu[l], a->act16, BT, 4 * C, C);
    gptc_be_dropout_fwd(be, "mlp.dropout.fwd", l, a->fcproj[l], (size_t)BT * C, m->dropout, m->dropout_seed,
                        drop_stream(DROP_MLP_RES, l));
}

/* The transformer body: embeddings through the final LayerNorm (a->lnf). */
static void body_forward(gptc_model *m, const int *inputs, int B, int T) {
    const gptc_backend *be = &m->be;
    int L = m->cfg.layers, C = m->cfg.channels, BT = B * T;
    gptc_acts *a = &m->a;
    gptc_be_phase_begin(be, "forward", -1);
    gptc_be_encoder_fwd(be, "encoder.fwd", a->encoded, inputs, m->w.wte, m->w.wpe, B, T, C);
    gptc_be_dropout_fwd(be, "embed.dropout.fwd", -1, a->encoded, (size_t)BT * C, m->dropout, m->dropout_seed,
                        drop_stream(DROP_EMBED, -1));
    ln1_forward(m, 0, BT);
    for (int l = 0; l < L; l++) {
        block_forward(m, l, B, T);
        /* residual3 = residual2 + fcproj, normalised by the next layer's ln_1 (or ln_f) in the same pass */
        bool last = l == L - 1;
        const gptc_layer *next = last ? NULL : &m->w.layer[l + 1];
        gptc_be_residual_layernorm_fwd(be, last ? "res+lnf.fwd" : "res+ln1.fwd", l, a->residual3[l],
                                       last ? a->lnf : a->ln1[l + 1], a->act16, last ? a->lnf_mean : a->ln1_mean[l + 1],
                                       last ? a->lnf_rstd : a->ln1_rstd[l + 1], a->residual2[l], a->fcproj[l],
                                       last ? m->w.lnfw : next->ln1w, last ? m->w.lnfb : next->ln1b, BT, C);
    }
    gptc_be_phase_end(be);
}

/* Before layer l's backward: recomputes what m->recompute dropped, with the forward's kernels on the
 * forward's inputs, so the values are the forward's bit for bit. The last layer needs nothing after
 * the forward (`again` false): its forward ran last, so the shared buffers still hold its activations;
 * in a second backward pass (again) they hold layer 0's, so it is recomputed too. */
static void recompute_layer(gptc_model *m, int l, int B, int T, bool again) {
    if (m->recompute == GPTC_RECOMPUTE_NONE || (l == m->cfg.layers - 1 && !again)) return;
    gptc_be_phase_begin(&m->be, "recompute", l);
    if (m->recompute == GPTC_RECOMPUTE_BLOCK) {
        ln1_forward(m, l, B * T);
        block_forward(m, l, B, T);
    } else {
        if (m->recompute >= GPTC_RECOMPUTE_ATTN) attention_forward(m, l, B, T);
        gelu_forward(m, l, B * T);
    }
    gptc_be_phase_end(&m->be);
}

/* Tells m->grads_ready that the gradients from tensor i to the end of the arena are final (as the
 * trainable set's compact watermark, gpt2.h gptc_pset_ready). */
static void grads_ready(gptc_model *m, int i) {
    if (m->grads_ready) m->grads_ready(m->grads_ready_user, gptc_pset_ready(&m->ps, i == 0 ? 0 : m->tensors[i].offset));
}

/* Layer l's attention backward: dqkv (B,T,3C) += from datty (B,T,C). */
static void attention_backward(gptc_model *m, int l, int B, int T) {
    const gptc_backend *be = &m->be;
    int C = m->cfg.channels, NH = m->cfg.heads;
    gptc_acts *a = &m->a;
    gptc_dacts *d = &m->d;
    if (m->naive_attention) {
        gptc_be_attention_bwd(be, "attn.naive_bwd", l, d->dqkv, d->dpreatt, d->datt, d->datty, a->qkv[l], a->att[l], B,
                              T, C, NH);
        return;
    }
    gptc_be_rows_to_heads(be, "attn.split_heads.bwd", l, d->dout_heads, d->datty, B, T, C, NH);
    gptc_be_flash_bwd(be, "attn.flash_bwd", l, d->dq, d->dk, d->dv, d->dout_heads, a->q[l], a->k[l], a->v[l], a->o[l],
                      a->lse[l], B, NH, T, C / NH, m->attn_dropout, attn_drop_seed(m, l));
    gptc_be_heads_to_qkv_grad(be, "attn.merge_heads.bwd", l, d->dqkv, d->dq, d->dk, d->dv, B, T, C, NH);
}

/* Where the product that finishes tensor i's gradient leaves its sum of squares (m->wsumsq, marked set), or NULL */
static double *wsumsq_slot(gptc_model *m, int i) {
    if (!m->wsumsq) return NULL;
    m->wsumsq->set[i] = true;
    return &m->wsumsq->sums[i];
}

/* The same for layer l's weight j (GPTC_QKVW, ...) with gradient grad: NULL also without one (frozen) and in the
 * fused update's second pass */
static double *wsumsq_of(gptc_model *m, int l, int j, const float *grad, bool again) {
    return grad && !again ? wsumsq_slot(m, 2 + l * GPTC_LAYER_TENSORS + j) : NULL;
}

static void embeddings_backward(gptc_model *m, const float *dout, int B, int T);

/* The body's backward from d->dlnf (B,T,C), accumulating into the gradients. With m->fused_update the
 * layers' gradient views are one slot, zeroed before each layer's backward. again: fused_update's
 * second pass (gptc_model_backward_layers): ln_f's gradient into scratch, every layer recomputed, no
 * embeddings' backward. */
static void body_backward(gptc_model *m, int B, int T, bool again) {
    const gptc_backend *be = &m->be;
    int L = m->cfg.layers, C = m->cfg.channels, BT = B * T;
    gptc_acts *a = &m->a;
    gptc_dacts *d = &m->d;
    gptc_weights *w = &m->w, *g = &m->g;
    size_t btc = (size_t)BT * C;
    gptc_be_phase_begin(be, "backward", -1);
    /* the second pass must not add ln_f's gradient again: it goes to the slot's ln_1 part (C + C floats),
     * zeroed before layer L-1's backward */
    gptc_be_layernorm_bwd_residual(be, "lnf.bwd", -1, d->dres_out, again ? g->layer[0].ln1w : GW(m, g->lnfw),
                                   again ? g->layer[0].ln1b : GB(m, g->lnfb), NULL, d->dlnf, a->residual3[L - 1], w->lnfw,
                                   a->lnf_mean, a->lnf_rstd, BT, C);
    if (!again) grads_ready(m, m->ntensors - 2); /* ln_f.weight, ln_f.bias */
    /* layers below bwd_floor hold nothing trainable (gpt2.h): their backward is not run */
    for (int l = L - 1; l >= (m->bwd_floor > 0 ? m->bwd_floor : 0); l--) {
        const gptc_layer *lw = &w->layer[l];
        gptc_layer *lg = &g->layer[l];
        recompute_layer(m, l, B, T, again);
        const float dw_beta = m->grads_fresh ? 0.0f : 1.0f; /* the weights' gradients: unzeroed, or accumulated */
        /* only the buffers the kernels accumulate into need zeroing; the rest are overwritten (and, under
         * fused_update, the layers' one gradient slot) */
        float *const acc[] = {d->dfch, d->dqkv, d->dq, d->dk, d->dv};
        const size_t acc_n[] = {4 * btc, 3 * btc, btc, btc, btc};
        if (m->fused_update) {
            float *const slot[] = {m->cgrads + m->layer_lo};
            gptc_be_zero(be, GPTC_PROF_BWD, "zero.slot", l, 1, slot, &m->layer_stride);
        }
        gptc_be_zero(be, GPTC_PROF_BWD, "zero.bwd", l, m->naive_attention ? 2 : 5, acc, acc_n);
        /* residual3 = residual2 + dropout(fcproj): both receive dres_out, the branch through its mask
         * (into dln2, free until the MLP's input gradient overwrites it) */
        const float *dbranch = gptc_be_dropout_bwd(be, "mlp.dropout.bwd", l, d->dln2, d->dres_out, btc, m->dropout,
                                                   m->dropout_seed, drop_stream(DROP_MLP_RES, l));
        gptc_be_matmul_bwd(be, GPTC_LINEAR_SITES("mlp.proj"), l, d->dfch_gelu, lg->fcprojw, dw_beta, lg->fcprojb,
                           dbranch, a->fch_gelu[l], a->act16, LW(m, l, GPTC_LORA_FCPROJ, lw->fcprojw), BT, 4 * C, C,
                           wsumsq_of(m, l, GPTC_FCPROJW, lg->fcprojw, again));
        lora_backward(m, l, GPTC_LORA_FCPROJ, d->dfch_gelu, dbranch, a->fch_gelu[l], a->act16, BT, 4 * C, C);
        gptc_be_gelu_bwd(be, "gelu.bwd", l, m->cfg.gelu, d->dfch, a->fch[l], d->dfch_gelu, 4 * btc);
        gptc_be_matmul_bwd(be, GPTC_LINEAR_SITES("mlp.fc"), l, d->dln2, lg->fcw, dw_beta, lg->fcb, d->dfch, a->ln2[l],
                           a->act16, LW(m, l, GPTC_LORA_FC, lw->fcw), BT, C, 4 * C,
                           wsumsq_of(m, l, GPTC_FCW, lg->fcw, again));
        lora_backward(m, l, GPTC_LORA_FC, d->dln2, d->dfch, a->ln2[l], a->act16, BT, C, 4 * C);
        /* dres2 = dres_out (through the skip) + ln_2's backward */
        gptc_be_layernorm_bwd_residual(be, "res+ln2.bwd", l, d->dres2, GW(m, lg->ln2w), GB(m, lg->ln2b), d->dres_out,
                                       d->dln2, a->residual2[l], lw->ln2w, a->ln2_mean[l], a->ln2_rstd[l], BT, C);
        /* residual2 = res + dropout(attproj): both receive dres2, the branch through its mask (dln2 is free again) */
        dbranch = gptc_be_dropout_bwd(be, "attn.dropout.bwd", l, d->dln2, d->dres2, btc, m->dropout, m->dropout_seed,
                                      drop_stream(DROP_ATTN_RES, l));
        gptc_be_matmul_bwd(be, GPTC_LINEAR_SITES("attn.proj"), l, d->datty, lg->attprojw, dw_beta, lg->attprojb,
                           dbranch, a->atty[l], a->atty16, LW(m, l, GPTC_LORA_ATTPROJ, lw->attprojw), BT, C, C,
                           wsumsq_of(m, l, GPTC_ATTPROJW, lg->attprojw, again));
        lora_backward(m, l, GPTC_LORA_ATTPROJ, d->datty, dbranch, a->atty[l], a->atty16, BT, C, C);
        attention_backward(m, l, B, T);
        gptc_be_matmul_bwd(be, GPTC_LINEAR_SITES("qkv"), l, d->dln1, lg->qkvw, dw_beta, lg->qkvb, d->dqkv, a->ln1[l],
                           a->act16, LW(m, l, GPTC_LORA_QKV, lw->qkvw), BT, C, 3 * C,
                           wsumsq_of(m, l, GPTC_QKVW, lg->qkvw, again));
        lora_backward(m, l, GPTC_LORA_QKV, d->dln1, d->dqkv, a->ln1[l], a->act16, BT, C, 3 * C);
        /* dres_in = dres2 (through the skip) + ln_1's backward */
        gptc_be_layernorm_bwd_residual(be, "res+ln1.bwd", l, d->dres_in, GW(m, lg->ln1w), GB(m, lg->ln1b), d->dres2,
                                       d->dln1, block_input(m, l), lw->ln1w, a->ln1_mean[l], a->ln1_rstd[l], BT, C);
        float *t = d->dres_out; /* the input gradient of this layer is the output gradient of the next */
        d->dres_out = d->dres_in;
        d->dres_in = t;
        grads_ready(m, 2 + l * GPTC_LAYER_TENSORS); /* after wte, wpe: layer l's first tensor */
    }
    if (!again && m->bwd_floor < 0) {
        gptc_be_dropout_bwd(be, "embed.dropout.bwd", -1, d->dres_out, d->dres_out, btc, m->dropout, m->dropout_seed,
                            drop_stream(DROP_EMBED, -1)); /* in place: read only here */
        embeddings_backward(m, d->dres_out, B, T);
    }
    if (!again) grads_ready(m, 0);
    m->grads_fresh = false; /* a later backward adds to these gradients */
    gptc_be_phase_end(be); /* backward */
}

/* Row r of lnf (C wide), as stored (bf16 under bf16 storage) */
static const void *lnf_row(const gptc_model *m, int r) {
    size_t off = (size_t)r * m->cfg.channels;
    return m->a.act16 ? (const void *)((const uint16_t *)m->a.lnf + off) : (const void *)((const float *)m->a.lnf + off);
}

/* logits (n,Vp) = x (n,C) @ wte[:V]^T; x rows of lnf (bf16 when m->a.act16); the padding columns are not computed */
static void classifier_fwd(gptc_model *m, const void *x, int n, float *logits) {
    int C = m->cfg.channels, V = m->cfg.vocab;
    const void *packed = gptc_model_packed_form(m, -1, 0, GPTC_PACK_FWD); /* wte^T read in place, transB 0 */
    int in16 = (m->a.act16 ? GPTC_GEMM_A16 : 0) | (packed ? GPTC_GEMM_B_PACKED : W16(m) ? GPTC_GEMM_B16 : 0);
    gptc_be_gemm(&m->be, GPTC_PROF_FWD, "classifier.fwd", -1, 0, !packed, n, V, C, x, C,
                 packed ? packed : W(m, m->w.wte), C, in16, 0.0f, NULL, logits, m->Vp);
}

/* dx (n,C) = dlogits (n,Vp) @ wte[:V]; wte's gradient (Vp,C) += dlogits^T x (x as in classifier_fwd), or = it
 * for the first chunk after gptc_model_zero_grad left it unzeroed (first && m->grads_fresh) */
static void classifier_bwd(gptc_model *m, const float *dlogits, const void *x, int n, float *dx, bool first) {
    int C = m->cfg.channels, V = m->cfg.vocab, Vp = m->Vp;
    const void *packed = gptc_model_packed_form(m, -1, 0, GPTC_PACK_DX);
    gptc_be_gemm(&m->be, GPTC_PROF_BWD, "classifier.dx.bwd", -1, 0, 0, n, C, V, dlogits, Vp,
                 packed ? packed : W(m, m->w.wte), C, packed ? GPTC_GEMM_B_PACKED : W16(m) ? GPTC_GEMM_B16 : 0, 0.0f, NULL,
                 dx, C);
    if (!m->g.wte) return; /* wte frozen */
    /* wte's share of the norm (m->wsumsq): each chunk's product finishes all of its rows, so the last one's sum
     * holds (its padding rows are zero); the embeddings' backward corrects it for the rows it adds to */
    gptc_be_gemm_sumsq(&m->be, GPTC_PROF_BWD, "classifier.dw.bwd", -1, 1, 0, V, C, n, dlogits, Vp, x, C,
                       m->a.act16 ? GPTC_GEMM_B16 : 0, first && m->grads_fresh ? 0.0f : 1.0f, NULL, m->g.wte, C,
                       wsumsq_slot(m, 0));
}

static int cmp_int(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The embeddings' backward (dwte, dwpe += from dout (B,T,C)); where m->wsumsq holds wte's share of the norm from the
 * classifier's product, that share is corrected by the sums of squares of the rows the batch's tokens touch,
 * taken before and after (each distinct token once, in increasing order). */
static void embeddings_backward(gptc_model *m, const float *dout, int B, int T) {
    const gptc_backend *be = &m->be;
    const int C = m->cfg.channels, n = B * T;
    float *dwte = m->g.wte;
    gptc_wsumsq *ws = m->wsumsq && dwte && m->wsumsq->set[0] ? m->wsumsq : NULL;
    int nrows = 0;
    if (ws) {
        memcpy(ws->rows, m->inputs, sizeof(int) * (size_t)n);
        qsort(ws->rows, (size_t)n, sizeof(int), cmp_int);
        for (int i = 0; i < n; i++)
            if (i == 0 || ws->rows[i] != ws->rows[nrows - 1]) ws->rows[nrows++] = ws->rows[i];
    }
    const double before = ws ? gptc_be_rows_sumsq(be, dwte, C, ws->rows, nrows, ws->part) : 0;
    gptc_be_encoder_bwd(be, "encoder.bwd", dwte, m->g.wpe, dout, m->inputs, B, T, C);
    if (ws) ws->sums[0] += gptc_be_rows_sumsq(be, dwte, C, ws->rows, nrows, ws->part) - before;
}

/* The fused classifier on rows [r0, r0+n) of lnf: logits (n,Vp) in a->logits (the chunk buffer),
 * losses; with grad, also dlnf rows = dlogits @ wte and wte's gradient += dlogits^T lnf rows,
 * dlogits = (softmax - onehot) * dloss formed in place of the logits. */
static void classifier_chunk(gptc_model *m, int r0, int n, bool grad, float dloss) {
    int C = m->cfg.channels, V = m->cfg.vocab, Vp = m->Vp;
    const void *x = lnf_row(m, r0);
    float *logits = m->a.logits;
    classifier_fwd(m, x, n, logits);
    if (!grad) {
        gptc_be_crossentropy_fwd(&m->be, "xent.fwd", m->a.losses + r0, logits, logits, m->targets + r0, n, V, Vp);
        return;
    }
    gptc_be_crossentropy_fused(&m->be, "xent.fused", m->a.losses + r0, logits, m->targets + r0, dloss, n, V, Vp);
    classifier_bwd(m, logits, x, n, m->d.dlnf + (size_t)r0 * C, r0 == 0);
}

static void classifier_chunks(gptc_model *m, int BT, bool grad, float dloss) {
    gptc_be_phase_begin(&m->be, "classifier", -1);
    for (int r0 = 0; r0 < BT; r0 += GPTC_CLASSIFIER_CHUNK)
        classifier_chunk(m, r0, BT - r0 < GPTC_CLASSIFIER_CHUNK ? BT - r0 : GPTC_CLASSIFIER_CHUNK, grad, dloss);
    gptc_be_phase_end(&m->be);
}

/* Records the mean of the (B,T) losses and the shape the backward will use; returns the mean. The
 * losses are read on the host (the CPU backend's memory is the host's). */
static float finish_loss(gptc_model *m, int B, int T) {
    m->be.mem->synchronize();
    double sum = 0;
    for (int i = 0; i < B * T; i++) sum += m->a.losses[i];
    m->loss = (float)(sum / (B * T));
    m->B_last = B;
    m->T_last = T;
    return m->loss;
}

/* Copies the batch to the backend and checks the shape against the arenas; repacks the stale packed weights. */
static void take_batch(gptc_model *m, const int *inputs, const int *targets, int B, int T) {
    GPTC_ASSERT(m->act_arena && B <= m->B && T <= m->T);
    gptc_model_packed_refresh(m); /* the weights' packed forms, where an update left them stale */
    /* the arenas are planned for (m->B, m->T); smaller calls use the same views, which stay valid
     * because every activation is indexed with the call's own B and T */
    m->be.mem->copy_h2d(m->inputs, inputs, sizeof(int) * B * T);
    if (targets) m->be.mem->copy_h2d(m->targets, targets, sizeof(int) * B * T);
}

float gptc_model_forward(gptc_model *m, const int *inputs, const int *targets, int B, int T) {
    int V = m->cfg.vocab, Vp = m->Vp, BT = B * T;
    gptc_acts *a = &m->a;
    /* the fused path keeps no whole logits: asking it for them is a programming error */
    GPTC_ASSERT(targets || !m->fuse);
    take_batch(m, inputs, targets, B, T);
    body_forward(m, m->inputs, B, T);
    if (!targets) {
        gptc_be_phase_begin(&m->be, "classifier", -1);
        classifier_fwd(m, a->lnf, BT, a->logits);
        gptc_be_phase_end(&m->be);
        m->loss = 0;
        return 0;
    }
    if (m->fuse) {
        classifier_chunks(m, BT, false, 0.0f);
    } else {
        gptc_be_phase_begin(&m->be, "classifier", -1);
        classifier_fwd(m, a->lnf, BT, a->logits);
        /* probabilities in place */
        gptc_be_crossentropy_fwd(&m->be, "xent.fwd", a->losses, a->logits, a->logits, m->targets, BT, V, Vp);
        gptc_be_phase_end(&m->be);
    }
    return finish_loss(m, B, T);
}

void gptc_model_zero_grad(gptc_model *m) {
    if (m->zero_count) { /* the products overwrite the rest (gpt2.h grads_fresh) */
        gptc_be_zero(&m->be, GPTC_PROF_OPT, "zero_grad", -1, m->zero_count, m->zero_bufs, m->zero_ns);
        m->grads_fresh = true;
        return;
    }
    float *const grads[] = {m->fused_update ? m->cgrads : m->grads};
    const size_t n[] = {m->fused_update ? m->cgrad_floats : m->ps.floats}; /* the trainable set's compact arena */
    gptc_be_zero(&m->be, GPTC_PROF_OPT, "zero_grad", -1, 1, grads, n);
}

void gptc_model_backward(gptc_model *m, float dloss_scale) {
    int B = m->B_last, T = m->T_last, BT = B * T;
    int V = m->cfg.vocab, Vp = m->Vp;
    gptc_acts *a = &m->a;
    gptc_dacts *d = &m->d;
    if (m->fuse) {
        /* the forward kept only the losses: the classifier runs again, chunk by chunk, with its gradient */
        classifier_chunks(m, BT, true, dloss_scale / BT);
    } else {
        gptc_be_phase_begin(&m->be, "classifier", -1);
        /* a->logits holds the probabilities after the loss */
        gptc_be_crossentropy_bwd(&m->be, "xent.bwd", d->dlogits, a->logits, m->targets, dloss_scale / BT, BT, V, Vp);
        classifier_bwd(m, d->dlogits, a->lnf, BT, d->dlnf, true);
        gptc_be_phase_end(&m->be);
    }
    body_backward(m, B, T, false);
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
    body_forward(m, m->inputs, B, T);
    /* each chunk's gradient is formed while its logits are in memory: no second classifier pass */
    classifier_chunks(m, BT, true, dloss_scale / BT);
    float loss = finish_loss(m, B, T);
    body_backward(m, B, T, false);
    return loss;
}

void gptc_model_backward_layers(gptc_model *m) {
    GPTC_ASSERT(m->fused_update);
    body_backward(m, m->B_last, m->T_last, true);
}
