/* outfile.c: output files a command publishes together, checked before the work
 * and renamed into place only when every one of them was written (see cli.h).
 *
 * Each output gets a hidden temp name beside its final name that keeps the final
 * name's ending (".tmp.<pid>.results.json", ".tmp.<pid>.samples.jsonl.zst"), so
 * writers that pick plain or zstd by the suffix behave as for the final name, and
 * the rename stays within one directory (one filesystem). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "qs/fileio.h"
#include "qs/plots.h"

int cli_outputs_add(cli_outputs *o, const char *flag, const char *path)
{
    const char *given = path;
    if (o->n == CLI_OUTPUTS_MAX)
        return cli_error("%s: at most %d outputs", flag, CLI_OUTPUTS_MAX);
    if (!*path)
        return cli_error("%s: expected a file name, got ''", flag);
    if (fileio_is_dir(path))
        return cli_error("%s: '%s' is a directory; expected a file name", flag, path);
    o->f[o->n].direct = 0;
    if (fileio_is_special(path)) {   /* a rename would replace the device node itself */
        int w = snprintf(o->f[o->n].tmp, sizeof o->f[0].tmp, "%s", path);
        if (w < 0 || (size_t)w >= sizeof o->f[0].tmp)
            return cli_error("%s: path too long: '%s'", flag, path);
        o->f[o->n].direct = 1;
        o->f[o->n].flag = flag;
        o->f[o->n].path = path;
        o->n++;
        return 0;
    }
    /* a symbolic link stays a link: its target is what gets replaced */
    if (fileio_output_target(path, o->f[o->n].real, sizeof o->f[0].real))
        return cli_error("%s: path too long: '%s'", flag, path);
    path = o->f[o->n].real;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[CLI_PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) < sizeof dir)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else
        return cli_error("%s: path too long: '%s'", flag, path);
    if (!*base)
        return cli_error("%s: '%s' names a directory; expected a file name", flag, path);
    qs_diag d = {0};
    if (!fileio_is_dir(dir) && fileio_mkdir_p(dir, &d)) {   /* missing parents are created */
        char msg[QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 32];
        diag_format(&d, msg, sizeof msg);
        return cli_error("%s: cannot create the directory of '%s': %s", flag, path, msg);
    }
    /* one file under two spellings ("a/r.json", "a/../a/r.json", a link to it):
     * both would be written and one rename would find its temp gone */
    struct stat dst;
    if (stat(dir, &dst) == 0) {
        for (int i = 0; i < o->n; i++)
            if (!o->f[i].direct && o->f[i].dir_dev == dst.st_dev &&
                o->f[i].dir_ino == dst.st_ino && !strcmp(o->f[i].base, base))
                return cli_error("%s: '%s' is the %s file '%s'; expected another name (one "
                                 "would overwrite the other)", flag, given, o->f[i].flag,
                                 o->f[i].path);
        o->f[o->n].dir_dev = dst.st_dev;
        o->f[o->n].dir_ino = dst.st_ino;
    }
    o->f[o->n].base = base;
    char *tmp = o->f[o->n].tmp;
    int w = snprintf(tmp, sizeof o->f[0].tmp, "%s/.tmp.%ld.%s", dir, (long)getpid(), base);
    if (w < 0 || (size_t)w >= sizeof o->f[0].tmp)
        return cli_error("%s: path too long: '%s'", flag, path);
    /* writable?  a real file, so read-only mounts and permissions (not root's
     * view of them) decide, long before the outputs are written */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return cli_error("%s: cannot write in '%s': %s", flag, dir, strerror(errno));
    close(fd);
    unlink(tmp);
    o->f[o->n].flag = flag;
    o->f[o->n].path = path;
    o->n++;
    return 0;
}

const char *cli_outputs_tmp(const cli_outputs *o, int i)
{
    return o->f[i].tmp;
}

void cli_outputs_discard(cli_outputs *o)
{
    for (int i = 0; i < o->n; i++)
        if (!o->f[i].direct)
            unlink(o->f[i].tmp);
    o->n = 0;
}

int cli_outputs_commit(cli_outputs *o)
{
    for (int i = 0; i < o->n; i++)
        if (!o->f[i].direct && !fileio_exists(o->f[i].tmp)) {
            cli_outputs_discard(o);
            return cli_error("%s: '%s' was not written", o->f[i].flag, o->f[i].path);
        }
    for (int i = 0; i < o->n; i++)
        if (!o->f[i].direct && rename(o->f[i].tmp, o->f[i].path) != 0) {
            int e = errno;
            for (int j = 0; j < i; j++)   /* all or none: take back the ones already placed */
                if (!o->f[j].direct)
                    unlink(o->f[j].path);
            cli_outputs_discard(o);
            return cli_error("%s: cannot rename into '%s': %s", o->f[i].flag, o->f[i].path,
                             strerror(e));
        }
    o->n = 0;
    return 0;
}

int cli_output_not_input(const char *flag, const char *path, const char *in_flag,
                         const char *input)
{
    struct stat a, b;
    if (!path || !input || stat(path, &a) || stat(input, &b) || !S_ISREG(a.st_mode))
        return 0;
    if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return cli_error("%s: '%s' is the %s file '%s'; expected another name (it would be "
                         "overwritten)", flag, path, in_flag, input);
    return 0;
}

/* Depth-first search of dir for a regular file with the inode of *a (links to
 * files followed, linked directories not: no cycles); the match's path in hit. */
static int under_dir(const struct stat *a, const char *dir, int depth, long *budget,
                     char *hit, size_t n)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(dp)) && --*budget > 0;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[CLI_PATH_MAX];
        int w = snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st, lst;
        if (w < 0 || (size_t)w >= sizeof p || stat(p, &st))
            continue;
        if (S_ISREG(st.st_mode) && st.st_dev == a->st_dev && st.st_ino == a->st_ino) {
            snprintf(hit, n, "%s", p);
            found = 1;
        } else if (S_ISDIR(st.st_mode) && depth > 0 && !lstat(p, &lst) && S_ISDIR(lst.st_mode)) {
            found = under_dir(a, p, depth - 1, budget, hit, n);
        }
    }
    closedir(dp);
    return found;
}

int cli_output_not_under(const char *flag, const char *path, const char *in_flag,
                         const char *dir)
{
    struct stat a;
    if (!path || !dir || stat(path, &a) || !S_ISREG(a.st_mode))
        return 0;
    char hit[CLI_PATH_MAX];
    long budget = 200000;   /* entries looked at: a data directory, not a whole disk */
    if (under_dir(&a, dir, 6, &budget, hit, sizeof hit))
        return cli_error("%s: '%s' is the file '%s' of %s; expected another name (it would be "
                         "overwritten)", flag, path, hit, in_flag);
    return 0;
}

int cli_output_png_or_new(const char *flag, const char *path)
{
    struct stat st;
    if (stat(path, &st) || !S_ISREG(st.st_mode) || st.st_size == 0 ||
        plots_png_signature(path) != 0)
        return 0;
    return cli_error("%s: '%s' exists and is not a PNG; not overwritten (expected a new file or "
                     "an earlier picture)", flag, path);
}
