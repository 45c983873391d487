/* test_safetensors.c: the loader rejects every hand-made broken file in
 * tests/data/safetensors/ (tools/gen_bad_safetensors.py) with exactly the
 * one-line error in NAME.err; the writer round-trips; conversions are exact. */
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "qs/digest.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/safetensors.h"
#include "test.h"

#define ST_DATA "tests/data/safetensors"

/* Returns the diag line for path (opening, then converting every tensor). */
static void st_error_line(const char *path, char *line, size_t n)
{
    safetensors_file f;
    qs_diag d = {0};
    line[0] = 0;
    if (safetensors_open(&f, path, &d)) {
        diag_format(&d, line, n);
        return;
    }
    for (int i = 0; i < f.n_tensors && !line[0]; i++) {
        float *buf = qs_malloc(f.tensors[i].n_elems * 4 + 4);
        if (buf && safetensors_tensor_to_f32(&f.tensors[i], buf, path, &d))
            diag_format(&d, line, n);
        qs_free(buf);
    }
    safetensors_close(&f);
}

TEST(safetensors, every_broken_file_gives_its_one_line_error)
{
    DIR *dir = opendir(ST_DATA);
    ASSERT_TRUE(dir != NULL);
    struct dirent *e;
    int n_cases = 0, n_bad = 0;
    while ((e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".err"))
            continue;
        char err_path[512], st_path[512], line[1200];
        snprintf(err_path, sizeof err_path, "%s/%s", ST_DATA, e->d_name);
        snprintf(st_path, sizeof st_path, "%s/%.*s.safetensors", ST_DATA, (int)(len - 4), e->d_name);
        char *want = NULL;
        size_t wn = 0;
        qs_diag d = {0};
        if (fileio_read_all(err_path, &want, &wn, &d))
            continue;
        while (wn && (want[wn - 1] == '\n' || want[wn - 1] == '\r'))
            want[--wn] = 0;
        st_error_line(st_path, line, sizeof line);
        if (strcmp(line, want)) {
            fprintf(stderr, "    %s:\n      want: %s\n      got:  %s\n", st_path, want, line);
            n_bad++;
        }
        qs_free(want);
        n_cases++;
    }
    closedir(dir);
    ASSERT_TRUE(n_cases >= 15);
    ASSERT_EQ_INT(n_bad, 0);
}

TEST(safetensors, missing_file_names_the_path)
{
    safetensors_file f;
    qs_diag d = {0};
    ASSERT_EQ_INT(safetensors_open(&f, ST_DATA "/no_such.safetensors", &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.path, "no_such.safetensors") != NULL);
}

TEST(safetensors, writer_round_trips_f32_and_bf16)
{
    float a[6] = {1.0f, -2.5f, 3.14159274f, 1e-3f, 65504.0f, -0.0f}, b[3] = {7, 8, 9};
    safetensors_entry e[2] = {{"layer.a", a, 2, {2, 3}}, {"b", b, 1, {3}}};
    const char *meta[] = {"format", "pt", NULL};
    char path[512];
    qs_diag d = {0};
    snprintf(path, sizeof path, "%s/rt.safetensors", test_tmp_dir());
    for (int dt = 0; dt < 2; dt++) {
        int dtype = dt ? SAFETENSORS_BF16 : SAFETENSORS_F32;
        ASSERT_OK(safetensors_write(path, e, 2, dtype, meta, &d), &d);
        safetensors_file f;
        ASSERT_OK(safetensors_open(&f, path, &d), &d);
        const safetensors_tensor *t = safetensors_find(&f, "layer.a");
        ASSERT_TRUE(t != NULL);
        ASSERT_EQ_INT(t->dtype, dtype);
        ASSERT_EQ_INT(t->shape[0], 2);
        ASSERT_EQ_INT(t->shape[1], 3);
        ASSERT_EQ_INT((uintptr_t)(t->data - f.map.data) % 8, 0);
        float out[6];
        ASSERT_OK(safetensors_tensor_to_f32(t, out, path, &d), &d);
        for (int i = 0; i < 6; i++) {
            float want = dt ? safetensors_bf16_to_f32(safetensors_f32_to_bf16(a[i])) : a[i];
            ASSERT_TRUE(memcmp(&out[i], &want, 4) == 0);
        }
        ASSERT_TRUE(safetensors_find(&f, "b") != NULL);
        safetensors_close(&f);
    }
}

/* Tensors are written back to back (Hugging Face's reader refuses a gap or bytes
 * after the last tensor): a 3-element bf16 tensor (6 bytes) is followed at once
 * by the next, and the file ends where the last tensor does.  The up to 7 bytes
 * of padding that qatscope wrote after a tensor before still load. */
