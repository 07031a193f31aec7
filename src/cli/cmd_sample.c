/* cmd_sample.c — `gptc sample`: generate text from a checkpoint, streamed to stdout (one sample), or
 * --samples N continuations of one prompt, each printed whole under a "--- sample i" header; then one
 * speed line on stderr (or a JSON object with --json): the prefill's tokens/s and GFLOP/s against the
 * FMA peak of `gptc info`, the decode's tokens/s and the bandwidth it reached against the triad's (the
 * best `gptc info` has measured, cached; with --triad-now also one measured right after the decode, since
 * a shared host's memory bandwidth swings by half between minutes). */
#include "cli/commands.h"
#include "cli/options.h"
#include "core/core.h"
#include "kernels/kernels.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sample_cli {
    gptc_sample_options o;
    const char *dtype; /* --dtype's name */
    int json, pin, no_pack, triad_now;
} sample_cli;

#define F(field) offsetof(sample_cli, o.field)
#define G(field) offsetof(sample_cli, field)
static const gptc_option g_sample_opts[] = {
    {"ckpt", OPT_STRING, F(ckpt), "PATH", "checkpoint folder (its newest step), one step folder, a Hugging Face GPT-2 folder (config.json + model.safetensors) or an llm.c .bin", 0, 0},
    {"prompt", OPT_STRING, F(prompt), "TEXT", "text to continue (default: start a new document)", 0, 0},
    {"tokens", OPT_INT, F(tokens), "N", "new tokens to generate", 1, 1 << 20},
    {"samples", OPT_INT, F(samples), "N", "continuations of the prompt, generated together (prompt prefilled once, each step reads the weights once for all); sample i draws with --seed + i", 1, 4096},
    {"dtype", OPT_STRING, G(dtype), "D", "weights the products read: fp32, or bf16 (a bf16 copy made once: half the bytes per step; the KV cache in bf16 too, activations in fp32)", 0, 0},
    {"temperature", OPT_FLOAT, F(temperature), "X", "softmax temperature (0: greedy)", 0, 100},
    {"top-k", OPT_INT, F(top_k), "K", "sample among the K most likely tokens (0: off)", 0, 1 << 20},
    {"top-p", OPT_FLOAT, F(top_p), "P", "sample among the most likely tokens whose probability adds up to P (1: off)", 1e-9, 1},
    {"seed", OPT_U64, F(seed), "N", "seed of the sampler (sample i: seed + i)", 0, 0},
    {"threads", OPT_INT, F(threads), "N", "OpenMP threads (0: all cores)", 0, 4096},
    {"no-pack", OPT_FLAG, G(no_pack), "", "fp32: steps read the model's weights in place instead of a copy packed for streaming (4 bytes per parameter less memory, steps ~15 % slower)", 0, 0},
    {"pin", OPT_FLAG, G(pin), "", "bind each thread to one physical core", 0, 0},
    {"json", OPT_FLAG, G(json), "", "print the speed report as one JSON object (stderr) instead of the line", 0, 0},
    {"triad-now", OPT_FLAG, G(triad_now), "", "also measure the memory bandwidth (gptc info's triad, ~1 s) right after the decode and report the decode against it: a shared host's bandwidth swings", 0, 0},
};
#undef F
#undef G

const gptc_command_spec gptc_cmd_sample_spec = {
    "sample", "gptc sample --ckpt PATH [--prompt TEXT] [options]",
    "Generates text from a checkpoint: the prompt prefilled in one forward, then one incremental step per token (KV cache) for all samples together; reports the speed on stderr.",
    g_sample_opts, sizeof g_sample_opts / sizeof g_sample_opts[0], NULL, sizeof(sample_cli),
};

/* What the pieces go to: stdout as they come (one sample, the prompt first), or one buffer per sample. */
typedef struct sink {
    const char *prompt; /* printed before the first piece, then NULL */
    int samples;
    char **buf;
    size_t *len, *cap;
    bool oom;
} sink;

