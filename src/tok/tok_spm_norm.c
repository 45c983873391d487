/* tok_spm_norm.c: sentencepiece's normalizer for tokenizer.model files.
 *
 * A NormalizerSpec may carry a precompiled charsmap (nmt_nfkc, nfkc_cf or rules
 * compiled from a user TSV):  <u32 trie bytes><darts-clone double array><NUL-
 * terminated replacement strings>.  At each input position the longest key in
 * the trie that prefixes the text is replaced by its string; without a match one
 * UTF-8 character is copied (an invalid byte becomes U+FFFD, as sentencepiece
 * does).  Around that, sentencepiece's Normalizer::Normalize: leading spaces
 * dropped and runs of spaces collapsed when remove_extra_whitespaces, "▁"
 * prepended when add_dummy_prefix, spaces written as "▁" when escape_whitespaces,
 * trailing "▁" dropped when remove_extra_whitespaces.
 * Every trie step is bounds-checked: a corrupt charsmap cannot read outside it.
 */
#include <string.h>

#include "qs/bytes.h"
#include "qs/mem.h"
#include "tok_impl.h"

/* darts-clone unit fields */
static int unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }
static uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
static uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

int tok_spm_charsmap_load_impl(struct tokenizer *t, const unsigned char *blob, size_t n,
                               const char *path, qs_diag *d)
{
    if (n < 4)
        return diag_set(d, QS_EFORMAT, path, -1, "precompiled_charsmap of %zu bytes: expected "
                                                 "a trie size and a trie", n);
    uint32_t trie_bytes = bytes_get_u32le(blob);
    if (trie_bytes % 4 || trie_bytes == 0 || trie_bytes > n - 4)
        return diag_set(d, QS_EFORMAT, path, -1,
                        "precompiled_charsmap: trie of %u bytes in a %zu-byte map (expected a "
                        "positive multiple of 4 that fits)",
                        trie_bytes, n);
    t->cm_n_units = trie_bytes / 4;
    t->cm_norm_bytes = n - 4 - trie_bytes;
    t->cm_units = qs_malloc(trie_bytes);
    t->cm_norm = qs_malloc(t->cm_norm_bytes + 1);
    if (!t->cm_units || !t->cm_norm)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory for the charsmap");
    for (size_t i = 0; i < t->cm_n_units; i++)
        t->cm_units[i] = bytes_get_u32le(blob + 4 + 4 * i);
    memcpy(t->cm_norm, blob + 4 + trie_bytes, t->cm_norm_bytes);
    t->cm_norm[t->cm_norm_bytes] = 0; /* a last string without its NUL still ends */
    return 0;
}

/* Longest charsmap key prefixing s: its length (0 if none) and replacement. */
static size_t charsmap_match(const struct tokenizer *t, const char *s, size_t len,
                             const char **repl)
{
    size_t best = 0, pos = 0;
    const uint32_t *a = t->cm_units;
    pos ^= unit_offset(a[0]);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        pos ^= c;
        if (pos >= t->cm_n_units)
            break;
        uint32_t u = a[pos];
        if (unit_label(u) != c)
            break;
        pos ^= unit_offset(u);
        if (pos >= t->cm_n_units)
            break;
        if (unit_has_leaf(u)) {
            uint32_t v = unit_value(a[pos]);
            if (v < t->cm_norm_bytes) {
                best = i + 1;
                *repl = t->cm_norm + v;
            }
        }
    }
    return best;
}

/* One normalized piece at s (into *piece, *piece_len); returns bytes consumed (>= 1). */
static size_t normalize_prefix(const struct tokenizer *t, const char *s, size_t len,
                               const char **piece, size_t *piece_len)
{
    if (t->cm_units) {
        const char *repl = NULL;
        size_t m = charsmap_match(t, s, len, &repl);
        if (m > 0) {
            *piece = repl;
            *piece_len = strlen(repl);
            return m;
        }
    }
    size_t nb;
    uint32_t cp = tok_utf8_next_impl(s, len, 0, &nb);
    if ((nb == 1 && cp >= 0x80) || (cp >= 0xD800 && cp <= 0xDFFF)) {
        *piece = "\xEF\xBF\xBD"; /* U+FFFD for a malformed byte, one byte consumed */
        *piece_len = 3;
        return 1;
    }
    *piece = s;
    *piece_len = nb;
    return nb;
}

int tok_spm_normalize_impl(const struct tokenizer *t, const char *s, size_t len, char **out,
                           size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    const char *piece;
    size_t plen, n = 0, cap = 4 * len + 16;
    if (t->remove_extra_ws) { /* drop leading pieces that normalize to one space */
        while (len > 0) {
            size_t used = normalize_prefix(t, s, len, &piece, &plen);
            if (plen != 1 || piece[0] != ' ')
                break;
            s += used;
            len -= used;
        }
    }
    if (len == 0)
        return 0;
    char *buf = qs_malloc(cap);
    if (!buf)
        return QS_ENOMEM;
    if (t->norm_prepend) {
        memcpy(buf, "\xE2\x96\x81", 3);
        n = 3;
    }
    int prev_space = t->remove_extra_ws;
    while (len > 0) {
        size_t used = normalize_prefix(t, s, len, &piece, &plen);
        s += used;
        len -= used;
        if (prev_space && t->remove_extra_ws)
            while (plen > 0 && piece[0] == ' ')
                piece++, plen--;
        if (plen == 0)
            continue;
        if (n + 3 * plen > cap) {
            cap = 2 * cap + 3 * plen;
            char *nb = qs_realloc(buf, cap);
            if (!nb) {
                qs_free(buf);
                return QS_ENOMEM;
            }
            buf = nb;
        }
        for (size_t k = 0; k < plen; k++) {
            if (piece[k] == ' ' && t->norm_replace_space) {
                memcpy(buf + n, "\xE2\x96\x81", 3);
                n += 3;
            } else {
                buf[n++] = piece[k];
            }
        }
        prev_space = piece[plen - 1] == ' ';
    }
    if (t->remove_extra_ws) {
        const char *sp = t->norm_replace_space ? "\xE2\x96\x81" : " ";
        size_t sl = strlen(sp);
        while (n >= sl && !memcmp(buf + n - sl, sp, sl))
            n -= sl;
    }
    *out = buf;
    *out_len = n;
    return 0;
}
