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
    return fflush(stdout) ? cli_error("error writing stdout") : 0;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *tok = NULL, *text = NULL, *out = NULL;
    int ids_only = 0, no_bos = 0, data_flag = 0;
    shard_build_opts opts;
    shard_build_opts_default(&opts);
    const char **inputs = qs_calloc((size_t)argc + 1, sizeof *inputs);
    int n_inputs = 0, rc = 0;
    if (!inputs)
        return cli_error("out of memory");
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i], *v;
        long lv;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            qs_free(inputs);
            return 0;
        } else if (cli_flag_is(a, "--model")) {
            rc = (v = cli_flag_value(argc, argv, &i)) ? (model = v, 0) : CLI_EXIT_USAGE;
        } else if (cli_flag_is(a, "--tokenizer")) {
            rc = (v = cli_flag_value(argc, argv, &i)) ? (tok = v, 0) : CLI_EXIT_USAGE;
        } else if (cli_flag_is(a, "--out")) {
            rc = (v = cli_flag_value(argc, argv, &i)) ? (out = v, 0) : CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--ids")) {
            ids_only = 1;
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = 1;
        } else if (cli_flag_is(a, "--val-fraction")) {
            data_flag = i;
            rc = (v = cli_flag_value(argc, argv, &i))
                     ? cli_parse_double("--val-fraction", v, 0.0, 0.5, &opts.val_fraction)
                     : CLI_EXIT_USAGE;
        } else if (cli_flag_is(a, "--seed")) {
            data_flag = i;
            rc = (v = cli_flag_value(argc, argv, &i))
                     ? cli_parse_long("--seed", v, 0, 0x7FFFFFFFFFFFFFFFL, &lv)
                     : CLI_EXIT_USAGE;
            opts.seed = rc ? 0 : (uint64_t)lv;
        } else if (cli_flag_is(a, "--shard-tokens")) {
            data_flag = i;
            rc = (v = cli_flag_value(argc, argv, &i))
                     ? cli_parse_long("--shard-tokens", v, 1024, 1L << 40, &lv)
                     : CLI_EXIT_USAGE;
            opts.shard_tokens = rc ? 0 : (uint64_t)lv;
        } else if (!strcmp(a, "--input")) {
            while (i + 1 < argc && argv[i + 1][0] != '-')
                inputs[n_inputs++] = argv[++i];
            if (n_inputs == 0)
                rc = cli_error("--input: expected at least one file (argument %d)", i);
        } else if (a[0] == '-' && a[1]) {
            rc = cli_error("tokenize: unknown option '%s' (argument %d); run 'qatscope tokenize --help'", a, i);
        } else if (!text) {
            text = a;
        } else {
            rc = cli_error("tokenize: unexpected argument '%s' (argument %d): quote the text", a,
                           i);
        }
    }
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
