/* resolve.c — turns a --data / --val-data spec (a shard file, a glob, or a folder made by
 * `gptc prepare`) into a sorted list of shard paths, and reads the meta.json beside the shards. */
#include "data/data.h"
#include "io/io.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RESOLVE_HINT "expected a .bin shard, a glob, or a folder made by `gptc prepare`"

/* ---------------------------------------------------------------- a growing list of paths */

typedef struct path_list {
    char **v; /* [n] malloc'd paths */
    int n, cap;
} path_list;

static gptc_status path_list_add(path_list *l, const char *path) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return gptc_fail(GPTC_ERR_NOMEM, "cannot allocate the list of shard paths");
        l->v = v;
        l->cap = cap;
    }
    char *p = strdup(path);
    if (!p) return gptc_fail(GPTC_ERR_NOMEM, "cannot allocate the list of shard paths");
    l->v[l->n++] = p;
    return GPTC_OK;
}

static int path_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---------------------------------------------------------------- the three kinds of spec */

/* Adds the regular files of folder dir whose names match pattern (no glob(3), so a folder name
 * holding '*' or '[' is taken literally). */
static gptc_status resolve_folder(const char *dir, const char *pattern, path_list *l) {
    DIR *d = opendir(dir);
    if (!d) return gptc_fail(GPTC_ERR_IO, "%s: cannot open the folder: %s", dir, strerror(errno));
    size_t dlen = strlen(dir);
    bool slash = dlen > 0 && dir[dlen - 1] == '/';
    gptc_status st = GPTC_OK;
    struct dirent *e;
    while (st == GPTC_OK && (e = readdir(d)) != NULL) {
        if (fnmatch(pattern, e->d_name, 0) != 0) continue;
        size_t need = dlen + 1 + strlen(e->d_name) + 1;
        char *full = malloc(need);
        if (!full) {
            st = gptc_fail(GPTC_ERR_NOMEM, "cannot allocate the list of shard paths");
            break;
        }
        snprintf(full, need, "%s%s%s", dir, slash ? "" : "/", e->d_name);
        struct stat sb;
        if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode)) st = path_list_add(l, full);
        free(full);
    }
    closedir(d);
    return st;
}

static gptc_status resolve_glob(const char *spec, path_list *l) {
    glob_t g;
    memset(&g, 0, sizeof g);
    int rc = glob(spec, 0, NULL, &g);
    gptc_status st = GPTC_OK;
    if (rc == GLOB_NOSPACE) st = gptc_fail(GPTC_ERR_NOMEM, "%s: out of memory while expanding the glob", spec);
    else if (rc == GLOB_ABORTED) st = gptc_fail(GPTC_ERR_IO, "%s: a folder could not be read while expanding the glob", spec);
    for (size_t i = 0; st == GPTC_OK && rc == 0 && i < g.gl_pathc; i++)
        if (!gptc_is_dir(g.gl_pathv[i])) st = path_list_add(l, g.gl_pathv[i]);
    globfree(&g);
    return st;
}

