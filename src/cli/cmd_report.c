/* cmd_report.c — `gptc report RUN_DIR`: reads the run's log.jsonl (every run appended to it, resumes
 * included; a later record of a step replaces an earlier one) and ablation.md if present, and writes
 * RUN_DIR/report.html, one self-contained page: a summary, inline SVG charts of train/val loss,
 * learning rate, tokens/s, step time, memory and MFU, and the ablation table. */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/report_svg.h"
#include "core/core.h"
#include "io/io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct report_cli {
    const char *out;
} report_cli;

#define F(field) offsetof(report_cli, field)
static const gptc_option g_report_opts[] = {
    {"out", OPT_STRING, F(out), "FILE", "the page to write (default RUN_DIR/report.html)", 0, 0},
};
#undef F

const gptc_command_spec gptc_cmd_report_spec = {
    "report", "gptc report RUN_DIR [--out FILE]",
    "Writes RUN_DIR/report.html from RUN_DIR/log.jsonl (written by gptc train --ckpt RUN_DIR) and RUN_DIR/ablation.md.",
    g_report_opts, sizeof g_report_opts / sizeof g_report_opts[0], "RUN_DIR", sizeof(report_cli),
};

/* One step record; the fields are the log's (NaN when absent). */
enum { X_LOSS, X_VAL, X_LR, X_NORM, X_MS, X_TOKS, X_MFU, X_P50, X_P95, X_JITTER, X_RSS, X_HS, X_HSN, NFIELDS };
static const char *const k_fields[NFIELDS] = {"loss", "val_loss", "lr", "grad_norm", "ms", "tokens_per_s",
                                              "mfu", "p50_ms", "p95_ms", "jitter_pct", "rss_mib",
                                              "hellaswag_acc", "hellaswag_acc_norm"};
typedef struct rec {
    int step;
    int order; /* position in the file, so that the last record of a step wins */
    double v[NFIELDS];
} rec;

typedef struct run_log {
    rec *recs;
    int n, cap;
    int runs;      /* start records */
    cJSON *start;  /* the last start record */
} run_log;

static int by_step_then_order(const void *a, const void *b) {
    const rec *x = a, *y = b;
    return x->step != y->step ? (x->step > y->step) - (x->step < y->step) : (x->order > y->order) - (x->order < y->order);
}

/* Parses the JSON lines of path into *lg: one line, one object; a last line without its newline (a
 * run killed mid-write) is skipped. Any other bad line is GPTC_ERR_FORMAT naming path:line. */
static gptc_status read_log(const char *path, run_log *lg) {
    char *text = NULL;
    size_t len = 0;
    gptc_status st = gptc_file_read_all(path, &text, &len);
    if (st) return st;
    int lineno = 0;
    for (char *line = text, *nl; line < text + len; line = nl + 1) {
        lineno++;
        nl = memchr(line, '\n', (size_t)(text + len - line));
        if (!nl) break; /* a torn last line */
        *nl = '\0';
        if (strspn(line, " \t\r") == (size_t)(nl - line)) continue;
        cJSON *o = cJSON_Parse(line);
        const cJSON *type = o ? cJSON_GetObjectItemCaseSensitive(o, "type") : NULL;
        if (!cJSON_IsObject(o) || !cJSON_IsString(type)) {
            cJSON_Delete(o);
            gptc_free(text);
            return gptc_fail(GPTC_ERR_FORMAT, "%s:%d: not a gptc log record (a JSON object with a \"type\")", path, lineno);
        }
        if (strcmp(type->valuestring, "start") == 0) {
            cJSON_Delete(lg->start);
            lg->start = o;
            lg->runs++;
            continue;
        }
        const cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
        if (strcmp(type->valuestring, "step") == 0 && cJSON_IsNumber(step)) {
            if (lg->n == lg->cap) {
                rec *grown = realloc(lg->recs, sizeof(rec) * (lg->cap = lg->cap ? 2 * lg->cap : 1024));
                if (!grown) {
                    cJSON_Delete(o);
                    gptc_free(text);
                    return gptc_fail(GPTC_ERR_NOMEM, "%s: out of memory", path);
                }
                lg->recs = grown;
            }
            rec *r = &lg->recs[lg->n];
            r->step = step->valueint;
            r->order = lg->n++;
            for (int k = 0; k < NFIELDS; k++) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k_fields[k]);
                r->v[k] = cJSON_IsNumber(v) ? v->valuedouble : NAN;
            }
        }
        cJSON_Delete(o);
    }
    gptc_free(text);
    /* (qsort may not be given the NULL of an empty log: UBSan, `make test-sanitize`) */
    if (lg->n == 0) return gptc_fail(GPTC_ERR_FORMAT, "%s: no step records (has the run taken a step?)", path);
    /* by step, the last record of each step kept */
    qsort(lg->recs, lg->n, sizeof(rec), by_step_then_order);
    int m = 0;
    for (int i = 0; i < lg->n; i++) {
        if (m && lg->recs[m - 1].step == lg->recs[i].step) m--;
        lg->recs[m++] = lg->recs[i];
    }
    lg->n = m;
    return GPTC_OK;
}

