/* list.c — one item at a time from a comma-separated option value (core.h gptc_list_next). */
#include "core/core.h"

#include <string.h>

int gptc_list_next(const char **cursor, char *out, size_t cap) {
    const char *p = *cursor;
    if (!p || !*p) return 0;
    size_t n = strcspn(p, ",");
    *cursor = p + n + (p[n] == ',');
    out[0] = '\0';
    if (n == 0 || n >= cap) return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}
