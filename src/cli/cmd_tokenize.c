/* cmd_tokenize.c: qatscope tokenize — text to tokens, or files to token shards.
 *
 *   qatscope tokenize (--model DIR | --tokenizer FILE) [--ids] [--no-bos] TEXT|-
 *   qatscope tokenize --model DIR --input FILES... --out DIR [--val-fraction F] [--seed S]
 *
 * Text mode prints one "id<TAB>piece" line per token (pieces with control bytes
 * escaped as \xNN), or with --ids only the ids on one line.  Data mode is
 * shard_build_run() (src/data/shard_build.c); this file only parses flags.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/shard_build.h"
#include "qs/tokenizer.h"

static const char USAGE[] =
    "usage: qatscope tokenize (--model DIR | --tokenizer FILE) [--ids] [--no-bos] TEXT|-\n"
    "       qatscope tokenize --model DIR --input FILES... --out DIR [--val-fraction F] "
    "[--seed S] [--shard-tokens N]\n";

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
    return fflush(stdout) ? CLI_EXIT_USAGE : 0;   /* main() names a failed write */
}

/* What cli_args_parse leaves to tokenize: data-mode options, --input FILES..., TEXT. */
typedef struct tok_args {
    shard_build_opts opts;
    const char **inputs;
    int n_inputs, data_flag;   /* data_flag: index of the last data-mode option */
    const char *text;
} tok_args;

static int tok_arg(void *ctx, int argc, char **argv, int *i)
{
    tok_args *ta = ctx;
    const char *a = argv[*i], *v;
    long lv;
    int rc;
    if (cli_flag_is(a, "--val-fraction") || cli_flag_is(a, "--seed") ||
        cli_flag_is(a, "--shard-tokens")) {
        ta->data_flag = *i;
        if (!(v = cli_flag_value(argc, argv, i)))
            return CLI_EXIT_USAGE;
        if (cli_flag_is(a, "--val-fraction"))
            return cli_parse_double("--val-fraction", v, 0.0, 0.5, &ta->opts.val_fraction);
        if (cli_flag_is(a, "--seed")) {
            if (!(rc = cli_parse_long("--seed", v, 0, 0x7FFFFFFFFFFFFFFFL, &lv)))
                ta->opts.seed = (uint64_t)lv;
            return rc;
        }
        if (!(rc = cli_parse_long("--shard-tokens", v, 1024, 1L << 40, &lv)))
            ta->opts.shard_tokens = (uint64_t)lv;
        return rc;
    }
    if (!strcmp(a, "--input")) {
        while (*i + 1 < argc && argv[*i + 1][0] != '-')
            ta->inputs[ta->n_inputs++] = argv[++*i];
        return ta->n_inputs ? 0 : cli_error("--input: expected at least one file (argument %d)", *i);
    }
    if (a[0] == '-' && a[1])
        return -1;   /* an option: not ours */
    if (ta->text)
        return cli_error("tokenize: unexpected argument '%s' (argument %d): quote the text", a, *i);
    ta->text = a;
    return 0;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *tok = NULL, *out = NULL;
    int ids_only = 0, no_bos = 0;
    tok_args ta = {.inputs = qs_calloc((size_t)argc + 1, sizeof *ta.inputs)};
    if (!ta.inputs)
        return cli_error("out of memory");
    shard_build_opts_default(&ta.opts);
    const cli_opt table[] = {
        {"--model", CLI_OPT_STR, .out = &model},
        {"--tokenizer", CLI_OPT_STR, .out = &tok},
        {"--out", CLI_OPT_STR, .out = &out},
        {"--ids", CLI_OPT_SWITCH, .out = &ids_only},
        {"--no-bos", CLI_OPT_SWITCH, .out = &no_bos},
    };
    int rc = cli_args_parse("tokenize", USAGE, argc, argv, table, sizeof table / sizeof *table,
                            tok_arg, &ta);
    if (rc < 0) {
        qs_free(ta.inputs);
        return 0;
    }
    const char **inputs = ta.inputs, *text = ta.text;
    int n_inputs = ta.n_inputs, data_flag = ta.data_flag;
    shard_build_opts opts = ta.opts;
    if (!rc && !!model == !!tok)
        rc = cli_error("tokenize: give exactly one of --model DIR or --tokenizer FILE");
    if (!rc && n_inputs > 0) {
        if (ids_only || no_bos)
            rc = cli_error("tokenize: --ids and --no-bos are for text mode, not with --input");
        else if (text)
            rc = cli_error("tokenize: TEXT and --input are exclusive (got '%s')", text);
        else if (!out)
            rc = cli_error("tokenize: --input needs --out DIR");
        if (!rc) {
            qs_diag d = {0};
            shard_build_summary sum;
            if (shard_build_run(model ? model : tok, inputs, n_inputs, out, &opts, &sum, &d))
                rc = cli_diag_error(&d);
            else
                printf("%s: %llu documents, %llu train tokens in %d shard(s), %llu val tokens in "
                       "%d shard(s)\n",
                       out, (unsigned long long)sum.n_docs, (unsigned long long)sum.train_tokens,
                       sum.train_shards, (unsigned long long)sum.val_tokens, sum.val_shards);
        }
    } else if (!rc) {
        if (data_flag)
            rc = cli_error("tokenize: %s is for data mode (--input FILES... --out DIR)",
                           argv[data_flag]);
        else if (out)
            rc = cli_error("tokenize: --out is only for data mode (--input FILES...)");
        else if (!text)
            rc = cli_error("tokenize: missing TEXT (or '-' for stdin)");
        else
            rc = text_mode(model ? model : tok, text, ids_only, no_bos);
    }
    qs_free(inputs);
    return rc;
}
