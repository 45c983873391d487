/* test_base.c: src/base basics: err, mem and fileio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qs/err.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "test.h"

TEST(err, diag_format_has_path_line_message)
{
    qs_diag d = {0};
    int rc = diag_set(&d, QS_EFORMAT, "x.csv", 12, "expected %d fields, found %d", 6, 5);
    ASSERT_EQ_INT(rc, QS_EFORMAT);
    char buf[256];
    diag_format(&d, buf, sizeof buf);
    ASSERT_EQ_STR(buf, "x.csv:12: expected 6 fields, found 5");
    ASSERT_EQ_STR(qs_strerror(QS_ETRUNC), "truncated input");
    ASSERT_EQ_STR(qs_strerror(-999), "unknown error");
}

TEST(mem, counts_live_bytes_and_alignment)
{
    size_t before = qs_mem_live_bytes();
    char *p = qs_malloc(1000);
    ASSERT_TRUE(p != NULL);
    ASSERT_EQ_INT(((size_t)p) % 64, 0);
    ASSERT_EQ_INT(qs_mem_live_bytes() - before, 1000);
    p = qs_realloc(p, 5000);
    ASSERT_TRUE(p != NULL);
    ASSERT_EQ_INT(qs_mem_live_bytes() - before, 5000);
    qs_free(p);
    ASSERT_EQ_INT(qs_mem_live_bytes(), before);
}

/* Blocks of 4 MiB or more start on a 2 MiB boundary (their header in the page
 * before), count exactly their requested bytes and keep their contents through
 * qs_realloc; with huge pages off they are only 64-byte aligned. */
TEST(mem, large_blocks_sit_on_a_2mib_boundary_and_count_their_bytes)
{
    const size_t huge = (size_t)2 << 20, n = ((size_t)5 << 20) + 12345;
    size_t before = qs_mem_live_bytes();
    unsigned char *p = qs_malloc(n);
    ASSERT_TRUE(p != NULL);
    ASSERT_EQ_INT((size_t)p % huge, 0);
    ASSERT_EQ_INT(qs_mem_live_bytes() - before, n);
    for (size_t i = 0; i < n; i += 4093)
        p[i] = (unsigned char)(i * 7);
    p[n - 1] = 0x5a;
    unsigned char *q = qs_realloc(p, 2 * n);
    ASSERT_TRUE(q != NULL);
    ASSERT_EQ_INT((size_t)q % huge, 0);
    int same = q[n - 1] == 0x5a;
    for (size_t i = 0; i < n; i += 4093)
        same &= q[i] == (unsigned char)(i * 7);
    ASSERT_TRUE(same);
    ASSERT_EQ_INT(qs_mem_live_bytes() - before, 2 * n);
    qs_free(q);
    unsigned char *small = qs_malloc(1000);
    ASSERT_TRUE(small != NULL);
    ASSERT_EQ_INT((size_t)small % 64, 0);
    qs_free(small);
    qs_mem_set_hugepages(0);
    p = qs_malloc(n);
    qs_mem_set_hugepages(1);
    ASSERT_TRUE(p != NULL);
    ASSERT_EQ_INT((size_t)p % 64, 0);
    ASSERT_EQ_INT(qs_mem_live_bytes() - before, n);
    qs_free(p);
    ASSERT_EQ_INT(qs_mem_live_bytes(), before);
}

