/* elementwise_avx2.c — AVX2+FMA elementwise kernels: GELU (tanh, erf, sigmoid forms), residual, bias,
 * layernorm, cross-entropy, encoder and AdamW (the kernel text is shared with elementwise_avx512.c). */
#include "kernels/gelu.h"
#include "kernels/x86_avx2/avx2.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#define ISA(name) gptc_avx2_##name

/* ---- 8-lane vector helpers ---- */
typedef __m256 vf;
typedef __m256i vm;
#define W 8
static inline vm tailmask(size_t n) { /* lanes 0..n-1, n <= 8 */
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline vf vld(const float *p) { return _mm256_loadu_ps(p); }
static inline vf vldm(const float *p, vm m) { return _mm256_maskload_ps(p, m); } /* others 0 */
static inline void vst(float *p, vf x) { _mm256_storeu_ps(p, x); }
static inline void vstm(float *p, vm m, vf x) { _mm256_maskstore_ps(p, m, x); }
static inline vf vset(float a) { return _mm256_set1_ps(a); }
static inline vf vadd(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vsub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vdiv(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf vsqrt(vf a) { return _mm256_sqrt_ps(a); }
static inline vf vmax(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf vmin(vf a, vf b) { return _mm256_min_ps(a, b); }
static inline vf vabs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline vf vfma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }   /* a b + c */
static inline vf vfnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); } /* c - a b */
static inline vf vround(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* 2^k for integral k in [-127, 127] (k = -127 gives 0) */
static inline vf vpow2i(vf k) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23));
}
static inline vf vsel(vm m, vf a, vf b) { return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(m)); } /* b where m */
static inline vf vzmask(vm m, vf a) { return _mm256_and_ps(a, _mm256_castsi256_ps(m)); }          /* 0 outside m */
/* b where x has its sign bit set, else a */
static inline vf vsel_neg(vf x, vf a, vf b) { return _mm256_blendv_ps(a, b, x); }
static inline float vhsum(vf a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
static inline float vhmax(vf a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

/* ---- The kernels, written once over the vector helpers above (the AVX2 and AVX-512 files share
 * this text; only the helpers differ). Each output element is computed by one thread in a fixed
 * order, and every reduction over rows keeps the reference's per-column order, so results do not
 * depend on the thread count. Elementwise loops run whole vectors in parallel and the ragged tail
 * with a masked load/store. ---- */

#define PAR_MIN_BLOCKS 1024 /* below this many vectors, stay on one thread */

/* exp(x), Cephes-style: x = k ln2 + r (two-constant Cody-Waite), |r| <= ln2/2, degree-7 polynomial.
 * About 1-2 ulp on [-87, 88]; x is clamped to [-88, 88] (exp(-88) returns 0, exp(88) = 1.65e38). */
static inline vf vexp(vf x) {
    x = vmin(vmax(x, vset(-88.0f)), vset(88.0f));
    vf k = vround(vmul(x, vset(1.44269504088896341f)));
    vf r = vfnma(k, vset(0.693359375f), x);
    r = vfnma(k, vset(-2.12194440e-4f), r);
    vf p = vset(1.9875691500e-4f);
    p = vfma(p, r, vset(1.3981999507e-3f));
    p = vfma(p, r, vset(8.3334519073e-3f));
    p = vfma(p, r, vset(4.1665795894e-2f));
    p = vfma(p, r, vset(1.6666665459e-1f));
    p = vfma(p, r, vset(5.0000001201e-1f));
    p = vfma(p, vmul(r, r), vadd(r, vset(1.0f)));
    return vmul(p, vpow2i(k));
}

/* tanh(u) = 1 - 2 / (exp(2u) + 1); the clamp in vexp makes large |u| give exactly +-1. */
static inline vf vtanh(vf u) {
    return vsub(vset(1.0f), vdiv(vset(2.0f), vadd(vexp(vadd(u, u)), vset(1.0f))));
}

/* GELU, tanh form. 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)): written this way there is
 * no cancellation for negative x. The derivative uses 1 - tanh^2 = 4 s (1 - s), 1 - s = e s. */
#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f
static inline vf gelu_tanh_f(vf x) {
    vf u = vmul(vset(GELU_S), vfma(vmul(vset(GELU_A), vmul(x, x)), x, x));
    vf e = vexp(vmul(vset(-2.0f), u));
    return vdiv(x, vadd(vset(1.0f), e));
}
static inline vf gelu_tanh_g(vf x) {
    vf x2 = vmul(x, x);
    vf u = vmul(vset(GELU_S), vfma(vmul(vset(GELU_A), x2), x, x));
    vf e = vexp(vmul(vset(-2.0f), u));
    vf s = vdiv(vset(1.0f), vadd(vset(1.0f), e)), s1 = vmul(e, s);
    vf du = vmul(vset(GELU_S), vfma(vset(3.0f * GELU_A), x2, vset(1.0f)));
    return vfma(vmul(vmul(vset(2.0f), x), vmul(s, s1)), du, s);
}

/* GELU, erf form: x Phi(x), Phi(x) = 0.5 erfc(-x/sqrt2). erfc(z), z >= 0, by Abramowitz-Stegun
 * 7.1.26 (|error| <= 1.5e-7): t = 1/(1+pz), erfc(z) = t (a1 + t (a2 + ...)) exp(-z^2); for x < 0
 * Phi = 0.5 erfc(|z|) directly (no cancellation). d/dx = Phi + x phi, phi = exp(-x^2/2)/sqrt(2 pi). */
static inline void phi_pair(vf x, vf *cdf, vf *pdf) {
    vf z = vmul(vabs(x), vset(0.70710678118654752f));
    vf t = vdiv(vset(1.0f), vfma(vset(0.3275911f), z, vset(1.0f)));
    vf q = vset(1.061405429f);
    q = vfma(q, t, vset(-1.453152027f));
    q = vfma(q, t, vset(1.421413741f));
    q = vfma(q, t, vset(-0.284496736f));
    q = vfma(q, t, vset(0.254829592f));
    vf g = vexp(vmul(vmul(z, z), vset(-1.0f)));
    vf half_erfc = vmul(vmul(q, t), vmul(g, vset(0.5f)));
    *cdf = vsel_neg(x, vsub(vset(1.0f), half_erfc), half_erfc);
    *pdf = vmul(g, vset(0.3989422804014327f));
}
static inline vf gelu_erf_f(vf x) {
    vf c, p;
    phi_pair(x, &c, &p);
    return vmul(x, c);
}
static inline vf gelu_erf_g(vf x) {
    vf c, p;
    phi_pair(x, &c, &p);
    return vfma(x, p, c);
}

/* GELU, sigmoid form: x s, s = sigmoid(1.702 x); d/dx = s + 1.702 x s (1 - s), 1 - s = e s. */
static inline vf gelu_sig_f(vf x) {
    vf e = vexp(vmul(vset(-1.702f), x));
    return vdiv(x, vadd(vset(1.0f), e));
}
static inline vf gelu_sig_g(vf x) {
    vf e = vexp(vmul(vset(-1.702f), x));
    vf s = vdiv(vset(1.0f), vadd(vset(1.0f), e)), s1 = vmul(e, s);
    return vfma(vmul(vset(1.702f), x), vmul(s, s1), s);
}

/* out (n) = fn(inp) */
#define DEF_MAP(name, fn)                                                                     \
    static void name(float *out, const float *inp, size_t n) {                                \
        size_t nb = n / W;                                                                    \
        _Pragma("omp parallel for schedule(static) if (nb >= PAR_MIN_BLOCKS)")                \
        for (size_t b = 0; b < nb; b++) vst(out + b * W, fn(vld(inp + b * W)));               \
        if (nb * W < n) {                                                                     \
            vm m = tailmask(n - nb * W);                                                      \
            vstm(out + nb * W, m, fn(vldm(inp + nb * W, m)));                                 \
        }                                                                                     \
    }
/* dinp (n) += gfn(inp) * dout */
#define DEF_GRAD(name, gfn)                                                                   \
    static void name(float *dinp, const float *inp, const float *dout, size_t n) {           \
        size_t nb = n / W;                                                                    \
        _Pragma("omp parallel for schedule(static) if (nb >= PAR_MIN_BLOCKS)")                \
        for (size_t b = 0; b < nb; b++) {                                                     \
            size_t i = b * W;                                                                 \
            vst(dinp + i, vadd(vld(dinp + i), vmul(gfn(vld(inp + i)), vld(dout + i))));       \
        }                                                                                     \
        if (nb * W < n) {                                                                     \
            size_t i = nb * W;                                                                \
            vm m = tailmask(n - i);                                                           \
            vstm(dinp + i, m, vadd(vldm(dinp + i, m), vmul(gfn(vldm(inp + i, m)), vldm(dout + i, m)))); \
        }                                                                                     \
    }

DEF_MAP(tanh_map, vtanh)
DEF_MAP(gelu_fwd, gelu_tanh_f)
DEF_GRAD(gelu_bwd, gelu_tanh_g)
DEF_MAP(gelu_erf_fwd, gelu_erf_f)
DEF_GRAD(gelu_erf_bwd, gelu_erf_g)
DEF_MAP(gelu_sig_fwd, gelu_sig_f)
DEF_GRAD(gelu_sig_bwd, gelu_sig_g)

void ISA(tanh)(float *out, const float *inp, size_t n) { tanh_map(out, inp, n); }

void ISA(gelu_fwd)(gptc_gelu_form f, float *out, const float *inp, size_t n) {
    if (f == GPTC_GELU_ERF) gelu_erf_fwd(out, inp, n);
    else if (f == GPTC_GELU_SIGMOID) gelu_sig_fwd(out, inp, n);
    else gelu_fwd(out, inp, n);
}

void ISA(gelu_bwd)(gptc_gelu_form f, float *dinp, const float *inp, const float *dout, size_t n) {
    if (f == GPTC_GELU_ERF) gelu_erf_bwd(dinp, inp, dout, n);
    else if (f == GPTC_GELU_SIGMOID) gelu_sig_bwd(dinp, inp, dout, n);
    else gelu_bwd(dinp, inp, dout, n);
}

/* out (n) = a + b */
static void residual_fwd(float *out, const float *a, const float *b, size_t n) {
    size_t nb = n / W;
#pragma omp parallel for schedule(static) if (nb >= PAR_MIN_BLOCKS)
    for (size_t k = 0; k < nb; k++) vst(out + k * W, vadd(vld(a + k * W), vld(b + k * W)));
    if (nb * W < n) {
        size_t i = nb * W;
        vm m = tailmask(n - i);
        vstm(out + i, m, vadd(vldm(a + i, m), vldm(b + i, m)));
    }
}

/* da (n) += dout, db (n) += dout */
static void residual_bwd(float *da, float *db, const float *dout, size_t n) {
    size_t nb = n / W;
#pragma omp parallel for schedule(static) if (nb >= PAR_MIN_BLOCKS)
    for (size_t k = 0; k < nb; k++) {
        size_t i = k * W;
        vf d = vld(dout + i);
        vst(da + i, vadd(vld(da + i), d));
        vst(db + i, vadd(vld(db + i), d));
    }
    if (nb * W < n) {
        size_t i = nb * W;
        vm m = tailmask(n - i);
        vf d = vldm(dout + i, m);
        vstm(da + i, m, vadd(vldm(da + i, m), d));
        vstm(db + i, m, vadd(vldm(db + i, m), d));
    }
}

/* out (N,OC) += bias (OC) */
static void bias_fwd(float *out, const float *bias, int N, int OC) {
    int cv = OC / W * W;
    vm mt = tailmask((size_t)(OC - cv));
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * OC;
        for (int j = 0; j < cv; j += W) vst(o + j, vadd(vld(o + j), vld(bias + j)));
        if (cv < OC) vstm(o + cv, mt, vadd(vldm(o + cv, mt), vldm(bias + cv, mt)));
    }
}

/* Column blocks of COLB floats run in parallel; in each column the rows are summed in order
 * n = 0..N-1 straight into the gradient, exactly as the reference does. */
#define COLB 64

/* dbias (OC) += column sums of dout (N,OC) */
static void bias_bwd(float *dbias, const float *dout, int N, int OC) {
    int nblk = (OC + COLB - 1) / COLB;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c1 = blk * COLB + COLB < OC ? blk * COLB + COLB : OC;
        for (int c = blk * COLB; c < c1; c += W) {
            vm m = tailmask((size_t)(c1 - c < W ? c1 - c : W));
            vf acc = vldm(dbias + c, m);
            for (int n = 0; n < N; n++) acc = vadd(acc, vldm(dout + (size_t)n * OC + c, m));
            vstm(dbias + c, m, acc);
        }
    }
}

