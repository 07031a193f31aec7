/* test_profile.c — the --profile profiler: a short run through the library writes a trace that
 * parses, holds every operator of every layer's forward and backward and the phases, nests each span
 * in its step, and attributes the model's FLOPs; the CLI prints the table and refuses an unwritable
 * path before training; with profiling off nothing is recorded or allocated. */
#include "test.h"
#include "core/core.h"
#include "core/profile.h"
#include "io/io.h"
#include "train/profile_report.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static void tiny_profiled(gptc_train_options *o, const char *trace) {
    gptc_train_options_default(o);
    gptc_model_preset("tiny", &o->model);
    o->data = test_shakespeare_data(); /* a folder with a val split: the run evaluates */
    o->batch = 4;
    o->seq = 32;
    o->steps = 3;
    o->warmup = 1;
    o->eval_every = 0;
    o->eval_batches = 1;
    o->ckpt_every = 0;
    o->threads = 2;
    o->profile = trace;
}

/* The X events named name (with layer == layer, or any layer when layer is -2); only those inside
 * steps when in_steps. */
static int count_events(const cJSON *events, const char *name, int layer, bool in_steps) {
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const cJSON *nm = cJSON_GetObjectItem(e, "name"), *ph = cJSON_GetObjectItem(e, "ph");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, name) || !cJSON_IsString(ph) || strcmp(ph->valuestring, "X"))
            continue;
        const cJSON *args = cJSON_GetObjectItem(e, "args"), *l = cJSON_GetObjectItem(args, "layer");
        if (in_steps && cJSON_GetObjectItem(args, "step")->valueint < 0) continue;
        if (layer == -2 || (layer == -1 && !l) || (l && l->valueint == layer)) n++;
    }
    return n;
}

