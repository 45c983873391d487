/* tok_bpe.c: Hugging Face tokenizer.json, model type BPE.
 *
 * Two families are recognised from the pipeline the file declares:
 *  byte-level  pre_tokenizer ByteLevel (GPT-2), or Sequence[Split(regex), ByteLevel]
 *              (Llama-3, Qwen2); the regex must be one tok_pretok.c implements,
 *              anything else is refused by name.  Vocabulary strings are mapped back
 *              through GPT-2's bytes_to_unicode at load time.
 *  sentencepiece-style  normalizer Prepend("▁") + Replace(" ", "▁") (Llama-2,
 *              TinyLlama legacy files) or pre_tokenizer Metaspace (newer files);
 *              BPE over UTF-8 characters with <0xXX> byte fallback.
 * Merges are "a b" strings or ["a", "b"] pairs; rank = position in the list.
 * Normalizer NFC (Qwen2) is applied first (tok_nfc.c).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "qs/json.h"
#include "qs/mem.h"
#include "tok_impl.h"

static const char METASPACE[] = "\xE2\x96\x81"; /* U+2581 ▁ */

static const char RE_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char RE_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

typedef struct loader {
    struct tokenizer *t;
    const char *path;
    qs_diag *d;
    int16_t cp_to_byte[0x144]; /* inverse bytes_to_unicode, -1 = not a byte char */
    char *buf;                 /* scratch for converted strings */
    size_t buf_cap;
} loader;

/* "type" of a pipeline step ("" when absent) */
static int type_of(loader *L, const qs_json_at *o, const char **ty)
{
    return qs_json_str_or(o, "type", "", ty, L->d);
}

static int scratch_reserve(loader *L, size_t n)
{
    char *nb = qs_grow(L->buf, &L->buf_cap, n, 1, 256);
    if (!nb)
        return QS_ENOMEM;
    L->buf = nb;
    return 0;
}

/* file spelling -> raw bytes (byte-level vocabularies only), into L->buf + at */
static int piece_to_raw(loader *L, size_t at, const char *s, size_t len, size_t *raw_len)
{
    if (scratch_reserve(L, at + len + 1))
        return QS_ENOMEM;
    size_t o = at;
    for (size_t pos = 0; pos < len;) {
        size_t nb;
        uint32_t cp = tok_utf8_next_impl(s, len, pos, &nb);
        if (cp < 0x144 && L->cp_to_byte[cp] >= 0 && !(nb == 1 && cp >= 0x80)) {
            L->buf[o++] = (char)L->cp_to_byte[cp];
        } else {
            memcpy(L->buf + o, s + pos, nb);
            o += nb;
        }
        pos += nb;
    }
    *raw_len = o - at;
    return 0;
}

static int set_piece(loader *L, int32_t id, const char *s, size_t len)
{
    if (L->t->kind != TOK_KIND_BYTELEVEL)
        return tok_set_piece_impl(L->t, id, s, len, s, len);
    size_t raw_len;
    int rc = piece_to_raw(L, 0, s, len, &raw_len);
    return rc ? rc : tok_set_piece_impl(L->t, id, s, len, L->buf, raw_len);
}

/* id of a token as the file spells it, -1 if absent (or out of memory) */
static int32_t lookup_piece(loader *L, const char *s)
{
    size_t len = strlen(s), raw_len = len;
    if (L->t->kind != TOK_KIND_BYTELEVEL)
        return tok_lookup_impl(L->t, s, len);
    if (piece_to_raw(L, 0, s, len, &raw_len))
        return -1;
    return tok_lookup_impl(L->t, L->buf, raw_len);
}

static int fail(loader *L, int code, const char *what)
{
    return diag_set(L->d, code, L->path, -1, "%s", what);
}

/* ---- pipeline: which family, which options ---- */

static int pretok_regex(loader *L, const qs_json_at *split)
{
    qs_json_at pat = qs_json_key(split, "pattern");
    const char *re = NULL;
    int rc = qs_json_str_or(&pat, "Regex", NULL, &re, L->d);
    if (!rc && !re && json_is_object(pat.v))
        rc = qs_json_str_or(&pat, "String", NULL, &re, L->d);
    if (rc)
        return rc;
    if (re && !strcmp(re, RE_GPT2))
        return TOK_PRETOK_GPT2;
    if (re && !strcmp(re, RE_LLAMA3))
        return TOK_PRETOK_LLAMA3;
    if (re && !strcmp(re, RE_QWEN2))
        return TOK_PRETOK_QWEN2;
    return diag_set(L->d, QS_EUNSUPPORTED, L->path, -1,
                    "pre_tokenizer Split pattern '%.200s' is not supported (expected the GPT-2, "
                    "Llama-3 or Qwen2 regex)",
                    re ? re : "?");
}

