/* test_bench.c — `gptc bench --ablation` and the per-operator kernel choice it relies on
 * (GPTC_KERNELS=LEVEL,OP=LEVEL,...): the overrides reach the operators `gptc info` lists and the flash
 * attention; the ablation runs every stage and prints a consistent table (speed-ups equal to the
 * ratios of the tokens/s it printed) and writes it with --out; bad usage is one line, exit 2. Nothing
 * here depends on how fast the machine is. */
#include "test.h"
#include "dist/dist.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

TEST(kernels_env_overrides_single_operators) {
    /* off x86 (aarch64) ref is the only level: the overrides are parsed all the same */
    const char *best = !gptc_kernels_level("avx2") ? "ref" : system("grep -q avx512f /proc/cpuinfo") == 0 ? "avx512" : "avx2";
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "GPTC_KERNELS=ref,gemm=%s,flash=%s %s info", best, best, test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    char want[64];
    snprintf(want, sizeof want, " gemm=%s ", best);
    CHECK_MSG(out && strstr(out, want), "no \"%s\" in: %s", want, out);
    CHECK(out && strstr(out, " layernorm_fwd=ref ") && strstr(out, " adamw=ref"));
    snprintf(want, sizeof want, "flash attention (used by training; attention_* above are the naive reference and "
                                "decoding): %s", best);
    CHECK_MSG(out && strstr(out, want), "flash not at %s: %s", best, out);
    free(out);
    snprintf(cmd, sizeof cmd, "GPTC_KERNELS=ref,nosuchop=avx2 %s info", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK(out && strstr(out, "'nosuchop=avx2' is not OP=LEVEL") && strstr(out, " gemm=ref "));
    free(out);
}

TEST(bench_ablation_table) {
    if (getenv("GPTC_TEST_RUNNER")) { /* make test-aarch64 */
        printf("    SKIP: under emulation: gptc bench execs /proc/self/exe per stage, which needs binfmt_misc\n");
        return;
    }
    const char *d = test_shakespeare_data();
    char md[600], cmd[2048], *out = NULL;
    snprintf(md, sizeof md, "%s/ablation.md", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s bench --ablation --model tiny --data %s --batch 4 --seq 32 --steps 2 --out %s",
             test_gptc_bin(), d, md);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    const char *stages[] = {"| baseline: reference kernels, naive attention, erf GELU, unfused |",
                            "| + fused flash attention, fast tanh GELU |",
                            "| + fused residual+LayerNorm, chunked classifier+cross-entropy |",
                            "| + SIMD GEMM", "| + bf16 mixed precision |", "| + recompute block (memory) |",
                            "| + 2 ranks over MPI (same global batch and cores, split) |"};
    /* the 2-rank row where this build has MPI and mpirun is installed; otherwise it is left out, saying why */
    bool mpi = gptc_dist_has_mpi() && test_run("command -v mpirun", NULL) == 0;
    int rows = mpi ? 7 : 6;
    if (!mpi) CHECK_MSG(out && strstr(out, "the 2-rank stage is left out"), "no word on the 2-rank stage: %s", out);
    else CHECK_MSG(out && !strstr(out, "left out"), "%s", out);
    double base = 0, prev = 0;
    for (int i = 0; i < rows; i++) {
        const char *row = out ? strstr(out, stages[i]) : NULL;
        CHECK_MSG(row, "no row %s in: %s", stages[i], out);
        if (!row) continue;
        /* the cells after the name: ms/step | tokens/s | MFU % | MiB | vs previous× | vs baseline× */
        double v[6] = {0};
        int parsed = 0;
        const char *cell = strchr(row + 1, '|');
        for (int k = 0; k < 6 && cell; k++) {
            char *end;
            v[k] = strtod(cell + 1, &end);
            parsed += end != cell + 1;
            cell = strchr(cell + 1, '|');
        }
        double ms = v[0], tok = v[1], mfu = v[2], mib = v[3], vp = v[4], vb = v[5];
        /* MFU is printed to 0.1%: a tiny model on a busy machine (or under ASan) can show 0.0 */
        CHECK_MSG(parsed == 6 && ms > 0 && tok > 0 && mfu >= 0 && mib > 0 && vp > 0 && vb > 0, "row %d unparsed: %.200s", i, row);
        if (i == 0) base = tok;
        CHECK_MSG(fabs(vb - tok / base) <= 0.006 * (tok / base) + 0.006, "row %d: vs baseline %.2f, tokens/s ratio %.3f",
                  i, vb, tok / base);
        if (i > 0)
            CHECK_MSG(fabs(vp - tok / prev) <= 0.006 * (tok / prev) + 0.006, "row %d: vs previous %.2f, ratio %.3f", i,
                      vp, tok / prev);
        prev = tok;
    }
    char rd[2048], *file = NULL;
    snprintf(rd, sizeof rd, "cat %s", md);
    CHECK_EQ_INT(test_run(rd, &file), 0);
    CHECK_MSG(file && out && strstr(out, file), "--out file is not the printed table: %s", file);
    free(file);
    free(out);
    snprintf(cmd, sizeof cmd, "%s bench --model tiny", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK(out && strstr(out, "use --ablation"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s bench --ablation --data /nonexistent/shards", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK(out && strstr(out, "--data /nonexistent/shards: not found"));
    free(out);
}

/* `gptc info` with gemm_bf16 on the reference kernels (fp32 FMAs: no bf16 peak of its own) caches the
 * fp32 probe's figure under fp32, not the vdpbf16ps probe's twice-higher one (which a cache that keeps
 * the larger figure would then keep for good). The cache starts empty, so it must hold what info printed. */
TEST(info_caches_no_bf16_figure_as_the_fp32_peak) {
    char dir[1024], cmd[2048], path[1100], *out = NULL;
    test_dir("peak_cache", "", dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "XDG_CACHE_HOME=%s GPTC_KERNELS=ref %s info", dir, test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    const char *line = out ? strstr(out, "peak (measured, fp32 FMA): ") : NULL;
    double printed = line ? atof(line + strlen("peak (measured, fp32 FMA): ")) : 0;
    if (printed <= 0) {
        printf("    (no FMA probe on this CPU: nothing cached)\n");
        free(out);
        return;
    }
    snprintf(path, sizeof path, "%s/gptc/peak.json", dir);
    char *json = test_slurp(path);
    const char *key = strstr(json, "|fp32|1\"");
    const char *colon = key ? strchr(key, ':') : NULL;
    CHECK_MSG(colon, "no 1-thread fp32 entry in %s: %s", path, json);
    double cached = colon ? atof(colon + 1) : 0;
    CHECK_MSG(cached > printed - 0.06 && cached < printed + 0.06, "cached fp32 peak %.2f, info printed %.1f", cached,
              printed);
    free(json);
    free(out);
}