static double arg_num(const cJSON *e, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *const k_layer_ops[] = {
    "qkv.fwd", "attn.split_heads.fwd", "attn.flash_fwd", "attn.merge_heads.fwd", "attn.proj.fwd", "res+ln2.fwd",
    "mlp.fc.fwd", "gelu.fwd", "mlp.proj.fwd", "zero.bwd", "mlp.proj.dx.bwd", "mlp.proj.dw.bwd", "mlp.proj.db.bwd",
    "gelu.bwd", "mlp.fc.dx.bwd", "mlp.fc.dw.bwd", "mlp.fc.db.bwd", "res+ln2.bwd", "attn.proj.dx.bwd",
    "attn.proj.dw.bwd", "attn.proj.db.bwd", "attn.split_heads.bwd", "attn.flash_bwd", "attn.merge_heads.bwd",
    "qkv.dx.bwd", "qkv.dw.bwd", "qkv.db.bwd", "res+ln1.bwd"};
static const char *const k_model_ops[] = {"encoder.fwd", "classifier.fwd", "xent.fused", "classifier.dx.bwd",
                                          "classifier.dw.bwd", "lnf.bwd", "encoder.bwd", "zero_grad", "grad_norm",
                                          "adamw"};
static const char *const k_phases[] = {"forward", "classifier", "backward", "optimizer", "eval"};

/* The trace file parsed (NULL, with a failed check, when it cannot be read or is not JSON). */
static cJSON *read_trace(const char *trace) {
    char *text = NULL;
    size_t len;
    CHECK_OK(gptc_file_read_all(trace, &text, &len));
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    gptc_free(text);
    CHECK_MSG(root, "the trace %s is not JSON", trace);
    return root;
}

TEST(profile_trace_has_every_operator_nested_in_steps) {
    char trace[512];
    test_path(trace, sizeof trace, "%s/profile.json", test_tmpdir());
    gptc_train_options o;
    tiny_profiled(&o, trace);
    gptc_train_result r;
    CHECK_OK(gptc_train(&o, NULL, NULL, &r));
    cJSON *root = read_trace(trace);
    if (!root) return;
    const cJSON *events = cJSON_GetObjectItem(root, "traceEvents");
    CHECK(cJSON_IsArray(events));
    int L = r.model.layers, steps = o.steps;

    /* every operator of every layer, once per step (no recompute: the forward's run once) */
    for (int l = 0; l < L; l++) {
        for (size_t i = 0; i < sizeof k_layer_ops / sizeof *k_layer_ops; i++)
            CHECK_MSG(count_events(events, k_layer_ops[i], l, true) == steps, "%s layer %d: %d events, want %d",
                      k_layer_ops[i], l, count_events(events, k_layer_ops[i], l, true), steps);
        const char *out = l == L - 1 ? "res+lnf.fwd" : "res+ln1.fwd";
        CHECK_MSG(count_events(events, out, l, true) == steps, "%s layer %d", out, l);
    }
    CHECK_EQ_INT(count_events(events, "ln1.fwd", 0, true), steps);
    for (size_t i = 0; i < sizeof k_model_ops / sizeof *k_model_ops; i++)
        CHECK_MSG(count_events(events, k_model_ops[i], -2, true) >= steps, "%s missing", k_model_ops[i]);
    for (size_t i = 0; i < sizeof k_phases / sizeof *k_phases; i++) /* eval: between steps */
        CHECK_MSG(count_events(events, k_phases[i], -2, false) >= 1, "phase %s missing", k_phases[i]);
    CHECK_EQ_INT(count_events(events, "step", -2, true), steps);

    /* the steps' extents, then every span in its step; durations non-negative */
    double t0[8] = {0}, t1[8] = {0};
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X")) continue;
        double ts = cJSON_GetObjectItem(e, "ts")->valuedouble, dur = cJSON_GetObjectItem(e, "dur")->valuedouble;
        CHECK(dur >= 0);
        int s = (int)arg_num(e, "step");
        if (!strcmp(cJSON_GetObjectItem(e, "name")->valuestring, "step") && s >= 0 && s < 8) {
            t0[s] = ts;
            t1[s] = ts + dur;
        }
    }
    int outside = 0;
    double flops = 0, gemm = 0;
    cJSON_ArrayForEach(e, events) {
        if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X")) continue;
        double ts = cJSON_GetObjectItem(e, "ts")->valuedouble, dur = cJSON_GetObjectItem(e, "dur")->valuedouble;
        int s = (int)arg_num(e, "step");
        if (s < 0 || s >= steps) {
            outside++; /* the evaluations run between steps */
            continue;
        }
        CHECK_MSG(ts >= t0[s] - 0.002 && ts + dur <= t1[s] + 0.002, "%s outside step %d",
                  cJSON_GetObjectItem(e, "name")->valuestring, s);
        const char *cat = cJSON_GetObjectItem(e, "cat")->valuestring, *nm = cJSON_GetObjectItem(e, "name")->valuestring;
        if (s != 1 || (strcmp(cat, "forward") && strcmp(cat, "backward"))) continue;
        flops += arg_num(e, "flop");
        bool linear = !strncmp(nm, "qkv.", 4) || !strncmp(nm, "attn.proj.", 10) || !strncmp(nm, "mlp.", 4) ||
                      !strncmp(nm, "classifier.", 11);
        if (linear) gemm += arg_num(e, "flop");
    }
    CHECK(outside > 0);

    /* The matrix products exactly: per token 6 FLOPs per weight of the four linear layers and the
     * classifier (forward, dX, dW), plus one add per bias element forward and one in its gradient. */
    double C = r.model.channels, V = r.model.vocab, BT = (double)o.batch * o.seq;
    double want_gemm = BT * (L * (6 * (C * 3 * C + C * C + C * 4 * C + 4 * C * C) + 2 * (3 * C + C + 4 * C + C)) +
                             6 * V * C);
    CHECK_NEAR(gemm / want_gemm, 1.0, 1e-9);
    /* All of the forward and backward against the model's 6N + 12LCT per token: that formula counts
     * every parameter as a multiply-add (biases and LayerNorm weights too, wpe not) and the attention
     * as full T x T products with a backward of twice the forward; the profile counts the causal half
     * with the flash backward's recompute (7 L C (T+1) per token), and the elementwise operators at a
     * few FLOPs per element. For this shape the two differ by 0.3%. */
    double model = gptc_model_flops_per_token(&r.model, o.seq) * BT;
    CHECK_MSG(fabs(flops / model - 1) < 0.05, "profiled %.4g FLOPs per step, the model's formula %.4g", flops, model);
    cJSON_Delete(root);

    /* the table from what the run left in memory */
    gptc_prof_summary *sum = malloc(sizeof *sum);
    gptc_prof_summarise(sum, 0, 0);
    CHECK_EQ_INT(sum->steps, steps);
    CHECK_EQ_INT(sum->counted, steps - 1);
    CHECK(sum->op_seconds <= sum->step_seconds * 1.0001 && sum->op_seconds > 0.5 * sum->step_seconds);
    CHECK(sum->nrows > 30);
    free(sum);
    gptc_prof_free();
}

TEST(profile_off_records_and_allocates_nothing) {
    gptc_prof_free();
    gptc_train_options o;
    tiny_profiled(&o, NULL);
    o.steps = 2;
    gptc_train_result r;
    CHECK_OK(gptc_train(&o, NULL, NULL, &r));
    gptc_prof_begin(GPTC_PROF_FWD, "x", 0); /* called directly, off: a branch, no record */
    gptc_prof_end(1, 1);
    size_t spans = 1, bytes = 1;
    gptc_prof_stats(&spans, &bytes);
    CHECK_EQ_INT(spans, 0);
    CHECK_EQ_INT(bytes, 0);
    CHECK_EQ_INT(gptc_prof_nthreads(), 0);
    CHECK(!gptc_prof_active());
}