/* Metaspace's prepend rule: prepend_scheme, else the older add_prefix_space */
static int metaspace_prepend(loader *L, const qs_json_at *p, int *prepend)
{
    const char *scheme;
    int aps, rc;
    if ((rc = qs_json_str_or(p, "prepend_scheme", NULL, &scheme, L->d)) ||
        (rc = qs_json_bool_or(p, "add_prefix_space", 1, &aps, L->d)))
        return rc;
    if (scheme)
        *prepend = !strcmp(scheme, "always")  ? TOK_PREPEND_ALWAYS
                   : !strcmp(scheme, "first") ? TOK_PREPEND_FIRST
                                              : TOK_PREPEND_NEVER;
    else
        *prepend = aps ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
    return 0;
}

static int pretok_one(loader *L, const qs_json_at *p, int *saw_bytelevel)
{
    struct tokenizer *t = L->t;
    const char *ty, *rep;
    int rc = type_of(L, p, &ty);
    if (rc)
        return rc;
    if (!strcmp(ty, "ByteLevel")) {
        int use_regex;
        *saw_bytelevel = 1;
        if ((rc = qs_json_bool_or(p, "add_prefix_space", 0, &t->bl_add_prefix_space, L->d)) ||
            (rc = qs_json_bool_or(p, "use_regex", 1, &use_regex, L->d)))
            return rc;
        if (use_regex && t->pretok == TOK_PRETOK_NONE)
            t->pretok = TOK_PRETOK_GPT2;
        return 0;
    }
    if (!strcmp(ty, "Split")) {
        int r = pretok_regex(L, p);
        if (r < 0)
            return r;
        t->pretok = r;
        return 0;
    }
    if (!strcmp(ty, "Metaspace")) {
        if ((rc = qs_json_str_or(p, "replacement", NULL, &rep, L->d)))
            return rc;
        if (rep && strcmp(rep, METASPACE))
            return fail(L, QS_EUNSUPPORTED, "pre_tokenizer Metaspace: only replacement '\xE2\x96\x81' "
                                            "is supported");
        if ((rc = metaspace_prepend(L, p, &t->meta_prepend)) ||
            (rc = qs_json_bool_or(p, "split", 1, &t->meta_split, L->d)))
            return rc;
        t->norm_replace_space = 1;
        return 0;
    }
    return diag_set(L->d, QS_EUNSUPPORTED, L->path, -1,
                    "pre_tokenizer type '%.100s' is not supported (expected ByteLevel, Split or "
                    "Metaspace)",
                    ty);
}

/* One step, or each step of a {"type": "Sequence", list_key: [...]} */
typedef int (*step_fn)(loader *L, const qs_json_at *step, int *arg);
static int each_step(loader *L, const qs_json_at *root, const char *key, const char *list_key,
                     step_fn fn, int *arg)
{
    qs_json_at p = qs_json_key(root, key), list;
    const char *ty;
    size_t n;
    int rc;
    if (!p.v || json_is_null(p.v))
        return 0;
    if ((rc = type_of(L, &p, &ty)))
        return rc;
    if (strcmp(ty, "Sequence"))
        return fn(L, &p, arg);
    if ((rc = qs_json_arr(&p, list_key, &list, &n, L->d)))
        return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        qs_json_at e = qs_json_item(&list, i);
        rc = fn(L, &e, arg);
    }
    return rc;
}