/* The median of field k over the records, NaNs left out. */
static double median_of(const run_log *lg, int k, double scale) {
    double *v = malloc(sizeof(double) * lg->n);
    size_t n = 0;
    for (int i = 0; v && i < lg->n; i++)
        if (isfinite(lg->recs[i].v[k])) v[n++] = lg->recs[i].v[k] * scale;
    double med = v ? gptc_median(v, n) : NAN;
    free(v);
    return med;
}

static double last_of(const run_log *lg, int k, int *step) {
    for (int i = lg->n - 1; i >= 0; i--)
        if (isfinite(lg->recs[i].v[k])) {
            if (step) *step = lg->recs[i].step;
            return lg->recs[i].v[k];
        }
    return NAN;
}

static double max_of(const run_log *lg, int k) {
    double m = NAN;
    for (int i = 0; i < lg->n; i++)
        if (isfinite(lg->recs[i].v[k]) && !(m >= lg->recs[i].v[k])) m = lg->recs[i].v[k];
    return m;
}

static void row(FILE *f, const char *name, const char *value) {
    fputs("<tr><th>", f);
    report_escape(f, name);
    fputs("</th><td>", f);
    report_escape(f, value);
    fputs("</td></tr>\n", f);
}

static const char *str_of(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "?";
}
static double num_of(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void summary(FILE *f, const run_log *lg) {
    char b[512];
    fputs("<table class=\"summary\">\n", f);
    const cJSON *s = lg->start, *m = s ? cJSON_GetObjectItemCaseSensitive(s, "model") : NULL;
    if (m) {
        snprintf(b, sizeof b, "%s: %.0f layers, %.0f heads, %.0f channels, context %.0f, vocab %.0f, gelu %s, %.2fM parameters",
                 str_of(s, "model_preset"), num_of(m, "layers"), num_of(m, "heads"), num_of(m, "channels"),
                 num_of(m, "context"), num_of(m, "vocab"), str_of(m, "gelu"), num_of(m, "params") / 1e6);
        row(f, "model", b);
        snprintf(b, sizeof b, "batch %.0f × seq %.0f, %.0f tokens/update, dtype %s, recompute %s", num_of(s, "batch"),
                 num_of(s, "seq"), num_of(s, "tokens_per_update"), str_of(s, "dtype"), str_of(s, "recompute"));
        row(f, "training", b);
        const cJSON *pin = cJSON_GetObjectItemCaseSensitive(s, "pin");
        snprintf(b, sizeof b, "%s, kernels %s, %.0f threads%s; %s peak %.1f GFLOP/s", str_of(s, "cpu"), str_of(s, "kernels"),
                 num_of(s, "threads"), cJSON_IsTrue(pin) ? " (pinned)" : "", str_of(s, "peak_kind"), num_of(s, "peak_gflops"));
        row(f, "machine", b);
    }
    snprintf(b, sizeof b, "%d logged (steps %d to %d of %.0f), %d run%s in the log", lg->n, lg->recs[0].step,
             lg->recs[lg->n - 1].step, s ? num_of(s, "steps") : NAN, lg->runs, lg->runs == 1 ? "" : "s");
    row(f, "steps", b);
    int at = 0;
    double v = last_of(lg, X_LOSS, &at);
    snprintf(b, sizeof b, "%.4f (step %d)", v, at);
    row(f, "final train loss", b);
    v = last_of(lg, X_VAL, &at);
    if (isfinite(v)) snprintf(b, sizeof b, "%.4f (step %d)", v, at);
    else snprintf(b, sizeof b, "not evaluated");
    row(f, "final val loss", b);
    snprintf(b, sizeof b, "%.1f tokens/s, %.1f ms/step, MFU %.1f%%", median_of(lg, X_TOKS, 1), median_of(lg, X_MS, 1),
             median_of(lg, X_MFU, 100));
    row(f, "median throughput", b);
    snprintf(b, sizeof b, "median of the rolling p95 %.1f ms, median stdev %.1f%% of the mean", median_of(lg, X_P95, 1),
             median_of(lg, X_JITTER, 1));
    row(f, "step-time jitter", b);
    snprintf(b, sizeof b, "%.0f MiB", max_of(lg, X_RSS));
    row(f, "peak RSS", b);
    fputs("</table>\n", f);
}

/* The cells of a Markdown table row "| a | b |" in place; returns the count. */
static int split_cells(char *line, char **cells, int cap) {
    int n = 0;
    char *p = line + 1; /* after the leading '|' */
    for (char *bar; n < cap && (bar = strchr(p, '|')); p = bar + 1) {
        *bar = '\0';
        char *c = p + strspn(p, " \t");
        for (char *e = c + strlen(c); e > c && (e[-1] == ' ' || e[-1] == '\t'); e--) e[-1] = '\0';
        cells[n++] = c;
    }
    return n;
}

/* ablation.md (gptc bench --ablation --out) as an HTML table, its other lines as paragraphs. */
static void ablation(FILE *f, char *md) {
    fputs("<h2>Ablation</h2>\n", f);
    bool in_table = false, header = true, right[32] = {0};
    for (char *line = strtok(md, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] != '|') {
            if (in_table) fputs("</table>\n", f);
            in_table = false;
            if (!*line) continue;
            fputs("<p class=\"note\">", f);
            report_escape(f, line);
            fputs("</p>\n", f);
            continue;
        }
        char *cells[32];
        int n = split_cells(line, cells, 32);
        if (!in_table) {
            fputs("<table class=\"ablation\">\n", f);
            in_table = true;
            header = true;
        }
        if (n && strspn(cells[0], "-: ") == strlen(cells[0]) && *cells[0]) { /* the alignment row */
            for (int i = 0; i < n; i++) right[i] = cells[i][strlen(cells[i]) - 1] == ':';
            continue;
        }
        fputs("<tr>", f);
        for (int i = 0; i < n; i++) {
            fprintf(f, "<%s%s>", header ? "th" : "td", !header && right[i] ? " class=\"num\"" : "");
            report_escape(f, cells[i]);
            fprintf(f, "</%s>", header ? "th" : "td");
        }
        fputs("</tr>\n", f);
        header = false;
    }
    if (in_table) fputs("</table>\n", f);
}

