/* tok_vocab.c: vocabulary storage shared by the tokenizer backends.
 *
 * One string arena, per-id offsets, an open-addressing hash map from raw bytes
 * to id and one from (left id, right id) to merge rank.  Everything is linear in
 * the vocabulary size: a 150k-entry vocabulary loads in milliseconds.
 */
#include <string.h>

#include "qs/digest.h"
#include "qs/mem.h"
#include "tok_impl.h"

int tok_vocab_alloc_impl(struct tokenizer *t, int32_t n_vocab)
{
    t->n_vocab = n_vocab;
    size_t n = (size_t)n_vocab;
    t->piece_off = qs_malloc(n * sizeof *t->piece_off + 1);
    t->raw_off = qs_malloc(n * sizeof *t->raw_off + 1);
    t->raw_len = qs_calloc(n + 1, sizeof *t->raw_len);
    t->type = qs_calloc(n + 1, sizeof *t->type);
    if (!t->piece_off || !t->raw_off || !t->raw_len || !t->type)
        return QS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        t->piece_off[i] = SIZE_MAX;
        t->raw_off[i] = 0;
        t->type[i] = TOK_TYPE_UNUSED;
    }
    /* offset 0 of the arena is an empty string, so holes read as "" */
    size_t off;
    return tok_arena_add_impl(t, "", 0, &off);
}

int tok_arena_add_impl(struct tokenizer *t, const char *s, size_t len, size_t *off)
{
    char *na = qs_grow(t->arena, &t->arena_cap, t->arena_bytes + len + 1, 1, 1 << 16);
    if (!na)
        return QS_ENOMEM;
    t->arena = na;
    memcpy(t->arena + t->arena_bytes, s, len);
    t->arena[t->arena_bytes + len] = 0;
    *off = t->arena_bytes;
    t->arena_bytes += len + 1;
    return 0;
}

int tok_set_piece_impl(struct tokenizer *t, int32_t id, const char *piece, size_t piece_len,
                       const char *raw, size_t raw_len)
{
    if (id < 0 || id >= t->n_vocab || raw_len > UINT32_MAX)
        return QS_ERANGE;
    int rc = tok_arena_add_impl(t, piece, piece_len, &t->piece_off[id]);
    if (rc)
        return rc;
    if (raw == piece && raw_len == piece_len) {
        t->raw_off[id] = t->piece_off[id];
    } else if ((rc = tok_arena_add_impl(t, raw, raw_len, &t->raw_off[id])) != 0) {
        return rc;
    }
    t->raw_len[id] = (uint32_t)raw_len;
    return 0;
}

static size_t cap_for(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n + 16)
        cap *= 2;
    return cap;
}

/* Every id whose type is NORMAL/USER/BYTE/UNKNOWN/CONTROL goes in; the first id
 * wins when two share raw bytes (as a JSON object cannot hold duplicates, this
 * only matters for .model files). */
int tok_strmap_build_impl(struct tokenizer *t)
{
    t->vocab.cap = cap_for((size_t)t->n_vocab);
    t->vocab.slots = qs_calloc(t->vocab.cap, sizeof *t->vocab.slots);
    if (!t->vocab.slots)
        return QS_ENOMEM;
    size_t mask = t->vocab.cap - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (t->piece_off[id] == SIZE_MAX)
            continue;
        const char *s = tok_raw(t, id);
        size_t h = (size_t)digest_fnv1a64(DIGEST_FNV1A64_SEED, s, t->raw_len[id]) & mask;
        for (;; h = (h + 1) & mask) {
            int32_t v = t->vocab.slots[h];
            if (v == 0) {
                t->vocab.slots[h] = id + 1;
                break;
            }
            if (t->raw_len[v - 1] == t->raw_len[id] &&
                memcmp(tok_raw(t, v - 1), s, t->raw_len[id]) == 0)
                break;
        }
    }
    return 0;
}

int32_t tok_lookup_impl(const struct tokenizer *t, const char *s, size_t len)
{
    size_t mask = t->vocab.cap - 1;
    size_t h = (size_t)digest_fnv1a64(DIGEST_FNV1A64_SEED, s, len) & mask;
    for (;; h = (h + 1) & mask) {
        int32_t v = t->vocab.slots[h];
        if (v == 0)
            return -1;
        if (t->raw_len[v - 1] == len && memcmp(tok_raw(t, v - 1), s, len) == 0)
            return v - 1;
    }
}

static size_t pair_hash(uint64_t key, size_t mask)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & mask;
}

int tok_pairmap_init_impl(tok_pairmap *m, size_t n)
{
    m->cap = cap_for(n);
    m->keys = qs_malloc(m->cap * sizeof *m->keys);
    m->rank = qs_malloc(m->cap * sizeof *m->rank);
    m->merged = qs_malloc(m->cap * sizeof *m->merged);
    if (!m->keys || !m->rank || !m->merged)
        return QS_ENOMEM;
    memset(m->keys, 0xff, m->cap * sizeof *m->keys);
    return 0;
}

/* The slot of pair (a, b): where it is stored, or the empty slot that ends its
 * probe run (keys[] == UINT64_MAX).  *key gets the pair's key. */