TEST(safetensors, writer_leaves_no_gap_and_old_padding_still_loads)
{
    float a[3] = {1, 2, 3}, b[2] = {4, 5};
    safetensors_entry e[2] = {{"a", a, 1, {3}}, {"b", b, 1, {2}}};
    char path[512];
    qs_diag d = {0};
    snprintf(path, sizeof path, "%s/nogap.safetensors", test_tmp_dir());
    ASSERT_OK(safetensors_write(path, e, 2, SAFETENSORS_BF16, NULL, &d), &d);
    safetensors_file f;
    ASSERT_OK(safetensors_open(&f, path, &d), &d);
    const safetensors_tensor *ta = safetensors_find(&f, "a"), *tb = safetensors_find(&f, "b");
    ASSERT_TRUE(ta && tb);
    ASSERT_TRUE(tb->data == ta->data + 6);
    ASSERT_TRUE(tb->data + 4 == f.map.data + f.map.bytes);
    float out[2];
    ASSERT_OK(safetensors_tensor_to_f32(tb, out, path, &d), &d);
    ASSERT_TRUE(out[0] == 4 && out[1] == 5);
    safetensors_close(&f);

    /* the old layout: a [0, 6], 2 bytes of padding, b [8, 12], 4 bytes of padding */
    static const char hdr[] = "{\"a\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                              "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]}}";
    char buf[512] = {0};
    const size_t n = strlen(hdr);
    for (int i = 0; i < 8; i++)
        buf[i] = (char)((n >> (8 * i)) & 0xff);
    memcpy(buf + 8, hdr, n);
    snprintf(path, sizeof path, "%s/oldpad.safetensors", test_tmp_dir());
    ASSERT_OK(fileio_write_atomic(path, buf, 8 + n + 16, NULL), NULL);
    ASSERT_OK(safetensors_open(&f, path, &d), &d);
    safetensors_close(&f);
    /* padding to anything but the next 8-byte boundary is a gap */
    ASSERT_OK(fileio_write_atomic(path, buf, 8 + n + 17, NULL), NULL);
    ASSERT_EQ_INT(safetensors_open(&f, path, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "5 bytes after the end of the last tensor's data") != NULL);
}

/* An empty tensor at the offset where the next one starts does not overlap it
 * (safetensors' own writer lays out {"c": F32 [1], "z": F32 [0], "a": BF16 [1]}
 * as c [0, 4], z [4, 4], a [4, 6]); it was refused when its name sorted after
 * the other's.  A real overlap still is. */
TEST(safetensors, empty_tensor_at_the_next_ones_offset_is_no_overlap)
{
    static const char hdr[] = "{\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                              "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                              "\"a\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[4,6]}}";
    char path[512], buf[512];
    snprintf(path, sizeof path, "%s/empty_tensor.safetensors", test_tmp_dir());
    const size_t n = strlen(hdr);
    for (int bad = 0; bad < 2; bad++) {
        memset(buf, 0, sizeof buf);
        for (int i = 0; i < 8; i++)
            buf[i] = (char)((n >> (8 * i)) & 0xff);
        memcpy(buf + 8, hdr, n);
        if (bad)   /* a [3, 5]: overlaps c */
            memcpy(strstr(buf + 8, "[4,6]"), "[3,5]", 5);
        ASSERT_OK(fileio_write_atomic(path, buf, 8 + n + 6, NULL), NULL);
        safetensors_file f;
        qs_diag d = {0};
        if (!bad) {
            ASSERT_OK(safetensors_open(&f, path, &d), &d);
            ASSERT_TRUE(safetensors_find(&f, "z") && safetensors_find(&f, "z")->n_elems == 0);
            safetensors_close(&f);
        } else {
            ASSERT_EQ_INT(safetensors_open(&f, path, &d), QS_EFORMAT);
            ASSERT_TRUE(strstr(d.msg, "overlap") != NULL);
        }
    }
}

TEST(safetensors, bf16_rounds_to_nearest_even_and_f16_decodes_exactly)
{
    /* 1 + 2^-8 is halfway between bf16 1.0 and 1+2^-7: ties to even (1.0) */
    ASSERT_EQ_INT(safetensors_f32_to_bf16(1.00390625f), 0x3f80);
    ASSERT_EQ_INT(safetensors_f32_to_bf16(1.01171875f), 0x3f82);   /* 1+3*2^-8 -> up to even */
    ASSERT_EQ_INT(safetensors_f32_to_bf16(-2.0f), 0xc000);
    ASSERT_NEAR(safetensors_f16_to_f32(0x3c00), 1.0, 0);
    ASSERT_NEAR(safetensors_f16_to_f32(0xc000), -2.0, 0);
    ASSERT_NEAR(safetensors_f16_to_f32(0x7bff), 65504.0, 0);
    ASSERT_NEAR(safetensors_f16_to_f32(0x0001), ldexp(1.0, -24), 0);   /* smallest subnormal */
    ASSERT_NEAR(safetensors_f16_to_f32(0x03ff), 1023 * ldexp(1.0, -24), 0);
    ASSERT_TRUE(isinf(safetensors_f16_to_f32(0x7c00)));
    ASSERT_TRUE(isnan(safetensors_f16_to_f32(0x7e00)));
}

