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
#include <string.h>

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

static const char *str_of(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static const char *type_of(json_t *o)
{
    const char *s = str_of(o, "type");
    return s ? s : "";
}

static int scratch_reserve(loader *L, size_t n)
{
    if (n <= L->buf_cap)
        return 0;
    size_t cap = L->buf_cap ? L->buf_cap : 256;
    while (cap < n)
        cap *= 2;
    char *nb = qs_realloc(L->buf, cap);
    if (!nb)
        return QS_ENOMEM;
    L->buf = nb;
    L->buf_cap = cap;
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

static int fail(loader *L, int code, const char *what)
{
    return diag_set(L->d, code, L->path, -1, "%s", what);
}

/* ---- pipeline: which family, which options ---- */

static int pretok_regex(loader *L, json_t *split)
{
    json_t *pat = json_object_get(split, "pattern");
    const char *re = str_of(pat, "Regex");
    if (!re)
        re = str_of(pat, "String");
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

static int pretok_one(loader *L, json_t *p, int *saw_bytelevel)
{
    struct tokenizer *t = L->t;
    const char *ty = type_of(p);
    if (!strcmp(ty, "ByteLevel")) {
        *saw_bytelevel = 1;
        t->bl_add_prefix_space = json_is_true(json_object_get(p, "add_prefix_space"));
        json_t *ur = json_object_get(p, "use_regex");
        if ((!ur || json_is_true(ur)) && t->pretok == TOK_PRETOK_NONE)
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
        const char *rep = str_of(p, "replacement");
        if (rep && strcmp(rep, METASPACE))
            return fail(L, QS_EUNSUPPORTED, "pre_tokenizer Metaspace: only replacement '\xE2\x96\x81' "
                                            "is supported");
        const char *scheme = str_of(p, "prepend_scheme");
        json_t *aps = json_object_get(p, "add_prefix_space");
        if (scheme)
            t->meta_prepend = !strcmp(scheme, "always")  ? TOK_PREPEND_ALWAYS
                              : !strcmp(scheme, "first") ? TOK_PREPEND_FIRST
                                                         : TOK_PREPEND_NEVER;
        else
            t->meta_prepend = (!aps || json_is_true(aps)) ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
        json_t *split = json_object_get(p, "split");
        t->meta_split = !split || json_is_true(split);
        t->norm_replace_space = 1;
        return 0;
    }
    return diag_set(L->d, QS_EUNSUPPORTED, L->path, -1,
                    "pre_tokenizer type '%.100s' is not supported (expected ByteLevel, Split or "
                    "Metaspace)",
                    ty);
}

static int parse_pretok(loader *L, json_t *root, int *saw_bytelevel)
{
    json_t *p = json_object_get(root, "pre_tokenizer");
    if (!p || json_is_null(p))
        return 0;
    if (!strcmp(type_of(p), "Sequence")) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(p, "pretokenizers"), i, e)
        {
            int rc = pretok_one(L, e, saw_bytelevel);
            if (rc)
                return rc;
        }
        return 0;
    }
    return pretok_one(L, p, saw_bytelevel);
}

static int normalizer_one(loader *L, json_t *n)
{
    const char *ty = type_of(n);
    if (!strcmp(ty, "Prepend")) {
        if (!str_of(n, "prepend") || strcmp(str_of(n, "prepend"), METASPACE))
            return fail(L, QS_EUNSUPPORTED, "normalizer Prepend: only '\xE2\x96\x81' is supported");
        L->t->norm_prepend = 1;
        return 0;
    }
    if (!strcmp(ty, "Replace")) {
        const char *from = str_of(json_object_get(n, "pattern"), "String");
        const char *to = str_of(n, "content");
        if (!from || !to || strcmp(from, " ") || strcmp(to, METASPACE))
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

static int parse_normalizer(loader *L, json_t *root)
{
    json_t *n = json_object_get(root, "normalizer");
    if (!n || json_is_null(n))
        return 0;
    if (strcmp(type_of(n), "Sequence"))
        return normalizer_one(L, n);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(n, "normalizers"), i, e)
    {
        int rc = normalizer_one(L, e);
        if (rc)
            return rc;
    }
    return 0;
}

static void parse_decoder(loader *L, json_t *root)
{
    json_t *dec = json_object_get(root, "decoder");
    json_t *list = json_array();
    if (!strcmp(type_of(dec), "Sequence"))
        json_array_extend(list, json_object_get(dec, "decoders"));
    else if (dec)
        json_array_append(list, dec);
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *ty = type_of(e);
        json_t *start = json_object_get(e, "start");
        if (!strcmp(ty, "Strip") && json_integer_value(start) >= 1)
            L->t->decode_strip_space = 1;
        if (!strcmp(ty, "Metaspace")) {
            const char *scheme = str_of(e, "prepend_scheme");
            json_t *aps = json_object_get(e, "add_prefix_space");
            L->t->decode_strip_space = scheme ? strcmp(scheme, "never") != 0
                                              : (!aps || json_is_true(aps));
        }
    }
    json_decref(list);
}

/* TemplateProcessing: a SpecialToken before $A means BOS by default, after it EOS. */
static void parse_post(loader *L, json_t *pp)
{
    if (!pp || json_is_null(pp))
        return;
    if (!strcmp(type_of(pp), "Sequence")) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(pp, "processors"), i, e) parse_post(L, e);
        return;
    }
    if (strcmp(type_of(pp), "TemplateProcessing"))
        return;
    json_t *single = json_object_get(pp, "single"), *specials = json_object_get(pp, "special_tokens");
    int seen_seq = 0;
    size_t i;
    json_t *e;
    json_array_foreach(single, i, e)
    {
        if (json_object_get(e, "Sequence")) {
            seen_seq = 1;
            continue;
        }
        const char *name = str_of(json_object_get(e, "SpecialToken"), "id");
        json_t *ids = json_object_get(json_object_get(specials, name ? name : ""), "ids");
        if (!name || json_array_size(ids) != 1)
            continue;
        json_int_t id = json_integer_value(json_array_get(ids, 0));
        if (id < 0 || id >= L->t->n_vocab)
            continue;
        if (!seen_seq) {
            L->t->add_bos = 1;
            L->t->bos_id = (int32_t)id;
        } else {
            L->t->add_eos = 1;
            L->t->eos_id = (int32_t)id;
        }
    }
}