/* out (B,T,C) = wte[inp] + wpe[t] */
static void encoder_fwd(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C) {
    int cv = C / W * W;
    vm mt = tailmask((size_t)(C - cv));
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *we = wte + (size_t)inp[b * T + t] * C, *pe = wpe + (size_t)t * C;
            for (int c = 0; c < cv; c += W) vst(o + c, vadd(vld(we + c), vld(pe + c)));
            if (cv < C) vstm(o + cv, mt, vadd(vldm(we + cv, mt), vldm(pe + cv, mt)));
        }
}

/* dwte (V,C) +=, dwpe (maxT,C) += ; channel blocks in parallel so repeated tokens never race, and
 * each element sums its (b,t) contributions in the reference's order */
static void encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C) {
    int nblk = (C + COLB - 1) / COLB;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c1 = blk * COLB + COLB < C ? blk * COLB + COLB : C;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                const float *d = dout + ((size_t)b * T + t) * C;
                float *dwe = dwte + (size_t)inp[b * T + t] * C, *dpe = dwpe + (size_t)t * C;
                for (int c = blk * COLB; c < c1; c += W) {
                    vm m = tailmask((size_t)(c1 - c < W ? c1 - c : W));
                    vf dv = vldm(d + c, m);
                    vstm(dwe + c, m, vadd(vldm(dwe + c, m), dv));
                    vstm(dpe + c, m, vadd(vldm(dpe + c, m), dv));
                }
            }
    }
}

