/* png.c: the only file that includes png.h.  libpng's simplified png_image API
 * (1.6+): errors land in image.message, no setjmp.  Writes go to a temp file that
 * is renamed over the target only after a checked close, so a watcher never
 * reads half a PNG. */
#include <png.h>
#include <stdio.h>
#include <string.h>

#include "plot_impl.h"
#include "qs/fileio.h"
#include "qs/mem.h"

void plots_image_free(plots_image *img)
{
    if (!img)
        return;
    qs_free(img->rgb);
    memset(img, 0, sizeof *img);
}

int plots_png_write(const char *path, const plots_image *img, qs_diag *d)
{
    if (!img->rgb || img->width <= 0 || img->height <= 0)
        return diag_set(d, QS_EINVAL, path, -1, "empty image");
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    pi.width = (png_uint_32)img->width;
    pi.height = (png_uint_32)img->height;
    pi.format = PNG_FORMAT_RGB;
    afile af = {0};
    int rc = afile_open(&af, path, d);
    if (rc)
        return rc;
    if (!png_image_write_to_stdio(&pi, af.f, 0, img->rgb, 0, NULL)) {
        rc = diag_set(d, QS_EIO, path, -1, "PNG encoding failed: %s", pi.message);
        png_image_free(&pi);
        afile_abort(&af);
        return rc;
    }
    return afile_commit(&af, d);
}

int plots_png_read(const char *path, plots_image *img, qs_diag *d)
{
    memset(img, 0, sizeof *img);
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&pi, path))
        return diag_set(d, QS_EFORMAT, path, -1, "not a readable PNG: %s", pi.message);
    pi.format = PNG_FORMAT_RGB;
    size_t bytes = PNG_IMAGE_SIZE(pi);
    img->rgb = qs_malloc(bytes);
    if (!img->rgb) {
        png_image_free(&pi);
        return diag_set(d, QS_ENOMEM, path, -1, "%zu bytes", bytes);
    }
    if (!png_image_finish_read(&pi, NULL, img->rgb, 0, NULL)) {
        int rc = diag_set(d, QS_EFORMAT, path, -1, "PNG decoding failed: %s", pi.message);
        png_image_free(&pi);
        plots_image_free(img);
        return rc;
    }
    img->width = (int)pi.width;
    img->height = (int)pi.height;
    return 0;
}

int plots_png_signature(const char *path)
{
    unsigned char sig[8];
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t got = fread(sig, 1, sizeof sig, f);
    fclose(f);
    return got == sizeof sig && png_sig_cmp(sig, 0, sizeof sig) == 0;
}
