/* test_shards.c: token shard files and `tokenize --input` (shard_build_run). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/shard_build.h"
#include "qs/shards.h"
#include "qs/tokenizer.h"
#include "test.h"

#define TINY_TOK "tests/data/tok/tiny_spm.json"

static const char *tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", test_tmp_dir(), name);
    return buf;
}

static int write_text(const char *path, const char *s)
{
    return fileio_write_atomic(path, s, strlen(s), NULL);
}

static int files_equal(const char *a, const char *b)
{
    char *x, *y;
    size_t nx, ny;
    if (fileio_read_all(a, &x, &nx, NULL))
        return 0;
    if (fileio_read_all(b, &y, &ny, NULL)) {
        qs_free(x);
        return 0;
    }
    int eq = nx == ny && memcmp(x, y, nx) == 0;
    qs_free(x);
    qs_free(y);
    return eq;
}

TEST(shards, round_trip_both_widths)
{
    int32_t tok[1000];
    for (int i = 0; i < 1000; i++)
        tok[i] = (i * 7919) % 65536;
    char p[512];
    qs_diag d = {0};
    for (int width = 2; width <= 4; width += 2) {
        tmp_path(p, sizeof p, width == 2 ? "w2.qst" : "w4.qst");
        if (width == 4)
            tok[3] = 150000; /* only representable with 4 bytes */
        ASSERT_OK(shard_write(p, tok, 1000, width, 0x1234, 5, &d), &d);
        shard_header h;
        int32_t *back;
        uint64_t want_hash = 0x1234;
        ASSERT_OK(shard_read(p, &want_hash, &h, &back, &d), &d);
        ASSERT_EQ_INT(h.n_tokens, 1000);
        ASSERT_EQ_INT(h.token_bytes, width);
        ASSERT_EQ_INT(h.n_docs, 5);
        ASSERT_TRUE(memcmp(back, tok, sizeof tok) == 0);
        qs_free(back);
    }
    /* a 2-byte shard cannot hold id 150000 */
    ASSERT_EQ_INT(shard_write(p, tok, 1000, 2, 1, 1, &d), QS_ERANGE);
}

TEST(shards, hash_mismatch_is_refused)
{
    int32_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    char p[512];
    qs_diag d = {0};
    tmp_path(p, sizeof p, "hash.qst");
    ASSERT_OK(shard_write(p, tok, 10, 2, 0xAAAA, 1, &d), &d);
    shard_header h;
    int32_t *back;
    uint64_t other = 0xBBBB;
    ASSERT_EQ_INT(shard_read(p, &other, &h, &back, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "differs from the model's") != NULL);
    ASSERT_TRUE(back == NULL);
}

/* Write a good shard, damage a copy with `damage`, expect `code` from shard_read. */
static int damaged_read(const char *name, size_t cut, long flip_at, int patch_version)
{
    int32_t tok[4096];
    for (int i = 0; i < 4096; i++)
        tok[i] = (i * 31) % 1000;
    char p[512];
    tmp_path(p, sizeof p, name);
    qs_diag d = {0};
    if (shard_write(p, tok, 4096, 2, 7, 1, &d))
        return 999;
    char *data;
    size_t n;
    if (fileio_read_all(p, &data, &n, &d))
        return 999;
    if (cut && cut < n)
        n = cut;
    if (flip_at >= 0 && (size_t)flip_at < n)
        data[flip_at] ^= 0x5A;
    if (patch_version)
        data[8] = 2;
    fileio_write_atomic(p, data, n, &d);
    qs_free(data);
    shard_header h;
    int32_t *back = NULL;
    int rc = shard_read(p, NULL, &h, &back, &d);
    qs_free(back);
    if (rc && (!d.msg[0] || !strstr(d.path, name)))
        return 998; /* every error names the file and says something */
    return rc;
}

TEST(shards, truncated_and_corrupt_files_are_errors)
{
    ASSERT_EQ_INT(damaged_read("cut_header.qst", 20, -1, 0), QS_ETRUNC);
    ASSERT_EQ_INT(damaged_read("cut_payload.qst", 200, -1, 0), QS_ETRUNC);
    ASSERT_EQ_INT(damaged_read("bad_magic.qst", 0, 0, 0), QS_EFORMAT);
    ASSERT_EQ_INT(damaged_read("flip_payload.qst", 0, 100, 0), QS_EFORMAT);
    ASSERT_EQ_INT(damaged_read("version2.qst", 0, -1, 1), QS_EUNSUPPORTED);
    ASSERT_EQ_INT(damaged_read("intact.qst", 0, -1, 0), 0);
}

