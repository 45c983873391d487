/* digest_cache.c: the SHA-256 of large files remembered between runs.
 *
 * Hashing a 1B checkpoint (2.3 GB) costs ~2.5 CPU-seconds even with the SHA
 * extensions, as much as loading it; evaluating the same checkpoint again
 * (another task, a gate in CI) need not pay it again.  An entry is keyed by
 * what stat(2) says of the file — device, inode, size, modification and status
 * change times to the nanosecond — plus its absolute path, so any write to the
 * file, a replacement (new inode) or a touch makes it miss, as git's index
 * does.  A file modified less than DIGEST_CACHE_RACY_S ago is not stored (a
 * write in the same clock tick as the hash could go unseen).
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

/* The entry line of path (absolute) with its stat key, without the hex. */
static int digest_cache_key(char *out, size_t cap, const char *abs, const struct stat *st)
{
    int n = snprintf(out, cap, "\t%llu\t%llu\t%lld\t%lld.%09ld\t%lld.%09ld\t%s\n",
                     (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
                     (long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
                     (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec, abs);
    return n > 0 && (size_t)n < cap ? 0 : -1;
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
    if (digest_cache_path(cpath, sizeof cpath) || !realpath(path, abs) || stat(abs, &st) ||
        digest_cache_key(key, sizeof key, abs, &st))
        return 0;
    char *all = digest_cache_read(cpath);
    int hit = 0;
    for (char *line = all; line && *line && !hit;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        if (len == 64 + strlen(key) && !memcmp(line + 64, key, strlen(key)) && digest_hex_ok(line)) {
            memcpy(hex, line, 64);
            hex[64] = '\0';
            hit = 1;
        }
        line += len;
    }
    qs_free(all);
    return hit;
}

void digest_cache_store(const char *path, const char hex[65])
{
    char cpath[1024], abs[4096], key[4400];
    struct stat st;
    if (digest_cache_path(cpath, sizeof cpath) || !realpath(path, abs) || stat(abs, &st) ||
        digest_cache_key(key, sizeof key, abs, &st) || !digest_hex_ok(hex) ||
        (long long)time(NULL) - (long long)st.st_mtim.tv_sec < DIGEST_CACHE_RACY_S ||
        (long long)time(NULL) - (long long)st.st_ctim.tv_sec < DIGEST_CACHE_RACY_S)
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

int digest_sha256_file_cached(const char *path, char hex[65], size_t min_bytes, qs_diag *d)
{
    struct stat st;
    if (stat(path, &st) == 0 && (size_t)st.st_size >= min_bytes && digest_cache_lookup(path, hex))
        return 0;
    int rc = digest_sha256_file(path, hex, d);
    if (!rc && stat(path, &st) == 0 && (size_t)st.st_size >= min_bytes)
        digest_cache_store(path, hex);
    return rc;
}