static size_t pair_slot(const tok_pairmap *m, int32_t a, int32_t b, uint64_t *key)
{
    *key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t mask = m->cap - 1, h = pair_hash(*key, mask);
    while (m->keys[h] != *key && m->keys[h] != UINT64_MAX)
        h = (h + 1) & mask;
    return h;
}

/* The first (lowest-rank) entry for a pair wins, as in HF's merge map. */
int tok_pairmap_put_impl(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged)
{
    uint64_t key;
    size_t h = pair_slot(m, a, b, &key);
    if (m->keys[h] == UINT64_MAX) {
        m->keys[h] = key;
        m->rank[h] = rank;
        m->merged[h] = merged;
    }
    return 0;
}

int tok_pairmap_get_impl(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank,
                         int32_t *merged)
{
    if (!m->cap)
        return 0;
    uint64_t key;
    size_t h = pair_slot(m, a, b, &key);
    if (m->keys[h] == UINT64_MAX)
        return 0;
    *rank = m->rank[h];
    *merged = m->merged[h];
    return 1;
}

/* Chains added tokens by first byte, longest first, so matching tries the
 * longest candidate first (HF matches leftmost-longest). */
int tok_added_index_impl(struct tokenizer *t)
{
    for (int b = 0; b < 256; b++)
        t->added_by_byte[b] = -1;
    qs_free(t->added_next);
    t->added_next = qs_malloc(((size_t)t->n_added + 1) * sizeof *t->added_next);
    if (!t->added_next)
        return QS_ENOMEM;
    for (int i = 0; i < t->n_added; i++) {
        t->added_next[i] = -1;
        if (t->added[i].len_bytes == 0)
            continue;
        unsigned char b = (unsigned char)t->arena[t->added[i].content_off];
        int32_t *link = &t->added_by_byte[b];
        while (*link >= 0 && t->added[*link].len_bytes >= t->added[i].len_bytes)
            link = &t->added_next[*link];
        t->added_next[i] = *link;
        *link = i;
    }
    return 0;
}

void tok_byte_ids_find_impl(struct tokenizer *t)
{
    for (int b = 0; b < 256; b++) {
        char name[8];
        static const char hex[] = "0123456789ABCDEF";
        name[0] = '<', name[1] = '0', name[2] = 'x', name[3] = hex[b >> 4], name[4] = hex[b & 15],
        name[5] = '>', name[6] = 0;
        t->byte_id[b] = -1;
        /* byte tokens are looked up by piece, not raw bytes (the raw form of
         * "<0x41>" is the text "<0x41>" until decoding) */
        int32_t id = tok_lookup_impl(t, name, 6);
        if (id >= 0)
            t->byte_id[b] = id;
    }
}

uint64_t tok_hash_compute_impl(const struct tokenizer *t)
{
    uint64_t h = DIGEST_FNV1A64_SEED;
    int32_t hdr[2] = {t->kind, t->n_vocab};
    h = digest_fnv1a64(h, hdr, sizeof hdr);
    for (int32_t id = 0; id < t->n_vocab; id++) {
        uint32_t len = t->raw_len[id];
        h = digest_fnv1a64(h, &len, sizeof len);
        h = digest_fnv1a64(h, tok_raw(t, id), len);
        h = digest_fnv1a64(h, &t->type[id], 1);
        if (t->score)
            h = digest_fnv1a64(h, &t->score[id], sizeof t->score[id]);
    }
    for (size_t i = 0; i < t->merges.cap; i++) {
        if (t->merges.keys[i] == UINT64_MAX)
            continue;
        /* slot order depends only on the key set, so this is deterministic */
        h = digest_fnv1a64(h, &t->merges.keys[i], sizeof t->merges.keys[i]);
        h = digest_fnv1a64(h, &t->merges.rank[i], sizeof t->merges.rank[i]);
    }
    if (t->cm_units) { /* the normalizer changes ids too */
        h = digest_fnv1a64(h, t->cm_units, t->cm_n_units * sizeof *t->cm_units);
        h = digest_fnv1a64(h, t->cm_norm, t->cm_norm_bytes);
    }
    int flags[5] = {t->norm_prepend, t->norm_replace_space, t->remove_extra_ws, t->byte_fallback,
                    t->norm_nfc};
    return digest_fnv1a64(h, flags, sizeof flags);
}

int tok_ids_push_impl(tok_ids *v, int32_t id)
{
    int32_t *nv = qs_grow(v->v, &v->cap, v->n + 1, sizeof *nv, 256);
    if (!nv)
        return QS_ENOMEM;
    v->v = nv;
    v->v[v->n++] = id;
    return 0;
}

void tok_free_impl(struct tokenizer *t)
{
    qs_free(t->arena);
    qs_free(t->piece_off);
    qs_free(t->raw_off);
    qs_free(t->raw_len);
    qs_free(t->type);
    qs_free(t->score);
    qs_free(t->vocab.slots);
    qs_free(t->merges.keys);
    qs_free(t->merges.rank);
    qs_free(t->merges.merged);
    qs_free(t->added);
    qs_free(t->added_next);
    qs_free(t->cm_units);
    qs_free(t->cm_norm);
}
