/* op_plugin_gelu.c — an example gptc operator plugin: GELU (tanh form) forward and backward, written
 * plainly. It includes only the public ABI header and builds on its own:
 *
 *     cc -O3 -fno-math-errno -fopenmp -fPIC -shared -Iinclude examples/op_plugin_gelu.c \
 *        -o build/examples/op_plugin_gelu.so
 *     build/gptc train --op-plugin build/examples/op_plugin_gelu.so ...
 *
 * It computes what gptc's reference kernels compute, in the same order, so with GPTC_KERNELS=ref a run
 * with it gives the same losses bit for bit (tests/test_plugin.c checks that). The test suite also
 * builds it with one of these defined, each a plugin that gptc must refuse:
 *   WRONG       x sigmoid(1.702 x) in place of the tanh form (off by up to 0.02: beyond the tolerance)
 *   BAD_ABI     declares an ABI version this gptc does not speak
 *   UNKNOWN_OP  also registers "softmax_fwd", which is not a replaceable operator
 *   CONTRACT    declares it handles at most 4096 elements per call
 *   NO_ENTRY    exports no gptc_op_plugin_entry (a shared library that is not a plugin) */
#include "gptc_op_plugin.h"

#include <math.h>

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */

/* out (N) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static void gelu_fwd(float *out, const float *inp, size_t N) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
#ifdef WRONG
        out[i] = x / (1 + expf(-1.702f * x));
#else
        out[i] = 0.5f * x * (1 + tanhf(GELU_S * (x + 0.044715f * x * x * x)));
#endif
    }
}

/* dinp (N) += gelu'(inp) * dout */
static void gelu_bwd(float *dinp, const float *inp, const float *dout, size_t N) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
#ifdef WRONG
        float s = 1 / (1 + expf(-1.702f * x));
        dinp[i] += (s + 1.702f * x * s * (1 - s)) * dout[i];
#else
        float th = tanhf(GELU_S * (x + 0.044715f * x * x * x));
        float sech2 = 1 - th * th;
        float grad = 0.5f * (1 + th) + 0.5f * x * sech2 * GELU_S * (1 + 3 * 0.044715f * x * x);
        dinp[i] += grad * dout[i];
#endif
    }
}

#ifdef UNKNOWN_OP
static void softmax_fwd(float *out, const float *inp, size_t N) { (void)out, (void)inp, (void)N; }
#endif

#ifdef CONTRACT
#define GELU_CONTRACT {.n_max = 4096}
#else
#define GELU_CONTRACT {0} /* any size */
#endif

static const gptc_op_impl k_impls[] = {
    {.op = "gelu_fwd", .name = "plain_tanh", .fn = {.gelu_fwd = gelu_fwd}, .contract = GELU_CONTRACT},
    {.op = "gelu_bwd", .name = "plain_tanh", .fn = {.gelu_bwd = gelu_bwd}, .contract = GELU_CONTRACT},
#ifdef UNKNOWN_OP
    {.op = "softmax_fwd", .name = "plain", .fn = {.gelu_fwd = softmax_fwd}},
#endif
};

static const gptc_op_plugin k_plugin = {
#ifdef BAD_ABI
    .abi_version = GPTC_OP_ABI_VERSION + 1,
#else
    .abi_version = GPTC_OP_ABI_VERSION,
#endif
    .name = "example_gelu",
    .nimpls = sizeof k_impls / sizeof k_impls[0],
    .impls = k_impls,
};

#ifdef NO_ENTRY
GPTC_OP_PLUGIN_EXPORT const gptc_op_plugin *not_the_entry(uint32_t host_abi_version) {
    (void)host_abi_version;
    return &k_plugin;
}
#else
const gptc_op_plugin *gptc_op_plugin_entry(uint32_t host_abi_version) {
    (void)host_abi_version; /* built for GPTC_OP_ABI_VERSION; gptc checks k_plugin.abi_version */
    return &k_plugin;
}
#endif
