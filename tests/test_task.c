/* test_task.c: task definitions and the data loaders (every layout, .zst,
 * bad rows -> the exact one-line error, missing data -> paths looked for). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/task.h"
#include "test.h"

#define TD "tests/data/tasks/"

TEST(task, shipped_definitions_load_and_validate)
{
    const char *names[] = {"mmlu", "hellaswag", "arc_easy", "arc_challenge"};
    for (int i = 0; i < 4; i++) {
        task_def def;
        qs_diag d = {0};
        ASSERT_OK(task_def_load_named(&def, "tasks", names[i], &d), &d);
        ASSERT_EQ_STR(def.name, names[i]);
        if (i == 0) {
            ASSERT_EQ_INT(def.n_subjects, 57);
            ASSERT_EQ_INT(def.n_groups, 4);
            int sum = 0;
            for (int g = 0; g < def.n_groups; g++)
                sum += def.groups[g].n_subjects;
            ASSERT_EQ_INT(sum, 57);
            ASSERT_EQ_INT(def.n_fixed_choices, 4);
            ASSERT_EQ_INT(def.metric_acc_norm, 0);
            ASSERT_EQ_INT(def.sampler, TASK_SAMPLER_FIRST_N);
        } else {
            ASSERT_EQ_INT(def.metric_acc_norm, 1);
            ASSERT_EQ_INT(def.sampler, TASK_SAMPLER_RANDOM);
        }
        ASSERT_EQ_INT(def.hook, i == 1 ? TASK_HOOK_HELLASWAG : TASK_HOOK_NONE);
        task_def_free(&def);
    }
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

TEST(task, bad_definition_names_key_and_file)
{
    char path[600];
    snprintf(path, sizeof path, "%s/bad_task.json", test_tmp_dir());
    static const struct {
        const char *json, *msg;
    } cases[] = {
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"arc\",\"eval_split\":\"test\",\"doc_to_text\":"
         "\"{question}\",\"doc_to_choice\":\"{choices}\",\"metrics\":[\"acc\"],\"data\":{\"eval\":"
         "[\"a\"]},\"colour\":1}", "unknown key \"colour\""},
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"arc\",\"eval_split\":\"test\",\"doc_to_text\":"
         "\"{questoin}\",\"doc_to_choice\":\"{choices}\",\"metrics\":[\"acc\"],\"data\":{\"eval\":"
         "[\"a\"]}}", "template field '{questoin}' unknown"},
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"arc\",\"hook\":\"magic\",\"eval_split\":\"test\","
         "\"doc_to_text\":\"{question}\",\"doc_to_choice\":\"{choices}\",\"metrics\":[\"acc\"],"
         "\"data\":{\"eval\":[\"a\"]}}", "$.hook: the only named hook is hellaswag_preprocess, found \"magic\""},
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"csv\",\"eval_split\":\"test\",\"doc_to_text\":"
         "\"{question}\",\"doc_to_choice\":\"{choices}\",\"metrics\":[\"acc\"],\"data\":{\"eval\":"
         "[\"a\"]}}", "$.loader: expected mmlu_csv, hellaswag or arc, found \"csv\""},
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"arc\",\"eval_split\":\"test\",\"doc_to_text\":"
         "\"{question}\",\"doc_to_choice\":\"{choices}\",\"metrics\":[\"f1\"],\"data\":{\"eval\":"
         "[\"a\"]}}", "metrics[0]"},
        {"{\"task\": \"x\",", "invalid JSON"},
        /* {subject} of a loader without subjects expanded to "" (every prompt changed) */
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"arc\",\"eval_split\":\"test\",\"doc_to_text\":"
         "\"{subject}: {question}\",\"doc_to_choice\":\"{choices}\",\"metrics\":[\"acc\"],\"data\":"
         "{\"eval\":[\"a\"]}}", "$.doc_to_text: {subject} and {subject_words} need a task with "
         "subjects (loader mmlu_csv)"},
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"arc\",\"eval_split\":\"test\",\"description\":"
         "\"About {subject_words}.\\n\\n\",\"doc_to_text\":\"{question}\",\"doc_to_choice\":"
         "\"{choices}\",\"metrics\":[\"acc\"],\"data\":{\"eval\":[\"a\"]}}", "$.description: {subject}"},
        /* a delimiter of 7 became " 7"-like text; a number is no loader name */
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"arc\",\"eval_split\":\"test\",\"doc_to_text\":"
         "\"{question}\",\"target_delimiter\":7,\"doc_to_choice\":\"{choices}\",\"metrics\":"
         "[\"acc\"],\"data\":{\"eval\":[\"a\"]}}", "$.target_delimiter: expected string, found integer"},
        {"{\"task\":\"x\",\"version\":1,\"loader\":5,\"eval_split\":\"test\",\"doc_to_text\":"
         "\"{question}\",\"doc_to_choice\":\"{choices}\",\"metrics\":[\"acc\"],\"data\":{\"eval\":"
         "[\"a\"]}}", "$.loader: expected string, found integer"},
        /* subjects on a loader that has none: said "$.groups: required key is missing" */
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"arc\",\"eval_split\":\"test\",\"doc_to_text\":"
         "\"{question}\",\"doc_to_choice\":\"{choices}\",\"metrics\":[\"acc\"],\"subjects\":"
         "[\"anatomy\"],\"data\":{\"eval\":[\"a\"]}}", "\"subjects\" is required by (and only by) mmlu_csv"},
        /* the hellaswag hook on another loader was ignored, yet reported as process_docs */
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"arc\",\"hook\":\"hellaswag_preprocess\","
         "\"eval_split\":\"test\",\"doc_to_text\":\"{question}\",\"doc_to_choice\":\"{choices}\","
         "\"metrics\":[\"acc\"],\"data\":{\"eval\":[\"a\"]}}",
         "$.hook: hellaswag_preprocess works on the hellaswag loader's fields, found loader \"arc\""},
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"arc\",\"eval_split\":\"test\",\"doc_to_text\":"
         "\"{question}\",\"doc_to_choice\":\"{choices}\",\"metrics\":[\"acc\"],\"data\":{\"eval\":"
         "[\"a\"],\"validation\":[\"x\"]}}", "$.data.validation: unknown key"},
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"arc\",\"eval_split\":\"test\",\"doc_to_text\":"
         "\"{question}\",\"doc_to_choice\":\"{choices}\",\"metrics\":[\"acc_norm\"],\"data\":"
         "{\"eval\":[\"a\"]}}", "$.metrics: expected [\"acc\"] or [\"acc\", \"acc_norm\"] (acc is"},
        {"{\"task\":\"x\",\"version\":1,\"loader\":\"arc\",\"eval_split\":\"test\",\"doc_to_text\":"
         "\"{question}\",\"doc_to_choice\":\"{choices}\",\"metrics\":[\"acc\",\"acc\"],\"data\":"
         "{\"eval\":[\"a\"]}}", "$.metrics[1]: \"acc\" listed twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ASSERT_EQ_INT(write_file(path, cases[i].json), 0);
        task_def def;
        qs_diag d = {0};
        int rc = task_def_load(&def, path, &d);
        ASSERT_EQ_INT(rc, QS_EFORMAT);
        ASSERT_EQ_STR(d.path, path);
        if (!strstr(d.msg, cases[i].msg))
            TEST_FAIL_AT("case %zu: '%s' does not contain '%s'", i, d.msg, cases[i].msg);
    }
}

