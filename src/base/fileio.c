/* fileio.c: see include/qs/fileio.h. */
#include "qs/fileio.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "qs/mem.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

static int read_raw(const char *path, char **data, size_t *bytes, qs_diag *d)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return diag_set(d, errno == ENOENT ? QS_ENOTFOUND : QS_EIO, path, -1, "cannot open: %s",
                        strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {   /* fopen opens one for reading */
        fclose(f);
        return diag_set(d, QS_EIO, path, -1, "is a directory; expected a file");
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = qs_malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory reading file");
    }
    for (;;) {
        if (n == cap) {
            char *nb = qs_realloc(buf, cap * 2 + 1);
            if (!nb) {
                qs_free(buf);
                fclose(f);
                return diag_set(d, QS_ENOMEM, path, -1, "out of memory reading file");
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        qs_free(buf);
        return diag_set(d, QS_EIO, path, -1, "read error");
    }
    buf[n] = 0;
    *data = buf;
    *bytes = n;
    return 0;
}

static int zstd_decompress_all(const char *path, const char *src, size_t src_bytes, char **data,
                               size_t *bytes, qs_diag *d)
{
    ZSTD_DStream *ds = ZSTD_createDStream();
    if (!ds)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory creating zstd stream");
    size_t cap = src_bytes * 4 + 4096, n = 0;
    char *out = qs_malloc(cap + 1);
    int rc = 0;
    size_t ret = 0;
    ZSTD_inBuffer in = {src, src_bytes, 0};
    if (!out) {
        rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory decompressing");
        goto done;
    }
    /* until the input is used up and the decoder has flushed what it holds (ret ==
     * 0: the last frame is complete; calling again would return a next-frame hint) */
    while (in.pos < in.size || ret != 0) {
        if (cap - n < 65536) {
            char *no = qs_realloc(out, cap * 2 + 1);
            if (!no) {
                rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory decompressing");
                goto done;
            }
            out = no;
            cap *= 2;
        }
        ZSTD_outBuffer ob = {out + n, cap - n, 0};
        ret = ZSTD_decompressStream(ds, &ob, &in);
        if (ZSTD_isError(ret)) {
            rc = diag_set(d, QS_EFORMAT, path, -1, "corrupt zstd data at byte %zu: %s", in.pos,
                          ZSTD_getErrorName(ret));
            goto done;
        }
        n += ob.pos;
        if (ob.pos == 0 && in.pos == in.size)
            break;   /* no progress and no input left */
    }
    if (ret != 0)
        rc = diag_set(d, QS_ETRUNC, path, -1, "zstd stream is truncated (file ends inside a frame)");
done:
    ZSTD_freeDStream(ds);
    if (rc) {
        qs_free(out);
        return rc;
    }
    out[n] = 0;
    *data = out;
    *bytes = n;
    return 0;
}

int fileio_read_all(const char *path, char **data, size_t *bytes, qs_diag *d)
{
    char *raw = NULL;
    size_t raw_bytes = 0;
    int rc = read_raw(path, &raw, &raw_bytes, d);
    if (rc || !ends_with(path, ".zst")) {
        if (!rc) {
            *data = raw;
            *bytes = raw_bytes;
        }
        return rc;
    }
    rc = zstd_decompress_all(path, raw, raw_bytes, data, bytes, d);
    qs_free(raw);
    return rc;
}

int fileio_map_open(fileio_map *m, const char *path, qs_diag *d)
{
    m->data = NULL;
    m->bytes = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return diag_set(d, errno == ENOENT ? QS_ENOTFOUND : QS_EIO, path, -1, "cannot open: %s",
                        strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return diag_set(d, QS_EIO, path, -1, "not a regular file");
    }
    if (st.st_size == 0) {
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return diag_set(d, QS_EIO, path, -1, "mmap failed: %s", strerror(errno));
    m->data = p;
    m->bytes = (size_t)st.st_size;
    return 0;
}

void fileio_unmap(fileio_map *m)
{
    if (m->data && m->bytes)
        munmap((void *)m->data, m->bytes);
    m->data = NULL;
    m->bytes = 0;
}

void fileio_map_release(const fileio_map *m, const void *p, size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    if (!m->data || page <= 0 || (const unsigned char *)p < m->data ||
        bytes > m->bytes - (size_t)((const unsigned char *)p - m->data))
        return;
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    uintptr_t hi = ((uintptr_t)p + bytes) / (uintptr_t)page * (uintptr_t)page;
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);   /* advice: failure is harmless */
}

int fileio_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int fileio_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int fileio_mkdir_p(const char *path, qs_diag *d)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return diag_set(d, QS_EINVAL, path, -1, "bad directory path");
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return diag_set(d, QS_EIO, buf, -1, "cannot create directory: %s", strerror(errno));
            buf[i] = c;
        }
    }
    if (!fileio_is_dir(path))
        return diag_set(d, QS_EIO, path, -1, "exists and is not a directory");
    return 0;
}

