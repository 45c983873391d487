/* trainer_test.h: NOT API.  The trainer's resume-time parsers, declared for the
 * fuzz targets (tests/fuzz/fuzz_trainstate.c, fuzz_log_truncate.c) and the resume
 * tests.  Only tests and src/train may include this header (make lint); names and
 * signatures may change without notice.
 */
#ifndef QS_TRAINER_TEST_H
#define QS_TRAINER_TEST_H

#include "qs/err.h"
#include "qs/trainer.h"

/* Restore a train_state.bin (trainstate.h) into t: every section validated
 * against t's model, quantizers, data source and eval hook before use.  On an
 * error t is left partly restored (trainer_create then destroys it). */
int trainer_state_read(trainer *t, const char *path, qs_diag *d);

/* Resume at `step`: cut a metrics.jsonl / events.jsonl back to the lines of
 * earlier steps, plus the eval lines (and their forgetting alarms) of `step`
 * itself, which were written before its checkpoint.  A missing file is fine; a
 * complete line that is not a JSON object with an integer "step" is QS_EFORMAT
 * naming it, the file untouched. */
int trainer_log_truncate(const char *path, long step, qs_diag *d);

#endif