static void emit(void *user, int sample, const char *text, size_t len) {
    sink *k = user;
    if (k->samples == 1) {
        if (k->prompt) {
            fputs(k->prompt, stdout);
            k->prompt = NULL;
        }
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        return;
    }
    if (k->len[sample] + len + 1 > k->cap[sample]) {
        size_t cap = (k->len[sample] + len + 1) * 2;
        char *b = realloc(k->buf[sample], cap);
        if (!b) {
            k->oom = true;
            return;
        }
        k->buf[sample] = b, k->cap[sample] = cap;
    }
    memcpy(k->buf[sample] + k->len[sample], text, len);
    k->len[sample] += len;
}

/* ms a step that moves `bytes` takes at gbps (0: gbps unknown), and x as a percentage of `of` */
static double ms_at(size_t bytes, double gbps) { return gbps > 0 ? bytes / (gbps * 1e9) * 1e3 : 0; }
static double pct_of(double x, double of) { return of > 0 ? 100 * x / of : 0; }

/* The speed line (or JSON) on stderr: prefill and decode rates against the cached peaks of `gptc info`,
 * and against now_gbps, a triad measured after the decode (0: not measured). */
static void report(const gptc_sample_stats *s, int threads, bool json, double now_gbps) {
    bool bf16 = s->dtype == GPTC_PRECISION_BF16, cached;
    const char *kind = NULL;
    double peak = gptc_peak_cached(NULL, bf16, threads, &kind, NULL);
    double bw = gptc_triad_cached(NULL, threads, true, &cached);
    double pre_tps = s->prefill_s > 0 ? s->prefill_tokens / s->prefill_s : 0;
    double pre_gf = s->prefill_s > 0 ? s->prefill_flops / s->prefill_s / 1e9 : 0;
    double step_ms = s->decode_steps ? s->decode_s * 1e3 / s->decode_steps : 0;
    double dec_tps = s->decode_s > 0 ? (double)s->decode_steps * s->samples / s->decode_s : 0;
    double bound_ms = ms_at(s->step_weight_bytes, bw); /* a step at the triad's speed */
    double got_gbps = step_ms > 0 ? s->step_weight_bytes / (step_ms * 1e-3) / 1e9 : 0;
    double bw_pct = pct_of(got_gbps, bw), peak_pct = pct_of(pre_gf, peak);
    double now_ms = ms_at(s->step_weight_bytes, now_gbps), now_pct = pct_of(got_gbps, now_gbps);
    char now_json[160] = "", now_line[160] = "";
    if (now_gbps > 0) {
        snprintf(now_json, sizeof now_json,
                 ", \"triad_now_gbps\": %.2f, \"bound_now_ms_per_step\": %.4f, \"bandwidth_now_pct\": %.2f", now_gbps,
                 now_ms, now_pct);
        snprintf(now_line, sizeof now_line, "; %.0f%% of the triad measured after it, %.1f GB/s (bound %.2f ms/step)",
                 now_pct, now_gbps, now_ms);
    }
    if (json) {
        fprintf(stderr,
                "{\"dtype\": \"%s\", \"threads\": %d, \"samples\": %d, \"prefill_tokens\": %d, \"prefill_s\": %.6f, "
                "\"prefill_tokens_per_s\": %.2f, \"prefill_gflops\": %.2f, \"peak_gflops\": %.2f, \"peak_kind\": \"%s\", "
                "\"prefill_peak_pct\": %.2f, \"decode_steps\": %d, \"decode_s\": %.6f, \"decode_tokens_per_s\": %.2f, "
                "\"ms_per_step\": %.4f, \"step_weight_bytes\": %zu, \"triad_gbps\": %.2f, \"bound_ms_per_step\": %.4f, "
                "\"decode_gbps\": %.2f, \"bandwidth_pct\": %.2f%s}\n",
                gptc_precision_name(s->dtype), threads, s->samples, s->prefill_tokens, s->prefill_s, pre_tps, pre_gf,
                peak, kind ? kind : "", peak_pct, s->decode_steps, s->decode_s, dec_tps, step_ms, s->step_weight_bytes,
                bw, bound_ms, got_gbps, bw_pct, now_json);
        return;
    }
    fprintf(stderr,
            "speed: %s, %d thread%s, %d sample%s | prefill %d tokens in %.3f s: %.1f tokens/s, %.1f GFLOP/s = %.0f%% of %.0f "
            "(%s peak) | decode %d steps: %.1f tokens/s (all samples), %.2f ms/step (%.2f ms/token); weights %.1f MB/step "
            "at %.1f GB/s = %.0f%% of the triad's %.1f GB/s (bound %.2f ms/step)%s\n",
            gptc_precision_name(s->dtype), threads, threads == 1 ? "" : "s", s->samples, s->samples == 1 ? "" : "s",
            s->prefill_tokens, s->prefill_s, pre_tps, pre_gf, peak_pct, peak, kind ? kind : "?", s->decode_steps,
            dec_tps, step_ms, s->samples ? step_ms / s->samples : 0, s->step_weight_bytes / 1e6, got_gbps, bw_pct, bw,
            bound_ms, now_line);
}

