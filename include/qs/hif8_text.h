/* hif8_text.h: the text inputs of `qatscope hif8 encode` / `hif8 decode`.
 *
 * Whitespace-separated tokens (space, tab, CR, LF), any number per line:
 *   HIF8_TEXT_NUMBERS  fp32 values: decimal or C hex-float, nan / inf allowed
 *                      (strtof; out-of-range values round as strtof rounds them)
 *   HIF8_TEXT_BITS     fp32 bit patterns in hex, 1..8 digits, 0x optional
 *   HIF8_TEXT_CODES    HiF8 codes: decimal 0..255 (at most 3 digits) or 0x00..0xFF
 * A token is at most HIF8_TEXT_TOKEN_MAX bytes and holds no NUL byte.  The first
 * bad token stops the parse with QS_EFORMAT and its position in *err (the CLI
 * prints one line from it); nothing is returned then.
 */
#ifndef QS_HIF8_TEXT_H
#define QS_HIF8_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"

#define HIF8_TEXT_TOKEN_MAX 127

enum { HIF8_TEXT_NUMBERS = 0, HIF8_TEXT_BITS = 1, HIF8_TEXT_CODES = 2 };

typedef struct hif8_text_error {
    long line;          /* 1-based line of the bad token */
    long token;         /* 1-based index of the bad token */
    int too_long;       /* 1: longer than HIF8_TEXT_TOKEN_MAX */
    char text[HIF8_TEXT_TOKEN_MAX + 1];   /* the token (its first bytes when too long; a NUL
                                             inside it shows as '?') */
} hif8_text_error;

/* What a kind expects, for messages ("a number (decimal or C hex-float)", ...). */
const char *hif8_text_expected(int kind);

/* One whole token as an fp32 value (the NUMBERS rule: decimal or C hex-float,
 * nan / inf allowed); 0, or -1 when the token is not exactly one number. */
int hif8_text_number(const char *s, float *out);

/* Parse text[0..n).  NUMBERS and BITS fill *values (fp32, qs_malloc'd, NULL when
 * empty); CODES fills *codes.  The unused output may be NULL.  Returns 0,
 * QS_EFORMAT (see *err), QS_ENOMEM or QS_EINVAL (unknown kind). */
int hif8_text_parse(const char *text, size_t n, int kind, float **values, uint8_t **codes,
                    size_t *count, hif8_text_error *err);

#endif
