/* test_report.c — `gptc report RUN_DIR`: a short run with --ckpt (its log.jsonl, appended on resume),
 * an ablation.md from gptc bench, then the page: one <svg> per chart, a polyline point per logged
 * step (val loss: per evaluation), the ablation rows, escaped text, nothing fetched from a network;
 * bad input is one line and exit 2 with nothing written; and, when Debian's chromium is installed,
 * a headless screenshot of the page that is a real, non-blank PNG. */
#include "test.h"
#include "dist/dist.h"
#include "io/io.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A run folder made once: 30 steps of the tiny model evaluated every 10, then resumed to 35 (two
 * start records in its log.jsonl), and an ablation.md. */
static const char *report_run(void) {
    static char dir[600];
    if (dir[0]) return dir;
    test_dir("report-", "run", dir, sizeof dir);
    const char *d = test_shakespeare_data();
    char cmd[2048], *out = NULL;
    for (int steps = 30; steps <= 35; steps += 5) {
        snprintf(cmd, sizeof cmd, "%s train --model tiny --data %s --batch 4 --seq 32 --steps %d --eval-every 10 "
                 "--eval-batches 2 --ckpt %s", test_gptc_bin(), d, steps, dir);
        CHECK_EQ_INT(test_run(cmd, &out), 0);
        CHECK_MSG(out && strstr(out, "train: step time p50"), "train output: %s", out);
        free(out);
    }
    /* make test-aarch64: gptc bench execs /proc/self/exe per stage, which needs binfmt_misc */
    bool bench = !getenv("GPTC_TEST_RUNNER");
    snprintf(cmd, sizeof cmd, "%s bench --ablation --model tiny --data %s --batch 4 --seq 32 --steps 2 --out %s/ablation.md",
             test_gptc_bin(), d, dir);
    if (bench) {
        CHECK_EQ_INT(test_run(cmd, &out), 0);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "%s report %s", test_gptc_bin(), dir);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK_MSG(out && strstr(out, bench ? "(35 steps, 2 runs, ablation table)" : "(35 steps, 2 runs)"), "report output: %s", out);
    free(out);
    return dir;
}

__attribute__((noinline)) static char *read_text(const char *path) {
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(gptc_file_read_all(path, &text, &len));
    return text;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* The number of "x,y" points of the polyline of class "series CLS" (-1 if absent). */
static int polyline_points(const char *html, const char *cls) {
    char key[128];
    snprintf(key, sizeof key, "<polyline class=\"series %s\"", cls);
    const char *p = strstr(html, key), *pts = p ? strstr(p, "points=\"") : NULL;
    if (!pts || pts > strchr(p, '>')) return -1;
    pts += 8;
    int n = 0;
    for (const char *q = pts; *q && *q != '"'; q++) {
        double x, y;
        int used = 0;
        if (sscanf(q, "%lf,%lf%n", &x, &y, &used) != 2 || used == 0) return -1;
        n++;
        q += used;
        if (*q == '"') break;
    }
    return n;
}

TEST(report_log_jsonl_records) {
    char path[700];
    char *text = read_text(test_path(path, sizeof path, "%s/log.jsonl", report_run()));
    const char *step_fields[] = {"step", "loss", "lr", "grad_norm", "ms", "tokens_per_s", "mfu", "p50_ms", "p95_ms",
                                 "jitter_pct", "rss_mib", "time"};
    const char *start_fields[] = {"model", "batch", "seq", "dtype", "recompute", "threads", "pin", "peak_gflops", "time"};
    int starts = 0, steps = 0, vals = 0, ckpts = 0, last = 0;
    double peak = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(o, "type"));
        CHECK_MSG(o && type, "not a record: %s", line);
        if (!type) { cJSON_Delete(o); continue; }
        if (strcmp(type, "start") == 0) {
            starts++;
            for (size_t i = 0; i < sizeof start_fields / sizeof *start_fields; i++)
                CHECK_MSG(cJSON_GetObjectItem(o, start_fields[i]), "start record without %s: %s", start_fields[i], line);
            CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "model"), "layers")->valueint == 2);
            CHECK(cJSON_GetObjectItem(o, "first_step")->valueint == (starts == 1 ? 0 : 30));
            peak = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "peak_gflops"));
        } else if (strcmp(type, "step") == 0) {
            steps++;
            for (size_t i = 0; i < sizeof step_fields / sizeof *step_fields; i++)
                CHECK_MSG(cJSON_IsNumber(cJSON_GetObjectItem(o, step_fields[i])), "step record without %s: %s",
                          step_fields[i], line);
            int s = cJSON_GetObjectItem(o, "step")->valueint;
            CHECK_EQ_INT(s, last + 1);
            last = s;
            double mfu = cJSON_GetObjectItem(o, "mfu")->valuedouble;
            if (peak > 0) CHECK_MSG(mfu > 0 && mfu < 10, "mfu %g", mfu);
            else CHECK_MSG(mfu == 0, "mfu %g without a peak (no FMA probe for this CPU, e.g. off x86)", mfu);
            if (cJSON_GetObjectItem(o, "val_loss")) vals++;
        } else if (strcmp(type, "checkpoint") == 0) {
            ckpts++;
        }
        cJSON_Delete(o);
    }
    /* evaluated at the first step of each run, every 10th step and the last */
    CHECK(starts == 2 && steps == 35 && ckpts == 2);
    CHECK_EQ_INT(vals, 6); /* 1, 10, 20, 30 | 31, 35 */
    gptc_free(text);
}

