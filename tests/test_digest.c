/* test_digest.c: SHA-256 against the FIPS 180-2 / NIST example vectors on
 * both compression paths (the SHA extensions when the CPU has them, and the
 * portable code forced with cpu_limit(CPU_LEVEL_SCALAR)), the two paths on
 * random lengths fed in random pieces, the file hash, and background hashing
 * of a file list (same hex as digest_sha256_file, errors name the file); the
 * hash cache (hits on an unchanged file, misses after a change). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "qs/cpu.h"
#include "qs/digest.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/rng.h"
#include "test.h"

static void hash_buf(const void *p, size_t n, char hex[65])
{
    digest_sha256 s;
    digest_sha256_init(&s);
    digest_sha256_update(&s, p, n);
    digest_sha256_final(&s, hex);
}

/* The NIST example vectors; "a" x 1,000,000 fed in 1000-byte pieces. */
static int nist_vectors_pass(void)
{
    static const struct { const char *msg, *hex; } v[] = {
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
         "lmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        hash_buf(v[i].msg, strlen(v[i].msg), hex);
        if (strcmp(hex, v[i].hex)) {
            TEST_FAIL_AT("vector %zu at %s: %s, expected %s", i, cpu_level_name(cpu_level()), hex,
                         v[i].hex);
            return 0;
        }
    }
    char piece[1000];
    memset(piece, 'a', sizeof piece);
    digest_sha256 s;
    digest_sha256_init(&s);
    for (int i = 0; i < 1000; i++)
        digest_sha256_update(&s, piece, sizeof piece);
    digest_sha256_final(&s, hex);
    if (strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")) {
        TEST_FAIL_AT("a x 1e6 at %s: %s", cpu_level_name(cpu_level()), hex);
        return 0;
    }
    return 1;
}

TEST(digest, nist_vectors_on_both_paths)
{
    int level = cpu_level();
    ASSERT_TRUE(nist_vectors_pass());
    cpu_limit(CPU_LEVEL_SCALAR);
    ASSERT_EQ_INT(digest_sha256_accelerated(), 0);
    int ok = nist_vectors_pass();
    cpu_limit(level);
    ASSERT_TRUE(ok);
    if (getenv("QS_TEST_VERBOSE"))
        fprintf(stderr, "    SHA extensions: %s\n", digest_sha256_accelerated() ? "yes" : "no");
}

/* Random lengths 0..5000, each fed in random pieces (so blocks straddle the
 * calls), hashed on the default path and on the portable one: same hex. */
TEST(digest, paths_agree_on_random_lengths_and_splits)
{
    enum { MAX = 5000 };
    unsigned char *buf = qs_malloc(MAX);
    ASSERT_TRUE(buf);
    rng r;
    rng_seed(&r, 13);
    int level = cpu_level(), bad = 0;
    for (int trial = 0; trial < 300 && !bad; trial++) {
        size_t n = trial < 130 ? (size_t)trial : rng_u32(&r) % MAX;
        for (size_t i = 0; i < n; i++)
            buf[i] = (unsigned char)rng_u32(&r);
        char hex[2][65];
        for (int path = 0; path < 2; path++) {
            cpu_limit(path ? CPU_LEVEL_SCALAR : level);
            digest_sha256 s;
            digest_sha256_init(&s);
            size_t done = 0;
            while (done < n) {
                size_t k = 1 + rng_u32(&r) % 200;
                k = k > n - done ? n - done : k;
                digest_sha256_update(&s, buf + done, k);
                done += k;
            }
            digest_sha256_final(&s, hex[path]);
        }
        cpu_limit(level);
        char whole[65];
        hash_buf(buf, n, whole);
        if (strcmp(hex[0], hex[1]) || strcmp(hex[0], whole)) {
            TEST_FAIL_AT("length %zu: %s (default) %s (scalar) %s (one piece)", n, hex[0], hex[1],
                         whole);
            bad = 1;
        }
    }
    qs_free(buf);
}

