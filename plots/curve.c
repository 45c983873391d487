/* curve.c: training curves of one run or several overlaid (--compare).
 *
 * Five panels: loss (train raw in a light tint + EMA-smoothed line, held-out
 * val_loss as markers), validation perplexity (val_ppl at each in-loop eval),
 * learning rate, max clip rate over quantizers (log y; zero sits on the floor;
 * drawn as steps: a step's value holds until the next logged step, so the
 * first QAT step rises straight up from the warmup's zero instead of a slope),
 * and, across the bottom, in-loop eval accuracy per task (%, markers at eval
 * steps; forgetting events as red marks).
 * Colours: a run's colour in the loss, perplexity, lr and clip panels; a task's
 * colour in the eval panel, where runs differ by dash pattern (legend at the top
 * shows both).  The BF16 -> QAT boundary of each run with quantizers is a
 * dashed vertical line; a run without quantizers is labelled so, never "QAT".
 * Runs that log the KL against their step-0 weights (val_kl_ref, val_top1_ref)
 * get a fourth row: that KL (log y) and the top-1 agreement (%).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot_impl.h"
#include "qs/mem.h"

static const plot_rgb INK = {34, 34, 34}, PAPER = {255, 255, 255}, GRID = {232, 232, 232};
static const plot_rgb MUTED = {110, 110, 110}, PHASE = {230, 40, 90}, FORGET = {170, 20, 20};
static const plot_rgb PALETTE[6] = {{38, 96, 200}, {232, 118, 18}, {32, 150, 82},
                                    {142, 68, 173}, {150, 92, 48}, {0, 150, 160}};
static const int DASH[4] = {0, 9, 4, 2};

#define CURVE_W 1400
#define CURVE_PANEL_H 360
#define CURVE_TOP 86
#define CURVE_ROWS 3

typedef struct panel {
    int x, y, w, h;          /* plot area in pixels */
    double x0, x1, y0, y1;   /* data range; y in log10 when log_y */
    int log_y;
    int floor_is_zero;       /* log_y: the bottom tick stands for 0 */
    const curve_run *runs;   /* for the phase lines, drawn under the data */
    int n_runs;
} panel;

static void phase_lines(plots_image *img, const panel *p, const curve_run *runs, int n_runs);

static double px(const panel *p, double x)
{
    return p->x + (x - p->x0) / (p->x1 - p->x0) * (p->w - 1);
}

static double py(const panel *p, double y)
{
    if (p->log_y)
        y = y > 0 ? log10(y) : p->y0;
    double t = (y - p->y0) / (p->y1 - p->y0);
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    return p->y + (1.0 - t) * (p->h - 1);
}

static plot_rgb tint(plot_rgb c, double keep)
{
    plot_rgb t = {(unsigned char)(255 - keep * (255 - c.r)), (unsigned char)(255 - keep * (255 - c.g)),
                  (unsigned char)(255 - keep * (255 - c.b))};
    return t;
}

/* frame, grid, ticks and labels of a panel */
static void panel_axes(plots_image *img, const panel *p, const char *title)
{
    double t[16], step;
    int n = axis_ticks_impl(p->y0, p->y1, 6, 0, t, &step);
    if (p->log_y) {
        n = 0;
        for (double e = ceil(p->y0 - 1e-9); e <= p->y1 + 1e-9 && n < 16; e++)
            t[n++] = e;
    }
    for (int i = 0; i < n; i++) {
        double v = p->log_y ? pow(10, t[i]) : t[i];
        int y = (int)lrint(py(p, v));
        char lab[32];
        if (p->log_y && i == 0 && p->floor_is_zero)
            snprintf(lab, sizeof lab, "0");   /* zeros sit on the floor, a decade below any value */
        else if (p->log_y)
            snprintf(lab, sizeof lab, "1e%d", (int)t[i]);
        else
            axis_label_impl(lab, sizeof lab, t[i], step);
        canvas_rect_impl(img, p->x, y, p->w, 1, GRID);
        canvas_rect_impl(img, p->x - 5, y, 5, 1, INK);
        canvas_text_at_impl(img, p->x - 9, y, 2, 1, lab, 2, INK);
    }
    n = axis_ticks_impl(p->x0, p->x1, 7, 1, t, &step);
    for (int i = 0; i < n; i++) {
        int x = (int)lrint(px(p, t[i]));
        char lab[32];
        snprintf(lab, sizeof lab, "%.0f", t[i]);
        canvas_rect_impl(img, x, p->y, 1, p->h, GRID);
        canvas_rect_impl(img, x, p->y + p->h, 1, 5, INK);
        canvas_text_at_impl(img, x, p->y + p->h + 9, 1, 0, lab, 2, INK);
    }
    canvas_frame_impl(img, p->x - 1, p->y - 1, p->w + 2, p->h + 2, INK);
    canvas_text_impl(img, p->x, p->y - 24, title, 2, INK);
    phase_lines(img, p, p->runs, p->n_runs);
}