static const char k_style[] =
    "body{font-family:sans-serif;margin:24px;color:#222;background:#fff;max-width:1180px}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:28px}"
    "table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}"
    "td.num{text-align:right}table.summary th{background:#f3f3f3}"
    ".charts{display:flex;flex-wrap:wrap;gap:8px}figure.chart{margin:0}"
    "svg{background:#fff;font-size:11px}.title{font-size:14px;font-weight:bold}.axis{font-size:12px}"
    ".grid{stroke:#e4e4e4}.frame{fill:none;stroke:#888}.tick,.legend{fill:#333}.note{font-size:12px;color:#555}";

/* The page into f. */
static void page(FILE *f, const char *dir, const run_log *lg, char *ablation_md) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gptc report: ", f);
    report_escape(f, dir);
    fprintf(f, "</title><style>%s</style></head><body>\n<h1>gptc training report: ", k_style);
    report_escape(f, dir);
    fputs("</h1>\n", f);
    summary(f, lg);

    int n = lg->n;
    double *x = malloc(sizeof(double) * n), *col[NFIELDS];
    for (int k = 0; k < NFIELDS; k++) col[k] = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) {
        x[i] = lg->recs[i].step;
        for (int k = 0; k < NFIELDS; k++) col[k][i] = lg->recs[i].v[k] * (k == X_MFU ? 100 : 1);
    }
    /* val loss: only the evaluated steps */
    double *vx = malloc(sizeof(double) * n), *vy = malloc(sizeof(double) * n);
    int nv = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(col[X_VAL][i])) vx[nv] = x[i], vy[nv++] = col[X_VAL][i];

    fputs("<h2>Curves</h2>\n<div class=\"charts\">\n", f);
    report_series loss[] = {{"train loss", "train-loss", "#1f77b4", x, col[X_LOSS], n, false},
                            {"val loss", "val-loss", "#d62728", vx, vy, nv, true}};
    report_chart(f, "Loss", "loss", loss, nv ? 2 : 1);
    report_series lr = {"learning rate", "lr", "#2ca02c", x, col[X_LR], n, false};
    report_chart(f, "Learning rate", "lr", &lr, 1);
    report_series tok = {"tokens/s", "tokens-per-s", "#9467bd", x, col[X_TOKS], n, false};
    report_chart(f, "Throughput", "tokens/s", &tok, 1);
    report_series ms[] = {{"step", "ms", "#8c564b", x, col[X_MS], n, false},
                          {"rolling p50", "p50-ms", "#17becf", x, col[X_P50], n, false},
                          {"rolling p95", "p95-ms", "#ff7f0e", x, col[X_P95], n, false}};
    report_chart(f, "Step time", "ms", ms, 3);
    report_series rss = {"peak RSS", "rss-mib", "#7f7f7f", x, col[X_RSS], n, false};
    report_chart(f, "Memory", "MiB", &rss, 1);
    report_series mfu = {"MFU", "mfu", "#bcbd22", x, col[X_MFU], n, false};
    report_chart(f, "Model FLOPs utilisation", "MFU %", &mfu, 1);
    /* multiple choice (--eval-hellaswag): only the evaluated steps */
    double *hx = malloc(sizeof(double) * n), *ha = malloc(sizeof(double) * n), *hn = malloc(sizeof(double) * n);
    int nh = 0;
    for (int i = 0; hx && ha && hn && i < n; i++)
        if (isfinite(col[X_HS][i])) hx[nh] = x[i], ha[nh] = 100 * col[X_HS][i], hn[nh++] = 100 * col[X_HSN][i];
    report_series hs[] = {{"acc", "hellaswag-acc", "#e377c2", hx, ha, nh, true},
                          {"acc_norm", "hellaswag-acc-norm", "#17becf", hx, hn, nh, true}};
    if (nh) report_chart(f, "HellaSwag-format multiple choice", "accuracy %", hs, 2);
    free(hx), free(ha), free(hn);
    fputs("</div>\n", f);
    if (ablation_md) ablation(f, ablation_md);
    fputs("<p class=\"note\">Written by gptc report from log.jsonl", f);
    if (ablation_md) fputs(" and ablation.md", f);
    fputs(".</p>\n</body></html>\n", f);
    free(x);
    free(vx);
    free(vy);
    for (int k = 0; k < NFIELDS; k++) free(col[k]);
}