/* out (N,C), mean/rstd (N), inp (N,C), w/b (C); eps 1e-5, biased variance */
static void layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                          int N, int C) {
    int cv = C / W * W;
    vm mt = tailmask((size_t)(C - cv));
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        vf acc = vset(0.0f);
        for (int c = 0; c < cv; c += W) acc = vadd(acc, vld(x + c));
        if (cv < C) acc = vadd(acc, vldm(x + cv, mt));
        float m = vhsum(acc) / C;
        vf vmean = vset(m);
        acc = vset(0.0f);
        for (int c = 0; c < cv; c += W) {
            vf d = vsub(vld(x + c), vmean);
            acc = vfma(d, d, acc);
        }
        if (cv < C) {
            vf d = vzmask(mt, vsub(vldm(x + cv, mt), vmean));
            acc = vfma(d, d, acc);
        }
        float var = vhsum(acc) / C;
        float s = 1.0f / sqrtf(var + 1e-5f);
        vf vs = vset(s);
        float *o = out + (size_t)n * C;
        for (int c = 0; c < cv; c += W)
            vst(o + c, vadd(vmul(vmul(vsub(vld(x + c), vmean), vs), vld(w + c)), vld(b + c)));
        if (cv < C)
            vstm(o + cv, mt, vadd(vmul(vmul(vsub(vldm(x + cv, mt), vmean), vs), vldm(w + cv, mt)), vldm(b + cv, mt)));
        mean[n] = m;
        rstd[n] = s;
    }
}

