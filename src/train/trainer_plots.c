/* trainer_plots.c: plot_every — the trainer redraws RUN_DIR/heatmap.png (clip
 * rate of every quantizer, from quant.jsonl.zst) and RUN_DIR/curves.png (from
 * metrics.jsonl / events.jsonl) through include/qs/plots.h, which writes each
 * PNG to a temp file and renames it over the target (a watcher never reads half
 * an image).  A picture that cannot be drawn does not stop the training run: it
 * becomes a "plot_error" event naming the file and the reason. */
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/plots.h"
#include "trainer_impl.h"

static void trainer_plots_event(struct trainer *t, const char *file, const char *msg)
{
    trainer_event(t->run_dir, t->step, "plot_error", NULL, "file", file, "msg", msg, NULL);
}

int trainer_plots_write(struct trainer *t, qs_diag *d)
{
    (void)d;
    char path[TRAINER_PATH_MAX + 32], log[TRAINER_PATH_MAX + 32];
    qs_diag pd = {0};
    snprintf(log, sizeof log, "%s/quant.jsonl.zst", t->run_dir);
    if (t->qset && fileio_exists(log)) {
        plots_heatmap_opts o;
        plots_heatmap_opts_default(&o);
        snprintf(path, sizeof path, "%s/heatmap.png", t->run_dir);
        if (plots_heatmap_write(t->run_dir, &o, path, &pd))
            trainer_plots_event(t, "heatmap.png", pd.msg);
    }
    const char *runs[1] = {t->run_dir};
    memset(&pd, 0, sizeof pd);
    snprintf(path, sizeof path, "%s/curves.png", t->run_dir);
    if (plots_curves_write(runs, 1, path, &pd))
        trainer_plots_event(t, "curves.png", pd.msg);
    return 0;
}
