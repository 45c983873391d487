/* cli_dist.c: how `train` and `eval` run as one job under mpirun.
 *
 * Start: dist_init, then two agreements that every rank runs the same build
 * (SHA-256 of /proc/self/exe) and the same command line.  While several ranks
 * run, error lines are not printed where they arise but kept (cli_error); the
 * command's end is a closing agreement (cli_dist_end): every rank states its
 * exit status, a failure anywhere becomes every rank's failure, and rank 0 alone
 * prints the one line, naming the rank ("qatscope: rank 1: PATH: msg").  A rank
 * that fails outside the library's own agreements (a bad file it alone sees)
 * meets the others in their next agreement through this closing one, so nobody
 * blocks.  A rank that dies is Open MPI's to handle: mpirun ends the job.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "qs/digest.h"
#include "qs/dist.h"

static int cli_dist_on;                         /* several ranks: errors are kept */
static char cli_dist_line[QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 64];   /* the first one */

int cli_dist_keep_error(const char *line)
{
    if (!cli_dist_on)
        return 0;
    if (!cli_dist_line[0])
        snprintf(cli_dist_line, sizeof cli_dist_line, "%s", line);
    return 1;
}

uint64_t cli_hash64(const void *data, size_t bytes)
{
    digest_sha256 s;
    char hex[65];
    digest_sha256_init(&s);
    digest_sha256_update(&s, data, bytes);
    digest_sha256_final(&s, hex);
    uint64_t v = 0;
    for (int i = 0; i < 16; i++)
        v = v << 4 | (uint64_t)(hex[i] <= '9' ? hex[i] - '0' : hex[i] - 'a' + 10);
    return v;
}

int cli_dist_begin(int *argc, char ***argv)
{
    qs_diag d = {0};
    if (dist_init(argc, argv, &d))
        return cli_diag_error(&d);
    if (dist_size() == 1)
        return 0;
    cli_dist_on = 1;
    for (int i = 1; i < *argc && dist_rank() != 0; i++)   /* help: one copy, rank 0's */
        if (!strcmp((*argv)[i], "--help") || !strcmp((*argv)[i], "-h") ||
            !strcmp((*argv)[i], "--help-config"))
            if (!freopen("/dev/null", "w", stdout))
                return cli_error("--help: cannot silence rank %d's copy", dist_rank());
    char hex[65] = "";
    uint64_t build = 0, cmdline = 0;
    int rc = digest_sha256_file("/proc/self/exe", hex, &d);
    if (!rc)
        build = cli_hash64(hex, 64);
    digest_sha256 s;
    digest_sha256_init(&s);
    for (int i = 1; i < *argc; i++)
        digest_sha256_update(&s, (*argv)[i], strlen((*argv)[i]) + 1);
    digest_sha256_final(&s, hex);
    cmdline = cli_hash64(hex, 64);
    if ((rc = dist_agree(rc, build, "the qatscope binary", &d)) ||
        (rc = dist_agree(0, cmdline, "the command line", &d)))
        return cli_diag_error(&d);
    return 0;
}

/* exit status -> a status code for the agreement and back; 128 + a signal (an
 * interrupted train: 130, 143) is a request, which every rank then exits with */
static int cli_dist_code(int exit_status)
{
    return exit_status == CLI_EXIT_OK     ? 0
           : exit_status == CLI_EXIT_FAIL ? QS_ESTOP
           : exit_status > 128            ? exit_status
                                          : QS_EINVAL;
}

int cli_dist_end(int exit_status)
{
    if (!cli_dist_on) {
        dist_finalize();
        return exit_status;
    }
    if (!dist_failure_agreed()) {
        qs_diag d = {0};
        if (exit_status && exit_status <= 128)
            diag_set(&d, cli_dist_code(exit_status), NULL, -1, "%s",
                     cli_dist_line[0] ? cli_dist_line : "failed (no message)");
        int rc = dist_agree(cli_dist_code(exit_status), 0, NULL, &d);
        if (rc > 0) {
            exit_status = rc;   /* every rank stopped by the signal one of them took */
        } else if (rc) {
            exit_status = rc == QS_ESTOP || rc == QS_ENAN ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
            char line[sizeof cli_dist_line];
            diag_format(&d, line, sizeof line);
            snprintf(cli_dist_line, sizeof cli_dist_line, "%s", line);
        }
    } else if (!exit_status) {
        exit_status = CLI_EXIT_USAGE;   /* agreed failure the command did not report */
    }
    cli_dist_on = 0;
    if (exit_status && dist_rank() == 0)
        fprintf(stderr, "qatscope: %s\n", cli_dist_line[0] ? cli_dist_line : "failed");
    fflush(stdout);
    dist_finalize();
    return exit_status;
}
