/* test_zlog.c: zstd JSON-lines log round trip and truncation detection. */
#include <stdio.h>
#include <stdlib.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/zlog.h"
#include "test.h"

static int write_records(const char *path, int n, int flags, int flush_every)
{
    qs_diag d = {0};
    zlog_writer *w;
    if (zlog_writer_create(&w, path, flags, &d))
        return -1;
    for (int i = 0; i < n; i++) {
        char line[64];
        int len = snprintf(line, sizeof line, "{\"step\":%d}", i);
        if (zlog_write(w, line, (size_t)len, &d))
            return -1;
        if ((i + 1) % flush_every == 0 && zlog_flush(w, &d))
            return -1;
    }
    return zlog_close(w, &d);
}

/* reads all records, checks they are {"step":0..}, returns count or -1; *rc_end gets the final code */
static int read_records(const char *path, int *rc_end)
{
    qs_diag d = {0};
    zlog_reader *r;
    if (zlog_reader_create(&r, path, &d))
        return -1;
    const char *line;
    size_t len;
    int n = 0, rc;
    while ((rc = zlog_next(r, &line, &len, NULL, &d)) == 1) {
        char want[64];
        snprintf(want, sizeof want, "{\"step\":%d}", n);
        if (strcmp(line, want) != 0) {
            zlog_reader_destroy(r);
            return -1;
        }
        n++;
    }
    *rc_end = rc;
    zlog_reader_destroy(r);
    return n;
}

TEST(zlog, roundtrip_compressed_frames)
{
    char path[512];
    snprintf(path, sizeof path, "%s/a.jsonl.zst", test_tmp_dir());
    ASSERT_EQ_INT(write_records(path, 1000, ZLOG_TRUNCATE, 7), 0);
    int rc;
    ASSERT_EQ_INT(read_records(path, &rc), 1000);
    ASSERT_EQ_INT(rc, 0);
}

TEST(zlog, roundtrip_plain_and_atomic)
{
    char path[512];
    snprintf(path, sizeof path, "%s/b.jsonl", test_tmp_dir());
    ASSERT_EQ_INT(write_records(path, 50, ZLOG_PLAIN | ZLOG_ATOMIC, 1000), 0);
    int rc;
    ASSERT_EQ_INT(read_records(path, &rc), 50);
    ASSERT_EQ_INT(rc, 0);
}

TEST(zlog, append_adds_frames)
{
    char path[512];
    snprintf(path, sizeof path, "%s/c.jsonl.zst", test_tmp_dir());
    ASSERT_EQ_INT(write_records(path, 10, ZLOG_TRUNCATE, 1), 0);
    qs_diag d = {0};
    zlog_writer *w;
    ASSERT_OK(zlog_writer_create(&w, path, ZLOG_APPEND, &d), &d);
    ASSERT_OK(zlog_write(w, "{\"step\":10}", 11, &d), &d);
    ASSERT_OK(zlog_close(w, &d), &d);
    int rc;
    ASSERT_EQ_INT(read_records(path, &rc), 11);
    ASSERT_EQ_INT(rc, 0);
}

TEST(zlog, truncated_file_keeps_complete_records)
{
    char path[512], cut[512];
    snprintf(path, sizeof path, "%s/d.jsonl.zst", test_tmp_dir());
    snprintf(cut, sizeof cut, "%s/d-cut.jsonl.zst", test_tmp_dir());
    /* 20 frames of 5 records each; cut the file in the middle of the last frame */
    ASSERT_EQ_INT(write_records(path, 100, ZLOG_TRUNCATE, 5), 0);
    fileio_map m;
    qs_diag d = {0};
    ASSERT_OK(fileio_map_open(&m, path, &d), &d);
    /* the last frame is at least 10 bytes; drop 5 */
    ASSERT_OK(fileio_write_atomic(cut, m.data, m.bytes - 5, &d), &d);
    fileio_unmap(&m);
    int rc;
    ASSERT_EQ_INT(read_records(cut, &rc), 95);
    ASSERT_EQ_INT(rc, QS_ETRUNC);
}

TEST(zlog, corrupt_data_is_an_error)
{
    char path[512];
    snprintf(path, sizeof path, "%s/e.jsonl.zst", test_tmp_dir());
    unsigned char junk[64] = {0x28, 0xB5, 0x2F, 0xFD, 0xFF, 0xFF, 0xFF};
    qs_diag d = {0};
    ASSERT_OK(fileio_write_atomic(path, junk, sizeof junk, &d), &d);
    int rc;
    int n = read_records(path, &rc);
    ASSERT_EQ_INT(n, 0);
    ASSERT_EQ_INT(rc, QS_EFORMAT);
}

