/* fuzz.h: shared pieces of the fuzz targets in tests/fuzz/fuzz_<target>.c.
 *
 * Every target is `int fuzz_<target>(const uint8_t *data, size_t size)`: it feeds
 * the bytes to one parser (through a scratch file when the API takes a path),
 * frees everything and returns 0.  The same functions are called by the corpus
 * replay in tests/test_fuzz_replay.c (make test) and by the libFuzzer wrapper in
 * tests/fuzz/libfuzzer_main.c (make fuzz).  A target never judges the parser's
 * verdict: any return code is fine, a crash, leak or sanitizer report is not.
 *
 * The table FUZZ_TARGETS lists every target once (X-macro), so the replay and the
 * Makefile cannot forget one.
 */
#ifndef QS_FUZZ_H
#define QS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#define FUZZ_TARGETS(X)                                                               \
    X(safetensors)                                                                    \
    X(safetensors_index)                                                              \
    X(hfconfig)                                                                       \
    X(tokenizer_json)                                                                 \
    X(tokenizer_model)                                                                \
    X(shard)                                                                          \
    X(zlog_plain)                                                                     \
    X(zlog_zstd)                                                                      \
    X(qlog)                                                                           \
    X(resfile)                                                                        \
    X(itemlog_qatscope)                                                               \
    X(itemlog_harness)                                                                \
    X(metrics)                                                                        \
    X(task_def)                                                                       \
    X(task_mmlu_csv)                                                                  \
    X(task_hellaswag_jsonl)                                                           \
    X(task_hellaswag_text)                                                            \
    X(task_arc)                                                                       \
    X(runcfg)                                                                         \
    X(trainstate)                                                                     \
    X(manifest)                                                                       \
    X(tokenizer_config)                                                               \
    X(events)                                                                         \
    X(tokenize_corpus)                                                                \
    X(hif8_text)                                                                      \
    X(detokenize_ids)                                                                 \
    X(log_truncate)

#define FUZZ_DECLARE(name) int fuzz_##name(const uint8_t *data, size_t size);
FUZZ_TARGETS(FUZZ_DECLARE)
#undef FUZZ_DECLARE

/* Scratch directory of this process ($TMPDIR/qs-fuzz.<pid>), created on first use;
 * NULL if it cannot be made.  Targets remove what they write into it. */
static inline const char *fuzz_scratch_dir(void)
{
    static char dir[256];
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/qs-fuzz.%ld", base && *base ? base : "/tmp",
                 (long)getpid());
        if (mkdir(dir, 0700) != 0 && access(dir, W_OK) != 0) {
            dir[0] = '\0';
            return NULL;
        }
    }
    return dir;
}

/* path = scratch/rel; 0 on success. */
static inline int fuzz_path(char *path, size_t path_bytes, const char *rel)
{
    const char *dir = fuzz_scratch_dir();
    if (!dir)
        return -1;
    int n = snprintf(path, path_bytes, "%s/%s", dir, rel);
    return n < 0 || (size_t)n >= path_bytes ? -1 : 0;
}

/* Write size bytes to path (whole file); 0 on success. */
static inline int fuzz_file_write(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = size ? fwrite(data, 1, size, f) : 0;
    int bad = fclose(f) != 0 || w != size;
    if (bad)
        remove(path);
    return bad ? -1 : 0;
}

/* Make the directory scratch/rel (a run or model directory); 0 on success. */
static inline int fuzz_subdir(char *path, size_t path_bytes, const char *rel)
{
    if (fuzz_path(path, path_bytes, rel))
        return -1;
    return mkdir(path, 0700) == 0 || access(path, W_OK) == 0 ? 0 : -1;
}

/* The input as a NUL-terminated string (malloc'd; free it); NULL on OOM.  A NUL
 * inside the input ends the string early, as it would for a C caller. */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s) {
        if (size)
            memcpy(s, data, size);
        s[size] = '\0';
    }
    return s;
}

/* Remove every plain file in dir, then dir itself (what a target wrote there). */
static inline void fuzz_dir_remove(const char *dir)
{
    DIR *dp = opendir(dir);
    if (dp) {
        struct dirent *e;
        char path[1024];
        while ((e = readdir(dp)) != NULL)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                remove(path);
            }
        closedir(dp);
    }
    rmdir(dir);
}

/* Copy the repository file src (targets run from the repository root) to dst. */
static inline int fuzz_file_copy(const char *src, const char *dst)
{
    FILE *f = fopen(src, "rb");
    if (!f)
        return -1;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf, f);
    int bad = ferror(f) || !feof(f);
    fclose(f);
    return bad ? -1 : fuzz_file_write(dst, buf, n);
}

/* Remove the scratch directory once it is empty (end of a replay). */
static inline void fuzz_scratch_remove(void)
{
    const char *dir = fuzz_scratch_dir();
    if (dir)
        rmdir(dir);
}

#endif