/* ---- vocabulary, added tokens, merges ---- */

static int load_vocab(loader *L, json_t *vocab, json_t *added)
{
    struct tokenizer *t = L->t;
    json_int_t max_id = -1;
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v)
    {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= INT32_MAX / 2)
            return diag_set(L->d, QS_EFORMAT, L->path, -1,
                            "model.vocab['%.100s']: expected an id in [0, 2^30), found %s", key,
                            json_is_integer(v) ? "an out-of-range integer" : "a non-integer");
        if (id > max_id)
            max_id = id;
    }
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a)
    {
        json_int_t id = json_integer_value(json_object_get(a, "id"));
        if (!json_is_string(json_object_get(a, "content")) || id < 0 || id >= INT32_MAX / 2)
            return diag_set(L->d, QS_EFORMAT, L->path, -1,
                            "added_tokens[%zu]: expected {\"id\": >= 0, \"content\": string}", i);
        if (id > max_id)
            max_id = id;
    }
    if (max_id < 0)
        return fail(L, QS_EFORMAT, "model.vocab is empty (expected a vocabulary)");
    int rc = tok_vocab_alloc_impl(t, (int32_t)max_id + 1);
    if (rc)
        return fail(L, rc, "out of memory for the vocabulary");
    json_object_foreach(vocab, key, v)
    {
        int32_t id = (int32_t)json_integer_value(v);
        if ((rc = set_piece(L, id, key, strlen(key))) != 0)
            return fail(L, rc, "out of memory for the vocabulary");
        t->type[id] = TOK_TYPE_NORMAL;
    }
    t->added = qs_calloc(json_array_size(added) + 1, sizeof *t->added);
    if (!t->added)
        return fail(L, QS_ENOMEM, "out of memory for added tokens");
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

