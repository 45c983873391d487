/* test_trainstate.c: train_state.bin round trip and rejection of damaged files. */
#include <stdio.h>
#include <string.h>

#include "qs/bytes.h"
#include "qs/digest.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/trainstate.h"
#include "test.h"

static int ts_write(const char *path)
{
    qs_diag d = {0};
    trainstate_writer w;
    float m[5] = {1, 2, 3, 4, 5};
    if (trainstate_write_begin(&w, path, 2, &d))
        return -1;
    if (trainstate_write_section(&w, "meta", "{\"step\":3}", 10, &d) ||
        trainstate_write_section(&w, "adam_m", m, sizeof m, &d)) {
        trainstate_write_abort(&w);
        return -1;
    }
    return trainstate_write_commit(&w, &d);
}

/* A state of "meta" and one large "adam_m" (70 MiB + 12 bytes: two 64 MiB
 * pieces and a ragged end) at path; returns its floats (qs_free), NULL on failure. */
#define TS_BIG_FLOATS ((size_t)(70u << 20) / 4 + 3)
static float *ts_write_big(const char *path)
{
    float *big = qs_malloc(TS_BIG_FLOATS * sizeof *big);
    if (!big)
        return NULL;
    for (size_t i = 0; i < TS_BIG_FLOATS; i++)
        big[i] = (float)(i % 1000003) * 0.25f;
    qs_diag d = {0};
    trainstate_writer w;
    if (trainstate_write_begin(&w, path, 2, &d))
        goto fail;
    if (trainstate_write_section(&w, "meta", "{}", 2, &d) ||
        trainstate_write_section(&w, "adam_m", big, TS_BIG_FLOATS * sizeof *big, &d)) {
        trainstate_write_abort(&w);
        goto fail;
    }
    if (!trainstate_write_commit(&w, &d))
        return big;
fail:
    qs_free(big);
    return NULL;
}

TEST(trainstate, sections_round_trip)
{
    char path[512];
    snprintf(path, sizeof path, "%s/ts_ok.bin", test_tmp_dir());
    ASSERT_EQ_INT(ts_write(path), 0);
    trainstate_reader r;
    qs_diag d = {0};
    ASSERT_OK(trainstate_open(&r, path, &d), &d);
    const void *p;
    size_t n;
    ASSERT_OK(trainstate_section(&r, "adam_m", &p, &n, &d), &d);
    ASSERT_EQ_INT(n, 20);
    float last;
    memcpy(&last, (const char *)p + 16, sizeof last); /* payloads are not aligned */
    ASSERT_NEAR(last, 5.0, 0);
    ASSERT_OK(trainstate_section(&r, "meta", &p, &n, &d), &d);
    ASSERT_TRUE(n == 10 && !memcmp(p, "{\"step\":3}", 10));
    ASSERT_EQ_INT(trainstate_section(&r, "adam_v", &p, &n, &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.msg, "adam_v") != NULL);
    trainstate_close(&r);
}

static int ts_damage(const char *src, const char *dst, long cut, long flip)
{
    char *buf;
    size_t n;
    qs_diag d = {0};
    if (fileio_read_all(src, &buf, &n, &d))
        return -1;
    if (flip >= 0)
        buf[flip] ^= 0x40;
    size_t keep = cut >= 0 ? (size_t)cut : n;
    int rc = fileio_write_atomic(dst, buf, keep, &d);
    qs_free(buf);
    return rc;
}

TEST(trainstate, truncated_or_corrupt_file_is_refused_by_name)
{
    char ok[512], bad[512];
    snprintf(ok, sizeof ok, "%s/ts_src.bin", test_tmp_dir());
    snprintf(bad, sizeof bad, "%s/ts_bad.bin", test_tmp_dir());
    ASSERT_EQ_INT(ts_write(ok), 0);
    trainstate_reader r;
    qs_diag d = {0};
    ASSERT_EQ_INT(ts_damage(ok, bad, 60, -1), 0);
    ASSERT_EQ_INT(trainstate_open(&r, bad, &d), QS_ETRUNC);
    ASSERT_EQ_STR(d.path, bad);
    ASSERT_EQ_INT(ts_damage(ok, bad, -1, 95), 0);  /* inside adam_m's payload (starts at 90) */
    ASSERT_EQ_INT(trainstate_open(&r, bad, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "checksum") != NULL);
    ASSERT_EQ_INT(ts_damage(ok, bad, -1, 0), 0);
    ASSERT_EQ_INT(trainstate_open(&r, bad, &d), QS_EFORMAT);
    ASSERT_EQ_INT(ts_damage(ok, bad, -1, 8), 0);   /* version 3 -> 67 */
    ASSERT_EQ_INT(trainstate_open(&r, bad, &d), QS_EUNSUPPORTED);
}

