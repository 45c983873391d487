/* fuzz_task_hellaswag_jsonl.c: HellaSwag official jsonl -> its task loader. */
#include "fuzz_task_common.h"

int fuzz_task_hellaswag_jsonl(const uint8_t *data, size_t size)
{
    return fuzz_task_run(FUZZ_TASK_HELLASWAG, "hellaswag_val.jsonl", data, size);
}
