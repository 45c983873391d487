/* fuzz_qlog.c: RUN_DIR/quant.jsonl.zst -> qlog_read_run + qlog_run_filter, and the
 * heatmap's own reader (plots_heatmap_load + render).  The input is the JSON-lines
 * text; the target compresses it into one zstd frame (fuzz_zlog_zstd covers the
 * frame layer), so mutations land in the records. */
#include <math.h>
#include <zstd.h>

#include "fuzz.h"
#include "qs/mem.h"
#include "qs/plots.h"
#include "qs/qlog.h"

int fuzz_qlog(const uint8_t *data, size_t size)
{
    char dir[512], path[600];
    if (fuzz_subdir(dir, sizeof dir, "qrun"))
        return 0;
    snprintf(path, sizeof path, "%s/%s", dir, QLOG_FILE);
    size_t cap = ZSTD_compressBound(size);
    void *z = qs_malloc(cap);
    size_t zn = z ? ZSTD_compress(z, cap, data, size, 1) : 0;
    if (z && !ZSTD_isError(zn) && fuzz_file_write(path, z, zn) == 0) {
        qlog_run run;
        memset(&run, 0, sizeof run);
        qs_diag d = {0};
        if (qlog_read_run(dir, &run, NULL, 0, &d) == 0) {
            for (int s = 0; s < run.n_steps; s++)
                for (int q = 0; q < run.n_quant; q++)
                    (void)qlog_run_row(&run, s, q)->amax;
            qlog_run_filter(&run, ".input", &d);
        }
        qlog_run_free(&run);

        plots_heatmap_opts o;
        plots_heatmap_opts_default(&o);
        o.metric = (int)(size % 4);
        o.max_cols = 64;
        plots_heatmap hm;
        memset(&hm, 0, sizeof hm);
        if (plots_heatmap_load(&hm, dir, &o, &d) == 0) {
            plots_image img;
            memset(&img, 0, sizeof img);
            if (plots_heatmap_render(&hm, &o, &img, &d) == 0)
                plots_image_free(&img);
        }
        plots_heatmap_free(&hm);
    }
    qs_free(z);
    remove(path);
    rmdir(dir);
    return 0;
}
