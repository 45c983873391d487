/* test_task_fuzz.c: mutation replay for the task data parsers (CSV, HellaSwag
 * jsonl and text, ARC jsonl).  Every self-made fixture is truncated at and
 * corrupted around many deterministic positions; each result must be a clean
 * load or an error naming the file (never a crash: this suite also runs under
 * ASan+UBSan). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/task.h"
#include "test.h"

#define TD "tests/data/tasks/"

static int fuzz_load(int loader, const char *path, qs_diag *d)
{
    task_doc *docs = NULL;
    size_t n = 0, cap = 0;
    int as_given, rc;
    if (loader == 0)
        rc = task_load_mmlu_csv(path, 0, &docs, &n, &cap, d);
    else if (loader == 1)
        rc = task_load_hellaswag(path, 1, &docs, &n, &cap, &as_given, d);
    else
        rc = task_load_arc(path, &docs, &n, &cap, d);
    for (size_t i = 0; rc == 0 && i < n; i++)   /* a clean load gives usable docs */
        if (!docs[i].question || docs[i].n_choices < 2 || docs[i].gold < 0 ||
            docs[i].gold >= docs[i].n_choices)
            rc = 1;
    task_docs_free(docs, n);
    return rc;
}

TEST(task_fuzz, mutated_data_loads_or_fails_cleanly)
{
    static const struct {
        int loader;
        const char *file, *ext;
    } seeds[] = {
        {0, TD "data/mmlu/test/abstract_algebra_test.csv", "csv"},
        {0, TD "data/mmlu/dev/abstract_algebra_dev.csv", "csv"},
        {1, TD "data/hellaswag/hellaswag_val.jsonl", "jsonl"},
        {1, TD "text/hellaswag/hellaswag_val_full.txt", "txt"},
        {2, TD "data/arc/hf_layout/ARC-Easy-test.jsonl", "jsonl"},
        {2, TD "data/arc/ai2_layout/ARC-Challenge-Test.jsonl", "jsonl"},
    };
    static const char subst[] = {'"', ',', '\n', '\r', '[', ']', '{', '}', ':', '\\', 0, ' ',
                                 '\xc3', '\xff', '7', 'A'};
    int cases = 0, ok = 0;
    uint32_t rng = 12345;
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        char *orig = NULL, path[600];
        size_t n = 0;
        qs_diag d = {0};
        ASSERT_OK(fileio_read_all(seeds[s].file, &orig, &n, &d), &d);
        snprintf(path, sizeof path, "%s/fuzz.%s", test_tmp_dir(), seeds[s].ext);
        char *buf = qs_malloc(n + 1);
        ASSERT_TRUE(buf);
        for (int k = 0; k < 120; k++) {
            rng = rng * 1664525u + 1013904223u;
            size_t pos = (rng >> 8) % (n ? n : 1), len = n;
            memcpy(buf, orig, n);
            if (k % 3 == 0)
                len = pos;                        /* truncation */
            else
                buf[pos] = subst[(rng >> 4) % sizeof subst];   /* one corrupted byte */
            ASSERT_OK(fileio_write_atomic(path, buf, len, &d), &d);
            qs_diag e = {0};
            int rc = fuzz_load(seeds[s].loader, path, &e);
            if (rc > 0)
                TEST_FAIL_AT("%s mutation %d: loaded docs are inconsistent", seeds[s].file, k);
            if (rc < 0 && (strcmp(e.path, path) || !e.msg[0]))
                TEST_FAIL_AT("%s mutation %d: error without the file: '%s: %s'", seeds[s].file, k,
                             e.path, e.msg);
            ok += rc == 0;
            cases++;
        }
        qs_free(buf);
        qs_free(orig);
    }
    ASSERT_EQ_INT(cases, 720);
    ASSERT_TRUE(ok > 0 && ok < cases);   /* both outcomes were exercised */
}