static int normalizer_one(loader *L, const qs_json_at *n, int *unused)
{
    (void)unused;
    const char *ty, *s = NULL, *to = NULL;
    qs_json_at pat = qs_json_key(n, "pattern");
    int rc = type_of(L, n, &ty);
    if (rc)
        return rc;
    if (!strcmp(ty, "Prepend")) {
        if ((rc = qs_json_str_or(n, "prepend", NULL, &s, L->d)))
            return rc;
        if (!s || strcmp(s, METASPACE))
            return fail(L, QS_EUNSUPPORTED, "normalizer Prepend: only '\xE2\x96\x81' is supported");
        L->t->norm_prepend = 1;
        return 0;
    }
    if (!strcmp(ty, "Replace")) {
        if ((json_is_object(pat.v) && (rc = qs_json_str_or(&pat, "String", NULL, &s, L->d))) ||
            (rc = qs_json_str_or(n, "content", NULL, &to, L->d)))
            return rc;
        if (!s || !to || strcmp(s, " ") || strcmp(to, METASPACE))
            return fail(L, QS_EUNSUPPORTED,
                        "normalizer Replace: only ' ' -> '\xE2\x96\x81' is supported");
        L->t->norm_replace_space = 1;
        return 0;
    }
    if (!strcmp(ty, "NFC")) {
        L->t->norm_nfc = 1;
        return 0;
    }
    return diag_set(L->d, QS_EUNSUPPORTED, L->path, -1,
                    "normalizer type '%.100s' is not supported (expected Prepend, Replace or NFC)",
                    ty);
}

/* decoders: Strip(start >= 1) or Metaspace(prepend) drop the leading space;
 * ByteLevel, ByteFallback, Fuse and Replace('▁' -> ' ') are what decoding
 * does anyway; any other is refused, as unknown normalizers are. */
static int decoder_one(loader *L, const qs_json_at *e, int *unused)
{
    (void)unused;
    const char *ty, *s = NULL, *to = NULL;
    int rc = type_of(L, e, &ty), start, prepend;
    if (rc)
        return rc;
    if (!strcmp(ty, "Replace")) {
        qs_json_at pat = qs_json_key(e, "pattern");
        if ((json_is_object(pat.v) && (rc = qs_json_str_or(&pat, "String", NULL, &s, L->d))) ||
            (rc = qs_json_str_or(e, "content", NULL, &to, L->d)))
            return rc;
        if (!s || !to || strcmp(s, METASPACE) || strcmp(to, " "))
            return qs_json_fail(e, NULL, QS_EUNSUPPORTED, L->d, "decoder Replace: only "
                                "'\xE2\x96\x81' -> ' ' is supported");
        return 0;
    }
    if (strcmp(ty, "Strip") && strcmp(ty, "Metaspace") && strcmp(ty, "ByteLevel") &&
        strcmp(ty, "ByteFallback") && strcmp(ty, "Fuse"))
        return qs_json_fail(e, "type", QS_EUNSUPPORTED, L->d, "decoder type '%.100s' is not "
                            "supported (expected ByteLevel, Metaspace, Replace, ByteFallback, "
                            "Fuse or Strip)", ty);
    if (!strcmp(ty, "Strip")) {
        if ((rc = qs_json_int_or(e, "start", 0, INT32_MAX, 0, &start, L->d)))
            return rc;
        if (start >= 1)
            L->t->decode_strip_space = 1;
    }
    if (!strcmp(ty, "Metaspace")) {
        if ((rc = metaspace_prepend(L, e, &prepend)))
            return rc;
        L->t->decode_strip_space = prepend != TOK_PREPEND_NEVER;
    }
    return 0;
}

static int pretok_step(loader *L, const qs_json_at *p, int *saw_bytelevel)
{
    return pretok_one(L, p, saw_bytelevel);
}

/* TemplateProcessing: a SpecialToken before $A means BOS by default, after it EOS.
 * Every SpecialToken of `single` and `pair` must be listed in special_tokens with
 * ids in the vocabulary (HF refuses a missing one at load too). */
