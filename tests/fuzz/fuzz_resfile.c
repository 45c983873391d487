/* fuzz_resfile.c: a results.json (qatscope eval or lm-evaluation-harness) ->
 * resfile_load, then the metric lookups the gate makes for every task. */
#include "fuzz.h"
#include "qs/resfile.h"

int fuzz_resfile(const uint8_t *data, size_t size)
{
    char path[512];
    if (fuzz_path(path, sizeof path, "results.json") || fuzz_file_write(path, data, size))
        return 0;
    resfile rf;
    memset(&rf, 0, sizeof rf);
    qs_diag d = {0};
    if (resfile_load(&rf, path, &d) == 0) {
        for (int i = 0; i < rf.n_tasks; i++) {
            const resfile_task *t = &rf.tasks[i];
            if (resfile_task_find(&rf, t->name) == NULL)
                abort();
            (void)resfile_task_metric(t, "acc");
            (void)resfile_task_metric(t, "acc_norm");
            (void)resfile_default_metric(t->name, 1, 1);
        }
    }
    resfile_free(&rf);
    remove(path);
    return 0;
}
