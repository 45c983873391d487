/* plots_test.h: NOT API.  Drawing internals of plots/ declared for
 * tests/test_plots.c, which checks the canvas, the bitmap font, the colour map
 * and the fast quant.jsonl step scanner directly.  The rest of the drawing
 * internals stay in plots/plot_impl.h.  Only tests and plots/ may include this
 * header (make lint); names and signatures may change without notice.
 */
#ifndef QS_PLOTS_TEST_H
#define QS_PLOTS_TEST_H

#include <stddef.h>

#include "qs/err.h"
#include "qs/plots.h"

typedef struct plot_rgb {
    unsigned char r, g, b;
} plot_rgb;

/* 5x8 bitmap font, printable ASCII 32..126: row r of glyph ch is
 * font_glyphs_impl[ch - 32][r], bit 0x10 = leftmost of its 5 columns. */
extern const unsigned char font_glyphs_impl[95][8];

/* canvas.c / font.c: an RGB8 canvas filled with bg; rectangles clipped to it;
 * text with its top-left at (x, y), returning the width drawn. */
int canvas_init_impl(plots_image *img, int width, int height, plot_rgb bg, qs_diag *d);
void canvas_rect_impl(plots_image *img, int x, int y, int w, int h, plot_rgb c);
int canvas_text_impl(plots_image *img, int x, int y, const char *s, int scale, plot_rgb c);
int canvas_text_width_impl(const char *s, int scale);

/* colormap.c: t in [0, 1], clamped (plots_colormap_rgb as a plot_rgb) */
plot_rgb colormap_rgb_impl(double t);

/* heatmap_scan.c: fast path for one quant.jsonl step record; 1 = parsed into
 * *step, *is_qat and row[0..n_q), 0 = let the Jansson path handle the line */
int heatmap_scan_step_impl(const char *line, size_t len, int n_q, char *const *names,
                           int metric, long *step, int *is_qat, float *row);

#endif
