/* fuzz_itemlog_qatscope.c: qatscope eval --log-samples samples.jsonl -> itemlog. */
#include "fuzz_itemlog_common.h"

int fuzz_itemlog_qatscope(const uint8_t *data, size_t size)
{
    return fuzz_itemlog_run("samples.jsonl", data, size);
}
