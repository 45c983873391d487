/* cmd_tokenize.c: qatscope tokenize — text to tokens, or files to token shards.
 *
 *   qatscope tokenize (--model DIR | --tokenizer FILE) [--ids] [--no-bos] TEXT|-
 *   qatscope tokenize --model DIR --input FILES... --out DIR [--val-fraction F] [--seed S]
 *
 * Text mode prints one "id<TAB>piece" line per token (pieces with control bytes
 * escaped as \xNN), or with --ids only the ids on one line.  Data mode is
 * shard_build_run() (src/shard_build.c); this file only parses flags.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/tokenizer.h"

static const char USAGE[] =
    "usage: qatscope tokenize (--model DIR | --tokenizer FILE) [--ids] [--no-bos] TEXT|-\n";

static void print_piece(const char *p)
{
    for (const unsigned char *s = (const unsigned char *)p; *s; s++) {
        if (*s < 0x20 || *s == 0x7F || *s == '\\')
            printf("\\x%02X", *s);
        else
            putchar(*s);
    }
}

static int text_mode(const char *tok_path, const char *text_arg, int ids_only, int no_bos)
{
    qs_diag d = {0};
    tokenizer *t;
    if (tokenizer_create(&t, tok_path, &d))
        return cli_diag_error(&d);
    char *text = NULL;
    size_t len;
    int rc = 0;
    if (!strcmp(text_arg, "-")) {
        qs_diag rd = {0};
        if (fileio_read_all("/dev/stdin", &text, &len, &rd))
            rc = cli_diag_error(&rd);
    } else {
        len = strlen(text_arg);
    }
    if (rc) {
        tokenizer_destroy(t);
        return rc;
    }
    int32_t *ids;
    size_t n;
    if (tokenizer_encode(t, text ? text : text_arg, len,
                         no_bos ? TOKENIZER_BOS_NO : TOKENIZER_BOS_DEFAULT, &ids, &n, &d)) {
        qs_free(text);
        tokenizer_destroy(t);
        return cli_diag_error(&d);
    }
    for (size_t i = 0; i < n; i++) {
        if (ids_only) {
            printf(i ? " %ld" : "%ld", (long)ids[i]);
        } else {
            printf("%ld\t", (long)ids[i]);
            print_piece(tokenizer_piece(t, ids[i]));
            putchar('\n');
        }
    }
    if (ids_only)
        putchar('\n');
    qs_free(ids);
    qs_free(text);
    tokenizer_destroy(t);
    return fflush(stdout) ? cli_error("error writing stdout") : 0;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *tok = NULL, *text = NULL;
    int ids_only = 0, no_bos = 0, rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            return 0;
        } else if (cli_flag_is(a, "--model")) {
            rc = (v = cli_flag_value(argc, argv, &i)) ? (model = v, 0) : CLI_EXIT_USAGE;
        } else if (cli_flag_is(a, "--tokenizer")) {
            rc = (v = cli_flag_value(argc, argv, &i)) ? (tok = v, 0) : CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--ids")) {
            ids_only = 1;
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = 1;
        } else if (a[0] == '-' && a[1]) {
            rc = cli_error("tokenize: unknown option '%s' (argument %d)\n%s", a, i, USAGE);
        } else if (!text) {
            text = a;
        } else {
            rc = cli_error("tokenize: unexpected argument '%s' (argument %d): quote the text", a,
                           i);
        }
    }
    if (!rc && !!model == !!tok)
        rc = cli_error("tokenize: give exactly one of --model DIR or --tokenizer FILE\n%s", USAGE);
    if (!rc && !text)
        rc = cli_error("tokenize: missing TEXT (or '-' for stdin)\n%s", USAGE);
    if (!rc)
        rc = text_mode(model ? model : tok, text, ids_only, no_bos);
    return rc;
}
