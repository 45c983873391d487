/* fuzz_events.c: RUN_DIR/events.jsonl (phase, saturation, forgetting, stop
 * events) -> its reader, the curve plot (plots_curves_render), beside a small
 * valid metrics.jsonl. */
#include "fuzz.h"
#include "qs/plots.h"

int fuzz_events(const uint8_t *data, size_t size)
{
    static const char metrics[] =
        "{\"type\":\"train\",\"step\":0,\"phase\":\"warmup\",\"loss\":3.5,\"lr\":1e-5,\"max_clip_rate\":0}\n"
        "{\"type\":\"eval\",\"step\":1,\"val_loss\":3.1,\"val_ppl\":22.2,\"tasks\":{\"arc_easy\":"
        "{\"acc\":0.5,\"acc_norm\":0.5,\"n\":2,\"items_acc\":\"10\"}}}\n"
        "{\"type\":\"train\",\"step\":1,\"phase\":\"qat\",\"loss\":3.2,\"lr\":1e-5,\"max_clip_rate\":0.01}\n"
        "{\"type\":\"train\",\"step\":2,\"phase\":\"qat\",\"loss\":3.0,\"lr\":1e-5,\"max_clip_rate\":0}\n";
    char dir[512], path[600];
    if (fuzz_subdir(dir, sizeof dir, "erun"))
        return 0;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (fuzz_file_write(path, metrics, sizeof metrics - 1) == 0) {
        snprintf(path, sizeof path, "%s/events.jsonl", dir);
        if (fuzz_file_write(path, data, size) == 0) {
            const char *dirs[1] = {dir};
            plots_image img;
            memset(&img, 0, sizeof img);
            qs_diag d = {0};
            plots_curves_render(dirs, 1, &img, &d);
            plots_image_free(&img);
        }
    }
    fuzz_dir_remove(dir);
    return 0;
}
