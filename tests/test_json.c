/* test_json.c: base/json.c: loading, typed getters (file + JSON path in every
 * error), JSON lines, and string quoting checked by Jansson's own parser. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "test.h"

/* the diag as the CLI prints it */
static const char *json_diag_line(const qs_diag *d)
{
    static char buf[QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 32];
    diag_format(d, buf, sizeof buf);
    return buf;
}

static const char DOC[] =
    "{\"task\": \"arc_easy\", \"n\": 3, \"big\": 5000000000, \"lr\": 1e-5, \"whole\": 2,\n"
    " \"on\": true, \"none\": null, \"choices\": [\"a\", \"b\", 7],\n"
    " \"data\": {\"eval\": [\"x.jsonl\"]}, \"odd key\": 1}\n";

TEST(json, getters_read_every_type)
{
    qs_diag d = {0};
    json_t *root;
    ASSERT_OK(qs_json_load_text(DOC, strlen(DOC), "t.json", 1, QS_JSON_OBJECT, &root, &d), &d);
    qs_json_at r = qs_json_root(root, "t.json", -1), arr, data;
    const char *s;
    int n, on;
    long long big;
    double lr, whole;
    size_t len;
    ASSERT_OK(qs_json_str(&r, "task", &s, &d), &d);
    ASSERT_EQ_STR(s, "arc_easy");
    ASSERT_OK(qs_json_int(&r, "n", 0, 10, &n, &d), &d);
    ASSERT_EQ_INT(n, 3);
    ASSERT_OK(qs_json_i64(&r, "big", 0, 1LL << 40, &big, &d), &d);
    ASSERT_EQ_INT(big, 5000000000LL);
    ASSERT_OK(qs_json_num(&r, "lr", &lr, &d), &d);
    ASSERT_TRUE(lr == 1e-5);
    ASSERT_OK(qs_json_num(&r, "whole", &whole, &d), &d);   /* an integer is a number */
    ASSERT_TRUE(whole == 2.0);
    ASSERT_OK(qs_json_bool(&r, "on", &on, &d), &d);
    ASSERT_EQ_INT(on, 1);
    ASSERT_OK(qs_json_arr(&r, "choices", &arr, &len, &d), &d);
    ASSERT_EQ_INT(len, 3);
    qs_json_at e1 = qs_json_item(&arr, 1);
    ASSERT_OK(qs_json_str(&e1, NULL, &s, &d), &d);
    ASSERT_EQ_STR(s, "b");
    ASSERT_OK(qs_json_obj(&r, "data", &data, &d), &d);
    qs_json_at ev = qs_json_key(&data, "eval");
    qs_json_at ev0 = qs_json_item(&ev, 0);
    ASSERT_OK(qs_json_str(&ev0, NULL, &s, &d), &d);
    ASSERT_EQ_STR(s, "x.jsonl");
    json_decref(root);
}

TEST(json, optional_getters_take_the_default_for_absent_or_null)
{
    qs_diag d = {0};
    json_t *root;
    ASSERT_OK(qs_json_load_text(DOC, strlen(DOC), "t.json", 1, 0, &root, &d), &d);
    qs_json_at r = qs_json_root(root, "t.json", -1);
    const char *s;
    int n, b;
    long long big;
    double x;
    ASSERT_OK(qs_json_str_or(&r, "absent", "dflt", &s, &d), &d);
    ASSERT_EQ_STR(s, "dflt");
    ASSERT_OK(qs_json_str_or(&r, "none", "dflt", &s, &d), &d);
    ASSERT_EQ_STR(s, "dflt");
    ASSERT_OK(qs_json_int_or(&r, "none", 0, 9, 7, &n, &d), &d);
    ASSERT_EQ_INT(n, 7);
    ASSERT_OK(qs_json_int_or(&r, "n", 0, 9, 7, &n, &d), &d);   /* present: read */
    ASSERT_EQ_INT(n, 3);
    ASSERT_OK(qs_json_i64_or(&r, "absent", 0, 9, -1, &big, &d), &d);
    ASSERT_EQ_INT(big, -1);
    ASSERT_OK(qs_json_num_or(&r, "absent", 0.5, &x, &d), &d);
    ASSERT_TRUE(x == 0.5);
    ASSERT_OK(qs_json_bool_or(&r, "absent", 1, &b, &d), &d);
    ASSERT_EQ_INT(b, 1);
    /* an optional key of the wrong type is still an error */
    ASSERT_EQ_INT(qs_json_str_or(&r, "n", "dflt", &s, &d), QS_EFORMAT);
    ASSERT_EQ_STR(json_diag_line(&d), "t.json: $.n: expected string, found integer");
    json_decref(root);
}

