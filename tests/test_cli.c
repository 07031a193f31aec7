/* test_cli.c — the gptc command as a user meets it: every bad value refused with one line naming
 * the flag or file, exit status 2 and nothing written; --help generated from the option table;
 * and prepare -> train -> resume -> sample end to end with the log line format. */
#include "test.h"
#include "cli/commands.h"

#include <regex.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* runs `gptc ARGS` expecting exit 2, one line of output containing `expect`, and no ckpt folder */
static void refused(const char *args, const char *expect) {
    char ck[600], cmd[4096];
    snprintf(ck, sizeof ck, "%s/cli-never", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s %s", test_gptc_bin(), args);
    char *out = NULL;
    int rc = test_run(cmd, &out);
    CHECK_MSG(rc == 2, "`gptc %s`: exit %d, want 2 (output: %s)", args, rc, out);
    CHECK_MSG(out && count_lines(out) == 1, "`gptc %s`: want one line, got: %s", args, out);
    CHECK_MSG(out && strstr(out, expect), "`gptc %s`: output lacks \"%s\": %s", args, expect, out);
    CHECK_MSG(!exists(ck), "`gptc %s` wrote %s", args, ck);
    free(out);
}

TEST(cli_refuses_bad_values) {
    const char *d = test_shakespeare_data();
    char a[2048], ck[600];
    snprintf(ck, sizeof ck, "%s/cli-never", test_tmpdir());
#define R(expect, ...) do { snprintf(a, sizeof a, __VA_ARGS__); refused(a, expect); } while (0)
    R("--bogus", "train --data %s --ckpt %s --bogus 3", d, ck);
    R("--batch abc", "train --data %s --ckpt %s --batch abc", d, ck);
    R("--batch 0", "train --data %s --ckpt %s --batch 0", d, ck);
    R("--steps -5", "train --data %s --ckpt %s --steps -5", d, ck);
    R("--lr", "train --data %s --ckpt %s --lr 1e-3x", d, ck);
    R("--lr", "train --data %s --ckpt %s --lr -1", d, ck);
    R("--channels 0", "train --data %s --ckpt %s --channels 0", d, ck);
    R("--heads 3", "train --data %s --ckpt %s --heads 3 --channels 128", d, ck);
    R("--seq 512", "train --data %s --ckpt %s --seq 512", d, ck);
    R("--total-batch 1000", "train --data %s --ckpt %s --batch 4 --seq 64 --total-batch 1000", d, ck);
    R("--model gpt7", "train --data %s --ckpt %s --model gpt7", d, ck);
    R("--gelu fast: unknown GELU form (expected tanh, erf or sigmoid)", "train --data %s --ckpt %s --gelu fast", d, ck);
    R("--gelu", "train --data %s --ckpt %s --gelu", d, ck);
    R("--dtype fp16", "train --data %s --ckpt %s --dtype fp16", d, ck);
    R("--recompute all", "train --data %s --ckpt %s --recompute all", d, ck);
    R("--data", "train --ckpt %s", ck);
    R("/nonexistent/x.bin", "train --data /nonexistent/x.bin --ckpt %s", ck);
    R("/etc/hostname", "train --data /etc/hostname --ckpt %s", ck);
    R("--val-data", "train --data %s --val-data /nonexistent --ckpt %s", d, ck);
    R("--seed", "train --data %s --ckpt %s --seed -1", d, ck);
    R("--ckpt /etc/hostname", "train --data %s --ckpt /etc/hostname", d);
    R("--threads", "train --data %s --ckpt %s --threads", d, ck);
    R("unexpected argument", "train --data %s --ckpt %s stray", d, ck);
    R("--ckpt", "sample --ckpt %s", ck);
    R("--top-p 2", "sample --ckpt %s --top-p 2", ck);
    R("--tokens 0", "sample --ckpt %s --tokens 0", ck);
    R("--samples 0", "sample --ckpt %s --samples 0", ck);
    R("--dtype fp16", "sample --ckpt %s --dtype fp16", ck);
    R("/nonexistent.txt", "prepare --tokenizer byte /nonexistent.txt --out %s", ck);
    R("--tokenizer", "prepare --tokenizer klingon data/tinyshakespeare.txt --out %s", ck);
    R("no input files", "prepare --out %s", ck);
    R("unknown command", "trian --data %s", d);
    R("tokenized with byte (vocab 257) but the model's vocab is 50257", "train --data %s --ckpt %s --model gpt2 --seq 64", d, ck);
    R("--sample-every", "train --data %s --ckpt %s --sample-every -1", d, ck);
    R("--tokenizer klingon", "tokenize --tokenizer klingon hello");
#undef R
}

TEST(cli_help_lists_every_option) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s train --help", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    const char *flags[] = {"--model", "--layers", "--heads", "--channels", "--context", "--vocab", "--gelu", "--data",
                           "--val-data", "--batch", "--total-batch", "--seq", "--steps", "--lr", "--warmup",
                           "--weight-decay", "--clip", "--seed", "--ckpt", "--ckpt-every", "--keep", "--eval-every",
                           "--threads"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        CHECK_MSG(out && strstr(out, flags[i]), "train --help lacks %s", flags[i]);
    free(out);
    snprintf(cmd, sizeof cmd, "%s sample --help", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    const char *sflags[] = {"--ckpt", "--prompt", "--tokens", "--temperature", "--top-k", "--top-p", "--seed"};
    for (size_t i = 0; i < sizeof sflags / sizeof sflags[0]; i++) CHECK(out && strstr(out, sflags[i]));
    free(out);
    snprintf(cmd, sizeof cmd, "%s prepare --help", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK(out && strstr(out, "--tokenizer") && strstr(out, "--out"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s info", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK(out && strstr(out, "avx512f=") && strstr(out, "gemm=") && strstr(out, "peak (measured") &&
          strstr(out, "memory bandwidth (measured, STREAM triad"));
    free(out);
}

TEST(cli_tokenize_shows_ids) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer byte --ids-only 'hi <|endoftext|>'", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK_MSG(out && strncmp(out, "104 105 32 60 124", 17) == 0, "got %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "printf 'a\tb' | %s tokenize --tokenizer byte --special -", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK_MSG(out && strstr(out, "\"\\t\"") && strstr(out, "3 tokens, 3 bytes"), "got %s", out);
    free(out);
}

TEST(cli_train_resume_sample) {
    const char *d = test_shakespeare_data();
    char ck[600], cmd[4096], *out = NULL;
    snprintf(ck, sizeof ck, "%s/cli-run", test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "%s train --model tiny --data %s --batch 4 --seq 32 --steps 6 --ckpt %s --ckpt-every 3 --eval-every 3 "
             "--eval-batches 2 --threads 2 --sample-every 3 --sample-tokens 16",
             test_gptc_bin(), d, ck);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    regex_t re;
    regcomp(&re, "step [0-9]+/6 \\| loss [0-9]+\\.[0-9]{4} \\|.* [0-9]+ ms \\| [0-9]+ tok/s", REG_EXTENDED);
    CHECK_MSG(out && regexec(&re, out, 0, NULL, 0) == 0, "no log line of the expected form in: %s", out);
    regfree(&re);
    CHECK(out && strstr(out, "val loss") && strstr(out, "checkpoint ") && strstr(out, "train: median"));
    CHECK_MSG(out && strstr(out, "gelu tanh"), "the header does not name the GELU form: %s", out);
    CHECK_MSG(out && strstr(out, "sample at step 3:\n") && strstr(out, "sample at step 6:\n"), "no samples in the log: %s", out);
    free(out);
    /* raising --steps resumes from the checkpoint */
    snprintf(cmd, sizeof cmd,
             "%s train --model tiny --data %s --batch 4 --seq 32 --steps 8 --ckpt %s --eval-every 0 --eval-batches 2 "
             "--threads 2",
             test_gptc_bin(), d, ck);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK_MSG(out && strstr(out, "step 7/8") && !strstr(out, "step 6/8") && strstr(out, "resuming from step 6"),
              "did not resume: %s", out);
    CHECK_MSG(out && strstr(out, "with --steps 8 (it was trained with 6)"), "no warning for the changed schedule: %s", out);
    free(out);
    /* a different shape on the same folder is refused with both shapes named */
    snprintf(cmd, sizeof cmd, "%s train --model tiny --channels 32 --data %s --ckpt %s --steps 9", test_gptc_bin(), d, ck);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK(out && strstr(out, "channels=64") && strstr(out, "channels=32"));
    free(out);
    /* so is another GELU form, in one line naming both */
    snprintf(cmd, sizeof cmd, "%s train --model tiny --gelu erf --data %s --ckpt %s --steps 9", test_gptc_bin(), d, ck);
    CHECK_EQ_INT(test_run(cmd, &out), 2);
    CHECK_MSG(out && count_lines(out) == 1 && strstr(out, "--gelu tanh") && strstr(out, "--gelu erf"), "got: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s sample --ckpt %s --prompt 'ROMEO:' --tokens 20 --seed 3", test_gptc_bin(), ck);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    CHECK(out && strncmp(out, "ROMEO:", 6) == 0 && strlen(out) >= 6 + 20);
    free(out);
    /* greedy text from the packed weights and from the model's own (--no-pack): the same tokens (the
     * logits agree to float rounding; tests/test_generate.c checks them) */
    char *text[2] = {NULL, NULL};
    for (int np = 0; np < 2; np++) {
        snprintf(cmd, sizeof cmd, "%s sample --ckpt %s --prompt 'ROMEO:' --tokens 30 --temperature 0%s 2>/dev/null",
                 test_gptc_bin(), ck, np ? " --no-pack" : "");
        CHECK_EQ_INT(test_run(cmd, &text[np]), 0);
    }
    CHECK_MSG(text[0] && text[1] && strcmp(text[0], text[1]) == 0, "packed: %s | --no-pack: %s", text[0], text[1]);
    free(text[0]), free(text[1]);
    /* --triad-now: the speed report also holds a triad measured after the decode, and the decode against it */
    snprintf(cmd, sizeof cmd, "%s sample --ckpt %s --tokens 4 --json --triad-now 2>&1 >/dev/null", test_gptc_bin(), ck);
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    const char *key = "\"triad_now_gbps\": ", *now = out ? strstr(out, key) : NULL;
    CHECK_MSG(now && atof(now + strlen(key)) > 0 && strstr(out, "\"bandwidth_now_pct\": "), "got: %s", out);
    free(out);
}

/* --profile-steps A:B through gptc train's own flag checks: the forms it takes, and numbers that do
 * not fit an int refused (sscanf's %d wrapped 4294967297:5 to 1:5 and accepted it). */
TEST(cli_profile_steps_window) {
    const char *good[] = {"2:5", "3:", "1:1", "7:0", "2147483647:"};
    const char *bad[] = {"4294967297:5", "1:4294967301", "2147483648:", "2:1", "0:3", "1:2x", "a:b", " 1:2",
                         "1: 2", "-1:2", "1:-2", "5", ":5", ""};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char *argv[] = {"--profile", "p.json", "--profile-steps", (char *)good[i]};
        CHECK_MSG(gptc_cmd_train_parse_check(4, argv) == GPTC_OK, "--profile-steps %s refused: %s", good[i], gptc_last_error());
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"--profile", "p.json", "--profile-steps", (char *)bad[i]};
        gptc_status st = gptc_cmd_train_parse_check(4, argv);
        CHECK_MSG(st == GPTC_ERR_ARG && strstr(gptc_last_error(), "--profile-steps"), "--profile-steps '%s': %s (%s)", bad[i],
                  gptc_status_name(st), gptc_last_error());
    }
    char *argv[] = {"--profile-steps", "2:5"};
    CHECK_MSG(gptc_cmd_train_parse_check(2, argv) == GPTC_ERR_ARG && strstr(gptc_last_error(), "needs --profile"),
              "%s", gptc_last_error());
}

/* Numbers with leading white space are refused: strtoull skips it and then takes a minus sign, so
 * "--seed ' -1'" got past the check for '-' and became 2^64-1. */
TEST(cli_options_refuse_padded_numbers) {
    const char *cases[][2] = {{"--seed", " -1"}, {"--seed", "\t-5"}, {"--batch", " 4"}, {"--lr", " 1e-3"}, {"--seed", "-1"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[] = {(char *)cases[i][0], (char *)cases[i][1]};
        gptc_status st = gptc_cmd_train_parse_check(2, argv);
        CHECK_MSG(st == GPTC_ERR_ARG && strstr(gptc_last_error(), cases[i][0]), "%s '%s': %s (%s)", cases[i][0], cases[i][1],
                  gptc_status_name(st), gptc_last_error());
    }
    char *ok[] = {"--seed", "18446744073709551615", "--batch", "4", "--lr", "1e-3"};
    CHECK_MSG(gptc_cmd_train_parse_check(6, ok) == GPTC_OK, "%s", gptc_last_error());
}

/* docs/cli.md is what `gptc help --markdown` prints from the option tables, so it cannot go stale:
 * after changing an option, `build/gptc help --markdown > docs/cli.md`. */
TEST(cli_markdown_doc_is_current) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s help --markdown", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    FILE *f = fopen("docs/cli.md", "rb");
    CHECK_MSG(f != NULL, "docs/cli.md missing; write it with `build/gptc help --markdown > docs/cli.md`");
    if (!f || !out) {
        free(out);
        return;
    }
    static char doc[1 << 17];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    CHECK_MSG(strcmp(doc, out) == 0, "docs/cli.md differs from `gptc help --markdown`; regenerate it with "
              "`build/gptc help --markdown > docs/cli.md`");
    CHECK(strstr(out, "## gptc train") && strstr(out, "`--beta1 X`") && strstr(out, "## gptc prepare"));
    free(out);
}

/* One table (src/train/hparams.def): the library checks the ranges the CLI checks, naming the option
 * by its field ('lr'), and the CLI shows the flag (--lr); the preset and optimizer lists come from
 * their one source. */
TEST(cli_and_library_share_the_option_table) {
    gptc_train_options o;
    gptc_train_options_default(&o);
    o.data = test_shakespeare_data();
    o.lr = 20; /* the CLI refuses --lr 20 the same way */
    CHECK(gptc_train(&o, NULL, NULL, NULL) == GPTC_ERR_ARG);
    CHECK_MSG(strstr(gptc_last_error(), "'lr' 20: must be between 1e-12 and 10") && !strstr(gptc_last_error(), "--"),
              "got: %s", gptc_last_error());
    gptc_train_options_default(&o);
    o.data = test_shakespeare_data();
    o.beta1 = 1.0f;
    CHECK(gptc_train(&o, NULL, NULL, NULL) == GPTC_ERR_ARG && strstr(gptc_last_error(), "'beta1' 1: must be between 0"));
    gptc_train_options_default(&o);
    o.data = test_shakespeare_data();
    o.optimizer = "sgd";
    CHECK(gptc_train(&o, NULL, NULL, NULL) == GPTC_ERR_ARG && strstr(gptc_last_error(), "'optimizer' sgd: unknown"));
    char a[1024];
    snprintf(a, sizeof a, "train --data %s --lr 20", test_shakespeare_data());
    refused(a, "--lr 20: must be between 1e-12 and 10");
    snprintf(a, sizeof a, "train --data %s --optimizer sgd", test_shakespeare_data());
    refused(a, "--optimizer sgd: unknown (expected one of adamw");
    /* a library message that names a field mid-sentence reaches the user with the flag */
    snprintf(a, sizeof a, "train --data %s --seq 512", test_shakespeare_data());
    refused(a, "--seq 512: longer than the model's context 128; use --seq <= 128 or a larger --context");
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s train --help", test_gptc_bin());
    CHECK_EQ_INT(test_run(cmd, &out), 0);
    char presets[256];
    snprintf(presets, sizeof presets, "(one of: %s)", gptc_model_preset_names());
    CHECK_MSG(out && strstr(out, presets) && strstr(out, "--optimizer NAME"), "got: %s", out);
    free(out);
}
