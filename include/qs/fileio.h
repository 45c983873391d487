/* fileio.h: checked file reading, read-only mmap, atomic writes.
 *
 * Contract: no partial output presented as complete.  afile_* writes to
 * "PATH.tmp.<pid>" and renames over PATH only in afile_commit() after a checked
 * fflush/fclose; afile_abort() (or a crash) leaves PATH untouched.
 */
#ifndef QS_FILEIO_H
#define QS_FILEIO_H

#include <stddef.h>
#include <stdio.h>

#include "qs/err.h"

/* Whole file into a NUL-terminated qs_malloc'd buffer (*bytes excludes the NUL).
 * A name ending in ".zst" is zstd-decompressed transparently. */
int fileio_read_all(const char *path, char **data, size_t *bytes, qs_diag *d);

/* Read-only mapping of a whole file.  Zero-initialise; fileio_unmap is safe on a zeroed map. */
typedef struct fileio_map {
    const unsigned char *data;
    size_t bytes;
} fileio_map;
int fileio_map_open(fileio_map *m, const char *path, qs_diag *d);
void fileio_unmap(fileio_map *m);
/* Drop the whole pages of [p, p + bytes) (inside m) from the process's memory:
 * they are read again from the file if touched (a loader that is done with a
 * tensor keeps its resident memory to what it made of it). */
void fileio_map_release(const fileio_map *m, const void *p, size_t bytes);

int fileio_exists(const char *path);          /* 1 if path exists (any type) */
/* 1 if path (after symbolic links) is a device, FIFO or socket: an output path
 * that is written in place, not through a temp file and a rename. */
int fileio_is_special(const char *path);
/* Where writing to path through a temp file and a rename must rename to: path
 * itself, or the target of the symbolic link path (realpath, or for a link to a
 * file not made yet its readlink beside the link), so the link stays a link.
 * 0 on success, QS_ERANGE when out is too small. */
int fileio_output_target(const char *path, char *out, size_t out_bytes);
int fileio_is_dir(const char *path);          /* 1 if path is a directory */
int fileio_mkdir_p(const char *path, qs_diag *d); /* like mkdir -p */

/* Join a directory and a name into buf; returns QS_ERANGE if it does not fit. */
int fileio_join(char *buf, size_t buf_bytes, const char *dir, const char *name);
/* Removes dir and the plain files in it (a temp directory this program filled);
 * best effort, no recursion: a subdirectory makes the final rmdir fail. */
void fileio_dir_remove_flat(const char *dir);

/* Atomic writer. */
typedef struct afile {
    FILE *f;
    char *tmp_path;     /* NULL: written in place (a device, FIFO or socket) */
    char *final_path;
} afile;
/* Opens "wb" on a temp file beside path (beside the target of a symbolic link,
 * which stays a link); a path that is a device, FIFO or socket (/dev/stdout, a
 * pipe) is written in place, as a shell redirection would, never replaced. */
int afile_open(afile *af, const char *path, qs_diag *d);
int afile_commit(afile *af, qs_diag *d);  /* flush, close, rename; frees af */
void afile_abort(afile *af);              /* close, unlink temp; safe on zeroed af */
/* One-shot atomic write of a buffer. */
int fileio_write_atomic(const char *path, const void *data, size_t bytes, qs_diag *d);
/* Copies src to dst atomically (read whole, write tmp, rename). */
int fileio_copy(const char *src, const char *dst, qs_diag *d);

#endif