static const char DOCS_TXT[] =
    "\xEF\xBB\xBFThe quick brown fox.\nIt jumps over the dog.\n\n\n"
    "Second document, one line.\r\n   \r\n"
    "Third: numbers 12 345 6789.\n\n"
    "Fourth\tdocument with tabs.\n";

static const char DOCS_JSONL[] =
    "{\"text\": \"json doc one\", \"id\": 1}\n"
    "\n"
    "{\"text\": \"json doc two\\nwith a newline\"}\n"
    "{\"text\": \"caf\\u00e9 three\"}\n";

static int build(const char *out_name, double val_fraction, uint64_t seed, uint64_t shard_tokens,
                 shard_build_summary *sum, qs_diag *d)
{
    char txt[512], jsonl[512], out[512];
    tmp_path(txt, sizeof txt, "docs.txt");
    tmp_path(jsonl, sizeof jsonl, "docs.jsonl");
    if (write_text(txt, DOCS_TXT) || write_text(jsonl, DOCS_JSONL))
        return -1;
    const char *inputs[2] = {txt, jsonl};
    shard_build_opts o;
    shard_build_opts_default(&o);
    o.val_fraction = val_fraction;
    o.seed = seed;
    o.shard_tokens = shard_tokens;
    return shard_build_run(TINY_TOK, inputs, 2, tmp_path(out, sizeof out, out_name), &o, sum, d);
}

TEST(shards, build_splits_documents_and_separates_them_with_eos)
{
    qs_diag d = {0};
    shard_build_summary sum;
    ASSERT_OK(build("b1", 0.0, 0, 1 << 20, &sum, &d), &d);
    ASSERT_EQ_INT(sum.n_docs, 7); /* 4 paragraphs + 3 JSON lines */
    ASSERT_EQ_INT(sum.val_tokens, 0);
    ASSERT_EQ_INT(sum.train_shards, 1);
    char p[512];
    tmp_path(p, sizeof p, "b1/train_000000.qst");
    shard_header h;
    int32_t *tok;
    ASSERT_OK(shard_read(p, NULL, &h, &tok, &d), &d);
    tokenizer *t;
    ASSERT_OK(tokenizer_create(&t, TINY_TOK, &d), &d);
    /* expected stream: for each document, BOS ids EOS */
    const char *docs[7] = {"The quick brown fox.\nIt jumps over the dog.",
                           "Second document, one line.",
                           "Third: numbers 12 345 6789.",
                           "Fourth\tdocument with tabs.",
                           "json doc one",
                           "json doc two\nwith a newline",
                           "caf\xC3\xA9 three"};
    size_t pos = 0;
    int ok = 1;
    for (int k = 0; k < 7; k++) {
        int32_t *ids;
        size_t n;
        ASSERT_OK(tokenizer_encode(t, docs[k], strlen(docs[k]), TOKENIZER_BOS_DEFAULT, &ids, &n,
                                   &d),
                  &d);
        ok &= pos + n + 1 <= h.n_tokens && memcmp(tok + pos, ids, n * sizeof *ids) == 0 &&
              tok[pos + n] == tokenizer_eos_id(t);
        pos += n + 1;
        qs_free(ids);
    }
    ASSERT_TRUE(ok);
    ASSERT_EQ_INT(pos, h.n_tokens);
    ASSERT_EQ_INT(h.n_docs, 7);
    ASSERT_TRUE(h.tokenizer_hash == tokenizer_hash(t));
    qs_free(tok);
    tokenizer_destroy(t);
}