static int template_list(loader *L, const qs_json_at *pp, const char *which, int set)
{
    qs_json_at list = qs_json_key(pp, which), specials = qs_json_key(pp, "special_tokens");
    int seen_seq = 0, rc;
    for (size_t i = 0; i < json_array_size((json_t *)list.v); i++) {
        qs_json_at e = qs_json_item(&list, i), st = qs_json_key(&e, "SpecialToken");
        const char *name;
        if (json_object_get((json_t *)e.v, "Sequence"))
            seen_seq = 1;
        if (!st.v)
            continue;
        if ((rc = qs_json_str(&st, "id", &name, L->d)))
            return rc;
        qs_json_at sp = qs_json_key(&specials, name);
        json_t *ids = json_object_get((json_t *)sp.v, "ids");
        if (!sp.v)
            return qs_json_fail(&st, "id", QS_EFORMAT, L->d, "special token '%.100s' is not "
                                "listed in special_tokens (expected each SpecialToken there, with "
                                "its vocabulary ids)", name);
        for (size_t k = 0; k < json_array_size(ids); k++) {
            json_t *x = json_array_get(ids, k);
            json_int_t id = json_integer_value(x);
            if (!json_is_integer(x))
                return qs_json_fail(&sp, "ids", QS_EFORMAT, L->d, "special token '%.100s': "
                                    "expected integer ids, found %s", name, qs_json_type_name(x));
            if (id < 0 || id >= L->t->n_vocab)
                return qs_json_fail(&sp, "ids", QS_EFORMAT, L->d, "special token '%.100s' has "
                                    "id %lld, not in the vocabulary (expected ids 0..%d)", name,
                                    (long long)id, (int)L->t->n_vocab - 1);
        }
        if (!set || json_array_size(ids) != 1)
            continue;
        int32_t id = (int32_t)json_integer_value(json_array_get(ids, 0));
        if (!seen_seq) {
            L->t->add_bos = 1;
            L->t->bos_id = id;
        } else {
            L->t->add_eos = 1;
            L->t->eos_id = id;
        }
    }
    return 0;
}

static int parse_post(loader *L, const qs_json_at *pp)
{
    if (!pp->v || json_is_null(pp->v))
        return 0;
    const char *ty = json_string_value(json_object_get((json_t *)pp->v, "type"));
    int rc;
    if (ty && !strcmp(ty, "Sequence")) {
        qs_json_at list = qs_json_key(pp, "processors");
        for (size_t i = 0; i < json_array_size((json_t *)list.v); i++) {
            qs_json_at e = qs_json_item(&list, i);
            if ((rc = parse_post(L, &e)))
                return rc;
        }
        return 0;
    }
    if (!ty || strcmp(ty, "TemplateProcessing"))
        return 0;
    if ((rc = template_list(L, pp, "single", 1)))
        return rc;
    return template_list(L, pp, "pair", 0);
}

/* ---- vocabulary, added tokens, merges ---- */

#define TOK_JSON_MAX_ID (INT32_MAX / 2 - 1)

static int load_vocab(loader *L, const qs_json_at *vocab_at, const qs_json_at *added_at)
{
    struct tokenizer *t = L->t;
    json_t *vocab = (json_t *)vocab_at->v, *added = (json_t *)added_at->v;
    /* Ids are dense: model.vocab holds 0..N-1 and added_tokens repeat some of
     * them or extend the range, so every id is below the number of entries.  The
     * table is sized by the highest id: bounding it by the entry count keeps it
     * linear in the file (one id of 1e9 in a 15 KB file would cost 17 GB). */
    size_t n_entries = json_object_size(vocab) + json_array_size(added);
    long long max_id = -1, idv;
    long long id_lim = n_entries <= TOK_JSON_MAX_ID ? (long long)n_entries : TOK_JSON_MAX_ID + 1;
    const char *key;
    json_t *v;
    int rc;
    json_object_foreach(vocab, key, v)
    {
        if ((rc = qs_json_i64(vocab_at, key, 0, TOK_JSON_MAX_ID, &idv, L->d)))
            return rc;
        if (idv >= id_lim)
            return qs_json_fail(vocab_at, key, QS_EFORMAT, L->d, "id %lld is beyond the %zu "
                                "entries of model.vocab and added_tokens (expected ids 0..%lld, "
                                "without gaps)", idv, n_entries, id_lim - 1);
        if (idv > max_id)
            max_id = idv;
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        qs_json_at a = qs_json_item(added_at, i);
        const char *content;
        if ((rc = qs_json_i64(&a, "id", 0, TOK_JSON_MAX_ID, &idv, L->d)) ||
            (rc = qs_json_str(&a, "content", &content, L->d)))
            return rc;
        if (idv >= id_lim)
            return qs_json_fail(&a, "id", QS_EFORMAT, L->d, "'%.100s' has id %lld, beyond the "
                                "%zu entries of model.vocab and added_tokens (expected ids "
                                "0..%lld, without gaps)", content, idv, n_entries, id_lim - 1);
        if (idv > max_id)
            max_id = idv;
    }
    if (max_id < 0)
        return fail(L, QS_EFORMAT, "model.vocab is empty (expected a vocabulary)");
    if ((rc = tok_vocab_alloc_impl(t, (int32_t)max_id + 1)))
        return fail(L, rc, "out of memory for the vocabulary");
    json_object_foreach(vocab, key, v)
    {
        int32_t id = (int32_t)json_integer_value(v);
        if (t->piece_off[id] != SIZE_MAX)   /* one id, two tokens: one of them unreachable */
            return qs_json_fail(vocab_at, key, QS_EFORMAT, L->d, "id %d is also another "
                                "token's: expected one token per id", (int)id);
        if ((rc = set_piece(L, id, key, strlen(key))) != 0)
            return fail(L, rc, "out of memory for the vocabulary");
        t->type[id] = TOK_TYPE_NORMAL;
    }
    t->added = qs_calloc(json_array_size(added) + 1, sizeof *t->added);
    if (!t->added)
        return fail(L, QS_ENOMEM, "out of memory for added tokens");
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a)
    {
        int32_t id = (int32_t)json_integer_value(json_object_get(a, "id"));
        json_t *c = json_object_get(a, "content");
        const char *s = json_string_value(c);
        size_t len = json_string_length(c);
        if (t->piece_off[id] == SIZE_MAX &&
            (rc = tok_set_piece_impl(t, id, s, len, s, len)) != 0)
            return fail(L, rc, "out of memory for added tokens");
        tok_added *ad = &t->added[t->n_added];
        if ((rc = tok_arena_add_impl(t, s, len, &ad->content_off)) != 0)
            return fail(L, rc, "out of memory for added tokens");
        t->n_added++;
        ad->id = id;
        ad->len_bytes = (uint32_t)len;
        ad->special = json_is_true(json_object_get(a, "special"));
        ad->lstrip = json_is_true(json_object_get(a, "lstrip"));
        ad->rstrip = json_is_true(json_object_get(a, "rstrip"));
        ad->single_word = json_is_true(json_object_get(a, "single_word"));
        t->type[id] = ad->special ? TOK_TYPE_CONTROL : TOK_TYPE_USER;
    }
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->piece_off[id] == SIZE_MAX)
            return qs_json_fail(vocab_at, NULL, QS_EFORMAT, L->d, "no token has id %d, yet "
                                "ids go up to %d (expected ids 0..%d, without gaps)", (int)id,
                                (int)max_id, (int)max_id);
    return 0;
}

