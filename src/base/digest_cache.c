/* digest_cache.c: the SHA-256 of large files remembered between runs.
 *
 * Hashing a 1B checkpoint (2.3 GB) costs ~2.5 CPU-seconds even with the SHA
 * extensions, as much as loading it; evaluating the same checkpoint again
 * (another task, a gate in CI) need not pay it again.  An entry is keyed by
 * what stat(2) says of the file — device, inode, size, modification and status
 * change times to the nanosecond — so any write to the file, a replacement (new
 * inode) or a touch makes it miss, as git's index does.  Its absolute path is
 * kept in the entry (a file stored again replaces its old entry) but is not part
 * of the match: a checkpoint directory renamed into place (init, export and the
 * trainer write into a temp directory) or moved within its file system keeps its
 * files' inodes and times, and its bytes.  A file modified less than
 * DIGEST_CACHE_RACY_S ago is not stored when it was hashed by reading it (a
 * write in the same clock tick as the hash could go unseen); a writer that
 * hashed the bytes it wrote itself stores at once (digest_cache_store_written).
 *
 * Files that huggingface_hub downloaded: its cache keeps each large (LFS) file
 * as blobs/<sha256 of the file> and the snapshot's name as a symbolic link to
 * it; a download into a plain directory (--local-dir) leaves
 * .cache/huggingface/download/<name>.metadata beside it: commit, etag (the
 * SHA-256 for an LFS file) and the time it was written, valid while the file
 * was not modified after that time.  digest_hf_sha256 takes the hash from
 * either (on while the cache is, QS_HASH_CACHE=off hashes the bytes).
 *
 * The cache is one text file, a line per entry (hex, dev, ino, size, mtime,
 * ctime, path; tab-separated), at $QS_HASH_CACHE, else
 * $XDG_CACHE_HOME/qatscope/sha256.tsv, else $HOME/.cache/qatscope/sha256.tsv;
 * QS_HASH_CACHE=off (or empty) turns it off.  It is rewritten whole (temp file
 * + rename: concurrent writers lose entries, never corrupt the file), keeps the
 * newest DIGEST_CACHE_MAX entries, and any error reading or writing it only
 * means a miss: the hash is then computed as without a cache.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "digest_impl.h"
#include "qs/digest.h"
#include "qs/fileio.h"
#include "qs/mem.h"

enum { DIGEST_CACHE_MAX = 256, DIGEST_CACHE_RACY_S = 2 };

static int digest_cache_path(char *out, size_t cap)
{
    const char *env = getenv("QS_HASH_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (env)
        n = *env && strcmp(env, "off") ? snprintf(out, cap, "%s", env) : -1;
    else if (xdg && *xdg)
        n = snprintf(out, cap, "%s/qatscope/sha256.tsv", xdg);
    else if (home && *home)
        n = snprintf(out, cap, "%s/.cache/qatscope/sha256.tsv", home);
    else
        n = -1;
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int digest_cache_enabled(void)
{
    char cpath[1024];
    return digest_cache_path(cpath, sizeof cpath) == 0;
}

/* The entry line of path (absolute) with its stat key, without the hex; *match:
 * the length of its prefix a lookup compares (the stat fields, not the path). */
