/* cmd_hif8.c: qatscope hif8 — look at, encode and decode HiF8 codes.
 *
 *   qatscope hif8 [--saturate] VALUE...   per value: input, fp32, code (hex and
 *                                          S_DOT_EXP_MAN bits), value, relative error
 *   qatscope hif8 encode [--saturate] [--bits]   stdin numbers -> one 0xHH per line
 *   qatscope hif8 decode                   stdin codes (decimal or 0xHH) -> %a per line
 *   qatscope hif8 table                    all 256 codes with fields and values
 *
 * Stdin is read completely and validated before anything is printed, so a bad
 * token gives one error line (token, line, position) and exit 2 with no
 * partial output on stdout.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qs/fileio.h"
#include "qs/hif8.h"
#include "qs/hif8_text.h"
#include "qs/mem.h"

static const char hif8_usage[] =
    "usage: qatscope hif8 [--saturate] VALUE...\n"
    "       qatscope hif8 encode [--saturate] [--bits]   < numbers\n"
    "       qatscope hif8 decode                         < codes\n"
    "       qatscope hif8 table\n"
    "\n"
    "VALUE / encode input: decimal or C hex-float fp32 values (nan, inf allowed);\n"
    "with --bits, fp32 bit patterns in hex (0x3F800000).  decode input: codes as\n"
    "decimal 0..255 or 0xHH.  Encoding rounds to nearest, ties away from zero;\n"
    "overflow gives +-Inf (|x| >= 40960), or +-32768 with --saturate (the QAT mode).\n";

/* Options of a stdin subcommand; returns 0 or an exit code (after the error line). */
static int hif8_opts(int argc, char **argv, const char *sub, int allow_sat, int *sat, int *bits)
{
    for (int i = 1; i < argc; i++) {
        if (allow_sat && !strcmp(argv[i], "--saturate"))
            *sat = 1;
        else if (allow_sat && !strcmp(argv[i], "--bits"))
            *bits = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(hif8_usage, stdout);
            return -1;
        } else if (argv[i][0] == '-')
            return cli_error("hif8 %s: unknown option '%s' (argument %d)", sub, argv[i], i + 1);
        else
            return cli_error("hif8 %s: unexpected argument '%s' (argument %d); input is read "
                             "from stdin",
                             sub, argv[i], i + 1);
    }
    return 0;
}

/* All of stdin, parsed as `kind` (qs/hif8_text.h); 0, or an exit code after the
 * error line. */
static int hif8_stdin_parse(const char *sub, int kind, float **values, uint8_t **codes,
                            size_t *n)
{
    char *text;
    size_t len;
    qs_diag d = {0};
    if (fileio_read_all("/dev/stdin", &text, &len, &d))
        return cli_diag_error(&d);
    hif8_text_error e;
    int rc = hif8_text_parse(text, len, kind, values, codes, n, &e);
    qs_free(text);
    if (rc == QS_EFORMAT && e.too_long)
        return cli_error("hif8 %s: stdin line %ld, token %ld ('%.20s...'): token longer than %d "
                         "characters, expected %s",
                         sub, e.line, e.token, e.text, HIF8_TEXT_TOKEN_MAX, hif8_text_expected(kind));
    if (rc == QS_EFORMAT)
        return cli_error("hif8 %s: stdin line %ld, token %ld ('%s'): expected %s", sub, e.line,
                         e.token, e.text, hif8_text_expected(kind));
    if (rc)
        return cli_error("hif8 %s: out of memory reading stdin", sub);
    return 0;
}

static int cmd_hif8_encode(int argc, char **argv)
{
    int sat = 0, bits = 0;
    int rc = hif8_opts(argc, argv, "encode", 1, &sat, &bits);
    if (rc)
        return rc < 0 ? 0 : rc;
    float *v;
    size_t n;
    if ((rc = hif8_stdin_parse("encode", bits ? HIF8_TEXT_BITS : HIF8_TEXT_NUMBERS, &v, NULL, &n)))
        return rc;
    uint8_t *codes = qs_malloc(n ? n : 1);
    if (!codes) {
        qs_free(v);
        return cli_error("hif8 encode: out of memory for %zu codes", n);
    }
    hif8_codes_encode(v, codes, n, sat ? HIF8_SAT : HIF8_NONSAT);
    for (size_t i = 0; i < n; i++)
        printf("0x%02X\n", codes[i]);
    qs_free(codes);
    qs_free(v);
    return 0;
}