static gptc_status resolve_file(const char *spec, path_list *l) {
    struct stat sb;
    if (stat(spec, &sb) != 0)
        return gptc_fail(GPTC_ERR_IO, "%s: cannot open: %s (" RESOLVE_HINT ")", spec, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return gptc_fail(GPTC_ERR_IO, "%s: not a regular file (" RESOLVE_HINT ")", spec);
    if (access(spec, R_OK) != 0)
        return gptc_fail(GPTC_ERR_IO, "%s: cannot read: %s", spec, strerror(errno));
    return path_list_add(l, spec);
}

gptc_status gptc_data_resolve(const char *spec, bool want_val, char ***paths, int *npaths) {
    *paths = NULL;
    *npaths = 0;
    if (!spec || !spec[0]) return gptc_fail(GPTC_ERR_ARG, "missing (" RESOLVE_HINT ")");
    path_list l = {0};
    gptc_status st;
    const char *what;
    if (gptc_is_dir(spec)) {
        what = want_val ? ": no val_*.bin in this folder" : ": no train_*.bin in this folder";
        st = resolve_folder(spec, want_val ? "val_*.bin" : "train_*.bin", &l);
    } else if (strpbrk(spec, "*?[")) {
        what = "";
        st = resolve_glob(spec, &l);
    } else {
        what = "";
        st = resolve_file(spec, &l);
    }
    if (st == GPTC_OK && l.n == 0)
        st = gptc_fail(GPTC_ERR_IO, "%s: no shard files found%s (" RESOLVE_HINT ")", spec, what);
    if (st != GPTC_OK) {
        gptc_paths_free(l.v, l.n);
        return st;
    }
    qsort(l.v, (size_t)l.n, sizeof l.v[0], path_cmp);
    *paths = l.v;
    *npaths = l.n;
    return GPTC_OK;
}

void gptc_paths_free(char **paths, int n) {
    if (!paths) return;
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

/* ---------------------------------------------------------------- meta.json */

/* "vocab_crc32c": exactly 8 hex digits. */
static bool meta_parse_crc(const cJSON *item, uint32_t *crc) {
    const char *s = cJSON_GetStringValue(item);
    if (!s || strlen(s) != 8 || strspn(s, "0123456789abcdefABCDEF") != 8) return false;
    *crc = (uint32_t)strtoul(s, NULL, 16);
    return true;
}

gptc_status gptc_data_meta_read(const char *spec, gptc_data_meta *meta, bool *found) {
    memset(meta, 0, sizeof *meta);
    *found = false;
    /* The folder: spec itself, or everything before its last '/' ("." when there is none). */
    char dir[4096];
    if (gptc_is_dir(spec)) {
        snprintf(dir, sizeof dir, "%s", spec);
    } else {
        const char *slash = strrchr(spec, '/');
        if (!slash) snprintf(dir, sizeof dir, ".");
        else if (slash == spec) snprintf(dir, sizeof dir, "/");
        else snprintf(dir, sizeof dir, "%.*s", (int)(slash - spec), spec);
    }
    char path[4200];
    size_t dlen = strlen(dir);
    snprintf(path, sizeof path, "%s%smeta.json", dir, dlen && dir[dlen - 1] == '/' ? "" : "/");
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return GPTC_OK;
        return gptc_fail(GPTC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    char *text = NULL;
    size_t len = 0;
    gptc_status st = gptc_file_read_all(path, &text, &len);
    if (st != GPTC_OK) return st;
    cJSON *root = cJSON_ParseWithLength(text, len);
    gptc_free(text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return gptc_fail(GPTC_ERR_FORMAT, "%s: not a JSON object; re-run `gptc prepare` to rewrite it", path);
    }
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(root, "vocab");
    const cJSON *eot = cJSON_GetObjectItemCaseSensitive(root, "eot");
    const cJSON *crc = cJSON_GetObjectItemCaseSensitive(root, "vocab_crc32c"); /* optional (newer folders) */
    if (!cJSON_IsString(tok) || !tok->valuestring[0] || strlen(tok->valuestring) >= sizeof meta->tokenizer) {
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: \"tokenizer\" is missing or not a short string; re-run `gptc prepare`", path);
    } else if (!cJSON_IsNumber(vocab) || vocab->valuedouble < 1 || vocab->valuedouble > 1 << 24 ||
               vocab->valuedouble != (double)vocab->valueint) {
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: \"vocab\" is missing or not a positive integer; re-run `gptc prepare`", path);
    } else if (!cJSON_IsNumber(eot) || eot->valuedouble < 0 || eot->valuedouble >= vocab->valuedouble ||
               eot->valuedouble != (double)eot->valueint) {
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: \"eot\" is missing or not an id below \"vocab\"; re-run `gptc prepare`", path);
    } else if (crc && !meta_parse_crc(crc, &meta->vocab_crc)) {
        st = gptc_fail(GPTC_ERR_FORMAT, "%s: \"vocab_crc32c\" is not 8 hex digits; re-run `gptc prepare`", path);
    } else {
        meta->has_vocab_crc = crc != NULL;
        snprintf(meta->tokenizer, sizeof meta->tokenizer, "%s", tok->valuestring);
        meta->vocab = vocab->valueint;
        meta->eot = eot->valueint;
        *found = true;
    }
    cJSON_Delete(root);
    return st;
}
