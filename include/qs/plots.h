/* plots.h: PNG pictures of a run — saturation heatmap and training curves.
 *
 * All drawing lives in plots/ (libpng only in plots/png.c).  Every PNG is written
 * to a temp file and renamed over the target, so a watcher (or the trainer's
 * --plot-every) never sees half an image.  Text uses a built-in bitmap font; the
 * heatmap colour map is our own perceptually uniform map (tools/gen_colormap.py).
 *
 * Inputs (README "## File formats"): RUN_DIR/quant.jsonl.zst (heatmap), RUN_DIR/metrics.jsonl and
 * RUN_DIR/events.jsonl (curves).  Null fields are missing data (grey cells, gaps).
 * A log cut mid-record (a run still being written) is plotted up to its last
 * complete record.
 *
 * Trainer use: call plots_heatmap_write / plots_curves_write every N steps with the
 * run dir; each call re-reads the logs and atomically replaces the PNG.
 */
#ifndef QS_PLOTS_H
#define QS_PLOTS_H

#include "qs/err.h"

typedef struct plots_image {
    int width, height;
    unsigned char *rgb;   /* (height, width, 3) RGB8, row-major */
} plots_image;
void plots_image_free(plots_image *img);            /* safe on a zeroed image */
int plots_png_write(const char *path, const plots_image *img, qs_diag *d);   /* atomic */
int plots_png_read(const char *path, plots_image *img, qs_diag *d);          /* -> RGB8 */
/* 1 when the file at path starts with the PNG signature, 0 when it does not, -1
 * when it cannot be opened */
int plots_png_signature(const char *path);
/* colour of the heatmap map at t in [0, 1] (clamped) */
void plots_colormap_rgb(double t, unsigned char rgb[3]);

/* ---- heatmap: quantizers (rows) x steps (columns) ---- */
enum { PLOTS_METRIC_CLIP_RATE = 0, PLOTS_METRIC_AMAX_RATIO = 1, PLOTS_METRIC_UNDERFLOW_RATE = 2,
       PLOTS_METRIC_QSNR = 3 };
enum { PLOTS_TENSORS_ALL = 0, PLOTS_TENSORS_INPUT = 1, PLOTS_TENSORS_WEIGHT = 2 };
/* name <-> enum ("clip_rate", "amax_ratio", "underflow_rate", "qsnr"; "all", "input",
 * "weight"); parse returns -1 for an unknown name */
const char *plots_metric_name(int metric);
int plots_metric_parse(const char *name);
int plots_tensors_parse(const char *name);

typedef struct plots_heatmap_opts {
    int metric;          /* PLOTS_METRIC_* */
    int tensors;         /* PLOTS_TENSORS_* */
    int log_scale;       /* colour scale log10 */
    int max_cols;        /* steps beyond this are binned (default 1000) */
    double lo, hi;       /* fixed colour range; NAN = from the data */
} plots_heatmap_opts;
void plots_heatmap_opts_default(plots_heatmap_opts *o);

/* The (binned) matrix, exposed for tests and other renderers. */
typedef struct plots_heatmap {
    char run[128], estimator[64];
    int n_rows, n_cols;
    char **row_names;     /* n_rows quantizer names, ordered by layer, module, tensor */
    int *row_layer;       /* layer index per row, -1 when the name has none */
    long *col_first, *col_last;   /* first/last logged step in each column */
    float *values;        /* (n_rows, n_cols); worst value in the bin; NAN = no data */
    unsigned char *cell_warmup;   /* (n_rows, n_cols); 1: that value is from a BF16-warmup
                                     step (observe mode: would have, nothing was quantized) */
    long n_steps;         /* logged steps before binning */
    long qat_step;        /* first step in phase "qat", -1 when none */
    int truncated;        /* 1: the log ends inside a record (complete records drawn) */
    char truncated_msg[QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 16];   /* "PATH:LINE: ..." */
    /* geometry, filled by plots_heatmap_render (pixels) */
    int plot_x, plot_y, cell_w, cell_h;
    int bar_x, bar_y, bar_w, bar_h;
    double lo, hi;        /* colour range used */
} plots_heatmap;
/* run_dir: a run directory (its quant.jsonl.zst) or a quant.jsonl.zst file. */
int plots_heatmap_load(plots_heatmap *hm, const char *run_dir, const plots_heatmap_opts *o,
                       qs_diag *d);
int plots_heatmap_render(plots_heatmap *hm, const plots_heatmap_opts *o, plots_image *img,
                         qs_diag *d);
void plots_heatmap_free(plots_heatmap *hm);   /* safe on a zeroed struct */
/* load + render + atomic PNG write */
int plots_heatmap_write(const char *run_dir, const plots_heatmap_opts *o, const char *out_png,
                        qs_diag *d);

/* ---- curves: loss, lr, max clip rate, in-loop eval accuracy over steps ---- */
/* run_dirs[0] is the main run; the others are overlaid (--compare). */
int plots_curves_render(const char *const *run_dirs, int n_runs, plots_image *img, qs_diag *d);
int plots_curves_write(const char *const *run_dirs, int n_runs, const char *out_png,
                       qs_diag *d);
/* The logs a picture was drawn from that end inside a record (a run still writing
 * them, or killed: drawn up to their last complete record), one "PATH:LINE: log is
 * truncated after N complete records (...)" line each, for the caller to warn
 * about as heatmap's truncated_msg. */
#define PLOTS_CURVES_CUTS_MAX 12   /* metrics.jsonl and events.jsonl of 6 runs */
typedef struct plots_curves_cuts {
    int n;
    char msg[PLOTS_CURVES_CUTS_MAX][QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 16];
} plots_curves_cuts;
/* as plots_curves_render / _write, also filling *cuts (may be NULL) */
int plots_curves_render_cuts(const char *const *run_dirs, int n_runs, plots_image *img,
                             plots_curves_cuts *cuts, qs_diag *d);
int plots_curves_write_cuts(const char *const *run_dirs, int n_runs, const char *out_png,
                            plots_curves_cuts *cuts, qs_diag *d);

/* ---- summary: two bar charts above one panel of overlaid curves (reports) ---- */
typedef struct plots_bars {
    const char *title;
    int n;
    const char *const *labels;   /* under each bar; a '\n' splits it into two lines */
    const double *values;        /* NAN: no bar, a "-" */
    const char *value_fmt;       /* printf format of the value on top, e.g. "%.1f" */
    double ref;                  /* dashed horizontal reference line; NAN = none */
    const char *ref_label;
} plots_bars;
typedef struct plots_series {
    const char *label;
    int n;
    const double *x, *y;         /* NAN y: a gap */
} plots_series;
typedef struct plots_summary {
    const char *title;
    plots_bars bars[2];
    const char *curves_title;
    const plots_series *series;
    int n_series;                /* 0..40 */
} plots_summary;
int plots_summary_render(const plots_summary *s, plots_image *img, qs_diag *d);
int plots_summary_write(const plots_summary *s, const char *out_png, qs_diag *d);

#endif