static int digest_cache_key(char *out, size_t cap, const char *abs, const struct stat *st,
                            size_t *match)
{
    int m = snprintf(out, cap, "\t%llu\t%llu\t%lld\t%lld.%09ld\t%lld.%09ld\t",
                     (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
                     (long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
                     (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
    if (m <= 0 || (size_t)m >= cap)
        return -1;
    int n = snprintf(out + m, cap - (size_t)m, "%s\n", abs);
    *match = (size_t)m;
    return n > 0 && (size_t)n < cap - (size_t)m ? 0 : -1;
}

static int digest_hex_ok(const char *s)
{
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* The cache file's bytes (NUL-terminated), or NULL. */
static char *digest_cache_read(const char *cpath)
{
    char *data = NULL;
    size_t n;
    qs_diag d = {0};
    if (!fileio_exists(cpath) || fileio_read_all(cpath, &data, &n, &d))
        return NULL;
    char *s = qs_realloc(data, n + 1);
    if (!s) {
        qs_free(data);
        return NULL;
    }
    s[n] = '\0';
    return s;
}

int digest_cache_lookup(const char *path, char hex[65])
{
    char cpath[1024], abs[4096], key[4400];
    struct stat st;
    size_t match;
    if (digest_cache_path(cpath, sizeof cpath) || !realpath(path, abs) || stat(abs, &st) ||
        digest_cache_key(key, sizeof key, abs, &st, &match))
        return 0;
    char *all = digest_cache_read(cpath);
    int hit = 0;
    for (char *line = all; line && *line && !hit;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        if (end && len > 64 + match && !memcmp(line + 64, key, match) && digest_hex_ok(line)) {
            memcpy(hex, line, 64);
            hex[64] = '\0';
            hit = 1;
        }
        line += len;
    }
    qs_free(all);
    return hit;
}

static void digest_cache_put(const char *path, const char hex[65], int racy_check)
{
    char cpath[1024], abs[4096], key[4400];
    struct stat st;
    size_t match;
    if (digest_cache_path(cpath, sizeof cpath) || !realpath(path, abs) || stat(abs, &st) ||
        digest_cache_key(key, sizeof key, abs, &st, &match) || !digest_hex_ok(hex) ||
        (racy_check && ((long long)time(NULL) - (long long)st.st_mtim.tv_sec < DIGEST_CACHE_RACY_S ||
                        (long long)time(NULL) - (long long)st.st_ctim.tv_sec < DIGEST_CACHE_RACY_S)))
        return;
    char *all = digest_cache_read(cpath);
    size_t cap = (all ? strlen(all) : 0) + 64 + strlen(key) + 1;
    char *out = qs_malloc(cap);
    if (!out) {
        qs_free(all);
        return;
    }
    /* older entries of other paths, the newest DIGEST_CACHE_MAX - 1 of them */
    size_t n_lines = 0, tail = strlen(abs) + 1, o = 0;
    for (char *l = all; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
        n_lines++;
    size_t skip = n_lines >= DIGEST_CACHE_MAX ? n_lines - (DIGEST_CACHE_MAX - 1) : 0;
    for (char *l = all; l && *l;) {
        char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l + 1) : strlen(l);
        int same = len > tail && l[len - 1] == '\n' && l[len - tail - 1] == '\t' &&
                   !memcmp(l + len - tail, abs, tail - 1);
        if (!same && end && skip == 0) {
            memcpy(out + o, l, len);
            o += len;
        } else if (skip)
            skip--;
        l += len;
    }
    memcpy(out + o, hex, 64);
    memcpy(out + o + 64, key, strlen(key));
    o += 64 + strlen(key);
    qs_free(all);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", cpath);
    char *slash = strrchr(dir, '/');
    qs_diag d = {0};
    if (slash && slash != dir) {
        *slash = '\0';
        if (fileio_mkdir_p(dir, &d)) {
            qs_free(out);
            return;
        }
    }
    fileio_write_atomic(cpath, out, o, &d);
    qs_free(out);
}

void digest_cache_store(const char *path, const char hex[65]) { digest_cache_put(path, hex, 1); }

void digest_cache_store_written(const char *path, const char hex[65])
{
    digest_cache_put(path, hex, 0);
}

/* The etag of huggingface_hub's download metadata for path, when it is a
 * SHA-256 and the file has not changed since the metadata was written. */
static int digest_hf_local_sha256(const char *path, const struct stat *st, char hex[65])
{
    char meta[4200];
    const char *slash = strrchr(path, '/');
    int n = slash ? snprintf(meta, sizeof meta, "%.*s/.cache/huggingface/download/%s.metadata",
                             (int)(slash - path), path, slash + 1)
                  : snprintf(meta, sizeof meta, ".cache/huggingface/download/%s.metadata", path);
    if (n <= 0 || (size_t)n >= sizeof meta)
        return 0;
    FILE *f = fopen(meta, "r");
    if (!f)
        return 0;
    char commit[128], etag[128], when[64];
    int ok = fgets(commit, sizeof commit, f) && fgets(etag, sizeof etag, f) &&
             fgets(when, sizeof when, f);
    fclose(f);
    if (!ok || strlen(etag) < 64 || (etag[64] != '\n' && etag[64] != '\0') || !digest_hex_ok(etag))
        return 0;
    char *end;
    double t = strtod(when, &end);
    if (end == when || (*end && *end != '\n'))
        return 0;
    /* written no later than the metadata says the download ended */
    if ((double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec * 1e-9 > t)
        return 0;
    memcpy(hex, etag, 64);
    hex[64] = '\0';
    return 1;
}

int digest_hf_sha256(const char *path, char hex[65])
{
    char target[4096];
    struct stat st;
    if (!digest_cache_enabled() || lstat(path, &st))
        return 0;
    if (S_ISREG(st.st_mode))
        return digest_hf_local_sha256(path, &st, hex);
    if (!S_ISLNK(st.st_mode))
        return 0;
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 64 + 6 || (size_t)n >= sizeof target - 1)
        return 0;
    target[n] = '\0';
    /* [.../]blobs/<64 hex>, the hex lower case as huggingface_hub names them */
    const char *name = target + n - 64, *dir = name - 6;
    if (memcmp(dir, "blobs/", 6) || (dir > target && dir[-1] != '/'))
        return 0;
    if (!digest_hex_ok(name) || stat(path, &st) || !S_ISREG(st.st_mode))
        return 0;
    memcpy(hex, name, 64);
    hex[64] = '\0';
    return 1;
}

int digest_known_impl(const char *path, size_t min_bytes, char hex[65])
{
    struct stat st;
    return stat(path, &st) == 0 && (size_t)st.st_size >= min_bytes &&
           (digest_hf_sha256(path, hex) || digest_cache_lookup(path, hex));
}

void digest_remember_impl(const char *path, size_t min_bytes, const char hex[65])
{
    struct stat st;
    if (stat(path, &st) == 0 && (size_t)st.st_size >= min_bytes)
        digest_cache_store(path, hex);
}

int digest_sha256_file_cached(const char *path, char hex[65], size_t min_bytes, qs_diag *d)
{
    if (digest_known_impl(path, min_bytes, hex))
        return 0;
    int rc = digest_sha256_file(path, hex, d);
    if (!rc)
        digest_remember_impl(path, min_bytes, hex);
    return rc;
}