/* dinp (N,C) +=, dw/db (C) += ; rows in parallel for dinp, then column blocks for dw/db */
static void layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                          const float *mean, const float *rstd, int N, int C) {
    int cv = C / W * W;
    vm mt = tailmask((size_t)(C - cv));
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
        vf vmean = vset(mean[n]), vs = vset(rstd[n]);
        vf a1 = vset(0.0f), a2 = vset(0.0f);
        for (int c = 0; c < cv; c += W) {
            vf norm = vmul(vsub(vld(x + c), vmean), vs), dn = vmul(vld(w + c), vld(d + c));
            a1 = vadd(a1, dn);
            a2 = vfma(dn, norm, a2);
        }
        if (cv < C) { /* masked lanes have dn = 0 */
            vf norm = vmul(vsub(vldm(x + cv, mt), vmean), vs), dn = vmul(vldm(w + cv, mt), vldm(d + cv, mt));
            a1 = vadd(a1, dn);
            a2 = vfma(dn, norm, a2);
        }
        vf dm = vset(vhsum(a1) / C), dnm = vset(vhsum(a2) / C);
        float *di = dinp + (size_t)n * C;
        for (int c = 0; c < cv; c += W) {
            vf norm = vmul(vsub(vld(x + c), vmean), vs), dn = vmul(vld(w + c), vld(d + c));
            vf g = vmul(vsub(vsub(dn, dm), vmul(norm, dnm)), vs);
            vst(di + c, vadd(vld(di + c), g));
        }
        if (cv < C) {
            vf norm = vmul(vsub(vldm(x + cv, mt), vmean), vs), dn = vmul(vldm(w + cv, mt), vldm(d + cv, mt));
            vf g = vmul(vsub(vsub(dn, dm), vmul(norm, dnm)), vs);
            vstm(di + cv, mt, vadd(vldm(di + cv, mt), g));
        }
    }
    int nblk = (C + COLB - 1) / COLB;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c1 = blk * COLB + COLB < C ? blk * COLB + COLB : C;
        for (int c = blk * COLB; c < c1; c += W) {
            vm m = tailmask((size_t)(c1 - c < W ? c1 - c : W));
            vf adw = vldm(dw + c, m), adb = vldm(db + c, m);
            for (int n = 0; n < N; n++) {
                vf x = vldm(inp + (size_t)n * C + c, m), d = vldm(dout + (size_t)n * C + c, m);
                adw = vadd(adw, vmul(vmul(vsub(x, vset(mean[n])), vset(rstd[n])), d));
                adb = vadd(adb, d);
            }
            vstm(dw + c, m, adw);
            vstm(db + c, m, adb);
        }
    }
}

