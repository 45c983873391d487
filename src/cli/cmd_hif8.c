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
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qs/hif8.h"
#include "qs/mem.h"

#define HIF8_TOKEN_MAX 128

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

/* Whole-token parses; 0 on success. */
static int parse_f32(const char *s, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end) /* ERANGE is fine: the result is the correctly rounded fp32 */
        return -1;
    *out = v;
    return 0;
}

static int parse_hex_u32(const char *s, uint32_t *out)
{
    const char *p = (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? s + 2 : s;
    if (!*p || strspn(p, "0123456789abcdefABCDEF") != strlen(p) || strlen(p) > 8)
        return -1;
    *out = (uint32_t)strtoul(p, NULL, 16);
    return 0;
}

static int parse_code(const char *s, uint8_t *out)
{
    uint32_t v;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        if (parse_hex_u32(s, &v) || v > 255)
            return -1;
    } else {
        if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 3)
            return -1;
        v = (uint32_t)atoi(s);
        if (v > 255)
            return -1;
    }
    *out = (uint8_t)v;
    return 0;
}

/* Tokenizer over stdin that remembers where each token started. */
typedef struct {
    FILE *f;
    long line, token; /* 1-based line of the current token, token count so far */
} hif8_reader;

/* Next whitespace-separated token into buf: 1 got one, 0 end, -1 too long (buf holds its start). */
static int hif8_reader_next(hif8_reader *r, char *buf)
{
    int ch;
    while ((ch = getc(r->f)) != EOF && (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'))
        if (ch == '\n')
            r->line++;
    if (ch == EOF)
        return 0;
    size_t n = 0;
    r->token++;
    for (; ch != EOF && ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r'; ch = getc(r->f)) {
        if (n + 1 >= HIF8_TOKEN_MAX) {
            buf[n] = 0;
            return -1;
        }
        buf[n++] = (char)ch;
    }
    if (ch == '\n')
        ungetc(ch, r->f);
    buf[n] = 0;
    return 1;
}

/* Growable array of floats (input values, or decoded codes). */
typedef struct {
    float *v;
    size_t n, cap;
} hif8_vec;

static int hif8_vec_push(hif8_vec *a, float x)
{
    float *p = qs_grow(a->v, &a->cap, a->n + 1, sizeof *p, 1024);
    if (!p)
        return -1;
    a->v = p;
    a->v[a->n++] = x;
    return 0;
}

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

static int hif8_token_error(const char *sub, const hif8_reader *r, const char *tok, int too_long,
                            const char *expected)
{
    if (too_long)
        return cli_error("hif8 %s: stdin line %ld, token %ld ('%.20s...'): token longer than %d "
                         "characters, expected %s",
                         sub, r->line, r->token, tok, HIF8_TOKEN_MAX - 1, expected);
    return cli_error("hif8 %s: stdin line %ld, token %ld ('%s'): expected %s", sub, r->line,
                     r->token, tok, expected);
}

/* stdin token -> float for encode --bits (an fp32 bit pattern) and decode (a code,
 * as its value); 0 or -1, like parse_f32 for plain encode */
static int hif8_tok_bits(const char *tok, float *x)
{
    uint32_t b;
    if (parse_hex_u32(tok, &b))
        return -1;
    memcpy(x, &b, sizeof *x);
    return 0;
}

static int hif8_tok_code(const char *tok, float *x)
{
    uint8_t c;
    if (parse_code(tok, &c))
        return -1;
    *x = hif8_decode(c);
    return 0;
}

/* The options of encode (sat, bits non-NULL: --saturate, --bits) or decode, then every
 * stdin token into a (values, or decoded codes); 0, -1 after --help, or an exit code
 * after the error line (a->v freed). */
static int hif8_stdin_values(int argc, char **argv, const char *sub, int *sat, int *bits,
                             hif8_vec *a)
{
    int unused = 0;
    int rc = hif8_opts(argc, argv, sub, sat != NULL, sat ? sat : &unused, bits ? bits : &unused);
    if (rc)
        return rc;
    int (*parse)(const char *, float *) = !bits ? hif8_tok_code : *bits ? hif8_tok_bits : parse_f32;
    const char *expected = !bits  ? "a code, decimal 0..255 or hex 0x00..0xFF"
                           : *bits ? "an fp32 bit pattern in hex (e.g. 0x3F800000)"
                                   : "a number (decimal or C hex-float)";
    hif8_reader r = {stdin, 1, 0};
    char tok[HIF8_TOKEN_MAX];
    int got;
    while (!rc && (got = hif8_reader_next(&r, tok)) != 0) {
        float x;
        if (got < 0 || parse(tok, &x))
            rc = hif8_token_error(sub, &r, tok, got < 0, expected);
        else if (hif8_vec_push(a, x))
            rc = cli_error("hif8 %s: out of memory after %zu values", sub, a->n);
    }
    if (rc)
        qs_free(a->v);
    return rc;
}

static int cmd_hif8_encode(int argc, char **argv)
{
    int sat = 0, bits = 0;
    hif8_vec a = {0};
    int rc = hif8_stdin_values(argc, argv, "encode", &sat, &bits, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    uint8_t *codes = qs_malloc(a.n ? a.n : 1);
    if (!codes) {
        qs_free(a.v);
        return cli_error("hif8 encode: out of memory for %zu codes", a.n);
    }
    hif8_codes_encode(a.v, codes, a.n, sat ? HIF8_SAT : HIF8_NONSAT);
    for (size_t i = 0; i < a.n; i++)
        printf("0x%02X\n", codes[i]);
    qs_free(codes);
    qs_free(a.v);
    return 0;
}

static int cmd_hif8_decode(int argc, char **argv)
{
    hif8_vec a = {0};
    int rc = hif8_stdin_values(argc, argv, "decode", NULL, NULL, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    for (size_t i = 0; i < a.n; i++)
        printf("%a\n", (double)a.v[i]);
    qs_free(a.v);
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
        else if (parse_f32(argv[i], &x))
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
        parse_f32(argv[i], &x); /* validated above */
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