/* keep records with "step" < *ctx */
static int keep_below(void *ctx, const char *line, size_t len)
{
    long s;
    return zlog_line_long(line, len, "step", &s) && s < *(long *)ctx;
}

static char *raw_bytes(const char *path, size_t *n)
{
    fileio_map m;
    if (fileio_map_open(&m, path, NULL))
        return NULL;
    char *b = qs_malloc(m.bytes + 1);
    if (b)
        memcpy(b, m.data, m.bytes);
    *n = m.bytes;
    fileio_unmap(&m);
    return b;
}

/* resume: the log cut back to steps < 60 has exactly the bytes of a log that
 * stopped there (whole frames kept as written); a frame straddling the cut is
 * re-compressed with its kept records; a killed writer's last frame is dropped */
TEST(zlog, filter_cuts_frames_back_to_the_kept_records)
{
    char full[512], short_[512], mid[512];
    snprintf(full, sizeof full, "%s/f.jsonl.zst", test_tmp_dir());
    snprintf(short_, sizeof short_, "%s/f60.jsonl.zst", test_tmp_dir());
    snprintf(mid, sizeof mid, "%s/f62.jsonl.zst", test_tmp_dir());
    ASSERT_EQ_INT(write_records(full, 100, ZLOG_TRUNCATE, 5), 0);
    ASSERT_EQ_INT(write_records(short_, 60, ZLOG_TRUNCATE, 5), 0);
    qs_diag d = {0};
    long at = 60;
    ASSERT_OK(zlog_filter(full, keep_below, &at, &d), &d);
    size_t na, nb;
    char *a = raw_bytes(full, &na), *b = raw_bytes(short_, &nb);
    ASSERT_TRUE(a && b && na == nb && !memcmp(a, b, na));
    qs_free(a);
    qs_free(b);
    at = 62;   /* inside a frame */
    ASSERT_EQ_INT(write_records(mid, 100, ZLOG_TRUNCATE, 5), 0);
    ASSERT_OK(zlog_filter(mid, keep_below, &at, &d), &d);
    int rc;
    ASSERT_EQ_INT(read_records(mid, &rc), 62);
    ASSERT_EQ_INT(rc, 0);
    /* a cut last frame goes; the plain twin loses its cut last line */
    a = raw_bytes(mid, &na);
    ASSERT_TRUE(a != NULL);
    ASSERT_OK(fileio_write_atomic(mid, a, na - 3, &d), &d);
    qs_free(a);
    at = 1000;
    ASSERT_OK(zlog_filter(mid, keep_below, &at, &d), &d);
    ASSERT_EQ_INT(read_records(mid, &rc), 60);
    ASSERT_EQ_INT(rc, 0);
    snprintf(mid, sizeof mid, "%s/f.jsonl", test_tmp_dir());
    ASSERT_OK(fileio_write_atomic(mid, "{\"step\":0}\n{\"step\":1}\n{\"step\":7}\n{\"st", 37, &d), &d);
    at = 5;
    ASSERT_OK(zlog_filter(mid, keep_below, &at, &d), &d);
    a = raw_bytes(mid, &na);
    ASSERT_TRUE(a && na == 22 && !memcmp(a, "{\"step\":0}\n{\"step\":1}\n", 22));
    qs_free(a);
}

/* damage before the end is not silently dropped */
TEST(zlog, filter_refuses_a_corrupt_frame_by_offset)
{
    char path[512];
    snprintf(path, sizeof path, "%s/g.jsonl.zst", test_tmp_dir());
    ASSERT_EQ_INT(write_records(path, 20, ZLOG_TRUNCATE, 5), 0);
    size_t n;
    char *a = raw_bytes(path, &n);
    ASSERT_TRUE(a != NULL);
    qs_diag d = {0};
    memcpy(a + n / 2, "JUNKJUNKJUNK", 12);
    ASSERT_OK(fileio_write_atomic(path, a, n, &d), &d);
    long at = 1000;
    ASSERT_EQ_INT(zlog_filter(path, keep_below, &at, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "zstd frame at byte") != NULL);
    char *b;
    size_t nb;
    b = raw_bytes(path, &nb);   /* untouched */
    ASSERT_TRUE(b && nb == n && !memcmp(a, b, n));
    qs_free(a);
    qs_free(b);
    ASSERT_EQ_INT(zlog_line_long("{\"step\":-3,\"x\":1}", 17, "step", &at), 1);
    ASSERT_EQ_INT(at, -3);
    ASSERT_EQ_INT(zlog_line_long("{\"step\":\"3\"}", 12, "step", &at), 0);
    ASSERT_EQ_INT(zlog_line_long("{\"step\":99999999999999999999}", 29, "step", &at), 0);
    ASSERT_EQ_INT(zlog_line_string_is("{\"type\":\"eval\"}", 15, "type", "eval"), 1);
    ASSERT_EQ_INT(zlog_line_string_is("{\"type\":\"evalx\"}", 16, "type", "eval"), 0);
    ASSERT_EQ_INT(zlog_line_string_is("{\"type\":\"ev", 11, "type", "eval"), 0);
}

