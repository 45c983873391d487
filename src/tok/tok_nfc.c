/* tok_nfc.c: Unicode Normalization Form C, for tokenizer.json "NFC" normalizers
 * (Qwen2-style files).
 *
 * The textbook algorithm of UAX #15: full canonical decomposition (Hangul
 * syllables algorithmically, the rest from tok_nfc_tables.c), canonical ordering
 * of combining marks by class (stable), then canonical composition of each
 * starter with the following marks it is not blocked from.  Text whose bytes are
 * all below 0xCC (every code point < U+0300, so nothing can decompose or combine)
 * is returned unchanged without work.  Invalid UTF-8 bytes pass through as they
 * are (as code points above U+10FFFF that never combine).
 */
#include <string.h>

#include "qs/mem.h"
#include "tok_impl.h"

enum {
    HANGUL_S = 0xAC00, HANGUL_L = 0x1100, HANGUL_V = 0x1161, HANGUL_T = 0x11A7,
    HANGUL_LN = 19, HANGUL_VN = 21, HANGUL_TN = 28, HANGUL_NN = 21 * 28, HANGUL_SN = 19 * 21 * 28,
};
#define NFC_RAW_BYTE 0x110000u /* + byte: an invalid UTF-8 byte kept as is */

typedef struct cp_buf {
    uint32_t *v;
    size_t n, cap;
} cp_buf;

static int cp_push(cp_buf *b, uint32_t cp)
{
    uint32_t *nv = qs_grow(b->v, &b->cap, b->n + 1, sizeof *nv, 64);
    if (!nv)
        return QS_ENOMEM;
    b->v = nv;
    b->v[b->n++] = cp;
    return 0;
}

static int ccc_of(uint32_t cp)
{
    return cp >= NFC_RAW_BYTE ? 0 : tok_nfc_ccc_impl(cp);
}

static int decompose(cp_buf *b, uint32_t cp, int depth)
{
    if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_SN) {
        uint32_t s = cp - HANGUL_S, t = s % HANGUL_TN;
        int rc = cp_push(b, HANGUL_L + s / HANGUL_NN);
        if (!rc)
            rc = cp_push(b, HANGUL_V + (s % HANGUL_NN) / HANGUL_TN);
        if (!rc && t)
            rc = cp_push(b, HANGUL_T + t);
        return rc;
    }
    uint32_t a, c;
    if (cp >= NFC_RAW_BYTE || depth > 8 || !tok_nfc_decomp_impl(cp, &a, &c))
        return cp_push(b, cp);
    int rc = decompose(b, a, depth + 1);
    return rc || !c ? rc : decompose(b, c, depth + 1);
}

static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= HANGUL_L && a < HANGUL_L + HANGUL_LN && b >= HANGUL_V && b < HANGUL_V + HANGUL_VN)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VN + (b - HANGUL_V)) * HANGUL_TN;
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SN && (a - HANGUL_S) % HANGUL_TN == 0 &&
        b > HANGUL_T && b < HANGUL_T + HANGUL_TN)
        return a + (b - HANGUL_T);
    if (a >= NFC_RAW_BYTE || b >= NFC_RAW_BYTE)
        return 0;
    return tok_nfc_compose_impl(a, b);
}

/* stable insertion sort of each run of non-starters by combining class */
static void reorder(uint32_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        int c = ccc_of(v[i]);
        if (c == 0)
            continue;
        uint32_t x = v[i];
        size_t j = i;
        while (j > 0 && ccc_of(v[j - 1]) > c) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

static size_t recompose(uint32_t *v, size_t n)
{
    if (n == 0)
        return 0;
    size_t starter = 0, out = 1;
    int last = ccc_of(v[0]) ? 256 : 0; /* a leading mark blocks composition */
    for (size_t i = 1; i < n; i++) {
        uint32_t ch = v[i];
        int c = ccc_of(ch);
        uint32_t comp = compose(v[starter], ch);
        if (comp && (last < c || last == 0)) {
            v[starter] = comp;
            continue;
        }
        if (c == 0)
            starter = out;
        last = c;
        v[out++] = ch;
    }
    return out;
}

int tok_nfc_impl(const char *s, size_t len, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    size_t k = 0;
    while (k < len && (unsigned char)s[k] < 0xCC)
        k++;
    if (k == len)
        return 0; /* nothing at or above U+0300: already NFC */
    cp_buf b = {0};
    int rc = 0;
    for (size_t pos = 0; pos < len && !rc;) {
        size_t nb;
        uint32_t cp = tok_utf8_next_impl(s, len, pos, &nb);
        if (nb == 1 && cp >= 0x80)
            cp = NFC_RAW_BYTE + cp;
        rc = decompose(&b, cp, 0);
        pos += nb;
    }
    char *o = rc ? NULL : qs_malloc(4 * b.n + 1);
    if (!o) {
        qs_free(b.v);
        return QS_ENOMEM;
    }
    reorder(b.v, b.n);
    size_t n = recompose(b.v, b.n), ob = 0;
    for (size_t i = 0; i < n; i++) {
        if (b.v[i] >= NFC_RAW_BYTE)
            o[ob++] = (char)(b.v[i] - NFC_RAW_BYTE);
        else
            ob += tok_utf8_put_impl(o + ob, b.v[i]);
    }
    qs_free(b.v);
    *out = o;
    *out_len = ob;
    return 0;
}
