/* tok_ids.c: token ids as text (see tokenizer_ids_parse in include/qs/tokenizer.h).
 * Bounded by len (no strtol, which would need a NUL and skip its own kinds of
 * whitespace): a token is every byte up to the next separator. */
#include <string.h>

#include "qs/mem.h"
#include "qs/tokenizer.h"

static int tok_ids_sep(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',';
}

int tokenizer_ids_parse(const char *text, size_t len, int32_t **ids, size_t *n, size_t *cap,
                        qs_diag *d)
{
    for (size_t i = 0; i < len;) {
        if (tok_ids_sep(text[i])) {
            i++;
            continue;
        }
        size_t start = i, k = i + (text[i] == '+');
        long long v = 0;
        int ok = k < len && !tok_ids_sep(text[k]);
        for (; k < len && !tok_ids_sep(text[k]); k++) {
            if (text[k] < '0' || text[k] > '9' || v > 0x7FFFFFFF) {
                ok = 0;
                continue;
            }
            v = v * 10 + (text[k] - '0');
        }
        i = k;
        if (!ok || v > 0x7FFFFFFF) {
            char shown[24];
            size_t m = i - start < 20 ? i - start : 20;
            for (size_t j = 0; j < m; j++)
                shown[j] = text[start + j] ? text[start + j] : '?';
            shown[m] = 0;
            return diag_set(d, QS_EFORMAT, NULL, -1,
                            "expected a token id (integer 0..2147483647), got '%s'", shown);
        }
        int32_t *grown = qs_grow(*ids, cap, *n + 1, sizeof *grown, 256);
        if (!grown)
            return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory after %zu ids", *n);
        *ids = grown;
        (*ids)[(*n)++] = (int32_t)v;
    }
    return 0;
}
