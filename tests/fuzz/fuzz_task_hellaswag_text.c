/* fuzz_task_hellaswag_text.c: HellaSwag llama.cpp 6-line text -> its task loader. */
#include "fuzz_task_common.h"

int fuzz_task_hellaswag_text(const uint8_t *data, size_t size)
{
    return fuzz_task_run(FUZZ_TASK_HELLASWAG, "hellaswag_val_full.txt", data, size);
}