TEST(shards, build_is_byte_for_byte_reproducible)
{
    qs_diag d = {0};
    shard_build_summary s1, s2;
    ASSERT_OK(build("r1", 0.3, 11, 64, &s1, &d), &d);
    ASSERT_OK(build("r2", 0.3, 11, 64, &s2, &d), &d);
    ASSERT_TRUE(s1.train_shards > 1); /* 64-token shards: several files */
    ASSERT_EQ_INT(s1.val_docs, 2);    /* round(0.3 * 7) */
    char a[512], b[512];
    ASSERT_TRUE(files_equal(tmp_path(a, sizeof a, "r1/manifest.json"),
                            tmp_path(b, sizeof b, "r2/manifest.json")));
    for (int i = 0; i < s1.train_shards; i++) {
        char na[64], nb[64];
        snprintf(na, sizeof na, "r1/train_%06d.qst", i);
        snprintf(nb, sizeof nb, "r2/train_%06d.qst", i);
        ASSERT_TRUE(files_equal(tmp_path(a, sizeof a, na), tmp_path(b, sizeof b, nb)));
    }
    ASSERT_TRUE(files_equal(tmp_path(a, sizeof a, "r1/val_000000.qst"),
                            tmp_path(b, sizeof b, "r2/val_000000.qst")));
    /* another seed picks other validation documents */
    shard_build_summary s3;
    ASSERT_OK(build("r3", 0.3, 12, 64, &s3, &d), &d);
    ASSERT_TRUE(!files_equal(tmp_path(a, sizeof a, "r1/val_000000.qst"),
                             tmp_path(b, sizeof b, "r3/val_000000.qst")));
}

/* files in dir whose name starts with prefix */
static int count_prefixed(const char *dir, const char *prefix)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(dp));)
        n += !strncmp(e->d_name, prefix, strlen(prefix));
    closedir(dp);
    return n;
}

/* Building into an earlier output replaces it whole: no stale shard beside the
 * new manifest (issue 16.8); a bad input leaves the earlier output as it was; a
 * directory holding anything else is refused and left untouched. */
TEST(shards, rebuild_replaces_an_earlier_output_and_refuses_foreign_files)
{
    qs_diag d = {0};
    shard_build_summary many, few;
    ASSERT_OK(build("re", 0.3, 11, 32, &many, &d), &d);   /* 32-token shards: several */
    ASSERT_OK(build("re", 0.0, 11, 1 << 20, &few, &d), &d);
    ASSERT_TRUE(many.train_shards > 1 && few.train_shards == 1);
    char dir[512], p[600];
    tmp_path(dir, sizeof dir, "re");
    ASSERT_EQ_INT(count_prefixed(dir, "train_"), 1);
    ASSERT_EQ_INT(count_prefixed(dir, "val_"), 0);
    shard_build_summary again;
    ASSERT_OK(build("re_ref", 0.0, 11, 1 << 20, &again, &d), &d);   /* same bytes as a fresh build */
    char a[600], b[600];
    ASSERT_TRUE(files_equal(tmp_path(a, sizeof a, "re/manifest.json"),
                            tmp_path(b, sizeof b, "re_ref/manifest.json")));

    /* a bad input: the earlier output stays complete */
    tmp_path(p, sizeof p, "re_bad.jsonl");
    ASSERT_OK(write_text(p, "{\"body\": 1}\n"), NULL);
    const char *inputs[1] = {p};
    shard_build_opts o;
    shard_build_opts_default(&o);
    ASSERT_EQ_INT(shard_build_run(TINY_TOK, inputs, 1, dir, &o, &again, &d), QS_EFORMAT);
    ASSERT_TRUE(fileio_exists(tmp_path(a, sizeof a, "re/manifest.json")));
    ASSERT_TRUE(fileio_exists(tmp_path(a, sizeof a, "re/train_000000.qst")));

    /* something else in the directory: refused, nothing removed */
    ASSERT_OK(write_text(tmp_path(p, sizeof p, "re/notes.txt"), "mine\n"), NULL);
    ASSERT_EQ_INT(build("re", 0.0, 11, 1 << 20, &again, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "not an earlier shard output (found 'notes.txt')") != NULL);
    ASSERT_TRUE(fileio_exists(tmp_path(a, sizeof a, "re/manifest.json")));
    ASSERT_TRUE(fileio_exists(p));
}

