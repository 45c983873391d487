/* tokenizer.c: the tokenizer API (include/qs/tokenizer.h) over its backends.
 *
 * Encoding follows HF tokenizers' order of work:
 *   1. added/special tokens are found in the raw text first (longest match at
 *      the leftmost position; lstrip/rstrip swallow neighbouring whitespace),
 *   2. every stretch of text between them is encoded by the backend on its own
 *      (so "a</s>b" gets a metaspace prefix before "b", as HF does),
 *   3. BOS (and EOS) are added as tokenizer_config.json / the post-processor say.
 * Decoding maps ids back to bytes: byte-level pieces through the inverse byte map
 * (done at load), "▁" to a space, <0xXX> to its byte; one leading space is dropped
 * when the decoder strips the metaspace prefix.  Invalid UTF-8 produced by byte
 * tokens is returned as the bytes themselves (HF would print U+FFFD), so decode(encode(x)) == x.
 */
#include "qs/tokenizer.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "tok_impl.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

static int32_t find_token(const tokenizer *t, const char *s)
{
    size_t len = strlen(s);
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].len_bytes == len && !memcmp(t->arena + t->added[i].content_off, s, len))
            return t->added[i].id;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->piece_off[id] != SIZE_MAX && !strcmp(t->arena + t->piece_off[id], s))
            return id;
    return -1;
}

/* "bos_token": "<s>"  or  {"content": "<s>", ...} */
static const char *config_token(json_t *cfg, const char *key)
{
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v))
        v = json_object_get(v, "content");
    return json_string_value(v);
}

/* tokenizer_config.json "added_tokens_decoder": {"ID": {"content": ..., "special": ...}}.
 * Tokens the tokenizer file does not already list as added (typical of a
 * tokenizer.model plus chat/control tokens declared only here) are added, as
 * HF's slow tokenizers do. */
static int config_added_tokens(tokenizer *t, const qs_json_at *cfg, qs_diag *d)
{
    const char *cfg_path = cfg->file;
    qs_json_at dec = qs_json_key(cfg, "added_tokens_decoder");
    json_t *decoder = (json_t *)dec.v;
    size_t n_new = json_object_size(decoder);
    if (n_new == 0)
        return 0;
    tok_added *na = qs_realloc(t->added, ((size_t)t->n_added + n_new + 1) * sizeof *na);
    if (!na)
        return diag_set(d, QS_ENOMEM, cfg_path, -1, "out of memory for added tokens");
    t->added = na;
    const char *key;
    json_t *v;
    json_object_foreach(decoder, key, v)
    {
        char *end;
        long id = strtol(key, &end, 10);
        json_t *c = json_object_get(v, "content");
        if (*end || end == key || id < 0 || id >= t->n_vocab || !json_is_string(c))
            return qs_json_fail(&dec, key, QS_EFORMAT, d,
                                "expected an id below the vocabulary size %d with a string "
                                "\"content\"",
                                t->n_vocab);
        int known = 0;
        for (int i = 0; i < t->n_added && !known; i++)
            known = t->added[i].id == (int32_t)id;
        size_t len = json_string_length(c);
        if (known || len == 0)
            continue;
        tok_added *a = &t->added[t->n_added];
        memset(a, 0, sizeof *a);
        if (tok_arena_add_impl(t, json_string_value(c), len, &a->content_off))
            return diag_set(d, QS_ENOMEM, cfg_path, -1, "out of memory for added tokens");
        t->n_added++;
        a->id = (int32_t)id;
        a->len_bytes = (uint32_t)len;
        a->special = json_is_true(json_object_get(v, "special"));
        a->lstrip = json_is_true(json_object_get(v, "lstrip"));
        a->rstrip = json_is_true(json_object_get(v, "rstrip"));
        a->single_word = json_is_true(json_object_get(v, "single_word"));
        if (t->type[id] != TOK_TYPE_BYTE)
            t->type[id] = a->special ? TOK_TYPE_CONTROL : TOK_TYPE_USER;
    }
    return tok_added_index_impl(t) ? diag_set(d, QS_ENOMEM, cfg_path, -1, "out of memory") : 0;
}

static int read_config(tokenizer *t, const char *cfg_path, qs_diag *d)
{
    json_t *cfg;
    int rc = qs_json_load_file(cfg_path, 0, &cfg, d);
    if (rc)
        return rc;
    qs_json_at r = qs_json_root(cfg, cfg_path, -1);
    rc = config_added_tokens(t, &r, d);
    const char *keys[2] = {"bos_token", "eos_token"};
    int32_t *dst[2] = {&t->bos_id, &t->eos_id};
    for (int k = 0; k < 2 && !rc; k++) {
        const char *name = config_token(cfg, keys[k]);
        if (!name)
            continue;
        int32_t id = find_token(t, name);
        if (id < 0)
            rc = qs_json_fail(&r, keys[k], QS_EFORMAT, d, "'%.100s' is not in the vocabulary",
                              name);
        *dst[k] = id;
    }
    if (!rc)
        rc = qs_json_bool_or(&r, "add_bos_token", t->add_bos, &t->add_bos, d);
    if (!rc)
        rc = qs_json_bool_or(&r, "add_eos_token", t->add_eos, &t->add_eos, d);
    json_decref(cfg);
    return rc;
}