static void panel_note(plots_image *img, const panel *p, const char *msg)
{
    int w = canvas_text_width_impl(msg, 2);
    canvas_rect_impl(img, p->x + p->w / 2 - w / 2 - 8, p->y + p->h / 2 - 14, w + 16, 28, PAPER);
    canvas_text_at_impl(img, p->x + p->w / 2, p->y + p->h / 2, 1, 1, msg, 2, MUTED);
}

/* polyline over finite points; gaps at NAN; steps: horizontal then vertical
 * (a value holds until the next point) */
static void series_any(plots_image *img, const panel *p, const long *xs, const double *ys, long n,
                       long stride, int thick, int dash, plot_rgb c, int markers, int steps)
{
    double lx = 0, ly = 0;
    int have = 0;
    for (long i = 0; i < n; i++) {
        double v = ys[i * stride];
        if (isnan(v) || (p->log_y && !(v >= 0))) {
            have = 0;
            continue;
        }
        double x = px(p, (double)xs[i]), y = py(p, v);
        if (have && steps) {
            canvas_line_impl(img, lx, ly, x, ly, thick, dash, c);
            canvas_line_impl(img, x, ly, x, y, thick, dash, c);
        } else if (have) {
            canvas_line_impl(img, lx, ly, x, y, thick, dash, c);
        }
        if (markers)
            canvas_rect_impl(img, (int)lrint(x) - 3, (int)lrint(y) - 3, 7, 7, c);
        lx = x;
        ly = y;
        have = 1;
        if (steps && (i + 1 == n || isnan(ys[(i + 1) * stride]))) {   /* the last value holds
                                                                          for its own step */
            double x1 = fmin(px(p, (double)xs[i] + 1.0), (double)(p->x + p->w - 1));
            canvas_line_impl(img, x, y, x1, y, thick, dash, c);
        }
    }
}

static void series(plots_image *img, const panel *p, const long *xs, const double *ys, long n,
                   long stride, int thick, int dash, plot_rgb c, int markers)
{
    series_any(img, p, xs, ys, n, stride, thick, dash, c, markers, 0);
}

static void phase_lines(plots_image *img, const panel *p, const curve_run *runs, int n_runs)
{
    for (int r = 0; r < n_runs; r++) {
        long s = runs[r].qat_step;
        int dup = 0;
        for (int q = 0; q < r; q++)
            dup |= runs[q].qat_step == s;
        if (s < 0 || dup || s < p->x0 || s > p->x1)
            continue;
        int x = (int)lrint(px(p, (double)s));
        canvas_line_impl(img, x, p->y, x, p->y + p->h - 1, 2, 6, PHASE);
        canvas_text_impl(img, x + 5, p->y + 4, "QAT", 2, PHASE);
    }
}

/* data range of one series across runs (0 loss, 1 lr, 2 clip: train records;
 * 3 val_loss, 4 val_ppl: eval records); returns 0 when nothing finite */
static int range_of(const curve_run *runs, int n_runs, int which, double *lo, double *hi,
                    int positive_only)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int r = 0; r < n_runs; r++) {
        const double *v = which == 0 ? runs[r].loss : which == 1 ? runs[r].lr
                        : which == 2 ? runs[r].clip : which == 3 ? runs[r].val_loss
                                                                 : runs[r].val_ppl;
        long n = which >= 3 ? runs[r].n_eval : runs[r].n_train;
        for (long i = 0; i < n; i++) {
            if (isnan(v[i]) || (positive_only && !(v[i] > 0)))
                continue;
            *lo = v[i] < *lo ? v[i] : *lo;
            *hi = v[i] > *hi ? v[i] : *hi;
        }
    }
    return isfinite(*lo);
}

