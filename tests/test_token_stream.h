/* test_token_stream.h: an in-memory token stream as the trainer's train_data
 * (test_trainer.c, test_train_recompute.c, test_spike.c,
 * test_evalquant_delayed.c, test_export.c).  The (input, target) pair at stream
 * index i is a fixed function of i that each test chooses; the position is the
 * only state, and it is what save/restore carry. */
#ifndef QS_TEST_TOKEN_STREAM_H
#define QS_TEST_TOKEN_STREAM_H

#include <stdint.h>
#include <string.h>

#include "qs/err.h"
#include "qs/mem.h"
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

#endif