TEST(json, each_getter_names_file_and_path_on_a_type_mismatch)
{
    qs_diag d = {0};
    json_t *root;
    ASSERT_OK(qs_json_load_text(DOC, strlen(DOC), "tasks/arc_easy.json", 1, 0, &root, &d), &d);
    qs_json_at r = qs_json_root(root, "tasks/arc_easy.json", -1), arr, o;
    const char *s;
    int n;
    long long big;
    double x;
    size_t len;
    ASSERT_OK(qs_json_arr(&r, "choices", &arr, &len, &d), &d);
    qs_json_at e2 = qs_json_item(&arr, 2);
    ASSERT_EQ_INT(qs_json_str(&e2, NULL, &s, &d), QS_EFORMAT);
    ASSERT_EQ_STR(json_diag_line(&d), "tasks/arc_easy.json: $.choices[2]: expected string, found integer");
    ASSERT_EQ_STR(d.path, "tasks/arc_easy.json");
    ASSERT_EQ_INT(d.line, -1);
    ASSERT_EQ_INT(qs_json_int(&r, "task", 0, 9, &n, &d), QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.task: expected integer, found string");
    ASSERT_EQ_INT(qs_json_i64(&r, "lr", 0, 9, &big, &d), QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.lr: expected integer, found number");
    ASSERT_EQ_INT(qs_json_num(&r, "on", &x, &d), QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.on: expected number, found boolean");
    ASSERT_EQ_INT(qs_json_bool(&r, "none", &n, &d), QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.none: expected boolean, found null");
    ASSERT_EQ_INT(qs_json_arr(&r, "data", &o, &len, &d), QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.data: expected array, found object");
    ASSERT_EQ_INT(qs_json_obj(&r, "choices", &o, &d), QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.choices: expected object, found array");
    /* a member asked of something that is not an object names the container */
    ASSERT_EQ_INT(qs_json_str(&arr, "text", &s, &d), QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.choices: expected object, found array");
    /* keys that are not identifiers are quoted */
    ASSERT_EQ_INT(qs_json_str(&r, "odd key", &s, &d), QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$[\"odd key\"]: expected string, found integer");
    json_decref(root);
}

TEST(json, missing_key_and_out_of_range_integer)
{
    qs_diag d = {0};
    json_t *root;
    ASSERT_OK(qs_json_load_text(DOC, strlen(DOC), "config.json", 1, 0, &root, &d), &d);
    qs_json_at r = qs_json_root(root, "config.json", -1), data;
    const char *s;
    int n;
    ASSERT_OK(qs_json_obj(&r, "data", &data, &d), &d);
    ASSERT_EQ_INT(qs_json_str(&data, "fewshot", &s, &d), QS_EFORMAT);
    ASSERT_EQ_STR(json_diag_line(&d), "config.json: $.data.fewshot: required key is missing");
    ASSERT_EQ_INT(qs_json_int(&r, "n", 4, 4096, &n, &d), QS_ERANGE);
    ASSERT_EQ_STR(d.msg, "$.n: expected integer in [4, 4096], found 3");
    ASSERT_EQ_INT(qs_json_int_or(&r, "big", 0, 2147483647, 0, &n, &d), QS_ERANGE);
    ASSERT_EQ_STR(d.msg, "$.big: expected integer in [0, 2147483647], found 5000000000");
    qs_json_at past = qs_json_item(&r, 0);   /* not an array: no value */
    ASSERT_EQ_INT(qs_json_str(&past, NULL, &s, &d), QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$[0]: expected a value, found nothing");
    ASSERT_EQ_INT(qs_json_fail(&data, "eval", QS_EINVAL, &d, "custom %d", 5), QS_EINVAL);
    ASSERT_EQ_STR(d.msg, "$.data.eval: custom 5");
    json_decref(root);
}

TEST(json, load_errors_name_file_line_and_column)
{
    qs_diag d = {0};
    char path[600];
    snprintf(path, sizeof path, "%s/bad.json", test_tmp_dir());
    static const char bad[] = "{\n  \"a\": 1,\n  \"b\": tru\n}\n";
    ASSERT_OK(fileio_write_atomic(path, bad, strlen(bad), &d), &d);
    json_t *root = (json_t *)1;
    ASSERT_EQ_INT(qs_json_load_file(path, 0, &root, &d), QS_EFORMAT);
    ASSERT_TRUE(root == NULL);
    ASSERT_EQ_STR(d.path, path);
    ASSERT_EQ_INT(d.line, 3);
    ASSERT_TRUE(strncmp(d.msg, "invalid JSON at column ", 23) == 0);
    /* embedded in a binary file: a byte offset instead of a line */
    ASSERT_EQ_INT(qs_json_load_text("{\"a\":}", 6, "m.safetensors", 0, 0, &root, &d), QS_EFORMAT);
    ASSERT_EQ_INT(d.line, -1);
    ASSERT_TRUE(strncmp(d.msg, "invalid JSON at byte ", 21) == 0);
    /* a record of a JSON-lines file keeps its line */
    ASSERT_EQ_INT(qs_json_load_text("[1]", 3, "s.jsonl", 7, QS_JSON_OBJECT, &root, &d), QS_EFORMAT);
    ASSERT_EQ_STR(json_diag_line(&d), "s.jsonl:7: $: expected object, found array");
    ASSERT_EQ_INT(qs_json_load_text("{\"a\":1,\"a\":2}", 13, "dup.json", 1, QS_JSON_NO_DUPLICATES,
                                    &root, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "duplicate") != NULL);
    snprintf(path, sizeof path, "%s/absent.json", test_tmp_dir());
    ASSERT_EQ_INT(qs_json_load_file(path, 0, &root, &d), QS_ENOTFOUND);
    ASSERT_EQ_STR(d.path, path);
}

TEST(json, jsonl_reader_gives_objects_with_their_lines)
{
    qs_diag d = {0};
    char path[600];
    snprintf(path, sizeof path, "%s/r.jsonl", test_tmp_dir());
    static const char text[] = "{\"x\": 1}\n\n{\"x\": \"two\"}\n[3]\n";
    ASSERT_OK(fileio_write_atomic(path, text, strlen(text), &d), &d);
    qs_jsonl r;
    qs_json_at rec;
    int x;
    ASSERT_OK(qs_jsonl_open(&r, path, 0, &d), &d);
    ASSERT_EQ_INT(qs_jsonl_next(&r, &rec, &d), 1);
    ASSERT_EQ_INT(rec.line, 1);
    ASSERT_OK(qs_json_int(&rec, "x", 0, 9, &x, &d), &d);
    ASSERT_EQ_INT(x, 1);
    ASSERT_EQ_INT(qs_jsonl_next(&r, &rec, &d), 1);   /* the empty line is skipped */
    ASSERT_EQ_INT(rec.line, 3);
    ASSERT_EQ_INT(qs_json_int(&rec, "x", 0, 9, &x, &d), QS_EFORMAT);
    ASSERT_EQ_STR(json_diag_line(&d) + strlen(path), ":3: $.x: expected integer, found string");
    ASSERT_EQ_INT(qs_jsonl_next(&r, &rec, &d), QS_EFORMAT);
    ASSERT_EQ_INT(d.line, 4);
    qs_jsonl_close(&r);
    qs_jsonl_close(&r);   /* twice is fine */
}

TEST(json, quote_round_trips_through_jansson)
{
    static const char *const cases[] = {
        "", "plain", "quote \" and backslash \\ inside", "C:\\runs\\a\"b.png",
        "tab\there\nnewline\r\x01\x1f end", "utf-8: \xC3\xA9 \xE2\x96\x81 \xF0\x9F\x98\x80", NULL};
    for (int i = 0; cases[i]; i++) {
        char lit[256], doc[300];
        size_t n = qs_json_quote(lit, sizeof lit, cases[i]);
        ASSERT_EQ_INT(n, strlen(lit));
        snprintf(doc, sizeof doc, "[%s]", lit);
        json_error_t je;
        json_t *a = json_loads(doc, 0, &je);
        ASSERT_TRUE(a != NULL);
        ASSERT_EQ_STR(json_string_value(json_array_get(a, 0)), cases[i]);
        json_decref(a);
    }
    char lit[16];
    ASSERT_EQ_INT(qs_json_quote(lit, sizeof lit, "a\"b"), 6);
    ASSERT_EQ_STR(lit, "\"a\\\"b\"");
    ASSERT_EQ_INT(qs_json_quote(lit, sizeof lit, "\n"), 8);
    ASSERT_EQ_STR(lit, "\"\\u000a\"");
    /* cut: snprintf-style length, never half an escape */
    ASSERT_EQ_INT(qs_json_quote(lit, 4, "a\"b"), 6);
    ASSERT_EQ_STR(lit, "\"a");
    ASSERT_EQ_INT(qs_json_quote(NULL, 0, "abc"), 5);
}
