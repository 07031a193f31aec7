/* test_dist.c — the data-parallel layer's pieces that need no second rank: gradient buckets
 * (contiguous, whole tensors, from the arena's end, at least --bucket-mb each, one per tensor at 0),
 * the reducer's watermark in a world of one, ZeRO-1's shard bounds, AdamW on a shard's range against
 * AdamW on the whole arena, and a one-rank ZeRO-1 run equal to a plain one. */
#include "test.h"
#include "dist/dist.h"
#include "optim/optim.h"

#include <stdlib.h>
#include <string.h>

/* the tiny preset with a 256-token vocabulary, parameters initialised */
static void tiny_model(gptc_model *m) {
    gptc_model_config cfg;
    gptc_model_preset("tiny", &cfg);
    cfg.vocab = 256;
    CHECK_OK(gptc_model_init(m, &cfg));
    gptc_model_init_weights(m, 7);
}

TEST(dist_buckets_cover_the_arena_in_backward_order) {
    gptc_model m;
    tiny_model(&m);
    size_t *starts = malloc(sizeof(size_t) * m.ntensors);
    for (int i = 0; i < m.ntensors; i++) starts[i] = m.tensors[i].offset;
    const double sizes[] = {0, 0.01e6, 0.05e6, 25e6};
    for (int k = 0; k < 4; k++) {
        gptc_reducer r;
        CHECK_OK(gptc_reducer_init(&r, m.params, m.num_floats, starts, m.ntensors, sizes[k], NULL, NULL));
        if (sizes[k] == 0) CHECK_EQ_INT(r.nb, m.ntensors);
        if (sizes[k] == 25e6) CHECK_EQ_INT(r.nb, 1);
        CHECK(r.nb >= 1 && r.b[0].hi == m.num_floats && r.b[r.nb - 1].lo == 0);
        for (int i = 0; i < r.nb; i++) {
            if (i + 1 < r.nb) CHECK(r.b[i + 1].hi == r.b[i].lo); /* contiguous, from the end */
            bool at_tensor = false;
            for (int j = 0; j < m.ntensors; j++) at_tensor |= r.b[i].lo == starts[j];
            CHECK(at_tensor);                                     /* whole tensors */
            if (i + 1 < r.nb) CHECK((r.b[i].hi - r.b[i].lo) * sizeof(float) >= sizes[k]);
        }
        /* a world of one: each watermark starts what lies above it, finish the rest */
        size_t mark = m.tensors[m.ntensors - 2 - GPTC_LAYER_TENSORS].offset; /* the last layer done */
        int above = 0;
        while (above < r.nb && r.b[above].lo >= mark) above++;
        gptc_reducer_ready(&r, mark);
        CHECK_EQ_INT(r.next, above);
        CHECK_OK(gptc_reducer_finish(&r));
        CHECK_EQ_INT(r.calls, r.nb);
        CHECK_EQ_INT(r.next, 0);
        gptc_reducer_free(&r);
    }
    free(starts);
    gptc_model_free(&m);
}

TEST(dist_shards_are_aligned_and_cover) {
    const size_t ns[] = {1, 17, 1000, 124160};
    const int worlds[] = {1, 2, 3, 8};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            size_t bounds[9];
            size_t share = gptc_dist_shards(ns[a], worlds[b], bounds);
            CHECK(share % 16 == 0 && share >= (ns[a] + worlds[b] - 1) / worlds[b]);
            CHECK(bounds[0] == 0 && bounds[worlds[b]] == ns[a]);
            for (int r = 0; r < worlds[b]; r++) {
                CHECK(bounds[r + 1] >= bounds[r] && bounds[r + 1] - bounds[r] <= share);
                CHECK(bounds[r] % 16 == 0 || bounds[r] == ns[a]);
            }
        }
}

/* AdamW shard by shard (cuts inside tensors, each piece with its tensor's decay) equals AdamW on
 * the whole arena. */
TEST(dist_adamw_on_shards_matches_whole) {
    gptc_model m;
    tiny_model(&m);
    size_t n = m.num_floats;
    gptc_rng rng;
    gptc_rng_seed(&rng, 3);
    float *g = test_randn_f(&rng, n, 0.01), *p0 = test_copy_f(m.params, n);
    float *mw = test_zeros_f(n), *vw = test_zeros_f(n), *ms = test_zeros_f(n), *vs = test_zeros_f(n);
    float *whole = malloc(sizeof(float) * n);
    m.grads = g; /* the whole-arena update reads the model's gradients */
    gptc_adamw h = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    for (int t = 1; t <= 3; t++) gptc_adamw_update(&m, mw, vw, &h, 1e-3f, 0.5f, t);
    memcpy(whole, m.params, sizeof(float) * n);
    memcpy(m.params, p0, sizeof(float) * n);
    size_t bounds[4];
    gptc_dist_shards(n, 3, bounds);
    for (int t = 1; t <= 3; t++)
        for (int r = 0; r < 3; r++)
            gptc_adamw_update_range(&m, g + bounds[r], ms + bounds[r], vs + bounds[r], bounds[r], bounds[r + 1], &h, 1e-3f,
                                    0.5f, t);
    double e = test_rel_err_f(m.params, whole, n);
    CHECK_MSG(e <= 1e-6, "shard-wise AdamW differs from whole by %g", e);
    CHECK(test_rel_err_f(ms, mw, n) <= 1e-6 && test_rel_err_f(vs, vw, n) <= 1e-6);
    m.grads = NULL;
    gptc_model_free(&m);
    free(g), free(p0), free(mw), free(vw), free(ms), free(vs), free(whole);
}

typedef struct { float loss[16]; int n; } losses;
static int record(void *user, const gptc_step_info *in) {
    losses *l = user;
    if (in->event == GPTC_EVENT_STEP && l->n < 16) l->loss[l->n++] = in->loss;
    return 0;
}

/* In one process, --zero 1 takes the shard code path with one shard: the same losses bit for bit. */
TEST(dist_zero1_one_rank_equals_plain) {
    gptc_train_options o;
    gptc_train_options_default(&o);
    gptc_model_preset("tiny", &o.model);
    o.data = test_shakespeare_data();
    o.batch = 2;
    o.seq = 32;
    o.steps = 4;
    o.warmup = 2;
    o.eval_every = 0;
    o.eval_batches = 1;
    o.ckpt_every = 0;
    o.threads = 1;
    losses a = {0}, b = {0};
    gptc_train_result r;
    CHECK_OK(gptc_train(&o, record, &a, &r));
    CHECK_EQ_INT(r.world, 1);
    CHECK(r.comm_calls_per_step == 0);
    o.zero = 1;
    CHECK_OK(gptc_train(&o, record, &b, &r));
    CHECK_EQ_INT(a.n, 4);
    CHECK_EQ_INT(b.n, 4);
    for (int i = 0; i < a.n && i < b.n; i++) CHECK_MSG(a.loss[i] == b.loss[i], "step %d: %.9g vs %.9g", i + 1, a.loss[i], b.loss[i]);
    o.zero = 2;
    CHECK(gptc_train(&o, NULL, NULL, NULL) == GPTC_ERR_ARG && strstr(gptc_last_error(), "'zero'"));
    o.zero = 0;
    o.bucket_mb = -1;
    CHECK(gptc_train(&o, NULL, NULL, NULL) == GPTC_ERR_ARG && strstr(gptc_last_error(), "'bucket_mb'"));
}
