/* trainer_paths.c: the run directory against the run's inputs (a run never
 * writes over or among the model it trains or the shards it reads). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "qs/trainer.h"

/* 1 when the directory `dir` is `input` (*same = 1) or one of the directories
 * above it (*same = 0), walking up from input's real path; 0 otherwise (also
 * when input does not resolve). */
static int dir_holds(const struct stat *dir, const char *input, int *same)
{
    char p[PATH_MAX];
    if (!input[0] || !realpath(input, p))
        return 0;
    struct stat st;
    *same = stat(p, &st) == 0 && S_ISDIR(st.st_mode);   /* a file: its directory is "below" */
    for (;;) {
        if (stat(p, &st) == 0 && st.st_dev == dir->st_dev && st.st_ino == dir->st_ino)
            return 1;
        *same = 0;
        char *slash = strrchr(p, '/');
        if (!slash || !p[1])   /* "/" done */
            return 0;
        slash[slash == p] = 0;   /* "/a" -> "/", "/a/b" -> "/a" */
    }
}

int trainer_run_dir_check(const runcfg *cfg, const char *run_dir, qs_diag *d)
{
    struct stat rd;
    if (!run_dir || !run_dir[0] || stat(run_dir, &rd) != 0 || !S_ISDIR(rd.st_mode))
        return 0;   /* a new directory holds nothing yet */
    const char *label = !strcmp(run_dir, cfg->out_dir) ? "out_dir" : "run directory";
    static const char *const keys[] = {"model", "train_data"};
    const char *inputs[] = {cfg->model, cfg->train_data};
    for (int i = 0; i < 2; i++) {
        int same = 0;
        if (dir_holds(&rd, inputs[i], &same))
            return diag_set(d, QS_EINVAL, NULL, -1,
                            "%s '%s' %s the %s directory '%s': the run would write its "
                            "config.json, logs and checkpoints %s; choose another directory",
                            label, run_dir, same ? "is" : "contains", keys[i], inputs[i],
                            same ? "into its input" : "around its input (a checkpoint may "
                            "replace it)");
    }
    return 0;
}