/* trainstate_open_only checks the checksums of the named sections alone (eval
 * reads meta and the amax histories of a state whose optimizer moments are
 * GBs); a damaged section it names, a truncation or a bad header still refuse
 * the file. */
TEST(trainstate, open_only_checks_the_named_sections)
{
    char ok[512], bad[512];
    snprintf(ok, sizeof ok, "%s/ts_only_src.bin", test_tmp_dir());
    snprintf(bad, sizeof bad, "%s/ts_only_bad.bin", test_tmp_dir());
    ASSERT_EQ_INT(ts_write(ok), 0);
    static const char *const meta[] = {"meta", NULL}, *const moments[] = {"adam_m", NULL};
    trainstate_reader r;
    qs_diag d = {0};
    const void *p;
    size_t n;
    ASSERT_EQ_INT(ts_damage(ok, bad, -1, 95), 0);   /* adam_m's payload */
    ASSERT_OK(trainstate_open_only(&r, bad, meta, &d), &d);
    ASSERT_OK(trainstate_section(&r, "meta", &p, &n, &d), &d);
    ASSERT_TRUE(n == 10 && !memcmp(p, "{\"step\":3}", 10));
    trainstate_close(&r);
    ASSERT_EQ_INT(trainstate_open_only(&r, bad, moments, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "'adam_m': checksum") != NULL);
    ASSERT_EQ_INT(trainstate_open(&r, bad, &d), QS_EFORMAT);
    ASSERT_EQ_INT(ts_damage(ok, bad, -1, 50), 0);   /* meta's payload (48..57) */
    ASSERT_EQ_INT(trainstate_open_only(&r, bad, meta, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "'meta': checksum") != NULL);
    ASSERT_OK(trainstate_open_only(&r, bad, moments, &d), &d);
    trainstate_close(&r);
    ASSERT_EQ_INT(ts_damage(ok, bad, 100, -1), 0);   /* adam_m cut short */
    ASSERT_EQ_INT(trainstate_open_only(&r, bad, meta, &d), QS_ETRUNC);
    ASSERT_EQ_STR(d.path, bad);
    ASSERT_EQ_INT(ts_damage(ok, bad, -1, 0), 0);
    ASSERT_EQ_INT(trainstate_open_only(&r, bad, meta, &d), QS_EFORMAT);
}

/* versions 1 (before the log-state sections) and 2 (FNV-1a checksums) are
 * still read, their checksums checked the old way; a newer one is refused with
 * its number */
TEST(trainstate, versions_1_and_2_are_read_and_newer_versions_are_refused)
{
    char ok[512], other[512];
    snprintf(ok, sizeof ok, "%s/ts_v.bin", test_tmp_dir());
    snprintf(other, sizeof other, "%s/ts_v_other.bin", test_tmp_dir());
    ASSERT_EQ_INT(ts_write(ok), 0);
    trainstate_reader r;
    qs_diag d = {0};
    ASSERT_OK(trainstate_open(&r, ok, &d), &d);
    ASSERT_EQ_INT(r.version, TRAINSTATE_VERSION);
    ASSERT_EQ_INT(TRAINSTATE_VERSION, 3);
    trainstate_close(&r);
    char *buf;
    size_t n;
    ASSERT_OK(fileio_read_all(ok, &buf, &n, &d), &d);
    unsigned char *u = (unsigned char *)buf;
    for (uint32_t v = 1; v <= 2; v++) {
        test_trainstate_relabel(u, v);
        ASSERT_OK(fileio_write_atomic(other, buf, n, &d), &d);
        ASSERT_OK(trainstate_open(&r, other, &d), &d);
        ASSERT_EQ_INT(r.version, (int)v);
        trainstate_close(&r);
        /* the old checksums under the new version number: refused */
        bytes_put_u32le(u + 8, 3);
        ASSERT_OK(fileio_write_atomic(other, buf, n, &d), &d);
        ASSERT_EQ_INT(trainstate_open(&r, other, &d), QS_EFORMAT);
        ASSERT_TRUE(strstr(d.msg, "checksum mismatch") != NULL);
    }
    test_trainstate_relabel(u, 3);   /* back to the file as written */
    ASSERT_OK(fileio_write_atomic(other, buf, n, &d), &d);
    ASSERT_OK(trainstate_open(&r, other, &d), &d);
    trainstate_close(&r);
    u[8] = 4;
    ASSERT_OK(fileio_write_atomic(other, buf, n, &d), &d);
    ASSERT_EQ_INT(trainstate_open(&r, other, &d), QS_EUNSUPPORTED);
    ASSERT_TRUE(strstr(d.msg, "version 4") && strstr(d.msg, "newer"));
    u[8] = 0;
    ASSERT_OK(fileio_write_atomic(other, buf, n, &d), &d);
    ASSERT_EQ_INT(trainstate_open(&r, other, &d), QS_EUNSUPPORTED);
    qs_free(buf);
}

