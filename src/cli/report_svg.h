/* report_svg.h — the pieces of `gptc report`'s HTML page: text escaping and inline SVG line charts
 * (axes, ticks, labels, legend), written to a stdio stream. */
#ifndef GPTC_CLI_REPORT_SVG_H
#define GPTC_CLI_REPORT_SVG_H

#include <stdbool.h>
#include <stdio.h>

/* Writes s with &, <, >, " and ' escaped for HTML text and attribute values. */
void report_escape(FILE *f, const char *s);

/* One line of a chart: n points (x[i], y[i]); non-finite y are left out. cls names it in the page
 * (class="series CLS") so tests and stylesheets can find it; markers adds a dot at every point. */
typedef struct report_series {
    const char *label;
    const char *cls;
    const char *color;
    const double *x, *y;
    int n;
    bool markers;
} report_series;

/* Writes <figure><svg>…</svg></figure>: a line chart titled title, y axis labelled ylabel, x axis
 * "step", with "nice" ticks on both axes and a legend; every series is one <polyline> with a point
 * per finite value (at most 4000: longer series keep every k-th point and the last). */
void report_chart(FILE *f, const char *title, const char *ylabel, const report_series *s, int ns);

#endif
