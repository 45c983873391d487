/* summary.c: a one-picture summary of several runs (qatscope reproduce):
 * two bar charts side by side (e.g. final accuracy per run, saturated
 * tensor-steps per run) above one panel of overlaid curves (e.g. training
 * loss).  Bars carry their value on top; a NAN value draws a "-" instead of a
 * bar; an optional dashed reference line (e.g. the base model) spans a bar
 * chart.  Curves take a colour each (and a dash pattern after the sixth) with
 * a legend to the right of the panel.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot_impl.h"

static const plot_rgb INK = {34, 34, 34}, PAPER = {255, 255, 255}, GRID = {232, 232, 232};
static const plot_rgb MUTED = {110, 110, 110}, BAR = {38, 96, 200}, REF = {230, 40, 90};
static const plot_rgb PALETTE[6] = {{38, 96, 200}, {232, 118, 18}, {32, 150, 82},
                                    {142, 68, 173}, {150, 92, 48}, {0, 150, 160}};

#define SUM_W 1400
#define SUM_H 1060

typedef struct sum_panel {
    int x, y, w, h;
    double x0, x1, y0, y1;
} sum_panel;

static int sum_px(const sum_panel *p, double x)
{
    return p->x + (int)lrint((x - p->x0) / (p->x1 - p->x0) * (p->w - 1));
}

static int sum_py(const sum_panel *p, double y)
{
    double t = (y - p->y0) / (p->y1 - p->y0);
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    return p->y + (int)lrint((1.0 - t) * (p->h - 1));
}

/* y grid, ticks and labels; x ticks only when x_ticks */
static void sum_axes(plots_image *img, const sum_panel *p, const char *title, int x_ticks)
{
    double t[16], step;
    int n = axis_ticks_impl(p->y0, p->y1, 6, 0, t, &step);
    for (int i = 0; i < n; i++) {
        char lab[32];
        int y = sum_py(p, t[i]);
        axis_label_impl(lab, sizeof lab, t[i], step);
        canvas_rect_impl(img, p->x, y, p->w, 1, GRID);
        canvas_rect_impl(img, p->x - 5, y, 5, 1, INK);
        canvas_text_at_impl(img, p->x - 9, y, 2, 1, lab, 2, INK);
    }
    if (x_ticks) {
        n = axis_ticks_impl(p->x0, p->x1, 8, 1, t, &step);
        for (int i = 0; i < n; i++) {
            char lab[32];
            int x = sum_px(p, t[i]);
            axis_label_impl(lab, sizeof lab, t[i], step);
            canvas_rect_impl(img, x, p->y + p->h, 1, 5, INK);
            canvas_text_at_impl(img, x, p->y + p->h + 9, 1, 0, lab, 2, INK);
        }
    }
    canvas_frame_impl(img, p->x, p->y, p->w, p->h, INK);
    canvas_text_impl(img, p->x, p->y - 24, title, 2, INK);
}

static void sum_bars(plots_image *img, const sum_panel *area, const plots_bars *b)
{
    sum_panel p = *area;
    double hi = 0;
    for (int i = 0; i < b->n; i++)
        if (isfinite(b->values[i]) && b->values[i] > hi)
            hi = b->values[i];
    if (isfinite(b->ref) && b->ref > hi)
        hi = b->ref;
    p.y0 = 0;
    p.y1 = hi > 0 ? hi * 1.15 : 1;
    p.x0 = 0;
    p.x1 = b->n > 0 ? b->n : 1;
    sum_axes(img, &p, b->title ? b->title : "", 0);
    int slot = b->n > 0 ? p.w / b->n : p.w;
    for (int i = 0; i < b->n; i++) {
        int cx = p.x + slot * i + slot / 2, bw = slot * 3 / 5;
        char val[48];
        if (isfinite(b->values[i])) {
            int top = sum_py(&p, b->values[i]);
            canvas_rect_impl(img, cx - bw / 2, top, bw, p.y + p.h - top, BAR);
            snprintf(val, sizeof val, b->value_fmt ? b->value_fmt : "%.3g", b->values[i]);
            canvas_text_at_impl(img, cx, top - 4, 1, 2, val, 1, INK);
        } else {
            canvas_text_at_impl(img, cx, p.y + p.h - 4, 1, 2, "-", 2, MUTED);
        }
        /* label: up to two lines, split at '\n' */
        char lab[64];
        snprintf(lab, sizeof lab, "%s", b->labels[i] ? b->labels[i] : "");
        char *nl = strchr(lab, '\n');
        if (nl)
            *nl = 0;
        canvas_text_at_impl(img, cx, p.y + p.h + 8, 1, 0, lab, 1, INK);
        if (nl)
            canvas_text_at_impl(img, cx, p.y + p.h + 8 + PLOT_FONT_LINE, 1, 0, nl + 1, 1, MUTED);
    }
    if (isfinite(b->ref)) {
        int y = sum_py(&p, b->ref);
        canvas_line_impl(img, p.x, y, p.x + p.w - 1, y, 2, 6, REF);
        if (b->ref_label)   /* right of the frame: never over a bar's value */
            canvas_text_at_impl(img, p.x + p.w + 6, y, 0, 1, b->ref_label, 1, REF);
    }
}

