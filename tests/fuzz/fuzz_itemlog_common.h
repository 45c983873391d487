/* fuzz_itemlog_common.h: the per-item samples targets' shared body. */
#ifndef QS_FUZZ_ITEMLOG_COMMON_H
#define QS_FUZZ_ITEMLOG_COMMON_H

#include "fuzz.h"
#include "qs/itemlog.h"
#include "qs/mem.h"

/* Load the input as file_name (through itemlog_load_any, which picks the layout
 * from the name), then select the items of a few tasks as the gate does. */
static inline int fuzz_itemlog_run(const char *file_name, const uint8_t *data, size_t size)
{
    static const char *const tasks[] = {"mmlu", "hellaswag", "arc_easy", "arc_challenge"};
    char path[512];
    if (fuzz_path(path, sizeof path, file_name) || fuzz_file_write(path, data, size))
        return 0;
    itemlog il;
    memset(&il, 0, sizeof il);
    qs_diag d = {0};
    if (itemlog_load_any(&il, path, tasks, 4, &d) == 0) {
        const itemlog_item **sel = NULL;
        size_t n = 0;
        if (itemlog_select(&il, tasks, 4, &sel, &n, &d) == 0)
            qs_free(sel);
    }
    itemlog_free(&il);
    remove(path);
    return 0;
}

#endif
