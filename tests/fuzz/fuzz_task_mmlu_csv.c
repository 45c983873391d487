/* fuzz_task_mmlu_csv.c: MMLU per-subject CSV -> its task loader. */
#include "fuzz_task_common.h"

int fuzz_task_mmlu_csv(const uint8_t *data, size_t size)
{
    return fuzz_task_run(FUZZ_TASK_MMLU, "abstract_algebra_test.csv", data, size);
}
