/* config.c — model presets, checks and derived sizes. */
#include "gptc.h"
#include "core/core.h"

#include <string.h>

static const char *const g_gelu_names[] = {"tanh", "erf", "sigmoid"};
#define GELU_KINDS ((int)(sizeof g_gelu_names / sizeof g_gelu_names[0]))

const char *gptc_gelu_name(gptc_gelu_kind g) { return (int)g >= 0 && (int)g < GELU_KINDS ? g_gelu_names[g] : "?"; }

gptc_status gptc_gelu_from_name(const char *name, gptc_gelu_kind *out) {
    for (int i = 0; i < GELU_KINDS; i++)
        if (name && strcmp(name, g_gelu_names[i]) == 0) {
            *out = (gptc_gelu_kind)i;
            return GPTC_OK;
        }
    return gptc_fail(GPTC_ERR_ARG, "'model.gelu' %s: unknown GELU form (expected tanh, erf or sigmoid)", name ? name : "");
}

static const char *const g_precision_names[] = {"fp32", "bf16"};
static const char *const g_recompute_names[] = {"none", "gelu", "attn", "block"};
#define NAMES(a) ((int)(sizeof a / sizeof a[0]))

/* index of name in names[0..n), or -1 */
static int name_index(const char *name, const char *const *names, int n) {
    for (int i = 0; name && i < n; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

const char *gptc_precision_name(gptc_precision p) {
    return (int)p >= 0 && (int)p < NAMES(g_precision_names) ? g_precision_names[p] : "?";
}

gptc_status gptc_precision_from_name(const char *name, gptc_precision *out) {
    int i = name_index(name, g_precision_names, NAMES(g_precision_names));
    if (i < 0) return gptc_fail(GPTC_ERR_ARG, "'dtype' %s: unknown precision (expected fp32 or bf16)", name ? name : "");
    *out = (gptc_precision)i;
    return GPTC_OK;
}

const char *gptc_recompute_name(gptc_recompute r) {
    return (int)r >= 0 && (int)r < NAMES(g_recompute_names) ? g_recompute_names[r] : "?";
}

gptc_status gptc_recompute_from_name(const char *name, gptc_recompute *out) {
    int i = name_index(name, g_recompute_names, NAMES(g_recompute_names));
    if (i < 0)
        return gptc_fail(GPTC_ERR_ARG, "'recompute' %s: unknown level (expected none, gelu, attn or block)",
                         name ? name : "");
    *out = (gptc_recompute)i;
    return GPTC_OK;
}

typedef struct { const char *name; gptc_model_config cfg; } preset;

/* vocab 0 in a preset means "from the data" (the trainer fills it from the shards' meta.json); every
 * preset uses GPT-2's tanh GELU (`--gelu` changes it). */
static const preset g_presets[] = {
    {"gpt2", {12, 12, 768, 1024, 50257, GPTC_GELU_KIND_TANH}},
    {"gpt2-medium", {24, 16, 1024, 1024, 50257, GPTC_GELU_KIND_TANH}},
    {"gpt2-large", {36, 20, 1280, 1024, 50257, GPTC_GELU_KIND_TANH}},
    {"gpt2-xl", {48, 25, 1600, 1024, 50257, GPTC_GELU_KIND_TANH}},
    /* the 1.3B GPT-2 of the system gptc re-creates: 24 layers of 2048 channels, 16 heads (~1.31B parameters) */
    {"gpt2-1.3b", {24, 16, 2048, 1024, 50257, GPTC_GELU_KIND_TANH}},
    {"tiny", {2, 2, 64, 64, 0, GPTC_GELU_KIND_TANH}},
    {"small-cpu", {4, 4, 128, 128, 0, GPTC_GELU_KIND_TANH}},
    {"medium-cpu", {6, 6, 384, 256, 0, GPTC_GELU_KIND_TANH}},
};

const char *gptc_model_preset_names(void) { return "gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt2-1.3b, tiny, small-cpu, medium-cpu"; }

gptc_status gptc_model_preset(const char *name, gptc_model_config *cfg) {
    for (size_t i = 0; i < sizeof g_presets / sizeof g_presets[0]; i++)
        if (strcmp(name, g_presets[i].name) == 0) {
            *cfg = g_presets[i].cfg;
            return GPTC_OK;
        }
    return gptc_fail(GPTC_ERR_ARG, "'model' %s: unknown model (expected one of: %s)", name, gptc_model_preset_names());
}

gptc_status gptc_model_config_check(const gptc_model_config *c) {
    if (c->layers < 1) return gptc_fail(GPTC_ERR_ARG, "'model.layers' %d: must be at least 1", c->layers);
    if (c->heads < 1) return gptc_fail(GPTC_ERR_ARG, "'model.heads' %d: must be at least 1", c->heads);
    if (c->channels < 1) return gptc_fail(GPTC_ERR_ARG, "'model.channels' %d: must be at least 1", c->channels);
    if (c->context < 1) return gptc_fail(GPTC_ERR_ARG, "'model.context' %d: must be at least 1", c->context);
    if (c->vocab < 1) return gptc_fail(GPTC_ERR_ARG, "'model.vocab' %d: must be at least 1", c->vocab);
    if (c->channels % c->heads)
        return gptc_fail(GPTC_ERR_ARG, "'model.heads' %d: must divide 'model.channels' %d (head size = channels/heads)",
                         c->heads, c->channels);
    if ((int)c->gelu < 0 || (int)c->gelu >= GELU_KINDS)
        return gptc_fail(GPTC_ERR_ARG, "gelu %d: unknown GELU form (expected 0 tanh, 1 erf or 2 sigmoid)", (int)c->gelu);
    if (c->vocab > 65536)
        return gptc_fail(GPTC_ERR_ARG, "'model.vocab' %d: token shards hold uint16 ids, so at most 65536", c->vocab);
    return GPTC_OK;
}

int gptc_padded_vocab(int vocab) { return (vocab + 63) / 64 * 64; }

size_t gptc_model_num_params(const gptc_model_config *c) {
    size_t C = c->channels;
    size_t per_layer = 2 * C + C * 3 * C + 3 * C + C * C + C + 2 * C + C * 4 * C + 4 * C + 4 * C * C + C;
    return (size_t)c->vocab * C + (size_t)c->context * C + c->layers * per_layer + 2 * C;
}

double gptc_model_flops_per_token(const gptc_model_config *c, int T) {
    double n = (double)gptc_model_num_params(c) - (double)c->context * c->channels;
    return 6.0 * n + 12.0 * c->layers * c->channels * (double)T;
}
