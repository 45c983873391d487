/* test_run_logs.h: a run dir's logs for byte comparison between runs
 * (test_trainer.c, test_cli_train.c, test_cli_train_loop.c, test_cli_dist.c):
 * metrics.jsonl lines lose their wall-clock fields, the rest stays as written. */
#ifndef QS_TEST_RUN_LOGS_H
#define QS_TEST_RUN_LOGS_H

#include <string.h>

#include "qs/fileio.h"

/* drops every ,"tok_per_s":V and ,"elapsed_s":V (the timing fields) from text */
static inline void test_drop_timing(char *text)
{
    static const char *const timing[] = {",\"tok_per_s\":", ",\"elapsed_s\":"};
    for (int k = 0; k < 2; k++)
        for (char *p; (p = strstr(text, timing[k]));) {
            char *e = p + strlen(timing[k]);
            while (*e && *e != ',' && *e != '}')
                e++;
            memmove(p, e, strlen(e) + 1);
        }
}

/* the file at path (a .zst log decompressed by fileio_read_all) without the
 * timing fields, NULL when unreadable; qs_free it */
static inline char *test_log_read(const char *path)
{
    char *text;
    size_t n;
    if (fileio_read_all(path, &text, &n, NULL))
        return NULL;
    test_drop_timing(text);
    return text;
}

#endif