static int merge_sides(json_t *m, const char **a, size_t *a_len, const char **b, size_t *b_len)
{
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0));
        *a_len = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1));
        *b_len = json_string_length(json_array_get(m, 1));
        return 1;
    }
    const char *s = json_string_value(m);
    const char *sp = s ? strchr(s + (s[0] == ' '), ' ') : NULL;
    if (!sp)
        return 0;
    *a = s;
    *a_len = (size_t)(sp - s);
    *b = sp + 1;
    *b_len = strlen(sp + 1);
    return 1;
}

static int load_merges(loader *L, const qs_json_at *merges_at)
{
    struct tokenizer *t = L->t;
    json_t *merges = (json_t *)merges_at->v;
    size_t n = json_array_size(merges);
    if (n > INT32_MAX / 2)
        return fail(L, QS_ERANGE, "model.merges: too many merges");
    if (tok_pairmap_init_impl(&t->merges, n))
        return fail(L, QS_ENOMEM, "out of memory for merges");
    size_t i;
    json_t *m;
    json_array_foreach(merges, i, m)
    {
        const char *a, *b;
        size_t a_len, b_len, ra, rb;
        qs_json_at at = qs_json_item(merges_at, i);
        if (!merge_sides(m, &a, &a_len, &b, &b_len))
            return qs_json_fail(&at, NULL, QS_EFORMAT, L->d,
                                "expected \"left right\" or [left, right], found %s",
                                qs_json_type_name(m));
        /* raw(a) raw(b) side by side in L->buf: a, b and a+b are all slices */
        int32_t ia, ib, im;
        if (t->kind == TOK_KIND_BYTELEVEL) {
            if (piece_to_raw(L, 0, a, a_len, &ra) || piece_to_raw(L, ra, b, b_len, &rb))
                return fail(L, QS_ENOMEM, "out of memory for merges");
        } else {
            ra = a_len, rb = b_len;
            if (scratch_reserve(L, ra + rb + 1))
                return fail(L, QS_ENOMEM, "out of memory for merges");
            memcpy(L->buf, a, ra);
            memcpy(L->buf + ra, b, rb);
        }
        ia = tok_lookup_impl(t, L->buf, ra);
        ib = tok_lookup_impl(t, L->buf + ra, rb);
        im = tok_lookup_impl(t, L->buf, ra + rb);
        if (ia < 0 || ib < 0 || im < 0)
            return qs_json_fail(&at, NULL, QS_EFORMAT, L->d,
                                "'%.*s' + '%.*s': expected both parts and their concatenation in "
                                "$.model.vocab",
                                (int)(a_len < 60 ? a_len : 60), a, (int)(b_len < 60 ? b_len : 60),
                                b);
        tok_pairmap_put_impl(&t->merges, ia, ib, (int32_t)i, im);
    }
    return 0;
}

