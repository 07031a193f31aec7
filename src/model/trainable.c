/* trainable.c — what training updates (gpt2.h gptc_pset): the --freeze patterns and the tensors they
 * match, the trainable set's table and its compact gradient arena (built by gptc_model_alloc_train), the
 * watermark map of the backward's grads_ready, and what the optimizer's writes change. */
#include "model/gpt2.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* one dotted component of a pattern against one of a name: equal, "*", a glob, or a range "A-B" of
 * integers (both ends included) */
static bool component_match(const char *p, size_t pn, const char *c, size_t cn) {
    char pat[64], comp[64];
    if (pn >= sizeof pat || cn >= sizeof comp) return false;
    memcpy(pat, p, pn);
    pat[pn] = '\0';
    memcpy(comp, c, cn);
    comp[cn] = '\0';
    long a, b, v;
    char *end;
    if (isdigit((unsigned char)pat[0]) && sscanf(pat, "%ld-%ld", &a, &b) == 2 && strchr(pat, '-')) {
        if (!isdigit((unsigned char)comp[0])) return false;
        v = strtol(comp, &end, 10);
        return *end == '\0' && v >= a && v <= b;
    }
    return fnmatch(pat, comp, 0) == 0;
}

bool gptc_freeze_match(const char *pattern, const char *name) {
    if (fnmatch(pattern, name, 0) == 0) return true; /* the whole name: "*.bias" */
    /* component by component, the pattern a prefix of the name: "wte", "h.0-9.*", "h.*.attn" */
    const char *p = pattern, *n = name;
    while (*p) {
        if (!*n) return false;
        size_t pn = strcspn(p, "."), nn = strcspn(n, ".");
        if (!component_match(p, pn, n, nn)) return false;
        p += pn;
        n += nn;
        if (*p == '.') p++;
        if (*n == '.') n++;
    }
    return true;
}

gptc_status gptc_model_freeze(gptc_model *m, const char *patterns, int *nfrozen) {
    GPTC_ASSERT(!m->grads && !m->act_arena);
    *nfrozen = 0;
    if (!m->frozen && !(m->frozen = gptc_alloc(sizeof(bool) * (size_t)m->ntensors, "frozen flags")))
        return GPTC_ERR_NOMEM;
    memset(m->frozen, 0, sizeof(bool) * (size_t)m->ntensors);
    const char *p = patterns;
    char pat[96];
    int got;
    while ((got = gptc_list_next(&p, pat, sizeof pat)) != 0) {
        if (got < 0)
            return gptc_fail(GPTC_ERR_ARG, "'freeze' %s: an empty or overlong pattern; give comma-separated tensor "
                             "names or patterns such as wte,wpe,h.0-9.*", patterns);
        int hits = 0;
        for (int i = 0; i < m->ntensors; i++)
            if (gptc_freeze_match(pat, m->tensors[i].name)) {
                hits++;
                m->frozen[i] = true;
            }
        if (!hits)
            return gptc_fail(GPTC_ERR_ARG, "'freeze' %s: '%s' matches no tensor of this model; names are Hugging Face "
                             "GPT-2's without 'transformer.' (wte, wpe, h.N.attn.c_attn.weight, ln_f; h.0-9.* takes "
                             "layers 0 to 9)", patterns, pat);
    }
    for (int i = 0; i < m->ntensors; i++) *nfrozen += m->frozen[i];
    if (*nfrozen == m->ntensors)
        return gptc_fail(GPTC_ERR_ARG, "'freeze' %s: freezes every tensor; nothing would train", patterns);
    return GPTC_OK;
}

size_t gptc_pset_ready(const gptc_pset *ps, size_t lo) {
    for (int i = 0; i < ps->n; i++)
        if (ps->t[i].ready >= lo) return ps->t[i].offset;
    return ps->floats;
}

/* 64-byte aligned, as the parameter arena's tensors */
static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

int gptc_model_trainable_table(const gptc_tensor_desc *tensors, int n, const bool *frozen, gptc_tensor_desc *out,
                               size_t *floats) {
    size_t at = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (frozen[i]) continue;
        if (out) {
            out[k] = tensors[i];
            out[k].src = tensors[i].offset;
            out[k].ready = tensors[i].offset;
            out[k].offset = at;
        }
        at += align16(tensors[i].numel); /* wte: its V real rows (no gradient reaches the padding) */
        k++;
    }
    if (floats) *floats = at;
    return k;
}

void gptc_model_pset_changed(gptc_model *m, size_t lo, size_t hi) {
    const gptc_pset *ps = &m->ps;
    if (ps->adapters) return; /* the base never changes; the adapters have no derived copy */
    if (ps->same_layout) {
        gptc_model_params_changed(m, lo, hi);
        return;
    }
    for (int i = 0; i < ps->n; i++) {
        const gptc_tensor_desc *d = &ps->t[i];
        size_t a = d->offset > lo ? d->offset : lo, b = d->offset + d->numel < hi ? d->offset + d->numel : hi;
        if (a < b) gptc_model_params_changed(m, d->src + (a - d->offset), d->src + (b - d->offset));
    }
}

double gptc_model_step_flops_per_token(const gptc_model *m, int T) {
    const gptc_model_config *c = &m->cfg;
    if (!m->lora && !m->frozen) return gptc_model_flops_per_token(c, T);
    double C = c->channels, L = c->layers, V = c->vocab, layer = 12 * C * C; /* a block's weights */
    double nb = L - (m->bwd_floor > 0 ? m->bwd_floor : 0);                   /* blocks the backward runs */
    double fwd = 2 * (L * layer + V * C) + 4 * L * C * T;                    /* products, attention */
    double dx = 2 * (nb * layer + V * C) + 8 * nb * C * T;                   /* input gradients, attention's */
    double dw = 0;                                                           /* weight gradients */
    for (int i = 0; !m->lora && i < m->ps.n; i++)
        if (m->ps.t[i].ndim == 2 && strcmp(m->ps.t[i].name, "wpe.weight") != 0) dw += 2.0 * m->ps.t[i].numel;
    for (int i = 0; m->lora && i < m->lora->ntensors; i++) dw += 6.0 * m->lora->tensors[i].numel; /* r (in + out) */
    return fwd + dx + dw;
}
