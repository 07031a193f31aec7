/* test.h — a minimal test harness: TEST(name) registers a function at load time; CHECK* record a
 * failure (with file:line and the values) and let the test go on; the runner prints one line per
 * test and ends with "N passed, N failed". */
#ifndef GPTC_TEST_H
#define GPTC_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdint.h>

typedef void (*test_fn)(void);
void test_register(const char *name, test_fn fn);
void test_fail_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int test_failures_in_current(void);

#define TEST(name)                                                                           \
    static void test_##name(void);                                                           \
    __attribute__((constructor)) static void test_reg_##name(void) { test_register(#name, test_##name); } \
    static void test_##name(void)

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) test_fail_at(__FILE__, __LINE__, "CHECK(%s)", #cond);                   \
    } while (0)
#define CHECK_MSG(cond, ...)                                                                 \
    do {                                                                                     \
        if (!(cond)) test_fail_at(__FILE__, __LINE__, __VA_ARGS__);                          \
    } while (0)
#define CHECK_EQ_INT(a, b)                                                                   \
    do {                                                                                     \
        long long a_ = (long long)(a), b_ = (long long)(b);                                  \
        if (a_ != b_) test_fail_at(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
    } while (0)
#define CHECK_NEAR(a, b, tol)                                                                \
    do {                                                                                     \
        double a_ = (double)(a), b_ = (double)(b);                                           \
        if (!(fabs(a_ - b_) <= (tol)))                                                       \
            test_fail_at(__FILE__, __LINE__, "%s ~= %s: %.9g vs %.9g (tol %g)", #a, #b, a_, b_, (double)(tol)); \
    } while (0)
/* A status call that must succeed; prints gptc_last_error() otherwise. */
#define CHECK_OK(call)                                                                       \
    do {                                                                                     \
        gptc_status st_ = (call);                                                            \
        if (st_ != GPTC_OK) test_fail_at(__FILE__, __LINE__, "%s -> %s: %s", #call, gptc_status_name(st_), gptc_last_error()); \
    } while (0)

/* GPTC_ASAN: built with AddressSanitizer (`make test-sanitize`; gcc says __SANITIZE_ADDRESS__, clang
 * __has_feature). A test whose measurement ASan changes (address-space limits, which ASan's shadow
 * memory cannot live under; RSS, which its quarantine and redzones inflate) skips itself with
 * SKIP_UNDER_ASAN("why"), which prints the reason; the normal build runs it unchanged. */
#if defined(__SANITIZE_ADDRESS__)
#define GPTC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPTC_ASAN 1
#endif
#endif
#ifdef GPTC_ASAN
#define SKIP_UNDER_ASAN(why)                                                                 \
    do {                                                                                     \
        printf("    SKIP under AddressSanitizer: %s\n", why);                                \
        return;                                                                              \
    } while (0)
#else
#define SKIP_UNDER_ASAN(why) do { } while (0)
#endif

/* Helpers shared by tests (tests/test_util.c). */
const char *test_tmpdir(void);             /* a fresh folder for this test run */
const char *test_gptc_bin(void);           /* path of the gptc binary under test */
/* Runs `[env] gptc ARGS` (env: NULL, or "VAR=value ..." put before it) with stdout and stderr kept
 * apart; rc is the exit status, or 128 + the signal that ended it. Free with test_cli_free. */
typedef struct test_cli_result { int rc; char *out, *err; } test_cli_result;
test_cli_result test_cli(const char *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void test_cli_free(test_cli_result *r);
char *test_slurp(const char *path);        /* a file's text (malloc'd; "" when unreadable) */
int test_count_lines(const char *s);       /* newlines in s */
/* A folder of byte-token shards of data/tinyshakespeare.txt made by `gptc prepare` (once per run). */
const char *test_shakespeare_data(void);
/* Runs a shell command; returns its exit status (or -1); stdout+stderr go to *out (malloc'd, may be NULL). */
int test_run(const char *cmd, char **out);
/* A folder test_tmpdir()/<prefix><name>, created, its path in buf. */
const char *test_dir(const char *prefix, const char *name, char *buf, size_t cap);
/* snprintf into buf, returning buf (for building paths inline). */
const char *test_path(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Writes len bytes to path (aborts on failure: a test fixture that cannot be made is a bug). */
void test_write_file(const char *path, const void *data, size_t len);
/* The tiny model's training setup the library-level training tests share: byte tokens from data,
 * B=4, T=32, 20 steps (5 warm-up) at lr 3e-3, no periodic evaluation or checkpoint, 2 threads. */
struct gptc_train_options;
void test_tiny_train_options(struct gptc_train_options *o, const char *data);
/* max |a-b| / max(max |b|, 1e-30) */
double test_rel_err_f(const float *a, const float *b, size_t n);
double test_rel_err_d(const double *a, const double *b, size_t n);
/* Fresh malloc'd float arrays (free with free()): N(0, scale^2) draws from r, zeros, a copy of x. */
struct gptc_rng;
float *test_randn_f(struct gptc_rng *r, size_t n, double scale);
/* The next uniform [-1, 1) float of the xorshift64 stream *state (each test file keeps its own). */
float test_uniform(uint64_t *state);
float *test_zeros_f(size_t n);
float *test_copy_f(const float *x, size_t n);

#endif
