/* hif8_text.c: token parsing of the hif8 encode/decode text inputs (see
 * include/qs/hif8_text.h).  Tokens are copied into a bounded NUL-terminated
 * buffer before strtof/strtoul see them, so no parse ever reads past a token. */
#include "qs/hif8_text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "qs/mem.h"

const char *hif8_text_expected(int kind)
{
    switch (kind) {
    case HIF8_TEXT_NUMBERS: return "a number (decimal or C hex-float)";
    case HIF8_TEXT_BITS: return "an fp32 bit pattern in hex (e.g. 0x3F800000)";
    case HIF8_TEXT_CODES: return "a code, decimal 0..255 or hex 0x00..0xFF";
    default: return "?";
    }
}

int hif8_text_number(const char *s, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end)   /* ERANGE is fine: the result is the correctly rounded fp32 */
        return -1;
    *out = v;
    return 0;
}

static int hif8_text_hex(const char *s, uint32_t *out)
{
    const char *p = (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? s + 2 : s;
    size_t n = strlen(p);
    if (!n || n > 8 || strspn(p, "0123456789abcdefABCDEF") != n)
        return -1;
    *out = (uint32_t)strtoul(p, NULL, 16);
    return 0;
}

static int hif8_text_code(const char *s, uint8_t *out)
{
    uint32_t v;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        if (hif8_text_hex(s, &v) || v > 255)
            return -1;
    } else {
        size_t n = strlen(s);
        if (!n || n > 3 || strspn(s, "0123456789") != n)
            return -1;
        v = (uint32_t)atoi(s);
        if (v > 255)
            return -1;
    }
    *out = (uint8_t)v;
    return 0;
}

static int hif8_text_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int hif8_text_parse(const char *text, size_t n, int kind, float **values, uint8_t **codes,
                    size_t *count, hif8_text_error *err)
{
    if (values)
        *values = NULL;
    if (codes)
        *codes = NULL;
    *count = 0;
    memset(err, 0, sizeof *err);
    if (kind < HIF8_TEXT_NUMBERS || kind > HIF8_TEXT_CODES ||
        (kind == HIF8_TEXT_CODES ? !codes : !values))
        return QS_EINVAL;
    size_t elem = kind == HIF8_TEXT_CODES ? 1 : sizeof(float), cap = 0;
    unsigned char *out = NULL;
    long line = 1, token = 0;
    char tok[HIF8_TEXT_TOKEN_MAX + 1];
    for (size_t i = 0; i < n;) {
        if (hif8_text_space(text[i])) {
            line += text[i++] == '\n';
            continue;
        }
        size_t start = i;
        while (i < n && !hif8_text_space(text[i]))
            i++;
        size_t len = i - start;
        token++;
        size_t keep = len < HIF8_TEXT_TOKEN_MAX ? len : HIF8_TEXT_TOKEN_MAX;
        memcpy(tok, text + start, keep);
        tok[keep] = 0;
        int bad = len > HIF8_TEXT_TOKEN_MAX || memchr(tok, 0, keep) != NULL;
        union { float f; uint32_t u; } v = {0};
        uint8_t code = 0;
        if (!bad)
            bad = kind == HIF8_TEXT_NUMBERS ? hif8_text_number(tok, &v.f)
                : kind == HIF8_TEXT_BITS    ? hif8_text_hex(tok, &v.u)
                                            : hif8_text_code(tok, &code);
        if (bad) {
            err->line = line;
            err->token = token;
            err->too_long = len > HIF8_TEXT_TOKEN_MAX;
            for (size_t k = 0; k < keep; k++)
                err->text[k] = tok[k] ? tok[k] : '?';
            err->text[keep] = 0;
            qs_free(out);
            return QS_EFORMAT;
        }
        unsigned char *grown = qs_grow(out, &cap, *count + 1, elem, 1024);
        if (!grown) {
            qs_free(out);
            *count = 0;
            return QS_ENOMEM;
        }
        out = grown;
        if (kind == HIF8_TEXT_CODES)
            out[*count] = code;
        else
            memcpy(out + *count * elem, &v.f, sizeof v.f);
        (*count)++;
    }
    if (kind == HIF8_TEXT_CODES)
        *codes = out;
    else
        *values = (float *)out;
    return 0;
}
