/* font.c: text drawing with the built-in 5x8 bitmap font (glyph data: font_glyphs.c,
 * generated from the art in tools/font_5x8.txt).  ASCII 32..126; any other byte is
 * drawn as '?'.  Integer scaling keeps the pixels crisp. */
#include <string.h>

#include "plot_impl.h"

static const unsigned char *glyph(unsigned char ch)
{
    if (ch < 32 || ch > 126)
        ch = '?';
    return font_glyphs_impl[ch - 32];
}

int canvas_text_width_impl(const char *s, int scale)
{
    size_t n = strlen(s);
    return n ? (int)n * PLOT_FONT_ADVANCE * scale - scale : 0;   /* no trailing gap */
}

int canvas_text_impl(plots_image *img, int x, int y, const char *s, int scale, plot_rgb c)
{
    int x_start = x;
    for (; *s; s++, x += PLOT_FONT_ADVANCE * scale) {
        const unsigned char *g = glyph((unsigned char)*s);
        for (int row = 0; row < PLOT_FONT_HEIGHT; row++)
            for (int col = 0; col < 5; col++)
                if (g[row] & (0x10 >> col))
                    canvas_rect_impl(img, x + col * scale, y + row * scale, scale, scale, c);
    }
    return x - x_start;
}

void canvas_text_at_impl(plots_image *img, int x, int y, int ha, int va, const char *s,
                         int scale, plot_rgb c)
{
    int w = canvas_text_width_impl(s, scale), h = 7 * scale;   /* cap height */
    canvas_text_impl(img, x - (ha == 1 ? w / 2 : ha == 2 ? w : 0),
                     y - (va == 1 ? h / 2 : va == 2 ? h : 0), s, scale, c);
}