/* Resident KiB of this process (/proc/self/smaps_rollup "Rss:"), -1 unknown. */
static long mem_rss_kib(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Rss: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* A block of whole huge pages is resident as those pages and its header's 4 KiB
 * page: 34 MiB touched end to end adds 34 MiB + ~12 KiB of RSS here, the first
 * time in a process ~140 KiB (with the header on the boundary it took one more
 * huge page: 36 MiB where THP is on).  Bound: less than one more huge page.
 * 34 MiB is past glibc's largest mmap threshold (32 MiB), so the block is
 * always fresh pages, never heap memory an earlier test left resident. */
TEST(mem, block_of_whole_huge_pages_is_resident_as_those_pages)
{
#ifdef __SANITIZE_ADDRESS__
    SKIP("ASan's allocator and its shadow memory change what a block makes resident");
#endif
    const size_t n = (size_t)34 << 20;
    long before = mem_rss_kib();
    if (before < 0)
        SKIP("no /proc/self/smaps_rollup");
    unsigned char *p = qs_malloc(n);
    ASSERT_TRUE(p != NULL);
    memset(p, 1, n);
    long grown = mem_rss_kib() - before;
    qs_free(p);
    ASSERT_TRUE(grown >= 34 * 1024 - 64);   /* it was touched */
    ASSERT_TRUE(grown < 34 * 1024 + 1024);
}

/* qs_calloc of a large block maps fresh pages: zero, on a 2 MiB boundary,
 * counted, resident only where used (an inference arena sized for the longest
 * input), its contents kept through qs_realloc, the injected failure honoured. */
TEST(mem, large_zeroed_blocks_are_resident_only_where_used)
{
    const size_t huge = (size_t)2 << 20, n = (size_t)34 << 20;
    size_t live = qs_mem_live_bytes();
    long before = mem_rss_kib();
    float *p = qs_calloc(n / sizeof *p, sizeof *p);
    ASSERT_TRUE(p != NULL);
    ASSERT_EQ_INT((size_t)p % huge, 0);
    ASSERT_EQ_INT(qs_mem_live_bytes() - live, n);
#ifndef __SANITIZE_ADDRESS__   /* there it is malloc + memset, for ASan's checks */
    if (before >= 0)
        ASSERT_TRUE(mem_rss_kib() - before < 1024);   /* nothing written yet */
#else
    (void)before;
#endif
    int zero = 1;
    for (size_t i = 0; i < n / sizeof *p; i += 1021)
        zero &= p[i] == 0.0f;
    ASSERT_TRUE(zero && p[n / sizeof *p - 1] == 0.0f);
    p[0] = 1.5f;
    p[n / sizeof *p - 1] = -2.0f;
    float *q = qs_realloc(p, n + 4096);
    ASSERT_TRUE(q != NULL);
    ASSERT_TRUE(q[0] == 1.5f && q[n / sizeof *q - 1] == -2.0f);
    qs_free(q);
    ASSERT_EQ_INT(qs_mem_live_bytes(), live);
    qs_mem_fail_after(1);
    ASSERT_TRUE(qs_calloc(n, 1) == NULL);
    qs_mem_fail_after(0);
    ASSERT_EQ_INT(qs_mem_live_bytes(), live);
}

TEST(mem, injected_failure_hits_nth_allocation)
{
    qs_mem_fail_after(2);
    void *a = qs_malloc(10);
    void *b = qs_malloc(10);
    void *c = qs_malloc(10);
    qs_mem_fail_after(0);
    ASSERT_TRUE(a != NULL);
    ASSERT_TRUE(b == NULL);
    ASSERT_TRUE(c != NULL);
    qs_free(a);
    qs_free(c);
    ASSERT_TRUE(qs_calloc((size_t)-1, 16) == NULL);
}

TEST(fileio, atomic_write_and_missing_file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/f.txt", test_tmp_dir());
    qs_diag d = {0};
    ASSERT_OK(fileio_write_atomic(path, "hello", 5, &d), &d);
    char *data;
    size_t n;
    ASSERT_OK(fileio_read_all(path, &data, &n, &d), &d);
    ASSERT_EQ_INT(n, 5);
    ASSERT_EQ_STR(data, "hello");
    qs_free(data);
    snprintf(path, sizeof path, "%s/nope.txt", test_tmp_dir());
    ASSERT_EQ_INT(fileio_read_all(path, &data, &n, &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.path, "nope.txt") != NULL);
}

TEST(fileio, aborted_atomic_write_leaves_no_file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/g.txt", test_tmp_dir());
    qs_diag d = {0};
    afile af;
    ASSERT_OK(afile_open(&af, path, &d), &d);
    fputs("partial", af.f);
    afile_abort(&af);
    ASSERT_TRUE(!fileio_exists(path));
}

/* A device (here /dev/full, which takes no bytes) is written in place and its
 * error reported, never replaced by a temp file's rename; a symbolic link stays a
 * link and its target gets the bytes; a directory read as a file says so. */
TEST(fileio, special_outputs_in_place_links_kept_directories_named)
{
    struct stat st;
    if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode))
        SKIP("no /dev/full character device");
    qs_diag d = {0};
    ASSERT_TRUE(fileio_is_special("/dev/full"));
    ASSERT_EQ_INT(fileio_write_atomic("/dev/full", "hello", 5, &d), QS_EIO);
    ASSERT_TRUE(strstr(d.msg, "No space left") != NULL);
    ASSERT_TRUE(stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode));
    ASSERT_TRUE(!fileio_exists("/dev/full.tmp"));

    char target[512], link[512], *data;
    size_t n;
    snprintf(target, sizeof target, "%s/target.txt", test_tmp_dir());
    snprintf(link, sizeof link, "%s/link.txt", test_tmp_dir());
    ASSERT_OK(fileio_write_atomic(target, "old", 3, &d), &d);
    unlink(link);
    ASSERT_EQ_INT(symlink("target.txt", link), 0);
    ASSERT_TRUE(!fileio_is_special(link));
    ASSERT_OK(fileio_write_atomic(link, "new!", 4, &d), &d);
    ASSERT_TRUE(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    ASSERT_OK(fileio_read_all(target, &data, &n, &d), &d);
    ASSERT_EQ_INT(n, 4);
    ASSERT_EQ_STR(data, "new!");
    qs_free(data);

    memset(&d, 0, sizeof d);
    ASSERT_EQ_INT(fileio_read_all(test_tmp_dir(), &data, &n, &d), QS_EIO);
    ASSERT_TRUE(strstr(d.msg, "is a directory; expected a file") != NULL);
}

/* A diag about a file under its temp name names the final one. */
TEST(err, diag_rebase_names_the_final_path)
{
    qs_diag d = {0};
    diag_set(&d, QS_EIO, "out.tmp.42/tokenizer.json", -1, "write failed");
    diag_rebase(&d, "out.tmp.42", "out");
    ASSERT_EQ_STR(d.path, "out/tokenizer.json");
    diag_set(&d, QS_EIO, "dir/.tmp.42.results.json", -1, "write failed");
    diag_rebase(&d, "dir/.tmp.42.results.json", "dir/results.json");
    ASSERT_EQ_STR(d.path, "dir/results.json");
    diag_set(&d, QS_EIO, "out.tmp.421/x", -1, "write failed");   /* another name, untouched */
    diag_rebase(&d, "out.tmp.42", "out");
    ASSERT_EQ_STR(d.path, "out.tmp.421/x");
}
