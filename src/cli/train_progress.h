/* train_progress.h: progress output of `train` and `demo` (src/cli only).
 * On a TTY one live line (rewritten with '\r'); otherwise plain lines every
 * ~2% of the run, at phase changes and with every saturation warning.  Each
 * in-loop evaluation gets a line (val_loss, the KL against step 0, each task's
 * accuracy, its time) after the step it follows, and a forgetting alarm one
 * more.  Steps are
 * numbered from 0 everywhere (progress, warnings, logs): "step 5/5" is the last
 * step of a 6-step run, after which ckpt/step_6 holds the state. */
#ifndef QS_CLI_TRAIN_PROGRESS_H
#define QS_CLI_TRAIN_PROGRESS_H

#include <stdio.h>

#include "qs/runcfg.h"
#include "qs/trainer.h"

typedef struct train_progress {
    FILE *f;           /* NULL: quiet */
    int tty;
    long every;        /* plain-line interval */
    int line_open;     /* a live line is on screen */
    double last_loss;
    long n_warnings;   /* saturation warnings seen (only the first few are printed) */
    long first_step;   /* the first step seen (-1: none yet) and elapsed_s after it: */
    double first_elapsed; /* the ETA's rate leaves out the start (loads, the baseline eval) */
} train_progress;

void train_progress_init(train_progress *p, FILE *f, int tty, const runcfg *cfg);
void train_progress_start(train_progress *p, const trainer *t, const train_memory *mem);
/* Also for a failed trainer_step: its evaluations are shown, and its step
 * line when the step was taken (s->total_steps > 0). */
void train_progress_step(train_progress *p, const train_step_info *s);
void train_progress_end_line(train_progress *p);
void train_progress_finish(train_progress *p, const char *run_dir, long step,
                           const train_memory *mem);

#endif