static int load_root(loader *L, const qs_json_at *r)
{
    struct tokenizer *t = L->t;
    qs_json_at model, vocab, merges, added = qs_json_key(r, "added_tokens");
    const char *mt, *unk, *dec_ty;
    int saw_bytelevel = 0, rc;
    if ((rc = qs_json_obj(r, "model", &model, L->d)) ||
        (rc = qs_json_str_or(&model, "type", NULL, &mt, L->d)))
        return rc;
    if (mt && strcmp(mt, "BPE"))
        return qs_json_fail(&model, "type", QS_EUNSUPPORTED, L->d,
                            "'%.60s' is not supported (expected BPE)", mt);
    if ((rc = qs_json_obj(&model, "vocab", &vocab, L->d)) ||
        (rc = qs_json_arr(&model, "merges", &merges, NULL, L->d)) ||
        (added.v && !json_is_null(added.v) && (rc = qs_json_arr(r, "added_tokens", &added, NULL, L->d))))
        return rc;
    if ((rc = each_step(L, r, "pre_tokenizer", "pretokenizers", pretok_step, &saw_bytelevel)) ||
        (rc = each_step(L, r, "normalizer", "normalizers", normalizer_one, NULL)))
        return rc;
    qs_json_at dec = qs_json_key(r, "decoder");
    if (json_is_object(dec.v) && (rc = type_of(L, &dec, &dec_ty)))
        return rc;
    if (json_is_object(dec.v) && !strcmp(dec_ty, "ByteLevel"))
        saw_bytelevel = 1;
    if (saw_bytelevel) {
        t->kind = TOK_KIND_BYTELEVEL;
    } else if (t->norm_prepend || t->norm_replace_space) {
        t->kind = TOK_KIND_BPE_SPM;
    } else {
        return fail(L, QS_EUNSUPPORTED,
                    "BPE pipeline not recognised (expected a ByteLevel pre_tokenizer, or a "
                    "Metaspace / Prepend+Replace '\xE2\x96\x81' normalizer)");
    }
    if (t->kind == TOK_KIND_BYTELEVEL && (t->norm_prepend || t->norm_replace_space))
        return fail(L, QS_EUNSUPPORTED, "ByteLevel mixed with a metaspace normalizer");
    if ((rc = load_vocab(L, &vocab, &added)) != 0)
        return rc;
    if ((rc = tok_strmap_build_impl(t)) != 0)
        return fail(L, rc, "out of memory for the vocabulary index");
    if ((rc = load_merges(L, &merges)) != 0)
        return rc;
    if ((rc = qs_json_bool_or(&model, "byte_fallback", 0, &t->byte_fallback, L->d)) ||
        (rc = qs_json_bool_or(&model, "fuse_unk", 0, &t->fuse_unk, L->d)) ||
        (rc = qs_json_bool_or(&model, "ignore_merges", 0, &t->ignore_merges, L->d)) ||
        (rc = qs_json_str_or(&model, "unk_token", NULL, &unk, L->d)))
        return rc;
    /* no unk_token is fine (byte-level BPE has none); one not in the vocabulary is not */
    t->unk_id = unk ? lookup_piece(L, unk) : -1;
    if (unk && t->unk_id < 0)
        return qs_json_fail(&model, "unk_token", QS_EFORMAT, L->d, "'%.100s' is not in the "
                            "vocabulary (expected a token of $.model.vocab, or no unk_token)", unk);
    tok_byte_ids_find_impl(t);
    if (t->byte_fallback)
        for (int b = 0; b < 256; b++)
            if (t->byte_id[b] >= 0 && t->type[t->byte_id[b]] == TOK_TYPE_NORMAL)
                t->type[t->byte_id[b]] = TOK_TYPE_BYTE;
    if ((rc = each_step(L, r, "decoder", "decoders", decoder_one, NULL)))
        return rc;
    qs_json_at post = qs_json_key(r, "post_processor");
    if ((rc = parse_post(L, &post)))
        return rc;
    if (t->kind == TOK_KIND_BPE_SPM)
        tok_ms_cut_check_impl(t);
    return 0;
}