/* When no tokenizer_config.json names them, well-known spellings. */
static void default_specials(tokenizer *t)
{
    static const char *const eos_names[] = {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>"};
    static const char *const bos_names[] = {"<s>", "<|begin_of_text|>", "<bos>"};
    for (size_t i = 0; t->eos_id < 0 && i < sizeof eos_names / sizeof *eos_names; i++)
        t->eos_id = find_token(t, eos_names[i]);
    for (size_t i = 0; t->bos_id < 0 && i < sizeof bos_names / sizeof *bos_names; i++)
        t->bos_id = find_token(t, bos_names[i]);
}

static int resolve(const char *path, char *file, size_t file_bytes, char *dir, size_t dir_bytes,
                   qs_diag *d)
{
    if (fileio_is_dir(path)) {
        snprintf(dir, dir_bytes, "%s", path);
        if (fileio_join(file, file_bytes, path, "tokenizer.json") == 0 && fileio_exists(file))
            return 0;
        if (fileio_join(file, file_bytes, path, "tokenizer.model") == 0 && fileio_exists(file))
            return 0;
        return diag_set(d, QS_ENOTFOUND, path, -1,
                        "no tokenizer.json or tokenizer.model in this directory");
    }
    if (!fileio_exists(path))
        return diag_set(d, QS_ENOTFOUND, path, -1, "no such file (expected a tokenizer.json, a "
                                                   "tokenizer.model or a model directory)");
    if (strlen(path) >= file_bytes)
        return diag_set(d, QS_ERANGE, path, -1, "path too long");
    snprintf(file, file_bytes, "%s", path);
    const char *slash = strrchr(path, '/');
    if (slash)
        snprintf(dir, dir_bytes, "%.*s", (int)(slash - path), path);
    else
        snprintf(dir, dir_bytes, ".");
    return 0;
}

static int looks_like_json(const char *path)
{
    if (ends_with(path, ".json"))
        return 1;
    if (ends_with(path, ".model"))
        return 0;
    FILE *f = fopen(path, "rb");
    int c = f ? fgetc(f) : EOF;
    while (c == ' ' || c == '\n' || c == '\r' || c == '\t')
        c = fgetc(f);
    if (f)
        fclose(f);
    return c == '{';
}

int tokenizer_create(tokenizer **out, const char *path, qs_diag *d)
{
    *out = NULL;
    char file[1024], dir[1024], cfg[1100];
    int rc = resolve(path, file, sizeof file, dir, sizeof dir, d);
    if (rc)
        return rc;
    tokenizer *t = qs_calloc(1, sizeof *t);
    if (!t)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    snprintf(t->path, sizeof t->path, "%s", file);
    t->unk_id = t->bos_id = t->eos_id = -1;
    rc = looks_like_json(file) ? tok_json_load_impl(t, file, d) : tok_spm_load_impl(t, file, d);
    if (!rc)
        rc = tok_added_index_impl(t);
    if (!rc && fileio_join(cfg, sizeof cfg, dir, "tokenizer_config.json") == 0 &&
        fileio_exists(cfg))
        rc = read_config(t, cfg, d);
    if (rc) {
        if (rc == QS_ENOMEM && d && !d->msg[0])
            diag_set(d, rc, file, -1, "out of memory loading the tokenizer");
        tokenizer_destroy(t);
        return rc;
    }
    default_specials(t);
    if (t->bos_id < 0)
        t->add_bos = 0;
    if (t->eos_id < 0)
        t->add_eos = 0;
    t->hash = tok_hash_compute_impl(t);
    *out = t;
    return 0;
}

void tokenizer_destroy(tokenizer *t)
{
    if (!t)
        return;
    tok_free_impl(t);
    qs_free(t);
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int is_word_byte(unsigned char c)
{
    return c >= 0x80 || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
           c == '_';
}

/* Longest added token at text[pos], -1 if none. */
static int match_added(const tokenizer *t, const char *text, size_t len, size_t pos)
{
    for (int32_t i = t->added_by_byte[(unsigned char)text[pos]]; i >= 0; i = t->added_next[i]) {
        const tok_added *a = &t->added[i];
        if (a->len_bytes > len - pos || memcmp(text + pos, t->arena + a->content_off, a->len_bytes))
            continue;
        if (a->single_word && ((pos > 0 && is_word_byte((unsigned char)text[pos - 1])) ||
                               (pos + a->len_bytes < len &&
                                is_word_byte((unsigned char)text[pos + a->len_bytes]))))
            continue;
        return i;
    }
    return -1;
}

static int encode_segment(const tokenizer *t, const char *s, size_t len, int at_start,
                          tok_ids *out)
{
    if (t->kind == TOK_KIND_SPM_MODEL)
        return tok_spm_encode_impl(t, s, len, out);
    return tok_json_encode_impl(t, s, len, at_start, out);
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int add_bos, int32_t **ids,
                     size_t *n_ids, qs_diag *d)
{
    tok_ids out = {0};
    int rc = 0;
    *ids = NULL;
    *n_ids = 0;
    int specials = add_bos != TOKENIZER_BOS_NO; /* HF add_special_tokens */
    if (add_bos == TOKENIZER_BOS_DEFAULT)
        add_bos = t->add_bos;
    if (add_bos && t->bos_id >= 0)
        rc = tok_ids_push_impl(&out, t->bos_id);
    size_t seg = 0;
    for (size_t pos = 0; pos < len && !rc;) {
        int a = t->n_added ? match_added(t, text, len, pos) : -1;
        if (a < 0) {
            pos++;
            continue;
        }
        const tok_added *ad = &t->added[a];
        size_t seg_end = pos, next = pos + ad->len_bytes;
        if (ad->lstrip)
            while (seg_end > seg && is_ws(text[seg_end - 1]))
                seg_end--;
        if (ad->rstrip)
            while (next < len && is_ws(text[next]))
                next++;
        rc = encode_segment(t, text + seg, seg_end - seg, seg == 0, &out);
        if (!rc)
            rc = tok_ids_push_impl(&out, ad->id);
        pos = seg = next;
    }
    if (!rc)
        rc = encode_segment(t, text + seg, len - seg, seg == 0, &out);
    if (!rc && t->add_eos && specials && t->eos_id >= 0)
        rc = tok_ids_push_impl(&out, t->eos_id);
    if (rc) {
        qs_free(out.v);
        if (rc == QS_EUNSUPPORTED)
            return diag_set(d, rc, t->path, -1, "text has a character that is not in the "
                                                "vocabulary and the model has no unk or byte fallback");
        return diag_set(d, rc, t->path, -1, "out of memory while encoding %zu bytes", len);
    }
    *ids = out.v ? out.v : qs_malloc(sizeof(int32_t));
    if (!*ids)
        return diag_set(d, QS_ENOMEM, t->path, -1, "out of memory");
    *n_ids = out.n;
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                        : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Bytes one id decodes to, into dst (which has room for raw_len * 1 + 4). */
static size_t decode_one(const tokenizer *t, int32_t id, char *dst)
{
    const char *piece = t->arena + (t->piece_off[id] == SIZE_MAX ? 0 : t->piece_off[id]);
    if (t->type[id] == TOK_TYPE_BYTE && strlen(piece) == 6 && hexval(piece[3]) >= 0 &&
        hexval(piece[4]) >= 0) {
        dst[0] = (char)(hexval(piece[3]) * 16 + hexval(piece[4]));
        return 1;
    }
    const char *raw = tok_raw(t, id);
    size_t n = t->raw_len[id];
    if (t->kind == TOK_KIND_BYTELEVEL || t->type[id] == TOK_TYPE_CONTROL) {
        memcpy(dst, raw, n);
        return n;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 3 <= n && !memcmp(raw + i, "\xE2\x96\x81", 3)) {
            dst[o++] = ' ';
            i += 2;
        } else {
            dst[o++] = raw[i];
        }
    }
    return o;
}

int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n_ids, int skip_special,
                     char **text, size_t *len, qs_diag *d)
{
    *text = NULL;
    *len = 0;
    size_t total = 1;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return diag_set(d, QS_ERANGE, t->path, -1,
                            "token id %ld (position %zu) is outside the vocabulary [0, %d)",
                            (long)ids[i], i, t->n_vocab);
        total += t->raw_len[ids[i]] + 1;
    }
    char *buf = qs_malloc(total);
    if (!buf)
        return diag_set(d, QS_ENOMEM, t->path, -1, "out of memory decoding %zu ids", n_ids);
    size_t o = 0;
    for (size_t i = 0; i < n_ids; i++) {
        int32_t id = ids[i];
        if (skip_special && (t->type[id] == TOK_TYPE_CONTROL || t->type[id] == TOK_TYPE_UNKNOWN))
            continue;
        o += decode_one(t, id, buf + o);
    }
    size_t start = (t->decode_strip_space && o > 0 && buf[0] == ' ') ? 1 : 0;
    memmove(buf, buf + start, o - start);
    o -= start;
    buf[o] = 0;
    *text = buf;
    *len = o;
    return 0;
}

int tokenizer_vocab_size(const tokenizer *t) { return t->n_vocab; }
int32_t tokenizer_bos_id(const tokenizer *t) { return t->bos_id; }
int32_t tokenizer_eos_id(const tokenizer *t) { return t->eos_id; }
int tokenizer_adds_bos(const tokenizer *t) { return t->add_bos; }
uint64_t tokenizer_hash(const tokenizer *t) { return t->hash; }

const char *tokenizer_piece(const tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_vocab || t->piece_off[id] == SIZE_MAX)
        return NULL;
    return t->arena + t->piece_off[id];
}

const char *tokenizer_kind(const tokenizer *t)
{
    static const char *const names[] = {"bpe-bytelevel", "bpe-spm", "spm-model"};
    return names[t->kind];
}
