/* canvas.c: RGB8 canvas, filled/outlined rectangles and (dashed, thick) lines.
 * Every pixel write is clipped, so callers may draw partly off-canvas. */
#include <math.h>
#include <string.h>

#include "plot_impl.h"
#include "qs/mem.h"

int canvas_init_impl(plots_image *img, int width, int height, plot_rgb bg, qs_diag *d)
{
    memset(img, 0, sizeof *img);
    if (width <= 0 || height <= 0 || width > 16384 || height > 16384)
        return diag_set(d, QS_ERANGE, NULL, -1, "image size %dx%d outside 1..16384", width,
                        height);
    img->rgb = qs_malloc((size_t)width * (size_t)height * 3);
    if (!img->rgb)
        return diag_set(d, QS_ENOMEM, NULL, -1, "image %dx%d", width, height);
    img->width = width;
    img->height = height;
    canvas_rect_impl(img, 0, 0, width, height, bg);
    return 0;
}

static inline void put(plots_image *img, int x, int y, plot_rgb c)
{
    if (x < 0 || y < 0 || x >= img->width || y >= img->height)
        return;
    unsigned char *p = img->rgb + ((size_t)y * (size_t)img->width + (size_t)x) * 3;
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
}

void canvas_rect_impl(plots_image *img, int x, int y, int w, int h, plot_rgb c)
{
    int x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
    int x1 = x + w > img->width ? img->width : x + w;
    int y1 = y + h > img->height ? img->height : y + h;
    for (int yy = y0; yy < y1; yy++)
        for (int xx = x0; xx < x1; xx++)
            put(img, xx, yy, c);
}

void canvas_frame_impl(plots_image *img, int x, int y, int w, int h, plot_rgb c)
{
    canvas_rect_impl(img, x, y, w, 1, c);
    canvas_rect_impl(img, x, y + h - 1, w, 1, c);
    canvas_rect_impl(img, x, y, 1, h, c);
    canvas_rect_impl(img, x + w - 1, y, 1, h, c);
}

void canvas_line_impl(plots_image *img, double x0, double y0, double x1, double y1, int thick,
                      int dash_px, plot_rgb c)
{
    double dx = x1 - x0, dy = y1 - y0;
    double len = sqrt(dx * dx + dy * dy);
    int n = (int)ceil(len * 2) + 1;   /* half-pixel steps: no gaps on diagonals */
    int lo = -(thick - 1) / 2, hi = thick / 2;
    for (int i = 0; i <= n; i++) {
        double t = n ? (double)i / n : 0.0;
        if (dash_px > 0 && ((int)(t * len) / dash_px) % 2 == 1)
            continue;
        int px = (int)lrint(x0 + t * dx), py = (int)lrint(y0 + t * dy);
        for (int oy = lo; oy <= hi; oy++)
            for (int ox = lo; ox <= hi; ox++)
                put(img, px + ox, py + oy, c);
    }
}
