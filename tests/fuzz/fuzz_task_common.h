/* fuzz_task_common.h: the task data targets' shared body (MMLU CSV, HellaSwag
 * jsonl and 6-line text, ARC jsonl). */
#ifndef QS_FUZZ_TASK_COMMON_H
#define QS_FUZZ_TASK_COMMON_H

#include "fuzz.h"
#include "qs/task.h"

enum { FUZZ_TASK_MMLU, FUZZ_TASK_HELLASWAG, FUZZ_TASK_ARC };

/* Load the input as file_name with the given loader; a clean load must give
 * documents whose gold index is one of their choices. */
static inline int fuzz_task_run(int loader, const char *file_name, const uint8_t *data,
                                size_t size)
{
    char path[512];
    if (fuzz_path(path, sizeof path, file_name) || fuzz_file_write(path, data, size))
        return 0;
    task_doc *docs = NULL;
    size_t n = 0, cap = 0;
    int as_given = 0, rc;
    qs_diag d = {0};
    if (loader == FUZZ_TASK_MMLU)
        rc = task_load_mmlu_csv(path, 0, &docs, &n, &cap, &d);
    else if (loader == FUZZ_TASK_HELLASWAG)
        rc = task_load_hellaswag(path, 1, &docs, &n, &cap, &as_given, &d);
    else
        rc = task_load_arc(path, &docs, &n, &cap, &d);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!docs[i].question || docs[i].gold < 0 || docs[i].gold >= docs[i].n_choices)
            abort();
    task_docs_free(docs, n);
    remove(path);
    return 0;
}

#endif
