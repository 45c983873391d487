/* cmd_detokenize.c: qatscope detokenize — token ids back to text.
 *
 *   qatscope detokenize (--model DIR | --tokenizer FILE) [--keep-special] IDS...|-
 *
 * Prints the decoded text and a newline.  Special tokens (BOS/EOS...) are skipped
 * unless --keep-special, so `detokenize $(tokenize --ids TEXT)` gives TEXT back.
 */
#include <stdio.h>
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

/* IDS arguments ("-" = stdin), collected by cli_args_parse */
typedef struct detok_ids {
    int32_t *ids;
    size_t n, cap;
    int n_args;
} detok_ids;

static int detok_arg(void *ctx, int argc, char **argv, int *i)
{
    (void)argc;
    detok_ids *di = ctx;
    const char *a = argv[*i];
    if (a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9'))
        return -1;   /* an option: not ours */
    di->n_args++;
    if (strcmp(a, "-")) {
        char where[32];
        snprintf(where, sizeof where, "argument %d", *i);
        return parse_ids(a, strlen(a), where, &di->ids, &di->n, &di->cap);
    }
    char *text;
    size_t len;
    qs_diag rd = {0};
    if (fileio_read_all("/dev/stdin", &text, &len, &rd))
        return cli_diag_error(&rd);
    int rc = parse_ids(text, len, "stdin", &di->ids, &di->n, &di->cap);
    qs_free(text);
    return rc;
}

int cmd_detokenize(int argc, char **argv)
{
    const char *model = NULL, *tok = NULL;
    int keep_special = 0;
    detok_ids di = {0};
    const cli_opt opts[] = {
        {"--model", CLI_OPT_STR, .out = &model},
        {"--tokenizer", CLI_OPT_STR, .out = &tok},
        {"--keep-special", CLI_OPT_SWITCH, .out = &keep_special},
    };
    int rc = cli_args_parse("detokenize", USAGE, argc, argv, opts, sizeof opts / sizeof *opts,
                            detok_arg, &di);
    if (rc < 0) {
        qs_free(di.ids);
        return 0;
    }
    int32_t *ids = di.ids;
    size_t n = di.n;
    int n_args = di.n_args;
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
            rc = CLI_EXIT_USAGE;   /* main() names the error */
    }
    tokenizer_destroy(t);
    qs_free(ids);
    return rc;
}
