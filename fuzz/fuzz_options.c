/* fuzz_options.c — the table-driven option parser of every subcommand on arbitrary argument lists:
 * it must return GPTC_OK or GPTC_ERR_ARG with a message, never exit, crash or write outside the
 * command's options struct (allocated at its exact size, so ASan sees a stray offset). `gptc train`
 * also runs its flag checks (gptc_cmd_train_parse_check). When the parse succeeds, every integer
 * value it took must be written as one: an optional sign (none for a non-negative option) and
 * digits, nothing around them. The input is split into arguments at NUL and newline bytes; the first
 * byte picks the command. */
#include "fuzz_util.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "core/core.h"

#include <string.h>

/* Whether text is an integer as the option's type allows it: [+-]?[0-9]+ ([+]?[0-9]+ for OPT_U64). */
static bool integer_text_ok(const char *text, gptc_opt_type type) {
    if (*text == '+' || (*text == '-' && type != OPT_U64)) text++;
    if (!*text) return false;
    for (; *text; text++)
        if (*text < '0' || *text > '9') return false;
    return true;
}

/* Walks argv as gptc_options_parse does (it succeeded) and checks each integer value's text. */
static void check_integers(const gptc_command_spec *cmd, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') continue; /* a positional argument */
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const gptc_option *o = NULL;
        for (int j = 0; j < cmd->noptions; j++)
            if (strlen(cmd->options[j].name) == len && strncmp(cmd->options[j].name, name, len) == 0) o = &cmd->options[j];
        if (!o) abort(); /* the parse succeeded with an unknown option */
        if (o->type == OPT_FLAG) continue;
        const char *val = eq ? eq + 1 : argv[++i];
        if ((o->type == OPT_INT || o->type == OPT_LONG || o->type == OPT_U64) && !integer_text_ok(val, o->type)) {
            fprintf(stderr, "--%s: took '%s' as an integer\n", o->name, val);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const gptc_command_spec *const specs[] = {
        &gptc_cmd_train_spec,  &gptc_cmd_plan_spec,   &gptc_cmd_bench_spec,    &gptc_cmd_report_spec,
        &gptc_cmd_sample_spec, &gptc_cmd_prepare_spec, &gptc_cmd_tokenize_spec, &gptc_cmd_eval_spec,
    };
    if (size < 1) return 0;
    const gptc_command_spec *cmd = specs[data[0] % (sizeof specs / sizeof specs[0])];
    /* one NUL-terminated copy; each NUL or newline ends an argument */
    size_t len = size - 1;
    char *buf = malloc(len + 1);
    memcpy(buf, data + 1, len);
    buf[len] = '\0';
    int argc = 0;
    char **argv = malloc(sizeof(char *) * (len + 1));
    for (size_t i = 0, start = 0; i <= len; i++)
        if (i == len || buf[i] == '\0' || buf[i] == '\n') {
            buf[i] = '\0';
            if (i > start || i < len) argv[argc++] = buf + start;
            start = i + 1;
        }

    void *dst = calloc(1, cmd->size);
    bool *given = calloc((size_t)cmd->noptions, sizeof(bool)); /* exact: ASan sees an index past it */
    const char **pos = malloc(sizeof(char *) * ((size_t)argc + 1));
    int npos = -1;
    bool help;
    gptc_clear_error();
    gptc_status st = gptc_options_parse(cmd, dst, argc, argv, given, pos, &npos, &help);
    if (st != GPTC_OK && st != GPTC_ERR_ARG) abort();
    if (st == GPTC_ERR_ARG && !*gptc_last_error()) abort(); /* a refusal must say why */
    if (st == GPTC_OK && (npos < 0 || npos > argc || (npos > 0 && !cmd->positional))) abort();
    if (st == GPTC_OK && !help) check_integers(cmd, argc, argv);
    if (cmd == &gptc_cmd_train_spec) {
        gptc_clear_error();
        st = gptc_cmd_train_parse_check(argc, argv);
        if (st != GPTC_OK && st != GPTC_ERR_ARG) abort();
        if (st == GPTC_ERR_ARG && !*gptc_last_error()) abort();
    }
    free(dst);
    free(given);
    free(pos);
    free(argv);
    free(buf);
    return 0;
}