TEST(report_html_page) {
    char path[700];
    char *html = read_text(test_path(path, sizeof path, "%s/report.html", report_run()));
    if (!html) return;
    CHECK(strncmp(html, "<!DOCTYPE html>", 15) == 0 && strstr(html, "</html>"));
    /* six charts, each a closed <svg> inside a <figure> */
    CHECK_EQ_INT(count(html, "<svg "), 6);
    CHECK_EQ_INT(count(html, "</svg>"), 6);
    CHECK_EQ_INT(count(html, "<figure"), count(html, "</figure>"));
    CHECK_EQ_INT(count(html, "<table"), count(html, "</table>"));
    const char *per_step[] = {"train-loss", "lr", "tokens-per-s", "ms", "p95-ms", "rss-mib", "mfu"};
    for (int i = 0; i < 7; i++) {
        int n = polyline_points(html, per_step[i]);
        CHECK_MSG(n == 35, "series %s: %d points, not one per logged step (35)", per_step[i], n);
    }
    CHECK_EQ_INT(polyline_points(html, "val-loss"), 6);
    CHECK_EQ_INT(count(html, "<circle class=\"marker val-loss\""), 6);
    /* the ablation table: a header and a row per stage */
    const char *tab = strstr(html, "<table class=\"ablation\">");
    if (getenv("GPTC_TEST_RUNNER")) printf("    SKIP the ablation table: under emulation gptc bench cannot run (it execs itself)\n");
    else CHECK(tab);
    if (tab) {
        const char *end = strstr(tab, "</table>");
        int rows = 0;
        for (const char *p = tab; (p = strstr(p, "<tr>")) && p < end; p++) rows++;
        /* with the 2-rank stage where this build has MPI and mpirun is installed */
        bool mpi = gptc_dist_has_mpi() && test_run("command -v mpirun", NULL) == 0;
        CHECK_EQ_INT(rows, mpi ? 8 : 7);
        CHECK(strstr(tab, "<td>baseline: reference kernels, naive attention, erf GELU, unfused</td>"));
    }
    CHECK(strstr(html, "35 logged (steps 1 to 35 of 35), 2 runs in the log"));
    /* self-contained: no scripts, nothing to fetch */
    CHECK(!strcasestr(html, "http") && !strcasestr(html, "<script") && !strcasestr(html, "src=") &&
          !strcasestr(html, "url(") && !strcasestr(html, "<link"));
    gptc_free(html);
}