int gptc_cmd_report(int argc, char **argv) {
    report_cli c = {0};
    bool help;
    int npos;
    const char **pos = calloc((size_t)argc + 1, sizeof *pos);
    if (!pos || gptc_options_parse(&gptc_cmd_report_spec, &c, argc, argv, NULL, pos, &npos, &help)) {
        gptc_cli_error();
        free(pos);
        return 2;
    }
    const char *dir = npos == 1 ? pos[0] : NULL;
    free(pos);
    if (help) {
        gptc_options_help(stdout, &gptc_cmd_report_spec, &c);
        return 0;
    }
    if (!dir) {
        fprintf(stderr, "gptc report: give one run folder: gptc report RUN_DIR (see gptc report --help)\n");
        return 2;
    }
    char logp[4096], mdp[4096], outp[4096];
    snprintf(logp, sizeof logp, "%s/log.jsonl", dir);
    snprintf(mdp, sizeof mdp, "%s/ablation.md", dir);
    snprintf(outp, sizeof outp, "%s", c.out ? c.out : "");
    if (!c.out) snprintf(outp, sizeof outp, "%s/report.html", dir);
    if (!gptc_is_dir(dir)) {
        fprintf(stderr, "gptc report: %s: not a folder\n", dir);
        return 2;
    }
    if (!gptc_is_file(logp)) {
        fprintf(stderr, "gptc report: %s: not found; train with --ckpt %s (or --log %s) first\n", logp, dir, logp);
        return 2;
    }
    run_log lg = {0};
    char *md = NULL;
    size_t mdlen = 0;
    if (read_log(logp, &lg) || (gptc_is_file(mdp) && gptc_file_read_all(mdp, &md, &mdlen))) {
        fprintf(stderr, "gptc report: %s\n", gptc_last_error());
        free(lg.recs);
        cJSON_Delete(lg.start);
        return 2;
    }
    char *html = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&html, &len);
    int rc = 0;
    if (!f) {
        fprintf(stderr, "gptc report: out of memory\n");
        rc = 1;
    } else {
        page(f, dir, &lg, md);
        fclose(f);
        const void *parts[] = {html};
        if (gptc_file_write_atomic(outp, parts, &len, 1)) {
            fprintf(stderr, "gptc report: --out %s\n", gptc_last_error());
            rc = 2;
        } else {
            printf("report: %s (%d steps, %d run%s%s)\n", outp, lg.n, lg.runs, lg.runs == 1 ? "" : "s",
                   md ? ", ablation table" : "");
        }
    }
    free(html);
    gptc_free(md);
    free(lg.recs);
    cJSON_Delete(lg.start);
    return rc;
}
