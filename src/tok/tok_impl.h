/* tok_impl.h: internals shared by tokenizer.c and its backends (src/tok/tok_*.c).
 *
 * Design: every backend fills the same `struct tokenizer`.  Vocabulary strings
 * live in one arena (offsets per id).  Each id has two forms:
 *   piece  the string as the file spells it ("Ġthe", "▁the", "<0x0A>"),
 *   raw    the bytes it stands for in text ("\x20the", "▁the", "\n" for byte tokens
 *          only when decoding).  Byte-level vocabularies are mapped back to raw
 *          bytes at load time, so encoding works on raw bytes for every family and
 *          the GPT-2 byte<->unicode table never appears in the hot loop.
 * Lookups are hash maps (raw bytes -> id, (left id, right id) -> merge rank), so
 * 150k vocabularies load in linear time.
 */
#ifndef QS_TOK_IMPL_H
#define QS_TOK_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"
#include "qs/tokenizer.h"

enum { TOK_KIND_BYTELEVEL = 0, TOK_KIND_BPE_SPM = 1, TOK_KIND_SPM_MODEL = 2 };

/* Piece types (values of sentencepiece's ModelProto.SentencePiece.Type). */
enum {
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER = 4,
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,
};

/* Byte-level pre-tokenizer regexes we implement by hand (see tok_pretok.c). */
enum { TOK_PRETOK_NONE = 0, TOK_PRETOK_GPT2 = 1, TOK_PRETOK_LLAMA3 = 2, TOK_PRETOK_QWEN2 = 3 };
/* Metaspace prepend scheme. */
enum { TOK_PREPEND_NEVER = 0, TOK_PREPEND_ALWAYS = 1, TOK_PREPEND_FIRST = 2 };

/* An added token (HF "added_tokens", or a control/user piece of a .model). */
typedef struct tok_added {
    int32_t id;
    size_t content_off; /* in the arena */
    uint32_t len_bytes;
    uint8_t special, lstrip, rstrip, single_word;
} tok_added;

/* raw bytes -> id (open addressing; slot holds id + 1, 0 = empty). */
typedef struct tok_strmap {
    int32_t *slots;
    size_t cap; /* power of two */
} tok_strmap;

/* (left id, right id) -> (rank, merged id). */
typedef struct tok_pairmap {
    uint64_t *keys; /* UINT64_MAX = empty */
    int32_t *rank;
    int32_t *merged;
    size_t cap;
} tok_pairmap;

/* Growable id vector. */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;

struct tokenizer {
    int kind;        /* TOK_KIND_* */
    char path[1024]; /* file it came from, for diagnostics */
    int32_t n_vocab; /* 1 + highest id */
    char *arena;     /* all strings */
    size_t arena_bytes, arena_cap;
    size_t *piece_off; /* (n_vocab) piece string, NUL-terminated, in arena; SIZE_MAX = hole */
    size_t *raw_off;   /* (n_vocab) raw bytes in arena */
    uint32_t *raw_len; /* (n_vocab) */
    uint8_t *type;     /* (n_vocab) TOK_TYPE_* */
    float *score;      /* (n_vocab) sentencepiece scores, NULL for tokenizer.json */
    tok_strmap vocab;  /* raw bytes -> id (model vocabulary, not added tokens) */
    tok_pairmap merges;
    int32_t byte_id[256]; /* id of <0xXX>, -1 if absent */
    tok_added *added;
    int n_added;
    int32_t added_by_byte[256]; /* first added token whose content starts with the byte, -1 */
    int32_t *added_next;        /* (n_added) next with the same first byte, -1 */

    int32_t unk_id, bos_id, eos_id;
    int add_bos, add_eos;
    /* model options */
    int byte_fallback, fuse_unk, ignore_merges;
    /* byte-level */
    int pretok, bl_add_prefix_space;
    /* sentencepiece-style: normalizer Prepend/Replace, Metaspace, decoder Strip */
    int norm_prepend, norm_replace_space, meta_prepend, meta_split, decode_strip_space;
    int norm_nfc; /* normalizer NFC (Qwen2): tok_nfc.c */
    /* .model normalizer spec and precompiled charsmap (tok_spm_norm.c) */
    int remove_extra_ws;
    uint32_t *cm_units; /* (cm_n_units) darts-clone double array, NULL if none */
    size_t cm_n_units;
    char *cm_norm; /* (cm_norm_bytes + 1) NUL-separated replacement strings */
    size_t cm_norm_bytes;
    /* no piece has "▁" after another character: text may be cut before such a
     * "▁" without changing the result (tok_bpe_metaspace_impl) */
    int ms_cut_safe;
    uint64_t hash;
};