TEST(profile_cli_prints_the_table_and_refuses_a_bad_path) {
    char cmd[2048], trace[512], *out = NULL;
    test_path(trace, sizeof trace, "%s/cli-profile.json", test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "%s train --data %s --model tiny --batch 2 --seq 16 --steps 2 --eval-batches 1 --threads 2 --quiet "
             "--profile %s",
             test_gptc_bin(), test_shakespeare_data(), trace);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    const char *want[] = {"operator", "% peak", "% bw", "qkv.fwd", "attn.flash_bwd", "mlp.fc.dw.bwd", "adamw", "coverage",
                          "against the measured memory bandwidth", "% roof", "profile: roofline", "over the roofline"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) CHECK_MSG(strstr(out, want[i]), "no %s in:\n%s", want[i], out);
    /* a memory-bound row has its % of the triad bandwidth: adamw's last column is a number */
    const char *row = strstr(out, "\nadamw ");
    CHECK_MSG(row, "no adamw row in:\n%s", out);
    if (row) {
        const char *eol = strchr(row + 1, '\n'), *last = eol;
        while (last > row && last[-1] != ' ') last--;
        CHECK_MSG(eol && strtod(last, NULL) > 0, "adamw row without %% bw: %.*s", eol ? (int)(eol - row) : 0, row);
    }
    CHECK(gptc_is_file(trace));
    free(out);

    snprintf(cmd, sizeof cmd, "%s train --data %s --model tiny --steps 2 --profile %s/no-such-folder/p.json",
             test_gptc_bin(), test_shakespeare_data(), test_tmpdir());
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(strstr(out, "--profile") && strstr(out, "does not exist") && !strstr(out, "step 1"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s train --data %s --model tiny --steps 2 --profile %s", test_gptc_bin(),
             test_shakespeare_data(), test_tmpdir());
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(strstr(out, "--profile") && strstr(out, "is a folder"), "%s", out);
    free(out);
}

/* --profile-steps: only the window's steps are recorded (a long run keeps a bounded number of spans) */
TEST(profile_window_records_only_its_steps) {
    char trace[512];
    test_path(trace, sizeof trace, "%s/profile-window.json", test_tmpdir());
    gptc_train_options o;
    tiny_profiled(&o, trace);
    o.steps = 6;
    o.profile_from = 3;
    o.profile_to = 4;
    gptc_train_result r;
    CHECK_OK(gptc_train(&o, NULL, NULL, &r));
    cJSON *root = read_trace(trace);
    if (!root) return;
    const cJSON *events = cJSON_GetObjectItem(root, "traceEvents");
    CHECK_EQ_INT(count_events(events, "step", -2, true), 2);
    CHECK_EQ_INT(count_events(events, "qkv.fwd", 0, true), 2);
    cJSON_Delete(root);
    /* a window that is not one is refused before anything runs */
    o.profile_from = 4;
    o.profile_to = 2;
    CHECK(gptc_train(&o, NULL, NULL, &r) == GPTC_ERR_ARG);
}

/* some work between a span's begin and end, so that it lasts longer than a bound of a few FLOPs */
static double spin(int n) {
    volatile double x = 0;
    for (int i = 0; i < n; i++) x = x + 1e-3 * i;
    return x;
}

/* The roofline: each span at max(FLOPs / peak, bytes / bandwidth), summed per operator over the counted
 * steps; the table's roofline lines from them (machine speed decides only which operators exceed theirs:
 * one of a single FLOP always does). */
TEST(profile_roofline_bounds_each_operator_by_peak_and_bandwidth) {
    CHECK_NEAR(gptc_prof_bound(1e9, 1e6, 100, 10), 1e-2, 1e-15); /* compute-bound */
    CHECK_NEAR(gptc_prof_bound(1e6, 1e9, 100, 10), 1e-1, 1e-15); /* memory-bound */
    CHECK_NEAR(gptc_prof_bound(1e9, 1e9, 0, 10), 1e-1, 1e-15);  /* no peak: the bandwidth's term alone */
    CHECK_EQ_INT(gptc_prof_bound(1e9, 1e9, 0, 0) == 0, 1);

    gptc_prof_free();
    gptc_prof_start();
    for (int s = 0; s < 3; s++) {
        gptc_prof_begin(GPTC_PROF_STEP, "step", -1);
        gptc_prof_begin(GPTC_PROF_FWD, "roof.gemm", -1);
        gptc_prof_end(1e6, 1e3);
        gptc_prof_begin(GPTC_PROF_OPT, "roof.stream", -1);
        gptc_prof_end(10, 1e6);
        gptc_prof_begin(GPTC_PROF_BWD, "roof.slow", -1);
        spin(20000);
        gptc_prof_end(1, 0);
        gptc_prof_end(0, 0);
    }
    gptc_prof_stop();
    gptc_prof_summary *sum = malloc(sizeof *sum);
    gptc_prof_summarise(sum, 100, 10);
    CHECK_EQ_INT(sum->counted, 2);
    CHECK_NEAR(sum->op_flops, 2 * (1e6 + 10 + 1), 1e-6);
    int found = 0;
    for (int r = 0; r < sum->nrows; r++) {
        const gptc_prof_row *x = &sum->rows[r];
        double want = !strcmp(x->name, "roof.gemm") ? 2e-5 : !strcmp(x->name, "roof.stream") ? 2e-4 : 2e-11;
        CHECK_MSG(fabs(x->bound / want - 1) < 1e-12, "%s: bound %g s, want %g", x->name, x->bound, want);
        found += !strncmp(x->name, "roof.", 5);
    }
    CHECK_EQ_INT(found, 3);
    gptc_prof_summarise(sum, 0, 0); /* without the rates, no bounds */
    for (int r = 0; r < sum->nrows; r++) CHECK(sum->rows[r].bound == 0);
    free(sum);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    gptc_prof_print_table(f, 100, "fp32", 10);
    fclose(f);
    const char *want[] = {"% roof",
                          "profile: roofline (each operator at max(FLOPs / 100.0 GFLOP/s, bytes / 10.0 GB/s)",
                          "compute-bound operators",
                          "memory-bound",
                          "of the peak",
                          "profile: over the roofline, ms/step:",
                          " roof.slow ",
                          "outside operators"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        CHECK_MSG(strstr(text, want[i]), "no '%s' in:\n%s", want[i], text);
    free(text);
    /* without a bandwidth: no roofline */
    text = NULL;
    f = open_memstream(&text, &len);
    gptc_prof_print_table(f, 100, "fp32", 0);
    fclose(f);
    CHECK_MSG(!strstr(text, "roofline") && !strstr(text, "% roof"), "%s", text);
    free(text);
    gptc_prof_free();
}

/* Each OpenMP thread's time in its blocks of the parallel kernels (GPTC_PROF_THREAD spans) over the counted
 * steps, the training thread as thread 0, and the table's line naming the busiest one's excess. */
TEST(profile_sums_each_threads_blocks) {
    gptc_prof_free();
    gptc_prof_start();
    for (int s = 0; s < 3; s++) {
        gptc_prof_begin(GPTC_PROF_STEP, "step", -1);
        gptc_prof_begin(GPTC_PROF_FWD, "team.gemm", -1);
#pragma omp parallel num_threads(2)
        {
            gptc_prof_begin(GPTC_PROF_THREAD, "gemm.thread", -1);
            const double t0 = gptc_now(), ms = omp_get_thread_num() ? 3 : 1;
            while (gptc_now() - t0 < ms * 1e-3) spin(100);
            gptc_prof_end(1e6, 0);
        }
        gptc_prof_end(2e6, 0);
        gptc_prof_end(0, 0);
    }
    gptc_prof_stop();
    gptc_prof_summary *sum = malloc(sizeof *sum);
    gptc_prof_summarise(sum, 100, 10);
    if (omp_get_max_threads() >= 2) {
        CHECK_EQ_INT(sum->team, 2);
        /* two counted steps of at least 1 and 3 ms: more time for thread 1, the threads' rows not among the operators' */
        CHECK_MSG(sum->team_seconds[0] >= 2e-3 && sum->team_seconds[1] >= 6e-3 && sum->team_seconds[1] > sum->team_seconds[0],
                  "threads' times %g %g s", sum->team_seconds[0], sum->team_seconds[1]);
        for (int r = 0; r < sum->nrows; r++) CHECK(strcmp(sum->rows[r].name, "gemm.thread") != 0);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        gptc_prof_print_table(f, 100, "fp32", 10);
        fclose(f);
        CHECK_MSG(strstr(text, "profile: each thread's time in its blocks of the parallel kernels") &&
                      strstr(text, " 0: ") && strstr(text, ", 1: ") && strstr(text, "over the mean"),
                  "no thread line in:\n%s", text);
        free(text);
    } else {
        printf("    SKIP: one OpenMP thread\n");
    }
    free(sum);
    gptc_prof_free();
}