/* A section written in pieces (ZeRO-1 moments gathered from the ranks) is the
 * file one write_section makes; pieces that miss the declared size are refused. */
TEST(trainstate, streamed_section_equals_one_write)
{
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/ts_ok.bin", test_tmp_dir());
    snprintf(b, sizeof b, "%s/ts_streamed.bin", test_tmp_dir());
    ASSERT_EQ_INT(ts_write(a), 0);
    qs_diag d = {0};
    trainstate_writer w;
    float m[5] = {1, 2, 3, 4, 5};
    ASSERT_OK(trainstate_write_begin(&w, b, 2, &d), &d);
    ASSERT_OK(trainstate_write_section(&w, "meta", "{\"step\":3}", 10, &d), &d);
    ASSERT_OK(trainstate_write_section_begin(&w, "adam_m", sizeof m, &d), &d);
    ASSERT_OK(trainstate_write_section_part(&w, m, 8, &d), &d);
    ASSERT_OK(trainstate_write_section_part(&w, m + 2, 12, &d), &d);
    ASSERT_OK(trainstate_write_section_end(&w, &d), &d);
    ASSERT_OK(trainstate_write_commit(&w, &d), &d);
    char *x, *y;
    size_t nx, ny;
    ASSERT_OK(fileio_read_all(a, &x, &nx, &d), &d);
    ASSERT_OK(fileio_read_all(b, &y, &ny, &d), &d);
    int eq = nx == ny && !memcmp(x, y, nx);
    qs_free(x);
    qs_free(y);
    ASSERT_TRUE(eq);
    ASSERT_OK(trainstate_write_begin(&w, b, 1, &d), &d);
    ASSERT_OK(trainstate_write_section_begin(&w, "adam_m", sizeof m, &d), &d);
    ASSERT_OK(trainstate_write_section_part(&w, m, 8, &d), &d);
    ASSERT_EQ_INT(trainstate_write_section_part(&w, m, 16, &d), QS_EINVAL);
    ASSERT_EQ_INT(trainstate_write_section_end(&w, &d), QS_ETRUNC);
    trainstate_write_abort(&w);
}

/* A section larger than the reader's 64 MiB pieces, read the resident-set-
 * friendly way (pages released after the checksum and after the copy): the
 * copy holds every byte, and the mapping still reads them after a release. */
TEST(trainstate, large_section_is_copied_out_exactly_after_its_pages_are_released)
{
    char path[512];
    snprintf(path, sizeof path, "%s/ts_large.bin", test_tmp_dir());
    size_t n_floats = TS_BIG_FLOATS;
    float *big = ts_write_big(path), *back = qs_malloc(n_floats * sizeof *back);
    ASSERT_TRUE(big && back);
    qs_diag d = {0};
    trainstate_reader r;
    ASSERT_OK(trainstate_open(&r, path, &d), &d);
    const void *p;
    size_t n;
    ASSERT_OK(trainstate_section(&r, "adam_m", &p, &n, &d), &d);
    ASSERT_EQ_INT(n, n_floats * sizeof(float));
    trainstate_copy_out(&r, back, p, n);
    ASSERT_TRUE(memcmp(big, back, n) == 0);
    fileio_map_release(&r.map, r.map.data, r.map.bytes);
    ASSERT_TRUE(memcmp(big, p, n) == 0);   /* read again from the file */
    trainstate_close(&r);
    qs_free(big);
    qs_free(back);
}

/* Files written by an independent implementation (tools/gen_fuzz_corpus.py, its
 * own FNV-1a and lanes64): each version's checksums check; version 3's label on
 * version 2's checksums does not. */
