/* tok_merge.c: the BPE merge loop shared by every backend.
 *
 * A word (bytes without any added token) is cut into symbols: single bytes for
 * byte-level vocabularies, UTF-8 characters otherwise.  Candidate merges of
 * adjacent symbols wait in a binary heap ordered by (priority, left position):
 *   tokenizer.json  priority = merge rank (lower first), as HF tokenizers' BPE;
 *   tokenizer.model priority = -score of the concatenation (higher score first),
 *                   as sentencepiece's bpe_model.cc.
 * Ties go to the leftmost pair in both.  A popped candidate is stale when either
 * side has been merged since it was pushed (checked by adjacency and length), so
 * the loop is O(n log n) in the word length: llama-style tokenizer.json files have
 * no pre-tokenizer, so a whole paragraph is one word.
 * Symbols left without an id become byte-fallback tokens <0xXX> (one per byte)
 * or the unknown token (consecutive unknowns fused when the model says so).
 */
#include <string.h>

#include "qs/mem.h"
#include "tok_impl.h"

typedef struct merge_cand {
    double key;
    int32_t left, right;
    uint32_t total_len;
} merge_cand;

typedef struct merge_heap {
    merge_cand *v;
    size_t n, cap;
    int on_heap; /* v was qs_malloc'd (else it is the caller's stack buffer) */
} merge_heap;

static int cand_less(const merge_cand *a, const merge_cand *b)
{
    if (a->key != b->key)
        return a->key < b->key;
    return a->left < b->left;
}

static int heap_push(merge_heap *h, merge_cand c)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        merge_cand *nv = qs_malloc(cap * sizeof *nv);
        if (!nv)
            return QS_ENOMEM;
        memcpy(nv, h->v, h->n * sizeof *nv);
        if (h->on_heap)
            qs_free(h->v);
        h->v = nv;
        h->cap = cap;
        h->on_heap = 1;
    }
    size_t i = h->n++;
    h->v[i] = c;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&h->v[i], &h->v[p]))
            break;
        merge_cand tmp = h->v[i];
        h->v[i] = h->v[p];
        h->v[p] = tmp;
        i = p;
    }
    return 0;
}

static merge_cand heap_pop(merge_heap *h)
{
    merge_cand top = h->v[0];
    h->v[0] = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && cand_less(&h->v[l], &h->v[m]))
            m = l;
        if (r < h->n && cand_less(&h->v[r], &h->v[m]))
            m = r;
        if (m == i)
            break;
        merge_cand tmp = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = tmp;
        i = m;
    }
    return top;
}

/* Can symbols a and b merge?  Sets *key and *merged. */
static int pair_find(const struct tokenizer *t, const char *word, const tok_symbol *a,
                     const tok_symbol *b, double *key, int32_t *merged)
{
    if (t->score) {
        int32_t id = tok_lookup_impl(t, word + a->start, a->len + b->len);
        if (id < 0 || t->type[id] == TOK_TYPE_UNUSED || t->type[id] == TOK_TYPE_CONTROL ||
            t->type[id] == TOK_TYPE_UNKNOWN || t->type[id] == TOK_TYPE_BYTE)
            return 0;
        *key = -(double)t->score[id];
        *merged = id;
        return 1;
    }
    int32_t rank;
    if (a->id < 0 || b->id < 0 || !tok_pairmap_get_impl(&t->merges, a->id, b->id, &rank, merged))
        return 0;
    *key = (double)rank;
    return 1;
}

static int push_pair(const struct tokenizer *t, const char *word, const tok_symbol *sym,
                     int32_t left, merge_heap *h)
{
    int32_t right = sym[left].next;
    double key;
    int32_t merged;
    if (right < 0 || !pair_find(t, word, &sym[left], &sym[right], &key, &merged))
        return 0;
    merge_cand c = {key, left, right, sym[left].len + sym[right].len};
    return heap_push(h, c);
}

static int emit_symbol(const struct tokenizer *t, const char *word, const tok_symbol *s,
                       int *last_was_unk, tok_ids *out)
{
    if (s->id >= 0) {
        *last_was_unk = 0;
        return tok_ids_push_impl(out, s->id);
    }
    if (t->byte_fallback) {
        int ok = 1;
        for (uint32_t k = 0; k < s->len; k++)
            ok &= t->byte_id[(unsigned char)word[s->start + k]] >= 0;
        if (ok) {
            for (uint32_t k = 0; k < s->len; k++) {
                int rc = tok_ids_push_impl(out, t->byte_id[(unsigned char)word[s->start + k]]);
                if (rc)
                    return rc;
            }
            *last_was_unk = 0;
            return 0;
        }
    }
    if (t->unk_id < 0)
        return QS_EUNSUPPORTED;
    if (t->fuse_unk && *last_was_unk)
        return 0;
    *last_was_unk = 1;
    return tok_ids_push_impl(out, t->unk_id);
}

