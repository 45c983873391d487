/* eval_test.h: NOT API.  Evaluator internals declared for tests/test_eval.c,
 * which checks the harness tokenization split on hand-picked strings.  Only
 * tests and src/eval may include this header (make lint); names and
 * signatures may change without notice.
 */
#ifndef QS_EVAL_TEST_H
#define QS_EVAL_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"
#include "qs/eval.h"

/* Harness tokenization split for one (context, continuation) pair, as
 * lm-evaluation-harness does it: the context's trailing whitespace moves into
 * the continuation, whole = encode(ctx + cont), context ids = encode(ctx
 * without that whitespace), continuation ids = whole[len(context ids):]; an
 * empty context gives [enc->prefix_id] and the continuation encoded alone
 * without BOS.  *ctx_ids and *cont_ids are qs_malloc'd. */
int eval_pair_encode_impl(const eval_encoder *enc, int add_bos, const char *ctx, size_t n_ctx,
                          const char *cont, int32_t **ctx_ids, size_t *n_ctx_ids,
                          int32_t **cont_ids, size_t *n_cont_ids, qs_diag *d);

#endif