static void ema(const double *v, double *out, long n)
{
    double alpha = 1.0 - exp(-1.0 / (n / 100.0 > 1 ? n / 100.0 : 1)), s = NAN;
    for (long i = 0; i < n; i++) {
        if (!isnan(v[i]))
            s = isnan(s) ? v[i] : s + alpha * (v[i] - s);
        out[i] = s;
    }
}

static void draw_loss(plots_image *img, panel *p, const curve_run *runs, int n_runs)
{
    double lo, hi, vlo, vhi;
    int have_train = range_of(runs, n_runs, 0, &lo, &hi, 0);
    int have_val = range_of(runs, n_runs, 3, &vlo, &vhi, 0);
    if (!have_train && !have_val) {
        panel_axes(img, p, "loss");
        panel_note(img, p, "no loss values");
        return;
    }
    if (have_val) {
        lo = have_train ? fmin(lo, vlo) : vlo;
        hi = have_train ? fmax(hi, vhi) : vhi;
    }
    double pad = (hi - lo) * 0.05 + 1e-9;
    p->y0 = lo - pad;
    p->y1 = hi + pad;
    panel_axes(img, p, have_val ? "loss (thin: train per step, thick: EMA, squares: val)"
                                : "training loss (thin: per step, thick: EMA)");
    for (int r = 0; r < n_runs; r++) {
        plot_rgb c = PALETTE[r % 6];
        series(img, p, runs[r].step, runs[r].loss, runs[r].n_train, 1, 1, 0, tint(c, 0.35), 0);
        double *sm = qs_malloc((size_t)(runs[r].n_train ? runs[r].n_train : 1) * sizeof *sm);
        if (!sm)
            continue;   /* the raw curve is drawn; smoothing is decoration */
        ema(runs[r].loss, sm, runs[r].n_train);
        series(img, p, runs[r].step, sm, runs[r].n_train, 1, 2, DASH[r % 4], c, 0);
        qs_free(sm);
    }
    for (int r = 0; r < n_runs; r++)   /* val on top, so the train tint never hides it */
        series(img, p, runs[r].eval_step, runs[r].val_loss, runs[r].n_eval, 1, 1, 3,
               PALETTE[r % 6], 1);
}

/* held-out perplexity at each in-loop eval (linear y; log y past a 10x range) */
static void draw_val_ppl(plots_image *img, panel *p, const curve_run *runs, int n_runs)
{
    double lo, hi;
    const char *title = "validation perplexity (val_ppl, in-loop eval)";
    if (!range_of(runs, n_runs, 4, &lo, &hi, 1)) {
        p->y0 = 0;
        p->y1 = 1;
        panel_axes(img, p, title);
        panel_note(img, p, "no val_loss / val_ppl records");
        return;
    }
    if (hi > 10 * lo) {
        p->log_y = 1;
        p->y0 = floor(log10(lo));
        p->y1 = ceil(log10(hi));
    } else {   /* a flat series (one eval, or none changing) still gets readable ticks */
        double pad = hi - lo > 0.02 * hi ? (hi - lo) * 0.08 : 0.05 * hi;
        p->y0 = lo - pad;
        p->y1 = hi + pad;
    }
    panel_axes(img, p, title);
    for (int r = 0; r < n_runs; r++)
        series(img, p, runs[r].eval_step, runs[r].val_ppl, runs[r].n_eval, 1, 2, DASH[r % 4],
               PALETTE[r % 6], 1);
}

