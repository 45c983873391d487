/* test_token_stream.h: an in-memory token stream as the trainer's train_data
 * (test_trainer.c, test_train_recompute.c, test_spike.c,
 * test_evalquant_delayed.c, test_export.c).  The (input, target) pair at stream
 * index i is a fixed function of i that each test chooses; the position is the
 * only state, and it is what save/restore carry.  test_stream_train runs a
 * whole training on such a stream, test_train_steps a few steps of one. */
#ifndef QS_TEST_TOKEN_STREAM_H
#define QS_TEST_TOKEN_STREAM_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qs/err.h"
#include "qs/mem.h"
#include "qs/runcfg.h"
#include "qs/trainer.h"

typedef struct test_stream {
    long pos;   /* index of the next pair */
    int vocab;  /* handed to pair (tests with fixed token formulas leave it 0) */
    void (*pair)(long i, int vocab, int32_t *tok, int32_t *tgt);
} test_stream;

/* B x T pairs from pos on, row after row */
static inline int test_stream_next(void *self, int32_t *tok, int32_t *tgt, int B, int T, qs_diag *d)
{
    (void)d;
    test_stream *s = self;
    for (int i = 0; i < B * T; i++, s->pos++)
        s->pair(s->pos, s->vocab, &tok[i], &tgt[i]);
    return 0;
}

static inline int test_stream_save(void *self, void **bytes, size_t *n, qs_diag *d)
{
    (void)d;
    if (!(*bytes = qs_malloc(sizeof(long))))
        return QS_ENOMEM;
    memcpy(*bytes, &((test_stream *)self)->pos, sizeof(long));
    *n = sizeof(long);
    return 0;
}

static inline int test_stream_restore(void *self, const void *bytes, size_t n, qs_diag *d)
{
    if (n != sizeof(long))
        return diag_set(d, QS_EFORMAT, NULL, -1, "data position: expected %zu bytes, found %zu",
                        sizeof(long), n);
    memcpy(&((test_stream *)self)->pos, bytes, sizeof(long));
    return 0;
}

/* the train_data reading s (which must outlive the trainer) */
static inline train_data test_stream_data(test_stream *s)
{
    train_data data = {s, test_stream_next, test_stream_save, test_stream_restore};
    return data;
}

/* up to n steps of t (fewer when the run ends first); -1 with the failing
 * step's message on stderr */
static inline int test_train_steps(trainer *t, long n)
{
    qs_diag d = {0};
    train_step_info info;
    for (long i = 0; i < n && !trainer_done(t); i++)
        if (trainer_step(t, &info, &d)) {
            fprintf(stderr, "    step: %s\n", d.msg);
            return -1;
        }
    return 0;
}

/* Trains c on s to its last step and finishes the run ("done": final
 * checkpoint c->out_dir/ckpt/step_<steps>).  0 or an error in d. */
static inline int test_stream_train(const runcfg *c, test_stream *s, qs_diag *d)
{
    train_data src = test_stream_data(s);
    trainer_options opt = {0};
    trainer *t;
    int rc = trainer_create(&t, c, &src, &opt, d);
    if (rc)
        return rc;
    train_step_info info;
    while (!trainer_done(t))
        if ((rc = trainer_step(t, &info, d))) {
            trainer_destroy(t);
            return rc;
        }
    return trainer_finish(t, "done", d);
}

/* test_stream_train of data/demo/model into out_dir, with the runcfg defaults
 * and then the n_sets "key=value" overrides in sets. */
static inline int test_stream_train_demo(const char *out_dir, const char *const *sets, size_t n_sets,
                                         test_stream *s, qs_diag *d)
{
    runcfg c;
    runcfg_defaults(&c);
    snprintf(c.model, sizeof c.model, "data/demo/model");
    snprintf(c.train_data, sizeof c.train_data, "(memory)");
    snprintf(c.out_dir, sizeof c.out_dir, "%s", out_dir);
    int rc = 0;
    for (size_t i = 0; i < n_sets && !rc; i++)
        rc = runcfg_set(&c, sets[i], d);
    return rc ? rc : test_stream_train(&c, s, d);
}

#endif