static int load_merges(loader *L, json_t *merges)
{
    struct tokenizer *t = L->t;
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
        if (!merge_sides(m, &a, &a_len, &b, &b_len))
            return diag_set(L->d, QS_EFORMAT, L->path, -1,
                            "model.merges[%zu]: expected \"left right\" or [left, right]", i);
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
            return diag_set(L->d, QS_EFORMAT, L->path, -1,
                            "model.merges[%zu]: '%.*s' + '%.*s': expected both parts and their "
                            "concatenation in model.vocab",
                            i, (int)(a_len < 60 ? a_len : 60), a, (int)(b_len < 60 ? b_len : 60),
                            b);
        tok_pairmap_put_impl(&t->merges, ia, ib, (int32_t)i, im);
    }
    return 0;
}

static int load_root(loader *L, json_t *root)
{
    struct tokenizer *t = L->t;
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model))
        return fail(L, QS_EFORMAT, "no \"model\" object (expected a Hugging Face tokenizer.json)");
    const char *mt = str_of(model, "type");
    if (mt && strcmp(mt, "BPE"))
        return diag_set(L->d, QS_EUNSUPPORTED, L->path, -1,
                        "model.type '%.60s' is not supported (expected BPE)", mt);
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab) || !json_is_array(merges))
        return fail(L, QS_EFORMAT,
                    "model.vocab (object) and model.merges (array) are required for BPE");
    int saw_bytelevel = 0, rc;
    if ((rc = parse_pretok(L, root, &saw_bytelevel)) || (rc = parse_normalizer(L, root)))
        return rc;
    if (!strcmp(type_of(json_object_get(root, "decoder")), "ByteLevel"))
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
    json_t *added = json_object_get(root, "added_tokens");
    if ((rc = load_vocab(L, vocab, added)) != 0)
        return rc;
    if ((rc = tok_strmap_build_impl(t)) != 0)
        return fail(L, rc, "out of memory for the vocabulary index");
    if ((rc = load_merges(L, merges)) != 0)
        return rc;
    t->byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
    t->fuse_unk = json_is_true(json_object_get(model, "fuse_unk"));
    t->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    const char *unk = str_of(model, "unk_token");
    t->unk_id = unk ? tok_lookup_impl(t, unk, strlen(unk)) : -1;
    tok_byte_ids_find_impl(t);
    if (t->byte_fallback)
        for (int b = 0; b < 256; b++)
            if (t->byte_id[b] >= 0 && t->type[t->byte_id[b]] == TOK_TYPE_NORMAL)
                t->type[t->byte_id[b]] = TOK_TYPE_BYTE;
    parse_decoder(L, root);
    parse_post(L, json_object_get(root, "post_processor"));
    if (t->kind == TOK_KIND_BPE_SPM)
        tok_ms_cut_check_impl(t);
    return 0;
}

int tok_json_load_impl(struct tokenizer *t, const char *path, qs_diag *d)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return diag_set(d, QS_EFORMAT, path, jerr.line,
                        "invalid JSON: %s (expected a Hugging Face tokenizer.json)", jerr.text);
    loader L = {.t = t, .path = path, .d = d};
    for (int i = 0; i < 0x144; i++)
        L.cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++)
        L.cp_to_byte[tok_byte_to_cp_impl((uint8_t)b)] = (int16_t)b;
    int rc = json_is_object(root) ? load_root(&L, root)
                                  : fail(&L, QS_EFORMAT, "top level is not a JSON object "
                                                         "(expected a tokenizer.json)");
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