static void draw_train_series(plots_image *img, panel *p, const curve_run *runs, int n_runs,
                              int which)
{
    double lo, hi;
    const char *title = which == 1 ? "learning rate" : "max clip rate over quantizers (log)";
    if (!range_of(runs, n_runs, which, &lo, &hi, which == 2)) {
        p->y0 = which == 2 ? -7 : 0;
        p->y1 = which == 2 ? -2 : 1;
        p->log_y = which == 2;
        panel_axes(img, p, title);
        panel_note(img, p, which == 2 ? "no clipping recorded" : "no values");
        return;
    }
    if (which == 2) {
        p->log_y = 1;
        p->floor_is_zero = 1;
        p->y0 = floor(log10(lo)) - 1;
        p->y1 = ceil(log10(hi));
        if (p->y1 <= p->y0)
            p->y1 = p->y0 + 1;
    } else {
        p->y0 = lo < 0 ? lo * 1.05 : 0;
        p->y1 = hi > 0 ? hi * 1.08 : 1;
    }
    panel_axes(img, p, title);
    for (int r = 0; r < n_runs; r++) {
        if (which == 1) {
            series(img, p, runs[r].step, runs[r].lr, runs[r].n_train, 1, 2, DASH[r % 4],
                   PALETTE[r % 6], 0);
            continue;
        }
        /* one point per pixel column holding the column's max, so a single clipped
         * step survives however long the run is */
        long n = 0;
        long *xs = qs_malloc((size_t)(p->w + 1) * sizeof *xs);
        double *ys = qs_malloc((size_t)(p->w + 1) * sizeof *ys);
        for (long i = 0; xs && ys && i < runs[r].n_train; i++) {
            long col = lrint(px(p, (double)runs[r].step[i])) - p->x;
            double v = runs[r].clip[i];
            if (n > 0 && lrint(px(p, (double)xs[n - 1])) - p->x == col) {
                if (!isnan(v) && (isnan(ys[n - 1]) || v > ys[n - 1]))
                    ys[n - 1] = v;
            } else if (n <= p->w) {
                xs[n] = runs[r].step[i];
                ys[n++] = v;
            }
        }
        if (xs && ys)   /* steps: a logged value holds until the next step */
            series_any(img, p, xs, ys, n, 1, 1, 0, PALETTE[r % 6], 0, 1);
        qs_free(xs);
        qs_free(ys);
    }
}

/* tasks across runs, in first-seen order */
static int union_tasks(const curve_run *runs, int n_runs, const char *names[CURVE_MAX_TASKS])
{
    int n = 0;
    for (int r = 0; r < n_runs; r++)
        for (int t = 0; t < runs[r].n_tasks; t++) {
            int seen = 0;
            for (int k = 0; k < n; k++)
                seen |= !strcmp(names[k], runs[r].task[t]);
            if (!seen && n < CURVE_MAX_TASKS)
                names[n++] = runs[r].task[t];
        }
    return n;
}

static void draw_evals(plots_image *img, panel *p, const curve_run *runs, int n_runs)
{
    const char *names[CURVE_MAX_TASKS];
    int n_names = union_tasks(runs, n_runs, names);
    double lo = INFINITY, hi = -INFINITY;
    for (int r = 0; r < n_runs; r++)
        for (long i = 0; i < runs[r].n_eval * CURVE_MAX_TASKS; i++)
            if (!isnan(runs[r].eval_acc[i])) {
                lo = fmin(lo, 100 * runs[r].eval_acc[i]);
                hi = fmax(hi, 100 * runs[r].eval_acc[i]);
            }
    if (!isfinite(lo)) {
        p->y0 = 0;
        p->y1 = 100;
        long n_eval = 0;
        for (int r = 0; r < n_runs; r++)
            n_eval += runs[r].n_eval;
        panel_axes(img, p, "in-loop eval accuracy (%)");
        /* eval records without tasks: an in-loop evaluation of val_loss / KL only */
        panel_note(img, p, n_eval ? "no benchmark tasks in the in-loop evaluation (eval_tasks empty)"
                                  : "no eval records");
        return;
    }
    /* leave a band at the top for the task legend, so no line runs under it */
    int legend_px = n_names * 20 + 14;
    p->y0 = floor(lo - 2);
    p->y1 = ceil(hi + 2);
    p->y1 = ceil(p->y1 + (p->y1 - p->y0) * legend_px / (double)(p->h - legend_px));
    panel_axes(img, p, "in-loop eval accuracy (%)");
    for (int r = 0; r < n_runs; r++) {
        double *pct = qs_malloc((size_t)(runs[r].n_eval ? runs[r].n_eval : 1) * sizeof *pct);
        for (int t = 0; pct && t < runs[r].n_tasks; t++) {
            int k = 0;
            while (k < n_names && strcmp(names[k], runs[r].task[t]))
                k++;
            for (long e = 0; e < runs[r].n_eval; e++)
                pct[e] = 100 * runs[r].eval_acc[e * CURVE_MAX_TASKS + t];
            series(img, p, runs[r].eval_step, pct, runs[r].n_eval, 1, 2, DASH[r % 4],
                   PALETTE[k % 6], 1);
        }
        qs_free(pct);
        for (long f = 0; f < runs[r].n_forget; f++) {   /* forgetting events: wedge on the floor */
            int x = (int)lrint(px(p, (double)runs[r].forget_step[f])), yb = p->y + p->h - 1;
            canvas_line_impl(img, x, p->y + legend_px, x, yb, 1, 3, FORGET);
            for (int k = 0; k < 9; k++)
                canvas_rect_impl(img, x - k, yb - 9 + k, 2 * k + 1, 1, FORGET);
        }
    }
    /* task legend, top right inside the panel */
    int ly = p->y + 8;
    for (int k = 0; k < n_names; k++, ly += 20) {
        char lab[96];
        int t = 0;
        while (t < runs[0].n_tasks && strcmp(runs[0].task[t], names[k]))
            t++;
        snprintf(lab, sizeof lab, "%s %s", names[k], t < runs[0].n_tasks ? runs[0].metric[t] : "");
        int w = canvas_text_width_impl(lab, 2);
        int x = p->x + p->w - w - 36;
        canvas_rect_impl(img, x - 6, ly - 3, w + 40, 20, PAPER);
        canvas_rect_impl(img, x, ly + 4, 20, 3, PALETTE[k % 6]);
        canvas_text_impl(img, x + 28, ly, lab, 2, INK);
    }
}

