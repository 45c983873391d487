/* cmd_version.c: qatscope version — version, build flags, CPU paths. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "qs/cpu.h"
#include "qs/version.h"

int cmd_version(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: qatscope version   (also: qatscope --version)\n"
               "  the version, whether OpenMP is on, and the CPU paths in use\n");
        return 0;
    }
    if (argc > 1)
        return cli_error("version: unexpected argument '%s' (argument 1)", argv[1]);
    printf("qatscope %s\n", QS_VERSION);
#ifdef _OPENMP
    printf("openmp: yes\n");
#else
    printf("openmp: no\n");
#endif
    printf("cpu: %s\n", cpu_describe());
    return 0;
}
