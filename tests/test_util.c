/* test_util.c — helpers shared by the tests: a scratch folder, running the CLI, error measures. */
#include "test.h"
#include "core/core.h"
#include "gptc.h"
#include "io/io.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_tmpdir[256];

/* removes the scratch folder at exit unless GPTC_KEEP_TMP is set (for looking at a failure) */
static void remove_tmpdir(void) {
    if (getenv("GPTC_KEEP_TMP")) {
        fprintf(stdout, "kept %s\n", g_tmpdir);
        return;
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmpdir);
}

const char *test_tmpdir(void) {
    if (!g_tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(g_tmpdir, sizeof g_tmpdir, "%s/gptc-test-XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(g_tmpdir)) { perror("mkdtemp"); abort(); }
        atexit(remove_tmpdir);
    }
    return g_tmpdir;
}

/* GPTC_BIN, else the gptc built beside this test binary (make BUILD=DIR builds both into DIR), else
 * build/gptc */
const char *test_shakespeare_data(void) {
    static char dir[512];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/cli-data", test_tmpdir());
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s prepare --tokenizer byte data/tinyshakespeare.txt --out %s", test_gptc_bin(), dir);
        CHECK_EQ_INT(test_run(cmd, NULL), 0);
    }
    return dir;
}

const char *test_gptc_bin(void) {
    static char beside[4096];
    const char *b = getenv("GPTC_BIN");
    if (b) return b;
    if (!beside[0]) {
        ssize_t n = readlink("/proc/self/exe", beside, sizeof beside - 8);
        char *slash = n > 0 ? memrchr(beside, '/', (size_t)n) : NULL;
        if (slash) strcpy(slash + 1, "gptc");
        if (!slash || access(beside, X_OK) != 0) snprintf(beside, sizeof beside, "build/gptc");
    }
    return beside;
}

int test_run(const char *cmd, char **out) {
    char full[8192];
    snprintf(full, sizeof full, "(%s) 2>&1", cmd);
    FILE *f = popen(full, "r");
    if (!f) return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 1024) buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    int st = pclose(f);
    if (out) *out = buf; else free(buf);
    if (st == -1 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

double test_rel_err_f(const float *a, const float *b, size_t n) {
    double maxdiff = 0, maxref = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= maxdiff)) maxdiff = d; /* NaN propagates */
        if (fabs(b[i]) > maxref) maxref = fabs(b[i]);
    }
    return maxdiff / (maxref > 1e-30 ? maxref : 1e-30);
}

double test_rel_err_d(const double *a, const double *b, size_t n) {
    double maxdiff = 0, maxref = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= maxdiff)) maxdiff = d;
        if (fabs(b[i]) > maxref) maxref = fabs(b[i]);
    }
    return maxdiff / (maxref > 1e-30 ? maxref : 1e-30);
}

const char *test_dir(const char *prefix, const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s%s", test_tmpdir(), prefix, name);
    mkdir(buf, 0755);
    return buf;
}

const char *test_path(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return buf;
}

void test_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); abort(); }
    if (len && fwrite(data, 1, len, f) != len) { perror(path); abort(); }
    fclose(f);
}

float *test_randn_f(struct gptc_rng *r, size_t n, double scale) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * gptc_rng_normal(r));
    return x;
}
float test_uniform(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (float)((*state >> 40) * (1.0 / (1ull << 23)) - 1.0);
}
float *test_zeros_f(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
float *test_copy_f(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

void test_tiny_train_options(gptc_train_options *o, const char *data) {
    gptc_train_options_default(o);
    gptc_model_preset("tiny", &o->model);
    o->data = data;
    o->batch = 4;
    o->seq = 32;
    o->steps = 20;
    o->warmup = 5;
    o->lr = 3e-3f;
    o->eval_every = 0;
    o->eval_batches = 2;
    o->ckpt_every = 0;
    o->threads = 2;
}

char *test_slurp(const char *path) {
    char *text = NULL;
    size_t len;
    if (gptc_file_read_all(path, &text, &len) != GPTC_OK) return strdup("");
    char *copy = strdup(text);
    gptc_free(text);
    return copy;
}

test_cli_result test_cli(const char *env, const char *fmt, ...) {
    char args[4096], cmd[8192], out[600], err[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(out, sizeof out, "%s/cli.out", test_tmpdir());
    snprintf(err, sizeof err, "%s/cli.err", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s exec %s %s >%s 2>%s", env ? env : "", test_gptc_bin(), args, out, err);
    int st = system(cmd);
    test_cli_result r = {.rc = st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)};
    r.out = test_slurp(out);
    r.err = test_slurp(err);
    return r;
}

void test_cli_free(test_cli_result *r) {
    free(r->out);
    free(r->err);
}

int test_count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}