/* losses (N), probs (N,Vp) (may alias logits), logits (N,Vp), targets (N) or NULL; softmax over the
 * first V columns. One exp per element: pass 2 stores exp(z - max) into probs (z[target] is read
 * first, since probs may alias logits), pass 3 scales by 1/sum. */
static void crossentropy_fwd(float *losses, float *probs, const float *logits, const int *targets, int N, int V,
                             int Vp) {
    int cv = V / W * W;
    vm mt = tailmask((size_t)(V - cv));
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * Vp;
        float *p = probs + (size_t)n * Vp;
        vf acc = vset(-INFINITY);
        for (int v = 0; v < cv; v += W) acc = vmax(acc, vld(z + v));
        if (cv < V) acc = vmax(acc, vsel(mt, vset(-INFINITY), vldm(z + cv, mt)));
        float maxv = vhmax(acc);
        float zt = targets ? z[targets[n]] : 0.0f;
        vf vmx = vset(maxv);
        acc = vset(0.0f);
        for (int v = 0; v < cv; v += W) {
            vf e = vexp(vsub(vld(z + v), vmx));
            vst(p + v, e);
            acc = vadd(acc, e);
        }
        if (cv < V) {
            vf e = vzmask(mt, vexp(vsub(vldm(z + cv, mt), vmx)));
            vstm(p + cv, mt, e);
            acc = vadd(acc, e);
        }
        float sum = vhsum(acc);
        if (targets) losses[n] = maxv + logf(sum) - zt;
        vf inv = vset(1.0f / sum);
        for (int v = 0; v < cv; v += W) vst(p + v, vmul(vld(p + v), inv));
        if (cv < V) vstm(p + cv, mt, vmul(vldm(p + cv, mt), inv));
        for (int v = V; v < Vp; v++) p[v] = 0;
    }
}

