/* report_svg.c — inline SVG line charts and HTML escaping for `gptc report` (no scripts, no external
 * resources: the page opens the same offline). */
#include "cli/report_svg.h"

#include <math.h>
#include <string.h>

#define W 560.0
#define H 300.0
#define ML 70.0 /* margins: left (tick labels), right, top (title, legend), bottom (ticks, axis label) */
#define MR 16.0
#define MT 44.0
#define MB 44.0
#define MAX_POINTS 4000

void report_escape(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A tick spacing of 1, 2 or 5 × 10^k giving at most about 6 ticks over [lo, hi]. */
static double tick_step(double lo, double hi) {
    double range = hi - lo, base = pow(10, floor(log10(range / 5))); /* range / base in [5, 50) */
    const double mult[] = {1, 2, 5};
    for (int i = 0; i < 3; i++)
        if (range / (base * mult[i]) <= 6) return base * mult[i];
    return base * 10;
}

/* [lo, hi] widened to whole ticks (and to a non-empty range). */
static void nice_range(double *lo, double *hi, double *step) {
    if (!(*hi > *lo)) {
        double pad = *lo != 0 ? fabs(*lo) * 0.1 : 1;
        *lo -= pad;
        *hi += pad;
    }
    *step = tick_step(*lo, *hi);
    *lo = floor(*lo / *step) * *step;
    *hi = ceil(*hi / *step) * *step;
}

static void fmt_tick(char *buf, size_t cap, double v, double step) {
    if (fabs(v) < step * 1e-6) v = 0;
    if (fabs(v) >= 1e6) snprintf(buf, cap, "%gM", v / 1e6);
    else if (fabs(v) >= 1e4) snprintf(buf, cap, "%gk", v / 1e3);
    else if (fabs(v) < 1e-3 && v != 0) snprintf(buf, cap, "%.3g", v);
    else snprintf(buf, cap, "%.6g", v);
}

void report_chart(FILE *f, const char *title, const char *ylabel, const report_series *s, int ns) {
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].y[i])) continue;
            xlo = fmin(xlo, s[k].x[i]), xhi = fmax(xhi, s[k].x[i]);
            ylo = fmin(ylo, s[k].y[i]), yhi = fmax(yhi, s[k].y[i]);
        }
    if (!isfinite(xlo)) xlo = 0, xhi = 1, ylo = 0, yhi = 1;
    double xs, ys;
    nice_range(&xlo, &xhi, &xs);
    nice_range(&ylo, &yhi, &ys);
    const double pw = W - ML - MR, ph = H - MT - MB;
#define PX(x) (ML + ((x) - xlo) / (xhi - xlo) * pw)
#define PY(y) (MT + ph - ((y) - ylo) / (yhi - ylo) * ph)
    fprintf(f, "<figure class=\"chart\"><svg viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" height=\"%.0f\" role=\"img\" "
               "aria-label=\"", W, H, W, H);
    report_escape(f, title);
    fprintf(f, "\">\n<text class=\"title\" x=\"%.0f\" y=\"18\">", ML);
    report_escape(f, title);
    fprintf(f, "</text>\n");
    /* grid, ticks and their labels */
    char lab[32];
    for (double v = ylo; v <= yhi + ys * 1e-9; v += ys) {
        fmt_tick(lab, sizeof lab, v, ys);
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                   "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                ML, PY(v), W - MR, PY(v), ML - 6, PY(v) + 4, lab);
    }
    for (double v = xlo; v <= xhi + xs * 1e-9; v += xs) {
        fmt_tick(lab, sizeof lab, v, xs);
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                   "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                PX(v), MT, PX(v), MT + ph, PX(v), MT + ph + 16, lab);
    }
    fprintf(f, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n", ML, MT, pw, ph);
    fprintf(f, "<text class=\"axis\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step</text>\n", ML + pw / 2, H - 6);
    fprintf(f, "<text class=\"axis\" transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\">", MT + ph / 2);
    report_escape(f, ylabel);
    fprintf(f, "</text>\n");
    /* the lines, then the legend */
    double lx = ML;
    for (int k = 0; k < ns; k++) {
        int stride = s[k].n > MAX_POINTS ? (s[k].n + MAX_POINTS - 1) / MAX_POINTS : 1;
        fprintf(f, "<polyline class=\"series %s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", s[k].cls,
                s[k].color);
        const char *sep = "";
        for (int i = 0; i < s[k].n; i++)
            if (isfinite(s[k].y[i]) && (i % stride == 0 || i == s[k].n - 1)) {
                fprintf(f, "%s%.1f,%.1f", sep, PX(s[k].x[i]), PY(s[k].y[i]));
                sep = " ";
            }
        fprintf(f, "\"/>\n");
        for (int i = 0; s[k].markers && i < s[k].n; i++)
            if (isfinite(s[k].y[i]))
                fprintf(f, "<circle class=\"marker %s\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", s[k].cls,
                        PX(s[k].x[i]), PY(s[k].y[i]), s[k].color);
        fprintf(f, "<rect x=\"%.1f\" y=\"28\" width=\"12\" height=\"4\" fill=\"%s\"/><text class=\"legend\" x=\"%.1f\" "
                   "y=\"34\">", lx, s[k].color, lx + 16);
        report_escape(f, s[k].label);
        fprintf(f, "</text>\n");
        lx += 24 + 7.0 * strlen(s[k].label);
    }
#undef PX
#undef PY
    fprintf(f, "</svg></figure>\n");
}
