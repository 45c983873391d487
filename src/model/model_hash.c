/* model_hash.c: the identity of a checkpoint directory (see include/qs/model.h). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "qs/digest.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/model.h"

#define MODEL_HASH_MAX_FILES 256

static int model_hash_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int model_dir_sha256(const char *dir, char hex[65], qs_diag *d)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return diag_set(d, QS_ENOTFOUND, dir, -1, "cannot open model directory");
    char *names[MODEL_HASH_MAX_FILES];
    int n = 0, rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(dp))) {
        size_t l = strlen(e->d_name);
        if (strcmp(e->d_name, "config.json") &&
            !(l > 12 && !strcmp(e->d_name + l - 12, ".safetensors")))
            continue;
        if (n == MODEL_HASH_MAX_FILES)
            rc = diag_set(d, QS_ERANGE, dir, -1, "more than %d weight files",
                          MODEL_HASH_MAX_FILES);
        else if (!(names[n++] = qs_strdup(e->d_name)))
            rc = diag_set(d, QS_ENOMEM, dir, -1, "out of memory");
    }
    closedir(dp);
    if (!rc)
        qsort(names, (size_t)n, sizeof *names, model_hash_name_cmp);
    digest_sha256 all;
    digest_sha256_init(&all);
    for (int i = 0; i < n && !rc; i++) {
        char path[4096], h[65];
        if (fileio_join(path, sizeof path, dir, names[i]))
            rc = diag_set(d, QS_ERANGE, dir, -1, "path too long");
        else if (!(rc = digest_sha256_file_cached(path, h, DIGEST_CACHE_MIN_BYTES, d))) {
            digest_sha256_update(&all, names[i], strlen(names[i]));
            digest_sha256_update(&all, " ", 1);
            digest_sha256_update(&all, h, 64);
            digest_sha256_update(&all, "\n", 1);
        }
    }
    for (int i = 0; i < n; i++)
        qs_free(names[i]);
    digest_sha256_final(&all, hex);
    return rc;
}