/* which 0: KL(step-0 bf16 || model) on the val batches (log y); 1: top-1 agreement (%) */
static void draw_kl(plots_image *img, panel *p, const curve_run *runs, int n_runs, int which)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int r = 0; r < n_runs; r++)
        for (long i = 0; i < runs[r].n_eval; i++) {
            double v = which ? 100 * runs[r].eval_top1[i] : runs[r].eval_kl[i];
            if (!isnan(v) && (which || v > 0)) {
                lo = fmin(lo, v);
                hi = fmax(hi, v);
            }
        }
    /* a title fits in its panel's width (560 px: 46 characters at scale 2); a
     * longer one in the right column ran off the picture's edge */
    const char *title = which ? "top-1 agreement with step-0 bf16, val (%)"
                              : "KL(step-0 weights bf16 || model), val (log)";
    if (which) {
        p->y0 = isfinite(lo) ? floor(lo - 1) : 0;
        p->y1 = isfinite(hi) ? fmin(ceil(hi + 1), 101) : 100;
    } else {
        p->log_y = 1;
        p->floor_is_zero = 1;
        p->y0 = isfinite(lo) ? floor(log10(lo)) - 1 : -4;
        p->y1 = isfinite(hi) ? fmax(ceil(log10(hi)), p->y0 + 1) : 0;
    }
    panel_axes(img, p, title);
    for (int r = 0; r < n_runs; r++) {
        double *v = qs_malloc((size_t)(runs[r].n_eval ? runs[r].n_eval : 1) * sizeof *v);
        for (long i = 0; v && i < runs[r].n_eval; i++)
            v[i] = which ? 100 * runs[r].eval_top1[i] : runs[r].eval_kl[i];
        if (v)
            series(img, p, runs[r].eval_step, v, runs[r].n_eval, 1, 2, DASH[r % 4],
                   PALETTE[r % 6], 1);
        qs_free(v);
    }
}

static void draw_header(plots_image *img, const curve_run *runs, int n_runs)
{
    canvas_text_impl(img, 24, 14, n_runs > 1 ? "training curves: runs compared" : "training curves", 2, INK);
    int x = 24, y = 44;
    for (int r = 0; r < n_runs; r++) {
        char lab[160];
        if (runs[r].qat_step >= 0)
            snprintf(lab, sizeof lab, "%.60s (QAT from step %ld)", runs[r].name, runs[r].qat_step);
        else if (runs[r].has_quant)
            snprintf(lab, sizeof lab, "%.60s (no QAT phase)", runs[r].name);
        else
            snprintf(lab, sizeof lab, "%.60s (no quantizers)", runs[r].name);
        int w = canvas_text_width_impl(lab, 2) + 56;
        if (x + w > CURVE_W - 24) {
            x = 24;
            y += 22;
        }
        canvas_line_impl(img, x, y + 6, x + 36, y + 6, 3, DASH[r % 4] ? DASH[r % 4] : 0, PALETTE[r % 6]);
        canvas_text_impl(img, x + 44, y, lab, 2, INK);
        x += w + 24;
    }
}

