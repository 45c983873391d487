/* fuzz_task_arc.c: ARC jsonl (HF or AI2 layout) -> its task loader. */
#include "fuzz_task_common.h"

int fuzz_task_arc(const uint8_t *data, size_t size)
{
    return fuzz_task_run(FUZZ_TASK_ARC, "ARC-Easy-test.jsonl", data, size);
}
