/* fuzz_itemlog_harness.c: lm-evaluation-harness samples_<task>_<ts>.jsonl -> itemlog. */
#include "fuzz_itemlog_common.h"

int fuzz_itemlog_harness(const uint8_t *data, size_t size)
{
    return fuzz_itemlog_run("samples_hellaswag_2026-01-01T00-00-00.jsonl", data, size);
}