/* The text formats hold UTF-8 as the JSON ones must (Python's strict decoder
 * agrees on each case): an ill-formed byte names its line and byte. */
TEST(task, mmlu_csv_with_invalid_utf8_names_line_and_byte)
{
    char path[600];
    snprintf(path, sizeof path, "%s/utf8_test.csv", test_tmp_dir());
    static const struct { const char *field; int ok; } cases[] = {
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 1},
        {"\xff\xfe", 0},               /* no UTF-8 byte at all */
        {"\xc0\x80", 0},               /* overlong NUL */
        {"\xed\xa0\x80", 0},           /* a surrogate */
        {"\xf4\x90\x80\x80", 0},       /* past U+10FFFF */
        {"ab\xe2\x82", 0},             /* cut short */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[256];
        snprintf(text, sizeof text, "q1,a,b,c,d,A\nq2 %s,a,b,c,d,B\n", cases[i].field);
        ASSERT_EQ_INT(write_file(path, text), 0);
        task_doc *docs = NULL;
        size_t n = 0, cap = 0;
        qs_diag d = {0};
        int rc = task_load_mmlu_csv(path, 0, &docs, &n, &cap, &d);
        task_docs_free(docs, n);
        if (cases[i].ok) {
            ASSERT_OK(rc, &d);
            continue;
        }
        ASSERT_EQ_INT(rc, QS_EFORMAT);
        ASSERT_EQ_INT(d.line, 2);
        ASSERT_TRUE(strstr(d.msg, "invalid UTF-8 at byte ") != NULL);
    }
}