/* tok_vocab.c: arena, maps, helpers */
int tok_vocab_alloc_impl(struct tokenizer *t, int32_t n_vocab);
int tok_arena_add_impl(struct tokenizer *t, const char *s, size_t len, size_t *off);
int tok_set_piece_impl(struct tokenizer *t, int32_t id, const char *piece, size_t piece_len,
                       const char *raw, size_t raw_len);
int tok_strmap_build_impl(struct tokenizer *t);
int32_t tok_lookup_impl(const struct tokenizer *t, const char *s, size_t len);
int tok_pairmap_init_impl(tok_pairmap *m, size_t n);
int tok_pairmap_put_impl(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged);
int tok_pairmap_get_impl(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank,
                         int32_t *merged);
int tok_added_index_impl(struct tokenizer *t);
void tok_byte_ids_find_impl(struct tokenizer *t);
uint64_t tok_hash_compute_impl(const struct tokenizer *t);
void tok_free_impl(struct tokenizer *t);
static inline const char *tok_raw(const struct tokenizer *t, int32_t id)
{
    return t->arena + t->raw_off[id];
}
int tok_ids_push_impl(tok_ids *v, int32_t id);

/* tok_merge.c: BPE merge loop over a byte string cut into symbols. */
typedef struct tok_symbol {
    uint32_t start, len; /* byte range in the word */
    int32_t id;          /* vocab id of the range, -1 if not in the vocabulary */
    int32_t prev, next;  /* -1 at the ends */
} tok_symbol;
/* Merge rule: rank-ordered pairs (tokenizer.json) or score-ordered concatenations (.model). */
int tok_bpe_word_impl(const struct tokenizer *t, const char *word, size_t len, int char_split,
                      tok_ids *out);

/* Metaspace text: cut before every "▁" that follows a non-"▁" character when
 * t->ms_cut_safe (no merge can cross such a cut), BPE each piece. */
int tok_bpe_metaspace_impl(const struct tokenizer *t, const char *s, size_t len, tok_ids *out);
void tok_ms_cut_check_impl(struct tokenizer *t);

/* tok_pretok.c: byte-level pre-tokenizer (hand-written regex semantics). */
size_t tok_pretok_next_impl(int pretok, const char *s, size_t len, size_t pos);
/* GPT-2 bytes_to_unicode: byte -> code point (U+0021..U+0143).  O(256): build tables. */
uint32_t tok_byte_to_cp_impl(uint8_t b);
/* UTF-8: decode one code point at s[pos] (invalid bytes decode as themselves, length 1). */
uint32_t tok_utf8_next_impl(const char *s, size_t len, size_t pos, size_t *n_bytes);
size_t tok_utf8_put_impl(char *dst, uint32_t cp);

/* tok_nfc.c: NFC of s; *out is qs_malloc'd, or NULL when s is already NFC by
 * the quick byte check (then use s as is). */
int tok_nfc_impl(const char *s, size_t len, char **out, size_t *out_len);
/* tok_nfc_tables.c (generated) */
int tok_nfc_ccc_impl(uint32_t cp);
int tok_nfc_decomp_impl(uint32_t cp, uint32_t *first, uint32_t *second);
uint32_t tok_nfc_compose_impl(uint32_t a, uint32_t b);

/* tok_unicode.c (generated) */
int tok_is_letter_impl(uint32_t cp);
int tok_is_number_impl(uint32_t cp);
int tok_is_space_impl(uint32_t cp);

/* Backends: load, and encode one segment of text that holds no added token. */
int tok_json_load_impl(struct tokenizer *t, const char *path, qs_diag *d);
int tok_json_encode_impl(const struct tokenizer *t, const char *s, size_t len, int at_start,
                         tok_ids *out);
int tok_spm_load_impl(struct tokenizer *t, const char *path, qs_diag *d);
int tok_spm_encode_impl(const struct tokenizer *t, const char *s, size_t len, tok_ids *out);
/* tok_spm_norm.c */
int tok_spm_charsmap_load_impl(struct tokenizer *t, const unsigned char *blob, size_t n,
                               const char *path, qs_diag *d);
/* sentencepiece Normalizer::Normalize; *out is qs_malloc'd, NULL when empty. */
int tok_spm_normalize_impl(const struct tokenizer *t, const char *s, size_t len, char **out,
                           size_t *out_len);

#endif