int tok_bpe_word_impl(const struct tokenizer *t, const char *word, size_t len, int char_split,
                      tok_ids *out)
{
    if (len == 0)
        return 0;
    if (len > UINT32_MAX / 2)
        return QS_ERANGE;
    /* short words (almost all of them) use stack buffers: no allocation per word */
    enum { SMALL = 64 };
    tok_symbol sym_small[SMALL];
    merge_cand cand_small[2 * SMALL];
    tok_symbol *sym = len <= SMALL ? sym_small : qs_malloc(len * sizeof *sym);
    if (!sym)
        return QS_ENOMEM;
    int32_t n = 0;
    for (size_t pos = 0; pos < len;) {
        size_t nb = 1;
        if (char_split)
            tok_utf8_next_impl(word, len, pos, &nb);
        sym[n].start = (uint32_t)pos;
        sym[n].len = (uint32_t)nb;
        sym[n].id = tok_lookup_impl(t, word + pos, nb);
        sym[n].prev = n - 1;
        sym[n].next = pos + nb < len ? n + 1 : -1;
        n++;
        pos += nb;
    }
    merge_heap h = {cand_small, 0, 2 * SMALL, 0};
    int rc = 0;
    for (int32_t i = 0; i + 1 < n && !rc; i++)
        rc = push_pair(t, word, sym, i, &h);
    while (!rc && h.n > 0) {
        merge_cand c = heap_pop(&h);
        tok_symbol *a = &sym[c.left], *b = &sym[c.right];
        if (a->len == 0 || b->len == 0 || a->next != c.right || a->len + b->len != c.total_len)
            continue; /* stale: one side changed since the pair was pushed */
        double key;
        int32_t merged;
        if (!pair_find(t, word, a, b, &key, &merged))
            continue;
        a->len += b->len;
        a->id = merged;
        a->next = b->next;
        if (b->next >= 0)
            sym[b->next].prev = c.left;
        b->len = 0;
        if (a->prev >= 0)
            rc = push_pair(t, word, sym, a->prev, &h);
        if (!rc)
            rc = push_pair(t, word, sym, c.left, &h);
    }
    int last_was_unk = 0;
    for (int32_t i = 0; !rc && i >= 0 && n > 0; i = sym[i].next)
        rc = emit_symbol(t, word, &sym[i], &last_was_unk, out);
    if (h.on_heap)
        qs_free(h.v);
    if (sym != sym_small)
        qs_free(sym);
    return rc;
}

static int is_ms(const char *s, size_t len, size_t i)
{
    return i + 3 <= len && !memcmp(s + i, "\xE2\x96\x81", 3);
}

/* Exactness: BPE only ever builds vocabulary pieces, and with ms_cut_safe no
 * piece contains "x▁" for a character x other than ▁, so no symbol can span a
 * cut and the merges on each side are the same as on the whole text. */
int tok_bpe_metaspace_impl(const struct tokenizer *t, const char *s, size_t len, tok_ids *out)
{
    if (!t->ms_cut_safe)
        return tok_bpe_word_impl(t, s, len, 1, out);
    size_t start = 0;
    for (size_t i = 1; i < len; i++) {
        if (is_ms(s, len, i) && !(i >= 3 && is_ms(s, len, i - 3))) {
            int rc = tok_bpe_word_impl(t, s + start, i - start, 1, out);
            if (rc)
                return rc;
            start = i;
        }
    }
    return tok_bpe_word_impl(t, s + start, len - start, 1, out);
}

void tok_ms_cut_check_impl(struct tokenizer *t)
{
    t->ms_cut_safe = 1;
    for (int32_t id = 0; id < t->n_vocab && t->ms_cut_safe; id++) {
        const char *r = tok_raw(t, id);
        size_t n = t->raw_len[id];
        for (size_t i = 1; i < n; i++)
            if (is_ms(r, n, i) && !(i >= 3 && is_ms(r, n, i - 3))) {
                t->ms_cut_safe = 0;
                break;
            }
    }
}