TEST(shards, bad_jsonl_line_is_reported_with_its_number)
{
    char p[512], out[512];
    tmp_path(p, sizeof p, "bad.jsonl");
    ASSERT_OK(write_text(p, "{\"text\": \"ok\"}\n{\"body\": \"no text\"}\n"), NULL);
    const char *inputs[1] = {p};
    shard_build_opts o;
    shard_build_opts_default(&o);
    shard_build_summary sum;
    qs_diag d = {0};
    ASSERT_EQ_INT(shard_build_run(TINY_TOK, inputs, 1, tmp_path(out, sizeof out, "shards_badjsonl"), &o, &sum,
                                  &d),
                  QS_EFORMAT);
    ASSERT_EQ_INT(d.line, 2);
    ASSERT_TRUE(strstr(d.msg, "$.text") != NULL);
    ASSERT_TRUE(!fileio_exists(tmp_path(out, sizeof out, "shards_badjsonl/manifest.json")));
    ASSERT_OK(write_text(p, "{\"text\": \"ok\"}\n{\"text\": \"cut"), NULL);
    ASSERT_EQ_INT(shard_build_run(TINY_TOK, inputs, 1, tmp_path(out, sizeof out, "shards_badjsonl"), &o, &sum,
                                  &d),
                  QS_EFORMAT);
    ASSERT_EQ_INT(d.line, 2);
    tmp_path(p, sizeof p, "data.csv");
    ASSERT_OK(write_text(p, "a,b\n"), NULL);
    ASSERT_EQ_INT(shard_build_run(TINY_TOK, inputs, 1, tmp_path(out, sizeof out, "shards_badjsonl"), &o, &sum,
                                  &d),
                  QS_EINVAL);
}

#ifdef _OPENMP
#include <omp.h>
#endif

/* Documents are tokenized in parallel: the files must not depend on the thread count. */
TEST(shards, output_does_not_depend_on_thread_count)
{
#ifndef _OPENMP
    SKIP("built without OpenMP");
#else
    int saved = omp_get_max_threads();
    qs_diag d = {0};
    shard_build_summary s1, s4;
    omp_set_num_threads(1);
    int rc1 = build("t1", 0.3, 5, 32, &s1, &d);
    omp_set_num_threads(4);
    int rc4 = build("t4", 0.3, 5, 32, &s4, &d);
    omp_set_num_threads(saved);
    ASSERT_EQ_INT(rc1, 0);
    ASSERT_EQ_INT(rc4, 0);
    ASSERT_EQ_INT(s1.train_shards, s4.train_shards);
    char a[512], b[512];
    ASSERT_TRUE(files_equal(tmp_path(a, sizeof a, "t1/manifest.json"),
                            tmp_path(b, sizeof b, "t4/manifest.json")));
    for (int i = 0; i < s1.train_shards; i++) {
        char na[64], nb[64];
        snprintf(na, sizeof na, "t1/train_%06d.qst", i);
        snprintf(nb, sizeof nb, "t4/train_%06d.qst", i);
        ASSERT_TRUE(files_equal(tmp_path(a, sizeof a, na), tmp_path(b, sizeof b, nb)));
    }
#endif
}

/* Whichever allocation fails, the build reports it and leaves no shard without
 * its manifest (a full disk mid-build left train_000000.qst alone): the output
 * directory it made is gone. */
TEST(shards, a_failed_build_leaves_no_partial_output)
{
    char txt[512], jsonl[512], out[512];
    tmp_path(txt, sizeof txt, "oom_docs.txt");
    tmp_path(jsonl, sizeof jsonl, "oom_docs.jsonl");
    ASSERT_EQ_INT(write_text(txt, DOCS_TXT) | write_text(jsonl, DOCS_JSONL), 0);
    const char *inputs[2] = {txt, jsonl};
    shard_build_opts o;
    shard_build_opts_default(&o);
    o.val_fraction = 0.3;
    o.seed = 1;
    o.shard_tokens = 8;   /* several shards per split */
    int failures = 0;
    for (long n = 1; n < 100000; n++) {
        qs_diag d = {0};
        shard_build_summary sum;
        char name[64];
        snprintf(name, sizeof name, "oom_%ld", n);
        tmp_path(out, sizeof out, name);
        qs_mem_fail_after(n);
        int rc = shard_build_run(TINY_TOK, inputs, 2, out, &o, &sum, &d);
        qs_mem_fail_after(0);
        if (!rc) {   /* past the build's last allocation */
            char man[600];
            snprintf(man, sizeof man, "%s/manifest.json", out);
            ASSERT_TRUE(fileio_exists(man) && sum.train_shards > 1);
            break;
        }
        failures++;
        if (!d.msg[0] || fileio_exists(out))
            fprintf(stderr, "    allocation %ld: rc %d '%s'\n", n, rc, d.msg);
        ASSERT_TRUE(d.msg[0] != 0);
        ASSERT_TRUE(!fileio_exists(out));
    }
    ASSERT_TRUE(failures > 10);
}