int gptc_cmd_sample(int argc, char **argv) {
    sample_cli c, d;
    gptc_sample_options_default(&c.o);
    gptc_sample_options_default(&d.o);
    c.dtype = d.dtype = "fp32";
    c.json = d.json = c.pin = d.pin = c.no_pack = d.no_pack = c.triad_now = d.triad_now = 0;
    bool help;
    int npos;
    if (gptc_options_parse(&gptc_cmd_sample_spec, &c, argc, argv, NULL, NULL, &npos, &help)) {
        gptc_cli_error();
        return 2;
    }
    if (help) {
        gptc_options_help(stdout, &gptc_cmd_sample_spec, &d);
        return 0;
    }
    if (gptc_precision_from_name(c.dtype, &c.o.dtype)) {
        gptc_cli_error();
        return 2;
    }
    c.o.pack = !c.no_pack;
    gptc_set_threads(c.o.threads);
    if (c.pin && gptc_pin_threads(NULL, 0) < 0) {
        gptc_cli_error();
        return 2;
    }
    int S = c.o.samples;
    sink k = {c.o.prompt, S, NULL, NULL, NULL, false};
    k.buf = calloc((size_t)S, sizeof *k.buf);
    k.len = calloc((size_t)S, sizeof *k.len);
    k.cap = calloc((size_t)S, sizeof *k.cap);
    if (!k.buf || !k.len || !k.cap) {
        fprintf(stderr, "gptc: out of memory\n");
        return 1;
    }
    gptc_sample_stats stats;
    gptc_status st = gptc_sample_many(&c.o, emit, &k, &stats);
    if (S == 1 && k.prompt == NULL) fputc('\n', stdout);
    if (S > 1 && !st)
        for (int i = 0; i < S; i++)
            printf("--- sample %d\n%s%.*s\n", i, c.o.prompt, (int)k.len[i], k.buf[i] ? k.buf[i] : "");
    for (int i = 0; i < S; i++) free(k.buf[i]);
    free(k.buf), free(k.len), free(k.cap);
    if (st) {
        gptc_cli_error();
        return st == GPTC_ERR_NOMEM || st == GPTC_ERR_NUMERIC ? 1 : 2;
    }
    if (k.oom) {
        fprintf(stderr, "gptc: out of memory while collecting the samples' text\n");
        return 1;
    }
    fflush(stdout);
    double now_gbps = 0;
    if (c.triad_now && stats.decode_steps > 0) { /* offered to the cache first, so the cached best is never below it */
        now_gbps = gptc_triad_gbps(gptc_threads());
        if (now_gbps > 0) gptc_triad_cache_offer(NULL, gptc_threads(), now_gbps);
    }
    report(&stats, gptc_threads(), c.json, now_gbps);
    return 0;
}
