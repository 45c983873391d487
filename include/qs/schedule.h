/* schedule.h: learning-rate schedule and training phases.
 *
 * lr(step), step 0-based (the step about to be taken):
 *   step < warmup_steps:  lr_max * (step + 1) / warmup_steps        (linear warmup)
 *   then constant lr_max, or cosine from lr_max down to lr_min at total_steps:
 *     lr_min + (lr_max - lr_min) * 0.5 * (1 + cos(pi * p)),
 *     p = (step - warmup_steps) / (total_steps - warmup_steps), clamped to [0, 1].
 * Phase: with QAT enabled, steps [0, bf16_warmup_steps) are SCHEDULE_PHASE_WARMUP
 * (unquantized, quantizers observe amax) and later steps SCHEDULE_PHASE_QAT.
 * Without QAT every step is SCHEDULE_PHASE_WARMUP (nothing is quantized).
 */
#ifndef QS_SCHEDULE_H
#define QS_SCHEDULE_H

#include "qs/err.h"

enum { SCHEDULE_DECAY_CONSTANT = 0, SCHEDULE_DECAY_COSINE = 1 };
enum { SCHEDULE_PHASE_WARMUP = 0, SCHEDULE_PHASE_QAT = 1 };

typedef struct schedule {
    double lr_max;
    double lr_min;            /* cosine floor */
    long warmup_steps;        /* linear lr warmup */
    long total_steps;
    int decay;                /* SCHEDULE_DECAY_* */
    int qat;                  /* 1: QAT after the bf16 warmup */
    long bf16_warmup_steps;   /* unquantized steps before QAT */
} schedule;

/* Checks the fields (lr_min <= lr_max, steps >= 0, ...); fills d on error. */
int schedule_validate(const schedule *s, qs_diag *d);
double schedule_lr(const schedule *s, long step);
int schedule_phase(const schedule *s, long step);
const char *schedule_phase_name(int phase);   /* "warmup" | "qat" */
/* "constant" | "cosine" -> SCHEDULE_DECAY_*, or -1 */
int schedule_decay_parse(const char *name);

#endif
