/* paths.c: files that ship with qatscope (tasks/, data/demo/) are found relative to
 * the binary, never the current directory: one rule for eval's task definitions,
 * train's in-loop evaluation and demo (see cli.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "qs/fileio.h"

/* The binary's tree: bin/qatscope -> the repository; build/<kind>/bin/qatscope
 * (make check, make test-noomp) -> up to three levels above bin/. */
#define CLI_INSTALL_LEVELS 3

/* abs shown relative to the current directory when it lies below it (the paths
 * printed from the repository root stay "data/demo/model", "tasks"). */
static void cli_path_show(const char *abs, char *out, size_t n)
{
    char cwd[PATH_MAX];
    size_t k = getcwd(cwd, sizeof cwd) ? strlen(cwd) : 0;
    if (k > 1 && !strncmp(abs, cwd, k) && abs[k] == '/')
        snprintf(out, n, "%s", abs + k + 1);
    else if (k == 1 && abs[0] == '/')   /* cwd is "/" */
        snprintf(out, n, "%s", abs + 1);
    else
        snprintf(out, n, "%s", abs);
}

int cli_install_path(const char *rel, char *out, size_t n)
{
    char dir[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (k > 0) {
        dir[k] = 0;
        for (int up = 0; up <= CLI_INSTALL_LEVELS; up++) {
            char *slash = strrchr(dir, '/');
            if (!slash || slash == dir)
                break;
            *slash = 0;   /* up == 0: the binary's directory; then its parents */
            char probe[PATH_MAX + 256], real[PATH_MAX];
            if (up == 0 || fileio_join(probe, sizeof probe, dir, rel) || !fileio_exists(probe) ||
                !realpath(probe, real))
                continue;
            cli_path_show(real, out, n);
            return 0;
        }
    }
    snprintf(out, n, "%s", rel);   /* a binary outside its tree: the current directory */
    return 1;
}