/* read_records, but a reader that cannot even open the file counts as 0 records
 * read with that error in *rc_end; -1 only when a record differs. */
static int read_checked(const char *path, int *rc_end)
{
    qs_diag d = {0};
    zlog_reader *r;
    if ((*rc_end = zlog_reader_create(&r, path, &d)))
        return 0;
    zlog_reader_destroy(r);
    return read_records(path, rc_end);
}

/* Every frame carries a content checksum and its records are handed out only once
 * the whole frame decoded: a flipped bit anywhere in the file never yields altered
 * records.  Either the records read are exactly the written ones (a flip zstd
 * does not need, e.g. in a window size) or reading stops at the damaged frame with
 * "zstd frame at byte N is corrupt" (issue 16.8: it was a JSON error). */
TEST(zlog, flipped_bits_are_a_corrupt_frame_never_altered_records)
{
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/f.jsonl.zst", test_tmp_dir());
    snprintf(bad, sizeof bad, "%s/f-bad.jsonl.zst", test_tmp_dir());
    ASSERT_EQ_INT(write_records(path, 100, ZLOG_TRUNCATE, 5), 0);   /* 20 frames */
    char *orig;
    size_t n;
    ASSERT_OK(fileio_read_all(path, &orig, &n, NULL), NULL);   /* .zst: decompressed */
    qs_free(orig);
    fileio_map m;
    qs_diag d = {0};
    ASSERT_OK(fileio_map_open(&m, path, &d), &d);
    unsigned char *copy = qs_malloc(m.bytes);
    ASSERT_TRUE(copy != NULL);
    int altered = 0, silent_loss = 0, detected = 0;
    for (size_t i = 0; i < m.bytes; i++) {
        memcpy(copy, m.data, m.bytes);
        copy[i] ^= 0x10;
        if (fileio_write_atomic(bad, copy, m.bytes, &d))
            break;
        int rc, got = read_checked(bad, &rc);
        altered += got < 0;
        silent_loss += got >= 0 && got < 100 && rc == 0;
        detected += rc == QS_EFORMAT;
    }
    size_t bytes = m.bytes;
    fileio_unmap(&m);
    qs_free(copy);
    ASSERT_EQ_INT(altered, 0);
    ASSERT_EQ_INT(silent_loss, 0);
    ASSERT_TRUE(detected > (int)(bytes * 3 / 4));   /* payload and checksums: most bytes */
    /* the message names the frame and what is intact */
    memcpy(bad, path, sizeof bad);
    ASSERT_OK(fileio_map_open(&m, path, &d), &d);
    copy = qs_malloc(m.bytes);
    ASSERT_TRUE(copy != NULL);
    memcpy(copy, m.data, m.bytes);
    copy[m.bytes - 2] ^= 0x10;   /* the last frame's checksum */
    snprintf(bad, sizeof bad, "%s/f-bad.jsonl.zst", test_tmp_dir());
    int wrc = fileio_write_atomic(bad, copy, m.bytes, &d);
    fileio_unmap(&m);
    qs_free(copy);
    ASSERT_OK(wrc, &d);
    zlog_reader *r;
    ASSERT_OK(zlog_reader_create(&r, bad, &d), &d);
    const char *line;
    size_t len;
    int rc, k = 0;
    while ((rc = zlog_next(r, &line, &len, NULL, &d)) == 1)
        k++;
    zlog_reader_destroy(r);
    ASSERT_EQ_INT(k, 95);
    ASSERT_EQ_INT(rc, QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "is corrupt") && strstr(d.msg, "the 95 records before it are intact"));
}
