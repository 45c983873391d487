/* schedule.c: lr warmup + constant/cosine decay; bf16 warmup -> QAT phases. */
#include "qs/schedule.h"

#include <math.h>
#include <string.h>

int schedule_validate(const schedule *s, qs_diag *d)
{
    if (!(s->lr_max >= 0.0) || !isfinite(s->lr_max))
        return diag_set(d, QS_EINVAL, NULL, -1, "lr: expected a finite number >= 0, got %g",
                        s->lr_max);
    if (!(s->lr_min >= 0.0 && s->lr_min <= s->lr_max))
        return diag_set(d, QS_EINVAL, NULL, -1, "lr_min: expected a number in [0, lr=%g], got %g",
                        s->lr_max, s->lr_min);
    if (s->warmup_steps < 0 || s->total_steps < 0 || s->bf16_warmup_steps < 0)
        return diag_set(d, QS_EINVAL, NULL, -1, "step counts must be >= 0");
    if (s->decay != SCHEDULE_DECAY_CONSTANT && s->decay != SCHEDULE_DECAY_COSINE)
        return diag_set(d, QS_EINVAL, NULL, -1, "lr_decay: unknown kind %d", s->decay);
    return 0;
}

double schedule_lr(const schedule *s, long step)
{
    if (step < s->warmup_steps)
        return s->lr_max * (double)(step + 1) / (double)s->warmup_steps;
    if (s->decay == SCHEDULE_DECAY_CONSTANT)
        return s->lr_max;
    long span = s->total_steps - s->warmup_steps;
    double p = span > 0 ? (double)(step - s->warmup_steps) / (double)span : 1.0;
    if (p > 1.0)
        p = 1.0;
    return s->lr_min + (s->lr_max - s->lr_min) * 0.5 * (1.0 + cos(M_PI * p));
}

int schedule_phase(const schedule *s, long step)
{
    return s->qat && step >= s->bf16_warmup_steps ? SCHEDULE_PHASE_QAT : SCHEDULE_PHASE_WARMUP;
}

const char *schedule_phase_name(int phase)
{
    return phase == SCHEDULE_PHASE_QAT ? "qat" : "warmup";
}

int schedule_decay_parse(const char *name)
{
    if (!strcmp(name, "constant"))
        return SCHEDULE_DECAY_CONSTANT;
    if (!strcmp(name, "cosine"))
        return SCHEDULE_DECAY_COSINE;
    return -1;
}
