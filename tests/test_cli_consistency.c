/* test_cli_consistency.c: the rules every command follows the same way (issue 16.8):
 * --help answers on stdout with exit 0, documented flags are accepted, limits and
 * messages agree between commands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "test.h"

static char cli_out[65536], cli_err[8192];

/* Every command that `qatscope --help` lists answers `--help` with its usage on
 * stdout, nothing on stderr and exit 0 (`version --help` was an error). */
TEST(cli_consistency, every_listed_command_answers_help)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    static char list[65536];
    ASSERT_EQ_INT(test_run_cli("--help", list, sizeof list, cli_err, sizeof cli_err), 0);
    int n = 0;
    for (char *line = strstr(list, "\n  "); line; line = strstr(line + 1, "\n  ")) {
        char name[32], args[64];
        if (sscanf(line + 3, "%31s", name) != 1)
            continue;
        snprintf(args, sizeof args, "%s --help", name);
        int rc = test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err);
        if (rc != 0 || !strstr(cli_out, "usage: qatscope") || cli_err[0])
            fprintf(stderr, "    %s --help: exit %d, stderr '%s'\n", name, rc, cli_err);
        ASSERT_EQ_INT(rc, 0);
        ASSERT_TRUE(strstr(cli_out, "usage: qatscope") != NULL);
        ASSERT_EQ_STR(cli_err, "");
        n++;
    }
    ASSERT_TRUE(n >= 15);
}