int fileio_join(char *buf, size_t buf_bytes, const char *dir, const char *name)
{
    size_t dn = strlen(dir);
    int need_slash = dn > 0 && dir[dn - 1] != '/';
    int w = snprintf(buf, buf_bytes, "%s%s%s", dir, need_slash ? "/" : "", name);
    return (w < 0 || (size_t)w >= buf_bytes) ? QS_ERANGE : 0;
}

int fileio_is_special(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

int fileio_output_target(const char *path, char *out, size_t out_bytes)
{
    struct stat lst;
    const char *target = path;
    char real[PATH_MAX], link[4096];
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        if (realpath(path, real)) {
            target = real;
        } else {   /* a link to a file not made yet: its target, beside the link if relative */
            ssize_t n = readlink(path, link, sizeof link - 1);
            if (n > 0) {
                link[n] = 0;
                const char *slash = strrchr(path, '/');
                if (link[0] != '/' && slash) {
                    char joined[4096];
                    int w = snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - path), path,
                                     link);
                    if (w < 0 || (size_t)w >= sizeof joined)
                        return QS_ERANGE;
                    memcpy(link, joined, (size_t)w + 1);
                }
                target = link;
            }
        }
    }
    int w = snprintf(out, out_bytes, "%s", target);
    return w < 0 || (size_t)w >= out_bytes ? QS_ERANGE : 0;
}

int afile_open(afile *af, const char *path, qs_diag *d)
{
    memset(af, 0, sizeof *af);
    if (fileio_is_special(path)) {   /* in place: a rename would replace the node itself */
        if (!(af->final_path = qs_strdup(path)))
            return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
        if (!(af->f = fopen(path, "wb"))) {
            int e = errno;
            afile_abort(af);
            return diag_set(d, QS_EIO, path, -1, "cannot open for writing: %s", strerror(e));
        }
        return 0;
    }
    /* a symbolic link stays one: the temp and the rename go to its target */
    char target[4096];
    if (fileio_output_target(path, target, sizeof target))
        return diag_set(d, QS_ERANGE, path, -1, "path too long");
    size_t n = strlen(target) + 32;
    af->tmp_path = qs_malloc(n);
    af->final_path = qs_strdup(target);
    if (!af->tmp_path || !af->final_path) {
        afile_abort(af);
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    }
    snprintf(af->tmp_path, n, "%s.tmp.%ld", af->final_path, (long)getpid());
    af->f = fopen(af->tmp_path, "wb");
    if (!af->f) {
        int e = errno;
        afile_abort(af);
        return diag_set(d, QS_EIO, path, -1, "cannot create: %s", strerror(e));
    }
    return 0;
}

int afile_commit(afile *af, qs_diag *d)
{
    int rc = 0;
    if (!af->f)
        return diag_set(d, QS_EIO, af->final_path, -1, "file not open");
    int bad = ferror(af->f) | fflush(af->f);
    bad |= fclose(af->f);
    af->f = NULL;
    if (bad)
        rc = diag_set(d, QS_EIO, af->final_path, -1, "write failed: %s", strerror(errno));
    else if (af->tmp_path && rename(af->tmp_path, af->final_path) != 0)
        rc = diag_set(d, QS_EIO, af->final_path, -1, "rename failed: %s", strerror(errno));
    if (rc && af->tmp_path)
        unlink(af->tmp_path);
    qs_free(af->tmp_path);
    qs_free(af->final_path);
    af->tmp_path = af->final_path = NULL;
    return rc;
}

void afile_abort(afile *af)
{
    if (af->f) {
        fclose(af->f);
        af->f = NULL;
    }
    if (af->tmp_path)
        unlink(af->tmp_path);
    qs_free(af->tmp_path);
    qs_free(af->final_path);
    af->tmp_path = af->final_path = NULL;
}

int fileio_write_atomic(const char *path, const void *data, size_t bytes, qs_diag *d)
{
    afile af;
    int rc = afile_open(&af, path, d);
    if (rc)
        return rc;
    if (bytes && fwrite(data, 1, bytes, af.f) != bytes) {
        int e = errno;
        afile_abort(&af);
        return diag_set(d, QS_EIO, path, -1, "write failed: %s", strerror(e));
    }
    return afile_commit(&af, d);
}

void fileio_dir_remove_flat(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    struct dirent *e;
    char path[4400];
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            !fileio_join(path, sizeof path, dir, e->d_name))
            unlink(path);
    closedir(dp);
    rmdir(dir);
}

int fileio_copy(const char *src, const char *dst, qs_diag *d)
{
    char *buf;
    size_t n;
    int rc = fileio_read_all(src, &buf, &n, d);
    if (rc)
        return rc;
    rc = fileio_write_atomic(dst, buf, n, d);
    qs_free(buf);
    return rc;
}
