/* test_fuzz_replay.c: replays every file of tests/fuzz/corpus/<target>/ through
 * fuzz_<target> in-process (the regression driver of tests/fuzz; under make check
 * with ASan+UBSan).  A target returns 0 for any input; what fails a replay is a
 * crash, a sanitizer report or a leak.  An empty or missing corpus fails too, so a
 * target cannot silently lose its seeds. */
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz/fuzz.h"
#include "qs/mem.h"
#include "test.h"

typedef int (*fuzz_fn)(const uint8_t *, size_t);

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whole file into a qs_malloc'd buffer; NULL on error. */
static uint8_t *file_slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            uint8_t *nb = qs_realloc(buf, cap);
            if (!nb) {
                qs_free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    int err = ferror(f);
    fclose(f);
    if (err) {
        qs_free(buf);
        return NULL;
    }
    *size = n;
    return buf;
}

/* Replays every file in tests/fuzz/corpus/<target>/, in name order.  Returns the number of
 * files replayed, -1 when the directory cannot be read or a file cannot be. */
static int corpus_replay(const char *target, fuzz_fn fn)
{
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", target);
    DIR *dp = opendir(dir);
    if (!dp) {
        fprintf(stderr, "    cannot open %s\n", dir);
        return -1;
    }
    char *names[1024];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL && n < 1024)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(dp);
    qsort(names, (size_t)n, sizeof names[0], name_cmp);
    int replayed = 0;
    for (int i = 0; i < n; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t size = 0;
        uint8_t *data = file_slurp(path, &size);
        if (!data) {
            fprintf(stderr, "    cannot read %s\n", path);
            replayed = -1;
        } else {
            if (fn(data, size) != 0) {
                fprintf(stderr, "    %s: target returned non-zero\n", path);
                replayed = -1;
            }
            qs_free(data);
            if (replayed >= 0)
                replayed++;
        }
        free(names[i]);
    }
    fuzz_scratch_remove();
    return replayed;
}

#define FUZZ_REPLAY_TEST(name)                                                        \
    TEST(fuzz_replay, name)                                                           \
    {                                                                                 \
        int n_ = corpus_replay(#name, fuzz_##name);                                   \
        ASSERT_TRUE(n_ > 0);                                                          \
    }
FUZZ_TARGETS(FUZZ_REPLAY_TEST)
#undef FUZZ_REPLAY_TEST