static void sum_curves(plots_image *img, const sum_panel *area, const plots_summary *s)
{
    sum_panel p = *area;
    p.x0 = 0;
    p.x1 = 1;
    p.y0 = INFINITY;
    p.y1 = -INFINITY;
    for (int k = 0; k < s->n_series; k++)
        for (int i = 0; i < s->series[k].n; i++) {
            double x = s->series[k].x[i], y = s->series[k].y[i];
            if (!isfinite(x) || !isfinite(y))
                continue;
            p.x1 = x > p.x1 ? x : p.x1;
            p.y0 = y < p.y0 ? y : p.y0;
            p.y1 = y > p.y1 ? y : p.y1;
        }
    if (!(p.y1 > p.y0)) {
        p.y0 = isfinite(p.y0) ? p.y0 - 1 : 0;
        p.y1 = p.y0 + 2;
    }
    double pad = 0.05 * (p.y1 - p.y0);
    p.y0 -= pad;
    p.y1 += pad;
    sum_axes(img, &p, s->curves_title ? s->curves_title : "", 1);
    canvas_text_at_impl(img, p.x + p.w / 2, p.y + p.h + 30, 1, 0, "step", 2, MUTED);
    for (int k = 0; k < s->n_series; k++) {
        const plots_series *c = &s->series[k];
        plot_rgb col = PALETTE[k % 6];
        int dash = k < 6 ? 0 : 5;
        for (int i = 1; i < c->n; i++)
            if (isfinite(c->y[i - 1]) && isfinite(c->y[i]))
                canvas_line_impl(img, sum_px(&p, c->x[i - 1]), sum_py(&p, c->y[i - 1]),
                                 sum_px(&p, c->x[i]), sum_py(&p, c->y[i]), 2, dash, col);
        int ly = p.y + 8 + 22 * k, lx = p.x + p.w + 16;
        canvas_line_impl(img, lx, ly + 7, lx + 30, ly + 7, 3, dash, col);
        canvas_text_impl(img, lx + 38, ly, c->label ? c->label : "", 2, INK);
    }
}

int plots_summary_render(const plots_summary *s, plots_image *img, qs_diag *d)
{
    for (int i = 0; i < 2; i++)
        if (s->bars[i].n < 0 || (s->bars[i].n > 0 && (!s->bars[i].values || !s->bars[i].labels)))
            return diag_set(d, QS_EINVAL, NULL, -1, "summary: bar chart %d has no values", i + 1);
    if (s->n_series < 0 || (s->n_series > 0 && !s->series) || s->n_series > 40)
        return diag_set(d, QS_EINVAL, NULL, -1, "summary: 0..40 curves expected, got %d",
                        s->n_series);
    int rc = canvas_init_impl(img, SUM_W, SUM_H, PAPER, d);
    if (rc)
        return rc;
    canvas_text_impl(img, 24, 14, s->title ? s->title : "summary", 2, INK);
    sum_panel left = {90, 100, 560, 360, 0, 1, 0, 1};
    sum_panel right = {800, 100, 560, 360, 0, 1, 0, 1};
    sum_panel bottom = {90, 580, 960, 400, 0, 1, 0, 1};
    sum_bars(img, &left, &s->bars[0]);
    sum_bars(img, &right, &s->bars[1]);
    sum_curves(img, &bottom, s);
    return 0;
}

int plots_summary_write(const plots_summary *s, const char *out_png, qs_diag *d)
{
    plots_image img = {0};
    int rc = plots_summary_render(s, &img, d);
    if (!rc)
        rc = plots_png_write(out_png, &img, d);
    plots_image_free(&img);
    return rc;
}