static int cmd_hif8_decode(int argc, char **argv)
{
    int unused_sat = 0, unused_bits = 0;
    int rc = hif8_opts(argc, argv, "decode", 0, &unused_sat, &unused_bits);
    if (rc)
        return rc < 0 ? 0 : rc;
    uint8_t *codes;
    size_t n;
    if ((rc = hif8_stdin_parse("decode", HIF8_TEXT_CODES, NULL, &codes, &n)))
        return rc;
    for (size_t i = 0; i < n; i++)
        printf("%a\n", (double)hif8_decode(codes[i]));
    qs_free(codes);
    return 0;
}

static int cmd_hif8_table(int argc, char **argv)
{
    if (argc > 1) {
        if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
            fputs(hif8_usage, stdout);
            return 0;
        }
        return cli_error("hif8 table: unexpected argument '%s' (argument 2)", argv[1]);
    }
    printf("code\tbits\tclass\tsign\tdot\texponent\tmant_bits\tmantissa\tvalue\tvalue_hex\n");
    for (int c = 0; c < 256; c++) {
        hif8_fields f;
        char bits[16], dot[8], ex[8];
        hif8_fields_get((uint8_t)c, &f);
        float v = hif8_decode((uint8_t)c);
        snprintf(dot, sizeof dot, f.dot == HIF8_DOT_DML ? "DML" : "%d", f.dot);
        if (f.cls == HIF8_CLASS_ZERO || f.cls == HIF8_CLASS_NAN)
            snprintf(ex, sizeof ex, "-");
        else
            snprintf(ex, sizeof ex, "%d", f.exponent);
        printf("0x%02X\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%.9g\t%a\n", c,
               hif8_fields_format((uint8_t)c, bits, sizeof bits), hif8_class_name(f.cls), f.sign,
               dot, ex, f.mant_bits, f.mantissa, (double)v, (double)v);
    }
    return 0;
}

/* qatscope hif8 [--saturate] VALUE... */
static int cmd_hif8_values(int argc, char **argv)
{
    int sat = 0, n_values = 0;
    for (int i = 1; i < argc; i++) {
        float x;
        if (!strcmp(argv[i], "--saturate"))
            sat = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(hif8_usage, stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] == '-')
            return cli_error("hif8: unknown option '%s' (argument %d)", argv[i], i);
        else if (hif8_text_number(argv[i], &x))
            return cli_error("hif8: '%s' (argument %d) is neither a subcommand (encode, decode, "
                             "table) nor a number",
                             argv[i], i);
        else
            n_values++;
    }
    if (!n_values)
        return cli_error("hif8: no VALUE given; run 'qatscope hif8 --help'");
    printf("%-16s %-16s %-5s %-12s %-16s %s\n", "input", "fp32", "code", "S_DOT_EXP_MAN", "value",
           "rel_err");
    for (int i = 1; i < argc; i++) {
        float x = 0.0f;
        if (argv[i][0] == '-' && argv[i][1] == '-')
            continue;
        hif8_text_number(argv[i], &x); /* validated above */
        uint8_t c = hif8_encode(x, sat ? HIF8_SAT : HIF8_NONSAT);
        float v = hif8_decode(c);
        char bits[16], rel[32];
        if (x != x || isinf(x) || isinf(v))
            snprintf(rel, sizeof rel, "-");
        else if (x == 0.0f)
            snprintf(rel, sizeof rel, "%+.4e", 0.0);
        else
            snprintf(rel, sizeof rel, "%+.4e", ((double)v - (double)x) / fabs((double)x));
        printf("%-16s %-16.9g 0x%02X  %-13s %-16.9g %s\n", argv[i], (double)x, c,
               hif8_fields_format(c, bits, sizeof bits), (double)v, rel);
    }
    return 0;
}

int cmd_hif8(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "encode"))
        return cmd_hif8_encode(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "decode"))
        return cmd_hif8_decode(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "table"))
        return cmd_hif8_table(argc - 1, argv + 1);
    return cmd_hif8_values(argc, argv);
}
