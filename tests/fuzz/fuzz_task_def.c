/* fuzz_task_def.c: a task definition (tasks/<name>.json) -> task_def_load. */
#include "fuzz.h"
#include "qs/task.h"

int fuzz_task_def(const uint8_t *data, size_t size)
{
    char path[512];
    if (fuzz_path(path, sizeof path, "task.json") || fuzz_file_write(path, data, size))
        return 0;
    task_def def;
    memset(&def, 0, sizeof def);
    qs_diag d = {0};
    task_def_load(&def, path, &d);
    task_def_free(&def);
    remove(path);
    return 0;
}
