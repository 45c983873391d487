/* fuzz_zlog_plain.c: a plain JSON-lines file -> zlog_reader, every line read. */
#include "fuzz.h"
#include "qs/zlog.h"

/* Read path to its end through zlog_next (also used by fuzz_zlog_zstd.c). */
int fuzz_zlog_read_all(const char *path);

int fuzz_zlog_read_all(const char *path)
{
    zlog_reader *r = NULL;
    qs_diag d = {0};
    if (zlog_reader_create(&r, path, &d) != 0)
        return 0;
    const char *line;
    size_t len;
    long lineno;
    int rc;
    while ((rc = zlog_next(r, &line, &len, &lineno, &d)) == 1)
        if (strlen(line) > len)
            abort();   /* the line is NUL-terminated at len (embedded NULs may end it early) */
    zlog_reader_destroy(r);
    return 0;
}

int fuzz_zlog_plain(const uint8_t *data, size_t size)
{
    char path[512];
    if (fuzz_path(path, sizeof path, "fuzz.jsonl") || fuzz_file_write(path, data, size))
        return 0;
    fuzz_zlog_read_all(path);
    remove(path);
    return 0;
}