int plots_curves_render_cuts(const char *const *run_dirs, int n_runs, plots_image *img,
                             plots_curves_cuts *cuts, qs_diag *d)
{
    if (cuts)
        cuts->n = 0;
    if (n_runs < 1 || n_runs > 6)
        return diag_set(d, QS_EINVAL, NULL, -1, "curves: 1 to 6 runs, got %d", n_runs);
    curve_run runs[6];
    memset(runs, 0, sizeof runs);
    int rc = 0;
    for (int r = 0; r < n_runs && !rc; r++)
        rc = curve_run_load_impl(&runs[r], run_dirs[r], d);
    long x0 = -1, x1 = -1;
    for (int r = 0; r < n_runs && !rc; r++) {
        for (long i = 0; i < runs[r].n_train; i++) {
            x0 = x0 < 0 || runs[r].step[i] < x0 ? runs[r].step[i] : x0;
            x1 = runs[r].step[i] > x1 ? runs[r].step[i] : x1;
        }
        for (long i = 0; i < runs[r].n_eval; i++) {
            x0 = x0 < 0 || runs[r].eval_step[i] < x0 ? runs[r].eval_step[i] : x0;
            x1 = runs[r].eval_step[i] > x1 ? runs[r].eval_step[i] : x1;
        }
    }
    int n_panels = 5;   /* + KL and top-1 agreement when some run logged them */
    for (int r = 0; r < n_runs && !rc; r++)
        for (long i = 0; i < runs[r].n_eval && n_panels == 5; i++)
            n_panels = isnan(runs[r].eval_kl[i]) ? 5 : 7;
    if (!rc)
        rc = canvas_init_impl(img, CURVE_W,
                              CURVE_TOP + (CURVE_ROWS + (n_panels > 5)) * CURVE_PANEL_H + 10,
                              PAPER, d);
    if (!rc) {
        draw_header(img, runs, n_runs);
        /* loss | val ppl, lr | clip rate, then eval accuracy across the width,
         * then KL | top-1 agreement when logged */
        panel ps[7];
        for (int i = 0; i < n_panels; i++) {
            int row = i < 5 ? i / 2 : 3, col = i < 5 ? i % 2 : i - 5;
            ps[i] = (panel){0};
            ps[i].x = col * (CURVE_W / 2) + 110;
            ps[i].y = CURVE_TOP + row * CURVE_PANEL_H + 40;
            ps[i].w = i == 4 ? CURVE_W - 140 : CURVE_W / 2 - 140;
            ps[i].h = CURVE_PANEL_H - 90;
            ps[i].x0 = (double)x0;
            ps[i].x1 = x1 > x0 ? (double)x1 : (double)x0 + 1;
            ps[i].runs = runs;
            ps[i].n_runs = n_runs;
        }
        draw_loss(img, &ps[0], runs, n_runs);
        draw_val_ppl(img, &ps[1], runs, n_runs);
        draw_train_series(img, &ps[2], runs, n_runs, 1);
        draw_train_series(img, &ps[3], runs, n_runs, 2);
        draw_evals(img, &ps[4], runs, n_runs);
        for (int i = 5; i < n_panels; i++)
            draw_kl(img, &ps[i], runs, n_runs, i - 5);
        for (int i = 0; i < n_panels; i++) {
            canvas_text_at_impl(img, ps[i].x + ps[i].w / 2, ps[i].y + ps[i].h + 30, 1, 0, "step", 2, MUTED);
        }
    }
    for (int r = 0; r < n_runs; r++) {
        for (int k = 0; !rc && cuts && k < runs[r].n_cut && cuts->n < PLOTS_CURVES_CUTS_MAX; k++)
            snprintf(cuts->msg[cuts->n++], sizeof cuts->msg[0], "%s", runs[r].cut_msg[k]);
        curve_run_free_impl(&runs[r]);
    }
    return rc;
}

int plots_curves_render(const char *const *run_dirs, int n_runs, plots_image *img, qs_diag *d)
{
    return plots_curves_render_cuts(run_dirs, n_runs, img, NULL, d);
}

int plots_curves_write_cuts(const char *const *run_dirs, int n_runs, const char *out_png,
                            plots_curves_cuts *cuts, qs_diag *d)
{
    plots_image img = {0};
    int rc = plots_curves_render_cuts(run_dirs, n_runs, &img, cuts, d);
    if (!rc)
        rc = plots_png_write(out_png, &img, d);
    plots_image_free(&img);
    return rc;
}

int plots_curves_write(const char *const *run_dirs, int n_runs, const char *out_png, qs_diag *d)
{
    return plots_curves_write_cuts(run_dirs, n_runs, out_png, NULL, d);
}
