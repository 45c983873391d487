/* heatmap.c: render a plots_heatmap (heatmap_data.c) into an image.
 *
 * Layout, left to right: layer labels with brackets | row labels | cells | colour
 * bar with ticks.  Above: title (run, metric, tensors), a subtitle (estimator,
 * steps, binning) and the BF16 -> QAT boundary label; the boundary is a dashed
 * line through the cells.  Below: step axis.  Missing values are grey and the
 * legend says so.
 * Colour scales: the sequential map (colormap.c) for rates and QSNR; for
 * amax_ratio a diverging scale whose boundary is 1.0, where clipping starts:
 * ratios <= 1 on the sequential map over [lo, 1], ratios > 1 on a red ramp
 * (CLIP_LO just above 1 to CLIP_HI at the top), the bar marked at 1.0 and the
 * clip side given at least a fifth of it.  Cells whose value comes from a BF16
 * warmup step (observe mode: would have clipped, nothing was quantized) carry
 * white diagonal stripes, with their own legend swatch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot_impl.h"

static const plot_rgb INK = {34, 34, 34}, PAPER = {255, 255, 255}, GREY = {190, 190, 190};
static const plot_rgb MUTED = {110, 110, 110}, PHASE = {230, 40, 90};
static const plot_rgb CLIP_LO = {215, 48, 39}, CLIP_HI = {103, 0, 31};

#define HM_TARGET_W 960      /* px the cells aim to fill */
#define HM_TARGET_H 640
#define HM_MIN_CELL_H 10     /* a scale-1 label (8 px) + 2 px gap */
#define HM_HATCH 4           /* warmup cells: every 4th diagonal is white */
#define HM_SPLIT_MIN 0.55    /* amax_ratio: where 1.0 sits on the bar, at least ... */
#define HM_SPLIT_MAX 0.80    /* ... and at most (the clip side keeps >= 1/5) */

static const char *metric_title(int metric)
{
    switch (metric) {
    case PLOTS_METRIC_CLIP_RATE: return "clip rate";
    case PLOTS_METRIC_AMAX_RATIO: return "amax / predicted amax";
    case PLOTS_METRIC_UNDERFLOW_RATE: return "underflow rate";
    default: return "QSNR (dB)";
    }
}

static int diverging(const plots_heatmap_opts *o)
{
    return o->metric == PLOTS_METRIC_AMAX_RATIO;
}

/* colour range from the data when not fixed by the options; a diverging range
 * always holds 1.0 strictly inside */
static void pick_range(plots_heatmap *hm, const plots_heatmap_opts *o)
{
    double mn = INFINITY, mx = -INFINITY, min_pos = INFINITY;
    size_t n = (size_t)hm->n_rows * (size_t)hm->n_cols;
    for (size_t i = 0; i < n; i++) {
        double v = hm->values[i];
        if (isnan(v))
            continue;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
        if (v > 0 && v < min_pos)
            min_pos = v;
    }
    int rate = o->metric == PLOTS_METRIC_CLIP_RATE || o->metric == PLOTS_METRIC_UNDERFLOW_RATE;
    double lo, hi;
    if (!isfinite(mn)) {   /* no data at all */
        lo = 0;
        hi = 1;
    } else if (o->log_scale) {
        lo = isfinite(min_pos) ? pow(10, floor(log10(min_pos))) : 1e-6;
        hi = mx > 0 ? pow(10, ceil(log10(mx))) : 1;
        if (hi <= lo)
            hi = lo * 10;
    } else {
        lo = rate ? 0 : mn;
        hi = mx;
        if (!(hi > lo))
            hi = lo + (lo != 0 ? fabs(lo) * 0.1 : 1e-6);
    }
    hm->lo = isnan(o->lo) ? lo : o->lo;
    hm->hi = isnan(o->hi) ? hi : o->hi;
    if (diverging(o)) {
        if (o->log_scale) {
            hm->lo = fmin(hm->lo, 0.5);
            hm->hi = fmax(hm->hi, 2.0);
        } else {
            hm->lo = fmin(hm->lo, 0.95);
            hm->hi = fmax(hm->hi, 1.0 + 0.25 * (1.0 - hm->lo));
        }
    }
}

/* the scale's coordinate: log10 on a log scale (values at or below lo -> lo) */
static double scale_f(const plots_heatmap *hm, const plots_heatmap_opts *o, double v)
{
    if (!o->log_scale)
        return v;
    return log10(v > hm->lo ? v : hm->lo);
}