TEST(task, mmlu_csv_quoting_and_multiline_fields)
{
    task_doc *docs = NULL;
    size_t n = 0, cap = 0;
    qs_diag d = {0};
    ASSERT_OK(task_load_mmlu_csv(TD "data/mmlu/test/abstract_algebra_test.csv", 0, &docs, &n,
                                 &cap, &d), &d);
    ASSERT_EQ_INT(n, 3);
    ASSERT_EQ_STR(docs[0].question,
                  "Find the degree for the given field extension Q(sqrt(5), sqrt(7)) over Q.");
    ASSERT_EQ_INT(docs[0].gold, 1);
    ASSERT_EQ_STR(docs[1].question,
                  "  Let p = (1, 2, 5, 4)(2, 3) in S_5 . Find the index of <p> in S_5.\n");
    ASSERT_EQ_INT(docs[1].line, 2);
    ASSERT_EQ_INT(docs[1].gold, 2);
    ASSERT_EQ_STR(docs[2].question, "Statement 1 | A \"quoted\" word, a comma.\nStatement 2 | Line two.");
    ASSERT_EQ_STR(docs[2].choices[2], "True, False");
    ASSERT_EQ_INT(docs[2].line, 4);
    ASSERT_EQ_INT(docs[2].doc_id, 2);
    ASSERT_EQ_INT(docs[2].gold, 3);
    task_docs_free(docs, n);
}

TEST(task, arc_hf_and_ai2_layouts_with_numeric_labels)
{
    task_doc *docs = NULL;
    size_t n = 0, cap = 0;
    qs_diag d = {0};
    ASSERT_OK(task_load_arc(TD "data/arc/hf_layout/ARC-Easy-test.jsonl", &docs, &n, &cap, &d), &d);
    ASSERT_EQ_INT(n, 4);
    ASSERT_EQ_INT(docs[0].n_choices, 4);
    ASSERT_EQ_INT(docs[0].gold, 1);
    ASSERT_EQ_INT(docs[1].n_choices, 3);   /* labels "1".."3", key "3" */
    ASSERT_EQ_INT(docs[1].gold, 2);
    ASSERT_EQ_STR(docs[1].choices[0], "0 \xc2\xb0" "C");
    ASSERT_EQ_INT(docs[2].n_choices, 5);
    ASSERT_OK(task_load_arc(TD "data/arc/ai2_layout/ARC-Challenge-Test.jsonl", &docs, &n, &cap, &d),
              &d);
    ASSERT_EQ_INT(n, 7);
    ASSERT_EQ_STR(docs[4].question, "An astronomer sees a planet spin faster. Which effect is most likely?");
    ASSERT_EQ_INT(docs[4].doc_id, 0);
    ASSERT_EQ_INT(docs[5].gold, 1);   /* numeric key "2" */
    ASSERT_EQ_INT(docs[6].n_choices, 3);
    task_docs_free(docs, n);
}

TEST(task, hellaswag_text_is_taken_as_given)
{
    task_doc *docs = NULL;
    size_t n = 0, cap = 0;
    int as_given = 0;
    qs_diag d = {0};
    ASSERT_OK(task_load_hellaswag(TD "text/hellaswag/hellaswag_val_full.txt", 1, &docs, &n, &cap,
                                  &as_given, &d), &d);
    ASSERT_EQ_INT(as_given, 1);
    ASSERT_EQ_INT(n, 2);
    ASSERT_EQ_STR(docs[0].question, "Roof shingle removal: A man is sitting on a roof. he");
    ASSERT_EQ_INT(docs[0].gold, 3);
    ASSERT_EQ_INT(docs[1].line, 7);
    ASSERT_EQ_STR(docs[1].choices[2], "He sings.");
    task_docs_free(docs, n);
}

/* Compress src into dst with libzstd (a test-made .zst). */
static int zst_copy(const char *src, const char *dst)
{
    char *data = NULL;
    size_t n = 0;
    qs_diag d = {0};
    if (fileio_read_all(src, &data, &n, &d))
        return -1;
    size_t cap = ZSTD_compressBound(n);
    void *out = qs_malloc(cap);
    size_t z = out ? ZSTD_compress(out, cap, data, n, 3) : 0;
    int rc = (!out || ZSTD_isError(z)) ? -1 : fileio_write_atomic(dst, out, z, &d);
    qs_free(out);
    qs_free(data);
    return rc;
}