/* dlogits (N,Vp) += (probs - onehot) * dloss over the first V columns */
static void crossentropy_bwd(float *dlogits, const float *probs, const int *targets, float dloss, int N, int V,
                             int Vp) {
    int cv = V / W * W;
    vm mt = tailmask((size_t)(V - cv));
    vf dl = vset(dloss);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *d = dlogits + (size_t)n * Vp;
        const float *p = probs + (size_t)n * Vp;
        for (int v = 0; v < cv; v += W) vst(d + v, vadd(vld(d + v), vmul(vld(p + v), dl)));
        if (cv < V) vstm(d + cv, mt, vadd(vldm(d + cv, mt), vmul(vldm(p + cv, mt), dl)));
        d[targets[n]] -= dloss;
    }
}

/* AdamW in one pass, the reference's operations in the reference's order, no contractions: every
 * step is a correctly rounded IEEE operation (sqrt and div included), so results match it bit for bit. */
static void adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2, float eps,
                  float wd, float grad_scale, int t) {
    float bc1 = 1 - (float)pow(b1, t), bc2 = 1 - (float)pow(b2, t);
    float step = lr / bc1, bc2_sqrt = sqrtf(bc2), decay = 1 - lr * wd;
    vf vgs = vset(grad_scale), vdecay = vset(decay), vomb1 = vset(1 - b1), vb2 = vset(b2), vomb2 = vset(1 - b2);
    vf vbc2s = vset(bc2_sqrt), veps = vset(eps), vstep = vset(step);
    size_t nb = n / W;
#pragma omp parallel for schedule(static) if (nb >= PAR_MIN_BLOCKS)
    for (size_t k = 0; k < nb; k++) {
        size_t i = k * W;
        vf gi = vmul(vld(g + i), vgs);
        vf pi = vmul(vld(p + i), vdecay);
        vf mi = vld(m + i), vi = vld(v + i);
        mi = vadd(mi, vmul(vomb1, vsub(gi, mi)));
        vi = vadd(vmul(vb2, vi), vmul(vmul(vomb2, gi), gi));
        vf denom = vadd(vdiv(vsqrt(vi), vbc2s), veps);
        vst(p + i, vsub(pi, vmul(vstep, vdiv(mi, denom))));
        vst(m + i, mi);
        vst(v + i, vi);
    }
    if (nb * W < n) { /* the same, masked */
        size_t i = nb * W;
        vm msk = tailmask(n - i);
        vf gi = vmul(vldm(g + i, msk), vgs);
        vf pi = vmul(vldm(p + i, msk), vdecay);
        vf mi = vldm(m + i, msk), vi = vldm(v + i, msk);
        mi = vadd(mi, vmul(vomb1, vsub(gi, mi)));
        vi = vadd(vmul(vb2, vi), vmul(vmul(vomb2, gi), gi));
        vf denom = vadd(vdiv(vsqrt(vi), vbc2s), veps);
        vstm(p + i, msk, vsub(pi, vmul(vstep, vdiv(mi, denom))));
        vstm(m + i, msk, mi);
        vstm(v + i, msk, vi);
    }
}

void ISA(overlay_elementwise)(gptc_kernels *k) {
    k->encoder_fwd = encoder_fwd;
    k->encoder_bwd = encoder_bwd;
    k->layernorm_fwd = layernorm_fwd;
    k->layernorm_bwd = layernorm_bwd;
    k->bias_fwd = bias_fwd;
    k->bias_bwd = bias_bwd;
    k->gelu_fwd = gelu_fwd;
    k->gelu_bwd = gelu_bwd;
    k->residual_fwd = residual_fwd;
    k->residual_bwd = residual_bwd;
    k->crossentropy_fwd = crossentropy_fwd;
    k->crossentropy_bwd = crossentropy_bwd;
    k->adamw = adamw;
}