/* where 1.0 sits on a diverging bar (0 bottom, 1 top) */
static double split_pos(const plots_heatmap *hm, const plots_heatmap_opts *o)
{
    double f0 = scale_f(hm, o, hm->lo), f1 = scale_f(hm, o, 1.0), f2 = scale_f(hm, o, hm->hi);
    double b = (f1 - f0) / (f2 - f0);
    return b < HM_SPLIT_MIN ? HM_SPLIT_MIN : b > HM_SPLIT_MAX ? HM_SPLIT_MAX : b;
}

static double clamp01(double t)
{
    return t > 0 ? (t < 1 ? t : 1) : 0;
}

/* position of a value on the bar, [0, 1] */
static double value_t(const plots_heatmap *hm, const plots_heatmap_opts *o, double v)
{
    double f0 = scale_f(hm, o, hm->lo), f2 = scale_f(hm, o, hm->hi), fv = scale_f(hm, o, v);
    if (!diverging(o))
        return clamp01((fv - f0) / (f2 - f0));
    double f1 = scale_f(hm, o, 1.0), b = split_pos(hm, o);
    if (v <= 1.0)
        return b * clamp01((fv - f0) / (f1 - f0));
    return b + (1 - b) * clamp01((fv - f1) / (f2 - f1));
}

static plot_rgb clip_ramp(double u)
{
    plot_rgb c = {(unsigned char)lrint(CLIP_LO.r + u * (CLIP_HI.r - CLIP_LO.r)),
                  (unsigned char)lrint(CLIP_LO.g + u * (CLIP_HI.g - CLIP_LO.g)),
                  (unsigned char)lrint(CLIP_LO.b + u * (CLIP_HI.b - CLIP_LO.b))};
    return c;
}

/* colour at bar position t: the sequential map, or for a diverging scale the map
 * below 1.0's position and the clip ramp above it */
static plot_rgb bar_rgb(const plots_heatmap *hm, const plots_heatmap_opts *o, double t)
{
    if (!diverging(o))
        return colormap_rgb_impl(t);
    double b = split_pos(hm, o);
    return t <= b ? colormap_rgb_impl(t / b) : clip_ramp((t - b) / (1 - b));
}

static plot_rgb value_rgb(const plots_heatmap *hm, const plots_heatmap_opts *o, double v)
{
    double t = value_t(hm, o, v);
    if (diverging(o) && v > 1.0 && t <= split_pos(hm, o))
        return CLIP_LO;   /* clipped, however close to 1: never the sequential side */
    return bar_rgb(hm, o, t);
}

static const char *row_label(const char *name)
{
    if (!strncmp(name, "layers.", 7)) {
        const char *dot = strchr(name + 7, '.');
        if (dot)
            return dot + 1;
    }
    return name;
}

/* x (pixels) of a step on the cell axis */
static double step_x(const plots_heatmap *hm, double step)
{
    for (int c = 0; c < hm->n_cols; c++) {
        if (step > hm->col_last[c] && c + 1 < hm->n_cols)
            continue;
        double span = (double)(hm->col_last[c] - hm->col_first[c]);
        double f = span > 0 ? (step - hm->col_first[c]) / (span + 1) : 0.5;
        f = f < 0 ? 0 : f > 1 ? 1 : f;
        return hm->plot_x + (c + f) * hm->cell_w;
    }
    return hm->plot_x;
}

static void draw_rows(plots_heatmap *hm, plots_image *img, int label_x, int label_scale,
                      int layer_x)
{
    int plot_w = hm->n_cols * hm->cell_w;
    for (int r = 0; r < hm->n_rows; r++) {
        int y = hm->plot_y + r * hm->cell_h;
        canvas_text_at_impl(img, hm->plot_x - 8, y + hm->cell_h / 2, 2, 1,
                            row_label(hm->row_names[r]), label_scale, INK);
        int first = r == 0 || hm->row_layer[r] != hm->row_layer[r - 1];
        if (!first)
            continue;
        int r_end = r;
        while (r_end + 1 < hm->n_rows && hm->row_layer[r_end + 1] == hm->row_layer[r])
            r_end++;
        int y_end = hm->plot_y + (r_end + 1) * hm->cell_h;
        if (r > 0)   /* separator between layers */
            canvas_rect_impl(img, hm->plot_x, y - 1, plot_w, 2, PAPER);
        char lab[48];
        if (hm->row_layer[r] >= 0)
            snprintf(lab, sizeof lab, "layer %d", hm->row_layer[r]);
        else
            snprintf(lab, sizeof lab, "other");
        /* bracket spanning the group, label centred on it */
        int bx = label_x - 6;
        canvas_rect_impl(img, bx, y + 1, 1, y_end - y - 2, MUTED);
        canvas_rect_impl(img, bx, y + 1, 4, 1, MUTED);
        canvas_rect_impl(img, bx, y_end - 2, 4, 1, MUTED);
        canvas_text_at_impl(img, layer_x, (y + y_end) / 2, 0, 1, lab, label_scale, INK);
    }
}

