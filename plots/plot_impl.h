/* plot_impl.h: drawing internals shared by the files in plots/ (not API).
 *
 * A canvas is an RGB8 image (plots_image) plus drawing calls.  Coordinates are
 * pixels, origin top-left, x right, y down; everything is clipped to the canvas.
 * Text uses the built-in 5x8 bitmap font (font_glyphs.c) scaled by an integer:
 * a glyph cell is 6*scale wide (1 column of spacing) and 10*scale tall.
 */
#ifndef QS_PLOT_IMPL_H
#define QS_PLOT_IMPL_H

#include <stdint.h>

#include "qs/plots.h"
#include "qs/plots_test.h" /* plot_rgb and the internals test_plots.c checks directly */

#define PLOT_FONT_ADVANCE 6   /* px per character at scale 1 */
#define PLOT_FONT_HEIGHT 8    /* glyph rows at scale 1 (7 + descender) */
#define PLOT_FONT_LINE 10     /* px per text line at scale 1 */

extern const unsigned char colormap_lut_impl[256][3];

/* canvas.c (canvas_init_impl, canvas_rect_impl: qs/plots_test.h) */
void canvas_frame_impl(plots_image *img, int x, int y, int w, int h, plot_rgb c);
/* line of `thick` px; dash_px > 0 draws dash_px on / dash_px off */
void canvas_line_impl(plots_image *img, double x0, double y0, double x1, double y1, int thick,
                      int dash_px, plot_rgb c);
/* font.c (canvas_text_impl, canvas_text_width_impl: qs/plots_test.h): text
 * aligned at (x, y), anchor 0 = left/top, 1 = centre, 2 = right/bottom */
void canvas_text_at_impl(plots_image *img, int x, int y, int ha, int va, const char *s,
                         int scale, plot_rgb c);

/* axis.c: "nice" tick values covering [lo, hi], at most max_ticks (integers only when
 * integer_only, e.g. training steps); returns the count */
int axis_ticks_impl(double lo, double hi, int max_ticks, int integer_only, double *ticks,
                    double *step);
/* tick label: short decimal or scientific form, chosen from the tick step */
void axis_label_impl(char *buf, int n, double v, double step);

/* heatmap_data.c: one quantizer's value of a heatmap metric from its parsed row (NaN:
 * no value); the fast scanner (heatmap_scan.c) uses it too */
struct qlog_row;
float heatmap_metric_value_impl(const struct qlog_row *q, int metric);

/* curve_data.c: one run's metrics.jsonl (+ events.jsonl) as series */
#define CURVE_MAX_TASKS 16
typedef struct curve_run {
    char name[128];
    long n_train;
    long *step;                  /* (n_train) */
    double *loss, *lr, *clip;    /* (n_train); NAN when null */
    int n_tasks;
    char task[CURVE_MAX_TASKS][64];
    char metric[CURVE_MAX_TASKS][16];   /* acc or acc_norm, chosen per task */
    long n_eval;
    long *eval_step;             /* (n_eval) */
    double *eval_acc;            /* (n_eval, CURVE_MAX_TASKS) fractions; NAN = absent */
    double *eval_kl, *eval_top1; /* (n_eval) val_kl_ref, val_top1_ref; NAN = absent */
    double *val_loss, *val_ppl;  /* (n_eval) held-out loss / perplexity; NAN = absent */
    long qat_step;               /* -1 when the run never entered QAT (or had no quantizers) */
    int has_quant;               /* the run had quantizers: a phase event or a quant.jsonl.zst */
    long n_forget;
    long forget_step[64];        /* forgetting events (first 64) */
    char forget_task[64][64];
    int n_cut;                   /* metrics.jsonl / events.jsonl ending inside a record */
    char cut_msg[2][QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 16];   /* "PATH:LINE: log is truncated..." */
} curve_run;
int curve_run_load_impl(curve_run *r, const char *run_dir, qs_diag *d);
void curve_run_free_impl(curve_run *r);   /* safe on zeroed */

#endif
