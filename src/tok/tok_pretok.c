/* tok_pretok.c: byte-level pre-tokenization, the regexes by hand.
 *
 * HF tokenizers runs the pattern with Oniguruma (backtracking, leftmost-first
 * alternation).  We implement the semantics of the three patterns real byte-level
 * checkpoints name, as one matcher each, instead of linking a regex engine:
 *
 *  GPT2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *  LLAMA3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *         ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *  QWEN2  as LLAMA3 with \p{N} instead of \p{N}{1,3}
 *
 * tok_pretok_next_impl returns the end of the match starting at pos (every
 * pattern above matches at every position, so splits cover the text).
 * \p{L}, \p{N} come from the generated tables in tok_unicode.c; \s is Unicode
 * White_Space.  Invalid UTF-8 bytes count as single non-letter, non-space chars.
 */
#include "tok_impl.h"

uint32_t tok_utf8_next_impl(const char *str, size_t len, size_t pos, size_t *n_bytes)
{
    const unsigned char *s = (const unsigned char *)str + pos;
    size_t left = len - pos;
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || n > left) {
        *n_bytes = 1;
        return c;
    }
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *n_bytes = 1;
            return c;
        }
        cp = cp << 6 | (s[i] & 0x3F);
    }
    *n_bytes = n;
    return cp;
}

size_t tok_utf8_put_impl(char *dst, uint32_t cp)
{
    unsigned char *o = (unsigned char *)dst;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other
 * 68 bytes to U+0100.. in byte order. */
static int byte_is_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t tok_byte_to_cp_impl(uint8_t b)
{
    if (byte_is_printable(b))
        return b;
    uint32_t k = 0;
    for (unsigned x = 0; x < b; x++)
        k += !byte_is_printable(x);
    return 0x100 + k;
}

typedef struct cursor {
    const char *s;
    size_t len;
} cursor;

/* class of the char at pos; *next gets the position after it */
enum { CH_END, CH_LETTER, CH_NUMBER, CH_SPACE, CH_OTHER };
static int char_at(const cursor *c, size_t pos, size_t *next, uint32_t *cp_out)
{
    if (pos >= c->len) {
        *next = pos;
        return CH_END;
    }
    size_t nb;
    uint32_t cp = tok_utf8_next_impl(c->s, c->len, pos, &nb);
    *next = pos + nb;
    if (cp_out)
        *cp_out = cp;
    if (nb == 1 && cp >= 0x80)
        return CH_OTHER; /* invalid byte */
    if (tok_is_letter_impl(cp))
        return CH_LETTER;
    if (tok_is_number_impl(cp))
        return CH_NUMBER;
    if (tok_is_space_impl(cp))
        return CH_SPACE;
    return CH_OTHER;
}

/* end of a run of chars of class cls starting at pos (pos itself if none), with count */
static size_t run_of(const cursor *c, size_t pos, int cls, size_t max_chars)
{
    size_t n = 0, next;
    while (n < max_chars && char_at(c, pos, &next, NULL) == cls) {
        pos = next;
        n++;
    }
    return pos;
}

static size_t contraction(const cursor *c, size_t pos, int fold_case)
{
    static const char *const suffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    if (pos >= c->len || c->s[pos] != '\'')
        return 0;
    for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
        const char *x = suffixes[k];
        size_t i = 0;
        for (; x[i]; i++) {
            if (pos + 1 + i >= c->len)
                break;
            char ch = c->s[pos + 1 + i];
            if (fold_case && ch >= 'A' && ch <= 'Z')
                ch = (char)(ch - 'A' + 'a');
            if (ch != x[i])
                break;
        }
        if (!x[i])
            return pos + 1 + i;
    }
    return 0;
}

/* \s+(?!\S) then \s+ : whitespace run, leaving the last space for the next word */
static size_t space_tail(const cursor *c, size_t pos)
{
    size_t end = pos, next, last_start = pos;
    while (char_at(c, end, &next, NULL) == CH_SPACE) {
        last_start = end;
        end = next;
    }
    if (end >= c->len || last_start == pos)
        return end; /* run reaches the end, or a single space: \s+ */
    return last_start;
}

static int is_crlf(const cursor *c, size_t pos)
{
    return pos < c->len && (c->s[pos] == '\r' || c->s[pos] == '\n');
}

static size_t match_gpt2(const cursor *c, size_t pos)
{
    size_t e = contraction(c, pos, 0), next, p = pos;
    if (e)
        return e;
    if (c->s[pos] == ' ')
        p = pos + 1;
    int cls = char_at(c, p, &next, NULL);
    if (cls == CH_LETTER || cls == CH_NUMBER || cls == CH_OTHER)
        return run_of(c, p, cls, SIZE_MAX);
    return space_tail(c, pos);
}

static size_t match_llama3(const cursor *c, size_t pos, size_t digit_max)
{
    size_t e = contraction(c, pos, 1), next, next2;
    if (e)
        return e;
    int cls = char_at(c, pos, &next, NULL);
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (cls == CH_LETTER)
        return run_of(c, pos, CH_LETTER, SIZE_MAX);
    if (cls != CH_NUMBER && !is_crlf(c, pos) && char_at(c, next, &next2, NULL) == CH_LETTER)
        return run_of(c, next, CH_LETTER, SIZE_MAX);
    if (cls == CH_NUMBER)
        return run_of(c, pos, CH_NUMBER, digit_max);
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t p = c->s[pos] == ' ' ? pos + 1 : pos;
    if (char_at(c, p, &next, NULL) == CH_OTHER) {
        p = run_of(c, p, CH_OTHER, SIZE_MAX);
        while (is_crlf(c, p))
            p++;
        return p;
    }
    /* \s*[\r\n]+ : through the last \r or \n of the whitespace run */
    size_t end = pos, nl_end = 0;
    while (char_at(c, end, &next, NULL) == CH_SPACE) {
        if (is_crlf(c, end))
            nl_end = next;
        end = next;
    }
    if (nl_end)
        return nl_end;
    return space_tail(c, pos);
}

size_t tok_pretok_next_impl(int pretok, const char *s, size_t len, size_t pos)
{
    cursor c = {s, len};
    size_t end;
    switch (pretok) {
    case TOK_PRETOK_GPT2: end = match_gpt2(&c, pos); break;
    case TOK_PRETOK_LLAMA3: end = match_llama3(&c, pos, 3); break;
    case TOK_PRETOK_QWEN2: end = match_llama3(&c, pos, 1); break;
    default: end = len; break;
    }
    if (end <= pos) { /* cannot happen for the patterns above; never loop forever */
        size_t nb;
        tok_utf8_next_impl(s, len, pos, &nb);
        end = pos + nb;
    }
    return end;
}