/* white diagonal stripes over a rectangle: the warmup (would-have) texture;
 * anchored to the canvas so neighbouring cells continue each other's stripes */
static void hatch(plots_image *img, int x0, int y0, int w, int h)
{
    for (int y = y0; y < y0 + h; y++)
        for (int x = x0; x < x0 + w; x++)
            if ((x + y) % HM_HATCH == 0)
                canvas_rect_impl(img, x, y, 1, 1, PAPER);
}

static int any_warmup(const plots_heatmap *hm)
{
    size_t n = (size_t)hm->n_rows * (size_t)hm->n_cols;
    for (size_t i = 0; i < n; i++)
        if (hm->cell_warmup[i] && !isnan(hm->values[i]))
            return 1;
    return 0;
}

static void draw_cells(plots_heatmap *hm, const plots_heatmap_opts *o, plots_image *img)
{
    for (int r = 0; r < hm->n_rows; r++)
        for (int c = 0; c < hm->n_cols; c++) {
            size_t i = (size_t)r * (size_t)hm->n_cols + (size_t)c;
            double v = hm->values[i];
            plot_rgb col = isnan(v) ? GREY : value_rgb(hm, o, v);
            int x = hm->plot_x + c * hm->cell_w, y = hm->plot_y + r * hm->cell_h;
            canvas_rect_impl(img, x, y, hm->cell_w, hm->cell_h, col);
            if (!isnan(v) && hm->cell_warmup[i])
                hatch(img, x, y, hm->cell_w, hm->cell_h);
        }
}

static void draw_step_axis(plots_heatmap *hm, plots_image *img)
{
    int plot_w = hm->n_cols * hm->cell_w, y = hm->plot_y + hm->n_rows * hm->cell_h;
    double ticks[16], step;
    double first = (double)hm->col_first[0], last = (double)hm->col_last[hm->n_cols - 1];
    int max_ticks = plot_w / 90 < 2 ? 2 : plot_w / 90 > 12 ? 12 : plot_w / 90;
    int n = axis_ticks_impl(first, last, max_ticks, 1, ticks, &step);
    canvas_rect_impl(img, hm->plot_x, y, plot_w, 1, INK);
    for (int i = 0; i < n; i++) {
        int x = (int)lrint(step_x(hm, ticks[i]));
        char lab[32];
        snprintf(lab, sizeof lab, "%.0f", ticks[i]);
        canvas_rect_impl(img, x, y, 1, 6, INK);
        canvas_text_at_impl(img, x, y + 10, 1, 0, lab, 2, INK);
    }
    char title[160];
    if (hm->n_cols < hm->n_steps)
        snprintf(title, sizeof title, "step  (%ld logged steps in %d columns, worst value per column)",
                 hm->n_steps, hm->n_cols);
    else
        snprintf(title, sizeof title, "step");
    canvas_text_at_impl(img, hm->plot_x + plot_w / 2, y + 38, 1, 0, title, 2, INK);
}

static void draw_phase(plots_heatmap *hm, plots_image *img)
{
    if (hm->qat_step < 0 || hm->qat_step <= hm->col_first[0])
        return;
    int c = 0;
    while (c + 1 < hm->n_cols && hm->col_last[c] < hm->qat_step)
        c++;
    int x = hm->plot_x + c * hm->cell_w, y_bot = hm->plot_y + hm->n_rows * hm->cell_h;
    canvas_line_impl(img, x, hm->plot_y - 14, x, y_bot - 1, 2, 6, PHASE);
    char lab[64];
    snprintf(lab, sizeof lab, "BF16 warmup | QAT from step %ld", hm->qat_step);
    int w = canvas_text_width_impl(lab, 2);
    int lx = x - w / 2;
    int plot_r = hm->plot_x + hm->n_cols * hm->cell_w;
    lx = lx < hm->plot_x ? hm->plot_x : lx + w > plot_r ? plot_r - w : lx;
    canvas_text_impl(img, lx, hm->plot_y - 34, lab, 2, PHASE);
}

