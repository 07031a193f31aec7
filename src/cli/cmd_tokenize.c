/* cmd_tokenize.c — `gptc tokenize`: shows the ids (and the text of each) that a tokenizer gives a
 * string, for debugging data and prompts. */
#include "cli/commands.h"
#include "cli/options.h"
#include "data/data.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tokenize_cli {
    const char *tokenizer;
    int special; /* let "<|endoftext|>" become the end-of-text id */
    int ids_only;
} tokenize_cli;

#define F(field) offsetof(tokenize_cli, field)
static const gptc_option g_tokenize_opts[] = {
    {"tokenizer", OPT_STRING, F(tokenizer), "NAME", "tokenizer: gpt2 or byte", 0, 0},
    {"special", OPT_FLAG, F(special), "", "treat <|endoftext|> in the text as the end-of-text token", 0, 0},
    {"ids-only", OPT_FLAG, F(ids_only), "", "print only the ids, space-separated", 0, 0},
};
#undef F

const gptc_command_spec gptc_cmd_tokenize_spec = {
    "tokenize", "gptc tokenize [--tokenizer gpt2] [--special] TEXT...",
    "Prints the token ids of TEXT (the arguments joined by spaces; - reads standard input) with the text of each.",
    g_tokenize_opts, sizeof g_tokenize_opts / sizeof g_tokenize_opts[0], "TEXT...", sizeof(tokenize_cli),
};

/* The length of the well-formed UTF-8 character at s[0..n) (1..4), or 0 if it is not one. */
static int utf8_char_len(const unsigned char *s, int n) {
    int len = s[0] < 0x80 ? 1 : s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
              : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    if (!len || len > n) return 0;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] > 0x9F) || (s[0] == 0xF0 && s[1] < 0x90) ||
        (s[0] == 0xF4 && s[1] > 0x8F))
        return 0; /* overlong, surrogate or beyond U+10FFFF */
    return len;
}

/* the text of one token, with control bytes, quotes and bytes that are not UTF-8 (GPT-2 tokens may
 * hold part of a character, and the input any bytes) escaped, so every piece shows as what it is */
static void print_piece(const char *s, int n) {
    putchar('"');
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            int k = utf8_char_len((const unsigned char *)s + i, n - i);
            if (k) fwrite(s + i, 1, (size_t)k, stdout), i += k - 1;
            else printf("\\x%02x", c);
        } else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
}

static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) free(buf);
            buf = bigger;
        }
    }
    *len = n;
    return buf;
}

int gptc_cmd_tokenize(int argc, char **argv) {
    tokenize_cli c = {"gpt2", 0, 0}, d = c;
    const char **words = malloc(sizeof(char *) * (argc + 1));
    bool help;
    int npos;
    if (!words) return 1;
    if (gptc_options_parse(&gptc_cmd_tokenize_spec, &c, argc, argv, NULL, words, &npos, &help)) {
        gptc_cli_error();
        free(words);
        return 2;
    }
    if (help || npos == 0) {
        gptc_options_help(help ? stdout : stderr, &gptc_cmd_tokenize_spec, &d);
        free(words);
        return help ? 0 : 2;
    }
    size_t len = 0;
    char *text;
    if (npos == 1 && strcmp(words[0], "-") == 0) {
        text = read_stdin(&len);
    } else {
        for (int i = 0; i < npos; i++) len += strlen(words[i]) + 1;
        text = malloc(len + 1);
        len = 0;
        for (int i = 0; text && i < npos; i++) {
            if (i) text[len++] = ' ';
            memcpy(text + len, words[i], strlen(words[i]));
            len += strlen(words[i]);
        }
    }
    free(words);
    gptc_tokenizer *t = NULL;
    int *ids = NULL, rc = 0;
    size_t n = 0, cap = 0;
    if (!text) {
        fprintf(stderr, "gptc: tokenize: out of memory\n");
        return 1;
    }
    if (gptc_tokenizer_open(c.tokenizer, &t) || t->encode(t, NULL, text, len, c.special, &ids, &n, &cap)) {
        const char *e = gptc_last_error();
        char pre[96];
        snprintf(pre, sizeof pre, "tokenizer %s: ", c.tokenizer); /* said once */
        if (strncmp(e, pre, strlen(pre)) == 0) e += strlen(pre);
        fprintf(stderr, "gptc: --tokenizer %s: %s\n", c.tokenizer, e);
        rc = 2;
    } else {
        char buf[64];
        for (size_t i = 0; i < n; i++) {
            if (c.ids_only) {
                printf(i ? " %d" : "%d", ids[i]);
                continue;
            }
            int k = t->decode(t, ids[i], buf, sizeof buf);
            printf("%6d  ", ids[i]);
            print_piece(buf, k > 0 ? k : 0);
            putchar('\n');
        }
        if (c.ids_only) putchar('\n');
        else printf("%zu tokens, %zu bytes (%s)\n", n, len, t->name);
    }
    gptc_tokenizer_free(t);
    free(ids);
    free(text);
    return rc;
}