int tok_json_load_impl(struct tokenizer *t, const char *path, qs_diag *d)
{
    json_t *root;
    int rc = qs_json_load_file(path, QS_JSON_OBJECT, &root, d);
    if (rc) {
        if (rc == QS_EFORMAT && d) {   /* not JSON, or not an object: say what was wanted */
            size_t n = strlen(d->msg);
            snprintf(d->msg + n, sizeof d->msg - n, " (expected a Hugging Face tokenizer.json)");
        }
        return rc;
    }
    loader L = {.t = t, .path = path, .d = d};
    for (int i = 0; i < 0x144; i++)
        L.cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++)
        L.cp_to_byte[tok_byte_to_cp_impl((uint8_t)b)] = (int16_t)b;
    qs_json_at r = qs_json_root(root, path, -1);
    rc = load_root(&L, &r);
    qs_free(L.buf);
    json_decref(root);
    return rc;
}

/* ---- encoding one segment (no added tokens inside) ---- */

static int encode_bytelevel(const struct tokenizer *t, const char *s, size_t len, tok_ids *out)
{
    for (size_t pos = 0; pos < len;) {
        size_t end = tok_pretok_next_impl(t->pretok, s, len, pos);
        int32_t id = t->ignore_merges ? tok_lookup_impl(t, s + pos, end - pos) : -1;
        int rc = id >= 0 ? tok_ids_push_impl(out, id)
                         : tok_bpe_word_impl(t, s + pos, end - pos, 0, out);
        if (rc)
            return rc;
        pos = end;
    }
    return 0;
}

static int encode_normalized(const struct tokenizer *t, const char *s, size_t len, int at_start,
                             tok_ids *out);

int tok_json_encode_impl(const struct tokenizer *t, const char *s, size_t len, int at_start,
                         tok_ids *out)
{
    if (!t->norm_nfc)
        return encode_normalized(t, s, len, at_start, out);
    char *nfc;
    size_t nfc_len;
    int rc = tok_nfc_impl(s, len, &nfc, &nfc_len);
    if (!rc)
        rc = nfc ? encode_normalized(t, nfc, nfc_len, at_start, out)
                 : encode_normalized(t, s, len, at_start, out);
    qs_free(nfc);
    return rc;
}

static int encode_normalized(const struct tokenizer *t, const char *s, size_t len, int at_start,
                             tok_ids *out)
{
    if (len == 0)
        return 0;
    /* worst case: a prefix plus every byte a space turned into 3-byte ▁ */
    char *buf = qs_malloc(3 * len + 4);
    if (!buf)
        return QS_ENOMEM;
    size_t n = 0;
    int rc;
    if (t->kind == TOK_KIND_BYTELEVEL) {
        if (t->bl_add_prefix_space && s[0] != ' ')
            buf[n++] = ' ';
        memcpy(buf + n, s, len);
        n += len;
        rc = encode_bytelevel(t, buf, n, out);
        qs_free(buf);
        return rc;
    }
    /* Prepend normalizer: always; Metaspace: unless the text already starts with ▁ */
    int meta = t->meta_prepend == TOK_PREPEND_ALWAYS ||
               (t->meta_prepend == TOK_PREPEND_FIRST && at_start);
    if (meta && (s[0] == ' ' || (len >= 3 && !memcmp(s, METASPACE, 3))))
        meta = 0;
    if (t->norm_prepend || meta) {
        memcpy(buf, METASPACE, 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ' && t->norm_replace_space) {
            memcpy(buf + n, METASPACE, 3);
            n += 3;
        } else {
            buf[n++] = s[i];
        }
    }
    rc = 0;
    if (!t->meta_split) {
        rc = tok_bpe_metaspace_impl(t, buf, n, out);
    } else { /* Metaspace split: each ▁ starts a new word */
        size_t w = 0;
        for (size_t i = 1; i <= n && !rc; i++) {
            if (i == n || (i + 3 <= n && !memcmp(buf + i, METASPACE, 3))) {
                rc = tok_bpe_word_impl(t, buf + w, i - w, 1, out);
                w = i;
            }
        }
    }
    qs_free(buf);
    return rc;
}