TEST(trainstate, files_of_the_python_writer_check_in_every_version)
{
    static const char *const ok[] = {"valid_v1.bin", "valid_v2.bin", "valid_v3.bin"};
    char path[300];
    trainstate_reader r;
    qs_diag d = {0};
    for (int v = 0; v < 3; v++) {
        snprintf(path, sizeof path, "tests/fuzz/corpus/trainstate/%s", ok[v]);
        ASSERT_OK(trainstate_open(&r, path, &d), &d);
        ASSERT_EQ_INT(r.version, v + 1);
        trainstate_close(&r);
    }
    ASSERT_EQ_INT(trainstate_open(&r, "tests/fuzz/corpus/trainstate/v3_with_v2_checksums.bin", &d),
                  QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "section 'meta': checksum mismatch") != NULL);
}

/* trainstate_read_checked: one pass that checks a section unchecked by
 * trainstate_open_only and copies any range of it (a rank's ZeRO-1 part): the
 * bytes of every range, across two pieces and a ragged end; a damaged byte
 * outside the copied range still fails the check; the version 2 checksum
 * (FNV-1a) on a version 2 file; a range outside the payload. */
TEST(trainstate, read_checked_copies_any_range_and_checks_the_whole_section)
{
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/ts_rc.bin", test_tmp_dir());
    snprintf(bad, sizeof bad, "%s/ts_rc_bad.bin", test_tmp_dir());
    size_t nb = TS_BIG_FLOATS * sizeof(float);
    float *big = ts_write_big(path), *back = qs_malloc(nb);
    ASSERT_TRUE(big && back);
    qs_diag d = {0};
    static const char *const meta_only[] = {"meta", NULL};
    const size_t ranges[][2] = {{0, 0}, {0, 0}, {4, 20}, {(64u << 20) - 8, 16}, {nb - 5, 5}};
    for (int k = 0; k < 5; k++) {
        size_t first = ranges[k][0], len = k == 0 ? nb : ranges[k][1];
        trainstate_reader r;
        ASSERT_OK(trainstate_open_only(&r, path, meta_only, &d), &d);
        memset(back, 0xAB, nb);
        ASSERT_OK(trainstate_read_checked(&r, "adam_m", first, back, len, &d), &d);
        ASSERT_TRUE(memcmp(back, (const unsigned char *)big + first, len) == 0);
        ASSERT_TRUE(len == nb || ((unsigned char *)back)[len] == 0xAB);   /* nothing past it */
        ASSERT_EQ_INT(trainstate_read_checked(&r, "adam_m", nb - 3, back, 4, &d), QS_ERANGE);
        ASSERT_EQ_INT(trainstate_read_checked(&r, "adam_v", 0, back, 0, &d), QS_ENOTFOUND);
        trainstate_close(&r);
    }
    /* a byte near the end damaged; only the first 20 bytes are copied */
    char *buf;
    size_t fn;
    ASSERT_OK(fileio_read_all(path, &buf, &fn, &d), &d);
    buf[fn - 100] ^= 0x10;
    ASSERT_OK(fileio_write_atomic(bad, buf, fn, &d), &d);
    trainstate_reader r;
    ASSERT_OK(trainstate_open_only(&r, bad, meta_only, &d), &d);
    ASSERT_EQ_INT(trainstate_read_checked(&r, "adam_m", 0, back, 20, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "section 'adam_m': checksum mismatch") != NULL);
    ASSERT_EQ_STR(d.path, bad);
    trainstate_close(&r);
    /* version 2: FNV-1a */
    buf[fn - 100] ^= 0x10;
    test_trainstate_relabel((unsigned char *)buf, 2);
    ASSERT_OK(fileio_write_atomic(bad, buf, fn, &d), &d);
    ASSERT_OK(trainstate_open_only(&r, bad, meta_only, &d), &d);
    ASSERT_EQ_INT(r.version, 2);
    ASSERT_OK(trainstate_read_checked(&r, "adam_m", 8, back, 12, &d), &d);
    ASSERT_TRUE(memcmp(back, (const unsigned char *)big + 8, 12) == 0);
    trainstate_close(&r);
    buf[fn - 100] ^= 0x10;
    ASSERT_OK(fileio_write_atomic(bad, buf, fn, &d), &d);
    ASSERT_OK(trainstate_open_only(&r, bad, meta_only, &d), &d);
    ASSERT_EQ_INT(trainstate_read_checked(&r, "adam_m", 8, back, 12, &d), QS_EFORMAT);
    trainstate_close(&r);
    qs_free(buf);
    qs_free(big);
    qs_free(back);
}