TEST(task, zst_data_file_is_found_and_read)
{
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/zdata/arc/hf_layout", test_tmp_dir());
    qs_diag d = {0};
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    snprintf(path, sizeof path, "%s/ARC-Easy-test.jsonl.zst", dir);
    ASSERT_EQ_INT(zst_copy(TD "data/arc/hf_layout/ARC-Easy-test.jsonl", path), 0);
    task_def def;
    ASSERT_OK(task_def_load_named(&def, "tasks", "arc_easy", &d), &d);
    task_data td;
    snprintf(dir, sizeof dir, "%s/zdata", test_tmp_dir());
    int rc = task_data_load(&td, &def, dir, 0, &d);
    task_def_free(&def);
    ASSERT_OK(rc, &d);
    ASSERT_EQ_INT(td.n_docs, 4);
    ASSERT_EQ_INT(td.n_files, 1);
    ASSERT_EQ_STR(td.files[0].path, path);
    ASSERT_EQ_INT(strlen(td.files[0].sha256), 64);
    ASSERT_EQ_INT(td.docs[1].gold, 2);
    task_data_free(&td);
}

TEST(task, missing_data_lists_every_path_looked_for)
{
    task_def def;
    task_data td;
    qs_diag d = {0};
    ASSERT_OK(task_def_load_named(&def, "tasks", "arc_challenge", &d), &d);
    int rc = task_data_load(&td, &def, "tests/data/tasks/nowhere", 0, &d);
    task_def_free(&def);
    ASSERT_EQ_INT(rc, QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.msg, "tests/data/tasks/nowhere/arc/hf_layout/ARC-Challenge-test.jsonl[.zst]"));
    ASSERT_TRUE(strstr(d.msg, "tests/data/tasks/nowhere/arc/ai2_layout/ARC-Challenge-Test.jsonl[.zst]"));
    /* MMLU names the subject it could not find */
    ASSERT_OK(task_def_load_named(&def, "tasks", "mmlu", &d), &d);
    rc = task_data_load(&td, &def, TD "data", 0, &d);
    task_def_free(&def);
    ASSERT_EQ_INT(rc, QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.msg, "mmlu test for astronomy"));
    ASSERT_TRUE(strstr(d.msg, "mmlu/test/astronomy_test.csv[.zst]"));
}

TEST(task, unknown_task_name_is_an_error)
{
    task_def def;
    qs_diag d = {0};
    ASSERT_EQ_INT(task_def_load_named(&def, "tasks", "winogrande", &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.msg, "tasks/winogrande.json"));
    ASSERT_EQ_INT(task_def_load_named(&def, "tasks", "../x", &d), QS_EINVAL);
}

TEST(task, bad_rows_give_file_line_and_reason)
{
    char *list = NULL;
    size_t n = 0;
    qs_diag d = {0};
    ASSERT_OK(fileio_read_all(TD "bad/expected.txt", &list, &n, &d), &d);
    int cases = 0;
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#')
            continue;
        char *loader = line, *file = strchr(loader, '\t');
        char *want = file ? strchr(file + 1, '\t') : NULL;
        ASSERT_TRUE(file && want);
        *file++ = 0;
        *want++ = 0;
        char path[512];
        snprintf(path, sizeof path, TD "bad/%s", file);
        task_doc *docs = NULL;
        size_t nd = 0, cap = 0;
        int as_given, rc;
        qs_diag e = {0};
        if (!strcmp(loader, "mmlu"))
            rc = task_load_mmlu_csv(path, 0, &docs, &nd, &cap, &e);
        else if (!strcmp(loader, "hellaswag"))
            rc = task_load_hellaswag(path, 1, &docs, &nd, &cap, &as_given, &e);
        else
            rc = task_load_arc(path, &docs, &nd, &cap, &e);
        task_docs_free(docs, nd);
        char got[1200];
        diag_format(&e, got, sizeof got);
        const char *tail = strstr(got, file);   /* drop the directory part */
        if (rc >= 0 || !tail || strncmp(tail, want, strlen(want)))
            TEST_FAIL_AT("%s: rc %d, got '%s', want '%s'", file, rc, got, want);
        cases++;
    }
    qs_free(list);
    ASSERT_EQ_INT(cases, 14);
}