TEST(safetensors, sharded_index_with_missing_tensor_names_the_shard)
{
    char dir[512], path[600];
    qs_diag d = {0};
    snprintf(dir, sizeof dir, "%s/shard_bad", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    float x[2] = {1, 2};
    safetensors_entry e = {"a", x, 1, {2}};
    snprintf(path, sizeof path, "%s/s1.safetensors", dir);
    ASSERT_OK(safetensors_write(path, &e, 1, SAFETENSORS_F32, NULL, &d), &d);
    const char *idx = "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\"}}";
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    ASSERT_OK(fileio_write_atomic(path, idx, strlen(idx), &d), &d);
    safetensors_dir sd;
    ASSERT_EQ_INT(safetensors_dir_open(&sd, dir, &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.msg, "tensor 'b'") != NULL);
    ASSERT_TRUE(strstr(d.path, "s1.safetensors") != NULL);
    const char *escape = "{\"weight_map\": {\"a\": \"../s1.safetensors\"}}";
    ASSERT_OK(fileio_write_atomic(path, escape, strlen(escape), &d), &d);
    ASSERT_EQ_INT(safetensors_dir_open(&sd, dir, &d), QS_EFORMAT);
    /* "a" in two shards, the map naming s2's: it was read from s1 (opened first) */
    float y[2] = {3, 4};
    safetensors_entry e2[2] = {{"a", y, 1, {2}}, {"b", y, 1, {2}}};
    char p2[600];
    snprintf(p2, sizeof p2, "%s/s2.safetensors", dir);
    ASSERT_OK(safetensors_write(p2, e2, 2, SAFETENSORS_F32, NULL, &d), &d);
    const char *dup = "{\"weight_map\": {\"b\": \"s1.safetensors\", \"a\": \"s2.safetensors\"}}";
    ASSERT_OK(fileio_write_atomic(path, dup, strlen(dup), &d), &d);
    ASSERT_EQ_INT(safetensors_dir_open(&sd, dir, &d), QS_ENOTFOUND);   /* b is not in s1 */
    ASSERT_OK(safetensors_write(p2, e2, 1, SAFETENSORS_F32, NULL, &d), &d);
    snprintf(p2, sizeof p2, "%s/s1.safetensors", dir);
    safetensors_entry e1[2] = {{"a", x, 1, {2}}, {"b", x, 1, {2}}};
    ASSERT_OK(safetensors_write(p2, e1, 2, SAFETENSORS_F32, NULL, &d), &d);
    ASSERT_EQ_INT(safetensors_dir_open(&sd, dir, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.path, "model.safetensors.index.json") != NULL);
    ASSERT_EQ_STR(d.msg, "tensor 'a' is stored in two shards, s1.safetensors and s2.safetensors");
    const char *one = "{\"weight_map\": {\"b\": \"s1.safetensors\", \"a\": \"s1.safetensors\"}}";
    ASSERT_OK(fileio_write_atomic(path, one, strlen(one), &d), &d);
    ASSERT_OK(safetensors_dir_open(&sd, dir, &d), &d);
    safetensors_dir_close(&sd);
}

/* Regression-fuzz: 400 seeded corruptions (byte flips in the header, random
 * length fields, truncations) of a real checkpoint.  Each must load cleanly or
 * fail with a code and a message: never crash or read out of bounds (this
 * suite also runs under ASan + UBSan). */
TEST(safetensors, seeded_corruptions_fail_cleanly)
{
    char *orig;
    size_t n;
    qs_diag d = {0};
    ASSERT_OK(fileio_read_all("data/fixtures/llama_gqa_f32/model.safetensors", &orig, &n, &d), &d);
    ASSERT_TRUE(n > 64);
    size_t hdr = 0;
    for (int i = 7; i >= 0; i--)
        hdr = hdr << 8 | (unsigned char)orig[i];
    char *buf = qs_malloc(n);
    char path[512];
    snprintf(path, sizeof path, "%s/fuzz.safetensors", test_tmp_dir());
    uint64_t s = 12345;
    int n_fail = 0, bad_diag = 0;
    for (int it = 0; it < 400; it++) {
        memcpy(buf, orig, n);
        size_t len = n;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int kind = (int)(s >> 60) % 4;
        for (int k = 0; k < 1 + (int)((s >> 40) % 4); k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = 8 + (size_t)(s >> 33) % hdr;
            if (kind == 0)
                buf[at] = (char)(s >> 20);                       /* any byte */
            else if (kind == 1)
                buf[at] = "0123456789[]{},:\"-e"[(s >> 20) % 19];   /* JSON-ish byte */
            else if (kind == 2)
                buf[(s >> 20) % 8] = (char)(s >> 12);           /* header length */
            else
                len = (size_t)(s >> 20) % n;                    /* truncation */
        }
        ASSERT_OK(fileio_write_atomic(path, buf, len, &d), &d);
        char line[1200];
        safetensors_file f;
        qs_diag e = {0};
        if (safetensors_open(&f, path, &e)) {
            n_fail++;
            bad_diag += e.msg[0] == 0;
            continue;
        }
        safetensors_close(&f);
        st_error_line(path, line, sizeof line);   /* converts every tensor */
    }
    qs_free(buf);
    qs_free(orig);
    ASSERT_TRUE(n_fail > 100);
    ASSERT_EQ_INT(bad_diag, 0);
}

/* A file large enough for the hash cache is hashed as it is written and its
 * hash stored once it is in place: the first lookup after the commit hits, with
 * the hash of the bytes on disk, also after its directory is renamed (a
 * checkpoint written into a temp directory); a small file is not stored. */
TEST(safetensors, large_file_hash_recorded_while_writing)
{
    char cache[600], dir[600], moved[600], path[700], hex[65], ref[65];
    snprintf(cache, sizeof cache, "%s/st_hash_cache/sha256.tsv", test_tmp_dir());
    remove(cache);
    char *saved = test_env_set("QS_HASH_CACHE", cache);
    snprintf(dir, sizeof dir, "%s/st_hash_tmp", test_tmp_dir());
    snprintf(moved, sizeof moved, "%s/st_hash_final", test_tmp_dir());
    snprintf(path, sizeof path, "%s/st_hash_final/model.safetensors", test_tmp_dir());
    remove(path);
    rmdir(moved);
    qs_diag d = {0};
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    /* 2 tensors, BF16 then F32, 2^25 + 3 values: ~96 MB, past DIGEST_CACHE_MIN_BYTES */
    const size_t n0 = (size_t)1 << 24, n1 = ((size_t)1 << 24) + 3, piece = 1 << 16;
    safetensors_entry e[2] = {{"a", NULL, 1, {(int64_t)n0}}, {"b", NULL, 1, {(int64_t)n1}}};
    int dt[2] = {SAFETENSORS_BF16, SAFETENSORS_F32};
    float *buf = qs_malloc(piece * sizeof *buf);
    ASSERT_TRUE(buf != NULL);
    safetensors_stream *s;
    char p0[700];
    snprintf(p0, sizeof p0, "%s/model.safetensors", dir);
    ASSERT_OK(safetensors_stream_create_mixed(&s, p0, e, dt, 2, NULL, &d), &d);
    for (size_t done = 0; done < n0 + n1;) {
        size_t k = n0 + n1 - done < piece ? n0 + n1 - done : piece;
        for (size_t i = 0; i < k; i++)
            buf[i] = (float)((done + i) % 1000) * 0.001f - 0.5f;
        ASSERT_OK(safetensors_stream_append(s, buf, k, &d), &d);
        done += k;
    }
    qs_free(buf);
    ASSERT_OK(safetensors_stream_commit(s, &d), &d);
    ASSERT_OK(digest_sha256_file(p0, ref, &d), &d);
    ASSERT_TRUE(digest_cache_lookup(p0, hex) == 1);
    ASSERT_EQ_STR(hex, ref);
    ASSERT_TRUE(rename(dir, moved) == 0);
    ASSERT_TRUE(digest_cache_lookup(path, hex) == 1);
    ASSERT_EQ_STR(hex, ref);
    remove(path);
    /* small: not hashed, not stored */
    float v[4] = {1, 2, 3, 4};
    safetensors_entry small = {"v", v, 1, {4}};
    ASSERT_OK(safetensors_write(path, &small, 1, SAFETENSORS_F32, NULL, &d), &d);
    ASSERT_TRUE(digest_cache_lookup(path, hex) == 0);
    remove(path);
    rmdir(moved);
    test_env_restore("QS_HASH_CACHE", saved);
}