TEST(report_escapes_text) {
    char dir[700], cmd[2048], path[800];
    test_path(dir, sizeof dir, "%s/a<b&c\"d", test_tmpdir());
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp %s/log.jsonl '%s'/ && %s report '%s'", dir, report_run(), dir,
             test_gptc_bin(), dir);
    CHECK_EQ_INT(test_run(cmd, NULL), 0);
    char *html = read_text(test_path(path, sizeof path, "%s/report.html", dir));
    CHECK(html && strstr(html, "a&lt;b&amp;c&quot;d") && !strstr(html, "a<b&c"));
    CHECK(html && !strstr(html, "class=\"ablation\"")); /* no ablation.md, no table */
    gptc_free(html);
}

TEST(report_bad_input) {
    char dir[600], cmd[2048], path[700], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s report", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK(out && strstr(out, "give one run folder"));
    free(out);
    test_dir("report-", "empty", dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "%s report %s", test_gptc_bin(), dir);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "log.jsonl: not found; train with --ckpt"), "output: %s", out);
    free(out);
    CHECK(!gptc_is_file(test_path(path, sizeof path, "%s/report.html", dir)));
    test_write_file(test_path(path, sizeof path, "%s/log.jsonl", dir), "{\"type\":\"start\"}\nnot json\n", 26);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "log.jsonl:2: not a gptc log record"), "output: %s", out);
    free(out);
    test_write_file(path, "{\"type\":\"start\"}\n", 17);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && strstr(out, "no step records"), "output: %s", out);
    free(out);
    CHECK(!gptc_is_file(test_path(path, sizeof path, "%s/report.html", dir)));
}

/* Width and height from a PNG's IHDR; false if the file is not a PNG. */
static bool png_size(const char *path, uint32_t *w, uint32_t *h, long *bytes) {
    FILE *f = fopen(path, "rb");
    unsigned char b[24];
    bool ok = f && fread(b, 1, 24, f) == 24 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0 && memcmp(b + 12, "IHDR", 4) == 0;
    if (ok) {
        *w = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 | b[19];
        *h = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 | (uint32_t)b[22] << 8 | b[23];
        fseek(f, 0, SEEK_END);
        *bytes = ftell(f);
    }
    if (f) fclose(f);
    return ok;
}

/* Screenshots file:// path into png with headless chromium; returns its exit status. */
static int screenshot(const char *page, const char *png) {
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
             "--user-data-dir=%s/chromium-profile --window-size=1200,1600 --screenshot=%s 'file://%s'",
             test_tmpdir(), png, page);
    int rc = test_run(cmd, &out);
    if (rc != 0) printf("    chromium: %s\n", out ? out : "");
    free(out);
    return rc;
}

TEST(report_screenshot_chromium) {
    if (test_run("command -v chromium", NULL) != 0) {
        printf("    SKIP: chromium not installed (sh tools/setup.sh --browser)\n");
        return;
    }
    char page[700], abs[4096], png[800], blank[800], empty[800];
    if (!realpath(test_path(page, sizeof page, "%s/report.html", report_run()), abs)) {
        CHECK_MSG(0, "no %s", page);
        return;
    }
    test_path(png, sizeof png, "%s/report.png", test_tmpdir());
    test_path(empty, sizeof empty, "%s/empty.html", test_tmpdir());
    test_path(blank, sizeof blank, "%s/empty.png", test_tmpdir());
    test_write_file(empty, "<!DOCTYPE html><html><body></body></html>\n", 43);
    CHECK_EQ_INT(screenshot(abs, png), 0);
    CHECK_EQ_INT(screenshot(empty, blank), 0);
    uint32_t w = 0, h = 0, bw = 0, bh = 0;
    long bytes = 0, blank_bytes = 0;
    CHECK_MSG(png_size(png, &w, &h, &bytes), "%s is not a PNG", png);
    CHECK(png_size(blank, &bw, &bh, &blank_bytes));
    /* the window's size (times a device scale factor, if any) */
    CHECK_MSG(w >= 1200 && h >= 1600 && w * 1600 == h * 1200, "screenshot %ux%u", w, h);
    /* charts and text compress far worse than a white page of the same size */
    CHECK_MSG(bytes > 5 * blank_bytes && bytes > 50000, "screenshot %ld bytes, blank page %ld: nothing drawn?", bytes,
              blank_bytes);
    printf("    screenshot %s: %ux%u, %ld bytes (blank page %ld)\n", png, w, h, bytes, blank_bytes);
}
