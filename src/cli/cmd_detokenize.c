/* cmd_detokenize.c: qatscope detokenize — token ids back to text.
 *
 *   qatscope detokenize (--model DIR | --tokenizer FILE) [--keep-special] IDS...|-
 *
 * Prints the decoded text and a newline.  Special tokens (BOS/EOS...) are skipped
 * unless --keep-special, so `detokenize $(tokenize --ids TEXT)` gives TEXT back.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/tokenizer.h"

static const char USAGE[] =
    "usage: qatscope detokenize (--model DIR | --tokenizer FILE) [--keep-special] IDS...|-\n";

/* ids of s[0..len) appended (tokenizer_ids_parse); 0 or an exit code */
static int parse_ids(const char *s, size_t len, const char *where, int32_t **ids, size_t *n,
                     size_t *cap)
{
    qs_diag d = {0};
    if (tokenizer_ids_parse(s, len, ids, n, cap, &d))
        return cli_error("detokenize: %s: %s", where, d.msg);
    return 0;
}

int cmd_detokenize(int argc, char **argv)
{
    const char *model = NULL, *tok = NULL, *v;
    int keep_special = 0, rc = 0, n_args = 0;
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            qs_free(ids);
            return 0;
        } else if (cli_flag_is(a, "--model")) {
            rc = (v = cli_flag_value(argc, argv, &i)) ? (model = v, 0) : CLI_EXIT_USAGE;
        } else if (cli_flag_is(a, "--tokenizer")) {
            rc = (v = cli_flag_value(argc, argv, &i)) ? (tok = v, 0) : CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--keep-special")) {
            keep_special = 1;
        } else if (!strcmp(a, "-")) {
            char *text;
            size_t len;
            n_args++;
            qs_diag rd = {0};
            if (fileio_read_all("/dev/stdin", &text, &len, &rd))
                rc = cli_diag_error(&rd);
            if (!rc) {
                rc = parse_ids(text, len, "stdin", &ids, &n, &cap);
                qs_free(text);
            }
        } else if (a[0] == '-' && !(a[1] >= '0' && a[1] <= '9')) {
            rc = cli_error("detokenize: unknown option '%s' (argument %d); run 'qatscope detokenize --help'", a, i);
        } else {
            char where[32];
            snprintf(where, sizeof where, "argument %d", i);
            n_args++;
            rc = parse_ids(a, strlen(a), where, &ids, &n, &cap);
        }
    }
    if (!rc && !!model == !!tok)
        rc = cli_error("detokenize: give exactly one of --model DIR or --tokenizer FILE");
    if (!rc && n_args == 0)
        rc = cli_error("detokenize: missing IDS (or '-' for stdin)");
    if (rc) {
        qs_free(ids);
        return rc;
    }
    qs_diag d = {0};
    tokenizer *t;
    char *text;
    size_t len;
    if (tokenizer_create(&t, model ? model : tok, &d)) {
        qs_free(ids);
        return cli_diag_error(&d);
    }
    if (tokenizer_decode(t, ids, n, !keep_special, &text, &len, &d)) {
        rc = cli_diag_error(&d);
    } else {
        fwrite(text, 1, len, stdout);
        putchar('\n');
        qs_free(text);
        if (fflush(stdout))
            rc = cli_error("error writing stdout");
    }
    tokenizer_destroy(t);
    qs_free(ids);
    return rc;
}