/* tick values covering [lo, hi]: decades on a log scale, else nice steps */
static int bar_ticks(double lo, double hi, int log_scale, int max_ticks, double *ticks,
                     double *step)
{
    if (!log_scale)
        return axis_ticks_impl(lo, hi, max_ticks, 0, ticks, step);
    int n = 0;
    for (double e = ceil(log10(lo) - 1e-9); e <= log10(hi) + 1e-9 && n < 16; e++)
        ticks[n++] = pow(10, e);
    *step = 1;
    return n;
}

static void bar_tick(plots_heatmap *hm, const plots_heatmap_opts *o, plots_image *img, double v,
                     double step, int floor_mark)
{
    int y = hm->bar_y + (int)lrint((1.0 - value_t(hm, o, v)) * (hm->bar_h - 1));
    char lab[32];
    if (o->log_scale)   /* values at or below the range floor take the bottom colour */
        snprintf(lab, sizeof lab, "%s1e%d", floor_mark ? "<=" : "", (int)lrint(log10(v)));
    else
        axis_label_impl(lab, sizeof lab, v, step);
    canvas_rect_impl(img, hm->bar_x + hm->bar_w, y, 5, 1, INK);
    canvas_text_at_impl(img, hm->bar_x + hm->bar_w + 9, y, 0, 1, lab, 2, INK);
}

/* the legend of a diverging bar: ticks on both sides, the 1.0 boundary as a line
 * across the bar with its label, the meaning of each side */
static void draw_diverging_ticks(plots_heatmap *hm, const plots_heatmap_opts *o, plots_image *img)
{
    double ticks[16], step;
    int y1 = hm->bar_y + (int)lrint((1.0 - split_pos(hm, o)) * (hm->bar_h - 1));
    int y_red = (hm->bar_y + y1) / 2;   /* "> 1 clipped", in the middle of the red side */
    for (int side = 0; side < 2; side++) {
        double a = side ? 1.0 : hm->lo, b = side ? hm->hi : 1.0;
        int n = bar_ticks(a, b, o->log_scale, side ? 3 : 4, ticks, &step);
        for (int i = 0; i < n; i++) {
            int y = hm->bar_y + (int)lrint((1.0 - value_t(hm, o, ticks[i])) * (hm->bar_h - 1));
            if (abs(y - y1) >= 18 && abs(y - y_red) >= 18)   /* room for the two labels */
                bar_tick(hm, o, img, ticks[i], step, 0);
        }
    }
    canvas_rect_impl(img, hm->bar_x - 6, y1 - 1, hm->bar_w + 12, 3, INK);
    canvas_text_at_impl(img, hm->bar_x + hm->bar_w + 9, y1, 0, 1, "1.0 clip", 2, INK);
    canvas_text_at_impl(img, hm->bar_x + hm->bar_w + 9, y_red, 0, 1, "> 1 clipped", 2, CLIP_HI);
}

/* legend text widest among the colour bar's labels (for the image width) */
static int legend_text_w(const plots_heatmap *hm, const plots_heatmap_opts *o)
{
    int w = canvas_text_width_impl("no data", 2);
    if (diverging(o))
        w = canvas_text_width_impl("> 1 clipped", 2) > w ? canvas_text_width_impl("> 1 clipped", 2) : w;
    if (any_warmup(hm))
        w = canvas_text_width_impl("warmup: would have", 2) > w
                ? canvas_text_width_impl("warmup: would have", 2) : w;
    return w;
}

static void draw_colorbar(plots_heatmap *hm, const plots_heatmap_opts *o, plots_image *img)
{
    for (int i = 0; i < hm->bar_h; i++) {
        double t = 1.0 - (double)i / (hm->bar_h - 1);
        canvas_rect_impl(img, hm->bar_x, hm->bar_y + i, hm->bar_w, 1, bar_rgb(hm, o, t));
    }
    canvas_frame_impl(img, hm->bar_x - 1, hm->bar_y - 1, hm->bar_w + 2, hm->bar_h + 2, INK);
    double ticks[16], step;
    if (diverging(o)) {
        draw_diverging_ticks(hm, o, img);
    } else {
        int n = bar_ticks(hm->lo, hm->hi, o->log_scale, 6, ticks, &step);
        for (int i = 0; i < n; i++)
            bar_tick(hm, o, img, ticks[i], step,
                     o->log_scale && i == 0 && value_t(hm, o, ticks[i]) < 1e-9);
    }
    char title[64];
    snprintf(title, sizeof title, "%s%s", metric_title(o->metric), o->log_scale ? ", log" : "");
    canvas_text_at_impl(img, hm->bar_x, hm->bar_y - 30, 0, 0, title, 2, INK);
    /* missing-data swatch, and the warmup texture when the picture has it */
    int sy = hm->bar_y + hm->bar_h + 14;
    canvas_rect_impl(img, hm->bar_x, sy, hm->bar_w, 12, GREY);
    canvas_text_at_impl(img, hm->bar_x + hm->bar_w + 9, sy + 6, 0, 1, "no data", 2, INK);
    if (any_warmup(hm)) {
        sy += 22;
        canvas_rect_impl(img, hm->bar_x, sy, hm->bar_w, 12, bar_rgb(hm, o, 0.5));
        hatch(img, hm->bar_x, sy, hm->bar_w, 12);
        canvas_text_at_impl(img, hm->bar_x + hm->bar_w + 9, sy + 6, 0, 1, "warmup: would have", 2,
                            INK);
    }
}

