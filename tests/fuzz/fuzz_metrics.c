/* fuzz_metrics.c: RUN_DIR/metrics.jsonl -> both of its readers: the forgetting scan
 * (forget_metrics_scan, default and explicit metric) and the curve plot
 * (plots_curves_render). */
#include "fuzz.h"
#include "qs/forget.h"
#include "qs/plots.h"

int fuzz_metrics(const uint8_t *data, size_t size)
{
    char dir[512], path[600];
    if (fuzz_subdir(dir, sizeof dir, "mrun"))
        return 0;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (fuzz_file_write(path, data, size) == 0) {
        forget_opts o;
        forget_opts_default(&o);
        forget_result alarms[4];
        int n_alarms = 0;
        qs_diag d = {0};
        forget_metrics_scan(path, "", &o, alarms, 4, &n_alarms, &d);
        forget_metrics_scan(path, "acc_norm", &o, alarms, 4, &n_alarms, &d);
        const char *dirs[1] = {dir};
        plots_image img;
        memset(&img, 0, sizeof img);
        plots_curves_render(dirs, 1, &img, &d);
        plots_image_free(&img);
    }
    remove(path);
    rmdir(dir);
    return 0;
}