TEST(digest, background_files_equal_file_hashes_and_name_missing_file)
{
    char p0[600], p1[600], missing[600];
    snprintf(p0, sizeof p0, "%s/digest_a.bin", test_tmp_dir());
    snprintf(p1, sizeof p1, "%s/digest_b.bin", test_tmp_dir());
    snprintf(missing, sizeof missing, "%s/digest_missing.bin", test_tmp_dir());
    qs_diag d = {0};
    static unsigned char big[300000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 7 + i / 251);
    ASSERT_OK(fileio_write_atomic(p0, big, sizeof big, &d), &d);
    ASSERT_OK(fileio_write_atomic(p1, "abc", 3, &d), &d);
    const char *paths[3] = {p0, p1, missing};
    digest_files_job *j;
    ASSERT_OK(digest_sha256_files_start(&j, paths, 2, &d), &d);
    char hex[2][65], ref[65];
    ASSERT_OK(digest_sha256_files_finish(j, hex, &d), &d);
    ASSERT_OK(digest_sha256_file(p0, ref, &d), &d);
    ASSERT_EQ_STR(hex[0], ref);
    hash_buf(big, sizeof big, ref);
    ASSERT_EQ_STR(hex[0], ref);
    ASSERT_EQ_STR(hex[1], "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ASSERT_OK(digest_sha256_files_start(&j, paths, 3, &d), &d);
    char hex3[3][65];
    ASSERT_TRUE(digest_sha256_files_finish(j, hex3, &d) == QS_EIO);
    ASSERT_TRUE(strstr(d.path, "digest_missing.bin") != NULL);
    ASSERT_OK(digest_sha256_files_start(&j, paths, 2, &d), &d);
    ASSERT_OK(digest_sha256_files_finish(j, NULL, &d), &d);   /* results dropped */
    ASSERT_OK(digest_sha256_files_finish(NULL, NULL, &d), &d);
}

/* A file's mtime and ctime moved into the past (the cache refuses to store a
 * file modified in the last 2 s): utimensat sets mtime; ctime follows the
 * change itself, so the test waits it out only when it has to. */
static void age_file(const char *path, long mtime_s)
{
    struct timespec ts[2] = {{mtime_s, 0}, {mtime_s, 0}};
    utimensat(AT_FDCWD, path, ts, 0);
}

TEST(digest, cache_hits_on_the_same_file_and_misses_after_any_change)
{
    char p[600], cache[600], hex[65], ref[65];
    snprintf(p, sizeof p, "%s/digest_cached.bin", test_tmp_dir());
    snprintf(cache, sizeof cache, "%s/digest_cache_dir/sha256.tsv", test_tmp_dir());
    remove(cache);
    char *saved = test_env_set("QS_HASH_CACHE", cache);
    qs_diag d = {0};
    ASSERT_OK(fileio_write_atomic(p, "first version", 13, &d), &d);
    age_file(p, 1000000000L);
    sleep(2);   /* ctime, set by the write, must be 2 s old too */
    ASSERT_OK(digest_sha256_file_cached(p, hex, 0, &d), &d);
    ASSERT_OK(digest_sha256_file(p, ref, &d), &d);
    ASSERT_EQ_STR(hex, ref);
    ASSERT_TRUE(fileio_exists(cache));
    /* a hit comes from the cache: plant a different hash under the same key */
    char planted[65];
    memset(planted, 'a', 64);
    planted[64] = '\0';
    digest_cache_store(p, planted);
    ASSERT_TRUE(digest_cache_lookup(p, hex) == 1);
    ASSERT_EQ_STR(hex, planted);
    /* same size, new content and mtime: a miss, the true hash, stored anew */
    ASSERT_OK(fileio_write_atomic(p, "other version", 13, &d), &d);
    ASSERT_TRUE(digest_cache_lookup(p, hex) == 0);
    ASSERT_OK(digest_sha256_file_cached(p, hex, 0, &d), &d);
    ASSERT_OK(digest_sha256_file(p, ref, &d), &d);
    ASSERT_EQ_STR(hex, ref);
    ASSERT_TRUE(strcmp(hex, planted) != 0);
    /* a file just written is not stored (racy): still a miss */
    ASSERT_TRUE(digest_cache_lookup(p, hex) == 0);
    /* below min_bytes nothing is looked up */
    age_file(p, 1000000000L);
    sleep(2);
    digest_cache_store(p, planted);
    ASSERT_OK(digest_sha256_file_cached(p, hex, 1 << 20, &d), &d);
    ASSERT_EQ_STR(hex, ref);
    /* off: no lookups */
    setenv("QS_HASH_CACHE", "off", 1);
    ASSERT_TRUE(digest_cache_lookup(p, hex) == 0);
    test_env_restore("QS_HASH_CACHE", saved);
}

/* QS_HASH_CACHE pointed at a fresh cache under the test directory; the old
 * value back with cache_env_restore. */
static char *cache_env_fresh(const char *name, char *cache, size_t cap)
{
    snprintf(cache, cap, "%s/%s/sha256.tsv", test_tmp_dir(), name);
    remove(cache);
    return test_env_set("QS_HASH_CACHE", cache);
}

static void cache_env_restore(char *saved) { test_env_restore("QS_HASH_CACHE", saved); }

TEST(digest, cache_stores_a_written_file_at_once_and_hits_after_its_directory_moves)
{
    char cache[600], dir[600], moved[600], p[700], q[700], hex[65], ref[65];
    char *saved = cache_env_fresh("digest_cache_written", cache, sizeof cache);
    snprintf(dir, sizeof dir, "%s/digest_written_tmp", test_tmp_dir());
    snprintf(moved, sizeof moved, "%s/digest_written_final", test_tmp_dir());
    snprintf(p, sizeof p, "%s/w.bin", dir);
    snprintf(q, sizeof q, "%s/w.bin", moved);
    remove(q);
    rmdir(moved);
    qs_diag d = {0};
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    ASSERT_OK(fileio_write_atomic(p, "written here", 12, &d), &d);
    ASSERT_OK(digest_sha256_file(p, ref, &d), &d);
    digest_cache_store(p, ref);   /* read-hashed, just written: racy, not stored */
    ASSERT_TRUE(digest_cache_lookup(p, hex) == 0);
    digest_cache_store_written(p, ref);   /* its writer's own hash: stored at once */
    ASSERT_TRUE(digest_cache_lookup(p, hex) == 1);
    ASSERT_EQ_STR(hex, ref);
    /* the directory renamed into place (as init, export and the trainer do) */
    ASSERT_TRUE(rename(dir, moved) == 0);
    ASSERT_TRUE(digest_cache_lookup(q, hex) == 1);
    ASSERT_EQ_STR(hex, ref);
    /* a copy is another file (new inode): a miss */
    char copy[700];
    snprintf(copy, sizeof copy, "%s/w_copy.bin", moved);
    ASSERT_OK(fileio_write_atomic(copy, "written here", 12, &d), &d);
    ASSERT_TRUE(digest_cache_lookup(copy, hex) == 0);
    /* any change to the file: a miss */
    ASSERT_OK(fileio_write_atomic(q, "written there", 13, &d), &d);
    ASSERT_TRUE(digest_cache_lookup(q, hex) == 0);
    cache_env_restore(saved);
}

TEST(digest, hf_hub_blob_names_give_the_hash_while_the_cache_is_on)
{
    char cache[600], root[600], blobs[700], snap[700], blob[800], link[800], other[800];
    char hex[65], ref[65];
    char *saved = cache_env_fresh("digest_cache_hf", cache, sizeof cache);
    snprintf(root, sizeof root, "%s/digest_hf/models--t--m", test_tmp_dir());
    snprintf(blobs, sizeof blobs, "%s/blobs", root);
    snprintf(snap, sizeof snap, "%s/snapshots/0123abcd", root);
    qs_diag d = {0};
    ASSERT_OK(fileio_mkdir_p(blobs, &d), &d);
    ASSERT_OK(fileio_mkdir_p(snap, &d), &d);
    /* the layout huggingface_hub writes: snapshot name -> ../../blobs/<sha256> */
    hash_buf((const unsigned char *)"weights", 7, ref);
    snprintf(blob, sizeof blob, "%s/%s", blobs, ref);
    ASSERT_OK(fileio_write_atomic(blob, "weights", 7, &d), &d);
    snprintf(link, sizeof link, "%s/model.safetensors", snap);
    char target[100];
    snprintf(target, sizeof target, "../../blobs/%s", ref);
    remove(link);
    ASSERT_TRUE(symlink(target, link) == 0);
    ASSERT_TRUE(digest_hf_sha256(link, hex) == 1);
    ASSERT_EQ_STR(hex, ref);
    ASSERT_OK(digest_sha256_file_cached(link, hex, 0, &d), &d);
    ASSERT_EQ_STR(hex, ref);
    /* the name is what is trusted (as huggingface_hub does): a blob whose bytes
     * differ from its name reports the name; with the cache off, the bytes */
    char planted[65];
    memset(planted, 'b', 64);
    planted[64] = '\0';
    snprintf(other, sizeof other, "%s/%s", blobs, planted);
    ASSERT_OK(fileio_write_atomic(other, "weights", 7, &d), &d);
    snprintf(target, sizeof target, "../../blobs/%s", planted);
    remove(link);
    ASSERT_TRUE(symlink(target, link) == 0);
    ASSERT_OK(digest_sha256_file_cached(link, hex, 0, &d), &d);
    ASSERT_EQ_STR(hex, planted);
    setenv("QS_HASH_CACHE", "off", 1);
    ASSERT_TRUE(digest_hf_sha256(link, hex) == 0);
    ASSERT_OK(digest_sha256_file_cached(link, hex, 0, &d), &d);
    ASSERT_EQ_STR(hex, ref);
    setenv("QS_HASH_CACHE", cache, 1);
    /* not that layout: a regular file, a link elsewhere, a short (sha1) name */
    ASSERT_TRUE(digest_hf_sha256(blob, hex) == 0);
    char plain[800], sha1[41];
    snprintf(plain, sizeof plain, "%s/plain.bin", snap);
    ASSERT_OK(fileio_write_atomic(plain, "x", 1, &d), &d);
    snprintf(link, sizeof link, "%s/other.safetensors", snap);
    remove(link);
    ASSERT_TRUE(symlink("plain.bin", link) == 0);
    ASSERT_TRUE(digest_hf_sha256(link, hex) == 0);
    memset(sha1, 'c', 40);
    sha1[40] = '\0';
    snprintf(other, sizeof other, "%s/%s", blobs, sha1);
    ASSERT_OK(fileio_write_atomic(other, "{}", 2, &d), &d);
    snprintf(target, sizeof target, "../../blobs/%s", sha1);
    snprintf(link, sizeof link, "%s/config.json", snap);
    remove(link);
    ASSERT_TRUE(symlink(target, link) == 0);
    ASSERT_TRUE(digest_hf_sha256(link, hex) == 0);
    cache_env_restore(saved);
}

TEST(digest, hf_local_dir_metadata_gives_the_hash_until_the_file_changes)
{
    char cache[600], dir[600], meta_dir[700], file[700], meta[800], hex[65], ref[65], text[256];
    char *saved = cache_env_fresh("digest_cache_hf_local", cache, sizeof cache);
    snprintf(dir, sizeof dir, "%s/digest_hf_local", test_tmp_dir());
    snprintf(meta_dir, sizeof meta_dir, "%s/.cache/huggingface/download", dir);
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    snprintf(meta, sizeof meta, "%s/model.safetensors.metadata", meta_dir);
    qs_diag d = {0};
    ASSERT_OK(fileio_mkdir_p(meta_dir, &d), &d);
    ASSERT_OK(fileio_write_atomic(file, "weights", 7, &d), &d);
    hash_buf((const unsigned char *)"weights", 7, ref);
    /* what `huggingface-cli download --local-dir` writes after the file: commit,
     * etag (an LFS file's SHA-256), the time */
    snprintf(text, sizeof text, "11c5a3d5811f50298f278a704980280950aedb10\n%s\n%lld.25\n", ref,
             (long long)time(NULL) + 5);
    ASSERT_OK(fileio_write_atomic(meta, text, strlen(text), &d), &d);
    ASSERT_TRUE(digest_hf_sha256(file, hex) == 1);
    ASSERT_EQ_STR(hex, ref);
    ASSERT_OK(digest_sha256_file_cached(file, hex, 0, &d), &d);
    ASSERT_EQ_STR(hex, ref);
    /* the file written after the metadata: not trusted */
    snprintf(text, sizeof text, "11c5a3d5811f50298f278a704980280950aedb10\n%s\n1000000000.5\n", ref);
    ASSERT_OK(fileio_write_atomic(meta, text, strlen(text), &d), &d);
    ASSERT_TRUE(digest_hf_sha256(file, hex) == 0);
    /* a regular (non-LFS) file's etag is a git hash; a truncated metadata file */
    snprintf(text, sizeof text, "11c5a3d5811f50298f278a704980280950aedb10\n"
                                "a16a55fda99d2f2e7b69cce5cf93ff4ad3049930\n%lld\n",
             (long long)time(NULL) + 5);
    ASSERT_OK(fileio_write_atomic(meta, text, strlen(text), &d), &d);
    ASSERT_TRUE(digest_hf_sha256(file, hex) == 0);
    snprintf(text, sizeof text, "11c5a3d5811f50298f278a704980280950aedb10\n%s\n", ref);
    ASSERT_OK(fileio_write_atomic(meta, text, strlen(text), &d), &d);
    ASSERT_TRUE(digest_hf_sha256(file, hex) == 0);
    /* valid again, but the cache off: not consulted */
    snprintf(text, sizeof text, "c\n%s\n%lld\n", ref, (long long)time(NULL) + 5);
    ASSERT_OK(fileio_write_atomic(meta, text, strlen(text), &d), &d);
    ASSERT_TRUE(digest_hf_sha256(file, hex) == 1);
    setenv("QS_HASH_CACHE", "off", 1);
    ASSERT_TRUE(digest_hf_sha256(file, hex) == 0);
    cache_env_restore(saved);
}

/* _finish takes over a job the low-priority thread has not finished: the
 * hashes are those of the files whenever it happens (at once, or part way). */
TEST(digest, background_job_finished_early_gives_the_same_hashes)
{
    char p0[600], p1[600], ref0[65], ref1[65], hex[2][65];
    snprintf(p0, sizeof p0, "%s/digest_early_a.bin", test_tmp_dir());
    snprintf(p1, sizeof p1, "%s/digest_early_b.bin", test_tmp_dir());
    const size_t n = (size_t)5 << 20;   /* 5 pieces and a part */
    unsigned char *big = qs_malloc(n + 12345);
    ASSERT_TRUE(big != NULL);
    for (size_t i = 0; i < n + 12345; i++)
        big[i] = (unsigned char)(i * 31 + i / 4099);
    qs_diag d = {0};
    ASSERT_OK(fileio_write_atomic(p0, big, n + 12345, &d), &d);
    ASSERT_OK(fileio_write_atomic(p1, big, n, &d), &d);
    qs_free(big);
    ASSERT_OK(digest_sha256_file(p0, ref0, &d), &d);
    ASSERT_OK(digest_sha256_file(p1, ref1, &d), &d);
    const char *paths[2] = {p0, p1};
    for (int wait_us = 0; wait_us <= 3000; wait_us += 1500) {
        digest_files_job *j;
        ASSERT_OK(digest_sha256_files_start(&j, paths, 2, &d), &d);
        if (wait_us)
            usleep((useconds_t)wait_us);
        ASSERT_OK(digest_sha256_files_finish(j, hex, &d), &d);
        ASSERT_EQ_STR(hex[0], ref0);
        ASSERT_EQ_STR(hex[1], ref1);
    }
}