int plots_heatmap_render(plots_heatmap *hm, const plots_heatmap_opts *o, plots_image *img,
                         qs_diag *d)
{
    if (hm->n_rows <= 0 || hm->n_cols <= 0)
        return diag_set(d, QS_EINVAL, NULL, -1, "empty heatmap");
    pick_range(hm, o);
    hm->cell_w = HM_TARGET_W / hm->n_cols < 1 ? 1 : HM_TARGET_W / hm->n_cols;
    hm->cell_h = HM_TARGET_H / hm->n_rows;
    hm->cell_h = hm->cell_h < HM_MIN_CELL_H ? HM_MIN_CELL_H : hm->cell_h > 28 ? 28 : hm->cell_h;
    int label_scale = hm->cell_h >= 20 ? 2 : 1;
    int widest = 0, layer_w = canvas_text_width_impl("layer 00", label_scale);
    for (int r = 0; r < hm->n_rows; r++) {
        int w = canvas_text_width_impl(row_label(hm->row_names[r]), label_scale);
        widest = w > widest ? w : widest;
    }
    int layer_x = 16, label_x = layer_x + layer_w + 20;
    hm->plot_x = label_x + widest + 12;
    hm->plot_y = 112;
    int plot_w = hm->n_cols * hm->cell_w, plot_h = hm->n_rows * hm->cell_h;
    hm->bar_x = hm->plot_x + plot_w + 36;
    hm->bar_w = 20;
    hm->bar_h = plot_h < 160 ? 160 : plot_h > 420 ? 420 : plot_h;
    hm->bar_y = hm->plot_y;
    char bar_title[64];
    snprintf(bar_title, sizeof bar_title, "%s%s", metric_title(o->metric), o->log_scale ? ", log" : "");
    int right = hm->bar_w + 9 + legend_text_w(hm, o) + 16, tw = canvas_text_width_impl(bar_title, 2) + 16;
    right = right > hm->bar_w + 100 ? right : hm->bar_w + 100;
    int width = hm->bar_x + (tw > right ? tw : right);
    int height = hm->plot_y + (plot_h + 70 > hm->bar_h + 72 ? plot_h + 70 : hm->bar_h + 72);
    int rc = canvas_init_impl(img, width, height, PAPER, d);
    if (rc)
        return rc;
    char title[256], sub[256];
    snprintf(title, sizeof title, "%.60s%s: %s, %s tensors", hm->run,
             strlen(hm->run) > 60 ? "..." : "", metric_title(o->metric),
             o->tensors == PLOTS_TENSORS_INPUT ? "input" : o->tensors == PLOTS_TENSORS_WEIGHT ? "weight" : "all");
    snprintf(sub, sizeof sub, "estimator %s   %d quantizer%s   steps %ld-%ld", hm->estimator,
             hm->n_rows, hm->n_rows == 1 ? "" : "s", hm->col_first[0], hm->col_last[hm->n_cols - 1]);
    canvas_text_impl(img, 16, 14, title, 2, INK);
    canvas_text_impl(img, 16, 42, sub, 2, MUTED);
    draw_cells(hm, o, img);
    draw_rows(hm, img, label_x, label_scale, layer_x);
    draw_step_axis(hm, img);
    draw_phase(hm, img);
    draw_colorbar(hm, o, img);
    return 0;
}

int plots_heatmap_write(const char *run_dir, const plots_heatmap_opts *o, const char *out_png,
                        qs_diag *d)
{
    plots_heatmap hm;
    plots_image img = {0};
    int rc = plots_heatmap_load(&hm, run_dir, o, d);
    if (!rc)
        rc = plots_heatmap_render(&hm, o, &img, d);
    if (!rc)
        rc = plots_png_write(out_png, &img, d);
    plots_image_free(&img);
    plots_heatmap_free(&hm);
    return rc;
}
